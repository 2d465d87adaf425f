//! Admin nodes and leases.

use super::*;

pub(crate) async fn node_heartbeat_and_list(ctx: Ctx) {
    let store = &*ctx.store;
    for (id, at) in [("node-b", NOW), ("node-a", NOW + 1), ("node-b", NOW + 5000)] {
        store
            .node_heartbeat(NodeBeat {
                id: id.to_owned(),
                address: format!("http://{id}:8080"),
                now: at,
            })
            .await
            .unwrap();
    }
    let nodes = store.nodes_list().await.unwrap();
    let view: Vec<(&str, i64, i64)> = nodes
        .iter()
        .map(|n| (n.id.as_str(), n.started_at, n.heartbeat_at))
        .collect();
    assert_eq!(
        view,
        [("node-a", NOW + 1, NOW + 1), ("node-b", NOW, NOW + 5000)]
    );
}

pub(crate) async fn lease_acquire_renew_and_steal_after_expiry(ctx: Ctx) {
    let store = &*ctx.store;
    let request = |node: &str, now: i64| LeaseRequest {
        name: "maintenance".to_owned(),
        node: node.to_owned(),
        ttl_ms: 10_000,
        now,
    };
    assert!(store.lease_acquire(request("a", NOW)).await.unwrap());
    assert!(!store.lease_acquire(request("b", NOW + 1)).await.unwrap());
    // Renewing, even twice at the same instant, keeps it.
    assert!(store.lease_acquire(request("a", NOW + 5000)).await.unwrap());
    assert!(store.lease_acquire(request("a", NOW + 5000)).await.unwrap());
    // Still held at the old expiry, since the renewal moved it.
    assert!(
        !store
            .lease_acquire(request("b", NOW + 10_000))
            .await
            .unwrap()
    );
    assert!(
        store
            .lease_acquire(request("b", NOW + 15_000))
            .await
            .unwrap()
    );
    assert!(
        !store
            .lease_acquire(request("a", NOW + 15_001))
            .await
            .unwrap()
    );

    let key = |node: &str| LeaseKey {
        name: "maintenance".to_owned(),
        node: node.to_owned(),
    };
    assert!(!store.lease_release(key("a")).await.unwrap());
    assert!(store.lease_release(key("b")).await.unwrap());
    assert!(
        store
            .lease_acquire(request("a", NOW + 15_002))
            .await
            .unwrap()
    );
    assert_invalid(
        store
            .lease_acquire(LeaseRequest {
                ttl_ms: 0,
                ..request("a", NOW)
            })
            .await,
    );

    // Many nodes at once, on a free lease: exactly one wins.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = ctx.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .lease_acquire(LeaseRequest {
                    name: "contended".to_owned(),
                    node: format!("n{i}"),
                    ttl_ms: 10_000,
                    now: NOW,
                })
                .await
                .unwrap()
        }));
    }
    let mut winners = 0;
    for task in tasks {
        winners += usize::from(task.await.unwrap());
    }
    assert_eq!(winners, 1);
}

pub(crate) async fn node_leave_and_sweep(ctx: Ctx) {
    let store = &*ctx.store;
    beat(store, "a", NOW).await;
    beat(store, "b", NOW - 100_000).await;
    beat(store, "c", NOW - 10).await;
    assert!(store.node_leave("a").await.unwrap());
    assert!(!store.node_leave("a").await.unwrap());
    assert_eq!(store.nodes_sweep(NOW - 50_000).await.unwrap(), 1);
    let ids: Vec<String> = store
        .nodes_list()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(ids, ["c"]);
    // A node that left and comes back is simply new again.
    beat(store, "a", NOW + 1).await;
    assert_eq!(store.nodes_list().await.unwrap().len(), 2);
}

/// A relayed pull call is taken once, by the node holding its executor only, before its
/// deadline; its answer is
/// read once; a call withdrawn before anyone took it is never taken, and one taken cannot be
/// withdrawn.
pub(crate) async fn pull_calls_are_taken_once_answered_and_collected(ctx: Ctx) {
    let store = &*ctx.store;
    let call = |to: &str, path: &str, deadline_at: i64| PullCallNew {
        address: format!("pull://{to}"),
        app: "app".to_owned(),
        path: path.to_owned(),
        body: r#"{"jobId":1}"#.to_owned(),
        rank: 7,
        now: NOW,
        deadline_at,
    };
    let take = |instance: &str, now: i64| PullCallsTake {
        addresses: vec![format!("pull://{instance}"), "pull://elsewhere".to_owned()],
        now,
        stale_before: 0,
        limit: 100,
    };
    let run = store
        .pull_call_put(call("b", "/run", NOW + 3000))
        .await
        .unwrap();
    let other = store
        .pull_call_put(call("c", "/kill", NOW + 3000))
        .await
        .unwrap();
    let late = store
        .pull_call_put(call("b", "/log", NOW + 10))
        .await
        .unwrap();
    let withdrawn = store
        .pull_call_put(call("b", "/beat", NOW + 3000))
        .await
        .unwrap();
    assert_eq!(
        store.pull_call_collect(run).await.unwrap(),
        PullCallState::Waiting
    );
    assert_eq!(
        store.pull_call_withdraw(withdrawn).await.unwrap(),
        PullCallState::Withdrawn
    );

    let taken = store.pull_calls_take(take("b", NOW + 100)).await.unwrap();
    let ids: Vec<i64> = taken.iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [run],
        "not c's call, not one past its deadline, not a withdrawn one"
    );
    assert_eq!(taken[0].path, "/run");
    assert_eq!(taken[0].body, r#"{"jobId":1}"#);
    assert_eq!(taken[0].deadline_at, NOW + 3000);
    assert_eq!(taken[0].rank, 7);
    assert!(
        store
            .pull_calls_take(take("b", NOW + 200))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.pull_call_withdraw(run).await.unwrap(),
        PullCallState::Taken
    );

    assert!(
        store
            .pull_call_answer(PullCallAnswer {
                id: run,
                answer: "ok".to_owned(),
                now: NOW + 300
            })
            .await
            .unwrap()
    );
    assert!(
        !store
            .pull_call_answer(PullCallAnswer {
                id: run,
                answer: "again".to_owned(),
                now: NOW + 301
            })
            .await
            .unwrap()
    );
    assert_eq!(
        store.pull_call_collect(run).await.unwrap(),
        PullCallState::Answered("ok".to_owned())
    );
    assert_eq!(
        store.pull_call_collect(run).await.unwrap(),
        PullCallState::Withdrawn
    );

    // Stale calls go with the next take of any node.
    let stale = PullCallsTake {
        stale_before: NOW + 1,
        ..take("c", NOW + 400)
    };
    assert!(store.pull_calls_take(stale).await.unwrap().is_empty());
    for id in [other, late] {
        assert_eq!(
            store.pull_call_collect(id).await.unwrap(),
            PullCallState::Withdrawn
        );
    }
}

/// PostgreSQL notifies written and answered pull calls; the other databases have no
/// notifications (their nodes poll).
pub(crate) async fn pull_calls_are_notified_where_the_database_can(ctx: Ctx) {
    let store = &*ctx.store;
    let Some(mut wakes) = store.pull_wakeups().await.unwrap() else {
        assert_ne!(store.backend(), "postgres", "PostgreSQL notifies");
        return;
    };
    let id = store
        .pull_call_put(PullCallNew {
            address: "pull://noted".to_owned(),
            app: "app".to_owned(),
            path: "/beat".to_owned(),
            body: "null".to_owned(),
            rank: 0,
            now: NOW,
            deadline_at: NOW + 3000,
        })
        .await
        .unwrap();
    assert_eq!(
        next_wake(&mut wakes).await,
        PullWake::Call("pull://noted".to_owned())
    );
    let take = PullCallsTake {
        addresses: vec!["pull://noted".to_owned()],
        now: NOW + 1,
        stale_before: 0,
        limit: 10,
    };
    assert_eq!(store.pull_calls_take(take).await.unwrap().len(), 1);
    let answer = PullCallAnswer {
        id,
        answer: "{}".to_owned(),
        now: NOW + 2,
    };
    assert!(store.pull_call_answer(answer).await.unwrap());
    assert_eq!(next_wake(&mut wakes).await, PullWake::Answer(id));
}

async fn next_wake(wakes: &mut tokio::sync::mpsc::Receiver<PullWake>) -> PullWake {
    tokio::time::timeout(std::time::Duration::from_secs(30), wakes.recv())
        .await
        .expect("a notification in time")
        .expect("the listener is open")
}
