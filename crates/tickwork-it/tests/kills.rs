//! Kills: a killed run ends `killed`, with no retry and no alarm, whichever reaches the admin
//! first: the kill's answer or the executor's report of the killed run (code 500).

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::{Value, json};
use tickwork_it::{AdminSettings, Api, Cluster, WAIT, e2e, wait_until};

e2e!(kill_reported_as_failure_before_its_answer_ends_killed_without_retry_or_alarm);

/// Stands between the admin and an executor and forwards everything, but holds the
/// executor's answer to `/kill` until the admin has recorded the run as ended. The executor's
/// failure report of the killed run then always arrives first: the race that ended kills as
/// `failed`, with a retry and an alarm.
#[derive(Clone)]
struct KillHold {
    executor: String,
    api: Api,
    http: reqwest::Client,
    /// The run being killed.
    run: Arc<Mutex<Option<i64>>>,
    /// The run's state when the held answer was let go.
    state_at_release: Arc<Mutex<Option<String>>>,
}

impl KillHold {
    async fn start(executor: &str, api: Api) -> (String, KillHold) {
        let hold = KillHold {
            executor: executor.trim_end_matches('/').to_owned(),
            api,
            http: reqwest::Client::new(),
            run: Arc::default(),
            state_at_release: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let address = format!("http://{}/", listener.local_addr().expect("address"));
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(hold.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (address, hold)
    }
}

async fn forward(
    State(p): State<KillHold>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Bytes) {
    let mut req = p.http.post(format!("{}{}", p.executor, uri.path()));
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            req = req.header(name, value);
        }
    }
    let resp = req.body(body).send().await.expect("the executor answers");
    let status = StatusCode::from_u16(resp.status().as_u16()).expect("status");
    let answer = resp.bytes().await.expect("the executor's answer");
    if uri.path() == "/kill" {
        let run = p
            .run
            .lock()
            .unwrap()
            .expect("the run being killed is known");
        let state = wait_until("the executor's report of the killed run", WAIT, || async {
            let r = p.api.run(run).await;
            r.is_final().then_some(r.state)
        })
        .await;
        *p.state_at_release.lock().unwrap() = Some(state);
    }
    (status, answer)
}

/// The alarm deliveries of one run.
async fn deliveries(api: &Api, run_id: i64) -> Vec<Value> {
    let page = api.get(&format!("/alarm-deliveries?run_id={run_id}")).await;
    page["items"].as_array().cloned().unwrap_or_default()
}

async fn kill_reported_as_failure_before_its_answer_ends_killed_without_retry_or_alarm(
    mut c: Cluster,
) {
    // The held `/kill` answer must not time out on a loaded machine.
    c.settings = AdminSettings {
        extra_toml: "[dispatch]\nexecutor_timeout_ms = 30000\n",
        ..AdminSettings::default()
    };
    let api = c.start_admin().await;
    let executor = c.start_executor("kill-app").await;
    let (proxy, hold) = KillHold::start(&executor.address, api.clone()).await;
    let group = api
        .post(
            "/groups",
            json!({
                "app_name": "kill-app", "title": "kills", "address_mode": "manual",
                "addresses": [proxy],
            }),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    // Nobody listens there: deliveries are written all the same, which is what is checked.
    api.post(
        "/alarm-channels",
        json!({ "name": "ops", "kind": "slack", "config": { "url": "http://127.0.0.1:9/hook" } }),
    )
    .await;
    let long = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "glue_type": "GLUE_SHELL",
            "glue_source": "#!/bin/sh\necho started\nsleep 600\n",
            "retry_count": 3, "retry_backoff_ms": 0, "alarm_channels": "ops",
        }))
        .await["id"]
        .as_i64()
        .unwrap();
    let run = api.trigger(long, None, None).await;
    api.wait_dispatched(run.id).await;
    wait_until("the script to start", WAIT, || async {
        let log = api.get(&format!("/runs/{}/log?from_line=1", run.id)).await;
        log["content"]
            .as_str()
            .unwrap_or("")
            .contains("started")
            .then_some(())
    })
    .await;

    *hold.run.lock().unwrap() = Some(run.id);
    let killed = api.post(&format!("/runs/{}/kill", run.id), json!({})).await;
    assert_eq!(killed["state"], "killed", "{killed}");
    assert_eq!(
        hold.state_at_release.lock().unwrap().as_deref(),
        Some("killed"),
        "the executor's report came first and was recorded as the kill"
    );

    // A failing run with the same channel, after the kill: once its alarm is written, the
    // alarm monitor has looked at the killed run too (it queues runs by id).
    let failing = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "glue_type": "GLUE_SHELL",
            "glue_source": "#!/bin/sh\nexit 3\n", "alarm_channels": "ops",
        }))
        .await["id"]
        .as_i64()
        .unwrap();
    let failed = api.trigger(failing, None, None).await;
    assert_eq!(api.wait_final(failed.id).await.state, "failed");
    wait_until("the failed run's alarm delivery", WAIT, || async {
        (!deliveries(&api, failed.id).await.is_empty()).then_some(())
    })
    .await;

    let runs = api.runs(long).await;
    assert_eq!(runs.len(), 1, "a killed run is not retried: {runs:#?}");
    assert_eq!(runs[0].state, "killed", "{runs:#?}");
    let alarms = deliveries(&api, run.id).await;
    assert!(alarms.is_empty(), "a kill raises no alarm: {alarms:#?}");
}
