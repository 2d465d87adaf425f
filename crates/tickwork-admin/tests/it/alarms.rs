//! Alarms end to end: failed runs alarm on real receivers (an HTTP server per format, an SMTP
//! server), failed sends are retried and stay visible through the API, bad channels are
//! refused without changing anything, and with several admins on one database every failed
//! run alarms exactly once; when the admin sending alarms is killed mid-send, a survivor resends
//! only what it had in flight, under the same delivery id.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use support::{Api, Backend, Child, CountingExecutor, InProcessAdmin, TestDb};
use tickwork_core::run::RunState;
use tickwork_store::{AlarmStatus, DeliveryFilter, DeliveryState, PageReq, Store};
use tickwork_testkit::{Process, Receiver, wait_until};

const ADMIN: &str = r#"
[cluster]
heartbeat_interval_ms = 200
node_dead_after_ms = 1000
lease_ttl_ms = 1000
adopt_interval_ms = 200

[monitor]
alarm_interval_ms = 100

[alarm]
poll_interval_ms = 100
max_attempts = 3
backoff_ms = 50
backoff_max_ms = 200
send_timeout_ms = 5000
# One alarm per failed run: these tests count them per run.
group_window_ms = 0
"#;

const WAIT: Duration = Duration::from_secs(30);
const FAILURE: &str = "disk full on /data";

fn hmac_b64(key: &[u8], data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(hmac_raw(key, data))
}

fn hmac_raw(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads one query parameter, percent-decoded.
fn query_param(query: &str, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// An admin with a registered executor, and a group for it.
struct Setup {
    db: TestDb,
    admin: InProcessAdmin,
    api: Api,
    executor: CountingExecutor,
    group: i64,
}

impl Setup {
    async fn start(backend: Backend, app: &str) -> Option<Setup> {
        let db = TestDb::create(backend).await?;
        let admin = InProcessAdmin::start(&db, &format!("{app}-admin"), ADMIN).await;
        let api = Api::new(&admin.address);
        let group = api.group(app).await;
        let executor =
            CountingExecutor::start(app, std::slice::from_ref(&admin.address), &db.token).await;
        support::registered(admin.store.as_ref(), &executor.address()).await;
        Some(Setup {
            db,
            admin,
            api,
            executor,
            group,
        })
    }

    async fn channel(&self, name: &str, kind: &str, config: Value) -> i64 {
        let c = self
            .api
            .post(
                "alarm-channels",
                json!({ "name": name, "kind": kind, "config": config }),
            )
            .await;
        c["id"].as_i64().expect("channel id")
    }

    /// A job whose handler fails, alarming on `channels`.
    async fn failing_job(&self, key: &str, channels: &str) -> i64 {
        let job = self
            .api
            .post(
                "jobs",
                json!({
                    "key": key,
                    "group_id": self.group,
                    "description": "Nightly export",
                    "handler": "fail",
                    "alarm_channels": channels,
                }),
            )
            .await;
        job["id"].as_i64().expect("job id")
    }

    /// Triggers `job` and waits for its run to fail.
    async fn failed_run(&self, job: i64) -> i64 {
        let run = self
            .api
            .post(&format!("jobs/{job}/trigger"), json!({}))
            .await;
        let run_id = run["id"].as_i64().expect("run id");
        let store = self.admin.store.clone();
        let state = wait_until("the run to end", WAIT, || {
            let store = store.clone();
            async move {
                let state = store.run_get(run_id).await.map(|r| r.state);
                match state {
                    Ok(state) if state.is_final() => Ok(state),
                    seen => Err(seen),
                }
            }
        })
        .await;
        assert_eq!(state, RunState::Failed);
        run_id
    }

    async fn deliveries(&self, query: &str) -> Vec<Value> {
        let (status, page) = self
            .api
            .call("GET", &format!("alarm-deliveries?{query}"), None)
            .await;
        assert_eq!(status, 200, "{page}");
        page["items"].as_array().cloned().unwrap_or_default()
    }

    async fn finish(self) {
        let _ = self.executor.executor.shutdown_and_wait().await;
        self.admin.shutdown().await;
        self.db.drop_database().await;
    }
}

/// Waits until every delivery of `run_id` is no longer pending; returns them.
async fn settled(store: &dyn Store, run_id: i64, n: usize) -> Vec<tickwork_store::AlarmDelivery> {
    wait_until("the run's alarm deliveries to settle", WAIT, || async {
        let page = store
            .alarm_deliveries_list(DeliveryFilter {
                run_id: Some(run_id),
                page: PageReq::first(100),
                ..DeliveryFilter::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        if page.items.len() == n && page.items.iter().all(|d| d.state != DeliveryState::Pending) {
            Ok(page.items)
        } else {
            Err(format!(
                "{n} wanted, states {:?}",
                page.items.iter().map(|d| d.state).collect::<Vec<_>>()
            ))
        }
    })
    .await
}

/// The text every format carries names the job, the run, the executor and the failure.
fn assert_names_everything(text: &str, job: i64, run: i64, executor: &str) {
    for part in [
        format!("job {job} (alarm-formats) run {run} failed"),
        format!("run: {run} attempt 0"),
        format!("executor: {executor}"),
        FAILURE.to_owned(),
        "Nightly export".to_owned(),
    ] {
        assert!(text.contains(&part), "{part:?} missing in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_formats_are_delivered_and_signed() {
    let Some(s) = Setup::start(Backend::Sqlite, "formats").await else {
        return;
    };
    let rx = Receiver::start().await;
    s.channel(
        "hook",
        "webhook",
        json!({ "url": rx.url("/hook"), "secret": "whsec-1" }),
    )
    .await;
    s.channel(
        "ding",
        "dingtalk",
        json!({ "url": rx.url("/ding?access_token=tok"), "secret": "SECding" }),
    )
    .await;
    s.channel("wecom", "wecom", json!({ "url": rx.url("/wecom?key=k") }))
        .await;
    s.channel(
        "feishu",
        "feishu",
        json!({ "url": rx.url("/feishu"), "secret": "fs-secret" }),
    )
    .await;
    s.channel("slack", "slack", json!({ "url": rx.url("/slack/T/B/X") }))
        .await;
    let job = s
        .failing_job("alarm-formats", "hook, ding,wecom,feishu,slack")
        .await;
    let run = s.failed_run(job).await;
    let executor = s.executor.address();

    // The generic webhook: the JSON document, signed over "<timestamp>.<body>".
    let hook = rx.wait_for("/hook", 1, WAIT).await;
    let r = &hook[0];
    let ts = &r.headers["x-tickwork-timestamp"];
    let expected = hex(&hmac_raw(b"whsec-1", format!("{ts}.{}", r.body).as_bytes()));
    assert_eq!(
        r.headers["x-tickwork-signature"],
        format!("sha256={expected}")
    );
    assert_eq!(r.headers["content-type"], "application/json");
    let doc = r.json();
    assert_eq!(doc["event"], "run_failed");
    assert_eq!(doc["job"]["id"], job);
    assert_eq!(doc["job"]["key"], "alarm-formats");
    assert_eq!(doc["run"]["id"], run);
    assert_eq!(doc["run"]["state"], "failed");
    assert_eq!(doc["run"]["executor_address"], executor.as_str());
    assert_eq!(doc["run"]["handle_msg"], FAILURE);
    assert_names_everything(doc["text"].as_str().unwrap(), job, run, &executor);

    // DingTalk: text message; timestamp and sign in the query.
    let ding = rx.wait_for("/ding", 1, WAIT).await;
    let r = &ding[0];
    assert_eq!(
        query_param(&r.query, "access_token").as_deref(),
        Some("tok")
    );
    let ts = query_param(&r.query, "timestamp").expect("timestamp");
    let sign = query_param(&r.query, "sign").expect("sign");
    assert_eq!(
        sign,
        hmac_b64(b"SECding", format!("{ts}\nSECding").as_bytes())
    );
    let body = r.json();
    assert_eq!(body["msgtype"], "text");
    assert_names_everything(
        body["text"]["content"].as_str().unwrap(),
        job,
        run,
        &executor,
    );

    // WeCom: the same shape, no signature.
    let wecom = rx.wait_for("/wecom", 1, WAIT).await;
    let body = wecom[0].json();
    assert_eq!(body["msgtype"], "text");
    assert_eq!(body.as_object().unwrap().len(), 2);
    assert_names_everything(
        body["text"]["content"].as_str().unwrap(),
        job,
        run,
        &executor,
    );

    // Feishu: msg_type/content, timestamp and sign in the body, keyed by "ts\nsecret".
    let feishu = rx.wait_for("/feishu", 1, WAIT).await;
    let body = feishu[0].json();
    assert_eq!(body["msg_type"], "text");
    let ts = body["timestamp"].as_str().expect("timestamp string");
    assert_eq!(
        body["sign"],
        hmac_b64(format!("{ts}\nfs-secret").as_bytes(), b"")
    );
    assert_names_everything(
        body["content"]["text"].as_str().unwrap(),
        job,
        run,
        &executor,
    );

    // Slack: {"text": …}.
    let slack = rx.wait_for("/slack/T/B/X", 1, WAIT).await;
    let body = slack[0].json();
    assert_eq!(body.as_object().unwrap().len(), 1);
    assert_names_everything(body["text"].as_str().unwrap(), job, run, &executor);

    // Each sent once, visible as sent; the run says its alarm went out.
    let store = s.admin.store.clone();
    let done = settled(store.as_ref(), run, 5).await;
    assert!(
        done.iter()
            .all(|d| d.state == DeliveryState::Sent && d.attempts == 1)
    );
    for path in ["/hook", "/ding", "/wecom", "/feishu", "/slack/T/B/X"] {
        assert_eq!(rx.requests(path).len(), 1, "{path}");
    }
    assert_eq!(
        store.run_get(run).await.unwrap().alarm_status,
        AlarmStatus::Sent
    );
    let listed = s.deliveries(&format!("run_id={run}&state=sent")).await;
    assert_eq!(listed.len(), 5);
    let (_, metrics) = s.api.get("/metrics").await;
    for line in [
        "tickwork_alarm_sends_total{kind=\"webhook\",outcome=\"sent\"} 1",
        "tickwork_alarm_sends_total{kind=\"slack\",outcome=\"sent\"} 1",
        "tickwork_alarm_deliveries_pending",
    ] {
        assert!(metrics.contains(line), "{line} missing in:\n{metrics}");
    }
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_sends_are_retried_then_visible() {
    let Some(s) = Setup::start(Backend::Sqlite, "retries").await else {
        return;
    };
    let rx = Receiver::start().await;
    rx.script("/flaky", &[500, 500, 200]);
    rx.script("/down/T0K3N", &[503]);
    s.channel("flaky", "slack", json!({ "url": rx.url("/flaky") }))
        .await;
    s.channel("down", "slack", json!({ "url": rx.url("/down/T0K3N") }))
        .await;
    let job = s.failing_job("alarm-retries", "flaky,down").await;
    let run = s.failed_run(job).await;

    let store = s.admin.store.clone();
    let done = settled(store.as_ref(), run, 2).await;
    let by_name: HashMap<&str, &tickwork_store::AlarmDelivery> =
        done.iter().map(|d| (d.channel_name.as_str(), d)).collect();
    let flaky = by_name["flaky"];
    assert_eq!((flaky.state, flaky.attempts), (DeliveryState::Sent, 3));
    let down = by_name["down"];
    assert_eq!((down.state, down.attempts), (DeliveryState::Failed, 3));
    assert!(
        down.last_error.as_deref().unwrap_or("").contains("503"),
        "{down:?}"
    );
    assert_eq!(rx.requests("/flaky").len(), 3);
    assert_eq!(rx.requests("/down/T0K3N").len(), 3);
    assert_eq!(
        store.run_get(run).await.unwrap().alarm_status,
        AlarmStatus::SendFailed
    );

    // Visible through the API, with the last error and without a next attempt.
    let failed = s.deliveries("state=failed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["channel_name"], "down");
    assert_eq!(failed[0]["run_id"], run);
    assert_eq!(failed[0]["attempts"], 3);
    assert!(failed[0]["next_attempt_at"].is_null());
    let error = failed[0]["last_error"].as_str().unwrap();
    assert!(
        error.contains("503") && error.contains("receiver says no"),
        "{error}"
    );
    assert!(
        !error.contains("T0K3N"),
        "errors do not show robot tokens: {error}"
    );
    let page2 = s.deliveries(&format!("run_id={run}&limit=1&page=2")).await;
    assert_eq!(page2.len(), 1);
    let (status, _) = s.api.call("GET", "alarm-deliveries?state=lost", None).await;
    assert_eq!(status, 400);
    let (status, _) = s.api.call("GET", "alarm-deliveries?page=0", None).await;
    assert_eq!(status, 400);
    let (status, body) = s.api.call("GET", "alarm-deliveries?job_id=x", None).await;
    assert_eq!(status, 400, "{body}");
    let job = s.admin.store.run_get(run).await.unwrap().job_id;
    let of_job = s.deliveries(&format!("job_id={job}")).await;
    assert!(!of_job.is_empty() && of_job.iter().all(|d| d["job_id"] == job));
    assert!(
        s.deliveries(&format!("job_id={}", job + 1000))
            .await
            .is_empty()
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_refuses_bad_channels_and_never_shows_secrets() {
    let Some(s) = Setup::start(Backend::Sqlite, "api").await else {
        return;
    };
    let rx = Receiver::start().await;
    let email =
        json!({"host": "smtp.example.com", "from": "tw@example.com", "to": ["ops@example.com"]});
    for (body, want) in [
        (
            json!({"name": "x", "kind": "pager", "config": {}}),
            "is not one of",
        ),
        (
            json!({"name": "x", "kind": "slack", "config": {"url": "not a url"}}),
            "url",
        ),
        (
            json!({"name": "x", "kind": "email", "config": {"from": "tw@example.com", "to": ["o@example.com"]}}),
            "host",
        ),
        (
            json!({"name": "x", "kind": "email", "config": {"host": "h", "from": "tw@example.com", "to": []}}),
            "recipient",
        ),
        (
            json!({"name": "x", "kind": "slack", "config": {"url": "https://h/x", "icon": ":x:"}}),
            "unknown field",
        ),
        (
            json!({"name": "x", "kind": "slack", "config": {"url": "https://h/x"}, "color": 1}),
            "unknown field",
        ),
        (
            json!({"name": "a,b", "kind": "email", "config": email}),
            "name",
        ),
        (
            json!({"name": "x", "kind": "webhook", "config": {"url": "https://h/x"}}),
            "secret",
        ),
    ] {
        let (status, answer) = s
            .api
            .call("POST", "alarm-channels", Some(body.clone()))
            .await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_input");
        let msg = answer["error"]["message"].as_str().unwrap();
        assert!(msg.contains(want), "{body}: {msg}");
    }
    let (_, list) = s.api.call("GET", "alarm-channels", None).await;
    assert_eq!(list, json!([]), "nothing was saved");

    // Secrets and passwords never come back; an update that leaves them out keeps them.
    let hook = s
        .channel(
            "hook",
            "webhook",
            json!({ "url": rx.url("/hook?token=abc"), "secret": "s3cr3t" }),
        )
        .await;
    let mail = s
        .channel(
            "mail",
            "email",
            json!({"host": "127.0.0.1", "port": 2525, "tls": "none", "user": "u",
                   "password": "pw-123", "from": "tw@example.com", "to": ["ops@example.com"]}),
        )
        .await;
    let (_, list) = s.api.call("GET", "alarm-channels", None).await;
    let text = list.to_string();
    for secret in ["s3cr3t", "pw-123", "abc"] {
        assert!(!text.contains(secret), "{secret} shown in {text}");
    }
    let (_, shown) = s
        .api
        .call("GET", &format!("alarm-channels/{hook}"), None)
        .await;
    assert_eq!(shown["config"]["secret_set"], true);
    let (_, shown) = s
        .api
        .call("GET", &format!("alarm-channels/{mail}"), None)
        .await;
    assert_eq!(shown["config"]["password_set"], true);
    assert_eq!(shown["config"]["user"], "u");
    let (status, updated) = s
        .api
        .call(
            "PUT",
            &format!("alarm-channels/{hook}"),
            Some(json!({"name": "hook", "kind": "webhook", "config": {}, "enabled": true})),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["config"]["secret_set"], true);
    let (status, tested) = s
        .api
        .call("POST", &format!("alarm-channels/{hook}/test"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(tested["ok"], true, "{tested}");
    let got = rx.wait_for("/hook", 1, WAIT).await;
    assert_eq!(got[0].json()["event"], "test");
    assert_eq!(query_param(&got[0].query, "token").as_deref(), Some("abc"));
    let ts = &got[0].headers["x-tickwork-timestamp"];
    let expected = hex(&hmac_raw(
        b"s3cr3t",
        format!("{ts}.{}", got[0].body).as_bytes(),
    ));
    assert_eq!(
        got[0].headers["x-tickwork-signature"],
        format!("sha256={expected}")
    );

    // A bad update changes nothing.
    let (status, _) = s
        .api
        .call(
            "PUT",
            &format!("alarm-channels/{hook}"),
            Some(json!({"name": "hook", "kind": "webhook", "config": {"url": "ftp://x"}})),
        )
        .await;
    assert_eq!(status, 400);
    let (_, after) = s
        .api
        .call("GET", &format!("alarm-channels/{hook}"), None)
        .await;
    assert_eq!(after, updated);

    // A test send that fails says why.
    rx.script("/broken", &[500]);
    let broken = s
        .channel("broken", "slack", json!({"url": rx.url("/broken")}))
        .await;
    let (_, tested) = s
        .api
        .call("POST", &format!("alarm-channels/{broken}/test"), None)
        .await;
    assert_eq!(tested["ok"], false);
    assert!(
        tested["error"].as_str().unwrap().contains("500"),
        "{tested}"
    );

    // Jobs may only name channels that exist; a used channel cannot be deleted.
    let (status, answer) = s
        .api
        .call(
            "POST",
            "jobs",
            Some(
                json!({"key": "bad-alarm", "group_id": s.group, "handler": "fail",
                        "alarm_channels": "hook,nope"}),
            ),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"nope\"")
    );
    let (_, jobs) = s.api.call("GET", "jobs", None).await;
    assert_eq!(jobs["total"], 0, "nothing was saved");
    let job = s.failing_job("uses-hook", "hook").await;
    let (status, answer) = s
        .api
        .call("DELETE", &format!("alarm-channels/{hook}"), None)
        .await;
    assert_eq!(status, 409, "{answer}");
    let (status, _) = s.api.call("DELETE", &format!("jobs/{job}"), None).await;
    assert_eq!(status, 200);
    let (status, _) = s
        .api
        .call("DELETE", &format!("alarm-channels/{hook}"), None)
        .await;
    assert_eq!(status, 200);
    let (status, _) = s
        .api
        .call("GET", &format!("alarm-channels/{hook}"), None)
        .await;
    assert_eq!(status, 404);
    s.finish().await;
}

// ---- email through a real SMTP server ----

const SMTP_SERVER: &str = r#"
import os, sys
from aiosmtpd.controller import Controller

class Saver:
    def __init__(self, folder):
        self.folder, self.n = folder, 0

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        path = os.path.join(self.folder, "%d.eml" % self.n)
        with open(path + ".tmp", "wb") as f:
            f.write(envelope.content)
        os.rename(path + ".tmp", path)
        return "250 OK"

controller = Controller(Saver(sys.argv[2]), hostname="127.0.0.1", port=int(sys.argv[1]))
controller.start()
print("ready", flush=True)
sys.stdin.read()
controller.stop()
"#;

/// Python's aiosmtpd, saving each message to a folder; `None` (after a loud banner) when
/// aiosmtpd is not installed outside CI.
async fn smtp_server(folder: &std::path::Path) -> Option<(Process, u16)> {
    let installed = std::process::Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "aiosmtpd is not installed (pip install aiosmtpd)"
        );
        support::report(
            "\n########## SKIP: the email alarm test needs Python's aiosmtpd \
             (pip install aiosmtpd) ##########\n",
        );
        return None;
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().unwrap().port()
    };
    let script = folder.join("smtp_server.py");
    std::fs::write(&script, SMTP_SERVER).unwrap();
    let mail = folder.join("mail");
    std::fs::create_dir(&mail).unwrap();
    let mut command = std::process::Command::new("python3");
    command.arg(&script).arg(port.to_string()).arg(&mail);
    let server = Process::start("aiosmtpd", command);
    server
        .wait_for_line("ready", WAIT, |line| (line == "ready").then_some(()))
        .await;
    Some((server, port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn email_alarms_reach_a_real_smtp_server() {
    let folder = tempfile::tempdir().unwrap();
    let Some((server, port)) = smtp_server(folder.path()).await else {
        return;
    };
    let Some(s) = Setup::start(Backend::Sqlite, "mail").await else {
        return;
    };
    let mail = s
        .channel(
            "ops-mail",
            "email",
            json!({"host": "127.0.0.1", "port": port, "tls": "none",
                   "from": "Tickwork <tickwork@example.com>",
                   "to": ["ops@example.com", "oncall@example.com"]}),
        )
        .await;
    let (_, tested) = s
        .api
        .call("POST", &format!("alarm-channels/{mail}/test"), None)
        .await;
    assert_eq!(tested["ok"], true, "{tested}");

    let job = s.failing_job("alarm-mail", "ops-mail").await;
    let run = s.failed_run(job).await;
    let store = s.admin.store.clone();
    let done = settled(store.as_ref(), run, 1).await;
    assert_eq!(done[0].state, DeliveryState::Sent, "{:?}", done[0]);

    let inbox = folder.path().join("mail");
    let mut messages: Vec<String> = std::fs::read_dir(&inbox)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "eml").then(|| std::fs::read_to_string(p).unwrap())
        })
        .collect();
    messages.sort();
    assert_eq!(messages.len(), 2, "the test message and the alarm");
    let alarm = messages
        .iter()
        .find(|m| m.contains(&format!("run {run} failed")))
        .expect("the alarm mail");
    let executor = s.executor.address();
    for part in [
        "From: Tickwork <tickwork@example.com>".to_owned(),
        "To: ops@example.com, oncall@example.com".to_owned(),
        format!("Subject: Tickwork alarm: job {job} (alarm-mail) run {run} failed"),
        format!("run: {run} attempt 0"),
        format!("executor: {executor}"),
        format!("failure: {FAILURE}"),
    ] {
        assert!(alarm.contains(&part), "{part:?} missing in:\n{alarm}");
    }
    assert!(messages.iter().any(|m| m.contains("[test] Tickwork alarm")));
    drop(server);
    s.finish().await;
}

// ---- several admins ----

/// The webhook channel `hook`, to `rx`'s `/hook`, signed with the secret `k`.
async fn hook_channel(api: &Api, rx: &Receiver) {
    api.post(
        "alarm-channels",
        json!({"name": "hook", "kind": "webhook",
               "config": {"url": rx.url("/hook"), "secret": "k"}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_three_admins_alarm_each_failed_run_once() {
    three_admins(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_three_admins_alarm_each_failed_run_once() {
    three_admins(Backend::MySql).await;
}

async fn three_admins(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let _serial = support::serial().await;
    let mut admins = Vec::new();
    for node in ["alarm-a", "alarm-b", "alarm-c"] {
        admins.push(InProcessAdmin::start(&db, node, ADMIN).await);
    }
    let addresses: Vec<String> = admins.iter().map(|a| a.address.clone()).collect();
    let executor = CountingExecutor::start("many", &addresses, &db.token).await;
    let store = admins[0].store.clone();
    support::registered(store.as_ref(), &executor.address()).await;
    let rx = Receiver::start().await;
    let api = Api::new(&addresses[1]);
    let group = api.group("many").await;
    hook_channel(&api, &rx).await;
    let job = api
        .post(
            "jobs",
            json!({"key": "fails-often", "group_id": group, "handler": "fail",
                   "schedule_type": "FIX_RATE", "schedule_conf": "1",
                   "alarm_channels": "hook", "start": true}),
        )
        .await;
    let job_id = job["id"].as_i64().unwrap();

    // Let it fail a few times on whichever admins claim it, then stop it.
    wait_until("six failed runs", Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            let runs = support::runs_of(&*store, Some(job_id)).await;
            (runs.iter().filter(|r| r.state == RunState::Failed).count() >= 6).then_some(())
        }
    })
    .await;
    api.post(&format!("jobs/{job_id}/stop"), json!({})).await;
    let failed = wait_until(
        "every run final and alarmed",
        Duration::from_secs(60),
        || {
            let store = store.clone();
            async move {
                let runs = support::runs_of(&*store, Some(job_id)).await;
                if runs.iter().any(|r| !r.state.is_final()) {
                    return None;
                }
                let failed: Vec<i64> = runs
                    .iter()
                    .filter(|r| r.state == RunState::Failed)
                    .map(|r| r.id)
                    .collect();
                let sent = store
                    .alarm_deliveries_list(DeliveryFilter {
                        state: Some(DeliveryState::Sent),
                        page: PageReq::first(1000),
                        ..DeliveryFilter::default()
                    })
                    .await
                    .ok()?;
                (sent.total as usize == failed.len()).then_some(failed)
            }
        },
    )
    .await;
    let owners: std::collections::HashSet<String> = support::runs_of(&*store, Some(job_id))
        .await
        .into_iter()
        .filter_map(|r| r.owner_node)
        .collect();

    let mut per_run: HashMap<i64, usize> = HashMap::new();
    for r in rx.requests("/hook") {
        *per_run
            .entry(r.json()["run"]["id"].as_i64().unwrap())
            .or_default() += 1;
    }
    for run in &failed {
        assert_eq!(per_run.get(run), Some(&1), "run {run}: {per_run:?}");
    }
    assert_eq!(per_run.len(), failed.len(), "{per_run:?}");
    support::report(format!(
        "ALARMS {backend:?}: {} failed runs claimed by {} admin(s), one webhook request each",
        failed.len(),
        owners.len()
    ));
    let _ = executor.executor.shutdown_and_wait().await;
    for admin in admins {
        admin.shutdown().await;
    }
    db.drop_database().await;
}

// ---- the sender killed mid-send ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_alarm_sender_killed_mid_send_resends_only_what_it_had_in_flight() {
    sender_killed_mid_send(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_alarm_sender_killed_mid_send_resends_only_what_it_had_in_flight() {
    sender_killed_mid_send(Backend::MySql).await;
}

/// Three admin processes; 40 runs fail at trigger time (their group has no executor) and alarm
/// on one webhook. The receiver holds its answers, so the lease holder's first deliveries stay
/// in flight; it is SIGKILLed there. A survivor takes the lease and delivers the rest at once,
/// and what the dead node had in flight after its claims' hold (`send_timeout * 2 + 5 s`).
async fn sender_killed_mid_send(backend: Backend) {
    let _serial = support::serial().await;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let store = db.store().await;
    let logs = support::log_dir();
    // Claims held `send_timeout * 2 + 5 s`: 9 s.
    let toml = ADMIN.replace("send_timeout_ms = 5000", "send_timeout_ms = 2000");
    let mut admins = Vec::new();
    for node in ["alarm-a", "alarm-b", "alarm-c"] {
        admins.push(Child::admin(&logs, node, &db, &toml).await);
    }
    let rx = Receiver::start().await;
    rx.hold("/hook");
    let api = Api::new(&admins[0].address);
    let group = api.group("nobody-home").await;
    hook_channel(&api, &rx).await;
    let runs_n = 40;
    let mut runs = std::collections::HashSet::new();
    for i in 0..runs_n {
        let job = api
            .post(
                "jobs",
                json!({"key": format!("unreachable-{i}"), "group_id": group,
                       "handler": "h", "alarm_channels": "hook"}),
            )
            .await;
        let id = job["id"].as_i64().expect("job id");
        let run = api.post(&format!("jobs/{id}/trigger"), json!({})).await;
        runs.insert(run["id"].as_i64().expect("run id"));
    }

    // The lease holder's first deliveries reach the receiver and wait for their answers.
    let first = rx.wait_for("/hook", 1, WAIT).await;
    let sender = first[0].json()["admin_node"]
        .as_str()
        .expect("admin_node")
        .to_owned();
    let victim = admins
        .iter()
        .position(|a| a.name == sender)
        .expect("the sender is one of the admins");
    admins[victim].kill().await;
    rx.release("/hook");

    // Every delivery ends sent.
    let sent = wait_until("every delivery sent", Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            let sent = store
                .alarm_deliveries_list(DeliveryFilter {
                    state: Some(DeliveryState::Sent),
                    page: PageReq::first(1000),
                    ..DeliveryFilter::default()
                })
                .await
                .ok()?;
            (sent.total as usize == runs_n).then_some(sent.total)
        }
    })
    .await;

    let requests = rx.requests("/hook");
    let in_flight: Vec<_> = requests.iter().filter(|r| r.held).collect();
    for r in &in_flight {
        assert_eq!(
            r.json()["admin_node"],
            sender.as_str(),
            "held, but not the sender's"
        );
    }
    assert!(
        in_flight.len() <= 32,
        "more in flight than one claim's batch: {}",
        in_flight.len()
    );
    // Per delivery: its run, how often it came in flight, how often it was answered.
    let mut per_delivery: HashMap<i64, (i64, usize, usize)> = HashMap::new();
    for r in &requests {
        let body = r.json();
        let id = body["delivery_id"].as_i64().expect("delivery_id");
        assert_eq!(
            r.headers.get("x-tickwork-delivery"),
            Some(&id.to_string()),
            "the header names the delivery of the body"
        );
        let run = body["run"]["id"].as_i64().expect("run id");
        let entry = per_delivery.entry(id).or_insert((run, 0, 0));
        assert_eq!(entry.0, run, "delivery {id} carried two runs");
        if r.held {
            entry.1 += 1;
        } else {
            entry.2 += 1;
        }
    }
    let alarmed: std::collections::HashSet<i64> = per_delivery.values().map(|v| v.0).collect();
    assert_eq!(alarmed, runs, "every failed run alarmed");
    for (id, (run, held, answered)) in &per_delivery {
        assert_eq!(
            *answered, 1,
            "delivery {id} (run {run}) answered {answered} times ({held} in flight at the kill)"
        );
        assert!(
            *held <= 1,
            "delivery {id} (run {run}) in flight {held} times"
        );
    }
    support::report(format!(
        "ALARMS-KILL {backend:?}: {runs_n} failed runs, {sent} deliveries sent, {} in flight on \
         {sender} when killed and sent again by a survivor under the same delivery id, 0 \
         answered twice",
        in_flight.len()
    ));
    drop(admins);
    store.close().await;
    db.drop_database().await;
}
