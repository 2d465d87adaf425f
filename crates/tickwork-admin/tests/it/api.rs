//! The REST API and the console driven through `http::service_router(service)` one request at
//! a time, without TCP and without timers: a fresh SQLite database per test, a pipeline handle
//! that records what the service asks of it, and every answer of a documented route held to
//! the OpenAPI document. Every endpoint, each role (admin, operator of one group, viewer), bad
//! input that must change nothing, the audit records of changes, sessions, logins and their
//! limits, the console's forms. What needs the pipeline or an executor is in `api_e2e`.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tickwork_admin::config::ConfigFile;
use tickwork_admin::{Auth, Error, PipelineHandle, Service, check_csrf};
use tickwork_protocol::api::LatenessView;
use tickwork_store::{Run, RunComplete, Store};
use tickwork_testkit::openapi::{Undeclared, check_answer, route_of};
use tower_service::Service as _;

pub(crate) const BUILTIN: &str = "api-test-builtin-token";
pub(crate) const ADMIN_PASSWORD: &str = "first-admin-password";
/// The executors' global access token.
pub(crate) const GLOBAL_ACCESS: &str = "api-test-access-token";

/// The admin's configuration of these tests, on `database_url`, after `toml`.
pub(crate) fn config(toml: &str, database_url: String) -> tickwork_admin::Config {
    let mut file: ConfigFile = toml::from_str(toml).expect("toml");
    file.database_url = Some(database_url);
    file.access_token = Some(GLOBAL_ACCESS.into());
    file.api_token = Some(BUILTIN.into());
    file.auth.admin_password = Some(ADMIN_PASSWORD.into());
    let config = file.into_config().expect("config");
    config.validate().expect("valid config");
    config
}

// ---- answers, held to the OpenAPI document ----

/// The document the admin serves at `/openapi.json`.
static DOCUMENT: LazyLock<Value> = LazyLock::new(tickwork_admin::openapi::document);

/// An answer as received: status, headers and body.
pub(crate) struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    pub(crate) fn new(status: StatusCode, headers: HeaderMap, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; `Null` when it is not JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Holds the answer to `method uri` to the OpenAPI document when `uri` is a documented
/// operation of the REST API: its status must be declared and its body must match the
/// declared schema, without fields the document does not name. Other paths (the console, an
/// undocumented path or method) are not checked here.
pub(crate) fn hold_to_document(method: &Method, uri: &str, reply: &Reply) {
    let Some(rest) = uri.strip_prefix("/openapi/v1") else {
        return;
    };
    let path = rest.split('?').next().unwrap_or("");
    let Some(route) = route_of(&DOCUMENT, path) else {
        return;
    };
    let m = method.as_str().to_ascii_lowercase();
    if DOCUMENT["paths"][route].get(&m).is_none() {
        return;
    }
    let status = reply.status.as_u16();
    if let Err(e) = check_answer(
        &DOCUMENT,
        &m,
        route,
        status,
        &reply.json(),
        Undeclared::Refuse,
    ) {
        panic!("the answer disagrees with the OpenAPI document: {e}");
    }
}

/// An answer of the REST API: status and JSON body (`Null` when the body is not JSON).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

impl Answer {
    pub(crate) fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    pub(crate) fn ok(self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "expected success, got {self:?}"
        );
        self.body
    }

    pub(crate) fn refused(&self, status: u16, code: &str) {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "unexpected answer {self:?}"
        );
        assert!(
            !self.body["message"].as_str().unwrap_or("").is_empty(),
            "error without a message: {self:?}"
        );
        assert_eq!(self.body["error"]["code"], self.body["code"], "{self:?}");
    }
}

/// The value of cookie `name` set by an answer.
pub(crate) fn set_cookie(resp: &Reply, name: &str) -> Option<String> {
    resp.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap_or("").to_owned())
}

/// Where an answer redirects to (empty when it does not).
pub(crate) fn location(resp: &Reply) -> String {
    resp.headers()
        .get(header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default()
}

pub(crate) const FORM: &str = "application/x-www-form-urlencoded";

/// What the tests do with an admin, whichever way they reach it: one request at a time
/// ([`Harness`]) or over TCP (`api_e2e`).
pub(crate) trait Api {
    /// One request (`uri` from the root: `/openapi/v1/jobs`, `/login`); answers of documented
    /// REST operations are held to the OpenAPI document.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply;

    /// The admin's service.
    fn service(&self) -> &Service;

    /// Notes that the test exercised `method route`.
    fn exercised(&self, _method: &Method, _route: &str) {}

    /// Calls `/openapi/v1{path}` with `token`; `route` is the route template it exercises
    /// (empty for a path or method the API does not have).
    async fn raw(
        &self,
        method: Method,
        route: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> Answer {
        if !route.is_empty() {
            let concrete = path.split('?').next().unwrap_or("");
            assert_eq!(
                route_of(&DOCUMENT, concrete),
                Some(route),
                "{path} is not under the route {route}"
            );
        }
        self.exercised(&method, route);
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = Vec::new();
        if let Some(b) = &bearer {
            headers.push(("authorization", b.as_str()));
        }
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        let reply = self
            .send(
                method,
                &format!("/openapi/v1{path}"),
                &headers,
                body.map(str::to_owned),
            )
            .await;
        Answer {
            status: reply.status().as_u16(),
            body: reply.json(),
        }
    }

    async fn call(
        &self,
        method: Method,
        route: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Answer {
        let text = body.map(|b| b.to_string());
        self.raw(method, route, path, Some(token), text.as_deref())
            .await
    }

    async fn get(&self, route: &str, path: &str, token: &str) -> Answer {
        self.call(Method::GET, route, path, token, None).await
    }

    async fn audit_total(&self) -> u64 {
        self.get("/audit", "/audit?size=1", BUILTIN).await.ok()["total"]
            .as_u64()
            .unwrap()
    }

    /// The key of job `id`, read as `token`.
    async fn job_key(&self, id: i64, token: &str) -> String {
        self.get("/jobs/{id}", &format!("/jobs/{id}"), token)
            .await
            .ok()["key"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn job_count(&self) -> u64 {
        self.get("/jobs", "/jobs?size=1", BUILTIN).await.ok()["total"]
            .as_u64()
            .unwrap()
    }

    /// A user of `role` with `groups` and a token acting as that user.
    async fn user_with_token(&self, name: &str, role: &str, groups: &[i64]) -> (i64, String) {
        let u = self
            .call(
                Method::POST,
                "/users",
                "/users",
                BUILTIN,
                Some(json!({
                    "username": name, "password": format!("{name}-password-1"),
                    "role": role, "group_ids": groups,
                })),
            )
            .await
            .ok();
        let id = u["id"].as_i64().unwrap();
        let t = self
            .call(
                Method::POST,
                "/tokens",
                "/tokens",
                BUILTIN,
                Some(json!({ "name": format!("{name} token"), "user_id": id })),
            )
            .await;
        assert_eq!(t.status, 201, "{t:?}");
        let secret = t.body["secret"].as_str().unwrap().to_owned();
        assert!(secret.starts_with("tw_"), "{secret}");
        (id, secret)
    }

    async fn group(&self, app: &str) -> i64 {
        self.call(
            Method::POST,
            "/groups",
            "/groups",
            BUILTIN,
            Some(json!({ "app_name": app, "title": app })),
        )
        .await
        .ok()["id"]
            .as_i64()
            .unwrap()
    }

    /// A manual group whose one executor is `address`; its id.
    async fn manual_group(&self, app: &str, address: &str) -> i64 {
        self.call(
            Method::POST,
            "/groups",
            "/groups",
            BUILTIN,
            Some(json!({
                "app_name": app, "title": app, "address_mode": "manual", "addresses": [address],
            })),
        )
        .await
        .ok()["id"]
            .as_i64()
            .unwrap()
    }

    async fn shell_job(&self, group: i64, token: &str) -> Answer {
        self.call(
            Method::POST,
            "/jobs",
            "/jobs",
            token,
            Some(json!({
                "group_id": group, "description": "shell", "schedule_type": "CRON",
                "schedule_conf": "0 0 3 * * ?", "glue_type": "GLUE_SHELL",
                "glue_source": "echo one",
            })),
        )
        .await
    }

    /// A BEAN job of `group` with no schedule; its id.
    async fn bean_job(&self, group: i64) -> i64 {
        self.call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(json!({
                "group_id": group, "schedule_type": "NONE", "handler": "demo",
            })),
        )
        .await
        .ok()["id"]
            .as_i64()
            .unwrap()
    }

    /// Triggers `job` as the built-in admin.
    async fn trigger(&self, job: i64, body: Value) -> Answer {
        self.call(
            Method::POST,
            "/jobs/{id}/trigger",
            &format!("/jobs/{job}/trigger"),
            BUILTIN,
            Some(body),
        )
        .await
    }

    async fn runs_of(&self, job: i64) -> Vec<Value> {
        self.get("/runs", &format!("/runs?job_id={job}"), BUILTIN)
            .await
            .ok()["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Gives group `g` a new executor token (as an admin) and returns it.
    async fn rotate(&self, g: i64) -> String {
        let a = self
            .call(
                Method::POST,
                "/groups/{id}/token",
                &format!("/groups/{g}/token"),
                BUILTIN,
                None,
            )
            .await;
        assert_eq!(a.status, 201, "{a:?}");
        assert_eq!(a.body["group_id"], g);
        a.body["token"].as_str().unwrap().to_owned()
    }

    /// The registered addresses of group `g`'s app.
    async fn instances(&self, g: i64) -> Vec<String> {
        let list = self
            .get(
                "/groups/{id}/instances",
                &format!("/groups/{g}/instances"),
                BUILTIN,
            )
            .await
            .ok();
        list.as_array()
            .unwrap()
            .iter()
            .map(|i| i["address"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn run_state(&self, run: i64) -> String {
        self.get("/runs/{id}", &format!("/runs/{run}"), BUILTIN)
            .await
            .ok()["state"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// An admin's console session: its cookie (`name=value`) and CSRF token.
    async fn console(&self) -> (String, String) {
        let auth = self.service().auth();
        let s = auth
            .login("admin", ADMIN_PASSWORD, [127, 0, 0, 1].into())
            .await
            .unwrap();
        let cookie = auth.session_cookie(&s);
        let cookie = cookie.split(';').next().unwrap().to_owned();
        (cookie, s.csrf_token)
    }

    /// A console page with the session `cookie`.
    async fn page(&self, path: &str, cookie: &str) -> Reply {
        self.send(Method::GET, path, &[("cookie", cookie)], None)
            .await
    }

    /// Posts a console form as an admin; the status and the `Location` it redirects to.
    async fn console_post(&self, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
        let (cookie, csrf) = self.console().await;
        let mut form = vec![("_csrf", csrf.as_str())];
        form.extend_from_slice(fields);
        let resp = self
            .send(
                Method::POST,
                path,
                &[("cookie", &cookie), ("content-type", FORM)],
                Some(serde_urlencoded::to_string(&form).unwrap()),
            )
            .await;
        (resp.status().as_u16(), location(&resp))
    }
}

// ---- the service alone, one request at a time ----

/// What the service asked of the pipeline, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    Wake,
    Arm(i64),
    ForgetJob(i64),
    ForgetGroup(i64),
    Complete(i64),
}

/// A pipeline that records what it is asked and does nothing.
#[derive(Default)]
pub(crate) struct Recording {
    calls: Mutex<Vec<Call>>,
}

impl Recording {
    /// The calls so far, forgetting them.
    pub(crate) fn take(&self) -> Vec<Call> {
        std::mem::take(&mut self.calls.lock().unwrap())
    }

    fn push(&self, c: Call) {
        self.calls.lock().unwrap().push(c);
    }
}

#[async_trait::async_trait]
impl PipelineHandle for Recording {
    fn wake(&self) {
        self.push(Call::Wake);
    }

    fn arm(&self, run: Run) {
        self.push(Call::Arm(run.id));
    }

    fn forget_job(&self, job_id: i64) {
        self.push(Call::ForgetJob(job_id));
    }

    fn forget_group(&self, group_id: i64) {
        self.push(Call::ForgetGroup(group_id));
    }

    async fn complete(&self, c: RunComplete) -> Result<Option<Run>, Error> {
        self.push(Call::Complete(c.run_id));
        Ok(None)
    }

    fn lateness(&self) -> Option<LatenessView> {
        None
    }
}

/// Where requests come from, and the host they name: a browser on the admin's machine.
pub(crate) const PEER: &str = "127.0.0.1:40000";
pub(crate) const HOST: &str = "127.0.0.1:8080";

/// The service of an admin on a fresh SQLite database behind `service_router`, with a
/// recording pipeline; a log of the routes the test called.
pub(crate) struct Harness {
    pub(crate) router: axum::Router,
    service: Service,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) pipeline: Arc<Recording>,
    called: Mutex<BTreeSet<(String, String)>>,
    db_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Api for Harness {
    /// Through the router, as the server hands it a request: with the client's address
    /// (`ConnectInfo`) and, unless given, the `Host` a browser names.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply {
        let mut req = Request::builder().method(method.clone()).uri(uri);
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req = req.header(header::HOST, HOST);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req
            .body(body.map(Body::from).unwrap_or_else(Body::empty))
            .expect("request");
        let peer: SocketAddr = PEER.parse().unwrap();
        req.extensions_mut().insert(ConnectInfo(peer));
        let resp = self.router.clone().call(req).await.expect("infallible");
        let (parts, body) = resp.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("answer body");
        let reply = Reply::new(parts.status, parts.headers, body.to_vec());
        hold_to_document(&method, uri, &reply);
        reply
    }

    fn service(&self) -> &Service {
        &self.service
    }

    fn exercised(&self, method: &Method, route: &str) {
        self.called
            .lock()
            .unwrap()
            .insert((method.as_str().to_lowercase(), route.to_owned()));
    }
}

impl Harness {
    pub(crate) async fn start() -> Harness {
        Self::start_with("").await
    }

    async fn start_with(toml: &str) -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let db_file = dir.path().join("api.db");
        let config = config(toml, format!("sqlite://{}?mode=rwc", db_file.display()));
        let store = tickwork_store::connect(&config.database_url, &Default::default())
            .await
            .expect("store");
        let auth = Arc::new(Auth::new(
            store.clone(),
            config.auth.clone(),
            &config.api_token,
        ));
        // As the admin's start does before it serves anything.
        assert_eq!(
            auth.ensure_first_admin(store.as_ref())
                .await
                .expect("first admin"),
            None,
            "a configured password is not generated"
        );
        let pipeline = Arc::new(Recording::default());
        let service = Service::new(config, store.clone(), auth, pipeline.clone());
        Harness {
            router: tickwork_admin::http::service_router(service.clone()),
            service,
            store,
            pipeline,
            called: Mutex::new(BTreeSet::new()),
            db_file,
            _dir: dir,
        }
    }

    pub(crate) async fn stop(self) {
        self.store.close().await;
    }

    /// Ends planned run `run` as the pipeline does when it finds no executor to send it to.
    pub(crate) async fn fail_dispatch(&self, run: i64) {
        let node_id = crate::support::begin_send(&*self.store, run).await;
        let ended = self
            .store
            .run_mark_trigger_failed(
                tickwork_store::TriggerFailed {
                    run_id: run,
                    node_id,
                    address: None,
                    trigger_code: 500,
                    trigger_msg: tickwork_core::Error::NoExecutor.to_string(),
                    at: tickwork_admin::timer::now_ms(),
                },
                tickwork_store::NO_FOLLOW_UPS,
            )
            .await
            .expect("trigger failure");
        assert_eq!(ended.runs.len(), 1, "run {run} ended");
    }

    /// Moves every session `ms` into the past, as if that much time had gone by.
    async fn age_sessions(&self, ms: i64) {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", self.db_file.display()))
            .await
            .unwrap();
        sqlx::query(
            "UPDATE tw_sessions SET created_at = created_at - ?1, \
             expires_at = expires_at - ?1, last_seen_at = last_seen_at - ?1",
        )
        .bind(ms)
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
}

/// The console as a browser uses it, without following redirects, cookies handled by hand.
struct Browser<'a> {
    h: &'a Harness,
    /// The admin's URL, as the browser's `Origin` names it.
    base: String,
}

impl Browser<'_> {
    fn new(h: &Harness) -> Browser<'_> {
        Browser {
            h,
            base: format!("http://{HOST}"),
        }
    }

    /// Opens the login page: the form's CSRF token, as its cookie holds it.
    async fn login_token(&self) -> String {
        let resp = self.get("/login", None).await;
        assert_eq!(resp.status(), 200);
        let token = set_cookie(&resp, "tw_login_csrf").expect("login csrf cookie");
        let page = resp.text();
        assert!(page.contains(&token), "the form carries the token");
        token
    }

    /// Posts the login form with `token` (as cookie and field) and extra `headers`.
    async fn post_login(
        &self,
        token: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut fields: Vec<(&str, &str)> = vec![("_csrf", token)];
        fields.extend_from_slice(form);
        let cookie = format!("tw_login_csrf={token}");
        let mut all = vec![("cookie", cookie.as_str())];
        // As a browser sends it from our page, unless the test names another.
        if !headers.iter().any(|(k, _)| *k == "origin") {
            all.push(("origin", self.base.as_str()));
        }
        all.extend_from_slice(headers);
        self.post(
            "/login",
            &all,
            serde_urlencoded::to_string(&fields).unwrap(),
        )
        .await
    }

    /// Posts a form with `headers`.
    async fn post(&self, path: &str, headers: &[(&str, &str)], form: String) -> Reply {
        let mut all = vec![("content-type", FORM)];
        all.extend_from_slice(headers);
        self.h.send(Method::POST, path, &all, Some(form)).await
    }

    /// Signs in through the form; the session cookie.
    async fn login(&self, user: &str, password: &str) -> String {
        let token = self.login_token().await;
        let resp = self
            .post_login(&token, &[("username", user), ("password", password)], &[])
            .await;
        assert_eq!(resp.status(), 303, "login of {user}");
        set_cookie(&resp, "tw_session").expect("session cookie")
    }

    async fn get(&self, path: &str, session: Option<&str>) -> Reply {
        let cookie = session.map(|s| format!("tw_session={s}"));
        let headers: Vec<(&str, &str)> = cookie.iter().map(|c| ("cookie", c.as_str())).collect();
        self.h.send(Method::GET, path, &headers, None).await
    }
}

/// A field error answered by the service: 400, `invalid_input`, naming `field`.
pub(crate) fn assert_field_error(a: &Answer, field: &str) {
    a.refused(400, "invalid_input");
    assert_eq!(a.body["field"], field, "{a:?}");
}

// ---- every endpoint, as an admin ----

#[tokio::test]
async fn every_endpoint_answers_as_documented() {
    let h = Harness::start().await;
    let me = h.get("/me", "/me", BUILTIN).await.ok();
    assert_eq!(me["role"], "admin");
    assert_eq!(
        me["default_time_zone"],
        h.service().config().default_time_zone.as_str()
    );

    // groups
    let g = h.group("tour").await;
    assert_eq!(
        h.get("/groups", "/groups", BUILTIN)
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        h.get("/groups/{id}", &format!("/groups/{g}"), BUILTIN)
            .await
            .ok()["app_name"],
        "tour"
    );
    let upd = h
        .call(
            Method::PUT,
            "/groups/{id}",
            &format!("/groups/{g}"),
            BUILTIN,
            Some(json!({ "app_name": "tour", "title": "Tour executors" })),
        )
        .await
        .ok();
    assert_eq!(upd["title"], "Tour executors");
    let inst = h
        .get(
            "/groups/{id}/instances",
            &format!("/groups/{g}/instances"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(inst, json!([]));
    let rotated = h
        .call(
            Method::POST,
            "/groups/{id}/token",
            &format!("/groups/{g}/token"),
            BUILTIN,
            None,
        )
        .await;
    assert_eq!(rotated.status, 201, "{rotated:?}");
    assert!(rotated.body["token"].as_str().unwrap().starts_with("twg_"));

    // jobs
    let job = h.shell_job(g, BUILTIN).await.ok();
    let j = job["id"].as_i64().unwrap();
    let page = h
        .get("/jobs", "/jobs?text=shell&page=1&size=10", BUILTIN)
        .await
        .ok();
    assert_eq!(
        (
            page["total"].as_u64(),
            page["page"].as_u64(),
            page["size"].as_u64()
        ),
        (Some(1), Some(1), Some(10))
    );
    assert_eq!(
        h.get("/jobs/{id}", &format!("/jobs/{j}"), BUILTIN)
            .await
            .ok()["id"],
        j
    );
    let mut edit = job.clone();
    for k in [
        "id",
        "glue_updated_at",
        "status",
        "next_fire_at",
        "last_fire_at",
        "version",
        "created_at",
        "updated_at",
    ] {
        edit.as_object_mut().unwrap().remove(k);
    }
    edit["description"] = "shell, edited".into();
    let edited = h
        .call(
            Method::PUT,
            "/jobs/{id}",
            &format!("/jobs/{j}"),
            BUILTIN,
            Some(edit),
        )
        .await
        .ok();
    assert_eq!(edited["description"], "shell, edited");
    let started = h
        .call(
            Method::POST,
            "/jobs/{id}/start",
            &format!("/jobs/{j}/start"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(started["status"], "running");
    assert!(started["next_fire_at"].as_i64().is_some());
    let stopped = h
        .call(
            Method::POST,
            "/jobs/{id}/stop",
            &format!("/jobs/{j}/stop"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(stopped["status"], "stopped");
    let copy = h
        .call(
            Method::POST,
            "/jobs/{id}/copy",
            &format!("/jobs/{j}/copy"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(copy["description"], "copy of shell, edited");
    assert_ne!(copy["key"], edited["key"]);
    assert_eq!(copy["status"], "stopped");
    let bulk = h
        .call(
            Method::POST,
            "/jobs/bulk",
            "/jobs/bulk",
            BUILTIN,
            Some(json!({ "jobs": [{ "group_id": g, "key": "tour-bulk", "handler": "demo" }] })),
        )
        .await
        .ok();
    assert_eq!(bulk["created"], 1);
    assert_eq!(bulk["jobs"][0]["key"], "tour-bulk");
    let bulk_id = bulk["jobs"][0]["id"].as_i64().unwrap();
    h.call(
        Method::DELETE,
        "/jobs/{id}",
        &format!("/jobs/{bulk_id}"),
        BUILTIN,
        None,
    )
    .await
    .ok();

    // scripts
    let versions = h
        .get(
            "/jobs/{id}/script/versions",
            &format!("/jobs/{j}/script/versions"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
    let same = h
        .get(
            "/jobs/{id}/script/diff",
            &format!("/jobs/{j}/script/diff?from=1&to=1"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(
        (same["added"].as_u64(), same["removed"].as_u64()),
        (Some(0), Some(0))
    );
    let saved = h
        .call(
            Method::PUT,
            "/jobs/{id}/script",
            &format!("/jobs/{j}/script"),
            BUILTIN,
            Some(json!({ "source": "echo two", "comment": "second" })),
        )
        .await
        .ok();
    assert_eq!(
        (saved["version"].as_i64(), saved["comment"].as_str()),
        (Some(2), Some("second"))
    );
    let restored = h
        .call(
            Method::POST,
            "/jobs/{id}/script/versions/{version}/restore",
            &format!("/jobs/{j}/script/versions/1/restore"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(
        (restored["version"].as_i64(), restored["source"].as_str()),
        (Some(3), Some("echo one"))
    );
    assert_eq!(
        h.get("/jobs/{id}", &format!("/jobs/{j}"), BUILTIN)
            .await
            .ok()["glue_source"],
        "echo one"
    );
    let versions = h
        .get(
            "/jobs/{id}/script/versions",
            &format!("/jobs/{j}/script/versions"),
            BUILTIN,
        )
        .await
        .ok();
    let numbers: Vec<i64> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [3, 2, 1]);

    // runs: the trigger's run goes to the pipeline, which finds no executor for it: it fails
    // at dispatch and becomes final
    let run = h
        .call(
            Method::POST,
            "/jobs/{id}/trigger",
            &format!("/jobs/{j}/trigger"),
            BUILTIN,
            Some(json!({ "params": "x" })),
        )
        .await
        .ok();
    let r = run["id"].as_i64().unwrap();
    assert!(
        h.pipeline.take().contains(&Call::Arm(r)),
        "the run is armed"
    );
    assert_eq!(h.run_state(r).await, "planned");
    h.fail_dispatch(r).await;
    assert_eq!(h.run_state(r).await, "failed");
    let runs = h
        .get(
            "/runs",
            &format!("/runs?job_id={j}&state=failed&page=1&size=5"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(runs["total"], 1);
    let log = h
        .get(
            "/runs/{id}/log",
            &format!("/runs/{r}/log?from_line=1"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(log["end"], true);
    h.call(
        Method::POST,
        "/runs/{id}/kill",
        &format!("/runs/{r}/kill"),
        BUILTIN,
        None,
    )
    .await
    .refused(409, "conflict");
    let far = tickwork_admin::timer::now_ms() + 60_000;
    let cleared = h
        .call(
            Method::DELETE,
            "/runs",
            &format!("/runs?before={far}&job_id={j}"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(cleared["deleted"], 1);
    h.get("/runs/{id}", &format!("/runs/{r}"), BUILTIN)
        .await
        .refused(404, "not_found");

    // schedule preview, both forms
    let fires = h
        .get(
            "/schedule/preview",
            "/schedule/preview?type=CRON&conf=0%200%203%20*%20*%20%3F&tz=Asia/Shanghai&n=3",
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(fires["fires"].as_array().unwrap().len(), 3);
    let bad = h
        .get(
            "/schedule/preview",
            "/schedule/preview?type=CRON&conf=not%20cron",
            BUILTIN,
        )
        .await;
    bad.refused(400, "invalid_input");
    assert_eq!(bad.body["field"], "schedule_conf");
    let fires = h
        .call(
            Method::POST,
            "/schedule/preview",
            "/schedule/preview",
            BUILTIN,
            Some(json!({ "schedule_type": "FIX_RATE", "schedule_conf": "10s", "n": 2 })),
        )
        .await
        .ok();
    assert_eq!(fires["fires"].as_array().unwrap().len(), 2);
    let map = h
        .get("/schedule/heatmap", "/schedule/heatmap?bucket=1h", BUILTIN)
        .await
        .ok();
    assert_eq!(map["buckets"], 24);

    // users and tokens
    let (uid, secret) = h.user_with_token("carol", "viewer", &[]).await;
    assert!(
        h.get("/users", "/users", BUILTIN)
            .await
            .ok()
            .as_array()
            .unwrap()
            .len()
            >= 2
    );
    assert_eq!(
        h.get("/users/{id}", &format!("/users/{uid}"), BUILTIN)
            .await
            .ok()["username"],
        "carol"
    );
    let u = h
        .call(
            Method::PUT,
            "/users/{id}",
            &format!("/users/{uid}"),
            BUILTIN,
            Some(json!({ "role": "operator", "group_ids": [g], "locale": "zh-CN" })),
        )
        .await
        .ok();
    assert_eq!(
        (u["role"].as_str(), u["locale"].as_str()),
        (Some("operator"), Some("zh-CN"))
    );
    h.call(
        Method::PUT,
        "/users/{id}/password",
        &format!("/users/{uid}/password"),
        BUILTIN,
        Some(json!({ "password": "a-new-password-for-carol" })),
    )
    .await
    .ok();
    let tokens = h.get("/tokens", "/tokens", BUILTIN).await.ok();
    let tid = tokens.as_array().unwrap()[0]["id"].as_i64().unwrap();
    assert!(
        tokens.to_string().find("tw_").is_none(),
        "a token list shows no secret: {tokens}"
    );
    assert_eq!(h.get("/me", "/me", &secret).await.ok()["username"], "carol");
    let revoked = h
        .call(
            Method::DELETE,
            "/tokens/{id}",
            &format!("/tokens/{tid}"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert!(revoked["revoked_at"].as_i64().is_some());
    h.get("/me", "/me", &secret)
        .await
        .refused(401, "unauthorized");
    let deleted = h
        .call(
            Method::DELETE,
            "/users/{id}",
            &format!("/users/{uid}"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(deleted["deleted"], uid);

    // alarm channels and their deliveries
    let hook = json!({ "name": "ops-hook", "kind": "webhook",
        "config": { "url": "http://127.0.0.1:9/hook", "secret": "s3cret" } });
    let ch = h
        .call(
            Method::POST,
            "/alarm-channels",
            "/alarm-channels",
            BUILTIN,
            Some(hook),
        )
        .await;
    assert_eq!(ch.status, 200, "{ch:?}");
    assert_eq!(ch.body["config"]["secret_set"], json!(true), "{ch:?}");
    assert!(
        !ch.body.to_string().contains("s3cret"),
        "secret shown: {ch:?}"
    );
    let ch_id = ch.body["id"].as_i64().unwrap();
    let ch_path = format!("/alarm-channels/{ch_id}");
    let list = h
        .get("/alarm-channels", "/alarm-channels", BUILTIN)
        .await
        .ok();
    assert_eq!(list.as_array().unwrap().len(), 1);
    h.get("/alarm-channels/{id}", &ch_path, BUILTIN).await.ok();
    let renamed = json!({ "name": "ops-hook-2", "kind": "webhook", "config": {} });
    let updated = h
        .call(
            Method::PUT,
            "/alarm-channels/{id}",
            &ch_path,
            BUILTIN,
            Some(renamed),
        )
        .await
        .ok();
    assert_eq!(updated["name"], "ops-hook-2");
    let test_path = format!("{ch_path}/test");
    let tried = h
        .call(
            Method::POST,
            "/alarm-channels/{id}/test",
            &test_path,
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(
        tried["ok"],
        json!(false),
        "nothing listens there: {tried:?}"
    );
    let deliveries = h
        .get(
            "/alarm-deliveries",
            "/alarm-deliveries?state=failed",
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(deliveries["total"], json!(0));

    // stats and audit
    let stats = h.get("/stats", "/stats", BUILTIN).await.ok();
    assert_eq!(
        (stats["jobs"].as_u64(), stats["groups"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(stats["runs_per_day"].as_array().unwrap().len(), 7);
    let audit = h
        .get("/audit", "/audit?page=1&size=100", BUILTIN)
        .await
        .ok();
    let actions: BTreeSet<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for a in [
        "group.create",
        "group.update",
        "job.create",
        "job.update",
        "job.start",
        "job.stop",
        "job.copy",
        "script.save",
        "script.restore",
        "job.trigger",
        "runs.clear",
        "user.create",
        "user.update",
        "user.password",
        "token.create",
        "token.revoke",
        "alarm_channel.create",
        "alarm_channel.update",
        "alarm_channel.test",
    ] {
        assert!(actions.contains(a), "no audit record of {a}: {actions:?}");
    }

    let acted = h
        .call(
            Method::POST,
            "/jobs/actions",
            "/jobs/actions",
            BUILTIN,
            Some(json!({ "action": "stop", "ids": [j] })),
        )
        .await
        .ok();
    assert_eq!(acted["done"], json!([j]));

    // submissions
    let put = h
        .call(
            Method::PUT,
            "/submissions/{app}/{key}",
            "/submissions/tour/order-42",
            BUILTIN,
            Some(json!({
                "handler": "demo", "params": "p", "time_zone": "Asia/Shanghai",
                "schedule": { "kind": "repeat", "every_ms": 60000, "count": 3 },
            })),
        )
        .await
        .ok();
    assert_eq!(put["outcome"], "created", "{put}");
    assert_eq!(put["submission"]["fires_left"], 3, "{put}");
    let got = h
        .get(
            "/submissions/{app}/{key}",
            "/submissions/tour/order-42",
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(got, put["submission"]);
    let batch = h
        .call(
            Method::POST,
            "/submissions/{app}",
            "/submissions/tour",
            BUILTIN,
            Some(json!({ "items": [
                { "key": "order-42", "submission": { "handler": "demo",
                    "schedule": { "kind": "now" } } },
                { "key": "order-43", "submission": { "handler": "demo",
                    "schedule": { "kind": "cron", "cron": "0 0 3 * * ?" } } },
                { "key": "bad key", "submission": { "handler": "demo",
                    "schedule": { "kind": "now" } } },
            ] })),
        )
        .await
        .ok();
    let outcomes: Vec<&Value> = batch["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.get("outcome").unwrap_or(&r["error"]["code"]))
        .collect();
    assert_eq!(
        outcomes,
        [&json!("kept"), &json!("created"), &json!("invalid_input")]
    );
    // Nothing ran here (the pipeline only records): no completion yet.
    let completions = h
        .get(
            "/completions/{app}",
            "/completions/tour?after=0&limit=10",
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(completions["items"], json!([]));
    let acked = h
        .call(
            Method::POST,
            "/completions/{app}/ack",
            "/completions/tour/ack",
            BUILTIN,
            Some(json!({ "ids": [1, 2] })),
        )
        .await
        .ok();
    assert_eq!(acked["acked"], 0);
    for key in ["order-42", "order-43"] {
        let gone = h
            .call(
                Method::DELETE,
                "/submissions/{app}/{key}",
                &format!("/submissions/tour/{key}"),
                BUILTIN,
                None,
            )
            .await
            .ok();
        assert_eq!(gone["key"], key);
    }

    // workflows
    let job_key = h.job_key(j, BUILTIN).await;
    let wf = json!({
        "key": "tour-wf", "name": "tour", "group": "tour",
        "dag": { "nodes": [{ "key": "a", "job": job_key }, { "key": "b", "job": job_key }],
                 "edges": [{ "from": "a", "to": "b" }] },
    });
    let created = h
        .call(
            Method::POST,
            "/workflows",
            "/workflows",
            BUILTIN,
            Some(wf.clone()),
        )
        .await
        .ok();
    assert_eq!(created["failure_policy"], "END", "{created}");
    assert_eq!(created["schedule_type"], "NONE", "{created}");
    let listed = h.get("/workflows", "/workflows", BUILTIN).await.ok();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let wf_path = "/workflows/tour-wf";
    assert_eq!(
        h.get("/workflows/{workflow}", wf_path, BUILTIN).await.ok(),
        created
    );
    let mut renamed = wf.clone();
    renamed["name"] = json!("tour, renamed");
    let updated = h
        .call(
            Method::PUT,
            "/workflows/{workflow}",
            wf_path,
            BUILTIN,
            Some(renamed),
        )
        .await
        .ok();
    assert_eq!(updated["version"], 2);
    let run = h
        .call(
            Method::POST,
            "/workflows/{workflow}/run",
            "/workflows/tour-wf/run",
            BUILTIN,
            Some(json!({ "params": "p" })),
        )
        .await
        .ok();
    assert_eq!(run["state"], "RUNNING", "{run}");
    assert_eq!(run["nodes"][0]["state"], "RUNNING", "{run}");
    assert_eq!(run["context"]["params"], "p", "{run}");
    let instance = run["id"].as_i64().unwrap();
    let listed = h
        .get(
            "/workflows/{workflow}/instances",
            "/workflows/tour-wf/instances?limit=10",
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(listed[0]["id"], instance);
    let ipath = format!("/workflow-instances/{instance}");
    assert_eq!(
        h.get("/workflow-instances/{id}", &ipath, BUILTIN)
            .await
            .ok()["id"],
        instance
    );
    let mark = "/workflow-instances/{id}/nodes/{node}/mark-succeeded";
    let running = h
        .call(
            Method::POST,
            mark,
            &format!("{ipath}/nodes/a/mark-succeeded"),
            BUILTIN,
            None,
        )
        .await;
    running.refused(409, "conflict");
    let stop = "/workflow-instances/{id}/stop";
    let stopped = h
        .call(Method::POST, stop, &format!("{ipath}/stop"), BUILTIN, None)
        .await
        .ok();
    assert_eq!(stopped["state"], "STOPPED", "{stopped}");
    let marked = h
        .call(
            Method::POST,
            mark,
            &format!("{ipath}/nodes/a/mark-succeeded"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(marked["nodes"][0]["state"], "SUCCEEDED", "{marked}");
    let resumed = h
        .call(
            Method::POST,
            "/workflow-instances/{id}/resume",
            &format!("{ipath}/resume"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(resumed["nodes"][1]["state"], "RUNNING", "{resumed}");
    h.call(Method::POST, stop, &format!("{ipath}/stop"), BUILTIN, None)
        .await
        .ok();
    let rerun = h
        .call(
            Method::POST,
            "/workflow-instances/{id}/nodes/{node}/rerun",
            &format!("{ipath}/nodes/b/rerun"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(rerun["state"], "RUNNING", "{rerun}");
    h.call(
        Method::DELETE,
        "/workflows/{workflow}",
        wf_path,
        BUILTIN,
        None,
    )
    .await
    .refused(409, "conflict");
    h.call(Method::POST, stop, &format!("{ipath}/stop"), BUILTIN, None)
        .await
        .ok();
    let gone = h
        .call(
            Method::DELETE,
            "/workflows/{workflow}",
            wf_path,
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(gone["key"], "tour-wf");

    // deletes last
    h.call(
        Method::DELETE,
        "/alarm-channels/{id}",
        &ch_path,
        BUILTIN,
        None,
    )
    .await
    .ok();
    let copy_id = copy["id"].as_i64().unwrap();
    h.call(
        Method::DELETE,
        "/jobs/{id}",
        &format!("/jobs/{copy_id}"),
        BUILTIN,
        None,
    )
    .await
    .ok();
    h.call(
        Method::DELETE,
        "/jobs/{id}",
        &format!("/jobs/{j}"),
        BUILTIN,
        None,
    )
    .await
    .ok();
    h.call(
        Method::DELETE,
        "/groups/{id}",
        &format!("/groups/{g}"),
        BUILTIN,
        None,
    )
    .await
    .ok();

    let called = h.called.lock().unwrap().clone();
    let missing: Vec<_> = tickwork_admin::http::API_ROUTES
        .iter()
        .filter(|(m, p)| !called.contains(&((*m).to_owned(), (*p).to_owned())))
        .collect();
    assert!(
        missing.is_empty(),
        "endpoints this test never called: {missing:?}"
    );
    h.stop().await;
}

// ---- the service and its pipeline ----

fn job(group: i64, cron: &str) -> Value {
    json!({
        "group_id": group, "description": "oneshot", "schedule_type": "CRON",
        "schedule_conf": cron, "handler": "demo",
    })
}

#[tokio::test]
async fn rest_changes_reach_the_pipeline_only_through_its_handle() {
    let h = Harness::start().await;
    let group = h.group("oneshot").await;
    assert_eq!(
        h.pipeline.take(),
        [],
        "creating a group asks nothing of the pipeline"
    );

    // A running job wakes the claim loop when it is created or changed; a stopped one has
    // nothing to claim and wakes nothing.
    let mut job_id = 0;
    for start in [true, false] {
        let mut new = job(group, "0 0 3 * * ?");
        new["start"] = start.into();
        let created = h
            .call(Method::POST, "/jobs", "/jobs", BUILTIN, Some(new))
            .await;
        assert_eq!(created.status, 200, "{created:?}");
        let id = created.body["id"].as_i64().unwrap();
        let wake: &[Call] = if start { &[Call::Wake] } else { &[] };
        assert_eq!(h.pipeline.take(), wake, "a job created, started: {start}");
        let edited = h
            .call(
                Method::PUT,
                "/jobs/{id}",
                &format!("/jobs/{id}"),
                BUILTIN,
                Some(job(group, "0 0 4 * * ?")),
            )
            .await;
        assert_eq!(edited.status, 200, "{edited:?}");
        assert_eq!(
            h.pipeline.take(),
            [&[Call::ForgetJob(id)][..], wake].concat(),
            "a job changed, started: {start}"
        );
        if start {
            job_id = id;
        }
    }

    let triggered = h
        .call(
            Method::POST,
            "/jobs/{id}/trigger",
            &format!("/jobs/{job_id}/trigger"),
            BUILTIN,
            None,
        )
        .await;
    assert_eq!(triggered.status, 200, "{triggered:?}");
    let run_id = triggered.body["id"].as_i64().unwrap();
    assert_eq!(
        h.pipeline.take(),
        [Call::Arm(run_id)],
        "the trigger's run is armed"
    );
    let run = h.store.run_get(run_id).await.unwrap();
    assert_eq!(run.state, tickwork_core::run::RunState::Planned);

    let renamed = h
        .call(
            Method::PUT,
            "/groups/{id}",
            &format!("/groups/{group}"),
            BUILTIN,
            Some(json!({ "app_name": "oneshot", "title": "renamed" })),
        )
        .await;
    assert_eq!(renamed.status, 200, "{renamed:?}");
    assert_eq!(h.pipeline.take(), [Call::ForgetGroup(group)]);
    h.stop().await;
}

#[tokio::test]
async fn bad_job_input_changes_nothing_and_asks_nothing_of_the_pipeline() {
    let h = Harness::start().await;
    let group = h.group("oneshot").await;
    let refused = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job(group, "not a cron")),
        )
        .await;
    assert_field_error(&refused, "schedule_conf");
    assert_eq!(h.pipeline.take(), []);
    assert_eq!(h.job_count().await, 0, "nothing was saved");
    h.stop().await;
}

#[tokio::test]
async fn console_answers_without_a_server() {
    let h = Harness::start().await;
    let login = h.send(Method::GET, "/login", &[], None).await;
    assert_eq!(login.status(), StatusCode::OK);
    assert!(login.text().contains("<form"), "{}", login.text());
    let home = h.send(Method::GET, "/", &[], None).await;
    assert!(home.status().is_redirection(), "{}", home.status());
    assert!(location(&home).starts_with("/login"), "{}", location(&home));
    assert_eq!(h.pipeline.take(), []);
    h.stop().await;
}

// ---- roles ----

#[tokio::test]
async fn operators_change_only_their_groups_and_viewers_change_nothing() {
    let h = Harness::start().await;
    let a = h.group("group-a").await;
    let b = h.group("group-b").await;
    let job_a = h.shell_job(a, BUILTIN).await.ok()["id"].as_i64().unwrap();
    let job_b = h.shell_job(b, BUILTIN).await.ok()["id"].as_i64().unwrap();
    let (op_id, op) = h.user_with_token("olga", "operator", &[a]).await;
    let (viewer_id, viewer) = h.user_with_token("victor", "viewer", &[]).await;
    let (admin2_id, _) = h.user_with_token("ada", "admin", &[]).await;
    let channel = json!({ "name": "pager", "kind": "slack",
        "config": { "url": "http://127.0.0.1:9/slack" } });
    let channel_id = h
        .call(
            Method::POST,
            "/alarm-channels",
            "/alarm-channels",
            BUILTIN,
            Some(channel.clone()),
        )
        .await
        .ok()["id"]
        .as_i64()
        .unwrap();
    let channel_path = format!("/alarm-channels/{channel_id}");

    // The operator works in group A.
    let own = h.shell_job(a, &op).await.ok();
    let own_id = own["id"].as_i64().unwrap();
    h.call(
        Method::POST,
        "/jobs/{id}/start",
        &format!("/jobs/{own_id}/start"),
        &op,
        None,
    )
    .await
    .ok();
    h.call(
        Method::POST,
        "/jobs/{id}/trigger",
        &format!("/jobs/{job_a}/trigger"),
        &op,
        None,
    )
    .await
    .ok();
    h.call(
        Method::PUT,
        "/jobs/{id}/script",
        &format!("/jobs/{job_a}/script"),
        &op,
        Some(json!({ "source": "echo op" })),
    )
    .await
    .ok();

    let own_submission = h
        .call(
            Method::PUT,
            "/submissions/{app}/{key}",
            "/submissions/group-a/own",
            &op,
            Some(json!({ "handler": "h", "schedule": { "kind": "repeat", "every_ms": 1000 } })),
        )
        .await
        .ok();
    assert_eq!(own_submission["outcome"], "created");
    let job_a_key = h.job_key(job_a, &op).await;
    let wf_a = json!({
        "key": "wf-a", "name": "wf a", "group": "group-a",
        "dag": { "nodes": [{ "key": "n", "job": job_a_key }] },
    });
    h.call(
        Method::POST,
        "/workflows",
        "/workflows",
        &op,
        Some(wf_a.clone()),
    )
    .await
    .ok();
    let wf_instance = h
        .call(
            Method::POST,
            "/workflows/{workflow}/run",
            "/workflows/wf-a/run",
            &op,
            None,
        )
        .await
        .ok()["id"]
        .as_i64()
        .unwrap();
    let wf_ipath = format!("/workflow-instances/{wf_instance}");

    let before_audit = h.audit_total().await;
    let jobs_before = h.job_count().await;
    // ... and not in group B, nor on groups, users or the audit log.
    let now = tickwork_admin::timer::now_ms();
    let job_b_body = json!({ "group_id": b, "handler": "h" });
    let submission = json!({ "handler": "h", "schedule": { "kind": "now" } });
    let batch = json!({ "items": [{ "key": "k", "submission": submission }] });
    let job_b_key = h.job_key(job_b, BUILTIN).await;
    // A workflow of the operator's group with a node of a job it may not change.
    let wf_with_b = json!({
        "key": "wf-reaches-b", "name": "reaches b", "group": "group-a",
        "dag": { "nodes": [{ "key": "n", "job": job_b_key }] },
    });
    let forbidden_for_operator: Vec<(Method, &str, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/workflows",
            "/workflows".into(),
            Some(wf_with_b),
        ),
        (
            Method::PUT,
            "/submissions/{app}/{key}",
            "/submissions/group-b/k".into(),
            Some(submission.clone()),
        ),
        (
            Method::POST,
            "/submissions/{app}",
            "/submissions/group-b".into(),
            Some(batch.clone()),
        ),
        (
            Method::DELETE,
            "/submissions/{app}/{key}",
            "/submissions/group-b/k".into(),
            None,
        ),
        (
            Method::POST,
            "/completions/{app}/ack",
            "/completions/group-b/ack".into(),
            Some(json!({ "ids": [1] })),
        ),
        (
            Method::POST,
            "/jobs",
            "/jobs".into(),
            Some(job_b_body.clone()),
        ),
        (
            Method::PUT,
            "/jobs/{id}",
            format!("/jobs/{job_b}"),
            Some(job_b_body.clone()),
        ),
        // moving a job of A into B is a change of B too
        (
            Method::PUT,
            "/jobs/{id}",
            format!("/jobs/{own_id}"),
            Some(job_b_body.clone()),
        ),
        (Method::DELETE, "/jobs/{id}", format!("/jobs/{job_b}"), None),
        (
            Method::POST,
            "/jobs/{id}/start",
            format!("/jobs/{job_b}/start"),
            None,
        ),
        (
            Method::POST,
            "/jobs/{id}/stop",
            format!("/jobs/{job_b}/stop"),
            None,
        ),
        (
            Method::POST,
            "/jobs/{id}/trigger",
            format!("/jobs/{job_b}/trigger"),
            None,
        ),
        (
            Method::POST,
            "/jobs/{id}/copy",
            format!("/jobs/{job_b}/copy"),
            None,
        ),
        (
            Method::PUT,
            "/jobs/{id}/script",
            format!("/jobs/{job_b}/script"),
            Some(json!({ "source": "x" })),
        ),
        (
            Method::POST,
            "/jobs/{id}/script/versions/{version}/restore",
            format!("/jobs/{job_b}/script/versions/1/restore"),
            None,
        ),
        (
            Method::DELETE,
            "/runs",
            format!("/runs?before={now}&group_id={b}"),
            None,
        ),
        (Method::DELETE, "/runs", format!("/runs?before={now}"), None),
        (
            Method::POST,
            "/groups",
            "/groups".into(),
            Some(json!({ "app_name": "group-c" })),
        ),
        (
            Method::PUT,
            "/groups/{id}",
            format!("/groups/{a}"),
            Some(json!({ "app_name": "group-a" })),
        ),
        (Method::DELETE, "/groups/{id}", format!("/groups/{b}"), None),
        (Method::GET, "/users", "/users".into(), None),
        (
            Method::POST,
            "/users",
            "/users".into(),
            Some(json!({ "username": "x", "password": "long-enough-pw", "role": "admin" })),
        ),
        (
            Method::PUT,
            "/users/{id}",
            format!("/users/{op_id}"),
            Some(json!({ "role": "admin" })),
        ),
        (
            Method::DELETE,
            "/users/{id}",
            format!("/users/{viewer_id}"),
            None,
        ),
        (
            Method::PUT,
            "/users/{id}/password",
            format!("/users/{viewer_id}/password"),
            Some(json!({ "password": "long-enough-pw" })),
        ),
        (
            Method::GET,
            "/users/{id}",
            format!("/users/{admin2_id}"),
            None,
        ),
        (
            Method::POST,
            "/tokens",
            "/tokens".into(),
            Some(json!({ "name": "t", "user_id": admin2_id })),
        ),
        (Method::GET, "/audit", "/audit".into(), None),
        (
            Method::DELETE,
            "/alarm-channels/{id}",
            channel_path.clone(),
            None,
        ),
    ];
    for (m, route, path, body) in &forbidden_for_operator {
        let a = h.call(m.clone(), route, path, &op, body.clone()).await;
        assert_eq!(
            (a.status, a.code()),
            (403, "forbidden"),
            "operator {m} {path}: {a:?}"
        );
    }
    // A viewer changes nothing at all (its own password and tokens aside).
    let mut wf_a_other = wf_a.clone();
    wf_a_other["key"] = json!("wf-viewer");
    let viewer_changes: Vec<(Method, &str, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/workflows",
            "/workflows".into(),
            Some(wf_a_other),
        ),
        (
            Method::PUT,
            "/workflows/{workflow}",
            "/workflows/wf-a".into(),
            Some(wf_a.clone()),
        ),
        (
            Method::DELETE,
            "/workflows/{workflow}",
            "/workflows/wf-a".into(),
            None,
        ),
        (
            Method::POST,
            "/workflows/{workflow}/run",
            "/workflows/wf-a/run".into(),
            None,
        ),
        (
            Method::POST,
            "/workflow-instances/{id}/stop",
            format!("{wf_ipath}/stop"),
            None,
        ),
        (
            Method::POST,
            "/workflow-instances/{id}/resume",
            format!("{wf_ipath}/resume"),
            None,
        ),
        (
            Method::POST,
            "/workflow-instances/{id}/nodes/{node}/mark-succeeded",
            format!("{wf_ipath}/nodes/n/mark-succeeded"),
            None,
        ),
        (
            Method::POST,
            "/workflow-instances/{id}/nodes/{node}/rerun",
            format!("{wf_ipath}/nodes/n/rerun"),
            None,
        ),
        (
            Method::PUT,
            "/submissions/{app}/{key}",
            "/submissions/group-a/k".into(),
            Some(submission.clone()),
        ),
        (
            Method::POST,
            "/submissions/{app}",
            "/submissions/group-a".into(),
            Some(batch.clone()),
        ),
        (
            Method::DELETE,
            "/submissions/{app}/{key}",
            "/submissions/group-a/own".into(),
            None,
        ),
        (
            Method::POST,
            "/completions/{app}/ack",
            "/completions/group-a/ack".into(),
            Some(json!({ "ids": [1] })),
        ),
        (
            Method::POST,
            "/groups/{id}/token",
            format!("/groups/{a}/token"),
            None,
        ),
        (
            Method::POST,
            "/jobs",
            "/jobs".into(),
            Some(json!({ "group_id": a, "handler": "h" })),
        ),
        (
            Method::POST,
            "/jobs/bulk",
            "/jobs/bulk".into(),
            Some(json!({ "jobs": [{ "group_id": a, "handler": "h" }] })),
        ),
        (
            Method::POST,
            "/jobs/actions",
            "/jobs/actions".into(),
            Some(json!({ "action": "stop", "ids": [job_b] })),
        ),
        (
            Method::PUT,
            "/jobs/{id}",
            format!("/jobs/{job_a}"),
            Some(json!({ "group_id": a, "handler": "h" })),
        ),
        (Method::DELETE, "/jobs/{id}", format!("/jobs/{job_a}"), None),
        (
            Method::POST,
            "/jobs/{id}/start",
            format!("/jobs/{job_a}/start"),
            None,
        ),
        (
            Method::POST,
            "/jobs/{id}/stop",
            format!("/jobs/{job_a}/stop"),
            None,
        ),
        (
            Method::POST,
            "/jobs/{id}/trigger",
            format!("/jobs/{job_a}/trigger"),
            None,
        ),
        (
            Method::POST,
            "/jobs/{id}/copy",
            format!("/jobs/{job_a}/copy"),
            None,
        ),
        (
            Method::PUT,
            "/jobs/{id}/script",
            format!("/jobs/{job_a}/script"),
            Some(json!({ "source": "x" })),
        ),
        (
            Method::POST,
            "/jobs/{id}/script/versions/{version}/restore",
            format!("/jobs/{job_a}/script/versions/1/restore"),
            None,
        ),
        (
            Method::DELETE,
            "/runs",
            format!("/runs?before={now}&job_id={job_a}"),
            None,
        ),
        (Method::POST, "/runs/{id}/kill", "/runs/1/kill".into(), None),
        (
            Method::POST,
            "/groups",
            "/groups".into(),
            Some(json!({ "app_name": "group-v" })),
        ),
        (
            Method::PUT,
            "/groups/{id}",
            format!("/groups/{a}"),
            Some(json!({ "app_name": "group-a" })),
        ),
        (Method::DELETE, "/groups/{id}", format!("/groups/{a}"), None),
        (
            Method::POST,
            "/users",
            "/users".into(),
            Some(json!({ "username": "y", "password": "long-enough-pw", "role": "viewer" })),
        ),
        (
            Method::PUT,
            "/users/{id}",
            format!("/users/{viewer_id}"),
            Some(json!({ "role": "admin" })),
        ),
        (
            Method::DELETE,
            "/users/{id}",
            format!("/users/{op_id}"),
            None,
        ),
        (
            Method::PUT,
            "/users/{id}/password",
            format!("/users/{op_id}/password"),
            Some(json!({ "password": "long-enough-pw" })),
        ),
        (Method::DELETE, "/tokens/{id}", "/tokens/1".into(), None),
        (Method::GET, "/audit", "/audit".into(), None),
        (
            Method::POST,
            "/alarm-channels",
            "/alarm-channels".into(),
            Some(json!({ "name": "mine", "kind": "slack", "config": { "url": "http://x/y" } })),
        ),
        (
            Method::PUT,
            "/alarm-channels/{id}",
            channel_path.clone(),
            Some(channel.clone()),
        ),
        (
            Method::DELETE,
            "/alarm-channels/{id}",
            channel_path.clone(),
            None,
        ),
        (
            Method::POST,
            "/alarm-channels/{id}/test",
            format!("{channel_path}/test"),
            None,
        ),
    ];
    for (m, route, path, body) in &viewer_changes {
        let a = h.call(m.clone(), route, path, &viewer, body.clone()).await;
        assert_eq!(
            (a.status, a.code()),
            (403, "forbidden"),
            "viewer {m} {path}: {a:?}"
        );
    }
    assert_eq!(
        h.audit_total().await,
        before_audit,
        "refused calls changed nothing"
    );
    assert_eq!(h.job_count().await, jobs_before);
    // Every change endpoint was tried by the viewer (reads and self-service aside).
    let tried: BTreeSet<(String, &str)> = viewer_changes
        .iter()
        .map(|(m, r, _, _)| (m.as_str().to_lowercase(), *r))
        .collect();
    for (m, p) in tickwork_admin::http::API_ROUTES {
        let self_service = matches!(
            (*m, *p),
            ("post", "/tokens")
                | ("get", "/users")
                | ("get", "/users/{id}")
                | ("post", "/schedule/preview")
        );
        if *m != "get" && !self_service {
            assert!(
                tried.contains(&((*m).to_owned(), *p)),
                "viewer never tried {m} {p}"
            );
        }
    }
    // Reads are open to every role.
    for t in [&op, &viewer] {
        h.get("/jobs", "/jobs", t).await.ok();
        h.get("/runs", "/runs", t).await.ok();
        h.get("/groups", "/groups", t).await.ok();
        h.get("/stats", "/stats", t).await.ok();
        h.get(
            "/jobs/{id}/script/versions",
            &format!("/jobs/{job_b}/script/versions"),
            t,
        )
        .await
        .ok();
    }
    // Self-service: own tokens, own password with the current one.
    let mine = h
        .call(
            Method::POST,
            "/tokens",
            "/tokens",
            &viewer,
            Some(json!({ "name": "mine" })),
        )
        .await;
    assert_eq!(mine.status, 201, "{mine:?}");
    let listed = h.get("/tokens", "/tokens", &viewer).await.ok();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["user_id"] == viewer_id),
        "{listed}"
    );
    h.call(
        Method::PUT,
        "/users/{id}/password",
        &format!("/users/{viewer_id}/password"),
        &viewer,
        Some(json!({ "current_password": "wrong", "password": "long-enough-pw" })),
    )
    .await
    .refused(400, "invalid_input");
    h.call(
        Method::PUT,
        "/users/{id}/password",
        &format!("/users/{viewer_id}/password"),
        &viewer,
        Some(json!({ "current_password": "victor-password-1", "password": "long-enough-pw" })),
    )
    .await
    .ok();
    h.stop().await;
}

// ---- credentials ----

#[tokio::test]
async fn tokens_are_checked_and_disabled_users_lose_them() {
    let h = Harness::start().await;
    h.raw(Method::GET, "/jobs", "/jobs", None, None)
        .await
        .refused(401, "unauthorized");
    h.raw(Method::GET, "/jobs", "/jobs", Some("wrong"), None)
        .await
        .refused(401, "unauthorized");
    h.raw(Method::GET, "/jobs", "/jobs", Some("tw_0000"), None)
        .await
        .refused(401, "unauthorized");
    let (uid, token) = h.user_with_token("dora", "viewer", &[]).await;
    h.get("/jobs", "/jobs", &token).await.ok();
    h.call(
        Method::PUT,
        "/users/{id}",
        &format!("/users/{uid}"),
        BUILTIN,
        Some(json!({ "role": "viewer", "disabled": true })),
    )
    .await
    .ok();
    h.get("/jobs", "/jobs", &token)
        .await
        .refused(401, "unauthorized");
    // The built-in token has no user: it names the user a token is for.
    h.call(
        Method::POST,
        "/tokens",
        "/tokens",
        BUILTIN,
        Some(json!({ "name": "x" })),
    )
    .await
    .refused(400, "invalid_input");
    // Token use is recorded.
    let (_, t2) = h.user_with_token("emil", "viewer", &[]).await;
    h.get("/me", "/me", &t2).await.ok();
    let tokens = h.get("/tokens", "/tokens", BUILTIN).await.ok();
    let emil = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "emil token")
        .unwrap();
    assert!(emil["last_used_at"].as_i64().is_some(), "{emil}");
    h.stop().await;
}

#[tokio::test]
async fn login_sessions_logout_expiry_and_csrf() {
    let h = Harness::start().await;
    let auth = h.service.auth();
    let ip: IpAddr = [127, 0, 0, 1].into();
    assert!(matches!(
        auth.login("admin", "wrong password", ip).await,
        Err(Error::Unauthorized(_))
    ));
    assert!(matches!(
        auth.login("nobody", "wrong password", ip).await,
        Err(Error::Unauthorized(_))
    ));
    let s = auth
        .login("admin", ADMIN_PASSWORD, ip)
        .await
        .expect("login");
    assert_eq!(s.session_id.len(), 64);
    let info = auth
        .session(&s.session_id)
        .await
        .unwrap()
        .expect("live session");
    assert_eq!(
        (info.principal.username.as_str(), info.principal.is_admin()),
        ("admin", true)
    );
    check_csrf(&info, &s.csrf_token).expect("own csrf token");
    assert!(matches!(
        check_csrf(&info, "forged"),
        Err(Error::Forbidden(_))
    ));
    assert!(matches!(check_csrf(&info, ""), Err(Error::Forbidden(_))));
    let cookie = auth.session_cookie(&s);
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    assert!(auth.session("not a session").await.unwrap().is_none());
    auth.logout(&s.session_id).await.unwrap();
    assert!(auth.session(&s.session_id).await.unwrap().is_none());
    auth.logout(&s.session_id)
        .await
        .expect("logging out twice is fine");

    // Expiry: an absolute end in the past, and a session idle too long.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", h.db_file.display()))
        .await
        .unwrap();
    let idle = auth.login("admin", ADMIN_PASSWORD, ip).await.unwrap();
    assert!(auth.session(&idle.session_id).await.unwrap().is_some());
    // Unused since long ago: past the idle timeout.
    sqlx::query("UPDATE tw_sessions SET last_seen_at = 1")
        .execute(&pool)
        .await
        .unwrap();
    assert!(
        auth.session(&idle.session_id).await.unwrap().is_none(),
        "idle session ended"
    );
    let fresh = auth.login("admin", ADMIN_PASSWORD, ip).await.unwrap();
    assert!(auth.session(&fresh.session_id).await.unwrap().is_some());
    sqlx::query("UPDATE tw_sessions SET expires_at = 1")
        .execute(&pool)
        .await
        .unwrap();
    assert!(
        auth.session(&fresh.session_id).await.unwrap().is_none(),
        "past its absolute end"
    );
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tw_sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "expired sessions are deleted when met");
    // The store keeps digests, never the ids or passwords.
    let stored: Vec<(String,)> = sqlx::query_as("SELECT password_hash FROM tw_users")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(stored.iter().all(|(h,)| h.starts_with("$argon2id$")));
    pool.close().await;

    // A disabled user's sessions end.
    let (uid, _) = h.user_with_token("fay", "viewer", &[]).await;
    let fs = auth.login("fay", "fay-password-1", ip).await.unwrap();
    assert!(auth.session(&fs.session_id).await.unwrap().is_some());
    h.call(
        Method::PUT,
        "/users/{id}",
        &format!("/users/{uid}"),
        BUILTIN,
        Some(json!({ "role": "viewer", "disabled": true })),
    )
    .await
    .ok();
    assert!(auth.session(&fs.session_id).await.unwrap().is_none());
    assert!(matches!(
        auth.login("fay", "fay-password-1", ip).await,
        Err(Error::Unauthorized(_))
    ));
    h.stop().await;
}

#[tokio::test]
async fn logins_are_rate_limited_per_ip_and_username() {
    let h = Harness::start_with("[auth]\nlogin_max_failures = 3\nlogin_window_s = 300\n").await;
    let auth = h.service.auth();
    let ip: IpAddr = [10, 1, 2, 3].into();
    for _ in 0..3 {
        assert!(matches!(
            auth.login("admin", "bad", ip).await,
            Err(Error::Unauthorized(_))
        ));
    }
    // Even the right password is refused now, without a hint whether it was right.
    assert!(matches!(
        auth.login("admin", ADMIN_PASSWORD, ip).await,
        Err(Error::RateLimited(_))
    ));
    // Another address, or another user from the same address, is not affected.
    auth.login("admin", ADMIN_PASSWORD, [10, 1, 2, 4].into())
        .await
        .expect("other ip");
    assert!(matches!(
        auth.login("someone", "bad", ip).await,
        Err(Error::Unauthorized(_))
    ));
    h.stop().await;
}

// ---- bad input ----

#[tokio::test]
async fn bad_input_is_refused_clearly_and_changes_nothing() {
    let h = Harness::start().await;
    let g = h.group("bad-input").await;
    let j = h.shell_job(g, BUILTIN).await.ok()["id"].as_i64().unwrap();
    let audit_before = h.audit_total().await;
    let job_before = h
        .get("/jobs/{id}", &format!("/jobs/{j}"), BUILTIN)
        .await
        .ok();
    let bodies: Vec<(Method, &str, String, &str, &str)> = vec![
        (Method::POST, "/jobs", "/jobs".into(), "{\"group_id\": ", "invalid json"),
        (Method::POST, "/jobs", "/jobs".into(), "{\"group_id\": \"one\"}", "invalid json"),
        (Method::POST, "/jobs", "/jobs".into(), "{\"group_id\": 1, \"colour\": \"red\"}", "unknown field"),
        (Method::POST, "/jobs", "/jobs".into(), "{\"group_id\": 999, \"handler\": \"h\"}", "group_id"),
        (Method::POST, "/jobs", "/jobs".into(), format!("{{\"group_id\": {g}, \"handler\": \"h\", \"schedule_type\": \"CRON\", \"schedule_conf\": \"61 * * * * ?\"}}").leak(), "schedule_conf"),
        (Method::PUT, "/jobs/{id}", format!("/jobs/{j}"), "[]", "invalid json"),
        (Method::PUT, "/jobs/{id}/script", format!("/jobs/{j}/script"), "{\"source\": 5}", "invalid json"),
        (Method::PUT, "/jobs/{id}/script", format!("/jobs/{j}/script"), "{\"source\": \"x\", \"glue_type\": \"BEAN\"}", "glue_type"),
        (Method::POST, "/groups", "/groups".into(), "{\"app_name\": \"\"}", "app_name"),
        (Method::POST, "/users", "/users".into(), "{\"username\": \"u\", \"password\": \"short\", \"role\": \"viewer\"}", "password"),
        (Method::POST, "/users", "/users".into(), "{\"username\": \"u\", \"password\": \"long-enough-pw\", \"role\": \"root\"}", "role"),
        (Method::POST, "/users", "/users".into(), "{\"username\": \"u\", \"password\": \"long-enough-pw\", \"role\": \"operator\", \"group_ids\": [404]}", "group_ids"),
        (Method::POST, "/tokens", "/tokens".into(), "{\"name\": \"\", \"user_id\": 1}", "name"),
        (Method::DELETE, "/runs", "/runs".into(), "", "before"),
        (Method::GET, "/runs", "/runs?state=sleeping".into(), "", "state"),
        (Method::GET, "/jobs", "/jobs?page=0".into(), "", "page"),
        (Method::GET, "/jobs", "/jobs?size=5000".into(), "", "limit"),
        (Method::GET, "/jobs", "/jobs?colour=red".into(), "", "unknown field"),
        (Method::GET, "/jobs/{id}", "/jobs/abc".into(), "", "not an id"),
        (Method::POST, "/jobs/{id}/script/versions/{version}/restore", format!("/jobs/{j}/script/versions/0/restore"), "", "version: \"0\" is not an id"),
    ];
    for (m, route, path, body, mention) in &bodies {
        let body = (!body.is_empty()).then_some(*body);
        let a = h.raw(m.clone(), route, path, Some(BUILTIN), body).await;
        a.refused(400, "invalid_input");
        let msg = a.body["message"].as_str().unwrap();
        assert!(
            msg.contains(mention),
            "{m} {path}: {msg:?} should mention {mention:?}"
        );
    }
    for (m, route, path) in [
        (Method::GET, "/jobs/{id}", "/jobs/999"),
        (Method::PUT, "/jobs/{id}/script", "/jobs/999/script"),
        (
            Method::POST,
            "/jobs/{id}/script/versions/{version}/restore",
            "/jobs/1/script/versions/99/restore",
        ),
        (Method::GET, "/runs/{id}", "/runs/999"),
        (Method::GET, "/users/{id}", "/users/999"),
        (Method::DELETE, "/tokens/{id}", "/tokens/999"),
        (
            Method::GET,
            "/groups/{id}/instances",
            "/groups/999/instances",
        ),
    ] {
        let body = (m == Method::PUT).then_some("{\"source\": \"x\"}");
        h.raw(m.clone(), route, path, Some(BUILTIN), body)
            .await
            .refused(404, "not_found");
    }
    let a = h
        .raw(Method::GET, "", "/nothing/here", Some(BUILTIN), None)
        .await;
    a.refused(404, "not_found");
    let a = h.raw(Method::PATCH, "", "/jobs", Some(BUILTIN), None).await;
    assert_eq!((a.status, a.code()), (405, "invalid_input"), "{a:?}");
    // Conflicts: a taken name, a group with jobs.
    h.call(
        Method::POST,
        "/groups",
        "/groups",
        BUILTIN,
        Some(json!({ "app_name": "bad-input" })),
    )
    .await
    .refused(409, "conflict");
    h.call(
        Method::DELETE,
        "/groups/{id}",
        &format!("/groups/{g}"),
        BUILTIN,
        None,
    )
    .await
    .refused(409, "conflict");
    h.call(
        Method::POST,
        "/users",
        "/users",
        BUILTIN,
        Some(json!({ "username": "admin", "password": "long-enough-pw", "role": "viewer" })),
    )
    .await
    .refused(409, "conflict");

    assert_eq!(h.audit_total().await, audit_before, "nothing was changed");
    assert_eq!(
        h.get("/jobs/{id}", &format!("/jobs/{j}"), BUILTIN)
            .await
            .ok(),
        job_before
    );
    assert_eq!(h.job_count().await, 1);
    h.stop().await;
}

// ---- audit ----

#[tokio::test]
async fn changes_are_audited_with_before_and_after_and_no_secrets() {
    let h = Harness::start().await;
    let g = h.group("audited").await;
    let (_, op) = h.user_with_token("otto", "operator", &[g]).await;
    let job = h.shell_job(g, &op).await.ok();
    let j = job["id"].as_i64().unwrap();
    let mut edit = json!({ "group_id": g, "description": "renamed", "glue_type": "GLUE_SHELL", "glue_source": "echo one", "key": job["key"] });
    edit["schedule_type"] = "CRON".into();
    edit["schedule_conf"] = "0 0 3 * * ?".into();
    h.call(
        Method::PUT,
        "/jobs/{id}",
        &format!("/jobs/{j}"),
        &op,
        Some(edit),
    )
    .await
    .ok();
    let page = h
        .get(
            "/audit",
            &format!("/audit?target_type=job&target_id={j}"),
            BUILTIN,
        )
        .await
        .ok();
    let items = page["items"].as_array().unwrap();
    let update = items
        .iter()
        .find(|e| e["action"] == "job.update")
        .expect("job.update record");
    assert_eq!(update["actor"], "otto");
    assert!(update["actor_id"].as_i64().is_some());
    assert_eq!(update["before"]["description"], "shell");
    assert_eq!(update["after"]["description"], "renamed");
    assert!(update["at"].as_i64().unwrap() > 0);
    let create = items
        .iter()
        .find(|e| e["action"] == "job.create")
        .expect("job.create record");
    assert!(create["before"].is_null());
    // Users and tokens: no hash, no secret, in the log.
    let all = h
        .get("/audit", "/audit?size=1000", BUILTIN)
        .await
        .ok()
        .to_string();
    assert!(!all.contains("$argon2"), "a password hash in the audit log");
    assert!(!all.contains("tw_"), "a token secret in the audit log");
    assert!(
        !all.contains("otto-password-1"),
        "a password in the audit log"
    );
    // Filter by actor, paginate.
    let by_otto = h
        .get("/audit", "/audit?actor=otto&page=1&size=1", BUILTIN)
        .await
        .ok();
    assert_eq!(
        (
            by_otto["total"].as_u64(),
            by_otto["items"].as_array().unwrap().len()
        ),
        (Some(2), 1)
    );
    h.stop().await;
}

// ---- console ----

/// A console form that collides with the current state (an app name taken) was answered as
/// a bad form (422), and an error page for a conflict as a failure of the admin (500); both
/// take the REST API's status now: 409, the form saying why, nothing changed.
#[tokio::test]
async fn console_conflict_was_answered_422_not_409() {
    let h = Harness::start().await;
    h.group("taken-app").await;
    let other = h.group("other-app").await;
    let groups_before = h.get("/groups", "/groups", BUILTIN).await.ok();
    let audit_before = h.audit_total().await;
    let (cookie, csrf) = h.console().await;
    let form = serde_urlencoded::to_string([
        ("_csrf", csrf.as_str()),
        ("app_name", "taken-app"),
        ("title", "x"),
        ("address_mode", "auto"),
    ])
    .unwrap();
    for path in ["/groups".to_owned(), format!("/groups/{other}/edit")] {
        let resp = h
            .send(
                Method::POST,
                &path,
                &[("cookie", &cookie), ("content-type", FORM)],
                Some(form.clone()),
            )
            .await;
        assert_eq!(resp.status().as_u16(), 409, "{path}");
        let page = resp.text();
        assert!(page.contains("is taken"), "{path} says why: {page}");
    }
    assert_eq!(
        h.get("/groups", "/groups", BUILTIN).await.ok(),
        groups_before,
        "nothing changed"
    );
    assert_eq!(h.audit_total().await, audit_before, "nothing audited");
    h.stop().await;
}

// ---- OpenAPI ----

/// The harness fails a test on an answer the document does not describe, naming the route,
/// the status and where the body disagrees; it leaves the console and undocumented paths alone.
#[test]
fn answers_that_disagree_with_the_document_fail_the_test() {
    let failure = |method: Method, uri: &str, status: u16, body: &str| {
        let reply = Reply::new(
            StatusCode::from_u16(status).unwrap(),
            HeaderMap::new(),
            body.as_bytes().to_vec(),
        );
        std::panic::catch_unwind(|| hold_to_document(&method, uri, &reply))
            .err()
            .map(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "a panic without a message".into())
            })
    };
    let me = r#"{"user_id": 1, "username": "admin", "role": "admin", "group_ids": [],
        "default_time_zone": "UTC"}"#;
    assert_eq!(failure(Method::GET, "/openapi/v1/me", 200, me), None);
    for (method, uri, status, body, expected) in [
        (
            Method::GET,
            "/openapi/v1/me",
            200,
            r#"{"user_id": 1, "username": "admin", "role": "root", "group_ids": [],
                "default_time_zone": "UTC"}"#,
            "GET /me answered 200: $.role: \"root\" is not one of",
        ),
        (
            Method::GET,
            "/openapi/v1/jobs/7?x=1",
            404,
            r#"{"code": "not_found", "message": "gone"}"#,
            "GET /jobs/{id} answered 404: $: the required property `error` is missing",
        ),
        (
            Method::GET,
            "/openapi/v1/groups",
            200,
            r#"[{"id": 1, "app_name": "a", "title": "", "address_mode": "auto", "addresses": [],
                "live_addresses": [], "has_token": false, "updated_at": 0, "secret": "x"}]"#,
            "GET /groups answered 200: $[0].secret: the property `secret` is not in the schema",
        ),
        (
            Method::POST,
            "/openapi/v1/tokens",
            200,
            "{}",
            "POST /tokens answered 200: the status is not declared",
        ),
        (
            Method::DELETE,
            "/openapi/v1/runs?before=1",
            200,
            "not json",
            "DELETE /runs answered 200: $: expected object, found null",
        ),
    ] {
        let message = failure(method.clone(), uri, status, body);
        assert!(
            message.as_deref().is_some_and(|m| m.contains(expected)),
            "{method} {uri}: {message:?}"
        );
    }
    // Not documented operations: the console, an unknown path, a method a path does not have.
    for (method, uri) in [
        (Method::GET, "/login"),
        (Method::GET, "/openapi/v1/nothing/here"),
        (Method::PATCH, "/openapi/v1/jobs"),
    ] {
        assert_eq!(
            failure(method.clone(), uri, 418, "{}"),
            None,
            "{method} {uri}"
        );
    }
}

#[tokio::test]
async fn openapi_document_matches_the_routes_and_validates() {
    let documented: BTreeSet<(&str, &str)> = tickwork_admin::openapi::documented_routes()
        .into_iter()
        .collect();
    let routed: BTreeSet<(&str, &str)> = tickwork_admin::http::API_ROUTES.iter().copied().collect();
    assert_eq!(
        documented.difference(&routed).collect::<Vec<_>>(),
        Vec::<&(&str, &str)>::new(),
        "documented but not routed"
    );
    assert_eq!(
        routed.difference(&documented).collect::<Vec<_>>(),
        Vec::<&(&str, &str)>::new(),
        "routed but not documented"
    );

    let h = Harness::start().await;
    let resp = h.send(Method::GET, "/openapi.json", &[], None).await;
    assert_eq!(resp.status(), 200);
    let doc: Value = resp.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, *DOCUMENT, "answers are held to the document served");
    // Each documented operation reaches a handler (authentication first: no token -> 401,
    // never "no such endpoint" or "method not allowed").
    for (method, path) in &documented {
        let concrete = path.replace("{id}", "1").replace("{version}", "1");
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let a = h.raw(m, path, &concrete, None, None).await;
        assert_eq!(a.status, 401, "{method} {path}: {a:?}");
    }
    // Methods a path does not document are not served.
    let paths: BTreeSet<&str> = documented.iter().map(|(_, p)| *p).collect();
    for path in paths {
        let concrete = path.replace("{id}", "1").replace("{version}", "1");
        for m in ["get", "post", "put", "delete"] {
            if !documented.contains(&(m, path)) {
                let method = Method::from_bytes(m.to_uppercase().as_bytes()).unwrap();
                let a = h.raw(method, "", &concrete, Some(BUILTIN), None).await;
                assert_eq!(
                    a.status, 405,
                    "{m} {path} is undocumented but answered {a:?}"
                );
            }
        }
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), doc.to_string()).unwrap();
    validate_openapi(file.path());
    h.stop().await;
}

/// Validates an OpenAPI document with the Python `openapi-spec-validator`. Without it the
/// check is skipped loudly, or fails when `CI` is set.
fn validate_openapi(path: &std::path::Path) {
    let script = "import json,sys\nfrom openapi_spec_validator import validate\n\
                  validate(json.load(open(sys.argv[1])))\nprint('valid')\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output();
    let missing = match &out {
        Err(_) => true,
        Ok(o) => String::from_utf8_lossy(&o.stderr).contains("No module named"),
    };
    if missing {
        if std::env::var_os("CI").is_some() {
            panic!("openapi-spec-validator is missing (pip install openapi-spec-validator)");
        }
        eprintln!(
            "\n{bar}\nSKIP: OpenAPI validation: python3 with openapi-spec-validator is not \
             installed (pip install openapi-spec-validator)\n{bar}\n",
            bar = "!".repeat(72)
        );
        return;
    }
    let out = out.unwrap();
    assert!(
        out.status.success(),
        "the OpenAPI document is invalid:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// The first admin: a configured password is used, none is ever a default.
#[tokio::test]
async fn first_admin_is_created_once_with_the_configured_password() {
    let h = Harness::start().await;
    let users = h.get("/users", "/users", BUILTIN).await.ok();
    assert_eq!(users.as_array().unwrap().len(), 1);
    assert_eq!(
        (users[0]["username"].as_str(), users[0]["role"].as_str()),
        (Some("admin"), Some("admin"))
    );
    let ip: IpAddr = [127, 0, 0, 1].into();
    h.service
        .auth()
        .login("admin", ADMIN_PASSWORD, ip)
        .await
        .expect("configured password");
    // A second start on the same database creates nobody and generates nothing.
    assert_eq!(
        h.service
            .auth()
            .ensure_first_admin(h.store.as_ref())
            .await
            .unwrap(),
        None
    );
    h.stop().await;
}

// ---- hardening of logins, sessions, tokens and redirects ----

#[tokio::test]
async fn concurrent_logins_are_bounded_and_excess_is_refused_at_once() {
    let h = Harness::start_with("[auth]\nlogin_max_failures = 1\n").await;
    let auth = h.service.auth().clone();
    let bound = auth.config().max_concurrent_logins;
    assert_eq!(bound, 4);
    let ip: IpAddr = [10, 9, 9, 9].into();

    // Every check running: a login is refused at once (it would wait forever otherwise),
    // over HTTP with 429, and counts as nothing.
    let held = auth
        .password_check_permits()
        .clone()
        .try_acquire_many_owned(bound as u32)
        .unwrap();
    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        auth.login("admin", ADMIN_PASSWORD, ip),
    )
    .await
    .expect("answered at once");
    assert!(
        matches!(&refused, Err(Error::RateLimited(m)) if m.contains("at once")),
        "{refused:?}"
    );
    let b = Browser::new(&h);
    let token = b.login_token().await;
    let resp = b
        .post_login(
            &token,
            &[("username", "admin"), ("password", ADMIN_PASSWORD)],
            &[],
        )
        .await;
    assert_eq!(resp.status(), 429);
    assert!(set_cookie(&resp, "tw_session").is_none());
    drop(held);
    // The refused attempts were not counted (one failure would block this user and address).
    auth.login("admin", ADMIN_PASSWORD, ip)
        .await
        .expect("nothing was counted");

    // Many bad logins at once: never more checks than the bound, the rest refused at once.
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.login(&format!("user{i}"), "wrong password", ip).await })
        })
        .collect();
    let (mut checked, mut busy) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Err(Error::Unauthorized(_)) => checked += 1,
            Err(Error::RateLimited(m)) if m.contains("at once") => busy += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(checked + busy, 60);
    assert!(checked >= 1);
    let peak = auth.password_checks_peak();
    assert!((1..=bound).contains(&peak), "peak {peak} of {bound}");
    assert_eq!(auth.password_check_permits().available_permits(), bound);
    h.stop().await;
}

/// The checks reuse their Argon2 memory: after bursts of logins there are as many 19 MiB
/// buffers as checks ran at once, where a fresh one per check had kept the admin at a
/// gigabyte (the allocator keeps what each blocking thread freed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_memory_is_reused_not_grown_per_check() {
    let h = Harness::start().await;
    let auth = h.service.auth().clone();
    for burst in 0..3u8 {
        let tasks: Vec<_> = (0..20u8)
            .map(|i| {
                let auth = auth.clone();
                // Unknown users: every check that is let through runs the decoy hash.
                let ip: IpAddr = [10, 3, burst, i].into();
                tokio::spawn(async move { auth.login(&format!("nobody{i}"), "wrong", ip).await })
            })
            .collect();
        for t in tasks {
            let r = t.await.unwrap();
            assert!(
                matches!(r, Err(Error::Unauthorized(_) | Error::RateLimited(_))),
                "{r:?}"
            );
        }
    }
    let peak = auth.password_checks_peak();
    let buffers = auth.password_check_buffers();
    assert!(
        (1..=peak).contains(&buffers),
        "{buffers} buffers kept after at most {peak} checks at once"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_wrong_passwords_check_at_most_the_failure_limit() {
    let h =
        Harness::start_with("[auth]\nlogin_max_failures = 5\nmax_concurrent_logins = 64\n").await;
    let auth = h.service.auth().clone();
    let ip: IpAddr = [10, 7, 7, 7].into();
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.login("admin", "wrong password", ip).await })
        })
        .collect();
    let (mut checked, mut limited) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Err(Error::Unauthorized(_)) => checked += 1,
            Err(Error::RateLimited(m)) if m.contains("failed logins") => limited += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((checked, limited), (5, 35), "checked passwords");
    assert!(matches!(
        auth.login("admin", ADMIN_PASSWORD, ip).await,
        Err(Error::RateLimited(_))
    ));
    h.stop().await;
}

/// Log lines written while a test runs.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_password_with_a_multibyte_character_at_byte_1024_logs_in_without_panic() {
    // On the test's thread (current-thread runtime): the admin's tasks log here too.
    let logs = Captured::default();
    let writer = logs.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish(),
    );
    let h = Harness::start_with("[auth]\nlogin_max_failures = 1\n").await;
    let marker = "Zq7-secret-marker";
    // 1,024 characters in 1,034 bytes; a two-byte character spans byte 1,024.
    let exact = format!(
        "{}{marker}{}é{}",
        "é".repeat(9),
        "a".repeat(1005 - marker.len()),
        "a".repeat(9)
    );
    assert_eq!((exact.len(), exact.chars().count()), (1034, 1024));
    assert!(!exact.is_char_boundary(1024));
    let users_before = h.get("/users", "/users", BUILTIN).await.ok();
    h.call(
        Method::POST,
        "/users",
        "/users",
        BUILTIN,
        Some(json!({ "username": "mb", "password": exact, "role": "viewer" })),
    )
    .await
    .ok();
    let b = Browser::new(&h);
    b.login("mb", &exact).await;
    let ip: IpAddr = [10, 3, 3, 3].into();
    h.service
        .auth()
        .login("mb", &exact, ip)
        .await
        .expect("login with 1,024 characters");

    // One character more: a clear error, nothing created, nothing counted.
    let longer = format!("{exact}a");
    let a = h
        .call(
            Method::POST,
            "/users",
            "/users",
            BUILTIN,
            Some(json!({ "username": "mb2", "password": longer, "role": "viewer" })),
        )
        .await;
    a.refused(400, "invalid_input");
    assert_eq!(a.body["field"], "password", "{a:?}");
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .contains("at most 1024 characters")
    );
    let users_after = h.get("/users", "/users", BUILTIN).await.ok();
    assert_eq!(
        users_after.as_array().unwrap().len(),
        users_before.as_array().unwrap().len() + 1
    );
    match h.service.auth().login("mb", &longer, ip).await {
        Err(e @ Error::Invalid { .. }) => {
            assert!(e.to_string().contains("at most 1024 characters"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // The password of the report: 1,034 bytes, a two-byte character at byte 1,023.
    let reported = format!(
        "{marker}{}é{}",
        "a".repeat(1023 - marker.len()),
        "a".repeat(9)
    );
    assert_eq!(reported.len(), 1034);
    assert!(!reported.is_char_boundary(1024));
    let token = b.login_token().await;
    let resp = b
        .post_login(&token, &[("username", "mb"), ("password", &reported)], &[])
        .await;
    assert_eq!(resp.status(), 400);
    assert!(resp.text().contains("1024"));
    // Neither was counted as a failure (the limit is one).
    h.service
        .auth()
        .login("mb", &exact, ip)
        .await
        .expect("over-long attempts count nothing");
    h.service
        .auth()
        .login("mb", "wrong password", ip)
        .await
        .unwrap_err();
    h.stop().await;
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logs.contains("failed login"), "logs were captured: {logs}");
    assert!(!logs.contains(marker), "a password was logged: {logs}");
}

#[tokio::test]
async fn open_redirects_are_refused_by_lang_and_login() {
    let h = Harness::start().await;
    let b = Browser::new(&h);
    let hostile = [
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/ /evil.example",
        "/\u{0}/evil.example",
        "/\u{a0}/evil.example",
        "//evil.example",
        "///evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "/\\/evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        "evil.example",
        " /jobs",
        "",
    ];
    let q = |k: &str, v: &str| serde_urlencoded::to_string([(k, v)]).unwrap();
    for value in hostile {
        let resp = b
            .get(&format!("/lang?to=en&{}", q("back", value)), None)
            .await;
        assert_eq!(
            (resp.status().as_u16(), location(&resp)),
            (303, "/".to_owned()),
            "/lang back={value:?}"
        );
    }
    // Raw, as in the report.
    let resp = b.get("/lang?back=/%09/evil.example&to=en", None).await;
    assert_eq!(location(&resp), "/");

    let session = b.login("admin", ADMIN_PASSWORD).await;
    for value in hostile {
        let resp = b
            .get(&format!("/login?{}", q("next", value)), Some(&session))
            .await;
        assert_eq!(
            (resp.status().as_u16(), location(&resp)),
            (303, "/".to_owned()),
            "/login next={value:?}"
        );
        let token = b.login_token().await;
        let resp = b
            .post_login(
                &token,
                &[
                    ("username", "admin"),
                    ("password", ADMIN_PASSWORD),
                    ("next", value),
                ],
                &[],
            )
            .await;
        assert_eq!(
            (resp.status().as_u16(), location(&resp)),
            (303, "/".to_owned()),
            "login form next={value:?}"
        );
    }
    // Paths of the site are still followed.
    let resp = b.get("/lang?to=zh&back=/jobs%3Fpage%3D2", None).await;
    assert_eq!(location(&resp), "/jobs?page=2");
    let resp = b.get("/login?next=/runs", Some(&session)).await;
    assert_eq!(location(&resp), "/runs");
    h.stop().await;
}

#[tokio::test]
async fn operator_cannot_make_another_groups_job_a_child() {
    let h = Harness::start().await;
    let group_a = h.group("app-a").await;
    let group_b = h.group("app-b").await;
    let (_, op) = h.user_with_token("opa", "operator", &[group_a]).await;
    let job_b = h.bean_job(group_b).await;
    let own_child = h.bean_job(group_a).await;
    let job = |children: Vec<i64>| {
        json!({
            "group_id": group_a, "schedule_type": "NONE", "handler": "demo",
            "child_job_ids": children,
        })
    };
    let check = |a: Answer| {
        a.refused(403, "forbidden");
        let msg = a.body["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("child_job_ids"), "{msg}");
        assert!(msg.contains(&format!("job {job_b}")), "{msg}");
    };

    let jobs_before = h.job_count().await;
    check(
        h.call(
            Method::POST,
            "/jobs",
            "/jobs",
            &op,
            Some(job(vec![own_child, job_b])),
        )
        .await,
    );
    assert_eq!(h.job_count().await, jobs_before, "nothing created");

    let mine = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            &op,
            Some(job(vec![own_child])),
        )
        .await
        .ok();
    let id = mine["id"].as_i64().unwrap();
    check(
        h.call(
            Method::PUT,
            "/jobs/{id}",
            &format!("/jobs/{id}"),
            &op,
            Some(job(vec![job_b])),
        )
        .await,
    );
    let now = h.get("/jobs/{id}", &format!("/jobs/{id}"), &op).await.ok();
    assert_eq!(now["child_job_ids"], json!([own_child]), "nothing saved");
    assert_eq!(now["version"], mine["version"], "nothing saved");

    // A job of group A that an admin linked to B cannot be copied by the operator.
    let linked = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job(vec![job_b])),
        )
        .await
        .ok();
    let jobs_before = h.job_count().await;
    check(
        h.call(
            Method::POST,
            "/jobs/{id}/copy",
            &format!("/jobs/{}/copy", linked["id"]),
            &op,
            Some(json!({})),
        )
        .await,
    );
    assert_eq!(h.job_count().await, jobs_before, "nothing copied");
    h.stop().await;
}

#[tokio::test]
async fn cross_site_logins_are_refused() {
    let h = Harness::start().await;
    let b = Browser::new(&h);
    let good = [("username", "admin"), ("password", ADMIN_PASSWORD)];
    let token = b.login_token().await;
    for (what, headers) in [
        ("foreign origin", vec![("origin", "http://evil.example")]),
        ("null origin", vec![("origin", "null")]),
        (
            "same host, other port",
            vec![("origin", "http://127.0.0.1:1")],
        ),
        (
            "ours and a foreign one",
            vec![
                ("origin", b.base.as_str()),
                ("origin", "http://evil.example"),
            ],
        ),
    ] {
        let resp = b.post_login(&token, &good, &headers).await;
        assert_eq!(resp.status(), 403, "{what}");
        assert!(set_cookie(&resp, "tw_session").is_none(), "{what}");
        let page = resp.text();
        assert!(page.contains("another site"), "{what}: {page}");
    }
    // A foreign referer without an origin.
    let resp = b
        .post(
            "/login",
            &[
                ("cookie", &format!("tw_login_csrf={token}")),
                ("referer", "https://evil.example/form"),
            ],
            serde_urlencoded::to_string([("_csrf", token.as_str()), good[0], good[1]]).unwrap(),
        )
        .await;
    assert_eq!(resp.status(), 403);
    // Without the form's token, or with another one than the cookie's.
    let zeros = "0".repeat(64);
    for (cookie, field) in [
        ("", ""),
        (token.as_str(), ""),
        (token.as_str(), zeros.as_str()),
    ] {
        let mut fields = vec![good[0], good[1]];
        if !field.is_empty() {
            fields.push(("_csrf", field));
        }
        let resp = b
            .post(
                "/login",
                &[
                    ("cookie", &format!("tw_login_csrf={cookie}")),
                    ("origin", &b.base),
                ],
                serde_urlencoded::to_string(&fields).unwrap(),
            )
            .await;
        assert_eq!(resp.status(), 403, "cookie {cookie:?} field {field:?}");
        assert!(set_cookie(&resp, "tw_session").is_none());
        assert!(
            set_cookie(&resp, "tw_login_csrf").is_some(),
            "a fresh form to try again"
        );
    }
    // From our own form it works (with and without a proxy's host).
    let resp = b.post_login(&token, &good, &[]).await;
    assert_eq!(resp.status(), 303);
    assert!(set_cookie(&resp, "tw_session").is_some());
    let resp = b
        .post_login(
            &token,
            &good,
            &[
                ("origin", "https://console.example"),
                ("x-forwarded-host", "console.example"),
            ],
        )
        .await;
    assert_eq!(resp.status(), 303);
    h.stop().await;
}

#[tokio::test]
async fn lower_case_bearer_scheme_is_accepted() {
    let h = Harness::start().await;
    for (value, status) in [
        (format!("bearer {BUILTIN}"), 200),
        (format!("BEARER {BUILTIN}"), 200),
        (format!("Bearer   {BUILTIN}"), 200),
        (format!("Bearer {BUILTIN}"), 200),
        (format!("Basic {BUILTIN}"), 401),
        (format!("bearer{BUILTIN}"), 401),
        ("bearer wrong".to_owned(), 401),
    ] {
        let resp = h
            .send(
                Method::GET,
                "/openapi/v1/me",
                &[("authorization", &value)],
                None,
            )
            .await;
        assert_eq!(resp.status().as_u16(), status, "{value}");
    }
    h.stop().await;
}

#[tokio::test]
async fn answers_with_a_new_token_are_not_stored_by_caches() {
    let h = Harness::start().await;
    let bearer = format!("Bearer {BUILTIN}");
    let resp = h
        .send(
            Method::POST,
            "/openapi/v1/tokens",
            &[
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            Some(json!({ "name": "ci", "user_id": 1 }).to_string()),
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["cache-control"], "no-store");

    let b = Browser::new(&h);
    let session = b.login("admin", ADMIN_PASSWORD).await;
    let page = b.get("/tokens", Some(&session)).await.text();
    let csrf = page
        .split("name=\"_csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("csrf field")
        .to_owned();
    let resp = b
        .post(
            "/tokens",
            &[("cookie", &format!("tw_session={session}"))],
            serde_urlencoded::to_string([("_csrf", csrf.as_str()), ("name", "console")]).unwrap(),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert!(resp.text().contains("tw_"), "the new secret");
    h.stop().await;
}

#[tokio::test]
async fn idle_sessions_never_expire_before_the_idle_time() {
    let h = Harness::start().await;
    let idle = Duration::from_secs(2);
    let auth = tickwork_admin::Auth::new(
        h.store.clone(),
        tickwork_admin::auth::AuthConfig {
            session_idle: idle,
            ..Default::default()
        },
        "",
    );
    let ip: IpAddr = [127, 0, 0, 1].into();
    let s = auth.login("admin", ADMIN_PASSWORD, ip).await.unwrap();
    // Time goes by as the session's instants move into the past, not by sleeping.
    let pass = |d: Duration| h.age_sessions(d.as_millis() as i64);
    let mut last_use = std::time::Instant::now();
    // Used every 1.2 s: never idle for 2 s, so it lives on.
    let every = Duration::from_millis(1200);
    for round in 0..3 {
        pass(every).await;
        let gap = every + last_use.elapsed();
        let alive = auth.session(&s.session_id).await.unwrap().is_some();
        last_use = std::time::Instant::now();
        if gap < idle {
            assert!(alive, "round {round}: ended after {gap:?} of idleness");
        }
    }
    // Idle for longer than the timeout (plus the touch interval of a quarter of it): ended.
    pass(idle + idle / 4 + Duration::from_millis(300)).await;
    assert!(auth.session(&s.session_id).await.unwrap().is_none());
    h.stop().await;
}

#[tokio::test]
async fn groovy_glue_jobs_have_the_script_editor_and_versions() {
    let h = Harness::start().await;
    let group = h.group("java-app").await;
    let job = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(json!({
                "group_id": group, "schedule_type": "NONE", "glue_type": "GLUE_GROOVY",
                "glue_source": "class A implements IJobHandler { void execute() {} }",
            })),
        )
        .await
        .ok();
    let id = job["id"].as_i64().unwrap();
    let saved = h
        .call(
            Method::PUT,
            "/jobs/{id}/script",
            &format!("/jobs/{id}/script"),
            BUILTIN,
            Some(json!({ "source": "class B implements IJobHandler {}", "comment": "b" })),
        )
        .await
        .ok();
    assert_eq!(saved["glue_type"], "GLUE_GROOVY", "{saved}");
    assert_eq!(saved["version"], 2, "{saved}");
    let versions = h
        .get(
            "/jobs/{id}/script/versions",
            &format!("/jobs/{id}/script/versions"),
            BUILTIN,
        )
        .await
        .ok();
    let numbers: Vec<i64> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 1], "the creation is version 1: {versions}");
    let restored = h
        .call(
            Method::POST,
            "/jobs/{id}/script/versions/{version}/restore",
            &format!("/jobs/{id}/script/versions/1/restore"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(restored["version"], 3, "{restored}");
    let now = h
        .get("/jobs/{id}", &format!("/jobs/{id}"), BUILTIN)
        .await
        .ok();
    assert_eq!(
        now["glue_source"],
        "class A implements IJobHandler { void execute() {} }"
    );

    // The console's editor serves it too.
    let (cookie, _) = h.console().await;
    let page = h.page(&format!("/jobs/{id}/script"), &cookie).await;
    assert_eq!(page.status().as_u16(), 200);
    let (status, location) = h
        .console_post(
            &format!("/jobs/{id}/script"),
            &[
                ("source", "class C implements IJobHandler {}"),
                ("comment", "c"),
            ],
        )
        .await;
    assert_eq!(status, 303, "saved, not refused ({location})");
    assert!(location.contains("ok=script_saved"), "{location}");
    let job_page = h.page(&format!("/jobs/{id}"), &cookie).await.text();
    assert!(
        job_page.contains("id=\"script-link\""),
        "the job links its script"
    );
    h.stop().await;
}

#[tokio::test]
async fn json_bodies_that_are_not_objects_are_refused() {
    let h = Harness::start().await;
    let groups = h.get("/groups", "/groups", BUILTIN).await.ok();
    let g = h.group("objapp").await;
    let job = h.shell_job(g, BUILTIN).await.ok();
    let job_id = job["id"].as_i64().unwrap();
    let runs_before = h.get("/runs", "/runs?size=1", BUILTIN).await.ok()["total"].clone();
    for body in [
        r#"["arrayapp", "Array app", "auto", []]"#,
        "[]",
        "null",
        "\"arrayapp\"",
        "42",
    ] {
        let a = h
            .raw(
                Method::POST,
                "/groups",
                "/groups",
                Some(BUILTIN),
                Some(body),
            )
            .await;
        a.refused(400, "invalid_input");
        assert!(
            a.body["message"].as_str().unwrap().contains("JSON object"),
            "{a:?}"
        );
        let a = h
            .raw(
                Method::POST,
                "/jobs/{id}/trigger",
                &format!("/jobs/{job_id}/trigger"),
                Some(BUILTIN),
                Some(body),
            )
            .await;
        a.refused(400, "invalid_input");
    }
    let after = h.get("/groups", "/groups", BUILTIN).await.ok();
    assert_eq!(
        after.as_array().unwrap().len(),
        groups.as_array().unwrap().len() + 1,
        "only the object created a group"
    );
    assert_eq!(
        h.get("/runs", "/runs?size=1", BUILTIN).await.ok()["total"],
        runs_before
    );
    h.stop().await;
}

#[tokio::test]
async fn clearing_runs_older_than_a_huge_number_of_days_is_refused() {
    let h = Harness::start().await;
    let group = h.group("clear-app").await;
    let job = h.bean_job(group).await;
    // No executor: the run fails at dispatch and is final, so clearing could take it.
    let run = h.trigger(job, json!({})).await.ok();
    h.fail_dispatch(run["id"].as_i64().unwrap()).await;
    let audit_before = h.audit_total().await;

    for days in ["213503982334", "0", "-1", "36501"] {
        let a = h
            .call(
                Method::DELETE,
                "/runs",
                &format!("/runs?before_days={days}&job_id={job}"),
                BUILTIN,
                None,
            )
            .await;
        a.refused(400, "invalid_input");
        let msg = a.body["message"].as_str().unwrap();
        assert!(msg.starts_with("before_days:"), "{msg}");
        let (status, location) = h
            .console_post(
                "/runs/clear",
                &[("before_days", days), ("job_id", &job.to_string())],
            )
            .await;
        assert_eq!(status, 303, "{days}");
        assert!(location.contains("err=before_days"), "{location}");
        assert_eq!(h.runs_of(job).await.len(), 1, "nothing deleted ({days})");
    }
    assert_eq!(h.audit_total().await, audit_before, "nothing changed");

    // In range: only runs older than that go (none here).
    let cleared = h
        .call(
            Method::DELETE,
            "/runs",
            &format!("/runs?before_days=36500&job_id={job}"),
            BUILTIN,
            None,
        )
        .await
        .ok();
    assert_eq!(cleared["deleted"], 0);
    assert_eq!(h.runs_of(job).await.len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn params_of_64_kib_passed_the_service_and_failed_in_the_store() {
    let h = Harness::start().await;
    let g = h.group("params-limit").await;
    let max = tickwork_core::job::Limits::STANDARD.params_bytes;
    let job = |params: String| json!({ "group_id": g, "schedule_type": "NONE", "handler": "demo", "params": params });

    let at_max = "p".repeat(max);
    let created = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job(at_max.clone())),
        )
        .await
        .ok();
    let id = created["id"].as_i64().unwrap();
    let read = h
        .get("/jobs/{id}", &format!("/jobs/{id}"), BUILTIN)
        .await
        .ok();
    assert_eq!(read["params"].as_str().unwrap().len(), max);
    assert_eq!(read["params"], at_max.as_str());

    // One byte more: the service names the field, the store is never asked.
    let count = h.job_count().await;
    let a = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job("p".repeat(max + 1))),
        )
        .await;
    assert_field_error(&a, "params");
    assert_eq!(
        a.body["message"],
        format!("params: must be at most {max} bytes")
    );
    assert_eq!(h.job_count().await, count);

    // A trigger's own params have the same limit.
    let a = h
        .trigger(id, json!({ "params": "p".repeat(max + 1) }))
        .await;
    assert_field_error(&a, "params");
    h.trigger(id, json!({ "params": at_max })).await.ok();
    h.stop().await;
}

/// A group whose `field` holds 64 two-byte characters is created and keeps them; one more
/// character is refused naming the field and its limit in characters.
async fn group_field_counts_characters(field: &str) {
    let h = Harness::start().await;
    let group = |value: String, other: &str| {
        let mut g = json!({ "app_name": other, "title": other });
        g[field] = value.into();
        g
    };
    // 64 characters in 128 bytes.
    let at_limit = "é".repeat(64);
    let created = h
        .call(
            Method::POST,
            "/groups",
            "/groups",
            BUILTIN,
            Some(group(at_limit.clone(), "at-limit")),
        )
        .await
        .ok();
    assert_eq!(created[field], at_limit.as_str());
    let over = h
        .call(
            Method::POST,
            "/groups",
            "/groups",
            BUILTIN,
            Some(group("é".repeat(65), "over")),
        )
        .await;
    assert_field_error(&over, field);
    assert!(
        over.body["message"]
            .as_str()
            .unwrap()
            .contains("64 characters"),
        "{over:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn group_title_counted_bytes_while_its_message_said_characters() {
    group_field_counts_characters("title").await;
}

#[tokio::test]
async fn group_app_name_counted_bytes_while_its_message_said_characters() {
    group_field_counts_characters("app_name").await;
}

#[tokio::test]
async fn job_handler_counted_bytes_while_its_message_said_characters() {
    let h = Harness::start().await;
    let g = h.group("handler-limit").await;
    let max = tickwork_core::job::Limits::STANDARD.handler_chars;
    let job = |handler: String| json!({ "group_id": g, "handler": handler });
    // As many characters as allowed, twice as many bytes.
    let handler = "ü".repeat(max);
    let created = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job(handler.clone())),
        )
        .await
        .ok();
    let id = created["id"].as_i64().unwrap();
    let read = h
        .get("/jobs/{id}", &format!("/jobs/{id}"), BUILTIN)
        .await
        .ok();
    assert_eq!(read["handler"], handler.as_str());
    let a = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job("ü".repeat(max + 1))),
        )
        .await;
    assert_field_error(&a, "handler");
    assert_eq!(
        a.body["message"],
        format!("handler: must be at most {max} characters")
    );
    h.stop().await;
}
