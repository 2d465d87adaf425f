//! Cluster operations with admins in this process, on SQLite, PostgreSQL and MariaDB: one
//! maintenance lease holder at a time, the lease moving on a clean stop and on a crash,
//! orphaned runs adopted and fired, `/readyz` and `/metrics`, the daily report and retention.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use support::{Api, Backend, CountingExecutor, InProcessAdmin, TestDb, report};
use tickwork_core::TriggerType;
use tickwork_core::run::RunState;
use tickwork_store::{
    AddressMode, GroupNew, JobNew, JobSpec, JobStatus, RunComplete, RunNew, RunReport, Store,
    TimeRange,
};
use tickwork_testkit::wait_until;

/// Fast beats, so that a lease or a death is noticed within a second or two.
const ADMIN: &str = r#"
[cluster]
heartbeat_interval_ms = 200
node_dead_after_ms = 1000
lease_ttl_ms = 1000
adopt_interval_ms = 200

[registry]
sweep_interval_ms = 300

[monitor]
report_interval_ms = 300
retention_days = 3
retention_interval_ms = 300
"#;

const DAY: i64 = 86_400_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_lease_adoption_health_metrics_reports_retention() {
    scenario(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_lease_adoption_health_metrics_reports_retention() {
    scenario(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_lease_adoption_health_metrics_reports_retention() {
    scenario(Backend::MySql).await;
}

/// The one lease holder among `admins`, once there is exactly one.
async fn holder(admins: &[&InProcessAdmin]) -> usize {
    wait_until(
        "exactly one lease holder",
        Duration::from_secs(20),
        || async {
            let holders: Vec<usize> = (0..admins.len())
                .filter(|&i| admins[i].admin.scheduler.is_lease_holder())
                .collect();
            (holders.len() == 1).then(|| holders[0])
        },
    )
    .await
}

/// A planned run of `job_id` owned by `owner`, due at `at`, written behind every admin's back.
async fn planted(store: &dyn Store, job_id: i64, owner: &str, at: i64) -> i64 {
    let run = store
        .run_insert(RunNew {
            scheduled_at: at,
            owner_node: Some(owner.to_owned()),
            ..RunNew::new(job_id, TriggerType::Manual, support::now_ms())
        })
        .await
        .expect("planted run");
    run.id
}

async fn fired_by(store: &dyn Store, run_id: i64) -> (String, i64) {
    wait_until(
        "the planted run to run",
        Duration::from_secs(30),
        || async {
            let run = store.run_get(run_id).await.ok()?;
            (run.state == RunState::Succeeded).then(|| {
                (
                    run.owner_node.clone().unwrap_or_default(),
                    run.dispatched_at.unwrap_or_default() - run.scheduled_at,
                )
            })
        },
    )
    .await
}

async fn scenario(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let store = db.store().await;
    let now = support::now_ms();

    // What retention must delete, and what it must keep.
    let group = store
        .group_create(GroupNew {
            app_name: "ops".to_owned(),
            title: "ops".to_owned(),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now,
        })
        .await
        .expect("group");
    let job = store
        .job_create(JobNew {
            key: "ops".to_owned(),
            spec: JobSpec::new(group.id, "count"),
            status: JobStatus::Stopped,
            next_fire_at: None,
            now,
        })
        .await
        .expect("job");
    let mut old = Vec::new();
    let mut recent = Vec::new();
    for (at, list) in [(now - 10 * DAY, &mut old), (now - DAY, &mut recent)] {
        for _ in 0..3 {
            let run = store
                .run_insert(RunNew {
                    scheduled_at: at,
                    owner_node: Some("long-gone".to_owned()),
                    ..RunNew::new(job.id, TriggerType::Manual, at)
                })
                .await
                .expect("old run");
            // Through the send fence first: only a run its owner sent takes a result.
            support::begin_send(&*store, run.id).await;
            store
                .run_complete(
                    RunComplete {
                        run_id: run.id,
                        handle_code: 200,
                        handle_msg: None,
                        state: RunState::Succeeded,
                        at,
                    },
                    tickwork_store::NO_FOLLOW_UPS,
                )
                .await
                .expect("complete");
            list.push(run.id);
        }
    }
    let old_day = now - now.rem_euclid(DAY) - 10 * DAY;
    store
        .report_upsert(RunReport {
            day: old_day,
            running: 0,
            succeeded: 3,
            failed: 0,
            updated_at: now,
        })
        .await
        .expect("old report");

    let mut admins = Vec::new();
    for node in ["ops-a", "ops-b", "ops-c"] {
        admins.push(InProcessAdmin::start(&db, node, ADMIN).await);
    }
    let addresses: Vec<String> = admins.iter().map(|a| a.address.clone()).collect();
    let executor = CountingExecutor::start("ops", &addresses, &db.token).await;

    // One holder; all ready; the holder's metrics say so.
    let first = holder(&admins.iter().collect::<Vec<_>>()).await;
    let apis: Vec<Api> = addresses.iter().map(|a| Api::new(a)).collect();
    for api in &apis {
        wait_until("readiness", Duration::from_secs(20), || async {
            (api.get("/readyz").await.0 == 200).then_some(())
        })
        .await;
    }
    let (status, metrics) = apis[first].get("/metrics").await;
    assert_eq!(status, 200);
    for family in [
        "tickwork_runs_claimed_total",
        "tickwork_runs_dispatched_total",
        "tickwork_dispatch_errors_total{cause=\"no_executor\"}",
        "tickwork_dispatch_errors_total{cause=\"refused\"}",
        "tickwork_dispatch_errors_total{cause=\"transport\"}",
        "tickwork_dispatch_lateness_seconds_bucket{le=\"0.005\"}",
        "tickwork_dispatch_lateness_seconds_count",
        "tickwork_timer_runs",
        "tickwork_lane_backlog{lane=\"fast\"}",
        "tickwork_lane_backlog{lane=\"slow\"}",
        "tickwork_runs{state=\"succeeded\"}",
        "tickwork_admin_nodes_live 3",
        "tickwork_executors_live",
        "tickwork_lease_held 1",
        "tickwork_runs_adopted_total",
        "tickwork_database_up 1",
    ] {
        assert!(
            metrics.contains(family),
            "{family} missing from:\n{metrics}"
        );
    }
    let (_, other) = apis[(first + 1) % 3].get("/metrics").await;
    assert!(other.contains("\ntickwork_lease_held 0\n"), "{other}");

    // An orphan (its owner never had a heartbeat row) is adopted and fired.
    let orphan = planted(&*store, job.id, "ghost", support::now_ms()).await;
    let (owner, delay) = fired_by(&*store, orphan).await;
    assert!(owner.starts_with("ops-"), "{owner}");
    assert_eq!(executor.count(orphan), 1);
    report(format!(
        "  {backend:?}: an orphan ran {delay} ms late on {owner}"
    ));

    // Reports of today and the two days before; retention dropped the old runs and report.
    wait_until(
        "the daily reports and retention",
        Duration::from_secs(20),
        || {
            let store = store.clone();
            let old = old.clone();
            async move {
                let reports = store.reports_list(TimeRange::default()).await.ok()?;
                let days: Vec<i64> = reports.iter().map(|r| r.day).collect();
                let today = support::now_ms() - support::now_ms().rem_euclid(DAY);
                let expected = [today - 2 * DAY, today - DAY, today];
                let mut gone = true;
                for &id in &old {
                    gone &= store.run_get(id).await.is_err();
                }
                (days == expected && gone).then_some(reports)
            }
        },
    )
    .await;
    for &id in &recent {
        assert!(
            store.run_get(id).await.is_ok(),
            "retention took a recent run"
        );
    }
    let yesterday = store
        .reports_list(TimeRange {
            from: Some(now - now.rem_euclid(DAY) - DAY),
            to: Some(now - now.rem_euclid(DAY)),
        })
        .await
        .expect("reports");
    assert_eq!(yesterday[0].succeeded, 3);

    // A clean stop of the holder: the lease moves at once, the node row goes.
    let stopped = admins.remove(first);
    let stopped_id = stopped.admin.scheduler.node_id().to_owned();
    let stop_at = std::time::Instant::now();
    stopped.shutdown().await;
    let next = holder(&admins.iter().collect::<Vec<_>>()).await;
    let moved = stop_at.elapsed();
    let nodes = store.nodes_list().await.expect("nodes");
    assert!(nodes.iter().all(|n| n.id != stopped_id), "{nodes:?}");

    // A crash of the new holder: the last admin takes the lease once it expires, and adopts
    // what the dead node owned.
    let crashed = admins.remove(next);
    let last = admins.pop().expect("the last admin");
    let crashed_id = crashed.admin.scheduler.node_id().to_owned();
    let due = support::now_ms() + 1_500;
    let owned_by_dead = planted(&*store, job.id, &crashed_id, due).await;
    let crash_at = std::time::Instant::now();
    crashed.crash();
    holder(&[&last]).await;
    let taken = crash_at.elapsed();
    let (owner, delay) = fired_by(&*store, owned_by_dead).await;
    assert_eq!(owner, last.admin.scheduler.node_id());
    assert!(
        last.admin
            .scheduler
            .stats()
            .runs_adopted
            .load(Ordering::Relaxed)
            >= 1,
        "the last admin adopted nothing"
    );
    report(format!(
        "OPERATIONS {backend:?}: lease moved {} ms after a clean stop, {} ms after a crash; \
         the crashed node's run fired {delay} ms late on {owner}",
        moved.as_millis(),
        taken.as_millis()
    ));

    let _ = executor.executor.shutdown_and_wait().await;
    last.shutdown().await;
    store.close().await;
    db.drop_database().await;
}
