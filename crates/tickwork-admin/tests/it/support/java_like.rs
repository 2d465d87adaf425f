//! An executor that answers as a Java `xxl-job-core` executor does, for the calls that matter
//! when a run may have been sent: `/run` (accepted at once, the run "executes" and calls back
//! a few milliseconds later), `/log` (the run's log exists once it ran, else "logFile not
//! exists"), `/idleBeat` (idle), `/beat`, and any other path answered "uri-mapping not found"
//! (it cannot be asked which runs it accepted). It registers with the admins and counts every
//! execution by run id, as [`super::CountingExecutor`] does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde_json::{Value, json};

#[derive(Clone)]
struct Shared {
    admins: Vec<String>,
    token: String,
    executions: Arc<Mutex<HashMap<i64, u32>>>,
    /// When each `/run` of a run id came (ms since the epoch), by run id.
    arrivals: Arc<Mutex<HashMap<i64, Vec<i64>>>>,
    /// The `executorParams` of each `/run`, by run id.
    params: Arc<Mutex<HashMap<i64, String>>>,
    http: reqwest::Client,
}

/// A running Java-like executor; stops with the test's runtime.
pub(crate) struct JavaLikeExecutor {
    pub address: String,
    executions: Arc<Mutex<HashMap<i64, u32>>>,
    arrivals: Arc<Mutex<HashMap<i64, Vec<i64>>>>,
    params: Arc<Mutex<HashMap<i64, String>>>,
    registry: tokio::task::JoinHandle<()>,
}

impl JavaLikeExecutor {
    pub(crate) async fn start(app: &str, admins: &[String], token: &str) -> JavaLikeExecutor {
        let (listener, address) = super::executor_listener().await;
        let shared = Shared {
            admins: admins.to_vec(),
            token: token.to_owned(),
            executions: Arc::default(),
            arrivals: Arc::default(),
            params: Arc::default(),
            http: reqwest::Client::new(),
        };
        let executions = shared.executions.clone();
        let arrivals = shared.arrivals.clone();
        let params = shared.params.clone();
        let app_router = Router::new()
            // Every path, as the Java executor's server: an unknown one, with as many
            // segments as it has, is answered "uri-mapping not found" (not an HTTP 404).
            .route("/{*method}", axum::routing::post(call))
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app_router).await;
        });
        let registry = {
            let (shared, app, address) = (shared.clone(), app.to_owned(), address.clone());
            tokio::spawn(async move {
                loop {
                    let body = json!({
                        "registryGroup": "EXECUTOR",
                        "registryKey": app,
                        "registryValue": address,
                    });
                    for admin in &shared.admins {
                        let _ = shared
                            .http
                            .post(format!("{admin}/api/registry"))
                            .header("XXL-JOB-ACCESS-TOKEN", &shared.token)
                            .json(&body)
                            .timeout(Duration::from_secs(2))
                            .send()
                            .await;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        };
        JavaLikeExecutor {
            address,
            executions,
            arrivals,
            params,
            registry,
        }
    }

    /// Run ids executed more than once, with their counts.
    pub(crate) fn doubles(&self) -> Vec<(i64, u32)> {
        super::doubles(&self.executions)
    }

    pub(crate) fn count(&self, run_id: i64) -> u32 {
        super::count(&self.executions, run_id)
    }

    /// When each `/run` of `run_id` came, in ms since the epoch.
    pub(crate) fn arrivals(&self, run_id: i64) -> Vec<i64> {
        self.arrivals
            .lock()
            .unwrap()
            .get(&run_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The `executorParams` that run `run_id`'s `/run` carried.
    pub(crate) fn params_of(&self, run_id: i64) -> Option<String> {
        self.params.lock().unwrap().get(&run_id).cloned()
    }
}

impl Drop for JavaLikeExecutor {
    fn drop(&mut self) {
        self.registry.abort();
    }
}

async fn call(State(s): State<Shared>, Path(method): Path<String>, body: Bytes) -> String {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let answer = match method.as_str() {
        "beat" | "idleBeat" => json!({ "code": 200, "msg": null }),
        "run" => {
            let log_id = body["logId"].as_i64().unwrap_or_default();
            let log_date = body["logDateTime"].as_i64().unwrap_or_default();
            *s.executions.lock().unwrap().entry(log_id).or_default() += 1;
            let at = super::now_ms();
            s.arrivals
                .lock()
                .unwrap()
                .entry(log_id)
                .or_default()
                .push(at);
            let params = body["executorParams"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            s.params.lock().unwrap().insert(log_id, params);
            tokio::spawn(callback(s.clone(), log_id, log_date));
            json!({ "code": 200, "msg": null })
        }
        "log" => {
            let log_id = body["logId"].as_i64().unwrap_or_default();
            let ran = s.executions.lock().unwrap().contains_key(&log_id);
            let content = if ran {
                json!({"fromLineNum": 1, "toLineNum": 1, "logContent": "ran\n", "isEnd": false})
            } else {
                json!({"fromLineNum": 1, "toLineNum": 0,
                       "logContent": "readLog fail, logFile not exists", "isEnd": true})
            };
            json!({ "code": 200, "msg": null, "content": content })
        }
        other => json!({
            "code": 500,
            "msg": format!("invalid request, uri-mapping(/{other}) not found."),
        }),
    };
    answer.to_string()
}

/// Reports run `log_id` succeeded to the first admin that takes it, as the Java executor's
/// callback thread does (it tries every admin).
async fn callback(s: Shared, log_id: i64, log_date: i64) {
    tokio::time::sleep(Duration::from_millis(5)).await;
    let body = json!([{
        "logId": log_id,
        "logDateTim": log_date,
        "handleCode": 200,
        "handleMsg": null,
    }]);
    for _ in 0..100 {
        for admin in &s.admins {
            let sent = s
                .http
                .post(format!("{admin}/api/callback"))
                .header("XXL-JOB-ACCESS-TOKEN", &s.token)
                .json(&body)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if let Ok(r) = sent
                && let Ok(v) = r.json::<Value>().await
                && v["code"] == 200
            {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
