//! Executor groups, their tokens and their registry.

use super::*;

pub(crate) async fn group_crud(ctx: Ctx) {
    let store = &*ctx.store;
    let created = store
        .group_create(GroupNew {
            app_name: "orders".to_owned(),
            title: "Order executors".to_owned(),
            address_mode: AddressMode::Manual,
            addresses: vec![
                "http://10.0.0.2:9999".to_owned(),
                "http://10.0.0.1:9999".to_owned(),
            ],
            now: NOW,
        })
        .await
        .unwrap();
    assert!(created.id > 0);
    assert_eq!(
        created.addresses,
        ["http://10.0.0.2:9999", "http://10.0.0.1:9999"]
    );
    assert_eq!(store.group_get(created.id).await.unwrap(), created);
    assert_eq!(
        store.group_get_by_app_name("orders").await.unwrap(),
        created
    );
    let other = group(store, "billing").await;
    assert_eq!(
        store.groups_list().await.unwrap(),
        vec![created.clone(), other.clone()]
    );

    let updated = store
        .group_update(GroupUpdate {
            id: created.id,
            app_name: "orders-v2".to_owned(),
            title: "Orders, again".to_owned(),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now: NOW + 5,
        })
        .await
        .unwrap();
    assert_eq!(updated.app_name, "orders-v2");
    assert_eq!(updated.title, "Orders, again");
    assert_eq!(updated.address_mode, AddressMode::Auto);
    assert!(updated.addresses.is_empty());
    assert_eq!((updated.created_at, updated.updated_at), (NOW, NOW + 5));
    assert_not_found(store.group_get_by_app_name("orders").await);

    store.group_delete(created.id).await.unwrap();
    assert_not_found(store.group_get(created.id).await);
    assert_not_found(store.group_delete(created.id).await);
    assert_eq!(store.groups_list().await.unwrap(), vec![other]);
    assert_not_found(
        store
            .group_update(GroupUpdate {
                id: created.id,
                app_name: "ghost".to_owned(),
                title: String::new(),
                address_mode: AddressMode::Auto,
                addresses: Vec::new(),
                now: NOW,
            })
            .await,
    );
}

pub(crate) async fn group_conflicts_and_validation(ctx: Ctx) {
    let store = &*ctx.store;
    let demo = group(store, "demo").await;
    let dup = GroupNew {
        app_name: "demo".to_owned(),
        title: "again".to_owned(),
        address_mode: AddressMode::Auto,
        addresses: Vec::new(),
        now: NOW,
    };
    assert_conflict(store.group_create(dup.clone()).await);
    // Names compare byte for byte on every backend (MySQL's default collation would not).
    let upper = group(store, "Demo").await;
    assert_conflict(
        store
            .group_update(GroupUpdate {
                id: upper.id,
                app_name: "demo".to_owned(),
                title: String::new(),
                address_mode: AddressMode::Auto,
                addresses: Vec::new(),
                now: NOW,
            })
            .await,
    );
    assert_invalid(
        store
            .group_create(GroupNew {
                app_name: " ".to_owned(),
                ..dup.clone()
            })
            .await,
    );
    assert_invalid(
        store
            .group_create(GroupNew {
                app_name: "x".repeat(65),
                ..dup.clone()
            })
            .await,
    );
    assert_invalid(
        store
            .group_create(GroupNew {
                app_name: "commas".to_owned(),
                addresses: vec!["http://a,http://b".to_owned()],
                ..dup.clone()
            })
            .await,
    );
    // A group with jobs stays.
    store.job_create(job_new(demo.id, "pinned")).await.unwrap();
    assert_conflict(store.group_delete(demo.id).await);
    assert_eq!(store.group_get(demo.id).await.unwrap(), demo);
}

pub(crate) async fn registry_heartbeat_upserts_and_lists_sorted(ctx: Ctx) {
    let store = &*ctx.store;
    for (address, at) in [
        ("http://b:1", NOW),
        ("http://a:1", NOW + 1),
        ("http://c:1", NOW + 2),
    ] {
        store
            .registry_heartbeat(RegistryBeat {
                app_name: "app".to_owned(),
                address: address.to_owned(),
                now: at,
            })
            .await
            .unwrap();
    }
    store
        .registry_heartbeat(RegistryBeat {
            app_name: "other".to_owned(),
            address: "http://z:1".to_owned(),
            now: NOW,
        })
        .await
        .unwrap();
    // A repeated beat moves the row; it does not add one.
    store
        .registry_heartbeat(RegistryBeat {
            app_name: "app".to_owned(),
            address: "http://b:1".to_owned(),
            now: NOW + 30_000,
        })
        .await
        .unwrap();

    // Each live row with its last beat, by address.
    let live = |since| async move {
        store
            .registry_live_entries(LiveQuery {
                app_name: "app".to_owned(),
                alive_since: since,
            })
            .await
            .unwrap()
            .into_iter()
            .map(|e| {
                assert_eq!(e.app_name, "app");
                (e.address, e.updated_at)
            })
            .collect::<Vec<_>>()
    };
    let at = |address: &str, beat: i64| (address.to_owned(), beat);
    assert_eq!(
        live(NOW).await,
        [
            at("http://a:1", NOW + 1),
            at("http://b:1", NOW + 30_000),
            at("http://c:1", NOW + 2)
        ]
    );
    assert_eq!(
        live(NOW + 2).await,
        [at("http://b:1", NOW + 30_000), at("http://c:1", NOW + 2)]
    );
    assert_eq!(live(NOW + 30_000).await, [at("http://b:1", NOW + 30_000)]);
    assert!(live(NOW + 30_001).await.is_empty());

    let all = store.registry_list().await.unwrap();
    let keys: Vec<(&str, &str, i64)> = all
        .iter()
        .map(|e| (e.app_name.as_str(), e.address.as_str(), e.updated_at))
        .collect();
    assert_eq!(
        keys,
        [
            ("app", "http://a:1", NOW + 1),
            ("app", "http://b:1", NOW + 30_000),
            ("app", "http://c:1", NOW + 2),
            ("other", "http://z:1", NOW),
        ]
    );
    assert_invalid(
        store
            .registry_heartbeat(RegistryBeat {
                app_name: "app".to_owned(),
                address: String::new(),
                now: NOW,
            })
            .await,
    );
}

pub(crate) async fn registry_remove_and_sweep(ctx: Ctx) {
    let store = &*ctx.store;
    for (address, at) in [
        ("http://old:1", NOW),
        ("http://new:1", NOW + 60_000),
        ("http://gone:1", NOW),
    ] {
        store
            .registry_heartbeat(RegistryBeat {
                app_name: "app".to_owned(),
                address: address.to_owned(),
                now: at,
            })
            .await
            .unwrap();
    }
    let key = RegistryKey {
        app_name: "app".to_owned(),
        address: "http://gone:1".to_owned(),
    };
    assert!(store.registry_remove(key.clone()).await.unwrap());
    assert!(!store.registry_remove(key).await.unwrap());
    assert_eq!(store.registry_sweep(NOW + 1).await.unwrap(), 1);
    assert_eq!(store.registry_sweep(NOW + 1).await.unwrap(), 0);
    let live = store
        .registry_live_entries(LiveQuery {
            app_name: "app".to_owned(),
            alive_since: 0,
        })
        .await
        .unwrap();
    let addresses: Vec<&str> = live.iter().map(|e| e.address.as_str()).collect();
    assert_eq!(addresses, ["http://new:1"]);
}

/// Each group holds its own executor token: set, rotated (the old one gone at once), kept by
/// an update of the group's other fields, cleared; bad tokens change nothing.
pub(crate) async fn group_token_is_per_group_and_rotates_at_once(ctx: Ctx) {
    let store = &*ctx.store;
    let a = group(store, "tokens-a").await;
    let b = group(store, "tokens-b").await;
    assert_eq!(a.access_token, None, "a new group uses the global token");
    let first = "a-first-token-0123456789abcdef".to_owned();
    let set = store
        .group_set_token(GroupTokenSet {
            id: a.id,
            token: Some(first.clone()),
            now: NOW + 1,
        })
        .await
        .unwrap();
    assert_eq!(set.access_token.as_deref(), Some(first.as_str()));
    assert_eq!(set.updated_at, NOW + 1);
    assert_eq!(store.group_get(a.id).await.unwrap(), set);
    assert_eq!(store.group_get_by_app_name("tokens-a").await.unwrap(), set);
    assert_eq!(store.group_get(b.id).await.unwrap().access_token, None);
    assert!(
        !format!("{set:?}").contains(&first),
        "a group's debug form shows its token: {set:?}"
    );

    // Rotation replaces the token at once.
    let second = "a-second-token-0123456789abcdef".to_owned();
    store
        .group_set_token(GroupTokenSet {
            id: a.id,
            token: Some(second.clone()),
            now: NOW + 2,
        })
        .await
        .unwrap();
    let listed = store.groups_list().await.unwrap();
    assert_eq!(listed[0].access_token.as_deref(), Some(second.as_str()));
    assert_eq!(listed[1].access_token, None);

    // Editing the group keeps its token.
    let updated = store
        .group_update(GroupUpdate {
            id: a.id,
            app_name: "tokens-a2".to_owned(),
            title: "renamed".to_owned(),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now: NOW + 3,
        })
        .await
        .unwrap();
    assert_eq!(updated.access_token.as_deref(), Some(second.as_str()));

    // Bad tokens and unknown groups change nothing.
    for bad in ["short", "has a space in the middle!", &"x".repeat(129), ""] {
        assert_invalid(
            store
                .group_set_token(GroupTokenSet {
                    id: a.id,
                    token: Some(bad.to_owned()),
                    now: NOW + 4,
                })
                .await,
        );
    }
    assert_not_found(
        store
            .group_set_token(GroupTokenSet {
                id: a.id + b.id + 100,
                token: Some(first.clone()),
                now: NOW + 4,
            })
            .await,
    );
    assert_eq!(store.group_get(a.id).await.unwrap(), updated);

    // Cleared: back to the global token.
    let cleared = store
        .group_set_token(GroupTokenSet {
            id: a.id,
            token: None,
            now: NOW + 5,
        })
        .await
        .unwrap();
    assert_eq!(cleared.access_token, None);
    // Clearing again is no error (MySQL reports no changed row).
    store
        .group_set_token(GroupTokenSet {
            id: a.id,
            token: None,
            now: NOW + 5,
        })
        .await
        .unwrap();
}
