//! The ledger's alerts end to end: every admin stopped for a while gives one `fires_missed`
//! alarm covering the fires of the stop; a stopped executor group gives one, to which its later
//! missed fires are added without alarming again; a fire sent past its job's lateness budget
//! gives one `fires_late`, and two runs of one fire one `fires_doubled`. Each kind alarms on the
//! job's channel once, never again for the same fires, and counts in the metrics. Real admins
//! on SQLite, real executors, a real webhook receiver.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Api, Backend, CountingExecutor, InProcessAdmin, TestDb, runs_of};
use tickwork_admin::clock::ManualClock;
use tickwork_core::fire_check::FireAlertKind;
use tickwork_core::run::RunState;
use tickwork_store::{FireAlertRecord, Store, TimeRange};
use tickwork_testkit::{Receiver, now_ms, wait_until};

/// Fast rounds: fires are judged a second after their instant, misfired when a second late.
const ADMIN: &str = r#"
[scheduler]
misfire_threshold_ms = 1000

[cluster]
heartbeat_interval_ms = 200
node_dead_after_ms = 1000
lease_ttl_ms = 1000
adopt_interval_ms = 200

[monitor]
alarm_interval_ms = 100
fire_check_interval_ms = 200
fire_missed_after_ms = 1000

[alarm]
poll_interval_ms = 100
"#;

const WAIT: Duration = Duration::from_secs(60);
/// How long every admin stays stopped.
const STOP_MS: i64 = 4_000;

/// The webhook documents of fire alerts of `kind` the receiver got.
fn fire_events(rx: &Receiver, kind: &str) -> Vec<Value> {
    let event = format!("fires_{kind}");
    rx.requests("/hook")
        .iter()
        .map(|r| r.json())
        .filter(|doc| doc["event"] == event.as_str())
        .collect()
}

/// Waits until the receiver got a fire alert of `kind`, and returns the first.
async fn first_fire_event(rx: &Receiver, kind: &str) -> Value {
    wait_until(format!("a fires_{kind} alarm"), WAIT, || async {
        fire_events(rx, kind).into_iter().next()
    })
    .await
}

/// A counter of the admin's `/metrics`.
async fn metric(api: &Api, name: &str) -> u64 {
    let (_, text) = api.get("/metrics").await;
    support::counter(&text, name).unwrap_or_else(|| panic!("{name} missing in /metrics"))
}

/// Every alert written so far, newest first.
async fn alerts(store: &dyn Store) -> Vec<FireAlertRecord> {
    store
        .fire_alerts_recent(TimeRange::default(), 100)
        .await
        .expect("alerts")
}

/// Waits until `admin` finished `rounds` more rounds of the check than it had.
async fn check_rounds(admin: &InProcessAdmin, rounds: u64) {
    let stats = admin.admin.scheduler.stats();
    let target = stats.fire_checks.load(Ordering::SeqCst) + rounds;
    wait_until("rounds of the fire check", WAIT, || async {
        (stats.fire_checks.load(Ordering::SeqCst) >= target).then_some(())
    })
    .await;
}

/// A group `app` that lists `executor` by hand: it stays reachable whichever admin runs, and
/// its beats do not matter to an admin on a manual clock.
async fn manual_group(api: &Api, app: &str, executor: &CountingExecutor) -> i64 {
    api.post(
        "groups",
        json!({ "app_name": app, "title": app, "address_mode": "manual",
                "addresses": [executor.address()] }),
    )
    .await["id"]
        .as_i64()
        .expect("group id")
}

async fn channel(api: &Api, rx: &Receiver) {
    api.post(
        "alarm-channels",
        json!({ "name": "hook", "kind": "webhook",
                "config": { "url": rx.url("/hook"), "secret": "whsec-1" } }),
    )
    .await;
}

/// A job firing every second on `group`, alarming on the channel `hook`.
async fn every_second(api: &Api, group: i64, key: &str) -> i64 {
    api.post(
        "jobs",
        json!({
            "key": key,
            "group_id": group,
            "description": "Every second",
            "schedule_type": "FIX_RATE",
            "schedule_conf": "1",
            "handler": "count",
            "alarm_channels": "hook",
            "start": true,
        }),
    )
    .await["id"]
        .as_i64()
        .expect("job id")
}

/// Waits until `job` has `n` runs scheduled after `after` that reached their executor; returns
/// the newest instant. (Their results may not come: an executor that knows only a stopped
/// admin calls back to it.)
async fn sent_after(store: &dyn Store, job: i64, after: i64, n: usize) -> i64 {
    wait_until("runs at their executor", WAIT, || async {
        let ok: Vec<i64> = runs_of(store, Some(job))
            .await
            .iter()
            .filter(|r| r.dispatched_at.is_some() && r.scheduled_at > after)
            .map(|r| r.scheduled_at)
            .collect();
        (ok.len() >= n).then(|| ok.iter().copied().max().unwrap_or_default())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_admin_stopped_for_a_while_alarms_once_for_the_fires_of_the_stop() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let first = InProcessAdmin::start(&db, "before-stop", ADMIN).await;
    let api = Api::new(&first.address);
    let executor =
        CountingExecutor::start("stopped", std::slice::from_ref(&first.address), &db.token).await;
    let group = manual_group(&api, "stopped", &executor).await;
    let rx = Receiver::start().await;
    channel(&api, &rx).await;
    let job = every_second(&api, group, "every-second").await;
    let last_before = sent_after(first.store.as_ref(), job, 0, 2).await;
    check_rounds(&first, 2).await;
    assert!(fire_events(&rx, "missed").is_empty(), "{:?}", rx.all());

    // Every admin stops; the fires of the stop are nobody's.
    let stopped_at = now_ms();
    first.shutdown().await;
    wait_until("the stop to last", WAIT, || async {
        (now_ms() >= stopped_at + STOP_MS).then_some(())
    })
    .await;

    let second = InProcessAdmin::start(&db, "after-stop", ADMIN).await;
    let api = Api::new(&second.address);
    let store = second.store.clone();
    let doc = first_fire_event(&rx, "missed").await;
    assert_eq!(doc["job"]["id"], job, "{doc}");
    assert_eq!(doc["job"]["key"], "every-second");
    let first_at = doc["alert"]["first_at"].as_i64().expect("first_at");
    assert!(first_at > last_before, "{doc}");
    assert!(first_at < stopped_at + STOP_MS, "{doc}");

    // The admin fires again; rounds judge its fires and nothing more alarms. The fires of
    // the stop that the restarted claim wrote after the alarm went out were added to it.
    let restarted = sent_after(store.as_ref(), job, stopped_at + STOP_MS, 2).await;
    let cursor = || async {
        let open = tickwork_store::CursorOpen {
            name: "fire-check".into(),
            start: 0,
            now: now_ms(),
        };
        store.fire_cursor_open(open).await.ok()
    };
    wait_until("the check past the restart", WAIT, || async {
        (cursor().await? >= restarted).then_some(())
    })
    .await;
    check_rounds(&second, 3).await;
    // One alarm per kind: missed, and late for the fires the restarted admin took over and
    // sent within its failover grace (past their budget of 1 s, short of a misfire).
    assert_eq!(fire_events(&rx, "missed").len(), 1, "{:?}", rx.all());
    assert!(fire_events(&rx, "late").len() <= 1, "{:?}", rx.all());
    assert!(fire_events(&rx, "doubled").is_empty(), "{:?}", rx.all());
    let written = alerts(store.as_ref()).await;
    let of_kind = |kind| {
        written
            .iter()
            .find(|a| a.alert.kind == kind)
            .map(|a| &a.alert)
    };
    let missed = of_kind(FireAlertKind::Missed).expect("a missed alert");
    let late_fires = of_kind(FireAlertKind::Late).map_or(0, |a| a.fires);
    assert_eq!(
        written.len(),
        1 + usize::from(late_fires > 0),
        "{written:?}"
    );
    // The missed alert holds every misfired fire, the first in the alarm, the rest added.
    let misfired: Vec<i64> = runs_of(store.as_ref(), Some(job))
        .await
        .iter()
        .filter(|r| r.state == RunState::Misfired)
        .map(|r| r.scheduled_at)
        .collect();
    assert_eq!(
        missed.fires,
        misfired.len() as i64,
        "{missed:?} {misfired:?}"
    );
    assert_eq!(missed.first_at, first_at);
    assert_eq!(
        missed.last_at,
        misfired.iter().copied().max().unwrap_or_default()
    );
    // Between them, every fire of the stop.
    assert!(
        missed.fires + late_fires >= STOP_MS / 1000 - 1,
        "{written:?}"
    );
    assert!(missed.last_at < restarted);
    assert_eq!(
        metric(&api, "tickwork_fires_missed_total").await,
        missed.fires as u64
    );
    assert_eq!(
        metric(&api, "tickwork_fires_late_total").await,
        late_fires as u64
    );
    assert!(executor.doubles().is_empty(), "{:?}", executor.doubles());

    second.shutdown().await;
    let _ = executor.executor.shutdown_and_wait().await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_executor_group_alarms_once_and_adds_its_later_fires() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "group-stop", ADMIN).await;
    let api = Api::new(&admin.address);
    let store = admin.store.clone();
    let group = api.group("vanishing").await;
    let executor =
        CountingExecutor::start("vanishing", std::slice::from_ref(&admin.address), &db.token).await;
    support::registered(store.as_ref(), &executor.address()).await;
    let rx = Receiver::start().await;
    channel(&api, &rx).await;
    let job = every_second(&api, group, "group-gone").await;
    sent_after(store.as_ref(), job, 0, 2).await;

    // The group's only executor stops (and says so): its fires fail at the trigger.
    let _ = executor.executor.shutdown_and_wait().await;
    let doc = first_fire_event(&rx, "missed").await;
    assert_eq!(doc["job"]["id"], job, "{doc}");
    let first_fires = doc["alert"]["fires"].as_i64().expect("fires");
    assert!(first_fires >= 1, "{doc}");

    // Later fires fail too: they are added to the alert, which does not alarm again.
    let alert_id = alerts(store.as_ref()).await[0].id;
    wait_until("more missed fires added to the alert", WAIT, || async {
        let a = store.fire_alert_get(alert_id).await.ok()?;
        (a.alert.fires >= first_fires + 3).then_some(())
    })
    .await;
    check_rounds(&admin, 2).await;
    assert_eq!(fire_events(&rx, "missed").len(), 1, "{:?}", rx.all());
    let written = alerts(store.as_ref()).await;
    assert_eq!(written.len(), 1, "{written:?}");
    let failed = runs_of(store.as_ref(), Some(job))
        .await
        .iter()
        .filter(|r| r.state == RunState::Failed && r.dispatched_at.is_none())
        .count() as i64;
    assert!(written[0].alert.fires <= failed, "{written:?}");
    assert_eq!(
        metric(&api, "tickwork_fires_missed_total").await,
        written[0].alert.fires as u64
    );

    admin.shutdown().await;
    db.drop_database().await;
}

/// 2030-01-01T00:00:00Z: the manual clock's start.
const T0: i64 = 1_893_456_000_000;
const HOUR: i64 = 3_600_000;

/// On a manual clock the check runs when time moves: heartbeat, lease and rounds go by its
/// time, each a second apart; the fence (half of `node_dead_after`) stays open across every jump.
const MANUAL: &str = r#"
[cluster]
heartbeat_interval_ms = 1000
node_dead_after_ms = 21600000
lease_ttl_ms = 3600000

[monitor]
fire_check_interval_ms = 1000
fire_missed_after_ms = 10000

[alarm]
poll_interval_ms = 100
"#;

/// Moves the clock a second at a time, up to `limit`, until `check` holds: the check's rounds
/// run when their interval passed on the clock, so time has to move for them.
async fn drive_until<T, F, Fut>(clock: &ManualClock, limit: i64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    wait_until(what, WAIT, || {
        let seen = check();
        async move {
            let seen = seen.await;
            if seen.is_none() && clock.now_ms() < limit {
                clock.set(clock.now_ms() + 1_000);
            }
            seen
        }
    })
    .await
}

/// The run of `job` scheduled at `at`, once it ended with its dispatch recorded.
async fn ended(store: &dyn Store, job: i64, at: i64) -> tickwork_store::Run {
    wait_until("the fire's run to end", WAIT, || async {
        runs_of(store, Some(job))
            .await
            .into_iter()
            .find(|r| r.scheduled_at == at && r.state.is_final() && r.dispatched_at.is_some())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_fire_and_a_doubled_fire_alarm_once_each() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let clock = ManualClock::new(T0);
    let admin = InProcessAdmin::start_with_clock(&db, "manual", MANUAL, clock.clock()).await;
    let api = Api::new(&admin.address);
    let store = admin.store.clone();
    let executor =
        CountingExecutor::start("hourly", std::slice::from_ref(&admin.address), &db.token).await;
    let group = manual_group(&api, "hourly", &executor).await;
    let rx = Receiver::start().await;
    channel(&api, &rx).await;
    let job = api
        .post(
            "jobs",
            json!({
                "key": "hourly",
                "group_id": group,
                "schedule_type": "CRON",
                "schedule_conf": "0 0 * * * ?",
                "time_zone": "UTC",
                "handler": "count",
                "alarm_channels": "hook",
                "lateness_budget_ms": 1000,
                "start": true,
            }),
        )
        .await["id"]
        .as_i64()
        .expect("job id");

    // A first round of the check puts its cursor here, before the fires to come.
    let checks = &admin.admin.scheduler.stats().fire_checks;
    drive_until(
        &clock,
        T0 + 60_000,
        "a first round of the check",
        || async { (checks.load(Ordering::SeqCst) >= 1).then_some(()) },
    )
    .await;

    // The first fire goes out 3 s after its instant (under the misfire threshold of 5 s):
    // late by the job's budget of 1 s.
    let fire = T0 + HOUR;
    admin.move_clock_to(&clock, fire + 3_000, WAIT).await;
    let late_run = ended(store.as_ref(), job, fire).await;
    assert_eq!(late_run.dispatched_at, Some(fire + 3_000), "{late_run:?}");
    let doc = drive_until(&clock, fire + 60_000, "a fires_late alarm", || async {
        fire_events(&rx, "late").into_iter().next()
    })
    .await;
    assert_eq!(doc["job"]["id"], job, "{doc}");
    assert_eq!(doc["alert"]["fires"], 1);
    assert_eq!(doc["alert"]["worst_late_ms"], 3_000);
    assert_eq!(doc["alert"]["first_at"], fire);

    // The next fire is on time, and the ledger holds a second run of it (impossible by design:
    // written here past the unique key, as a fault of the store would).
    let next = fire + HOUR;
    admin.move_clock_to(&clock, next, WAIT).await;
    let on_time = ended(store.as_ref(), job, next).await;
    let pool = sqlx::SqlitePool::connect(&db.url).await.expect("sqlite");
    sqlx::query("DROP INDEX tw_runs_fire")
        .execute(&pool)
        .await
        .expect("drop the fire key");
    sqlx::query(
        "INSERT INTO tw_runs (job_id, group_id, scheduled_at, fire_key, trigger_type, attempt, \
         handler, params, state, trigger_code, owner_node, priority, created_at, dispatched_at, \
         finished_at) SELECT job_id, group_id, scheduled_at, fire_key, trigger_type, attempt, \
         handler, params, state, trigger_code, owner_node, priority, created_at, dispatched_at, \
         finished_at FROM tw_runs WHERE id = ?",
    )
    .bind(on_time.id)
    .execute(&pool)
    .await
    .expect("a second run of the fire");
    pool.close().await;
    let doc = drive_until(&clock, next + 60_000, "a fires_doubled alarm", || async {
        fire_events(&rx, "doubled").into_iter().next()
    })
    .await;
    assert_eq!(doc["job"]["id"], job, "{doc}");
    assert_eq!(doc["alert"]["fires"], 1);
    assert_eq!(doc["alert"]["first_at"], next);

    // Time goes on: the same fires never alarm again.
    let seen = checks.load(Ordering::SeqCst);
    drive_until(&clock, next + 120_000, "three more rounds", || async {
        (checks.load(Ordering::SeqCst) >= seen + 3).then_some(())
    })
    .await;
    assert_eq!(fire_events(&rx, "late").len(), 1, "{:?}", rx.all());
    assert_eq!(fire_events(&rx, "doubled").len(), 1, "{:?}", rx.all());
    assert!(fire_events(&rx, "missed").is_empty(), "{:?}", rx.all());
    assert_eq!(metric(&api, "tickwork_fires_late_total").await, 1);
    assert_eq!(metric(&api, "tickwork_fires_doubled_total").await, 1);
    assert_eq!(executor.count(on_time.id), 1);

    admin.shutdown().await;
    let _ = executor.executor.shutdown_and_wait().await;
    db.drop_database().await;
}
