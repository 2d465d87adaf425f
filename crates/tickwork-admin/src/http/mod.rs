//! The admin's HTTP server: the executor API (`/api/*` and `/xxl-job-admin/api/*`, XXL-JOB's
//! envelope, always HTTP 200) on the [`Scheduler`], XXL-JOB 3.5's job API beside it
//! (`/api/addJob`, ...), pull executors' WebSocket (`/api/pull`), the REST API under `/openapi/v1` (API tokens, described by the
//! OpenAPI document at `/openapi.json`) and the console on the [`Service`], health
//! (`/healthz`, `/readyz`) and Prometheus metrics (`/metrics`).
//!
//! [`ApiError`] is the one place where errors become HTTP answers: clients get a stable code
//! and a message; database and other internal causes are logged, never sent. REST handlers
//! only translate: who may do what is decided by the service layer, given the caller's
//! [`crate::Principal`].

mod executor;
mod extract;
mod health;
mod job_api;
mod pull;
mod rest;
mod rest_workflows;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use rest::API_ROUTES;

use crate::{Admin, Error, Scheduler, Service};

/// Serves the admin on `listener` until `stop` is cancelled, within the configured limits
/// (header-read timeout, connection cap); handlers get the client's address as
/// `ConnectInfo<SocketAddr>`.
pub async fn serve(
    admin: Admin,
    listener: TcpListener,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let limits = admin.service.config().http;
    tickwork_serve::serve(listener, router(admin), limits, stop).await
}

/// Every route of the admin: the pipeline's (executor API, health, metrics) and the
/// service's (REST API, console).
pub fn router(admin: Admin) -> Router {
    pipeline_router(admin.scheduler)
        .merge(service_router(admin.service))
        .layer(axum::middleware::from_fn(run_to_completion))
}

/// Runs each request's handler as a task of its own, so that a client that hangs up (an
/// executor's callback timing out) does not cancel it midway: a database call dropped in the
/// middle of a statement can leave its connection unusable (on MySQL/MariaDB it never came
/// back to the pool), and what the request started (a result recorded, a job saved) is
/// finished either way.
async fn run_to_completion(request: axum::extract::Request, next: Next) -> Response {
    match tokio::spawn(next.run(request)).await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(error = %e, "request handler failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// The executor API, health and metrics, on the pipeline.
pub fn pipeline_router(scheduler: Scheduler) -> Router {
    Router::new()
        .route("/api/{method}", any(executor::executor_api))
        .route("/xxl-job-admin/api/{method}", any(executor::executor_api))
        .route(
            tickwork_protocol::pull::PULL_PATH,
            get(pull::pull_connection),
        )
        .route(
            &format!("/xxl-job-admin{}", tickwork_protocol::pull::PULL_PATH),
            get(pull::pull_connection),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .with_state(scheduler)
}

/// The REST API, its OpenAPI document, XXL-JOB 3.5's job API and the console, on the service.
pub fn service_router(service: Service) -> Router {
    let mut router = Router::new();
    for prefix in ["", tickwork_protocol::LEGACY_ADMIN_CONTEXT_PATH] {
        for name in job_api::PATHS {
            router = router.route(&format!("{prefix}/api/{name}"), any(job_api::job_api));
        }
    }
    router
        .route("/openapi.json", get(rest::openapi_document))
        .nest("/openapi/v1", rest::router(service.clone()))
        .merge(crate::console::router())
        .with_state(service)
}

/// An error as the JSON API answers it: `{"code":"…","message":"…"}` (plus `field` for an
/// input error that names one, and `errors` for the wrong items of a list input), repeated
/// under `"error"` for clients of the first releases.
/// Status and code come from [`Error::code`]; internal causes are logged, never sent.
#[derive(Debug)]
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

/// What clients read instead of an internal cause.
const INTERNAL_MESSAGE: &str = "internal error; see the admin's log";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.0.code();
        let status = code.status();
        let message = self
            .0
            .client_message("api")
            .unwrap_or_else(|| INTERNAL_MESSAGE.to_owned());
        let mut body = serde_json::json!({
            "code": code.as_str(),
            "message": message,
            "error": { "code": code.as_str(), "message": message },
        });
        if let Some(field) = self.0.field() {
            body["field"] = field.into();
        }
        if let Error::InvalidItems { items, .. } = &self.0 {
            body["errors"] = serde_json::to_value(items).unwrap_or_default();
        }
        let mut resp = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}
