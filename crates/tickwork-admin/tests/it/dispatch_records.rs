//! An accepted run's dispatch record waits for the run's callback (`dispatch.record_hold_ms`):
//! a callback within the hold is written with the record in one update, and a run still going
//! when the hold ends is recorded `dispatched` on its own. A real admin on SQLite and a real
//! executor; the store's side is the conformance test of `runs_complete_dispatched`.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Api, Backend, CountingExecutor, InProcessAdmin, TestDb};
use tickwork_testkit::wait_until;

/// A hold far beyond a callback of a run that ends at once, even on a loaded machine.
const ADMIN: &str = "[dispatch]\nrecord_hold_ms = 5000\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callback_within_the_hold_is_written_with_the_dispatch_record() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "hold-a", ADMIN).await;
    let api = Api::new(&admin.address);
    let executor =
        CountingExecutor::start("hold", std::slice::from_ref(&admin.address), &db.token).await;
    support::registered(admin.store.as_ref(), &executor.address()).await;
    let group = api.group("hold").await;
    let job = |handler: &str| {
        api.post(
            "jobs",
            json!({"group_id": group, "description": handler, "handler": handler}),
        )
    };
    let quick = job("count").await["id"].as_i64().expect("job id");
    let long = job("long").await["id"].as_i64().expect("job id");

    // Ends at once: its callback takes the held record.
    let run = api.trigger(quick).await;
    let done = api.run_reaches(run, "succeeded").await;
    assert_eq!(executor.count(run), 1);
    has_record(&done, &executor.address());
    counters_reach(&api, (1, 1)).await;

    // Still running when the hold ends: recorded on its own.
    let run = api.trigger(long).await;
    let going = api.run_reaches(run, "dispatched").await;
    has_record(&going, &executor.address());
    counters_reach(&api, (2, 1)).await;
    admin.shutdown().await;
    db.drop_database().await;
}

/// The run's dispatch record: the executor that took it, with the trigger's success.
fn has_record(run: &Value, address: &str) {
    assert_eq!(run["executor_address"], address, "{run}");
    assert_eq!(run["trigger_code"], 200, "{run}");
    assert!(run["dispatched_at"].as_i64().is_some(), "{run}");
}

/// Waits until the runs dispatched, and of them those written with their result, are `want`
/// (the counters follow the commit).
async fn counters_reach(api: &Api, want: (u64, u64)) {
    wait_until("the dispatch counters", Duration::from_secs(30), || async {
        let now = counters(api).await;
        if now == want { Ok(()) } else { Err(now) }
    })
    .await;
}

/// Runs dispatched, and of them those written with their result, from `/metrics`.
async fn counters(api: &Api) -> (u64, u64) {
    let (status, text) = api.get("/metrics").await;
    assert_eq!(status, 200, "{text}");
    let read = |name: &str| -> u64 {
        support::counter(&text, name).unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    };
    (
        read("tickwork_runs_dispatched_total"),
        read("tickwork_runs_dispatched_with_result_total"),
    )
}
