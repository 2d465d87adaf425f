//! The admin on a manual clock: a cron job due in an hour and a retry after a ten-minute
//! backoff fire once the test moves the clock past them, and not before, with no wait for that
//! time; fires claimed before their job stopped end skipped, unsent; runs waiting for their
//! send fence count in the backlog. A real admin on SQLite with a real executor; only time is
//! the test's.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use sqlx::Connection;
use support::{Api, Backend, CountingExecutor, InProcessAdmin, TestDb, runs_of};
use tickwork_admin::FENCE_LEAD_MS;
use tickwork_admin::clock::ManualClock;
use tickwork_core::TriggerType;
use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::RunState;
use tickwork_store::Run;
use tickwork_testkit::{Receiver, wait_until, wait_until_sync};

/// 2030-01-01T00:00:00Z, the manual clock's start: far from the wall clock, so that a read of
/// the wall clock where the clock belongs shows.
const T0: i64 = 1_893_456_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
/// Real time allowed for the admin to act on a move of the clock.
const WAIT: Duration = Duration::from_secs(30);

/// The heartbeat runs on the clock too, so it beats only when the test moves time: the fence
/// (half of `node_dead_after`, three hours here) stays open across every move of these tests.
const ADMIN: &str = r#"
[cluster]
heartbeat_interval_ms = 1800000
node_dead_after_ms = 21600000
lease_ttl_ms = 3600000
"#;

/// An admin on a manual clock at [`T0`], an executor, and a group that lists the executor.
struct Setup {
    db: TestDb,
    clock: ManualClock,
    admin: InProcessAdmin,
    api: Api,
    executor: CountingExecutor,
    group: i64,
}

impl Setup {
    async fn start(app: &str) -> Option<Setup> {
        let db = TestDb::create(Backend::Sqlite).await?;
        let clock = ManualClock::new(T0);
        let admin = InProcessAdmin::start_with_clock(&db, "clock", ADMIN, clock.clock()).await;
        let executor =
            CountingExecutor::start(app, std::slice::from_ref(&admin.address), &db.token).await;
        let api = Api::new(&admin.address);
        // A manual list: executors beat on real time while the admin judges beats on its
        // clock, and a registry entry would be dead after every jump of the clock.
        let group = api
            .post(
                "groups",
                json!({
                    "app_name": app,
                    "title": app,
                    "address_mode": "manual",
                    "addresses": [executor.address()],
                }),
            )
            .await["id"]
            .as_i64()
            .expect("group id");
        Some(Setup {
            db,
            clock,
            admin,
            api,
            executor,
            group,
        })
    }

    async fn job(&self, fields: serde_json::Value) -> i64 {
        let mut body = json!({ "group_id": self.group, "time_zone": "UTC" });
        body.as_object_mut()
            .expect("an object")
            .extend(fields.as_object().expect("an object").clone());
        self.api.post("jobs", body).await["id"]
            .as_i64()
            .expect("job id")
    }

    /// A running job due at the start of every hour (UTC).
    async fn hourly_job(&self) -> i64 {
        self.job(json!({
            "schedule_type": "CRON",
            "schedule_conf": "0 0 * * * ?",
            "handler": "count",
            "start": true,
        }))
        .await
    }

    /// Sets the clock to `at` and waits for a claim round that saw it (see
    /// `InProcessAdmin::move_clock_to`).
    async fn move_to(&self, at: i64) {
        self.admin.move_clock_to(&self.clock, at, WAIT).await;
    }

    /// Moves the clock to a millisecond before `at`, the instant of `run_id`, and checks that
    /// the run went through the send fence (`sending`) and waits in the timer for `at`, not
    /// sent yet.
    async fn sent_ahead(&self, run_id: i64, at: i64) {
        self.move_to(at - 1).await;
        let (clock, store) = (&self.clock, &self.admin.store);
        wait_until(
            "the run fenced and asleep until its instant",
            WAIT,
            move || async move {
                let run = store.run_get(run_id).await.ok()?;
                (run.state == RunState::Sending && clock.sleepers().contains(&at)).then_some(())
            },
        )
        .await;
        assert_eq!(self.executor.count(run_id), 0, "sent before its instant");
    }

    /// The dispatched run `run_id` once it is final and its dispatch is recorded (a callback
    /// may end it before the ledger writes the dispatch).
    async fn ended(&self, run_id: i64) -> Run {
        let store = self.admin.store.clone();
        wait_until("the run to end", WAIT, || {
            let store = store.clone();
            async move {
                let run = store.run_get(run_id).await.ok()?;
                (run.state.is_final() && run.dispatched_at.is_some()).then_some(run)
            }
        })
        .await
    }

    async fn finish(self) {
        let Setup {
            db,
            admin,
            executor,
            ..
        } = self;
        assert!(executor.doubles().is_empty(), "{:?}", executor.doubles());
        admin.shutdown().await;
        db.drop_database().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cron_job_due_in_an_hour_fires_once_when_the_clock_passes_it() {
    let Some(s) = Setup::start("hourly").await else {
        return;
    };
    let store = s.admin.store.clone();
    let job = s.hourly_job().await;
    // Planned from the admin's clock, not the wall clock.
    let fire = T0 + HOUR;
    let planned = store.job_get(job).await.expect("job");
    assert_eq!(planned.next_fire_at, Some(fire));

    // A minute later the claim loop has looked, and an hour is beyond its window.
    s.move_to(T0 + MINUTE).await;
    assert!(runs_of(&*store, Some(job)).await.is_empty());

    // Short of the send fence's lead it is claimed and armed, and waits in the timer.
    s.move_to(fire - FENCE_LEAD_MS - 1).await;
    let runs = runs_of(&*store, Some(job)).await;
    let [run] = &runs[..] else {
        panic!("one claimed fire expected: {runs:?}")
    };
    assert_eq!(
        (run.state, run.scheduled_at, run.trigger_type),
        (RunState::Planned, fire, TriggerType::Cron)
    );
    assert_eq!(s.admin.admin.scheduler.waiting().timer, 1);

    // A millisecond before the fire it has passed the fence and waits for its instant.
    s.sent_ahead(run.id, fire).await;

    // Past it: fired, recorded at the clock's time, and only once.
    s.move_to(fire + 1_000).await;
    let ended = s.ended(run.id).await;
    assert_eq!(ended.state, RunState::Succeeded, "{ended:?}");
    assert_eq!(ended.dispatched_at, Some(fire + 1_000));
    assert_eq!(s.executor.count(run.id), 1);
    assert_eq!(runs_of(&*store, Some(job)).await.len(), 1);
    let next = store.job_get(job).await.expect("job").next_fire_at;
    assert_eq!(next, Some(fire + HOUR));
    s.finish().await;
}

/// Regression: the backlog the claim weighs against `scheduler.max_backlog` left out the runs
/// a timer had released and the send loop had not yet put in a lane (on their way, or while
/// their send fence was written), so a claim deciding then took a round too many: a stuck
/// executor's backlog passed its bound by that much (77 against at most 70). Here another
/// connection holds SQLite's write lock while the run is released for its fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_waiting_for_their_send_fence_count_in_the_backlog() {
    let Some(s) = Setup::start("fenced").await else {
        return;
    };
    let job = s.hourly_job().await;
    let fire = T0 + HOUR;
    s.move_to(fire - FENCE_LEAD_MS - 1).await;
    let runs = runs_of(&*s.admin.store, Some(job)).await;
    let [run] = &runs[..] else {
        panic!("one claimed fire expected: {runs:?}")
    };
    let scheduler = &s.admin.admin.scheduler;
    assert_eq!(scheduler.waiting().backlog(), 1);

    let mut writer = sqlx::SqliteConnection::connect(&s.db.url)
        .await
        .expect("connect");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut writer)
        .await
        .expect("write lock");
    s.clock.set(fire - FENCE_LEAD_MS);
    wait_until_sync("the run released for its fence", WAIT, || {
        (scheduler.waiting().timer == 0).then_some(())
    })
    .await;
    let waiting = scheduler.waiting();
    sqlx::query("ROLLBACK")
        .execute(&mut writer)
        .await
        .expect("lock let go");
    assert_eq!(waiting.backlog(), 1, "{waiting:?}");

    // Once the fence is written it waits for its instant and fires once.
    s.sent_ahead(run.id, fire).await;
    assert_eq!(scheduler.waiting().backlog(), 1);
    s.move_to(fire + 1_000).await;
    let ended = s.ended(run.id).await;
    assert_eq!(ended.state, RunState::Succeeded, "{ended:?}");
    assert_eq!(s.executor.count(run.id), 1);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_after_a_ten_minute_backoff_fires_when_the_clock_passes_the_backoff() {
    let Some(s) = Setup::start("retrying").await else {
        return;
    };
    let store = s.admin.store.clone();
    let job = s
        .job(json!({
            "handler": "fail",
            "retry_count": 1,
            "retry_backoff_ms": 10 * MINUTE,
        }))
        .await;
    let triggered = s.api.post(&format!("jobs/{job}/trigger"), json!({})).await;
    let first = triggered["id"].as_i64().expect("run id");
    let failed = s.ended(first).await;
    assert_eq!(failed.state, RunState::Failed, "{failed:?}");
    // The clock has not moved: the run ended at T0, and its retry is due ten minutes later.
    assert_eq!(failed.finished_at, Some(T0));
    let retry_at = T0 + 10 * MINUTE;
    let runs = runs_of(&*store, Some(job)).await;
    let [_, retry] = &runs[..] else {
        panic!("the run and its retry expected: {runs:?}")
    };
    assert_eq!(
        (retry.trigger_type, retry.parent_run_id, retry.attempt),
        (TriggerType::Retry, Some(first), 1)
    );
    assert_eq!(
        (retry.state, retry.scheduled_at),
        (RunState::Planned, retry_at)
    );

    // The timer holds it and sleeps until the send fence's lead before its instant; a
    // millisecond short of the instant it is fenced and fires nothing.
    let (scheduler, clock) = (&s.admin.admin.scheduler, &s.clock);
    let fence_at = retry_at - FENCE_LEAD_MS;
    wait_until(
        "the timer asleep until the retry's fence",
        WAIT,
        move || async move {
            (scheduler.waiting().timer == 1 && clock.sleepers().contains(&fence_at)).then_some(())
        },
    )
    .await;
    s.sent_ahead(retry.id, retry_at).await;

    // At its instant it is dispatched, fails again, and has no retry of its own.
    s.move_to(retry_at).await;
    let ended = s.ended(retry.id).await;
    assert_eq!(ended.state, RunState::Failed, "{ended:?}");
    assert_eq!(ended.dispatched_at, Some(retry_at));
    assert_eq!(s.executor.count(retry.id), 1);
    assert_eq!(runs_of(&*store, Some(job)).await.len(), 2);
    s.finish().await;
}

/// A restart is not a failover: runs an admin had claimed when it stopped cleanly lost their
/// owner with it, and the admin started again adopts them before its first claim and fires them
/// at once instead of waiting for the adoption delay (they used to wait for it, and went out
/// 7.5 to 9.7 s late).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_restarted_after_a_clean_stop_fires_its_claimed_runs_at_once() {
    let Some(s) = Setup::start("restarting").await else {
        return;
    };
    // The test's own: an admin's store closes with it.
    let store = s.db.store().await;
    let mut jobs = Vec::new();
    // Three jobs due one second apart, all within the claim's look-ahead.
    for second in [10, 11, 12] {
        jobs.push(
            s.job(json!({
                "schedule_type": "CRON",
                "schedule_conf": format!("{second} 0 * * * ?"),
                "handler": "count",
                "start": true,
            }))
            .await,
        );
    }
    let first_fire = T0 + 10_000;
    s.move_to(first_fire - 1).await;
    let claimed: Vec<Run> = runs_of(&*store, None).await;
    assert_eq!(claimed.len(), 3, "{claimed:?}");
    // The first has passed the send fence and waits for its instant, the others are planned.
    let first = claimed
        .iter()
        .find(|r| r.scheduled_at == first_fire)
        .expect("the first fire");
    s.sent_ahead(first.id, first_fire).await;
    let claimed: Vec<Run> = runs_of(&*store, None).await;
    let states: Vec<RunState> = claimed.iter().map(|r| r.state).collect();
    assert_eq!(
        states.iter().filter(|s| **s == RunState::Planned).count(),
        2,
        "{claimed:?}"
    );

    // A clean stop hands them back, the one waiting `sending` included.
    let Setup {
        db,
        clock,
        admin,
        executor,
        ..
    } = s;
    admin.shutdown().await;
    for run in runs_of(&*store, None).await {
        assert_eq!(
            (run.state, run.owner_node.as_deref()),
            (RunState::Planned, None),
            "handed back: {run:?}"
        );
    }

    // Started again 40 s later: every fire is past, none later than the misfire threshold
    // plus the failover time, so all fire now.
    let restart_at = first_fire + 40_000;
    clock.set(restart_at);
    // Under another node id, as an admin without a configured one gets at each start.
    let admin = InProcessAdmin::start_with_clock(&db, "clock-2", ADMIN, clock.clock()).await;
    let dispatched = wait_until("the handed-back runs to be sent", WAIT, || {
        let store = store.clone();
        async move {
            let runs = runs_of(&*store, None).await;
            runs.iter()
                .all(|r| r.dispatched_at.is_some())
                .then_some(runs)
        }
    })
    .await;
    for run in &dispatched {
        assert_eq!(
            run.dispatched_at,
            Some(restart_at),
            "fired at once: {run:?}"
        );
        assert_eq!(run.owner_node.as_deref(), Some("clock-2"), "{run:?}");
        // Accepted is not yet run: the handler counts once the executor's worker starts it.
        wait_until_sync("the executor to run it", WAIT, || {
            (executor.count(run.id) >= 1).then_some(())
        })
        .await;
        assert_eq!(executor.count(run.id), 1, "{run:?}");
    }
    assert_eq!(executor.doubles(), []);
    admin.shutdown().await;
    store.close().await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_claimed_before_their_jobs_stopped_end_skipped_unsent() {
    let Some(s) = Setup::start("stopping").await else {
        return;
    };
    let store = s.admin.store.clone();
    // Three jobs due at the same instant; two are stopped after their fires were claimed.
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(
            s.job(json!({
                "schedule_type": "CRON",
                "schedule_conf": "10 0 * * * ?",
                "handler": "count",
                "start": true,
            }))
            .await,
        );
    }
    let fire = T0 + 10_000;
    s.move_to(fire - FENCE_LEAD_MS - 1).await;
    assert_eq!(runs_of(&*store, None).await.len(), 3);
    s.move_to(fire - 1).await;
    for job in &jobs[1..] {
        s.api.post(&format!("jobs/{job}/stop"), json!({})).await;
    }

    s.move_to(fire + 1_000).await;
    let runs = wait_until("the three runs to end", WAIT, || {
        let store = store.clone();
        async move {
            let runs = runs_of(&*store, None).await;
            runs.iter().all(|r| r.state.is_final()).then_some(runs)
        }
    })
    .await;
    for run in &runs {
        if run.job_id == jobs[0] {
            assert_eq!(run.state, RunState::Succeeded, "{run:?}");
            assert_eq!(s.executor.count(run.id), 1, "{run:?}");
        } else {
            assert_eq!(
                (run.state, run.trigger_msg.as_deref(), run.dispatched_at),
                (
                    RunState::Skipped,
                    Some("job stopped before the run was due"),
                    None
                ),
                "{run:?}"
            );
            assert_eq!(run.finished_at, Some(fire + 1_000), "{run:?}");
            assert_eq!(s.executor.count(run.id), 0, "sent: {run:?}");
        }
    }
    s.finish().await;
}

/// Waits until the alarm statuses of `runs` are `want`.
async fn alarm_statuses_become(
    store: &dyn tickwork_store::Store,
    runs: &[i64],
    want: &[AlarmStatus],
    what: &str,
) {
    wait_until(what, WAIT, || async {
        let mut got = Vec::new();
        for &id in runs {
            got.push(store.run_get(id).await.ok()?.alarm_status);
        }
        (got == want).then_some(())
    })
    .await;
}

/// An executor outage used to mean one alarm per failed run on each of its job's channels (one
/// benchmark queued 364,929 failed runs for an alarm). A job's alarms on a channel are now
/// `alarm.group_window_ms` (60 s by default) apart, and the one after the first counts the runs
/// that failed in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_failing_again_and_again_alarms_once_a_window_counting_the_runs_between() {
    let Some(s) = Setup::start("flaky").await else {
        return;
    };
    let store = s.admin.store.clone();
    let receiver = Receiver::start().await;
    s.api
        .post(
            "alarm-channels",
            json!({"name": "hook", "kind": "webhook",
                   "config": {"url": receiver.url("/hook"), "secret": "s"}}),
        )
        .await;
    let job = s
        .job(json!({"key": "flaky", "handler": "fail", "alarm_channels": "hook"}))
        .await;
    let fail = || async {
        let run = s.api.post(&format!("jobs/{job}/trigger"), json!({})).await;
        let ended = s.ended(run["id"].as_i64().expect("run id")).await;
        assert_eq!(ended.state, RunState::Failed, "{ended:?}");
        ended.id
    };
    // The lease that runs the monitors is taken with the first heartbeat, half an hour on.
    let mut now = T0 + 30 * MINUTE;
    s.move_to(now).await;
    let scheduler = &s.admin.admin.scheduler;
    wait_until_sync("the maintenance lease", WAIT, || {
        scheduler.is_lease_holder().then_some(())
    })
    .await;
    // The alarm monitor queues runs on the admin's clock: each move lets it look again.
    let mut look = || {
        now += 1_000;
        s.move_to(now)
    };
    // The first failure alarms at once.
    let first = fail().await;
    look().await;
    let sent = receiver.wait_for("/hook", 1, WAIT).await;
    let body = sent[0].json();
    assert_eq!(
        (&body["run"]["id"], &body["grouped_runs"]),
        (&json!(first), &json!(0))
    );

    // Three more within the window: the first of them opens the next alarm, due a window
    // after the first one, and the other two join it.
    let later = vec![fail().await, fail().await, fail().await];
    look().await;
    let want = [
        AlarmStatus::Delivering,
        AlarmStatus::Grouped,
        AlarmStatus::Grouped,
    ];
    alarm_statuses_become(&*store, &later, &want, "the later runs queued and grouped").await;
    let (status, listed) = s
        .api
        .call("GET", &format!("alarm-deliveries?job_id={job}"), None)
        .await;
    assert_eq!(status, 200, "{listed}");
    let items = listed["items"].as_array().expect("items");
    let [next, sent_one] = &items[..] else {
        panic!("two deliveries expected: {listed}");
    };
    assert_eq!(sent_one["run_id"], json!(first));
    let due = sent_one["due_at"].as_i64().expect("due_at") + MINUTE;
    assert_eq!(
        (&next["run_id"], &next["grouped_runs"], &next["last_run_id"]),
        (&json!(later[0]), &json!(2), &json!(later[2]))
    );
    assert_eq!(next["next_attempt_at"], json!(due));
    assert_eq!(next["state"], "pending");
    assert_eq!(
        receiver.requests("/hook").len(),
        1,
        "sent before its window"
    );
    let grouped = s
        .admin
        .admin
        .scheduler
        .stats()
        .alarm_runs_grouped
        .load(Ordering::Relaxed);
    assert_eq!(grouped, 2);

    // At the window's end it goes out, counting the runs it carries.
    s.move_to(due).await;
    let sent = receiver.wait_for("/hook", 2, WAIT).await;
    let body = sent[1].json();
    assert_eq!(
        (
            &body["run"]["id"],
            &body["grouped_runs"],
            &body["last_run_id"]
        ),
        (&json!(later[0]), &json!(2), &json!(later[2]))
    );
    let title = body["title"].as_str().expect("title");
    assert!(title.ends_with("and 2 more runs"), "{title}");
    let want = [
        AlarmStatus::Sent,
        AlarmStatus::Grouped,
        AlarmStatus::Grouped,
    ];
    alarm_statuses_become(
        &*store,
        &later,
        &want,
        "the carrier's alarm recorded as sent",
    )
    .await;
    assert_eq!(receiver.requests("/hook").len(), 2);
    s.finish().await;
}
