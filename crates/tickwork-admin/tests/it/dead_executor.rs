//! The executor address cache follows the registry's expiry: an executor whose last beat is
//! older than the registry's dead-after at the moment of dispatch gets no run, however young
//! the cached list is. A real admin on SQLite on a manual clock, a real executor that beats
//! once (registered through the executor API by the test) and never again.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Api, Backend, CountingExecutor, InProcessAdmin, TestDb};
use tickwork_admin::clock::ManualClock;
use tickwork_core::run::RunState;
use tickwork_store::{Run, Store};
use tickwork_testkit::wait_until;

/// 2030-01-01T00:00:00Z.
const T0: i64 = 1_893_456_000_000;
/// The registry's dead-after of this admin.
const DEAD_AFTER: i64 = 15_000;
/// Real time allowed for the admin to act.
const WAIT: Duration = Duration::from_secs(30);

/// The admin's heartbeat, lease and registry sweep run on the manual clock at intervals far
/// beyond the moves of this test: the fence stays open, and no sweep empties the cache.
const ADMIN: &str = r#"
[cluster]
heartbeat_interval_ms = 1800000
node_dead_after_ms = 21600000
lease_ttl_ms = 3600000

[registry]
dead_after_ms = 15000
sweep_interval_ms = 86400000
"#;

/// Records one registry beat of `address` for `app` through the executor API, as an executor
/// does, at the admin's (manual) time.
async fn beat(admin: &str, token: &str, app: &str, address: &str) {
    let answer: Value = reqwest::Client::new()
        .post(format!("{admin}/api/registry"))
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .json(&json!({ "registryGroup": "EXECUTOR", "registryKey": app, "registryValue": address }))
        .send()
        .await
        .expect("registry call")
        .json()
        .await
        .expect("registry answer");
    assert_eq!(answer["code"], 200, "{answer}");
}

/// Triggers a run of `job` now and waits until its dispatch is decided: sent (dispatched or
/// already final with its dispatch recorded) or refused.
async fn fire(api: &Api, store: &dyn Store, job: i64) -> Run {
    let run = api.post(&format!("jobs/{job}/trigger"), json!({})).await["id"]
        .as_i64()
        .expect("run id");
    wait_until("the run's dispatch to be decided", WAIT, || async move {
        let run = store.run_get(run).await.ok()?;
        // Past the send fence too: `sending` is not yet decided.
        (!matches!(run.state, RunState::Planned | RunState::Sending)).then_some(run)
    })
    .await
}

/// The bug: the cache kept an executor's address until the cache time ran out, and runs went
/// to an executor the registry had counted dead for seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_address_of_an_executor_dead_past_dead_after_gets_no_run() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let clock = ManualClock::new(T0);
    let admin = InProcessAdmin::start_with_clock(&db, "cache", ADMIN, clock.clock()).await;
    let store = admin.store.clone();
    let api = Api::new(&admin.address);
    // An executor that does not register by itself: its only beat is the test's.
    let executor = CountingExecutor::start("silent", &[], &db.token).await;
    let group = api.group("silent").await;
    let job = api
        .post(
            "jobs",
            json!({ "group_id": group, "handler": "count", "route_strategy": "FIRST" }),
        )
        .await["id"]
        .as_i64()
        .expect("job id");
    beat(&admin.address, &db.token, "silent", &executor.address()).await;

    // Live: the cache reads the executor and the run goes to it.
    let first = fire(&api, &*store, job).await;
    assert_eq!(
        first.executor_address,
        Some(executor.address()),
        "{first:?}"
    );
    wait_until("the executor to run the first run", WAIT, || async {
        executor.count(first.id) == 1
    })
    .await;

    // At exactly dead-after since its beat it still counts as live.
    clock.set(T0 + DEAD_AFTER);
    let second = fire(&api, &*store, job).await;
    assert_eq!(
        second.executor_address,
        Some(executor.address()),
        "{second:?}"
    );

    // A millisecond later it is dead, with no beat since: no run goes to it.
    clock.set(T0 + DEAD_AFTER + 1);
    let third = fire(&api, &*store, job).await;
    assert_eq!(third.state, RunState::Failed, "{third:?}");
    assert_eq!(third.executor_address, None, "{third:?}");
    let msg = third.trigger_msg.clone().unwrap_or_default();
    assert!(msg.contains("no executor"), "{third:?}");
    assert_eq!(executor.count(third.id), 0);

    // A new beat makes it live again.
    beat(&admin.address, &db.token, "silent", &executor.address()).await;
    let fourth = fire(&api, &*store, job).await;
    assert_eq!(
        fourth.executor_address,
        Some(executor.address()),
        "{fourth:?}"
    );

    admin.shutdown().await;
    db.drop_database().await;
}
