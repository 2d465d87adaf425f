//! The REST API and the console driven through `service_router(service)` one request at a
//! time: a fresh SQLite database, a pipeline handle that records what the service asks of it,
//! no TCP and no timers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tickwork_protocol::api::LatenessView;
use tickwork_store::{Run, RunComplete, Store};
use tower_service::Service as _;

use crate::config::ConfigFile;
use crate::{Auth, Error, PipelineHandle, Service};

const TOKEN: &str = "oneshot-builtin-api-token-0123456789";

/// What the service asked of the pipeline, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Wake,
    Arm(i64),
    ForgetJob(i64),
    ForgetGroup(i64),
    Complete(i64),
}

#[derive(Default)]
struct Recording {
    calls: Mutex<Vec<Call>>,
}

impl Recording {
    fn take(&self) -> Vec<Call> {
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

struct Harness {
    router: axum::Router,
    pipeline: Arc<Recording>,
    store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ConfigFile {
            database_url: Some(format!(
                "sqlite://{}?mode=rwc",
                dir.path().join("oneshot.db").display()
            )),
            access_token: Some("oneshot-executor-access-token".into()),
            api_token: Some(TOKEN.into()),
            ..ConfigFile::default()
        };
        file.auth.admin_password = Some("oneshot-admin-password".into());
        let config = file.into_config().unwrap();
        let store = tickwork_store::connect(&config.database_url, &Default::default())
            .await
            .unwrap();
        let auth = Arc::new(Auth::new(
            store.clone(),
            config.auth.clone(),
            &config.api_token,
        ));
        let pipeline = Arc::new(Recording::default());
        let service = Service::new(config, store.clone(), auth, pipeline.clone());
        Harness {
            router: super::service_router(service),
            pipeline,
            store,
            _dir: dir,
        }
    }

    /// One request; the answer's status, `Location` and body (JSON, else `Null`).
    async fn send(&mut self, method: Method, uri: &str, body: Option<Value>) -> Answer {
        let mut req = Request::builder().method(method).uri(uri);
        if uri.starts_with("/openapi/v1") {
            req = req.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        }
        let body = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        let mut req = req.body(body).unwrap();
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        req.extensions_mut().insert(ConnectInfo(peer));
        let resp = self.router.call(req).await.unwrap();
        let status = resp.status();
        let location = resp
            .headers()
            .get(header::LOCATION)
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        Answer {
            status,
            location,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    async fn group(&mut self) -> i64 {
        let a = self
            .send(
                Method::POST,
                "/openapi/v1/groups",
                Some(json!({ "app_name": "oneshot", "title": "oneshot" })),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        a.json["id"].as_i64().unwrap()
    }
}

struct Answer {
    status: StatusCode,
    location: Option<String>,
    text: String,
    json: Value,
}

fn job(group: i64, cron: &str) -> Value {
    json!({
        "group_id": group, "description": "oneshot", "schedule_type": "CRON",
        "schedule_conf": cron, "handler": "demo",
    })
}

#[tokio::test]
async fn rest_changes_reach_the_pipeline_only_through_its_handle() {
    let mut h = Harness::new().await;
    let group = h.group().await;
    assert_eq!(
        h.pipeline.take(),
        [],
        "creating a group asks nothing of the pipeline"
    );

    let created = h
        .send(
            Method::POST,
            "/openapi/v1/jobs",
            Some(job(group, "0 0 3 * * ?")),
        )
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text);
    let job_id = created.json["id"].as_i64().unwrap();
    assert_eq!(
        h.pipeline.take(),
        [Call::Wake],
        "a new job wakes the claim loop"
    );

    let edited = h
        .send(
            Method::PUT,
            &format!("/openapi/v1/jobs/{job_id}"),
            Some(job(group, "0 0 4 * * ?")),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    assert_eq!(h.pipeline.take(), [Call::ForgetJob(job_id), Call::Wake]);

    let triggered = h
        .send(
            Method::POST,
            &format!("/openapi/v1/jobs/{job_id}/trigger"),
            None,
        )
        .await;
    assert_eq!(triggered.status, StatusCode::OK, "{}", triggered.text);
    let run_id = triggered.json["id"].as_i64().unwrap();
    assert_eq!(
        h.pipeline.take(),
        [Call::Arm(run_id)],
        "the trigger's run is armed"
    );
    let run = h.store.run_get(run_id).await.unwrap();
    assert_eq!(run.state, tickwork_core::run::RunState::Planned);

    let renamed = h
        .send(
            Method::PUT,
            &format!("/openapi/v1/groups/{group}"),
            Some(json!({ "app_name": "oneshot", "title": "renamed" })),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.text);
    assert_eq!(h.pipeline.take(), [Call::ForgetGroup(group)]);
}

#[tokio::test]
async fn bad_job_input_changes_nothing_and_asks_nothing_of_the_pipeline() {
    let mut h = Harness::new().await;
    let group = h.group().await;
    let refused = h
        .send(
            Method::POST,
            "/openapi/v1/jobs",
            Some(job(group, "not a cron")),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.json["code"], "invalid_input");
    assert_eq!(refused.json["field"], "schedule_conf");
    assert_eq!(h.pipeline.take(), []);
    let jobs = h.send(Method::GET, "/openapi/v1/jobs", None).await;
    assert_eq!(jobs.json["total"], 0, "nothing was saved: {}", jobs.text);
}

#[tokio::test]
async fn console_answers_without_a_server() {
    let mut h = Harness::new().await;
    let login = h.send(Method::GET, "/login", None).await;
    assert_eq!(login.status, StatusCode::OK);
    assert!(login.text.contains("<form"), "{}", login.text);
    let home = h.send(Method::GET, "/", None).await;
    assert!(home.status.is_redirection(), "{}", home.status);
    assert!(
        home.location.as_deref().unwrap_or("").starts_with("/login"),
        "{:?}",
        home.location
    );
    assert_eq!(h.pipeline.take(), []);
}
