//! Users, sessions and API tokens.

use super::*;

fn user_new(name: &str, role: UserRole, groups: Vec<i64>) -> UserNew {
    UserNew {
        username: name.to_owned(),
        password_hash: format!("$argon2id$v=19$m=19456,t=2,p=1$salt-of-{name}$hash"),
        role,
        group_ids: groups,
        locale: None,
        now: NOW,
    }
}

pub(crate) async fn users_create_update_password_and_list(ctx: Ctx) {
    let store = &*ctx.store;
    assert_eq!(store.users_count().await.unwrap(), 0);
    let g = group(store, "users").await;
    let admin = store
        .user_create(user_new("admin", UserRole::Admin, vec![]))
        .await
        .unwrap();
    let op = store
        .user_create(user_new("Olga", UserRole::Operator, vec![g.id]))
        .await
        .unwrap();
    assert_eq!(store.users_count().await.unwrap(), 2);
    assert_eq!(store.user_get(op.id).await.unwrap(), op);
    assert_eq!(store.user_get_by_username("Olga").await.unwrap(), op);
    // Names are exact: another case is another user.
    assert_not_found(store.user_get_by_username("olga").await);
    store
        .user_create(user_new("olga", UserRole::Viewer, vec![]))
        .await
        .expect("names differing in case are distinct");
    assert_conflict(
        store
            .user_create(user_new("admin", UserRole::Viewer, vec![]))
            .await,
    );
    assert_invalid(
        store
            .user_create(user_new("", UserRole::Viewer, vec![]))
            .await,
    );
    assert_invalid(
        store
            .user_create(user_new(&"x".repeat(65), UserRole::Viewer, vec![]))
            .await,
    );
    assert_invalid(
        store
            .user_create(user_new("neg", UserRole::Operator, vec![-1]))
            .await,
    );

    let updated = store
        .user_update(UserUpdate {
            id: op.id,
            role: UserRole::Operator,
            group_ids: vec![g.id, 7],
            locale: Some("zh-CN".to_owned()),
            disabled: true,
            now: NOW + 5,
        })
        .await
        .unwrap();
    assert_eq!(
        (
            updated.group_ids.clone(),
            updated.locale.as_deref(),
            updated.disabled,
            updated.updated_at
        ),
        (vec![g.id, 7], Some("zh-CN"), true, NOW + 5)
    );
    assert_eq!(updated.password_hash, op.password_hash);
    assert_not_found(
        store
            .user_update(UserUpdate {
                id: 999,
                role: UserRole::Viewer,
                group_ids: vec![],
                locale: None,
                disabled: false,
                now: NOW,
            })
            .await,
    );
    store
        .user_set_password(UserPassword {
            id: admin.id,
            password_hash: "$argon2id$new".to_owned(),
            now: NOW + 9,
        })
        .await
        .unwrap();
    let a = store.user_get(admin.id).await.unwrap();
    assert_eq!(
        (a.password_hash.as_str(), a.updated_at),
        ("$argon2id$new", NOW + 9)
    );
    assert_not_found(
        store
            .user_set_password(UserPassword {
                id: 999,
                password_hash: "h".to_owned(),
                now: NOW,
            })
            .await,
    );
    let names: Vec<String> = store
        .users_list()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.username)
        .collect();
    assert_eq!(names, ["admin", "Olga", "olga"]);
}

fn session(id_hash: &str, user_id: i64, at: i64) -> Session {
    Session {
        id_hash: id_hash.to_owned(),
        user_id,
        csrf_token: format!("csrf-{}", &id_hash[..id_hash.len().min(8)]),
        created_at: at,
        expires_at: at + 1000,
        last_seen_at: at,
    }
}

pub(crate) async fn sessions_touch_delete_and_purge(ctx: Ctx) {
    let store = &*ctx.store;
    let u = store
        .user_create(user_new("sam", UserRole::Viewer, vec![]))
        .await
        .unwrap();
    let v = store
        .user_create(user_new("val", UserRole::Viewer, vec![]))
        .await
        .unwrap();
    let a = "a".repeat(64);
    store.session_create(session(&a, u.id, NOW)).await.unwrap();
    assert_conflict(store.session_create(session(&a, u.id, NOW)).await);
    assert_invalid(store.session_create(session("b", 999, NOW)).await);
    assert_eq!(
        store.session_get(&a).await.unwrap(),
        Some(session(&a, u.id, NOW))
    );
    assert_eq!(store.session_get("nope").await.unwrap(), None);
    assert!(
        store
            .session_touch(SessionTouch {
                id_hash: a.clone(),
                now: NOW + 50
            })
            .await
            .unwrap()
    );
    // Never backwards.
    store
        .session_touch(SessionTouch {
            id_hash: a.clone(),
            now: NOW + 10,
        })
        .await
        .unwrap();
    assert_eq!(
        store.session_get(&a).await.unwrap().unwrap().last_seen_at,
        NOW + 50
    );
    assert!(
        !store
            .session_touch(SessionTouch {
                id_hash: "nope".to_owned(),
                now: NOW
            })
            .await
            .unwrap()
    );
    // Purge: past the absolute end, or idle since before the cut.
    store
        .session_create(session("old", u.id, NOW - 5000))
        .await
        .unwrap();
    store
        .session_create(session("idle", v.id, NOW - 500))
        .await
        .unwrap();
    store
        .session_create(session("live", v.id, NOW))
        .await
        .unwrap();
    let purged = store
        .sessions_purge_expired(SessionPurge {
            now: NOW + 100,
            idle_before: NOW - 100,
        })
        .await
        .unwrap();
    assert_eq!(purged, 2);
    assert!(store.session_get("old").await.unwrap().is_none());
    assert!(store.session_get("idle").await.unwrap().is_none());
    assert!(store.session_get("live").await.unwrap().is_some());
    assert_eq!(store.sessions_delete_for_user(v.id).await.unwrap(), 1);
    assert!(store.session_delete(&a).await.unwrap());
    assert!(!store.session_delete(&a).await.unwrap());
}

pub(crate) async fn api_tokens_create_find_touch_revoke(ctx: Ctx) {
    let store = &*ctx.store;
    let u = store
        .user_create(user_new("tess", UserRole::Operator, vec![]))
        .await
        .unwrap();
    let w = store
        .user_create(user_new("will", UserRole::Viewer, vec![]))
        .await
        .unwrap();
    let new = |name: &str, hash: &str, user_id| ApiTokenNew {
        name: name.to_owned(),
        token_hash: hash.to_owned(),
        user_id,
        now: NOW,
    };
    let t = store
        .api_token_create(new("ci", &"1".repeat(64), u.id))
        .await
        .unwrap();
    assert_eq!((t.last_used_at, t.revoked_at), (None, None));
    assert_conflict(
        store
            .api_token_create(new("again", &"1".repeat(64), u.id))
            .await,
    );
    assert_invalid(store.api_token_create(new("ghost", "2", 999)).await);
    assert_invalid(store.api_token_create(new(" ", "3", u.id)).await);
    store
        .api_token_create(new("other", "4", w.id))
        .await
        .unwrap();
    assert_eq!(
        store.api_token_find(&"1".repeat(64)).await.unwrap(),
        Some(t.clone())
    );
    assert_eq!(store.api_token_find("nope").await.unwrap(), None);
    store
        .api_token_touch(ApiTokenTouch {
            id: t.id,
            now: NOW + 7,
        })
        .await
        .unwrap();
    assert_eq!(
        store.api_token_get(t.id).await.unwrap().last_used_at,
        Some(NOW + 7)
    );
    let r = store
        .api_token_revoke(ApiTokenRevoke {
            id: t.id,
            now: NOW + 8,
        })
        .await
        .unwrap();
    assert_eq!(r.revoked_at, Some(NOW + 8));
    // Revoking again keeps the first time.
    let r = store
        .api_token_revoke(ApiTokenRevoke {
            id: t.id,
            now: NOW + 9,
        })
        .await
        .unwrap();
    assert_eq!(r.revoked_at, Some(NOW + 8));
    assert_not_found(
        store
            .api_token_revoke(ApiTokenRevoke { id: 999, now: NOW })
            .await,
    );
    assert_not_found(store.api_token_get(999).await);
    assert_eq!(store.api_tokens_list(None).await.unwrap().len(), 2);
    let mine = store.api_tokens_list(Some(w.id)).await.unwrap();
    assert_eq!((mine.len(), mine[0].name.as_str()), (1, "other"));
}

pub(crate) async fn users_are_deleted_with_their_sessions_and_tokens(ctx: Ctx) {
    let store = &*ctx.store;
    let gone = store
        .user_create(user_new("gone", UserRole::Viewer, vec![]))
        .await
        .unwrap();
    let kept = store
        .user_create(user_new("kept", UserRole::Viewer, vec![]))
        .await
        .unwrap();
    store
        .session_create(session("s-gone", gone.id, NOW))
        .await
        .unwrap();
    store
        .session_create(session("s-kept", kept.id, NOW))
        .await
        .unwrap();
    let token = |name: &str, hash: &str, user_id| ApiTokenNew {
        name: name.to_owned(),
        token_hash: hash.to_owned(),
        user_id,
        now: NOW,
    };
    let t_gone = store
        .api_token_create(token("gone", &"a".repeat(64), gone.id))
        .await
        .unwrap();
    let t_kept = store
        .api_token_create(token("kept", &"b".repeat(64), kept.id))
        .await
        .unwrap();

    store.user_delete(gone.id).await.unwrap();
    assert_not_found(store.user_get(gone.id).await);
    assert!(store.session_get("s-gone").await.unwrap().is_none());
    assert_not_found(store.api_token_get(t_gone.id).await);
    assert_eq!(store.api_token_find(&"a".repeat(64)).await.unwrap(), None);
    // The other user keeps everything.
    assert_eq!(store.user_get(kept.id).await.unwrap(), kept);
    assert!(store.session_get("s-kept").await.unwrap().is_some());
    assert_eq!(store.api_token_get(t_kept.id).await.unwrap(), t_kept);
    // A second delete, or an unknown id, is not found.
    assert_not_found(store.user_delete(gone.id).await);
    assert_not_found(store.user_delete(999).await);
    assert_eq!(store.users_count().await.unwrap(), 1);
}
