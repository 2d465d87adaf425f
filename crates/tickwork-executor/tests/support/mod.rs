//! Test support: an admin-side HTTP receiver that records what executors send, a client that
//! plays the admin calling an executor, and test handlers that tests can hold and release.
//! Waits are `tickwork-testkit`'s ([`wait_until_sync`] with [`DEADLINE`]).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tickwork_executor::{Executor, ExecutorBuilder, JobContext, JobOutcome, RunningExecutor};
use tickwork_protocol::{HandleCallbackParam, RegistryParam};
pub(crate) use tickwork_testkit::{now_ms, wait_until_sync};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// Generous: the machine running the tests may be loaded.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);
pub(crate) const TOKEN: &str = "test-token";
pub(crate) const APP: &str = "test-app";

// ---------------------------------------------------------------------------------------------
// The admin side.

/// How the fake admin answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Accept,
    /// HTTP 200 with `{"code":500,...}`.
    RefuseCode,
    /// HTTP 500.
    HttpError,
    /// HTTP 200 with a body that is not JSON.
    NotJson,
}

#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// `registry`, `registryRemove` or `callback`.
    pub method: String,
    pub path: String,
    pub token: Option<String>,
    pub body: String,
    pub accepted: bool,
}

impl Request {
    pub(crate) fn registry(&self) -> RegistryParam {
        serde_json::from_str(&self.body).unwrap()
    }

    pub(crate) fn callbacks(&self) -> Vec<HandleCallbackParam> {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Default)]
struct AdminState {
    requests: Mutex<Vec<Request>>,
    mode: Mutex<Option<Mode>>,
}

/// A fake admin on 127.0.0.1 recording `/api/registry`, `/api/registryRemove` and
/// `/api/callback`, under `/api` and `/xxl-job-admin/api`.
pub(crate) struct Admin {
    pub addr: SocketAddr,
    state: Arc<AdminState>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn record(
    State(state): State<Arc<AdminState>>,
    UrlPath(method): UrlPath<String>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let mode = state.mode.lock().unwrap().unwrap_or(Mode::Accept);
    state.requests.lock().unwrap().push(Request {
        method,
        path: uri.path().to_owned(),
        token: headers
            .get("XXL-JOB-ACCESS-TOKEN")
            .map(|v| v.to_str().unwrap().to_owned()),
        body,
        accepted: mode == Mode::Accept,
    });
    match mode {
        Mode::Accept => (StatusCode::OK, r#"{"code":200,"msg":null}"#).into_response(),
        Mode::RefuseCode => (StatusCode::OK, r#"{"code":500,"msg":"busy"}"#).into_response(),
        Mode::HttpError => (StatusCode::INTERNAL_SERVER_ERROR, "oops").into_response(),
        Mode::NotJson => (StatusCode::OK, "<html>proxy error</html>").into_response(),
    }
}

impl Admin {
    pub(crate) async fn start() -> Admin {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    pub(crate) async fn start_on(addr: SocketAddr) -> Admin {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(AdminState::default());
        let app = Router::new()
            .route("/api/{method}", post(record))
            .route("/xxl-job-admin/api/{method}", post(record))
            .with_state(Arc::clone(&state));
        let stop = CancellationToken::new();
        let signal = stop.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await
                .unwrap();
        });
        Admin {
            addr,
            state,
            stop,
            task,
        }
    }

    /// The base URL with XXL's legacy context path.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/xxl-job-admin", self.addr)
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = Some(mode);
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Accepted callback items, in arrival order.
    pub(crate) fn callbacks(&self) -> Vec<HandleCallbackParam> {
        self.requests()
            .iter()
            .filter(|r| r.method == "callback" && r.accepted)
            .flat_map(|r| r.callbacks())
            .collect()
    }

    /// Waits for the accepted callback of `log_id`.
    pub(crate) async fn callback(&self, log_id: i64) -> HandleCallbackParam {
        wait_until_sync(format!("callback of log {log_id}"), DEADLINE, || {
            self.callbacks().into_iter().find(|c| c.log_id == log_id)
        })
        .await
    }

    /// Waits until `n` accepted callback items arrived.
    pub(crate) async fn callback_count(&self, n: usize) -> Vec<HandleCallbackParam> {
        wait_until_sync(format!("{n} callbacks"), DEADLINE, || {
            let all = self.callbacks();
            (all.len() >= n).then_some(all)
        })
        .await
    }

    pub(crate) fn count(&self, method: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method)
            .count()
    }

    pub(crate) async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// A loopback port with nothing listening (it was free a moment ago).
pub(crate) fn dead_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The admin calling the executor.

pub(crate) struct Client {
    http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: String,
    pub text: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }

    pub(crate) fn code(&self) -> i64 {
        self.json()["code"].as_i64().unwrap()
    }

    pub(crate) fn msg(&self) -> String {
        self.json()["msg"].as_str().unwrap_or_default().to_owned()
    }
}

impl Client {
    pub(crate) fn new(addr: SocketAddr, token: Option<&str>) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client {
            http: reqwest::Client::builder()
                .timeout(DEADLINE)
                .build()
                .unwrap(),
            base: format!("http://{addr}"),
            token: token.map(str::to_owned),
        }
    }

    pub(crate) async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: impl Into<reqwest::Body>,
        token: Option<&str>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Content-Type", "application/json;charset=UTF-8")
            .body(body);
        if let Some(t) = token {
            req = req.header("XXL-JOB-ACCESS-TOKEN", t);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = resp.text().await.unwrap();
        Reply {
            status,
            content_type,
            text,
        }
    }

    /// POST with the configured token.
    pub(crate) async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> Reply {
        let token = self.token.clone();
        self.request(reqwest::Method::POST, path, body, token.as_deref())
            .await
    }

    pub(crate) async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.post(path, body.to_string()).await
    }

    pub(crate) async fn run(&self, trigger: &Value) -> Reply {
        self.post_json("/run", trigger).await
    }

    /// `/run` that must be accepted.
    pub(crate) async fn run_ok(&self, trigger: &Value) {
        let reply = self.run(trigger).await;
        assert_eq!(reply.text, r#"{"code":200,"msg":"Success"}"#, "run refused");
    }

    pub(crate) async fn kill(&self, job_id: i32) -> Reply {
        self.post_json("/kill", &json!({ "jobId": job_id })).await
    }

    pub(crate) async fn idle_beat(&self, job_id: i32) -> Reply {
        self.post_json("/idleBeat", &json!({ "jobId": job_id }))
            .await
    }

    pub(crate) async fn log(&self, log_date_time: i64, log_id: i64, from: i32) -> Reply {
        self.post_json(
            "/log",
            &json!({"logDateTim": log_date_time, "logId": log_id, "fromLineNum": from}),
        )
        .await
    }
}

/// A full TriggerParam as a 3.4.2 admin sends it.
pub(crate) fn trigger(job_id: i32, log_id: i64, handler: &str) -> Value {
    json!({
        "jobId": job_id,
        "executorHandler": handler,
        "executorParams": "",
        "executorBlockStrategy": "SERIAL_EXECUTION",
        "executorTimeout": 0,
        "logId": log_id,
        "logDateTime": now_ms(),
        "glueType": "BEAN",
        "glueSource": "",
        "glueUpdatetime": 1_717_990_000_000_i64,
        "broadcastIndex": 0,
        "broadcastTotal": 1
    })
}

/// A script trigger.
pub(crate) fn script_trigger(
    job_id: i32,
    log_id: i64,
    glue: &str,
    source: &str,
    updated: i64,
) -> Value {
    let mut t = trigger(job_id, log_id, "");
    t["glueType"] = json!(glue);
    t["glueSource"] = json!(source);
    t["glueUpdatetime"] = json!(updated);
    t
}

// ---------------------------------------------------------------------------------------------
// Handlers.

/// A handler that reports when a run starts and then holds it until the test releases it (or
/// the run is cancelled).
#[derive(Clone)]
pub(crate) struct Gate {
    started_tx: mpsc::UnboundedSender<i64>,
    started_rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<i64>>>,
    release: Arc<Semaphore>,
}

impl Default for Gate {
    fn default() -> Self {
        let (started_tx, started_rx) = mpsc::unbounded_channel();
        Gate {
            started_tx,
            started_rx: Arc::new(tokio::sync::Mutex::new(started_rx)),
            release: Arc::new(Semaphore::new(0)),
        }
    }
}

impl Gate {
    /// The log id of the next run that started.
    pub(crate) async fn started(&self) -> i64 {
        let mut rx = self.started_rx.lock().await;
        tokio::time::timeout(DEADLINE, rx.recv())
            .await
            .expect("timed out waiting for a gated run to start")
            .unwrap()
    }

    /// Lets `n` held runs finish.
    pub(crate) fn release(&self, n: usize) {
        self.release.add_permits(n);
    }

    fn register(&self, builder: ExecutorBuilder) -> ExecutorBuilder {
        let gate = self.clone();
        builder.handler("gate", move |ctx: JobContext| {
            let gate = gate.clone();
            async move {
                let _ = gate.started_tx.send(ctx.log_id());
                tokio::select! {
                    permit = gate.release.acquire() => {
                        permit.unwrap().forget();
                        Ok(JobOutcome::success_with("released"))
                    }
                    _ = ctx.cancelled() => Ok(JobOutcome::failure("cancelled")),
                }
            }
        })
    }
}

/// The handlers every test executor has.
pub(crate) fn with_test_handlers(builder: ExecutorBuilder, gate: &Gate) -> ExecutorBuilder {
    let builder = gate.register(builder);
    builder
        .handler("ok", |_ctx: JobContext| async {
            Ok(JobOutcome::success_with("ok"))
        })
        .handler("quiet", |_ctx: JobContext| async {
            Ok(JobOutcome::success())
        })
        .handler("fail", |_ctx: JobContext| async {
            Ok(JobOutcome::failure("it failed"))
        })
        .handler("err", |_ctx: JobContext| async {
            let inner = std::io::Error::other("disk on fire");
            Err(Box::new(WrappedError(inner)) as tickwork_executor::HandlerError)
        })
        .handler("panic", |_ctx: JobContext| async {
            if true {
                panic!("boom");
            }
            Ok(JobOutcome::success())
        })
        .handler("shard", |ctx: JobContext| async move {
            Ok(JobOutcome::success_with(format!(
                "{}/{}",
                ctx.shard_index(),
                ctx.shard_total()
            )))
        })
        .handler("lines", |ctx: JobContext| async move {
            ctx.log("first handler line");
            ctx.log(format!("param={}", ctx.params()));
            Ok(JobOutcome::success())
        })
        // Ignores its cancellation signal: the executor must drop it after the kill grace.
        .handler("stubborn", |_ctx: JobContext| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(JobOutcome::success())
        })
}

#[derive(Debug)]
struct WrappedError(std::io::Error);

impl std::fmt::Display for WrappedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot write report")
    }
}

impl std::error::Error for WrappedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Builder with test settings: loopback port 0, a token, short intervals.
pub(crate) fn test_builder(admins: &str, logs: &Path) -> ExecutorBuilder {
    Executor::builder(APP)
        .admin_addresses(admins)
        .access_token(TOKEN)
        .listen("127.0.0.1:0".parse().unwrap())
        .log_folder(logs)
        .admin_timeout(Duration::from_secs(2))
        .callback_retry(Duration::from_millis(100), Duration::from_millis(500))
        .kill_grace(Duration::from_secs(1))
        .shutdown_timeout(Duration::from_secs(20))
}

/// An executor with the test handlers, its admin, a client, and the gate.
pub(crate) struct Harness {
    pub admin: Admin,
    pub executor: RunningExecutor,
    pub client: Client,
    pub gate: Gate,
    pub dir: tempfile::TempDir,
}

impl Harness {
    pub(crate) async fn start() -> Harness {
        Self::start_with(|b| b).await
    }

    pub(crate) async fn start_with(
        customize: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
    ) -> Harness {
        let admin = Admin::start().await;
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::default();
        let builder = with_test_handlers(test_builder(&admin.url(), dir.path()), &gate);
        let executor = customize(builder).start().await.unwrap();
        let client = Client::new(executor.local_addr(), Some(TOKEN));
        Harness {
            admin,
            executor,
            client,
            gate,
            dir,
        }
    }
}
