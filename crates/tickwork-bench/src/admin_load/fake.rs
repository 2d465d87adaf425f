//! `--executor fake`: a minimal XXL-JOB executor inside the bench process. It registers with
//! the admins as an executor does, answers `/run` at once with success, records when each run
//! arrived, and posts the results back to `/api/callback` in batches, so that the admin's
//! dispatch and callback paths are measured without an executor SDK's own costs (worker per
//! job, run log file per run) on the same cores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use tickwork_protocol::{
    ACCESS_TOKEN_HEADER, CODE_SUCCESS, Envelope, HandleCallbackParam, RegistryParam, TriggerParam,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::stats::Arrival;

mod server;

pub(crate) use server::FakeServer;

/// Registration period: within the 10-30 s of XXL-JOB executors (the admin drops an executor
/// not seen for 90 s).
const REGISTRY_EVERY: Duration = Duration::from_secs(15);
/// Results are posted at least this often...
const CALLBACK_EVERY: Duration = Duration::from_millis(150);
/// ...and as soon as this many are waiting.
const CALLBACK_BATCH: usize = 1000;
/// Most results in one post: what is waiting goes at once, as XXL-JOB 2.x-3.4 executors post
/// their whole queue, bounded so that a body stays well within the admin's 5 MiB limit.
const CALLBACK_MAX: usize = 20_000;
/// Timeout of one call to an admin.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the final flush may try to deliver the last results.
const FLUSH_MAX: Duration = Duration::from_secs(30);

/// What the server's handlers share.
struct Shared {
    token: String,
    records: Mutex<Vec<Arrival>>,
    pending: Mutex<Vec<HandleCallbackParam>>,
    arrivals: Arc<AtomicU64>,
    /// Wakes the callback sender when a full batch is waiting.
    batch_ready: Notify,
    /// Whether there are admins to register with and post results to (none in `floor.rs`).
    has_admins: bool,
}

/// One fake executor: its server, its registration loop and its callback sender.
pub(super) struct FakeExecutor {
    pub name: String,
    pub address: String,
    /// Runs seen so far (the live counter the sampler and `settle` read).
    pub arrivals: Arc<AtomicU64>,
    /// Results the admins accepted.
    pub callbacks_sent: Arc<AtomicU64>,
    shared: Arc<Shared>,
    admin: AdminCalls,
    app: String,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Calls to the admins, tried in order until one answers code 200.
#[derive(Clone)]
struct AdminCalls {
    http: reqwest::Client,
    bases: Vec<String>,
    token: String,
}

impl AdminCalls {
    async fn call(&self, method: &str, body: Vec<u8>) -> anyhow::Result<()> {
        let mut reasons = Vec::new();
        for base in &self.bases {
            let url = format!("{}/api/{method}", base.trim_end_matches('/'));
            let sent = self
                .http
                .post(&url)
                .header("Content-Type", "application/json;charset=UTF-8")
                .header(ACCESS_TOKEN_HEADER, &self.token)
                .body(body.clone())
                .send()
                .await;
            let answer = match sent {
                Ok(r) => r.bytes().await.map_err(anyhow::Error::from),
                Err(e) => Err(e.into()),
            };
            match answer.map(|b| serde_json::from_slice::<Envelope>(&b)) {
                Ok(Ok(env)) if env.code == CODE_SUCCESS => return Ok(()),
                Ok(Ok(env)) => reasons.push(format!("{url}: code {} {:?}", env.code, env.msg)),
                Ok(Err(e)) => reasons.push(format!("{url}: odd answer: {e}")),
                Err(e) => reasons.push(format!("{url}: {e:#}")),
            }
        }
        anyhow::bail!("{method} refused: {}", reasons.join("; "))
    }
}

/// What starting a fake executor needs.
pub(super) struct FakeSpec<'a> {
    pub index: usize,
    pub admins: &'a [String],
    pub token: &'a str,
    pub app: &'a str,
    pub server: FakeServer,
}

/// Starts a fake executor on a free loopback port and registers it with `spec.admins`; with
/// none, it only answers and records `/run`.
pub(super) async fn start(spec: FakeSpec<'_>) -> anyhow::Result<FakeExecutor> {
    let name = format!("fake-executor-{}", spec.index);
    let shared = Arc::new(Shared {
        token: spec.token.to_owned(),
        records: Mutex::new(Vec::with_capacity(1 << 16)),
        pending: Mutex::new(Vec::new()),
        arrivals: Arc::new(AtomicU64::new(0)),
        batch_ready: Notify::new(),
        has_admins: !spec.admins.is_empty(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = format!("http://{}/", listener.local_addr()?);
    let stop = CancellationToken::new();
    let admin = AdminCalls {
        http: reqwest::Client::builder()
            .timeout(ADMIN_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(20))
            .tcp_nodelay(true)
            .build()
            .context("cannot build the HTTP client")?,
        bases: spec.admins.to_vec(),
        token: spec.token.to_owned(),
    };
    let callbacks_sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let kind = spec.server;
    tasks.push(tokio::spawn({
        let (shared, stop) = (Arc::clone(&shared), stop.clone());
        async move {
            match kind {
                FakeServer::Raw => server::serve(listener, shared, stop).await,
                FakeServer::Axum => {
                    let router = Router::new()
                        .route("/run", post(run))
                        .route("/beat", post(ok))
                        .route("/idleBeat", post(ok))
                        .route("/kill", post(ok))
                        .with_state(shared);
                    let limits = tickwork_serve::Limits {
                        max_connections: 4096,
                        ..Default::default()
                    };
                    let _ = tickwork_serve::serve(listener, router, limits, stop).await;
                }
            }
        }
    }));
    if shared.has_admins {
        register(&admin, spec.app, &address, &name, &stop, &mut tasks).await?;
        tasks.push(tokio::spawn(send_callbacks(
            Arc::clone(&shared),
            admin.clone(),
            stop.clone(),
            Arc::clone(&callbacks_sent),
            name.clone(),
        )));
    }
    Ok(FakeExecutor {
        name,
        address,
        arrivals: Arc::clone(&shared.arrivals),
        callbacks_sent,
        shared,
        admin,
        app: spec.app.to_owned(),
        stop,
        tasks,
    })
}

/// Registers the executor at `address` with the admins once, then every [`REGISTRY_EVERY`]
/// on a task of `tasks` until `stop`.
async fn register(
    admin: &AdminCalls,
    app: &str,
    address: &str,
    name: &str,
    stop: &CancellationToken,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> anyhow::Result<()> {
    let registration = tickwork_protocol::encode(&RegistryParam::executor(app, address));
    // The first registration before returning: the bench waits for the group to list it.
    admin
        .call("registry", registration.clone())
        .await
        .with_context(|| format!("{name} could not register"))?;
    tasks.push(tokio::spawn({
        let (admin, stop, name) = (admin.clone(), stop.clone(), name.to_owned());
        async move {
            let mut tick = tokio::time::interval(REGISTRY_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if let Err(e) = admin.call("registry", registration.clone()).await {
                    eprintln!("{name}: registration failed: {e:#}");
                }
            }
        }
    }));
    Ok(())
}

impl FakeExecutor {
    /// Deregisters, stops the server, posts the results still waiting and returns the records.
    pub(super) async fn finish(self) -> Vec<Arrival> {
        let bye = tickwork_protocol::encode(&RegistryParam::executor(&self.app, &self.address));
        if self.shared.has_admins
            && let Err(e) = self.admin.call("registryRemove", bye).await
        {
            eprintln!("{}: deregistration failed: {e:#}", self.name);
        }
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        // The sender stopped between batches: what is left goes now, retried for a while.
        let left = std::mem::take(&mut *self.shared.pending.lock().expect("pending lock"));
        let t = std::time::Instant::now();
        for chunk in left.chunks(CALLBACK_MAX) {
            let body = tickwork_protocol::encode(&chunk);
            loop {
                match self.admin.call("callback", body.clone()).await {
                    Ok(()) => {
                        self.callbacks_sent
                            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        break;
                    }
                    Err(e) if t.elapsed() > FLUSH_MAX => {
                        eprintln!("{}: {} results lost: {e:#}", self.name, chunk.len());
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
        std::mem::take(&mut *self.shared.records.lock().expect("records lock"))
    }
}

/// Posts the waiting results every [`CALLBACK_EVERY`], or at once when a batch is full; a
/// refused batch is kept and tried again with the next.
async fn send_callbacks(
    shared: Arc<Shared>,
    admin: AdminCalls,
    stop: CancellationToken,
    sent: Arc<AtomicU64>,
    name: String,
) {
    let mut tick = tokio::time::interval(CALLBACK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
            _ = shared.batch_ready.notified() => {}
        }
        loop {
            let batch: Vec<HandleCallbackParam> = {
                let mut p = shared.pending.lock().expect("pending lock");
                let n = p.len().min(CALLBACK_MAX);
                p.drain(..n).collect()
            };
            if batch.is_empty() {
                break;
            }
            match admin
                .call("callback", tickwork_protocol::encode(&batch))
                .await
            {
                Ok(()) => {
                    sent.fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    eprintln!("{name}: callback of {} results failed: {e:#}", batch.len());
                    let mut p = shared.pending.lock().expect("pending lock");
                    p.splice(0..0, batch);
                    break;
                }
            }
            // A partial batch waits for the next tick, unless a full one is there already.
            if shared.pending.lock().expect("pending lock").len() < CALLBACK_BATCH {
                break;
            }
        }
    }
}

impl Shared {
    /// The answer to `/run` with `token` and `body`: accepted at once, the run's arrival
    /// recorded and its result queued for the next callback batch.
    fn on_run(&self, token: Option<&[u8]>, body: &[u8]) -> Vec<u8> {
        let arrived_us = super::child::now_us();
        if token != Some(self.token.as_bytes()) {
            return tickwork_protocol::encode(&Envelope::<()>::fail(
                tickwork_protocol::msg::WRONG_TOKEN,
            ));
        }
        let p: TriggerParam = match tickwork_protocol::decode(body) {
            Ok(p) => p,
            Err(e) => return tickwork_protocol::encode(&Envelope::<()>::fail(e.to_string())),
        };
        self.records.lock().expect("records lock").push(Arrival {
            job_id: i64::from(p.job_id),
            log_id: p.log_id,
            scheduled_at_ms: p.log_date_time,
            arrived_us,
            wire_us: 0,
        });
        self.arrivals.fetch_add(1, Ordering::Relaxed);
        if self.has_admins {
            let full = {
                let mut pending = self.pending.lock().expect("pending lock");
                pending.push(HandleCallbackParam {
                    log_id: p.log_id,
                    log_date_time: p.log_date_time,
                    handle_code: CODE_SUCCESS,
                    handle_msg: None,
                });
                pending.len() >= CALLBACK_BATCH
            };
            if full {
                self.batch_ready.notify_one();
            }
        }
        tickwork_protocol::encode(&Envelope::<()>::success())
    }

    /// The answer to `/beat`, `/idleBeat` and `/kill` with `token`: success (nothing runs here
    /// long enough to be busy).
    fn on_ok(&self, token: Option<&[u8]>) -> Vec<u8> {
        if token != Some(self.token.as_bytes()) {
            return tickwork_protocol::encode(&Envelope::<()>::fail(
                tickwork_protocol::msg::WRONG_TOKEN,
            ));
        }
        tickwork_protocol::encode(&Envelope::<()>::success())
    }
}

fn token_of(headers: &HeaderMap) -> Option<&[u8]> {
    headers.get(ACCESS_TOKEN_HEADER).map(|v| v.as_bytes())
}

/// An answer with the JSON content type executors send.
type Answer = ([(axum::http::header::HeaderName, &'static str); 1], Vec<u8>);

fn answer(body: Vec<u8>) -> Answer {
    (
        [(axum::http::header::CONTENT_TYPE, server::CONTENT_TYPE)],
        body,
    )
}

async fn run(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Answer {
    answer(shared.on_run(token_of(&headers), &body))
}

async fn ok(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Answer {
    answer(shared.on_ok(token_of(&headers)))
}
