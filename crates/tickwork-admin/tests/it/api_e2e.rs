//! The REST API end to end where it needs the pipeline or an executor: a real admin (with its
//! pipeline loops) and its HTTP server on a TCP port, on a fresh SQLite database per test.
//! Executor group tokens as executors use them (registry, callbacks), the dispatch of a run to
//! an executor's address, what executors answer (redirects, oversize answers, none at all),
//! and the console's token button checked by an executor's registration; what the console
//! says after a manual trigger, logs as text, who killed a run. Answers of
//! documented REST operations are held to the OpenAPI document, as in `api`.

use std::sync::Mutex;
use std::time::Duration;

use axum::http::Method;
use serde_json::{Value, json};
use tickwork_admin::{Admin, Running, Service};
use tokio_util::sync::CancellationToken;

use crate::api::{
    ADMIN_PASSWORD, Api, BUILTIN, FORM, GLOBAL_ACCESS, Reply, config, hold_to_document,
};

/// A running admin with its HTTP server.
struct Harness {
    base: String,
    http: reqwest::Client,
    admin: Admin,
    store: std::sync::Arc<dyn tickwork_store::Store>,
    running: Option<Running>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Api for Harness {
    /// Over HTTP; redirects are answers, not followed.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{uri}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.expect("request");
        let (status, headers) = (resp.status(), resp.headers().clone());
        let body = resp.bytes().await.expect("answer body").to_vec();
        let reply = Reply::new(status, headers, body);
        hold_to_document(&method, uri, &reply);
        reply
    }

    fn service(&self) -> &Service {
        &self.admin.service
    }
}

impl Harness {
    async fn start() -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let db_file = dir.path().join("api.db");
        let config = config("", format!("sqlite://{}?mode=rwc", db_file.display()));
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
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            admin,
            store,
            running: Some(running),
            stop,
            server,
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

    /// A run of a new job of group `g`, dispatched to `address` (as the ledger records it).
    async fn dispatched_run(&self, g: i64, address: &str) -> i64 {
        let job = self.shell_job(g, BUILTIN).await.ok();
        let store = &self.store;
        let now = tickwork_admin::timer::now_ms();
        let run = store
            .run_insert(tickwork_store::RunNew {
                owner_node: Some("a-node".to_owned()),
                ..tickwork_store::RunNew::new(
                    job["id"].as_i64().unwrap(),
                    tickwork_core::TriggerType::Manual,
                    now + 3_600_000,
                )
            })
            .await
            .unwrap();
        crate::support::mark_dispatched(&**store, run.id, address, now).await;
        run.id
    }

    async fn callback(&self, token: &str, runs: &[i64]) -> (i64, String) {
        let items: Vec<Value> = runs
            .iter()
            .map(|r| json!({ "logId": r, "logDateTim": 0, "handleCode": 200, "handleMsg": "done" }))
            .collect();
        self.executor_call("callback", token, Value::Array(items))
            .await
    }

    /// Waits until run `id` is final; the run.
    async fn final_run(&self, id: i64) -> Value {
        self.run_past(id, &["planned", "sending", "dispatched"])
            .await
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
}

/// Registers `address` as a live executor of `app`, as an executor's heartbeat does.
async fn register(h: &Harness, app: &str, address: &str) {
    let (code, msg) = h.register("registry", GLOBAL_ACCESS, app, address).await;
    assert_eq!(code, 200, "{msg}");
}

// ---- executor group tokens ----

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

    let bearer = format!("Bearer {BUILTIN}");
    let resp = h
        .send(
            Method::POST,
            &format!("/openapi/v1/groups/{a}/token"),
            &[("authorization", &bearer)],
            None,
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    let old = resp.json()["token"].as_str().unwrap().to_owned();
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
    let before = h.page("/groups", &cookie).await.text();
    assert!(
        before.contains(&format!("id=\"rotate-token-{g}\"")),
        "no button"
    );
    assert!(before.contains("global token"), "{before}");

    let path = format!("/groups/{g}/token");
    let headers = [("cookie", cookie.as_str()), ("content-type", FORM)];
    let post = |csrf: String| h.send(Method::POST, &path, &headers, Some(format!("_csrf={csrf}")));
    // A forged form changes nothing.
    let forged = post("forged".into()).await;
    assert_eq!(forged.status(), 403);
    let view = h
        .get("/groups/{id}", &format!("/groups/{g}"), BUILTIN)
        .await
        .ok();
    assert_eq!(view["has_token"], false);

    let resp = post(s.csrf_token.clone()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    let shown = resp.text();
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

    let after = h.page("/groups", &cookie).await.text();
    assert!(!after.contains(&token), "the token is shown again");
    assert!(after.contains("own token"), "{after}");
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
    /// This JSON body.
    Json(&'static str),
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
                        Behaviour::Json(body) => format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        ),
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
        let run = h
            .run_past(run["id"].as_i64().unwrap(), &["planned", "sending"])
            .await;
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
    h.run_past(run["id"].as_i64().unwrap(), &["planned", "sending"])
        .await;
    assert_eq!(listed.paths(), ["/run"]);
    assert!(foreign.paths().is_empty(), "{:?}", foreign.paths());
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

/// A group without executors: its run is sent nowhere and fails at dispatch, naming why.
#[tokio::test]
async fn a_trigger_without_executors_fails_at_dispatch() {
    let h = Harness::start().await;
    let group = h.group("nobody-home").await;
    let job = h.bean_job(group).await;
    let run = h.trigger(job, json!({})).await.ok();
    let run = h.final_run(run["id"].as_i64().unwrap()).await;
    assert_eq!(run["state"], "failed", "{run}");
    let msg = run["trigger_msg"].as_str().unwrap();
    assert!(
        msg.contains(&tickwork_core::Error::NoExecutor.to_string()),
        "{msg}"
    );
    assert_eq!(run["executor_address"], Value::Null, "{run}");
    h.stop().await;
}

// ---- truthful feedback ----

/// Triggers `job` from its console page as the first admin; where the answer leads.
async fn console_trigger(h: &Harness, job: i64) -> String {
    let (status, to) = h
        .console_post(&format!("/jobs/{job}/trigger"), &[("params", "")])
        .await;
    assert_eq!(status, 303, "{to}");
    to
}

/// The console said "Run started" right after a manual trigger, before anything was sent, even
/// when no executor would take the run; now it says so only when an executor accepted it, and
/// otherwise shows why not.
#[tokio::test]
async fn console_trigger_says_started_only_when_an_executor_accepted() {
    let h = Harness::start().await;
    let (cookie, _) = h.console().await;

    // No executor at all: the dispatch error, on the run's page.
    let nobody = h.group("nobody-home").await;
    let job = h.bean_job(nobody).await;
    let to = console_trigger(&h, job).await;
    assert!(to.starts_with("/runs/") && to.contains("err="), "{to}");
    assert!(!to.contains("ok=run_started"), "{to}");
    let page = h.page(&to, &cookie).await.text();
    assert!(page.contains("No executor accepted the run"), "{page}");
    assert!(
        page.contains(&tickwork_core::Error::NoExecutor.to_string()),
        "{page}"
    );

    // An executor that refuses the run: its answer is shown.
    let refusing = FakeExecutor::start(|path| match path {
        "/run" => Behaviour::Json(r#"{"code":500,"msg":"busy: discarded by the block strategy"}"#),
        _ => Behaviour::Success,
    })
    .await;
    let g = h.manual_group("refusing", &refusing.base).await;
    let job = h.bean_job(g).await;
    let to = console_trigger(&h, job).await;
    let page = h.page(&to, &cookie).await.text();
    assert!(page.contains("id=\"flash-err\""), "{page}");
    assert!(
        page.contains("busy: discarded by the block strategy"),
        "{page}"
    );
    assert!(!page.contains("Run started"), "{page}");

    // An executor that accepts it: "Run started".
    let accepting = FakeExecutor::start(|_| Behaviour::Success).await;
    let g = h.manual_group("accepting", &accepting.base).await;
    let job = h.bean_job(g).await;
    let to = console_trigger(&h, job).await;
    assert!(to.ends_with("ok=run_started"), "{to}");
    let run: i64 = to
        .trim_start_matches("/runs/")
        .split('?')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(h.run_state(run).await, "planned");
    let page = h.page(&to, &cookie).await.text();
    assert!(page.contains("Run started"), "{page}");
    assert_eq!(accepting.paths(), ["/run"]);
    h.stop().await;
}

/// Executors write `<br>` for XXL-JOB's HTML console; the REST API and the console's live log
/// showed it as text. Both give line breaks now.
#[tokio::test]
async fn run_logs_read_as_lines_not_html_breaks() {
    let h = Harness::start().await;
    let fake = FakeExecutor::start(|path| match path {
        "/log" => Behaviour::Json(
            r#"{"code":200,"content":{"fromLineNum":1,"toLineNum":2,"logContent":"2026-11-21 10:00:00 <br>----------- start -----------<br>----------- Param:x\nsecond line<BR/>third\n","isEnd":false}}"#,
        ),
        _ => Behaviour::Success,
    })
    .await;
    let g = h.manual_group("logs", &fake.base).await;
    let job = h.bean_job(g).await;
    let run = h.trigger(job, json!({})).await.ok();
    let id = run["id"].as_i64().unwrap();
    h.run_past(id, &["planned", "sending"]).await;
    let want = "2026-11-21 10:00:00 \n----------- start -----------\n----------- Param:x\nsecond line\nthird\n";
    let log = h
        .get("/runs/{id}/log", &format!("/runs/{id}/log"), BUILTIN)
        .await
        .ok();
    assert_eq!(log["content"], want, "{log}");
    let (cookie, _) = h.console().await;
    let console = h.page(&format!("/ui/runs/{id}/log"), &cookie).await.json();
    assert_eq!(console["content"], want, "{console}");
    h.stop().await;
}

/// A kill said "killed by operator" whoever did it; the run now names the user, and its page
/// shows who killed it and when.
#[tokio::test]
async fn a_kill_records_and_shows_who_killed_the_run() {
    let h = Harness::start().await;
    let fake = FakeExecutor::start(|_| Behaviour::Success).await;
    let g = h.manual_group("killable", &fake.base).await;
    let (_, olga) = h.user_with_token("olga", "operator", &[g]).await;
    let job = h.bean_job(g).await;
    let run = h.trigger(job, json!({})).await.ok();
    let id = run["id"].as_i64().unwrap();
    let run = h.run_past(id, &["planned", "sending"]).await;
    assert_eq!(run["state"], "dispatched", "{run}");

    let (cookie, _) = h.console().await;
    let page = h.page(&format!("/runs/{id}"), &cookie).await.text();
    assert!(!page.contains("killed-by"), "not killed yet");
    let killed = h
        .call(
            Method::POST,
            "/runs/{id}/kill",
            &format!("/runs/{id}/kill"),
            &olga,
            None,
        )
        .await
        .ok();
    assert_eq!(killed["state"], "killed", "{killed}");
    assert!(
        killed["handle_msg"]
            .as_str()
            .unwrap()
            .starts_with("killed by olga"),
        "{killed}"
    );
    let page = h.page(&format!("/runs/{id}"), &cookie).await.text();
    let shown = page
        .split("id=\"killed-by\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("no killed-by on the page: {page}"));
    assert!(shown.starts_with("olga · "), "{shown}");
    h.stop().await;
}
