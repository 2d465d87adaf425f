//! An accepted run's dispatch record waits for the run's callback (`dispatch.record_hold_ms`):
//! a callback within the hold is written with the record in one update, a callback waiting
//! behind another write took its record when it came, a run still going when the hold ends is
//! recorded `dispatched` on its own, and a record that comes after its run's result is written
//! at once. A real admin on SQLite or PostgreSQL and a real executor; the store's side is the
//! conformance test of `runs_complete_dispatched`.

use crate::support;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use serde_json::{Value, json};
use support::{Api, Backend, CountingExecutor, InProcessAdmin, TestDb};
use tickwork_testkit::wait_until;

/// A hold far beyond a callback of a run that ends at once, even on a loaded machine.
const ADMIN: &str = "[dispatch]\nrecord_hold_ms = 5000\n";
const HOLD: Duration = Duration::from_secs(5);

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
    let quick = new_job(&api, group, "count").await;
    let long = new_job(&api, group, "long").await;

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

/// An executor that calls back before it answers the call (XXL-JOB 3.5 does) left its run
/// ended without the executor that ran it for the whole hold: the record waited for a
/// callback that had already come, and the run's log, read from that executor, could not be
/// asked for meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_record_that_comes_after_its_runs_result_is_written_at_once() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "hold-b", ADMIN).await;
    let api = Api::new(&admin.address);
    let executor = TestExecutor::start("first", &admin.address, &db.token, calls_back_first).await;
    support::registered(admin.store.as_ref(), &executor.address).await;
    let job = new_job(&api, api.group("first").await, "count").await;

    let triggered = Instant::now();
    let run = api.trigger(job).await;
    // The result was recorded before the executor answered the call.
    api.run_reaches(run, "succeeded").await;
    wait_until(
        "the run's dispatch record",
        Duration::from_secs(30),
        || async {
            let run = api.run(run).await;
            run["executor_address"].is_string().then_some(run)
        },
    )
    .await;
    let recorded_after = triggered.elapsed();
    assert!(
        recorded_after < HOLD,
        "the record was held {recorded_after:?} though its run had ended"
    );
    has_record(&api.run(run).await, &executor.address);
    counters_reach(&api, (1, 0)).await;
    executor.stop();
    admin.shutdown().await;
    db.drop_database().await;
}

/// A callback that waited for the results writer behind another long write (another
/// executor's callback, on a loaded database) left its run's record held until its own write
/// began, and a hold that ended meanwhile wrote the record alone: one more update of the run.
/// Here run a's row is locked, so the write of a's result waits; b's callback comes meanwhile,
/// and b's hold would end before a's write can.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callback_waiting_behind_a_long_write_takes_its_record_when_it_comes() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "hold-c", ADMIN).await;
    let api = Api::new(&admin.address);
    let executor = TestExecutor::start("later", &admin.address, &db.token, answers_at_once).await;
    support::registered(admin.store.as_ref(), &executor.address).await;
    let job = new_job(&api, api.group("later").await, "count").await;
    let pool = sqlx::PgPool::connect(&db.url).await.expect("connect");

    let run_a = api.trigger(job).await;
    held_records_reach(&api, 1).await;
    let mut lock = pool.begin().await.expect("begin");
    sqlx::query("SELECT id FROM tw_runs WHERE id = $1 FOR UPDATE")
        .bind(run_a)
        .execute(&mut *lock)
        .await
        .expect("lock run a");
    let caller = executor.caller.clone();
    let first = tokio::spawn(async move { caller.post("callback", result(run_a)).await });
    wait_until(
        "the write of a's result to wait for a's row",
        Duration::from_secs(30),
        || async {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&pool)
            .await
            .expect("pg_stat_activity");
            (waiting > 0).then_some(())
        },
    )
    .await;
    held_records_reach(&api, 0).await;

    let run_b = api.trigger(job).await;
    held_records_reach(&api, 1).await;
    let caller = executor.caller.clone();
    let second = tokio::spawn(async move { caller.post("callback", result(run_b)).await });
    // Taken at once by the callback; before, it waited here for its hold to end.
    held_records_reach(&api, 0).await;
    lock.rollback().await.expect("unlock run a");

    assert!(first.await.expect("a's callback"), "a's result refused");
    assert!(second.await.expect("b's callback"), "b's result refused");
    for run in [run_a, run_b] {
        has_record(&api.run_reaches(run, "succeeded").await, &executor.address);
    }
    counters_reach(&api, (2, 2)).await;
    executor.stop();
    admin.shutdown().await;
    pool.close().await;
    db.drop_database().await;
}

/// A job of `group` that runs `handler` (and is described by it): its id.
async fn new_job(api: &Api, group: i64, handler: &str) -> i64 {
    let body = json!({"group_id": group, "description": handler, "handler": handler});
    api.post("jobs", body).await["id"].as_i64().expect("job id")
}

/// A successful result of `run`, as an executor's callback carries it.
fn result(run: i64) -> Value {
    json!([{"logId": run, "logDateTim": 0, "handleCode": 200, "handleMsg": "done"}])
}

/// Waits until the admin holds `n` dispatch records for their callbacks.
async fn held_records_reach(api: &Api, n: u64) {
    wait_until(
        "the dispatch records held",
        Duration::from_secs(30),
        || async {
            let held = support::counter(&metrics(api).await, "tickwork_dispatch_records_held");
            if held == Some(n) { Ok(()) } else { Err(held) }
        },
    )
    .await;
}

/// An executor this test serves: its address, its caller of the admin's executor API, and the
/// tasks to abort when it stops.
struct TestExecutor {
    address: String,
    caller: Caller,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl TestExecutor {
    /// Serves the router `routes` builds on its caller as the executor `app`, registered with
    /// `admin`.
    async fn start(
        app: &str,
        admin: &str,
        token: &str,
        routes: fn(Caller) -> Router,
    ) -> TestExecutor {
        let caller = Caller::new(admin, token);
        let router = routes(caller.clone());
        let (listener, address) = support::executor_listener().await;
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let (app, at, registrar) = (app.to_owned(), address.clone(), caller.clone());
        let registering = tokio::spawn(async move {
            let body =
                json!({"registryGroup": "EXECUTOR", "registryKey": app, "registryValue": at});
            loop {
                registrar.post("registry", body.clone()).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        TestExecutor {
            address,
            caller,
            tasks: vec![serving, registering],
        }
    }

    fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Every call answered at once; results only when the test posts them.
fn answers_at_once(_: Caller) -> Router {
    Router::new().route("/{*method}", axum::routing::post(|| async { accepted() }))
}

/// `/run` answered only once the run's result has been taken by the admin.
fn calls_back_first(caller: Caller) -> Router {
    Router::new()
        .route("/{*method}", axum::routing::post(answer))
        .with_state(caller)
}

/// An executor's answer that it took the call.
fn accepted() -> String {
    json!({"code": 200, "msg": null}).to_string()
}

#[derive(Clone)]
struct Caller {
    admin: String,
    token: String,
    http: reqwest::Client,
}

impl Caller {
    fn new(admin: &str, token: &str) -> Caller {
        Caller {
            admin: admin.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    /// `POST <admin>/api/<call>`: whether the admin answered with success.
    async fn post(&self, call: &str, body: Value) -> bool {
        let sent = self
            .http
            .post(format!("{}/api/{call}", self.admin))
            .header("XXL-JOB-ACCESS-TOKEN", &self.token)
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(r) => r.json::<Value>().await.is_ok_and(|v| v["code"] == 200),
            Err(_) => false,
        }
    }
}

async fn answer(
    State(caller): State<Caller>,
    Path(method): Path<String>,
    body: axum::body::Bytes,
) -> String {
    if method == "run" {
        let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let result = json!([{
            "logId": call["logId"],
            "logDateTim": call["logDateTime"],
            "handleCode": 200,
            "handleMsg": "called back first",
        }]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !caller.post("callback", result.clone()).await {
            assert!(Instant::now() < deadline, "the admin never took the result");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    accepted()
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
    let text = metrics(api).await;
    let read = |name: &str| -> u64 {
        support::counter(&text, name).unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    };
    (
        read("tickwork_runs_dispatched_total"),
        read("tickwork_runs_dispatched_with_result_total"),
    )
}

/// The admin's `/metrics` text.
async fn metrics(api: &Api) -> String {
    let (status, text) = api.get("/metrics").await;
    assert_eq!(status, 200, "{text}");
    text
}
