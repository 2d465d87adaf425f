//! The harness of the admin's cluster tests: a fresh database per test on every backend,
//! admins and executors as real child processes, an in-process executor that counts what it
//! runs, and the JSON API. Waits, child processes, outages and the webhook receiver are
//! `tickwork-testkit`'s.
//!
//! Child processes are this very test binary started again in a child role (the ignored test
//! `child` of each test file, told its role by `TW_CHILD_ROLE`): a real process that runs the
//! admin exactly as `tickwork admin` does (`Admin::start`, the HTTP server, a clean shutdown on
//! SIGTERM), built from the code under test rather than from a binary that may be stale. A
//! child runs in a process group of its own, which is killed when the test drops it, and also
//! exits when its stdin closes, so none outlives a test that dies.
//!
//! Databases come from `tickwork-testkit`: `CREATE DATABASE tw_<pid>_<random>` on the server
//! named by `TICKWORK_TEST_POSTGRES` / `TICKWORK_TEST_MYSQL` (defaults: the local test servers),
//! dropped afterwards. An unreachable server skips the test with a loud banner, or fails it
//! when `CI` is set. On MySQL/MariaDB each database also gets a user of its own, for outages.

#![allow(dead_code)]

pub(crate) mod java_like;
pub(crate) mod xxl35;

use std::collections::HashMap;
use std::io::Write;
use std::ops::{Deref, DerefMut};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tickwork_admin::config::ConfigFile;
use tickwork_admin::{Admin, Running};
use tickwork_executor::{Executor as SdkExecutor, JobContext, JobOutcome, RunningExecutor};
use tickwork_store::{PageReq, Run, RunFilter, Store, StoreOptions, TimeRange};
use tickwork_testkit::{Outage, Process, Wait};
use tokio_util::sync::CancellationToken;

pub(crate) use tickwork_testkit::Backend;
pub(crate) use tickwork_testkit::clock::{now_ms, sleep_until_ms};

pub(crate) const API_TOKEN: &str = "cluster-test-api-token";

/// Writes a line to the real stderr: figures a passing test reports.
pub(crate) fn report(line: impl AsRef<str>) {
    let _ = writeln!(std::io::stderr(), "{}", line.as_ref());
}

// ---- databases ----

/// A fresh database (from `tickwork-testkit`) and the test's executor token, dropped by
/// [`TestDb::drop_database`] (or, after a panic, on drop).
pub(crate) struct TestDb {
    pub backend: Backend,
    /// What the admins connect with.
    pub url: String,
    /// The executors' access token of this test: one per database, so that an executor never
    /// talks to an admin of another test (a dead admin's port can be handed out again).
    pub token: String,
    db: tickwork_testkit::TestDb,
    /// PostgreSQL and MySQL: the outage a test can start (on MySQL the admins connect as the
    /// database's own user, which the outage locks).
    outage: Option<Outage>,
}

impl TestDb {
    /// A fresh database on `backend`, or `None` (after a loud banner) when its server is not
    /// reachable outside CI.
    pub(crate) async fn create(backend: Backend) -> Option<TestDb> {
        let mut db = tickwork_testkit::TestDb::create(backend, "tw").await?;
        let (outage, url) = if backend == Backend::Sqlite {
            (None, db.url().to_owned())
        } else {
            let (outage, url) = Outage::prepare(&mut db).await;
            (Some(outage), url)
        };
        Some(TestDb {
            backend,
            url,
            token: new_token(),
            db,
            outage,
        })
    }

    /// Opens a store on the database (and applies the migrations).
    pub(crate) async fn store(&self) -> Arc<dyn Store> {
        let options = StoreOptions {
            max_connections: Some(5),
            ..StoreOptions::default()
        };
        tickwork_store::connect(&self.url, &options)
            .await
            .expect("open the test database")
    }

    /// The database's outage: [`Outage::take_down`] makes it refuse every connection and ends
    /// the open ones, [`Outage::bring_back`] ends the outage. Panics for SQLite.
    pub(crate) fn outage(&self) -> &Outage {
        self.outage.as_ref().expect("no outage for SQLite")
    }

    pub(crate) async fn drop_database(self) {
        self.db.drop_database().await;
    }
}

fn new_token() -> String {
    format!("token-{:016x}", fastrand::u64(..))
}

// ---- child processes ----

/// A child process of this test binary in an admin or executor role, killed (with its process
/// group) when dropped; its [`Process`] (signals, exit, output) is reached through it.
pub(crate) struct Child {
    pub name: String,
    /// The admin's base URL, or the executor's registered address.
    pub address: String,
    process: Process,
}

impl Deref for Child {
    type Target = Process;
    fn deref(&self) -> &Process {
        &self.process
    }
}

impl DerefMut for Child {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}

impl Child {
    /// Starts an admin on `db_url` as node `node_id`. `toml` is laid over the admin's
    /// configuration (the `[cluster]`, `[monitor]`, ... sections of `tickwork admin`'s file).
    pub(crate) async fn admin(
        logs: &tempfile::TempDir,
        node_id: &str,
        db: &TestDb,
        toml: &str,
    ) -> Child {
        Child::admin_with(logs, node_id, db, toml, None, &[]).await
    }

    /// As [`Child::admin`], listening on `listen` (an `ip:port`) when given, with `env` set.
    pub(crate) async fn admin_with(
        logs: &tempfile::TempDir,
        node_id: &str,
        db: &TestDb,
        toml: &str,
        listen: Option<&str>,
        env: &[(&str, &str)],
    ) -> Child {
        let mut cmd = child_command("admin", &db.token);
        cmd.env("TW_DB_URL", &db.url)
            .env("TW_NODE_ID", node_id)
            .env("TW_ADMIN_TOML", toml);
        if let Some(listen) = listen {
            cmd.env("TW_LISTEN", listen);
        }
        cmd.envs(env.iter().copied());
        Child::start(node_id, cmd, logs).await
    }

    /// Starts an SDK executor of `app` registering with `admins` (comma-separated), with a
    /// `slow` handler that sleeps for its params (a duration) and a `count` handler.
    pub(crate) async fn executor(
        logs: &tempfile::TempDir,
        name: &str,
        app: &str,
        admins: &str,
        token: &str,
    ) -> Child {
        let mut cmd = child_command("executor", token);
        cmd.env("TW_APP", app)
            .env("TW_ADMINS", admins)
            .env("TW_EXECUTOR_LOGS", logs.path().join(format!("{name}-runs")));
        Child::start(name, cmd, logs).await
    }

    /// Starts the child and waits for its `TW-READY <address>` line. Its output goes to
    /// `<logs>/<name>.log` too.
    async fn start(name: &str, cmd: Command, logs: &tempfile::TempDir) -> Child {
        let process = Process::builder(name, cmd)
            .log(logs.path().join(format!("{name}.log")))
            .start();
        let address = process
            .wait_for_line("its TW-READY line", Duration::from_secs(60), |line| {
                // libtest may have printed `test child ... ` on the same line.
                let i = line.find("TW-READY ")?;
                Some(line[i + "TW-READY ".len()..].trim().to_owned())
            })
            .await;
        Child {
            name: name.to_owned(),
            address,
            process,
        }
    }
}

fn child_command(role: &str, token: &str) -> Command {
    let exe = std::env::current_exe().expect("the test executable");
    let mut cmd = Command::new(exe);
    cmd.args([
        "child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("TW_CHILD_ROLE", role)
    .env("TW_TOKEN", token)
    .env(
        "RUST_LOG",
        std::env::var("TW_CHILD_LOG").unwrap_or_else(|_| "info,sqlx=warn".to_owned()),
    );
    cmd
}

/// The body of the ignored `child` test: does nothing unless started as a child.
pub(crate) fn child_main() {
    let Ok(role) = std::env::var("TW_CHILD_ROLE") else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    // The parent holds our stdin: when it goes away, so do we.
    std::thread::spawn(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
        std::process::exit(3);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let code = rt.block_on(async {
        match role.as_str() {
            "admin" => child_admin().await,
            "executor" => child_executor().await,
            other => panic!("unknown child role {other}"),
        }
    });
    std::process::exit(code);
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn ready(address: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\nTW-READY {address}");
    let _ = out.flush();
}

async fn child_admin() -> i32 {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    let mut file: ConfigFile = toml::from_str(&env("TW_ADMIN_TOML")).expect("admin toml");
    file.database_url = Some(env("TW_DB_URL"));
    file.node_id = Some(env("TW_NODE_ID"));
    file.access_token = Some(env("TW_TOKEN"));
    file.api_token = Some(API_TOKEN.to_owned());
    file.listen = Some("127.0.0.1:0".to_owned());
    let config = file.into_config().expect("admin config");
    // As `tickwork admin`: the database ends a silent transaction of this admin (a paused
    // process) in time for the others to take over.
    let options = StoreOptions {
        max_connections: Some(6),
        session_bounds: config.cluster.session_bounds(),
        ..StoreOptions::default()
    };
    let store = tickwork_store::connect(&config.database_url, &options)
        .await
        .expect("admin database");
    let listen = std::env::var("TW_LISTEN").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .expect("admin listener");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let running = tickwork_admin::start(config, store.clone())
        .await
        .expect("admin start");
    let stop = CancellationToken::new();
    let server = tokio::spawn(tickwork_admin::http::serve(
        running.admin.clone(),
        listener,
        stop.clone(),
    ));
    ready(&address);
    terminate.recv().await;
    tracing::info!("SIGTERM: shutting down");
    stop.cancel();
    let _ = server.await;
    running.shutdown().await;
    store.close().await;
    0
}

async fn child_executor() -> i32 {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    let executor = SdkExecutor::builder(env("TW_APP"))
        .admin_addresses(&env("TW_ADMINS"))
        .access_token(env("TW_TOKEN"))
        .listen("127.0.0.1:0".parse().expect("address"))
        .log_folder(env("TW_EXECUTOR_LOGS"))
        .registry_interval(Duration::from_millis(500))
        .handler("slow", tickwork_executor::builtin::SleepHandler)
        .handler("count", |_ctx: JobContext| async move {
            Ok(JobOutcome::success())
        })
        .start()
        .await
        .expect("executor start");
    ready(executor.address());
    terminate.recv().await;
    let _ = executor.shutdown_and_wait().await;
    0
}

// ---- in-process pieces ----

/// An SDK executor in this process whose `count`, `slow`, `fail`, `long` and `context`
/// handlers record every execution by run id (`slow` also sleeps 200 ms, `long` two minutes;
/// `fail` fails with "disk full on /data"; `context` adds `rows = 42` to a workflow's context).
pub(crate) struct CountingExecutor {
    pub executor: RunningExecutor,
    pub executions: Arc<Mutex<HashMap<i64, u32>>>,
    _dir: tempfile::TempDir,
}

impl CountingExecutor {
    pub(crate) async fn start(app: &str, admins: &[String], token: &str) -> CountingExecutor {
        Self::start_as(app, admins, token, false).await
    }

    /// The same executor in pull mode: no port; it dials the first admin it can reach.
    pub(crate) async fn start_pull(app: &str, admins: &[String], token: &str) -> CountingExecutor {
        Self::start_as(app, admins, token, true).await
    }

    async fn start_as(app: &str, admins: &[String], token: &str, pull: bool) -> CountingExecutor {
        let dir = tempfile::tempdir().expect("executor folder");
        let executions = Arc::new(Mutex::new(HashMap::new()));
        let seen = executions.clone();
        let slow_seen = executions.clone();
        let fail_seen = executions.clone();
        let long_seen = executions.clone();
        let context_seen = executions.clone();
        let mut builder = SdkExecutor::builder(app);
        builder = if pull {
            builder.pull(&admins.join(","))
        } else {
            builder
                .admin_addresses(&admins.join(","))
                .listen("127.0.0.1:0".parse().expect("address"))
        };
        let executor = builder
            .access_token(token)
            .log_folder(dir.path())
            .registry_interval(Duration::from_millis(500))
            .callback_retry(Duration::from_millis(300), Duration::from_secs(2))
            .handler("count", move |ctx: JobContext| {
                *seen.lock().unwrap().entry(ctx.log_id()).or_default() += 1;
                async move { Ok(JobOutcome::success()) }
            })
            .handler("slow", move |ctx: JobContext| {
                *slow_seen.lock().unwrap().entry(ctx.log_id()).or_default() += 1;
                async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(JobOutcome::success())
                }
            })
            .handler("fail", move |ctx: JobContext| {
                *fail_seen.lock().unwrap().entry(ctx.log_id()).or_default() += 1;
                async move { Ok(JobOutcome::failure("disk full on /data")) }
            })
            .handler("long", move |ctx: JobContext| {
                *long_seen.lock().unwrap().entry(ctx.log_id()).or_default() += 1;
                async move {
                    tokio::time::sleep(Duration::from_secs(120)).await;
                    Ok(JobOutcome::success())
                }
            })
            .handler("context", move |ctx: JobContext| {
                *context_seen
                    .lock()
                    .unwrap()
                    .entry(ctx.log_id())
                    .or_default() += 1;
                async move {
                    Ok(JobOutcome::success_with(
                        "loaded\ntickwork-context: {\"rows\": \"42\"}",
                    ))
                }
            })
            .start()
            .await
            .expect("executor start");
        CountingExecutor {
            executor,
            executions,
            _dir: dir,
        }
    }

    pub(crate) fn address(&self) -> String {
        self.executor.address().to_owned()
    }

    /// Run ids executed more than once, with their counts.
    pub(crate) fn doubles(&self) -> Vec<(i64, u32)> {
        doubles(&self.executions)
    }

    pub(crate) fn count(&self, run_id: i64) -> u32 {
        count(&self.executions, run_id)
    }
}

/// An admin in this process, serving HTTP on a free port.
pub(crate) struct InProcessAdmin {
    pub running: Option<Running>,
    pub admin: Admin,
    /// The admin's database, for checks of what it recorded.
    pub store: Arc<dyn Store>,
    pub address: String,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl InProcessAdmin {
    pub(crate) async fn start(db: &TestDb, node_id: &str, toml: &str) -> InProcessAdmin {
        let clock = tickwork_admin::clock::Clock::system();
        InProcessAdmin::start_with_clock(db, node_id, toml, clock).await
    }

    /// As [`InProcessAdmin::start`], the pipeline on `clock`.
    pub(crate) async fn start_with_clock(
        db: &TestDb,
        node_id: &str,
        toml: &str,
        clock: tickwork_admin::clock::Clock,
    ) -> InProcessAdmin {
        // `TW_TEST_LOG=debug` shows what the in-process admins do.
        if let Ok(filter) = std::env::var("TW_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let mut file: ConfigFile = toml::from_str(toml).expect("admin toml");
        file.database_url = Some(db.url.clone());
        file.node_id = Some(node_id.to_owned());
        file.access_token = Some(db.token.clone());
        file.api_token = Some(API_TOKEN.to_owned());
        file.listen = Some("127.0.0.1:0".to_owned());
        let config = file.into_config().expect("admin config");
        let options = StoreOptions {
            max_connections: Some(5),
            session_bounds: config.cluster.session_bounds(),
            ..StoreOptions::default()
        };
        let store = tickwork_store::connect(&db.url, &options)
            .await
            .expect("open the test database");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("admin listener");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        let running = tickwork_admin::start_with_clock(config, store.clone(), clock)
            .await
            .expect("admin start");
        let admin = running.admin.clone();
        let stop = CancellationToken::new();
        let server = tokio::spawn(tickwork_admin::http::serve(
            admin.clone(),
            listener,
            stop.clone(),
        ));
        InProcessAdmin {
            running: Some(running),
            admin,
            store,
            address,
            stop,
            server,
        }
    }

    /// Sets `clock` (this admin's manual clock) to `at`, wakes the claim (its pause counts from
    /// its last round) and waits up to `wait` for a claim round that saw the new time: whatever
    /// that round planned is armed.
    pub(crate) async fn move_clock_to(
        &self,
        clock: &tickwork_admin::clock::ManualClock,
        at: i64,
        wait: Duration,
    ) {
        use std::sync::atomic::Ordering;
        clock.set(at);
        let scheduler = &self.admin.scheduler;
        tickwork_admin::PipelineHandle::wake(scheduler);
        let stats = scheduler.stats();
        tickwork_testkit::wait_until("a claim round at the new time", wait, || async {
            (stats.last_claim_at.load(Ordering::SeqCst) >= at).then_some(())
        })
        .await;
    }

    /// A clean shutdown, as on SIGTERM.
    pub(crate) async fn shutdown(mut self) {
        self.stop.cancel();
        let _ = (&mut self.server).await;
        if let Some(running) = self.running.take() {
            running.shutdown().await;
        }
        self.store.close().await;
    }

    /// An abrupt end: every task is aborted, nothing is cleaned up (the heartbeat row and the
    /// lease stay until they expire).
    pub(crate) fn crash(mut self) {
        self.server.abort();
        drop(self.running.take());
    }
}

// ---- the JSON API ----

/// The counter `name` in a `/metrics` text (its line `name value`), if it is there.
pub(crate) fn counter(metrics: &str, name: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A client of one admin's JSON API and health endpoints.
#[derive(Clone)]
pub(crate) struct Api {
    pub base: String,
    http: reqwest::Client,
}

impl Api {
    pub(crate) fn new(base: &str) -> Api {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Api {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
        }
    }

    /// `POST /openapi/v1/<path>`, expecting success.
    pub(crate) async fn post(&self, path: &str, body: Value) -> Value {
        let url = format!("{}/openapi/v1/{path}", self.base);
        let resp = self
            .http
            .post(&url)
            .bearer_auth(API_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {url}: {e:?}"));
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert!(status.is_success(), "POST {url}: {status}: {text}");
        serde_json::from_str(&text).expect("json answer")
    }

    /// `<method> /openapi/v1/<path>` with an optional JSON body: the status and the JSON answer.
    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}/openapi/v1/{path}", self.base);
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, &url).bearer_auth(API_TOKEN);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// `GET <path>` (a path from the root), its status and body.
    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let url = format!("{}{path}", self.base);
        match self.http.get(&url).send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                (status, resp.text().await.unwrap_or_default())
            }
            Err(e) => (0, e.to_string()),
        }
    }

    /// `n` started jobs of `group` due every second with the `count` handler: their ids and
    /// creation instants.
    pub(crate) async fn every_second_jobs(&self, group: i64, n: usize) -> Vec<(i64, i64)> {
        let mut jobs = Vec::with_capacity(n);
        for i in 0..n {
            let job = self
                .post(
                    "jobs",
                    serde_json::json!({
                        "group_id": group,
                        "description": format!("every second {i}"),
                        "schedule_type": "CRON",
                        "schedule_conf": "* * * * * ?",
                        "handler": "count",
                        "start": true,
                    }),
                )
                .await;
            jobs.push((
                job["id"].as_i64().expect("job id"),
                job["created_at"].as_i64().expect("created_at"),
            ));
        }
        jobs
    }

    /// Stops every job of `ids`.
    pub(crate) async fn stop_jobs(&self, ids: impl IntoIterator<Item = i64>) {
        for id in ids {
            self.post(&format!("jobs/{id}/stop"), serde_json::json!({}))
                .await;
        }
    }

    /// `GET /runs/{run}`, expecting it to exist.
    pub(crate) async fn run(&self, run: i64) -> Value {
        let (status, body) = self.call("GET", &format!("runs/{run}"), None).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Waits (up to a minute) until run `run` is in `state`; the run then.
    pub(crate) async fn run_reaches(&self, run: i64, state: &str) -> Value {
        tickwork_testkit::wait_until(
            &format!("run {run} to be {state}"),
            Duration::from_secs(60),
            || async {
                let r = self.run(run).await;
                if r["state"] == state {
                    Ok(r)
                } else {
                    Err(r["state"].clone())
                }
            },
        )
        .await
    }

    /// Fires job `job` once now through the API: the run's id.
    pub(crate) async fn trigger(&self, job: i64) -> i64 {
        self.post(&format!("jobs/{job}/trigger"), serde_json::json!({}))
            .await["id"]
            .as_i64()
            .expect("run id")
    }

    /// Creates an auto group of `app` and returns its id.
    pub(crate) async fn group(&self, app: &str) -> i64 {
        let g = self
            .post(
                "groups",
                serde_json::json!({ "app_name": app, "title": app }),
            )
            .await;
        g["id"].as_i64().expect("group id")
    }
}

// ---- reading and waiting ----

/// A listener on a free loopback port for a test's own executor, and its address as an admin
/// calls it; with the TLS provider its `reqwest` clients need (built without a default one:
/// rustls with ring, as the admin).
pub(crate) async fn executor_listener() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}/", listener.local_addr().expect("address"));
    let _ = rustls::crypto::ring::default_provider().install_default();
    (listener, address)
}

/// The last lines of each child's output, for a failure message.
pub(crate) fn tails(children: &[Child]) -> String {
    children
        .iter()
        .map(|c| format!("--- {}:\n{}", c.name, c.tail(30)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Run ids executed more than once in `executions`, with their counts.
pub(crate) fn doubles(executions: &Mutex<HashMap<i64, u32>>) -> Vec<(i64, u32)> {
    let mut d: Vec<(i64, u32)> = executions
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, n)| (*id, *n))
        .collect();
    d.sort_unstable();
    d
}

/// How often `executions` saw run `run_id`.
pub(crate) fn count(executions: &Mutex<HashMap<i64, u32>>, run_id: i64) -> u32 {
    executions
        .lock()
        .unwrap()
        .get(&run_id)
        .copied()
        .unwrap_or(0)
}

/// Waits (up to 30 s) until the registry lists the executor at `address`.
pub(crate) async fn registered(store: &dyn Store, address: &str) {
    tickwork_testkit::wait_until(
        "the executor's registration",
        Duration::from_secs(30),
        || async {
            let rows = store.registry_list().await.ok()?;
            rows.iter().any(|r| r.address == address).then_some(())
        },
    )
    .await;
}

/// Every run of `job_id` (or of all jobs), oldest first.
pub(crate) async fn runs_of(store: &dyn Store, job_id: Option<i64>) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut offset = 0;
    loop {
        let page = store
            .runs_list(RunFilter {
                job_id,
                page: PageReq {
                    offset,
                    limit: PageReq::MAX_LIMIT,
                },
                ..RunFilter::default()
            })
            .await
            .expect("list runs");
        let n = page.items.len() as u64;
        runs.extend(page.items);
        offset += n;
        if n < PageReq::MAX_LIMIT {
            break;
        }
    }
    runs.reverse();
    runs
}

/// Waits (up to 120 s) until every run scheduled up to `cut` (epoch ms) is final; the runs
/// still pending when it gives up.
pub(crate) async fn settled_until(store: &dyn Store, cut: i64) -> Result<(), Vec<Run>> {
    let range = TimeRange {
        from: None,
        to: Some(cut + 1),
    };
    // Every 200 ms at most: each check counts the runs of a busy database.
    let settled = Wait::new("the runs up to the cut to end", Duration::from_secs(120))
        .every(Duration::from_millis(200))
        .try_until(|| async {
            let counts = store.runs_state_counts(range).await.ok()?;
            counts
                .iter()
                .all(|(state, _)| state.is_final())
                .then_some(())
        })
        .await;
    if settled.is_ok() {
        return Ok(());
    }
    Err(runs_of(store, None)
        .await
        .into_iter()
        .filter(|r| r.scheduled_at <= cut && !r.state.is_final())
        .collect())
}

/// Held while a heavy scenario (several admin processes under load) runs: one at a time on
/// the machine, whether the tests run in one process (`cargo test`) or one process each
/// (`cargo nextest`). A file lock, released when the guard is dropped (or the process dies).
pub(crate) struct Serial(#[allow(dead_code)] std::fs::File);

pub(crate) async fn serial() -> Serial {
    let path = std::env::temp_dir().join("tickwork-admin-cluster-tests.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .expect("lock file");
    tokio::task::spawn_blocking(move || {
        file.lock().expect("lock the scenario lock file");
        Serial(file)
    })
    .await
    .expect("lock task")
}

/// A folder for the children's logs; kept (and named on stderr) when `TW_KEEP_LOGS` is set.
pub(crate) fn log_dir() -> tempfile::TempDir {
    let mut dir = tempfile::tempdir().expect("log folder");
    if std::env::var_os("TW_KEEP_LOGS").is_some() {
        dir.disable_cleanup(true);
        report(format!("child logs kept in {}", dir.path().display()));
    }
    dir
}

/// A duration from an environment variable in seconds, or `default`.
pub(crate) fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Takes run `run_id` through the send fence as its owner does before `/run` (`planned ->
/// sending`); returns the owner.
pub(crate) async fn begin_send(store: &dyn tickwork_store::Store, run_id: i64) -> String {
    let run = store.run_get(run_id).await.expect("run");
    let node = run.owner_node.expect("a run is sent by its owner");
    let send = tickwork_store::BeginSend {
        node_id: node.clone(),
        run_ids: vec![run_id],
        live_since: None,
    };
    let moved = store.runs_begin_send(send).await.expect("send fence");
    assert_eq!(moved, [run_id], "run {run_id} moved to sending");
    node
}

/// Records that `address` accepted run `run_id`, as the ledger of its owner does after
/// `/run` (through the send fence first).
pub(crate) async fn mark_dispatched(
    store: &dyn tickwork_store::Store,
    run_id: i64,
    address: &str,
    at: i64,
) {
    let node = begin_send(store, run_id).await;
    let batch = tickwork_store::MarkDispatched {
        node_id: node,
        runs: vec![tickwork_store::Dispatched {
            run_id,
            address: address.to_owned(),
            trigger_code: 200,
            trigger_msg: None,
            at,
        }],
    };
    assert_eq!(
        store.runs_mark_dispatched(batch).await.expect("dispatch"),
        1
    );
}
