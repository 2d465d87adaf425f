//! An executor that answers as XXL-JOB 3.5's `xxl-job-core` does (observed from a real one):
//! every call must carry its token and its app name (`invalid request, accessToken or appname
//! is empty.` / `... invalid.` otherwise), runs arrive on `/trigger` (`/run` is "uri-mapping
//! not found"), `/log` reads `logDateTime`, and its own calls to the admin (registry, wrapped
//! `callbackList` callbacks) carry both headers. Handlers: `demo` succeeds with "demo ok",
//! `hold` runs until `/kill` and reports the kill. Every call it gets is recorded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde_json::{Value, json};

/// One call the executor got: its path and whether both headers were right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub path: String,
    pub authorised: bool,
}

#[derive(Clone)]
struct Shared {
    admin: String,
    app: String,
    token: String,
    http: reqwest::Client,
    calls: Arc<Mutex<Vec<Call>>>,
    /// Runs started: run id -> (job id, logDateTime).
    runs: Arc<Mutex<HashMap<i64, (i64, i64)>>>,
    /// Jobs killed while a `hold` run of theirs ran.
    killed: Arc<Mutex<HashSet<i64>>>,
    /// The admin's answers to this executor's registrations.
    registry_answers: Arc<Mutex<Vec<Value>>>,
}

/// A running 3.5-like executor; stops with the test's runtime.
pub(crate) struct Xxl35Executor {
    pub address: String,
    shared: Shared,
    registry: tokio::task::JoinHandle<()>,
}

impl Xxl35Executor {
    pub(crate) async fn start(app: &str, admin: &str, token: &str) -> Xxl35Executor {
        let (listener, address) = super::executor_listener().await;
        let shared = Shared {
            admin: admin.trim_end_matches('/').to_owned(),
            app: app.to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::new(),
            calls: Arc::default(),
            runs: Arc::default(),
            killed: Arc::default(),
            registry_answers: Arc::default(),
        };
        let router = Router::new()
            .route("/{*method}", axum::routing::post(call))
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let registry = {
            let (s, address) = (shared.clone(), address.clone());
            tokio::spawn(async move {
                loop {
                    let body = json!({
                        "registryGroup": "EXECUTOR",
                        "registryKey": s.app,
                        "registryValue": address,
                    });
                    if let Some(answer) = s.post("registry", &body).await {
                        s.registry_answers.lock().unwrap().push(answer);
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            })
        };
        Xxl35Executor {
            address,
            shared,
            registry,
        }
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    pub(crate) fn registry_answers(&self) -> Vec<Value> {
        self.shared.registry_answers.lock().unwrap().clone()
    }

    /// Whether run `run_id` was started here.
    pub(crate) fn ran(&self, run_id: i64) -> bool {
        self.shared.runs.lock().unwrap().contains_key(&run_id)
    }
}

impl Drop for Xxl35Executor {
    fn drop(&mut self) {
        self.registry.abort();
    }
}

impl Shared {
    /// `POST <admin>/api/<call>` with both headers: the answer, if one came.
    async fn post(&self, call: &str, body: &Value) -> Option<Value> {
        let resp = self
            .http
            .post(format!("{}/api/{call}", self.admin))
            .header("XXL-JOB-ACCESS-TOKEN", &self.token)
            .header("XXL-JOB-APPNAME", &self.app)
            .json(body)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        resp.json().await.ok()
    }

    /// Reports a result as 3.5 does (`callbackList`, `logDateTime`), until the admin takes it.
    async fn callback(&self, log_id: i64, log_date: i64, code: i32, msg: &str) {
        let body = json!({ "callbackList": [{
            "logId": log_id, "logDateTime": log_date, "handleCode": code, "handleMsg": msg,
        }]});
        for _ in 0..100 {
            if self
                .post("callback", &body)
                .await
                .is_some_and(|v| v["code"] == 200)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn fail(msg: &str) -> String {
    json!({ "code": 500, "msg": msg }).to_string()
}

fn success() -> String {
    json!({ "code": 200, "msg": "Success" }).to_string()
}

async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> String {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (token, app) = (header("XXL-JOB-ACCESS-TOKEN"), header("XXL-JOB-APPNAME"));
    let authorised = token == s.token && app == s.app;
    s.calls.lock().unwrap().push(Call {
        path: format!("/{method}"),
        authorised,
    });
    if token.trim().is_empty() || app.trim().is_empty() {
        return fail("invalid request, accessToken or appname is empty.");
    }
    if !authorised {
        return fail("invalid request, accessToken or appname invalid.");
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match method.as_str() {
        "beat" | "idleBeat" => success(),
        "trigger" => {
            let log_id = body["logId"].as_i64().unwrap_or_default();
            let log_date = body["logDateTime"].as_i64().unwrap_or_default();
            let job_id = body["jobId"].as_i64().unwrap_or_default();
            s.runs.lock().unwrap().insert(log_id, (job_id, log_date));
            let handler = body["executorHandler"].as_str().unwrap_or("").to_owned();
            let s = s.clone();
            tokio::spawn(async move {
                if handler == "hold" {
                    loop {
                        if s.killed.lock().unwrap().remove(&job_id) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let msg = "scheduling center kill job. [job running, killed]";
                    s.callback(log_id, log_date, 500, msg).await;
                } else {
                    s.callback(log_id, log_date, 200, "demo ok").await;
                }
            });
            success()
        }
        "kill" => {
            let job_id = body["jobId"].as_i64().unwrap_or_default();
            s.killed.lock().unwrap().insert(job_id);
            success()
        }
        "log" => {
            let log_id = body["logId"].as_i64().unwrap_or_default();
            let log_date = body["logDateTime"].as_i64().unwrap_or_default();
            // The log's folder is named by the run's date: a request without `logDateTime`
            // looks in the wrong one.
            let found = s.runs.lock().unwrap().get(&log_id).map(|r| r.1) == Some(log_date);
            let data = if found {
                json!({"fromLineNum": 1, "toLineNum": 1, "logContent": "ran on 3.5\n",
                       "isEnd": false})
            } else {
                json!({"fromLineNum": 1, "toLineNum": 0,
                       "logContent": "readLog fail, logFile not exists", "isEnd": true})
            };
            json!({ "code": 200, "msg": "Success", "data": data }).to_string()
        }
        other => fail(&format!(
            "invalid request, uri-mapping(/{other}) not found."
        )),
    }
}
