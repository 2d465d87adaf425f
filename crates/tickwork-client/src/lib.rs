//! A typed client of the Tickwork admin's JSON API (`/openapi/v1`), as the CLI uses it.
//!
//! It knows nothing about the admin's internals or SQL: only the wire types of
//! `tickwork_protocol::api` and HTTP.

mod workflows;

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tickwork_core::ScheduleType;
use tickwork_protocol::api::{
    AuditView, CopyInput, ErrorBody, GroupInput, GroupView, HeatmapQuery, HeatmapView,
    InstanceView, ItemError, JobInput, JobQuery, JobView, JobsBulkCreated, Page, PasswordInput,
    RunLog, RunQuery, RunView, ScriptInput, ScriptVersionView, StatsView, TokenCreated, TokenInput,
    TokenView, TriggerInput, UserInput, UserUpdateInput, UserView,
};
use tickwork_protocol::submissions::{
    Completions, CompletionsAck, CompletionsAcked, SubmissionInput, SubmissionItem,
    SubmissionPutView, SubmissionView, SubmissionsBatchResult,
};
pub use workflows::Workflows;

/// What went wrong in a call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The admin answered with an error: its stable code and message.
    #[error("{message} ({code}, http {status})")]
    Api {
        status: u16,
        code: String,
        message: String,
        /// The wrong items of a list input (a bulk create), each by its index and field.
        errors: Vec<ItemError>,
    },
    /// The admin could not be reached or the connection broke.
    #[error("cannot reach the admin at {url}: {reason}")]
    Transport { url: String, reason: String },
    /// The admin's answer is not what this client understands.
    #[error("unexpected answer from {url}: {reason}")]
    Decode { url: String, reason: String },
    /// The client was given an unusable setting.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// Whether the admin answered "not found".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { status: 404, .. })
    }

    /// Whether the token's role may not do what was asked.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Error::Api { status: 403, .. })
    }
}

/// A client of one admin. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    api: Transport,
}

/// How calls reach the admin: the HTTP client, the admin's base URL and the token.
#[derive(Clone)]
struct Transport {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    /// A client of the admin at `base_url` (e.g. `http://127.0.0.1:8080`) with its API token.
    pub fn new(base_url: &str, token: &str) -> Result<Self, Error> {
        let base = base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Config(format!(
                "admin url {base_url:?} must start with http:// or https://"
            )));
        }
        if token.trim().is_empty() {
            return Err(Error::Config("the API token is empty".into()));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            api: Transport {
                http,
                base: base.to_owned(),
                token: token.trim().to_owned(),
            },
        })
    }

    /// Submissions from code, by a key of the client's own.
    pub fn submissions(&self) -> Submissions<'_> {
        Submissions { api: &self.api }
    }

    /// Workflows and their instances.
    pub fn workflows(&self) -> Workflows<'_> {
        Workflows { api: &self.api }
    }
}

impl Transport {
    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, Error> {
        let url = format!("{}/openapi/v1{path}", self.base);
        let mut req = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.map_err(|e| Error::Transport {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| Error::Transport {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(b) => Error::Api {
                    status: status.as_u16(),
                    code: b.code.unwrap_or(b.error.code),
                    message: b.message.unwrap_or(b.error.message),
                    errors: b.errors,
                },
                Err(_) => Error::Decode {
                    url,
                    reason: format!("http {status} without an error body"),
                },
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            url,
            reason: e.to_string(),
        })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        self.call(reqwest::Method::GET, path, None::<&()>).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, Error> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
}

impl Client {
    // ---- groups ----

    pub async fn groups_list(&self) -> Result<Vec<GroupView>, Error> {
        self.api.get("/groups").await
    }

    pub async fn group_create(&self, input: &GroupInput) -> Result<GroupView, Error> {
        self.api.post("/groups", input).await
    }

    // ---- jobs ----

    pub async fn jobs_list(&self, q: &JobQuery) -> Result<Page<JobView>, Error> {
        let mut qs = Query::default();
        qs.num("group_id", q.group_id);
        qs.text("status", q.status.as_deref());
        qs.text("text", q.text.as_deref());
        qs.text("sort", q.sort.as_deref());
        qs.text("order", q.order.as_deref());
        qs.num("offset", q.offset);
        qs.num("limit", q.limit);
        self.api.get(&format!("/jobs{}", qs.0)).await
    }

    /// Every job, page by page.
    pub async fn jobs_all(&self, group_id: Option<i64>) -> Result<Vec<JobView>, Error> {
        let mut all = Vec::new();
        loop {
            let page = self
                .jobs_list(&JobQuery {
                    group_id,
                    offset: Some(all.len() as u64),
                    limit: Some(1000),
                    ..JobQuery::default()
                })
                .await?;
            let n = page.items.len();
            all.extend(page.items);
            if n == 0 || all.len() as u64 >= page.total {
                return Ok(all);
            }
        }
    }

    pub async fn job_get(&self, id: i64) -> Result<JobView, Error> {
        self.api.get(&format!("/jobs/{id}")).await
    }

    pub async fn job_create(&self, input: &JobInput) -> Result<JobView, Error> {
        self.api.post("/jobs", input).await
    }

    /// Creates up to 10,000 jobs in one transaction, all or none (`POST /jobs/bulk`); the
    /// created jobs' ids and keys, in the order given. Wrong jobs come back together in
    /// [`Error::Api`]'s `errors`.
    pub async fn jobs_create_bulk(&self, jobs: &[JobInput]) -> Result<JobsBulkCreated, Error> {
        #[derive(Serialize)]
        struct Bulk<'a> {
            jobs: &'a [JobInput],
        }
        self.api.post("/jobs/bulk", &Bulk { jobs }).await
    }

    pub async fn job_update(&self, id: i64, input: &JobInput) -> Result<JobView, Error> {
        self.api
            .call(reqwest::Method::PUT, &format!("/jobs/{id}"), Some(input))
            .await
    }

    pub async fn job_delete(&self, id: i64) -> Result<(), Error> {
        self.api
            .call::<serde_json::Value>(reqwest::Method::DELETE, &format!("/jobs/{id}"), None::<&()>)
            .await
            .map(|_| ())
    }

    pub async fn job_start(&self, id: i64) -> Result<JobView, Error> {
        self.api
            .post(&format!("/jobs/{id}/start"), &serde_json::json!({}))
            .await
    }

    pub async fn job_stop(&self, id: i64) -> Result<JobView, Error> {
        self.api
            .post(&format!("/jobs/{id}/stop"), &serde_json::json!({}))
            .await
    }

    pub async fn job_trigger(&self, id: i64, input: &TriggerInput) -> Result<RunView, Error> {
        self.api.post(&format!("/jobs/{id}/trigger"), input).await
    }

    /// The next `n` fire instants (epoch ms) of a schedule.
    pub async fn schedule_preview(
        &self,
        kind: ScheduleType,
        conf: &str,
        time_zone: Option<&str>,
        n: usize,
    ) -> Result<Vec<i64>, Error> {
        #[derive(serde::Deserialize)]
        struct Fires {
            fires: Vec<i64>,
        }
        let body = serde_json::json!({
            "schedule_type": kind, "schedule_conf": conf, "time_zone": time_zone, "n": n,
        });
        Ok(self
            .api
            .post::<Fires>("/schedule/preview", &body)
            .await?
            .fires)
    }

    /// Fires per bucket of every running job over a range, by group, with the peaks
    /// (`GET /schedule/heatmap`); the admin's defaults for what `q` leaves out.
    pub async fn schedule_heatmap(&self, q: &HeatmapQuery) -> Result<HeatmapView, Error> {
        let mut qs = Query::default();
        qs.num("from", q.from);
        qs.num("to", q.to);
        qs.text("bucket", q.bucket.as_deref());
        qs.text("group", q.group.as_deref());
        self.api.get(&format!("/schedule/heatmap{}", qs.0)).await
    }

    // ---- runs ----

    pub async fn runs_list(&self, q: &RunQuery) -> Result<Page<RunView>, Error> {
        let mut qs = Query::default();
        qs.num("job_id", q.job_id);
        qs.num("group_id", q.group_id);
        qs.text("state", q.state.as_deref());
        qs.num("from", q.from);
        qs.num("to", q.to);
        qs.num("offset", q.offset);
        qs.num("limit", q.limit);
        self.api.get(&format!("/runs{}", qs.0)).await
    }

    pub async fn run_get(&self, id: i64) -> Result<RunView, Error> {
        self.api.get(&format!("/runs/{id}")).await
    }

    pub async fn run_kill(&self, id: i64) -> Result<RunView, Error> {
        self.api
            .post(&format!("/runs/{id}/kill"), &serde_json::json!({}))
            .await
    }

    pub async fn run_log(&self, id: i64, from_line: i32) -> Result<RunLog, Error> {
        self.api
            .get(&format!("/runs/{id}/log?from_line={from_line}"))
            .await
    }

    /// Deletes final runs scheduled before `before` (of one job or group when given); how
    /// many went.
    pub async fn runs_clear(
        &self,
        before: i64,
        job_id: Option<i64>,
        group_id: Option<i64>,
    ) -> Result<u64, Error> {
        #[derive(serde::Deserialize)]
        struct Cleared {
            deleted: u64,
        }
        let mut qs = Query::default();
        qs.num("before", Some(before));
        qs.num("job_id", job_id);
        qs.num("group_id", group_id);
        let c: Cleared = self
            .api
            .call(
                reqwest::Method::DELETE,
                &format!("/runs{}", qs.0),
                None::<&()>,
            )
            .await?;
        Ok(c.deleted)
    }

    // ---- groups, jobs: more ----

    pub async fn group_instances(&self, id: i64) -> Result<Vec<InstanceView>, Error> {
        self.api.get(&format!("/groups/{id}/instances")).await
    }

    pub async fn job_copy(&self, id: i64, input: &CopyInput) -> Result<JobView, Error> {
        self.api.post(&format!("/jobs/{id}/copy"), input).await
    }

    // ---- scripts ----

    pub async fn script_versions(&self, job_id: i64) -> Result<Vec<ScriptVersionView>, Error> {
        self.api
            .get(&format!("/jobs/{job_id}/script/versions"))
            .await
    }

    pub async fn script_save(
        &self,
        job_id: i64,
        input: &ScriptInput,
    ) -> Result<ScriptVersionView, Error> {
        self.api
            .call(
                reqwest::Method::PUT,
                &format!("/jobs/{job_id}/script"),
                Some(input),
            )
            .await
    }

    pub async fn script_restore(
        &self,
        job_id: i64,
        version: i64,
    ) -> Result<ScriptVersionView, Error> {
        self.api
            .post(
                &format!("/jobs/{job_id}/script/versions/{version}/restore"),
                &serde_json::json!({}),
            )
            .await
    }

    // ---- users, tokens, audit, dashboard ----

    /// The caller as the admin sees it (user, role, groups).
    pub async fn me(&self) -> Result<serde_json::Value, Error> {
        self.api.get("/me").await
    }

    pub async fn users_list(&self) -> Result<Vec<UserView>, Error> {
        self.api.get("/users").await
    }

    pub async fn user_create(&self, input: &UserInput) -> Result<UserView, Error> {
        self.api.post("/users", input).await
    }

    pub async fn user_update(&self, id: i64, input: &UserUpdateInput) -> Result<UserView, Error> {
        self.api
            .call(reqwest::Method::PUT, &format!("/users/{id}"), Some(input))
            .await
    }

    pub async fn user_set_password(&self, id: i64, input: &PasswordInput) -> Result<(), Error> {
        self.api
            .call::<serde_json::Value>(
                reqwest::Method::PUT,
                &format!("/users/{id}/password"),
                Some(input),
            )
            .await
            .map(|_| ())
    }

    pub async fn tokens_list(&self) -> Result<Vec<TokenView>, Error> {
        self.api.get("/tokens").await
    }

    /// Creates a token; its secret is in the answer and nowhere else.
    pub async fn token_create(&self, input: &TokenInput) -> Result<TokenCreated, Error> {
        self.api.post("/tokens", input).await
    }

    pub async fn token_revoke(&self, id: i64) -> Result<TokenView, Error> {
        self.api
            .call(
                reqwest::Method::DELETE,
                &format!("/tokens/{id}"),
                None::<&()>,
            )
            .await
    }

    /// One page (from 1) of the audit log, newest first.
    pub async fn audit(&self, page: u64, size: u64) -> Result<Page<AuditView>, Error> {
        self.api
            .get(&format!("/audit?page={page}&size={size}"))
            .await
    }

    pub async fn stats(&self) -> Result<StatsView, Error> {
        self.api.get("/stats").await
    }
}

/// Submissions from code (`/submissions/{app}/{key}`), borrowed from a [`Client`]:
/// `client.submissions().submit(..)`.
#[derive(Clone, Copy)]
pub struct Submissions<'a> {
    api: &'a Transport,
}

impl Submissions<'_> {
    /// Submits under `key` in the group named `app` (`PUT /submissions/{app}/{key}`): a new
    /// key is created, a taken one kept or replaced as `input.on_conflict` says.
    pub async fn submit(
        &self,
        app: &str,
        key: &str,
        input: &SubmissionInput,
    ) -> Result<SubmissionPutView, Error> {
        let path = format!("/submissions/{}/{}", segment(app), segment(key));
        self.api
            .call(reqwest::Method::PUT, &path, Some(input))
            .await
    }

    /// Submits many of one group, each on its own; a result per item, in order.
    pub async fn submit_many(
        &self,
        app: &str,
        items: &[SubmissionItem],
    ) -> Result<SubmissionsBatchResult, Error> {
        let body = serde_json::json!({ "items": items });
        self.api
            .post(&format!("/submissions/{}", segment(app)), &body)
            .await
    }

    /// One submission.
    pub async fn get(&self, app: &str, key: &str) -> Result<SubmissionView, Error> {
        self.api
            .get(&format!("/submissions/{}/{}", segment(app), segment(key)))
            .await
    }

    /// How the runs of the group's submissions ended, oldest first, after the completion
    /// `after`, at most `limit` (100 when `None`): each is read again until acknowledged.
    pub async fn completions(
        &self,
        app: &str,
        after: Option<i64>,
        limit: Option<u64>,
    ) -> Result<Completions, Error> {
        let mut qs = Query::default();
        qs.num("after", after);
        qs.num("limit", limit);
        self.api
            .get(&format!("/completions/{}{}", segment(app), qs.0))
            .await
    }

    /// Acknowledges completions by id; how many were still there.
    pub async fn ack(&self, app: &str, ids: &[i64]) -> Result<u64, Error> {
        let body = CompletionsAck { ids: ids.to_vec() };
        let acked: CompletionsAcked = self
            .api
            .post(&format!("/completions/{}/ack", segment(app)), &body)
            .await?;
        Ok(acked.acked)
    }

    /// Cancels a submission (deleted with its job and runs); refused while a run of it is
    /// planned or running unless `kill`.
    pub async fn cancel(&self, app: &str, key: &str, kill: bool) -> Result<SubmissionView, Error> {
        let path = format!("/submissions/{}/{}?kill={kill}", segment(app), segment(key));
        self.api
            .call(reqwest::Method::DELETE, &path, None::<&()>)
            .await
    }
}

/// `text` as one path segment: unreserved characters as they are, everything else
/// percent-encoded.
fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A query string under construction.
#[derive(Default)]
struct Query(String);

impl Query {
    fn sep(&mut self) {
        self.0.push(if self.0.is_empty() { '?' } else { '&' });
    }

    fn num(&mut self, key: &str, v: Option<impl std::fmt::Display>) {
        if let Some(v) = v {
            self.sep();
            let _ = write!(self.0, "{key}={v}");
        }
    }

    fn text(&mut self, key: &str, v: Option<&str>) {
        if let Some(v) = v {
            self.sep();
            let _ = write!(self.0, "{key}={}", segment(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_encode_text() {
        let mut q = Query::default();
        q.num("job_id", Some(3));
        q.text("text", Some("a b&c/é"));
        q.num("limit", None::<i64>);
        assert_eq!(q.0, "?job_id=3&text=a%20b%26c%2F%C3%A9");
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(matches!(
            Client::new("localhost:8080", "t"),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Client::new("http://h", " "),
            Err(Error::Config(_))
        ));
        assert!(Client::new("http://h:1/", "t").is_ok());
    }
}
