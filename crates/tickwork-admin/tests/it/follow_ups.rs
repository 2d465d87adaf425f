//! What follows the end of a run is written with that end, so no crash or takeover loses it:
//! a fixed-delay job whose fire is misfired at a takeover fires again, and an admin process
//! that dies right after committing results leaves their retry and child runs behind, fired
//! once it is back. On SQLite, PostgreSQL and MariaDB.

use crate::support;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::json;
use support::{Backend, Child, CountingExecutor, InProcessAdmin, TestDb};
use tickwork_core::run::RunState;
use tickwork_core::{MisfireStrategy, ScheduleType, TriggerType};
use tickwork_store::{
    AddressMode, ClaimParams, GroupNew, Job, JobNew, JobPlan, JobSpec, JobStatus, PlannedFire, Run,
    RunNew, Store,
};
use tickwork_testkit::wait_until;

/// Fast beats, so that a departed node's runs are adopted within a second or two.
const ADMIN: &str = r#"
[cluster]
heartbeat_interval_ms = 200
node_dead_after_ms = 1000
lease_ttl_ms = 1000
adopt_interval_ms = 200
"#;

/// `next_fire_at` of a fixed-delay job waiting for its fire to end, as the admin writes it.
const WAITING_FOR_COMPLETION: i64 = i64::MAX;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_fixed_delay_job_whose_fire_misfired_at_adoption_fires_again() {
    fixed_delay_stall(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_fixed_delay_job_whose_fire_misfired_at_adoption_fires_again() {
    fixed_delay_stall(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_fixed_delay_job_whose_fire_misfired_at_adoption_fires_again() {
    fixed_delay_stall(Backend::MySql).await;
}

/// A node claimed a fire of a fixed-delay job a minute ago and left before firing it: the
/// job waits for that fire to end. The survivor adopts the fire, misfires it (DO_NOTHING,
/// far too late), and the job must go on firing: it used to stay waiting for ever.
async fn fixed_delay_stall(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let store = db.store().await;
    let now = support::now_ms();
    let group = store
        .group_create(GroupNew {
            app_name: "delay".to_owned(),
            title: "delay".to_owned(),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now,
        })
        .await
        .expect("group");
    let mut spec = JobSpec::new(group.id, "count");
    spec.schedule_type = ScheduleType::FixDelay;
    spec.schedule_conf = "1".to_owned();
    spec.misfire_strategy = MisfireStrategy::DoNothing;
    let fire = now - 60_000;
    let job = store
        .job_create(JobNew {
            key: "delay".to_owned(),
            spec,
            status: JobStatus::Running,
            next_fire_at: Some(fire),
            now,
        })
        .await
        .expect("job");
    // What the departed node wrote: its fire, and the job waiting for it.
    let planner = |_: &Job, _: i64| JobPlan {
        fires: vec![PlannedFire::on_time(fire, TriggerType::FixDelay)],
        next_fire_at: Some(WAITING_FOR_COMPLETION),
    };
    let claimed = store
        .jobs_claim_due(
            ClaimParams {
                node_id: "departed".to_owned(),
                now: fire,
                lookahead_ms: 0,
                limit: 10,
            },
            &planner,
        )
        .await
        .expect("claim");
    let stranded = claimed.runs[0].id;

    let admin = InProcessAdmin::start(&db, "survivor", ADMIN).await;
    let executor =
        CountingExecutor::start("delay", std::slice::from_ref(&admin.address), &db.token).await;

    let misfired = wait_until("the stranded fire's end", Duration::from_secs(30), || {
        let store = store.clone();
        async move {
            let run = store.run_get(stranded).await.ok()?;
            run.state.is_final().then_some(run)
        }
    })
    .await;
    assert_eq!(misfired.state, RunState::Misfired, "{misfired:?}");
    assert_eq!(misfired.owner_node.as_deref(), Some("survivor"));

    // The job moves on: its next fire comes a delay after the misfire, and runs.
    let next = wait_until(
        "a fire of the job after the misfired one",
        Duration::from_secs(20),
        || {
            let store = store.clone();
            async move {
                let runs = support::runs_of(&*store, Some(job.id)).await;
                runs.into_iter()
                    .find(|r| r.id != stranded && r.state == RunState::Succeeded)
            }
        },
    )
    .await;
    assert_eq!(next.trigger_type, TriggerType::FixDelay);
    assert_eq!(executor.count(next.id), 1);
    let job = store.job_get(job.id).await.expect("job");
    assert_ne!(job.next_fire_at, None);

    admin.shutdown().await;
    store.close().await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_retry_and_child_survive_an_admin_crash_right_after_the_completion_commit() {
    crash_after_completion(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_retry_and_child_survive_an_admin_crash_right_after_the_completion_commit() {
    crash_after_completion(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_retry_and_child_survive_an_admin_crash_right_after_the_completion_commit() {
    crash_after_completion(Backend::MySql).await;
}

/// A stopped job of `group_id` running `handler`.
async fn job(
    store: &dyn Store,
    group_id: i64,
    key: &str,
    handler: &str,
    edit: impl FnOnce(&mut JobSpec),
) -> Job {
    let mut spec = JobSpec::new(group_id, handler);
    edit(&mut spec);
    store
        .job_create(JobNew {
            key: key.to_owned(),
            spec,
            status: JobStatus::Stopped,
            next_fire_at: None,
            now: support::now_ms(),
        })
        .await
        .expect("job")
}

/// A run of `job_id` that `address` accepted, as `node` recorded it.
async fn dispatched(store: &dyn Store, job_id: i64, node: &str, address: &str) -> Run {
    let now = support::now_ms();
    let run = store
        .run_insert(RunNew {
            owner_node: Some(node.to_owned()),
            ..RunNew::new(job_id, TriggerType::Manual, now)
        })
        .await
        .expect("run");
    support::mark_dispatched(store, run.id, address, now).await;
    run
}

/// The follow-up of `parent` (its retry or its child's run) once it has ended.
async fn ended_follow_up(store: &dyn Store, job_id: i64, parent: i64) -> Run {
    wait_until(
        "the follow-up run to run",
        Duration::from_secs(30),
        || async move {
            support::runs_of(store, Some(job_id))
                .await
                .into_iter()
                .find(|r| r.parent_run_id == Some(parent) && r.state.is_final())
        },
    )
    .await
}

/// The admin process dies (abort, a test-only crash point) right after the transaction that
/// records a failure with a retry left and a success with a child job: when it is back, the
/// retry and the child's run are there and fire. With the follow-ups written after the
/// commit, both were lost.
async fn crash_after_completion(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let logs = support::log_dir();
    let store = db.store().await;
    // The admin comes back on the same address, where the executor sends its results.
    let listen = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        probe.local_addr().expect("address").to_string()
    };
    let executor = CountingExecutor::start("crash", &[format!("http://{listen}")], &db.token).await;
    let group = store
        .group_create(GroupNew {
            app_name: "crash".to_owned(),
            title: "crash".to_owned(),
            address_mode: AddressMode::Manual,
            addresses: vec![executor.address()],
            now: support::now_ms(),
        })
        .await
        .expect("group");
    let flaky = job(&*store, group.id, "flaky", "fail", |spec| {
        spec.retry_count = 1;
        spec.retry_backoff_ms = 1_000;
    })
    .await;
    let child = job(&*store, group.id, "child", "count", |_| {}).await;
    let parent = job(&*store, group.id, "parent", "count", |spec| {
        spec.child_job_ids = vec![child.id];
    })
    .await;
    let node = "crash-node";
    let failed = dispatched(&*store, flaky.id, node, &executor.address()).await;
    let succeeded = dispatched(&*store, parent.id, node, &executor.address()).await;

    let admin = Child::admin_with(
        &logs,
        node,
        &db,
        "",
        Some(&listen),
        &[("TICKWORK_TEST_CRASH_AFTER_COMPLETE", "1")],
    )
    .await;
    // Both results in one callback, as an executor batches them.
    let callback = reqwest::Client::new()
        .post(format!("{}/api/callback", admin.address))
        .header(tickwork_protocol::ACCESS_TOKEN_HEADER, &db.token)
        .json(&json!([
            {"logId": failed.id, "logDateTim": failed.scheduled_at, "handleCode": 500,
             "handleMsg": "disk full on /data"},
            {"logId": succeeded.id, "logDateTim": succeeded.scheduled_at, "handleCode": 200},
        ]))
        .send()
        .await;
    let status = admin
        .wait_exit(Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("the admin did not crash: {callback:?}"));
    assert_eq!(status.signal(), Some(libc_sigabrt()), "{status:?}");
    // The results were committed before the crash.
    let failed = store.run_get(failed.id).await.expect("run");
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(
        store.run_get(succeeded.id).await.expect("run").state,
        RunState::Succeeded
    );

    // Back, without the crash point: it re-arms its planned runs.
    let admin = Child::admin_with(&logs, node, &db, "", Some(&listen), &[]).await;
    let retry = ended_follow_up(&*store, flaky.id, failed.id).await;
    assert_eq!((retry.trigger_type, retry.attempt), (TriggerType::Retry, 1));
    assert!(
        retry.scheduled_at >= failed.finished_at.expect("ended") + 1_000,
        "the retry waits for its backoff: {retry:?}"
    );
    assert_eq!(retry.state, RunState::Failed, "{retry:?}");
    assert_eq!(executor.count(retry.id), 1);
    let child_run = ended_follow_up(&*store, child.id, succeeded.id).await;
    assert_eq!(child_run.trigger_type, TriggerType::Parent);
    assert_eq!(child_run.state, RunState::Succeeded, "{child_run:?}");
    assert_eq!(executor.count(child_run.id), 1);
    // Exactly one of each.
    assert_eq!(support::runs_of(&*store, Some(flaky.id)).await.len(), 2);
    assert_eq!(support::runs_of(&*store, Some(child.id)).await.len(), 1);

    admin.terminate(Duration::from_secs(20)).await;
    store.close().await;
    db.drop_database().await;
}

/// SIGABRT, what `std::process::abort` ends a process with.
fn libc_sigabrt() -> i32 {
    nix::sys::signal::Signal::SIGABRT as i32
}
