//! XXL-JOB 3.5, end to end against an admin on SQLite: a 3.5 executor (app name and token on
//! every call, `/trigger`, wrapped callbacks, `logDateTime`) registers, runs, logs, is killed
//! and fires on schedule; registrations and callbacks whose token is not their app's are
//! refused; 3.5's job API (`/api/addJob`, ...) manages the jobs of its group only, refuses bad
//! calls with XXL-JOB's messages and changes nothing then, and limits calls as 3.5 does.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::xxl35::Xxl35Executor;
use support::{Api, Backend, InProcessAdmin, TestDb};
use tickwork_testkit::wait_until;

const WAIT: Duration = Duration::from_secs(60);

async fn job(api: &Api, body: Value) -> i64 {
    api.post("jobs", body).await["id"].as_i64().expect("job id")
}

/// Every job as the list shows it, without its last run: the manual run triggered above
/// fails (no executor) and its retries move on while the refused calls are made.
async fn definitions(api: &Api) -> Vec<Value> {
    let (_, page) = api.call("GET", "jobs", None).await;
    let mut items = page["items"].as_array().expect("job items").clone();
    for item in &mut items {
        item.as_object_mut().expect("a job").remove("last_run");
    }
    items
}

async fn own_token(api: &Api, group: i64) -> String {
    api.post(&format!("groups/{group}/token"), json!({})).await["token"]
        .as_str()
        .expect("token")
        .to_owned()
}

/// A caller of the admin's `/api/*` with XXL-JOB 3.5's two headers (either may be left out).
struct Caller {
    base: String,
    token: Option<String>,
    app: Option<String>,
    http: reqwest::Client,
}

impl Caller {
    fn new(base: &str, token: Option<&str>, app: Option<&str>) -> Caller {
        Caller {
            base: base.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
            app: app.map(str::to_owned),
            http: reqwest::Client::new(),
        }
    }

    /// `POST <base><path>` with `body` as it is: the envelope answered.
    async fn raw(&self, method: reqwest::Method, path: &str, body: &str) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Content-Type", "application/json")
            .body(body.to_owned());
        if let Some(t) = &self.token {
            req = req.header("XXL-JOB-ACCESS-TOKEN", t);
        }
        if let Some(a) = &self.app {
            req = req.header("XXL-JOB-APPNAME", a);
        }
        let resp = req.send().await.expect("admin answers");
        assert_eq!(resp.status(), 200, "XXL-JOB's API always answers HTTP 200");
        resp.json().await.expect("an envelope")
    }

    async fn post(&self, call: &str, body: Value) -> Value {
        self.raw(
            reqwest::Method::POST,
            &format!("/api/{call}"),
            &body.to_string(),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_xxl_job_3_5_executor_registers_runs_logs_is_killed_and_fires_on_schedule() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "node-35", "").await;
    let api = Api::new(&admin.address);
    let group = api.group("app35").await;
    let token = own_token(&api, group).await;
    let executor = Xxl35Executor::start("app35", &admin.address, &token).await;
    wait_until("the 3.5 executor to register", WAIT, || async {
        let (_, list) = api
            .call("GET", &format!("groups/{group}/instances"), None)
            .await;
        let list = list.as_array()?.clone();
        list.iter()
            .any(|i| i["address"] == executor.address.as_str())
            .then_some(())
    })
    .await;

    // Sent to /run first, which a 3.5 executor does not know (so ran nothing), then /trigger.
    let demo = job(&api, json!({ "group_id": group, "handler": "demo" })).await;
    let run = api.trigger(demo).await;
    let done = api.run_reaches(run, "succeeded").await;
    assert_eq!(done["handle_msg"], "demo ok", "{done}");
    assert!(executor.ran(run));
    // This executor posts its result before it answers `/trigger`, so the result can be
    // written a moment before the dispatch record, which names the executor the log is read
    // from.
    wait_until("the run's dispatch record", WAIT, || async {
        let r = api.run(run).await;
        r["executor_address"].is_string().then_some(())
    })
    .await;
    let (status, log) = api.call("GET", &format!("runs/{run}/log"), None).await;
    assert_eq!(status, 200, "{log}");
    assert!(
        log["content"].as_str().unwrap_or("").contains("ran on 3.5"),
        "the log was not asked for with its logDateTime: {log}"
    );

    let hold = job(&api, json!({ "group_id": group, "handler": "hold" })).await;
    let long = api.trigger(hold).await;
    api.run_reaches(long, "dispatched").await;
    let (status, killed) = api.call("POST", &format!("runs/{long}/kill"), None).await;
    assert_eq!(status, 200, "{killed}");
    assert_eq!(killed["state"], "killed");

    // On schedule: the path it answered on is kept, so no more /run.
    let cron = job(
        &api,
        json!({ "group_id": group, "handler": "demo", "schedule_type": "CRON",
                "schedule_conf": "* * * * * ?", "start": true }),
    )
    .await;
    wait_until("two scheduled runs to succeed", WAIT, || async {
        let (_, page) = api
            .call("GET", &format!("runs?job_id={cron}&state=succeeded"), None)
            .await;
        (page["items"].as_array()?.len() >= 2).then_some(())
    })
    .await;
    api.stop_jobs([cron]).await;

    let calls = executor.calls();
    assert!(
        calls.iter().all(|c| c.authorised),
        "every call carries the group's token and app name: {calls:?}"
    );
    let count = |p: &str| calls.iter().filter(|c| c.path == p).count();
    assert_eq!(count("/run"), 1, "{calls:?}");
    assert!(count("/trigger") >= 4, "{calls:?}");
    assert!(count("/log") >= 1 && count("/kill") >= 1, "{calls:?}");
    let answers = executor.registry_answers();
    assert!(answers.iter().all(|a| a["code"] == 200), "{answers:?}");
    drop(executor);
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_whose_token_is_not_their_named_apps_are_refused() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "node-35-refuse", "").await;
    let api = Api::new(&admin.address);
    let own = api.group("owned35").await;
    let token = own_token(&api, own).await;
    let open = api.group("open35").await;
    let registration = |app: &str, address: &str| json!({ "registryGroup": "EXECUTOR", "registryKey": app, "registryValue": address });

    // The global token names a group that has its own: refused, as 3.5 refuses it.
    let global = Caller::new(&admin.address, Some(&db.token), Some("owned35"));
    let answer = global
        .post("registry", registration("owned35", "http://127.0.0.1:1/"))
        .await;
    assert_eq!(answer["code"], 500);
    assert_eq!(
        answer["msg"],
        "invalid request, accessToken or appname invalid."
    );
    // The group's token, naming another app in the header than in the body.
    let mixed = Caller::new(&admin.address, Some(&token), Some("owned35"));
    let answer = mixed
        .post("registry", registration("open35", "http://127.0.0.1:2/"))
        .await;
    assert_eq!(answer["code"], 500);
    assert!(
        answer["msg"].as_str().unwrap_or("").contains("registryKey"),
        "{answer}"
    );
    // The group's token naming the open group (whose executors use the global token).
    let borrowed = Caller::new(&admin.address, Some(&token), Some("open35"));
    let answer = borrowed
        .post("registry", registration("open35", "http://127.0.0.1:3/"))
        .await;
    assert_eq!(
        answer["msg"],
        "invalid request, accessToken or appname invalid."
    );
    for group in [own, open] {
        let (_, list) = api
            .call("GET", &format!("groups/{group}/instances"), None)
            .await;
        assert_eq!(list, json!([]), "nothing was registered in group {group}");
    }
    // Right: the global token for the open group, the own token for its own group.
    let answer = Caller::new(&admin.address, Some(&db.token), Some("open35"))
        .post("registry", registration("open35", "http://127.0.0.1:4/"))
        .await;
    assert_eq!(answer["code"], 200, "{answer}");
    let answer = mixed
        .post("registry", registration("owned35", "http://127.0.0.1:5/"))
        .await;
    assert_eq!(answer["code"], 200, "{answer}");

    // A wrapped callback from the wrong app changes no run.
    let j = job(&api, json!({ "group_id": own, "handler": "demo" })).await;
    let run = api.trigger(j).await;
    let before = api.run(run).await;
    let answer = borrowed
        .post(
            "callback",
            json!({ "callbackList": [{ "logId": run, "logDateTime": 1, "handleCode": 200 }] }),
        )
        .await;
    assert_eq!(answer["code"], 500, "{answer}");
    assert_eq!(api.run(run).await["handle_code"], before["handle_code"]);
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_3_5_job_api_manages_the_jobs_of_its_group_only() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "node-35-jobs", "").await;
    let api = Api::new(&admin.address);
    let group = api.group("jobs35").await;
    let token = own_token(&api, group).await;
    let other = api.group("other35").await;
    let theirs = job(&api, json!({ "group_id": other, "handler": "keep" })).await;
    let xxl = Caller::new(&admin.address, Some(&token), Some("jobs35"));

    let added = xxl
        .post(
            "addJob",
            json!({ "jobGroup": group, "name": "nightly report", "author": "ops",
                    "alarmEmail": "", "scheduleType": "CRON",
                    "scheduleConf": "0 0 1 * * ?", "misfireStrategy": "FIRE_ONCE_NOW",
                    "executorRouteStrategy": "ROUND", "executorHandler": "report",
                    "executorParam": "daily", "executorBlockStrategy": "DISCARD_LATER",
                    "executorTimeout": 30, "executorFailRetryCount": 2, "glueType": "BEAN" }),
        )
        .await;
    assert_eq!(added["code"], 200, "{added}");
    let id: i64 = added["data"]
        .as_str()
        .expect("the new id, as text")
        .parse()
        .expect("an id");
    let (_, j) = api.call("GET", &format!("jobs/{id}"), None).await;
    for (field, want) in [
        ("group_id", json!(group)),
        ("description", json!("nightly report")),
        ("owner", json!("ops")),
        ("schedule_type", json!("CRON")),
        ("misfire_strategy", json!("FIRE_ONCE_NOW")),
        ("route_strategy", json!("ROUND")),
        ("handler", json!("report")),
        ("params", json!("daily")),
        ("block_strategy", json!("DISCARD_LATER")),
        ("timeout_s", json!(30)),
        ("retry_count", json!(2)),
        ("status", json!("stopped")),
    ] {
        assert_eq!(j[field], want, "{field} of {j}");
    }

    let updated = xxl
        .post(
            "updateJob",
            json!({ "id": id, "name": "hourly report", "author": "ops",
                    "scheduleType": "FIX_RATE", "scheduleConf": "3600",
                    "executorHandler": "report" }),
        )
        .await;
    assert_eq!(updated["code"], 200, "{updated}");
    let (_, j) = api.call("GET", &format!("jobs/{id}"), None).await;
    assert_eq!(
        (&j["description"], &j["schedule_type"]),
        (&json!("hourly report"), &json!("FIX_RATE"))
    );
    assert_eq!(xxl.post("startJob", json!({ "id": id })).await["code"], 200);
    let (_, j) = api.call("GET", &format!("jobs/{id}"), None).await;
    assert_eq!(j["status"], "running", "{j}");
    assert_eq!(xxl.post("stopJob", json!({ "id": id })).await["code"], 200);
    let fired = xxl
        .post("triggerJob", json!({ "id": id, "executorParam": "once" }))
        .await;
    assert_eq!(fired["code"], 200, "{fired}");
    let (_, runs) = api.call("GET", &format!("runs?job_id={id}"), None).await;
    let manual = &runs["items"][0];
    assert_eq!(
        (&manual["trigger_type"], &manual["params"]),
        (&json!("API"), &json!("once")),
        "{runs}"
    );
    // The legacy context path serves the same API.
    let legacy = xxl
        .raw(
            reqwest::Method::POST,
            "/xxl-job-admin/api/stopJob",
            &json!({ "id": id }).to_string(),
        )
        .await;
    assert_eq!(legacy["code"], 200, "{legacy}");

    // Refused, with XXL-JOB's messages, and nothing changed.
    let before = definitions(&api).await;
    let refusals = [
        (
            Caller::new(&admin.address, Some(&token), None)
                .post("removeJob", json!({ "id": id }))
                .await,
            "invalid request, accessToken or appname is empty.",
        ),
        (
            Caller::new(&admin.address, Some("not-the-token"), Some("jobs35"))
                .post("removeJob", json!({ "id": id }))
                .await,
            "invalid request, accessToken or appname invalid.",
        ),
        (
            Caller::new(&admin.address, Some(&token), Some("no-such-app"))
                .post("removeJob", json!({ "id": id }))
                .await,
            "invalid request, accessToken or appname invalid.",
        ),
        (
            xxl.raw(reqwest::Method::GET, "/api/removeJob", "").await,
            "invalid request, HttpMethod not support.",
        ),
        (
            xxl.raw(reqwest::Method::POST, "/api/removeJob", " ").await,
            "invalid request, requestBody empty.",
        ),
    ];
    for (answer, msg) in refusals {
        assert_eq!(answer["code"], 500, "{answer}");
        assert_eq!(answer["msg"], msg, "{answer}");
    }
    for (call, body, names) in [
        ("removeJob", json!({ "id": theirs }), "may not change"),
        ("stopJob", json!({ "id": theirs }), "may not change"),
        (
            "addJob",
            json!({ "jobGroup": other, "name": "x", "executorHandler": "x" }),
            "may not change",
        ),
        (
            "updateJob",
            json!({ "id": id, "scheduleType": "SOMETIMES" }),
            "scheduleType",
        ),
        (
            "addJob",
            json!({ "jobGroup": group, "scheduleType": "CRON", "scheduleConf": "not cron" }),
            "schedule",
        ),
        (
            "triggerJob",
            json!({ "id": id, "addressList": "http://a:1/,http://b:2/" }),
            "addressList",
        ),
        ("startJob", json!({ "id": 987_654 }), "not found"),
        // alarmEmail names alarm channels here, not addresses.
        (
            "updateJob",
            json!({ "id": id, "alarmEmail": "ops@example.com", "scheduleType": "FIX_RATE",
                    "scheduleConf": "3600", "executorHandler": "report" }),
            "alarm channel",
        ),
    ] {
        let answer = xxl.post(call, body).await;
        assert_eq!(answer["code"], 500, "{call}: {answer}");
        assert!(
            answer["msg"].as_str().unwrap_or("").contains(names),
            "{call}: {answer}"
        );
    }
    assert_eq!(
        before,
        definitions(&api).await,
        "a refused call changed a job"
    );

    let (_, audit) = api.call("GET", "audit", None).await;
    let by_app = audit["items"]
        .as_array()
        .expect("audit items")
        .iter()
        .filter(|r| r["actor"] == "app:jobs35")
        .count();
    assert!(by_app >= 5, "each change is audited as the app: {audit}");

    assert_eq!(
        xxl.post("removeJob", json!({ "id": id })).await["code"],
        200
    );
    let (status, _) = api.call("GET", &format!("jobs/{id}"), None).await;
    assert_eq!(status, 404);
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_3_5_job_api_answers_too_many_requests_past_its_budget_per_group() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "node-35-limit", "").await;
    let api = Api::new(&admin.address);
    let busy = api.group("busy35").await;
    let quiet = api.group("quiet35").await;
    let busy_job = job(&api, json!({ "group_id": busy, "handler": "x" })).await;
    let quiet_job = job(&api, json!({ "group_id": quiet, "handler": "x" })).await;
    // Groups without a token of their own: the global token stands for them.
    let caller = Caller::new(&admin.address, Some(&db.token), Some("busy35"));
    let caller = std::sync::Arc::new(caller);

    let started = Instant::now();
    let calls: Vec<_> = (0..110)
        .map(|_| {
            let caller = caller.clone();
            tokio::spawn(async move { caller.post("stopJob", json!({ "id": busy_job })).await })
        })
        .collect();
    let mut answers = Vec::new();
    for c in calls {
        answers.push(c.await.expect("call"));
    }
    let elapsed_ms = started.elapsed().as_millis() as usize;
    let limited: Vec<&Value> = answers.iter().filter(|a| a["code"] == 502).collect();
    assert!(!limited.is_empty(), "110 calls at once, none limited");
    for a in &limited {
        assert_eq!(a["msg"], "Too many requests, please try again later.");
    }
    let served = answers.len() - limited.len();
    // 100 at once, then one every 300 ms (waiting up to a second each).
    assert!(
        served <= 100 + elapsed_ms / 300 + 1,
        "{served} served in {elapsed_ms} ms"
    );
    assert!(answers.iter().all(|a| a["code"] == 200 || a["code"] == 502));

    // Another group's budget is its own.
    let answer = Caller::new(&admin.address, Some(&db.token), Some("quiet35"))
        .post("stopJob", json!({ "id": quiet_job }))
        .await;
    assert_eq!(answer["code"], 200, "{answer}");
    admin.shutdown().await;
}
