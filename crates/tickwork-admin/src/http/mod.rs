//! The admin's HTTP server: the executor API (`/api/*` and `/xxl-job-admin/api/*`, XXL-JOB's
//! envelope, always HTTP 200) on the [`Scheduler`], the REST API under `/openapi/v1` (API
//! tokens, described by the OpenAPI document at `/openapi.json`) and the console on the
//! [`Service`], health (`/healthz`, `/readyz`) and Prometheus metrics (`/metrics`).
//!
//! [`ApiError`] is the one place where errors become HTTP answers: clients get a stable code
//! and a message; database and other internal causes are logged, never sent. REST handlers
//! only translate: who may do what is decided by the service layer, given the caller's
//! [`crate::Principal`].

mod executor;
mod health;
mod rest;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::error;

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
    pipeline_router(admin.scheduler).merge(service_router(admin.service))
}

/// The executor API, health and metrics, on the pipeline.
pub fn pipeline_router(scheduler: Scheduler) -> Router {
    Router::new()
        .route("/api/{method}", any(executor::executor_api))
        .route("/xxl-job-admin/api/{method}", any(executor::executor_api))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .with_state(scheduler)
}

/// The REST API, its OpenAPI document and the console, on the service.
pub fn service_router(service: Service) -> Router {
    Router::new()
        .route("/openapi.json", get(rest::openapi_document))
        .nest("/openapi/v1", rest::router(service.clone()))
        .merge(crate::console::router())
        .with_state(service)
}

/// An error as the JSON API answers it: `{"code":"…","message":"…"}` (plus `field` for an
/// input error that names one), repeated under `"error"` for clients of the first releases.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl ApiError {
    /// The HTTP status and stable code of an error.
    pub fn status_and_code(e: &Error) -> (StatusCode, &'static str) {
        match e {
            Error::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_input"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Error::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Error::Executor(_) => (StatusCode::BAD_GATEWAY, "executor_error"),
            Error::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Error::Store(_) | Error::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

/// The field an input error names: messages are written `field: what is wrong`.
fn field_of(message: &str) -> Option<&str> {
    let (field, _) = message.split_once(": ")?;
    (!field.is_empty()
        && field
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.')))
    .then_some(field)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = Self::status_and_code(&self.0);
        let message = match &self.0 {
            Error::Store(inner) => {
                error!(error = ?inner, "database error");
                "internal error; see the admin's log".to_owned()
            }
            Error::Internal(inner) => {
                error!(error = %inner, "internal error");
                "internal error; see the admin's log".to_owned()
            }
            other => other.to_string(),
        };
        let mut body = serde_json::json!({
            "code": code,
            "message": message,
            "error": { "code": code, "message": message },
        });
        if let Error::Invalid(m) = &self.0
            && let Some(field) = field_of(m)
        {
            body["field"] = field.into();
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
