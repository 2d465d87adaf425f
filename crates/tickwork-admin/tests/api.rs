//! The REST API over real HTTP against a real admin on a fresh SQLite database per test: every
//! endpoint, each role (admin, operator of one group, viewer), bad input that must change
//! nothing, the audit records of changes, sessions, the login rate limit and the OpenAPI
//! document.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tickwork_admin::config::ConfigFile;
use tickwork_admin::{Admin, Error, Running, check_csrf};
use tokio_util::sync::CancellationToken;

const BUILTIN: &str = "api-test-builtin-token";
const ADMIN_PASSWORD: &str = "first-admin-password";

/// A running admin with its HTTP server, and a log of the routes the test called.
struct Harness {
    base: String,
    http: reqwest::Client,
    admin: Admin,
    running: Option<Running>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    called: Mutex<BTreeSet<(String, String)>>,
    db_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// An answer: status and JSON body (`Null` when the body is not JSON).
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    fn ok(self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "expected success, got {self:?}"
        );
        self.body
    }

    fn refused(&self, status: u16, code: &str) {
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

impl Harness {
    async fn start() -> Harness {
        Self::start_with("").await
    }

    async fn start_with(toml: &str) -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let db_file = dir.path().join("api.db");
        let mut file: ConfigFile = toml::from_str(toml).expect("toml");
        file.database_url = Some(format!("sqlite://{}?mode=rwc", db_file.display()));
        file.access_token = Some("api-test-access-token".into());
        file.api_token = Some(BUILTIN.into());
        file.auth.admin_password = Some(ADMIN_PASSWORD.into());
        let config = file.into_config().expect("config");
        let store = tickwork_store::connect(&config.database_url, &Default::default())
            .await
            .expect("store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let running = Admin::start(config, store).await.expect("admin start");
        assert_eq!(
            running.generated_admin_password, None,
            "a configured password is not generated"
        );
        let admin = running.admin.clone();
        let stop = CancellationToken::new();
        let server = tokio::spawn(tickwork_admin::http::serve(
            admin.clone(),
            listener,
            stop.clone(),
        ));
        let _ = rustls::crypto::ring::default_provider().install_default();
        Harness {
            base,
            http: reqwest::Client::new(),
            admin,
            running: Some(running),
            stop,
            server,
            called: Mutex::new(BTreeSet::new()),
            db_file,
            _dir: dir,
        }
    }

    async fn stop(mut self) {
        self.stop.cancel();
        let _ = (&mut self.server).await;
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        self.admin.store().close().await;
    }

    /// Calls `/openapi/v1{path}` with `token`; `route` is the route template it exercises.
    async fn raw(
        &self,
        method: Method,
        route: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> Answer {
        self.called
            .lock()
            .unwrap()
            .insert((method.as_str().to_lowercase(), route.to_owned()));
        let mut req = self
            .http
            .request(method, format!("{}/openapi/v1{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        Answer {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
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

    async fn job_count(&self) -> u64 {
        self.get("/jobs", "/jobs?size=1", BUILTIN).await.ok()["total"]
            .as_u64()
            .unwrap()
    }

    /// A group, a user of `role` with `groups` and a token acting as that user.
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
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

// ---- every endpoint, as an admin ----

#[tokio::test]
async fn every_endpoint_answers_as_documented() {
    let h = Harness::start().await;
    let me = h.get("/me", "/me", BUILTIN).await.ok();
    assert_eq!(me["role"], "admin");

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

    // runs: a trigger without an executor fails at dispatch and becomes final
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
    wait_until("the run to fail without executors", || async {
        h.get("/runs/{id}", &format!("/runs/{r}"), BUILTIN)
            .await
            .ok()["state"]
            == "failed"
    })
    .await;
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

    let before_audit = h.audit_total().await;
    let jobs_before = h.job_count().await;
    // ... and not in group B, nor on groups, users or the audit log.
    let now = tickwork_admin::timer::now_ms();
    let job_b_body = json!({ "group_id": b, "handler": "h" });
    let forbidden_for_operator: Vec<(Method, &str, String, Option<Value>)> = vec![
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
    let viewer_changes: Vec<(Method, &str, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/jobs",
            "/jobs".into(),
            Some(json!({ "group_id": a, "handler": "h" })),
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
    let auth = h.admin.auth();
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
    let auth = h.admin.auth();
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

// ---- OpenAPI ----

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
    let resp = reqwest::get(format!("{}/openapi.json", h.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let doc: Value = resp.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
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
    h.admin
        .auth()
        .login("admin", ADMIN_PASSWORD, ip)
        .await
        .expect("configured password");
    // A second start on the same database creates nobody and generates nothing.
    assert_eq!(h.admin.auth().ensure_first_admin().await.unwrap(), None);
    h.stop().await;
}

// ---- dispatch hardening ----

/// What a [`FakeExecutor`] answers on one path.
#[derive(Clone)]
enum Behaviour {
    /// `{"code":200}`.
    Success,
    /// `302 Found` to this URL.
    Redirect(String),
    /// A success envelope padded to this many bytes, with its length announced.
    Large(usize),
    /// A chunked answer that never ends.
    Endless,
}

/// A raw HTTP executor: records the path of every request and answers as told.
#[derive(Clone)]
struct FakeExecutor {
    base: String,
    paths: std::sync::Arc<Mutex<Vec<String>>>,
}

impl FakeExecutor {
    async fn start(behave: fn(&str) -> Behaviour) -> FakeExecutor {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = FakeExecutor {
            base: format!("http://{}", listener.local_addr().unwrap()),
            paths: Default::default(),
        };
        let paths = fake.paths.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let paths = paths.clone();
                tokio::spawn(async move {
                    // One request per connection: the head, then its announced body.
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    let head_end = loop {
                        let Ok(n) = conn.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    while buf.len() < head_end + length {
                        let Ok(n) = conn.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    paths.lock().unwrap().push(path.clone());
                    let answer = match behave(&path) {
                        Behaviour::Success => {
                            let body = r#"{"code":200,"msg":null}"#;
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            )
                        }
                        Behaviour::Redirect(to) => format!(
                            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\
                             Connection: close\r\n\r\n"
                        ),
                        Behaviour::Large(n) => {
                            let body = format!(r#"{{"code":200,"msg":"{}"}}"#, "x".repeat(n));
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            )
                        }
                        Behaviour::Endless => {
                            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                        Transfer-Encoding: chunked\r\n\r\n";
                            if conn.write_all(head.as_bytes()).await.is_err() {
                                return;
                            }
                            let piece = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
                            // Until the admin hangs up (at most 1 GiB).
                            for _ in 0..16 * 1024 {
                                if conn.write_all(piece.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                            return;
                        }
                    };
                    let _ = conn.write_all(answer.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        fake
    }

    fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

impl Harness {
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

    /// Triggers `job` as the built-in admin; the run's id.
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

    /// Waits until run `id` is final; the run.
    async fn final_run(&self, id: i64) -> Value {
        self.run_past(id, &["planned", "dispatched"]).await
    }

    /// Waits until run `id` is in none of `states`; the run.
    async fn run_past(&self, id: i64, states: &[&str]) -> Value {
        for _ in 0..600 {
            let run = self
                .get("/runs/{id}", &format!("/runs/{id}"), BUILTIN)
                .await
                .ok();
            if !states.contains(&run["state"].as_str().unwrap_or("")) {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("run {id} did not end");
    }

    async fn runs_of(&self, job: i64) -> Vec<Value> {
        self.get("/runs", &format!("/runs?job_id={job}"), BUILTIN)
            .await
            .ok()["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// An admin's console session: its cookie and CSRF token, and a client that shows
    /// redirects instead of following them.
    async fn console(&self) -> (String, String, reqwest::Client) {
        let s = self
            .admin
            .auth()
            .login("admin", ADMIN_PASSWORD, [127, 0, 0, 1].into())
            .await
            .unwrap();
        let cookie = self.admin.auth().session_cookie(&s);
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        (cookie, s.csrf_token, client)
    }

    /// Posts a console form; the status and the `Location` it redirects to.
    async fn console_post(&self, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
        let (cookie, csrf, client) = self.console().await;
        let mut form = vec![("_csrf", csrf.as_str())];
        form.extend_from_slice(fields);
        let resp = client
            .post(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(serde_urlencoded::to_string(&form).unwrap())
            .send()
            .await
            .unwrap();
        let location = resp
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (resp.status().as_u16(), location)
    }
}

/// Registers `address` as a live executor of `app`, as an executor's heartbeat does.
async fn register(h: &Harness, app: &str, address: &str) {
    let resp = h
        .http
        .post(format!("{}/api/registry", h.base))
        .header("XXL-JOB-ACCESS-TOKEN", "api-test-access-token")
        .json(&json!({
            "registryGroup": "EXECUTOR", "registryKey": app, "registryValue": address,
        }))
        .send()
        .await
        .unwrap();
    let envelope: Value = resp.json().await.unwrap();
    assert_eq!(envelope["code"], 200, "{envelope}");
}

#[tokio::test]
async fn trigger_address_outside_the_group_is_refused() {
    let h = Harness::start().await;
    let own = FakeExecutor::start(|_| Behaviour::Success).await;
    let foreign = FakeExecutor::start(|_| Behaviour::Success).await;
    let listed = FakeExecutor::start(|_| Behaviour::Success).await;
    let group_a = h.group("app-a").await;
    h.group("app-b").await;
    register(&h, "app-a", &format!("{}/", own.base)).await;
    register(&h, "app-b", &format!("{}/", foreign.base)).await;
    let job = h.bean_job(group_a).await;

    // Another group's executor, or any other URL: refused, no run, nothing sent.
    for address in [
        format!("{}/", foreign.base),
        foreign.base.clone(),
        listed.base.clone(),
        "http://127.0.0.1:1/".to_owned(),
    ] {
        let a = h.trigger(job, json!({ "address": address })).await;
        a.refused(400, "invalid_input");
        let msg = a.body["message"].as_str().unwrap();
        assert!(msg.starts_with("address:"), "{msg}");
        assert!(msg.contains("app-a"), "names the group: {msg}");
    }
    let (status, location) = h
        .console_post(
            &format!("/jobs/{job}/trigger"),
            &[("address", &format!("{}/", foreign.base))],
        )
        .await;
    assert_eq!(status, 303);
    assert!(
        location.contains("err=address"),
        "the console says why: {location}"
    );
    assert!(h.runs_of(job).await.is_empty(), "no run was created");

    // The group's own executor, with or without its trailing slash, is fine.
    for address in [own.base.clone(), format!("{}/", own.base)] {
        let run = h.trigger(job, json!({ "address": address })).await.ok();
        // The fake executor accepts the run and never reports back.
        let run = h.run_past(run["id"].as_i64().unwrap(), &["planned"]).await;
        assert_eq!(run["state"], "dispatched", "{run}");
        assert_eq!(run["executor_address"], format!("{}/", own.base), "{run}");
    }
    assert_eq!(own.paths(), ["/run", "/run"]);
    // So is an address of a manual group's list.
    let manual = h.manual_group("app-m", &listed.base).await;
    let listed_job = h.bean_job(manual).await;
    let run = h
        .trigger(
            listed_job,
            json!({ "address": format!("{}/", listed.base) }),
        )
        .await
        .ok();
    h.run_past(run["id"].as_i64().unwrap(), &["planned"]).await;
    assert_eq!(listed.paths(), ["/run"]);
    assert!(foreign.paths().is_empty(), "{:?}", foreign.paths());
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
async fn executor_redirect_is_not_followed_and_errors_do_not_map_ports() {
    let h = Harness::start().await;
    let receiver = FakeExecutor::start(|_| Behaviour::Success).await;
    // The redirect target is only known once the receiver runs: kept in a static.
    static TARGET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TARGET.set(receiver.base.clone()).unwrap();
    let redirector =
        FakeExecutor::start(|path| Behaviour::Redirect(format!("{}{path}", TARGET.get().unwrap())))
            .await;
    let group = h.manual_group("redirecting", &redirector.base).await;
    let job = h.bean_job(group).await;
    let run = h.trigger(job, json!({})).await.ok();
    let run = h.final_run(run["id"].as_i64().unwrap()).await;
    assert_eq!(run["state"], "failed", "{run}");
    let msg = run["trigger_msg"].as_str().unwrap();
    assert!(msg.contains("executor answered a redirect (302)"), "{msg}");
    assert_eq!(redirector.paths(), ["/run"]);
    assert!(receiver.paths().is_empty(), "{:?}", receiver.paths());

    // A closed port reads as unreachable, nothing more.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let group = h.manual_group("closed", &closed).await;
    let job = h.bean_job(group).await;
    let run = h.trigger(job, json!({})).await.ok();
    let run = h.final_run(run["id"].as_i64().unwrap()).await;
    let msg = run["trigger_msg"].as_str().unwrap();
    assert!(msg.ends_with("executor unreachable"), "{msg}");
    for detail in ["refused", "connect", "error", "tcp", "os "] {
        assert!(!msg.to_lowercase().contains(detail), "{msg}");
    }
    h.stop().await;
}

#[tokio::test]
async fn oversize_executor_answers_are_refused_not_read_whole() {
    let h = Harness::start().await;
    let fake = FakeExecutor::start(|path| match path {
        "/run" => Behaviour::Endless,
        "/log" => Behaviour::Large(5 * 1024 * 1024),
        _ => Behaviour::Success,
    })
    .await;
    let group = h.manual_group("oversize", &fake.base).await;
    let job = h.bean_job(group).await;
    let run = h.trigger(job, json!({})).await.ok();
    let id = run["id"].as_i64().unwrap();
    let run = h.final_run(id).await;
    assert_eq!(run["state"], "failed", "{run}");
    let msg = run["trigger_msg"].as_str().unwrap();
    assert!(
        msg.contains("executor answer over the 65536 byte limit"),
        "{msg}"
    );

    let log = h
        .get("/runs/{id}/log", &format!("/runs/{id}/log"), BUILTIN)
        .await;
    log.refused(502, "executor_error");
    let msg = log.body["message"].as_str().unwrap();
    assert!(msg.contains("over the 4194304 byte limit"), "{msg}");
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
    let (cookie, _, client) = h.console().await;
    let page = client
        .get(format!("{}/jobs/{id}/script", h.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
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
    let job_page = client
        .get(format!("{}/jobs/{id}", h.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        job_page.contains("id=\"script-link\""),
        "the job links its script"
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
    h.final_run(run["id"].as_i64().unwrap()).await;
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
