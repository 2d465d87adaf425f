//! An executor killed with SIGKILL in the middle of a run: the run becomes `lost` (after a
//! short lost-run timeout), is retried on the other executor (FAILOVER route, one retry) where
//! it succeeds, and its alarm reaches a real webhook receiver exactly once. On SQLite,
//! PostgreSQL and MariaDB, with the executor that dies a real child process.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Api, Backend, Child, CountingExecutor, InProcessAdmin, TestDb, report};
use tickwork_core::TriggerType;
use tickwork_core::run::RunState;
use tickwork_store::AlarmStatus;
use tickwork_testkit::{Receiver, wait_until};

const ADMIN: &str = r#"
[registry]
dead_after_ms = 3000
sweep_interval_ms = 1000

[monitor]
lost_run_timeout_ms = 2000
lost_run_interval_ms = 500
alarm_interval_ms = 500

[alarm]
poll_interval_ms = 200
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_run_of_a_killed_executor_is_lost_retried_and_alarmed_once() {
    scenario(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_run_of_a_killed_executor_is_lost_retried_and_alarmed_once() {
    scenario(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_run_of_a_killed_executor_is_lost_retried_and_alarmed_once() {
    scenario(Backend::MySql).await;
}

async fn scenario(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let logs = support::log_dir();
    let admin = InProcessAdmin::start(&db, "node-lost", ADMIN).await;
    let store = admin.store.clone();
    let api = Api::new(&admin.address);

    let doomed = Child::executor(&logs, "doomed", "lost", &admin.address, &db.token).await;
    support::registered(admin.store.as_ref(), &doomed.address).await;
    let group = api.group("lost").await;
    let receiver = Receiver::start().await;
    api.post(
        "alarm-channels",
        json!({"name": "ops-hook", "kind": "webhook",
               "config": {"url": receiver.url("/alarms"), "secret": "lost-secret"}}),
    )
    .await;
    let job = api
        .post(
            "jobs",
            json!({
                "group_id": group,
                "handler": "slow",
                "params": "120s",
                "route_strategy": "FAILOVER",
                "retry_count": 1,
                "alarm_channels": "ops-hook",
            }),
        )
        .await;
    let job_id = job["id"].as_i64().expect("job id");
    let run = api.post(&format!("jobs/{job_id}/trigger"), json!({})).await;
    let run_id = run["id"].as_i64().expect("run id");
    wait_until(
        "the run to reach the doomed executor",
        Duration::from_secs(30),
        || {
            let store = store.clone();
            async move {
                let run = store.run_get(run_id).await.ok()?;
                (run.state == RunState::Dispatched).then_some(())
            }
        },
    )
    .await;
    let dispatched = store.run_get(run_id).await.expect("run");
    assert_eq!(
        dispatched.executor_address.as_deref(),
        Some(doomed.address.as_str())
    );

    // The survivor comes up, then the executor running the run dies mid-run.
    let survivor =
        CountingExecutor::start("lost", std::slice::from_ref(&admin.address), &db.token).await;
    support::registered(admin.store.as_ref(), &survivor.address()).await;
    doomed.kill().await;
    let killed_at = support::now_ms();

    let lost = wait_until("the run to be lost", Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            let run = store.run_get(run_id).await.ok()?;
            run.state.is_final().then_some(run)
        }
    })
    .await;
    assert_eq!(lost.state, RunState::Lost, "{lost:?}");
    assert_eq!(lost.handle_code, 500);
    let msg = lost.handle_msg.clone().unwrap_or_default();
    assert!(
        msg.contains(&doomed.address),
        "the message names the executor: {msg}"
    );

    let retry = wait_until("the retry to succeed", Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            let runs = support::runs_of(&*store, Some(job_id)).await;
            runs.into_iter()
                .find(|r| r.parent_run_id == Some(run_id) && r.state.is_final())
        }
    })
    .await;
    assert_eq!(retry.state, RunState::Succeeded, "{retry:?}");
    assert_eq!((retry.attempt, retry.trigger_type), (1, TriggerType::Retry));
    assert_eq!(
        retry.executor_address.as_deref(),
        Some(survivor.address().as_str())
    );
    assert_eq!(survivor.count(retry.id), 1);
    assert_eq!(survivor.count(run_id), 0);

    // The alarm: delivered once for the lost run, naming the run, the executor and why; and
    // never again however often the monitors and the delivery loop run.
    let got = receiver
        .wait_for("/alarms", 1, Duration::from_secs(30))
        .await;
    let doc = got[0].json();
    assert_eq!(doc["run"]["id"], run_id);
    assert_eq!(doc["run"]["state"], "lost");
    assert_eq!(doc["job"]["id"], job_id);
    assert_eq!(doc["run"]["executor_address"], doomed.address.as_str());
    let text = doc["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&doomed.address) && text.contains("lost:"),
        "{text}"
    );
    wait_until(
        "the delivery to be recorded as sent",
        Duration::from_secs(30),
        || {
            let store = store.clone();
            async move {
                let run = store.run_get(run_id).await.ok()?;
                (run.alarm_status == AlarmStatus::Sent).then_some(())
            }
        },
    )
    .await;
    let stats = admin.admin.scheduler.stats();
    let rounds =
        |s: &tickwork_admin::Stats| s.alarm_rounds.load(std::sync::atomic::Ordering::Relaxed);
    let seen = rounds(stats);
    wait_until(
        "three more delivery rounds",
        Duration::from_secs(30),
        || async { (rounds(stats) >= seen + 3).then_some(()) },
    )
    .await;
    assert_eq!(receiver.requests("/alarms").len(), 1);
    assert_eq!(
        stats
            .alarms_queued
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(
        stats.alarms_sent.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(
        stats.runs_lost.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let runs = support::runs_of(&*store, Some(job_id)).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    let alarmed: Vec<i64> = runs
        .iter()
        .filter(|r| r.alarm_status == AlarmStatus::Sent)
        .map(|r| r.id)
        .collect();
    assert_eq!(alarmed, [run_id]);

    report(format!(
        "LOST RUN {backend:?}: lost {} ms after the kill, retry succeeded {} ms after that on \
         the other executor; one alarm delivered",
        lost.finished_at.unwrap_or_default() - killed_at,
        retry.finished_at.unwrap_or_default() - lost.finished_at.unwrap_or_default()
    ));
    let _ = survivor.executor.shutdown_and_wait().await;
    admin.shutdown().await;
    db.drop_database().await;
}
