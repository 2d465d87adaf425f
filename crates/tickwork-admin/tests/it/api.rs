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
    store: std::sync::Arc<dyn tickwork_store::Store>,
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
        let running = tickwork_admin::start(config, store.clone())
            .await
            .expect("admin start");
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
            store,
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
        self.store.close().await;
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
    let auth = h.admin.service.auth();
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
    let auth = h.admin.service.auth();
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

// ---- executor group tokens ----

const GLOBAL_ACCESS: &str = "api-test-access-token";

impl Harness {
    /// `POST /api/<method>` of the executor API with `token`: the envelope's code and message.
    async fn executor_call(&self, method: &str, token: &str, body: Value) -> (i64, String) {
        let resp = self
            .http
            .post(format!("{}/api/{method}", self.base))
            .header("XXL-JOB-ACCESS-TOKEN", token)
            .json(&body)
            .send()
            .await
            .expect("executor call");
        assert_eq!(resp.status(), 200);
        let env: Value = resp.json().await.expect("envelope");
        (
            env["code"].as_i64().unwrap(),
            env["msg"].as_str().unwrap_or("").to_owned(),
        )
    }

    async fn register(&self, method: &str, token: &str, app: &str, address: &str) -> (i64, String) {
        self.executor_call(
            method,
            token,
            json!({ "registryGroup": "EXECUTOR", "registryKey": app, "registryValue": address }),
        )
        .await
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

    /// A run of a new job of group `g`, dispatched to `address` (as the ledger records it).
    async fn dispatched_run(&self, g: i64, address: &str) -> i64 {
        let job = self.shell_job(g, BUILTIN).await.ok();
        let store = &self.store;
        let now = tickwork_admin::timer::now_ms();
        let run = store
            .run_insert(tickwork_store::RunNew::new(
                job["id"].as_i64().unwrap(),
                tickwork_core::TriggerType::Manual,
                now + 3_600_000,
            ))
            .await
            .unwrap();
        store
            .runs_mark_dispatched(&[tickwork_store::Dispatched {
                run_id: run.id,
                address: address.to_owned(),
                trigger_code: 200,
                trigger_msg: None,
                at: now,
            }])
            .await
            .unwrap();
        run.id
    }

    async fn run_state(&self, run: i64) -> String {
        self.get("/runs/{id}", &format!("/runs/{run}"), BUILTIN)
            .await
            .ok()["state"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn callback(&self, token: &str, runs: &[i64]) -> (i64, String) {
        let items: Vec<Value> = runs
            .iter()
            .map(|r| json!({ "logId": r, "logDateTim": 0, "handleCode": 200, "handleMsg": "done" }))
            .collect();
        self.executor_call("callback", token, Value::Array(items))
            .await
    }
}

/// One executor token used to cover every group: the holder of group A's token could
/// register into B, remove B's executors and complete B's runs. Now a group's token acts for
/// its own group only, the global token only for groups without their own token.
#[tokio::test]
async fn group_token_cannot_register_remove_or_complete_for_another_group() {
    let h = Harness::start().await;
    let (a, b, c) = (
        h.group("tok-a").await,
        h.group("tok-b").await,
        h.group("tok-c").await,
    );
    let ta = h.rotate(a).await;
    let tb = h.rotate(b).await;
    assert_ne!(ta, tb);

    // B's executor registers with B's token; A's token cannot register into B.
    assert_eq!(
        h.register("registry", &tb, "tok-b", "http://10.0.0.2:9999")
            .await
            .0,
        200
    );
    let (code, msg) = h
        .register("registry", &ta, "tok-b", "http://10.6.6.6:9999")
        .await;
    assert_eq!(code, 500, "{msg}");
    assert!(msg.contains("may not register"), "{msg}");
    assert_eq!(h.instances(b).await, ["http://10.0.0.2:9999"]);
    // ... nor remove B's executors.
    let (code, _) = h
        .register("registryRemove", &ta, "tok-b", "http://10.0.0.2:9999")
        .await;
    assert_eq!(code, 500);
    assert_eq!(h.instances(b).await, ["http://10.0.0.2:9999"]);
    // Nor may it act for an app without a group, or a group without a token.
    assert_eq!(
        h.register("registry", &ta, "no-such-group", "http://10.6.6.6:9999")
            .await
            .0,
        500
    );
    assert_eq!(
        h.register("registry", &ta, "tok-c", "http://10.6.6.6:9999")
            .await
            .0,
        500
    );
    assert!(h.instances(c).await.is_empty());
    // A's own token works for A.
    assert_eq!(
        h.register("registry", &ta, "tok-a", "http://10.0.0.1:9999")
            .await
            .0,
        200
    );
    assert_eq!(h.instances(a).await, ["http://10.0.0.1:9999"]);

    // Callbacks: A's token reports A's run, not B's; B's run stays as it was, and the other
    // item of the same batch is recorded.
    let ra = h.dispatched_run(a, "http://10.0.0.1:9999").await;
    let rb = h.dispatched_run(b, "http://10.0.0.2:9999").await;
    let (code, msg) = h.callback(&ta, &[rb, ra]).await;
    assert_eq!(code, 500, "{msg}");
    assert!(msg.starts_with(&format!("logId: [{rb}] ")), "{msg}");
    assert_eq!(h.run_state(ra).await, "succeeded");
    assert_eq!(h.run_state(rb).await, "dispatched");
    let run_b = h
        .get("/runs/{id}", &format!("/runs/{rb}"), BUILTIN)
        .await
        .ok();
    assert_eq!(run_b["handle_code"], 0, "{run_b}");
    // B's token completes it.
    assert_eq!(h.callback(&tb, &[rb]).await.0, 200);
    assert_eq!(h.run_state(rb).await, "succeeded");

    // B's token removes B's executor.
    assert_eq!(
        h.register("registryRemove", &tb, "tok-b", "http://10.0.0.2:9999")
            .await
            .0,
        200
    );
    assert!(h.instances(b).await.is_empty());

    // A token no group has, and no token at all, are wrong.
    let (code, msg) = h
        .register(
            "registry",
            "twg_not-a-token-of-anyone",
            "tok-a",
            "http://x:1",
        )
        .await;
    assert_eq!((code, msg.as_str()), (500, "The access token is wrong."));
    assert_eq!(
        h.register("registry", "", "tok-c", "http://x:1").await.0,
        500
    );
    h.stop().await;
}

/// A group with its own token no longer accepts the global one; groups without one keep
/// working with it (the migration path).
#[tokio::test]
async fn global_token_is_refused_for_a_group_with_its_own_token() {
    let h = Harness::start().await;
    let (a, c) = (h.group("glob-a").await, h.group("glob-c").await);
    // Before a token is set, the global token serves every group.
    assert_eq!(
        h.register("registry", GLOBAL_ACCESS, "glob-a", "http://10.0.0.1:9999")
            .await
            .0,
        200
    );
    let ra = h.dispatched_run(a, "http://10.0.0.1:9999").await;
    let ta = h.rotate(a).await;

    let (code, msg) = h
        .register("registry", GLOBAL_ACCESS, "glob-a", "http://10.6.6.6:9999")
        .await;
    assert_eq!(code, 500, "{msg}");
    assert_eq!(h.instances(a).await, ["http://10.0.0.1:9999"]);
    assert_eq!(
        h.register(
            "registryRemove",
            GLOBAL_ACCESS,
            "glob-a",
            "http://10.0.0.1:9999"
        )
        .await
        .0,
        500
    );
    assert_eq!(h.instances(a).await, ["http://10.0.0.1:9999"]);
    assert_eq!(h.callback(GLOBAL_ACCESS, &[ra]).await.0, 500);
    assert_eq!(h.run_state(ra).await, "dispatched");
    assert_eq!(h.callback(&ta, &[ra]).await.0, 200);
    assert_eq!(h.run_state(ra).await, "succeeded");

    // The group without a token, and app names without a group, still use the global one.
    let rc = h.dispatched_run(c, "http://10.0.0.3:9999").await;
    assert_eq!(
        h.register("registry", GLOBAL_ACCESS, "glob-c", "http://10.0.0.3:9999")
            .await
            .0,
        200
    );
    assert_eq!(
        h.register(
            "registry",
            GLOBAL_ACCESS,
            "not-yet-a-group",
            "http://10.0.0.4:9999"
        )
        .await
        .0,
        200
    );
    assert_eq!(h.callback(GLOBAL_ACCESS, &[rc]).await.0, 200);
    assert_eq!(h.run_state(rc).await, "succeeded");
    assert_eq!(
        h.callback(&ta, &[rc]).await.0,
        500,
        "a group token for a run of a tokenless group"
    );
    h.stop().await;
}

/// Rotation: the old token stops working at once, the new one is shown once (not cached),
/// never in views or audit records; admins and operators of the group may rotate, nobody else.
#[tokio::test]
async fn group_token_rotation_invalidates_the_old_token_at_once() {
    let h = Harness::start().await;
    let (a, b) = (h.group("rot-a").await, h.group("rot-b").await);
    let view = h
        .get("/groups/{id}", &format!("/groups/{a}"), BUILTIN)
        .await
        .ok();
    assert_eq!(view["has_token"], false);

    let resp = h
        .http
        .post(format!("{}/openapi/v1/groups/{a}/token", h.base))
        .bearer_auth(BUILTIN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    let old = resp.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    // At least 128 bits from the generator: 48 hex digits after the prefix.
    assert_eq!(old.len(), "twg_".len() + 48, "{old}");
    assert_eq!(
        h.register("registry", &old, "rot-a", "http://10.0.0.1:9999")
            .await
            .0,
        200
    );

    let new = h.rotate(a).await;
    assert_ne!(new, old);
    let (code, msg) = h
        .register("registry", &old, "rot-a", "http://10.0.0.2:9999")
        .await;
    assert_eq!((code, msg.as_str()), (500, "The access token is wrong."));
    assert_eq!(
        h.register("registry", &new, "rot-a", "http://10.0.0.2:9999")
            .await
            .0,
        200
    );

    // Views say only whether there is a token.
    let view = h
        .get("/groups/{id}", &format!("/groups/{a}"), BUILTIN)
        .await
        .ok();
    assert_eq!(view["has_token"], true);
    let list = h.get("/groups", "/groups", BUILTIN).await.ok().to_string();
    assert!(!list.contains(&new) && !list.contains(&old), "{list}");
    let audit = h.get("/audit", "/audit?size=1000", BUILTIN).await.ok();
    let text = audit.to_string();
    assert!(
        !text.contains(&new) && !text.contains(&old),
        "a group token in the audit log"
    );
    let rotations: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "group.token_rotate")
        .collect();
    assert_eq!(rotations.len(), 2);
    assert_eq!(rotations[0]["target_id"], a.to_string());
    assert_eq!(rotations[0]["after"]["has_token"], true);

    // Roles: an operator of A may rotate A, not B; a viewer nothing; refusals change nothing.
    let (_, op) = h.user_with_token("rota", "operator", &[a]).await;
    let (_, viewer) = h.user_with_token("vera", "viewer", &[]).await;
    let by_op = h
        .call(
            Method::POST,
            "/groups/{id}/token",
            &format!("/groups/{a}/token"),
            &op,
            None,
        )
        .await;
    assert_eq!(by_op.status, 201, "{by_op:?}");
    let latest = by_op.body["token"].as_str().unwrap().to_owned();
    assert_eq!(
        h.register("registry", &new, "rot-a", "http://10.0.0.3:9999")
            .await
            .0,
        500
    );
    let audit_before = h.audit_total().await;
    for (token, path) in [
        (&op, format!("/groups/{b}/token")),
        (&viewer, format!("/groups/{a}/token")),
    ] {
        h.call(Method::POST, "/groups/{id}/token", &path, token, None)
            .await
            .refused(403, "forbidden");
    }
    h.call(
        Method::POST,
        "/groups/{id}/token",
        "/groups/9999/token",
        BUILTIN,
        None,
    )
    .await
    .refused(404, "not_found");
    h.call(
        Method::POST,
        "/groups/{id}/token",
        "/groups/x/token",
        BUILTIN,
        None,
    )
    .await
    .refused(400, "invalid_input");
    assert_eq!(h.audit_total().await, audit_before);
    let b_view = h
        .get("/groups/{id}", &format!("/groups/{b}"), BUILTIN)
        .await
        .ok();
    assert_eq!(b_view["has_token"], false);
    assert_eq!(
        h.register("registry", &latest, "rot-a", "http://10.0.0.3:9999")
            .await
            .0,
        200
    );
    h.stop().await;
}

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
    let (cookie, csrf, client) = h.console().await;
    let post = |path: String, app: &'static str| {
        client
            .post(format!("{}{path}", h.base))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                serde_urlencoded::to_string([
                    ("_csrf", csrf.as_str()),
                    ("app_name", app),
                    ("title", "x"),
                    ("address_mode", "auto"),
                ])
                .unwrap(),
            )
            .send()
    };
    for path in ["/groups".to_owned(), format!("/groups/{other}/edit")] {
        let resp = post(path.clone(), "taken-app").await.unwrap();
        assert_eq!(resp.status().as_u16(), 409, "{path}");
        let page = resp.text().await.unwrap();
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

/// The console's groups page: a button gives a group a new token, shown on that answer only
/// (not cached); the page itself says only whether a group has its own token.
#[tokio::test]
async fn console_rotates_a_group_token_and_shows_it_once() {
    let h = Harness::start().await;
    let g = h.group("console-tok").await;
    let s = h
        .admin
        .service
        .auth()
        .login("admin", ADMIN_PASSWORD, [127, 0, 0, 1].into())
        .await
        .expect("login");
    let cookie = format!("{}={}", tickwork_admin::SESSION_COOKIE, s.session_id);
    let page = |path: String| {
        h.http
            .get(format!("{}{path}", h.base))
            .header("cookie", &cookie)
            .send()
    };
    let before = page("/groups".into()).await.unwrap().text().await.unwrap();
    assert!(
        before.contains(&format!("id=\"rotate-token-{g}\"")),
        "no button"
    );
    assert!(before.contains("global token"), "{before}");

    let post = |csrf: String| {
        h.http
            .post(format!("{}/groups/{g}/token", h.base))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("_csrf={csrf}"))
            .send()
    };
    // A forged form changes nothing.
    let forged = post("forged".into()).await.unwrap();
    assert_eq!(forged.status(), 403);
    let view = h
        .get("/groups/{id}", &format!("/groups/{g}"), BUILTIN)
        .await
        .ok();
    assert_eq!(view["has_token"], false);

    let resp = post(s.csrf_token.clone()).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    let shown = resp.text().await.unwrap();
    let start = shown.find("twg_").expect("the new token on the page");
    let token: String = shown[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    assert_eq!(
        h.register("registry", &token, "console-tok", "http://10.0.0.1:9999")
            .await
            .0,
        200
    );

    let after = page("/groups".into()).await.unwrap().text().await.unwrap();
    assert!(!after.contains(&token), "the token is shown again");
    assert!(after.contains("own token"), "{after}");
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
        .service
        .auth()
        .login("admin", ADMIN_PASSWORD, ip)
        .await
        .expect("configured password");
    // A second start on the same database creates nobody and generates nothing.
    assert_eq!(
        h.admin
            .service
            .auth()
            .ensure_first_admin(h.store.as_ref())
            .await
            .unwrap(),
        None
    );
    h.stop().await;
}

// ---- hardening of logins, sessions, tokens and redirects ----

/// The console over HTTP, without following redirects, cookies handled by hand.
struct Browser {
    base: String,
    http: reqwest::Client,
}

/// The value of cookie `name` set by an answer.
fn set_cookie(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap_or("").to_owned())
}

fn location(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(reqwest::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default()
}

impl Browser {
    fn new(h: &Harness) -> Browser {
        Browser {
            base: h.base.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// Opens the login page: the form's CSRF token, as its cookie holds it.
    async fn login_token(&self) -> String {
        let resp = self
            .http
            .get(format!("{}/login", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let token = set_cookie(&resp, "tw_login_csrf").expect("login csrf cookie");
        let page = resp.text().await.unwrap();
        assert!(page.contains(&token), "the form carries the token");
        token
    }

    /// Posts the login form with `token` (as cookie and field) and extra `headers`.
    async fn post_login(
        &self,
        token: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut fields: Vec<(&str, &str)> = vec![("_csrf", token)];
        fields.extend_from_slice(form);
        let mut req = self
            .http
            .post(format!("{}/login", self.base))
            .header("cookie", format!("tw_login_csrf={token}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(serde_urlencoded::to_string(&fields).unwrap());
        // As a browser sends it from our page, unless the test names another.
        if !headers.iter().any(|(k, _)| *k == "origin") {
            req = req.header("origin", self.base.clone());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.unwrap()
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

    async fn get(&self, path: &str, session: Option<&str>) -> reqwest::Response {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(s) = session {
            req = req.header("cookie", format!("tw_session={s}"));
        }
        req.send().await.unwrap()
    }
}

#[tokio::test]
async fn concurrent_logins_are_bounded_and_excess_is_refused_at_once() {
    let h = Harness::start_with("[auth]\nlogin_max_failures = 1\n").await;
    let auth = h.admin.service.auth().clone();
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
    let auth = h.admin.service.auth().clone();
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
    let auth = h.admin.service.auth().clone();
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
    h.admin
        .service
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
    match h.admin.service.auth().login("mb", &longer, ip).await {
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
    assert!(resp.text().await.unwrap().contains("1024"));
    // Neither was counted as a failure (the limit is one).
    h.admin
        .service
        .auth()
        .login("mb", &exact, ip)
        .await
        .expect("over-long attempts count nothing");
    h.admin
        .service
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
            .service
            .auth()
            .login("admin", ADMIN_PASSWORD, [127, 0, 0, 1].into())
            .await
            .unwrap();
        let cookie = self.admin.service.auth().session_cookie(&s);
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
        let page = resp.text().await.unwrap();
        assert!(page.contains("another site"), "{what}: {page}");
    }
    // A foreign referer without an origin.
    let resp = b
        .http
        .post(format!("{}/login", b.base))
        .header("cookie", format!("tw_login_csrf={token}"))
        .header("referer", "https://evil.example/form")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string([("_csrf", token.as_str()), good[0], good[1]]).unwrap())
        .send()
        .await
        .unwrap();
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
            .http
            .post(format!("{}/login", b.base))
            .header("cookie", format!("tw_login_csrf={cookie}"))
            .header("origin", b.base.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(serde_urlencoded::to_string(&fields).unwrap())
            .send()
            .await
            .unwrap();
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
    let http = reqwest::Client::new();
    for (value, status) in [
        (format!("bearer {BUILTIN}"), 200),
        (format!("BEARER {BUILTIN}"), 200),
        (format!("Bearer   {BUILTIN}"), 200),
        (format!("Bearer {BUILTIN}"), 200),
        (format!("Basic {BUILTIN}"), 401),
        (format!("bearer{BUILTIN}"), 401),
        ("bearer wrong".to_owned(), 401),
    ] {
        let resp = http
            .get(format!("{}/openapi/v1/me", h.base))
            .header("authorization", &value)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), status, "{value}");
    }
    h.stop().await;
}

#[tokio::test]
async fn answers_with_a_new_token_are_not_stored_by_caches() {
    let h = Harness::start().await;
    let resp = reqwest::Client::new()
        .post(format!("{}/openapi/v1/tokens", h.base))
        .bearer_auth(BUILTIN)
        .json(&json!({ "name": "ci", "user_id": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["cache-control"], "no-store");

    let b = Browser::new(&h);
    let session = b.login("admin", ADMIN_PASSWORD).await;
    let page = b.get("/tokens", Some(&session)).await.text().await.unwrap();
    let csrf = page
        .split("name=\"_csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("csrf field")
        .to_owned();
    let resp = b
        .http
        .post(format!("{}/tokens", b.base))
        .header("cookie", format!("tw_session={session}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string([("_csrf", csrf.as_str()), ("name", "console")]).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert!(resp.text().await.unwrap().contains("tw_"), "the new secret");
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
    let mut last_use = std::time::Instant::now();
    // Used every 1.2 s: never idle for 2 s, so it lives on.
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let gap = last_use.elapsed();
        let alive = auth.session(&s.session_id).await.unwrap().is_some();
        last_use = std::time::Instant::now();
        if gap < idle {
            assert!(alive, "round {round}: ended after {gap:?} of idleness");
        }
    }
    // Idle for longer than the timeout (plus the touch interval of a quarter of it): ended.
    tokio::time::sleep(idle + idle / 4 + Duration::from_millis(300)).await;
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

/// A field error answered by the service: 400, `invalid_input`, naming `field`.
fn assert_field_error(a: &Answer, field: &str) {
    a.refused(400, "invalid_input");
    assert_eq!(a.body["field"], field, "{a:?}");
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
