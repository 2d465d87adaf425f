//! A small client of the admin's JSON API (`/openapi/v1`) and executor API (`/api/*`), as a
//! test needs it: raw answers for the error cases, asserting helpers for the rest.

use std::sync::Once;
use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{WAIT, wait_until};

/// One answer: HTTP status and JSON body (`Value::Null` when the body is not JSON).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Reply {
    /// `error.code` of an error answer.
    pub fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// `error.message` of an error answer.
    pub fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }
}

/// A run as the API shows it (the fields the tests read).
#[derive(Debug, Clone, Deserialize)]
pub struct Run {
    pub id: i64,
    pub job_id: i64,
    pub scheduled_at: i64,
    pub fire_key: Option<i64>,
    pub trigger_type: String,
    pub attempt: i32,
    pub parent_run_id: Option<i64>,
    pub executor_address: Option<String>,
    pub params: String,
    pub shard_index: Option<i32>,
    pub shard_total: Option<i32>,
    pub state: String,
    pub trigger_code: i32,
    pub trigger_msg: Option<String>,
    pub handle_code: i32,
    pub handle_msg: Option<String>,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
}

impl Run {
    /// Whether no state change can follow.
    pub fn is_final(&self) -> bool {
        !matches!(self.state.as_str(), "planned" | "sending" | "dispatched")
    }

    /// Final, with its dispatch recorded. An executor can report a result before the admin's
    /// batched ledger has written where the run was sent; that record follows shortly.
    pub fn is_settled(&self) -> bool {
        self.is_final()
            && (self.trigger_code != 0 || matches!(self.state.as_str(), "misfired" | "skipped"))
    }

    pub fn address(&self) -> &str {
        self.executor_address.as_deref().unwrap_or("")
    }

    pub fn trigger_msg(&self) -> &str {
        self.trigger_msg.as_deref().unwrap_or("")
    }

    pub fn handle_msg(&self) -> &str {
        self.handle_msg.as_deref().unwrap_or("")
    }
}

/// The admin's APIs at one base URL.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    access_token: String,
}

impl Api {
    /// `base` is `http://IP:PORT`; `token` the JSON API's bearer token; `access_token` the
    /// executors' token.
    pub fn new(base: &str, token: &str, access_token: &str) -> Api {
        static PROVIDER: Once = Once::new();
        PROVIDER.call_once(|| {
            // reqwest is built without a default TLS provider; plain HTTP still needs one.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("HTTP client");
        Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            access_token: access_token.to_owned(),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends a raw request to `/openapi/v1<path>` with `bearer` (none when `None`).
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        bearer: Option<&str>,
    ) -> Result<Reply, reqwest::Error> {
        let mut req = self
            .http
            .request(method, format!("{}/openapi/v1{path}", self.base));
        if let Some(t) = bearer {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(b) = body {
            req = req.header("Content-Type", "application/json").body(b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Reply { status, body })
    }

    /// A JSON API call with the right token.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        let bytes = body.map(|b| serde_json::to_vec(b).expect("JSON body"));
        let what = format!("{method} {path}");
        self.raw(method, path, bytes, Some(&self.token))
            .await
            .unwrap_or_else(|e| panic!("{what}: no answer: {e}"))
    }

    /// A call that must succeed; its body.
    async fn ok(&self, method: Method, path: &str, body: Option<&Value>) -> Value {
        let what = format!("{method} {path}");
        let r = self.call(method, path, body).await;
        assert!(
            (200..300).contains(&r.status),
            "{what} answered {}: {}",
            r.status,
            r.body
        );
        r.body
    }

    pub async fn get(&self, path: &str) -> Value {
        self.ok(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Value {
        self.ok(Method::POST, path, Some(&body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Value {
        self.ok(Method::PUT, path, Some(&body)).await
    }

    /// Creates an auto-registered executor group of `app`; its id.
    pub async fn create_group(&self, app: &str) -> i64 {
        let g = self
            .post("/groups", json!({ "app_name": app, "title": app }))
            .await;
        g["id"].as_i64().expect("group id")
    }

    /// The live executor addresses of a group, as the admin routes over them.
    pub async fn live_addresses(&self, group_id: i64) -> Vec<String> {
        let g = self.get(&format!("/groups/{group_id}")).await;
        serde_json::from_value(g["live_addresses"].clone()).expect("live_addresses")
    }

    /// Waits until the group's live addresses are exactly `addresses` (any order given).
    pub async fn wait_live(&self, group_id: i64, addresses: &[String]) {
        let mut want = addresses.to_vec();
        want.sort();
        wait_until(&format!("group {group_id} live = {want:?}"), WAIT, || {
            let want = want.clone();
            async move {
                let live = self.live_addresses(group_id).await;
                if live == want { Ok(()) } else { Err(live) }
            }
        })
        .await
    }

    /// Creates a job; its JSON.
    pub async fn create_job(&self, job: Value) -> Value {
        self.post("/jobs", job).await
    }

    pub async fn job(&self, id: i64) -> Value {
        self.get(&format!("/jobs/{id}")).await
    }

    pub async fn stop_job(&self, id: i64) -> Value {
        self.post(&format!("/jobs/{id}/stop"), json!({})).await
    }

    /// Triggers a job (API trigger) with optional params and address; the new run.
    pub async fn trigger(&self, job_id: i64, params: Option<&str>, address: Option<&str>) -> Run {
        let mut body = json!({});
        if let Some(p) = params {
            body["params"] = json!(p);
        }
        if let Some(a) = address {
            body["address"] = json!(a);
        }
        let run = self.post(&format!("/jobs/{job_id}/trigger"), body).await;
        serde_json::from_value(run).expect("run JSON")
    }

    pub async fn run(&self, id: i64) -> Run {
        serde_json::from_value(self.get(&format!("/runs/{id}")).await).expect("run JSON")
    }

    /// Every run of a job, oldest first.
    pub async fn runs(&self, job_id: i64) -> Vec<Run> {
        let page = self.get(&format!("/runs?job_id={job_id}&limit=1000")).await;
        let mut runs: Vec<Run> = serde_json::from_value(page["items"].clone()).expect("runs JSON");
        runs.sort_by_key(|r| r.id);
        runs
    }

    /// Waits until run `id` is final and settled ([`Run::is_settled`]); the run.
    pub async fn wait_final(&self, id: i64) -> Run {
        let what = format!("run {id} to end, with its dispatch recorded");
        wait_until(&what, WAIT, || async move {
            let r = self.run(id).await;
            if r.is_settled() { Ok(r) } else { Err(r) }
        })
        .await
    }

    /// Waits until run `id` has been accepted by an executor (or ended).
    pub async fn wait_dispatched(&self, id: i64) -> Run {
        wait_until(&format!("run {id} to be dispatched"), WAIT, || async move {
            let r = self.run(id).await;
            if !matches!(r.state.as_str(), "planned" | "sending") {
                Ok(r)
            } else {
                Err(r)
            }
        })
        .await
    }

    /// Waits until job `job_id` has at least `n` settled runs in state `state`; all its runs.
    pub async fn wait_runs_in(&self, job_id: i64, state: &str, n: usize) -> Vec<Run> {
        let what = format!("{n} {state} runs of job {job_id}");
        wait_until(&what, WAIT, || async move {
            let runs = self.runs(job_id).await;
            let count = runs
                .iter()
                .filter(|r| r.state == state && r.is_settled())
                .count();
            if count >= n {
                Ok(runs)
            } else {
                Err(runs.iter().map(|r| r.state.clone()).collect::<Vec<_>>())
            }
        })
        .await
    }

    /// POSTs `body` to the executor API `/api/<method>` with `token` (none when `None`); the
    /// XXL-JOB envelope it answers.
    pub async fn executor_call(&self, method: &str, token: Option<&str>, body: &Value) -> Value {
        let mut req = self
            .http
            .post(format!("{}/api/{method}", self.base))
            .json(body);
        if let Some(t) = token {
            req = req.header("XXL-JOB-ACCESS-TOKEN", t);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("/api/{method}: no answer: {e}"));
        assert_eq!(resp.status().as_u16(), 200, "/api/{method} HTTP status");
        resp.json().await.expect("envelope JSON")
    }

    /// The executors' access token this admin expects.
    pub fn access_token(&self) -> &str {
        &self.access_token
    }
}
