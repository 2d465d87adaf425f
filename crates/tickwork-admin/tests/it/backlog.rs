//! Overload: when more is due than an admin can send, its claim waits for the pipeline to
//! drain instead of queueing runs in memory, and the fires that waited too long follow their
//! job's misfire policy once the executor is back. A real admin on SQLite; the executor is a
//! socket that takes `/run` requests and never answers, until the test lets them fail.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use support::{Api, Backend, InProcessAdmin, TestDb, runs_of};
use tickwork_core::run::RunState;
use tickwork_testkit::{wait_until, wait_until_sync};

const MAX_BACKLOG: usize = 30;
const CLAIM_LIMIT: usize = 10;
const JOBS: usize = 60;

/// Two dispatch slots, a small backlog and small claim rounds; a call waits a minute for its
/// answer, so the stuck executor holds both slots until the test lets go.
const ADMIN: &str = r#"
[scheduler]
max_backlog = 30
claim_limit = 10
misfire_threshold_ms = 1000

[dispatch]
concurrency = 2
slow_concurrency = 1
executor_timeout_ms = 60000
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stuck_executor_defers_the_claim_instead_of_queueing_runs_in_memory() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    // Takes connections and reads nothing: every `/run` waits for an answer.
    let stuck = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let stuck_address = format!("http://{}", stuck.local_addr().expect("address"));
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = stuck.accept().await {
            held.push(socket);
        }
    });
    let admin = InProcessAdmin::start(&db, "overloaded", ADMIN).await;
    let api = Api::new(&admin.address);
    let group = api
        .post(
            "groups",
            json!({
                "app_name": "stuck",
                "title": "stuck",
                "address_mode": "manual",
                "addresses": [stuck_address],
            }),
        )
        .await["id"]
        .as_i64()
        .expect("group id");
    api.every_second_jobs(group, JOBS).await;

    // Without the bound the backlog grows by sixty runs a second; with it, it stays at the
    // bound plus what one claim round may add (each job's fires of the look-ahead).
    let scheduler = &admin.admin.scheduler;
    let stats = scheduler.stats();
    // A claim round adds each of its jobs' fires of the 3 s look-ahead (at most four); up to
    // three runs a lane are in flight or waiting for a slot, outside the backlog.
    let most_one_round = CLAIM_LIMIT * 4;
    let in_flight = 2 + 1 + 2;
    let mut peak = 0;
    wait_until_sync(
        "claims deferred for a while",
        Duration::from_secs(30),
        || {
            peak = peak.max(scheduler.waiting().backlog());
            (stats.claims_deferred.load(Ordering::Relaxed) >= 100).then_some(())
        },
    )
    .await;
    assert!(
        peak <= MAX_BACKLOG + most_one_round,
        "backlog reached {peak} (bound {MAX_BACKLOG}, a claim round adds at most {most_one_round})"
    );
    let claimed = stats.runs_claimed.load(Ordering::Relaxed) as usize;
    assert!(
        claimed <= MAX_BACKLOG + most_one_round + in_flight,
        "claimed {claimed} runs while the executor held every call"
    );

    // The executor fails its calls: the pipeline drains, the claim goes on, and the fires
    // that waited longer than the misfire threshold are recorded as misfired.
    holder.abort();
    let store = admin.store.clone();
    let misfired = wait_until(
        "late fires recorded as misfired",
        Duration::from_secs(30),
        || {
            let store = store.clone();
            async move {
                let runs = runs_of(&*store, None).await;
                let n = runs
                    .iter()
                    .filter(|r| r.state == RunState::Misfired)
                    .count();
                (n > 0).then_some(n)
            }
        },
    )
    .await;
    assert!(stats.runs_misfired.load(Ordering::Relaxed) as usize >= misfired);
    admin.shutdown().await;
    db.drop_database().await;
}
