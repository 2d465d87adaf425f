//! The admin's HTTP server: the executor API (`/api/*` and `/xxl-job-admin/api/*`, XXL-JOB's
//! envelope, always HTTP 200), the JSON API under `/openapi/v1` (bearer token), health
//! (`/healthz`, `/readyz`) and Prometheus metrics (`/metrics`).
//!
//! [`ApiError`] is the one place where errors become HTTP answers: clients get a stable code
//! and a message; database and other internal causes are logged, never sent.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tickwork_core::{ScheduleType, TriggerType};
use tickwork_protocol::{ACCESS_TOKEN_HEADER, Envelope, HandleCallbackParam, RegistryParam, msg};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::error;

use crate::{Admin, Error};
use tickwork_protocol::api::{GroupInput, JobInput, JobQuery, RunQuery, TriggerInput};

/// Largest body of an executor call (XXL-JOB's executor limit as well).
const EXECUTOR_BODY_LIMIT: usize = 5 * 1024 * 1024;
/// Largest body of a JSON API call: a job with a 1 MiB script fits.
const API_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Serves the admin on `listener` until `stop` is cancelled.
pub async fn serve(
    admin: Admin,
    listener: TcpListener,
    stop: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(admin))
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}

/// Every route of the admin.
pub fn router(admin: Admin) -> Router {
    let api = Router::new()
        .route("/groups", get(groups_list).post(group_create))
        .route(
            "/groups/{id}",
            get(group_get).put(group_update).delete(group_delete),
        )
        .route("/jobs", get(jobs_list).post(job_create))
        .route(
            "/jobs/{id}",
            get(job_get).put(job_update).delete(job_delete),
        )
        .route("/jobs/{id}/start", post(job_start))
        .route("/jobs/{id}/stop", post(job_stop))
        .route("/jobs/{id}/trigger", post(job_trigger))
        .route("/runs", get(runs_list))
        .route("/runs/{id}", get(run_get))
        .route("/runs/{id}/kill", post(run_kill))
        .route("/runs/{id}/log", get(run_log))
        .route("/schedule/preview", post(schedule_preview))
        .fallback(api_not_found)
        .route_layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            require_api_token,
        ));
    Router::new()
        .route("/api/{method}", any(executor_api))
        .route("/xxl-job-admin/api/{method}", any(executor_api))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .nest("/openapi/v1", api)
        .with_state(admin)
}

// ---- errors ----

/// An error as the JSON API answers it: `{"error":{"code":"…","message":"…"}}`.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = match &self.0 {
            Error::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_input"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Error::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Error::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            Error::Executor(_) => (StatusCode::BAD_GATEWAY, "executor_error"),
            Error::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Error::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        let message = match &self.0 {
            Error::Store(inner) => {
                error!(error = ?inner, "database error");
                "internal error; see the admin's log".to_owned()
            }
            other => other.to_string(),
        };
        let body = serde_json::json!({ "error": { "code": code, "message": message } });
        (status, axum::Json(body)).into_response()
    }
}

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

fn ok<T>(v: T) -> ApiResult<T> {
    Ok(axum::Json(v))
}

/// Reads a request body, refusing one over the limit with a clear message.
async fn read(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, API_BODY_LIMIT)
        .await
        .map_err(|_| {
            Error::Invalid(format!(
                "request body is larger than {API_BODY_LIMIT} bytes"
            ))
            .into()
        })
}

/// Reads a JSON body with our own error message (unknown fields, wrong types, syntax).
async fn json<T: DeserializeOwned>(body: Body) -> Result<T, ApiError> {
    let body = read(body).await?;
    serde_json::from_slice(&body).map_err(|e| Error::Invalid(format!("invalid json: {e}")).into())
}

/// Reads query parameters with our own error message.
fn query<T: DeserializeOwned>(q: Option<&str>) -> Result<T, ApiError> {
    serde_urlencoded_like(q.unwrap_or("")).map_err(ApiError)
}

fn serde_urlencoded_like<T: DeserializeOwned>(q: &str) -> Result<T, Error> {
    Query::<T>::try_from_uri(
        &format!("/?{q}")
            .parse()
            .map_err(|_| Error::Invalid("invalid query string".into()))?,
    )
    .map(|Query(v)| v)
    .map_err(|e| Error::Invalid(format!("invalid query: {}", e.body_text())))
}

async fn require_api_token(
    State(admin): State<Admin>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if given != Some(admin.config().api_token.as_str()) {
        return ApiError(Error::Unauthorized("the API token is wrong".into())).into_response();
    }
    next.run(req).await
}

async fn api_not_found() -> ApiError {
    ApiError(Error::NotFound("no such endpoint".into()))
}

// ---- executor API ----

/// One handler for every executor call, so that the checks run in XXL-JOB's order: method,
/// uri, token, body.
async fn executor_api(
    State(admin): State<Admin>,
    method: Method,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let env = executor_call(&admin, &method, &name, &headers, body).await;
    let bytes = tickwork_protocol::encode(&env);
    (
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        bytes,
    )
        .into_response()
}

async fn executor_call(
    admin: &Admin,
    method: &Method,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Envelope {
    if method != Method::POST {
        return Envelope::fail(msg::METHOD_NOT_SUPPORTED);
    }
    if !matches!(name, "registry" | "registryRemove" | "callback") {
        return Envelope::fail(msg::uri_not_found(&format!("/api/{name}")));
    }
    let token = headers
        .get(ACCESS_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let expected = &admin.config().access_token;
    if !expected.is_empty() && token != expected {
        return Envelope::fail(msg::WRONG_TOKEN);
    }
    let body = match axum::body::to_bytes(body, EXECUTOR_BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            return Envelope::fail(format!(
                "invalid request, body larger than {EXECUTOR_BODY_LIMIT} bytes"
            ));
        }
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Envelope::fail(msg::BODY_EMPTY);
    }
    let result = match name {
        "registry" => match tickwork_protocol::decode::<RegistryParam>(&body) {
            Ok(p) => admin.registry_beat(p).await,
            Err(e) => Err(Error::Invalid(e.to_string())),
        },
        "registryRemove" => match tickwork_protocol::decode::<RegistryParam>(&body) {
            Ok(p) => admin.registry_remove(p).await,
            Err(e) => Err(Error::Invalid(e.to_string())),
        },
        _ => match tickwork_protocol::decode::<Vec<HandleCallbackParam>>(&body) {
            Ok(items) => admin.callbacks(items).await,
            Err(e) => Err(Error::Invalid(e.to_string())),
        },
    };
    match result {
        Ok(()) => Envelope::success(),
        Err(Error::Store(e)) => {
            // The executor keeps (spools) what it sent and tries again.
            error!(error = ?e, call = name, "database error in executor call");
            Envelope::fail("the admin could not record this request; try again")
        }
        Err(e) => Envelope::fail(e.to_string()),
    }
}

// ---- health ----

async fn healthz() -> &'static str {
    "ok"
}

/// Ready when the database answers and holds a recent heartbeat of this node (a node that
/// cannot heartbeat stops firing, so a load balancer should stop sending it work too).
async fn readyz(State(admin): State<Admin>) -> Response {
    let now = crate::timer::now_ms();
    let dead_after = admin.config().cluster.node_dead_after.as_millis() as i64;
    match admin.store().nodes_list().await {
        Ok(nodes) => {
            let registered = nodes
                .iter()
                .any(|n| n.id == admin.node_id() && n.heartbeat_at >= now - dead_after);
            if registered && !admin.is_fenced() {
                (StatusCode::OK, "ready").into_response()
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "heartbeat not registered recently",
                )
                    .into_response()
            }
        }
        Err(e) => {
            error!(error = ?e, "readiness check: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable").into_response()
        }
    }
}

/// Prometheus metrics, text format 0.0.4.
async fn metrics(State(admin): State<Admin>) -> Response {
    let body = crate::metrics::render(&admin).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

// ---- JSON API ----

async fn groups_list(State(a): State<Admin>) -> ApiResult<Vec<crate::GroupView>> {
    ok(a.groups_list().await?)
}

async fn group_create(State(a): State<Admin>, body: Body) -> ApiResult<crate::GroupView> {
    ok(a.group_create(json::<GroupInput>(body).await?).await?)
}

async fn group_get(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<crate::GroupView> {
    ok(a.group_get(id).await?)
}

async fn group_update(
    State(a): State<Admin>,
    Path(id): Path<i64>,
    body: Body,
) -> ApiResult<crate::GroupView> {
    ok(a.group_update(id, json::<GroupInput>(body).await?).await?)
}

async fn group_delete(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<serde_json::Value> {
    a.group_delete(id).await?;
    ok(serde_json::json!({ "deleted": id }))
}

async fn jobs_list(State(a): State<Admin>, uri: axum::http::Uri) -> ApiResult<serde_json::Value> {
    let q: JobQuery = query(uri.query())?;
    let page = a.jobs_list(q).await?;
    ok(serde_json::json!({ "items": page.items, "total": page.total }))
}

async fn job_create(State(a): State<Admin>, body: Body) -> ApiResult<crate::JobView> {
    ok(a.job_create(json::<JobInput>(body).await?).await?)
}

async fn job_get(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<crate::JobView> {
    ok(a.job_get(id).await?)
}

async fn job_update(
    State(a): State<Admin>,
    Path(id): Path<i64>,
    body: Body,
) -> ApiResult<crate::JobView> {
    ok(a.job_update(id, json::<JobInput>(body).await?).await?)
}

async fn job_delete(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<serde_json::Value> {
    a.job_delete(id).await?;
    ok(serde_json::json!({ "deleted": id }))
}

async fn job_start(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<crate::JobView> {
    ok(a.job_start(id).await?)
}

async fn job_stop(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<crate::JobView> {
    ok(a.job_stop(id).await?)
}

async fn job_trigger(
    State(a): State<Admin>,
    Path(id): Path<i64>,
    body: Body,
) -> ApiResult<crate::RunView> {
    let body = read(body).await?;
    let input = if body.iter().all(u8::is_ascii_whitespace) {
        TriggerInput::default()
    } else {
        serde_json::from_slice::<TriggerInput>(&body)
            .map_err(|e| Error::Invalid(format!("invalid json: {e}")))?
    };
    ok(a.job_trigger(id, input, TriggerType::Api).await?)
}

async fn runs_list(State(a): State<Admin>, uri: axum::http::Uri) -> ApiResult<serde_json::Value> {
    let q: RunQuery = query(uri.query())?;
    let page = a.runs_list(q).await?;
    ok(serde_json::json!({ "items": page.items, "total": page.total }))
}

async fn run_get(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<crate::RunView> {
    ok(a.run_get(id).await?)
}

async fn run_kill(State(a): State<Admin>, Path(id): Path<i64>) -> ApiResult<crate::RunView> {
    ok(a.run_kill(id).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    from_line: Option<i32>,
}

async fn run_log(
    State(a): State<Admin>,
    Path(id): Path<i64>,
    uri: axum::http::Uri,
) -> ApiResult<serde_json::Value> {
    let q: LogQuery = query(uri.query())?;
    let log = a.run_log(id, q.from_line.unwrap_or(1)).await?;
    ok(serde_json::json!({
        "from_line": log.from_line_num,
        "to_line": log.to_line_num,
        "content": log.log_content,
        "end": log.is_end,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewInput {
    schedule_type: ScheduleType,
    schedule_conf: String,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    n: Option<usize>,
}

async fn schedule_preview(State(a): State<Admin>, body: Body) -> ApiResult<serde_json::Value> {
    let p: PreviewInput = json(body).await?;
    let fires = a.schedule_preview(
        p.schedule_type,
        &p.schedule_conf,
        p.time_zone.as_deref(),
        p.n.unwrap_or(5),
    )?;
    ok(serde_json::json!({ "fires": fires }))
}
