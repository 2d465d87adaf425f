//! The executor API handler: XXL-JOB's checks in XXL-JOB's order, answers in its envelope.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use tickwork_protocol::{ACCESS_TOKEN_HEADER, APP_NAME_HEADER, Envelope, RegistryParam, msg};

use crate::{Error, Scheduler};

/// Largest body of an executor call (XXL-JOB's executor limit as well).
const EXECUTOR_BODY_LIMIT: usize = 5 * 1024 * 1024;

/// One handler for every executor call, so that the checks run in XXL-JOB's order: method,
/// uri, token, body.
pub(super) async fn executor_api(
    State(admin): State<Scheduler>,
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
    admin: &Scheduler,
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
    let token = header(headers, ACCESS_TOKEN_HEADER);
    // A group's own token, or the global one; which groups it acts for is checked per call
    // and per callback item.
    let auth = match admin.executor_api().executor_auth(token).await {
        Ok(Some(auth)) => auth,
        Ok(None) => return Envelope::fail(msg::WRONG_TOKEN),
        Err(e) => return Envelope::fail(failure(name, &e)),
    };
    // An XXL-JOB 3.5 executor also names its app: the token must be that app's.
    let app = header(headers, APP_NAME_HEADER);
    if !app.is_empty() && !auth.stands_for_app(app) {
        return Envelope::fail(msg::TOKEN_OR_APP_INVALID);
    }
    let body = match read_body(body, EXECUTOR_BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) => return Envelope::fail(e),
    };
    let result = match name {
        "registry" => match registry_param(&body, app) {
            Ok(p) => admin.executor_api().registry_beat(&auth, p).await,
            Err(e) => Err(e),
        },
        "registryRemove" => match registry_param(&body, app) {
            Ok(p) => admin.executor_api().registry_remove(&auth, p).await,
            Err(e) => Err(e),
        },
        _ => match tickwork_protocol::decode_callbacks(&body) {
            Ok(items) => admin.executor_api().callbacks(&auth, items).await,
            Err(e) => Err(Error::invalid(e.to_string())),
        },
    };
    match result {
        Ok(()) => Envelope::success(),
        Err(e) => Envelope::fail(failure(name, &e)),
    }
}

/// A header's value, trimmed; empty when absent or not text.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("")
}

/// A call's body of at most `limit` bytes, or XXL-JOB's message for one that is too large or
/// blank.
pub(super) async fn read_body(body: Body, limit: usize) -> Result<axum::body::Bytes, String> {
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| format!("invalid request, body larger than {limit} bytes"))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(msg::BODY_EMPTY.to_owned());
    }
    Ok(bytes)
}

/// A registration's body; one that names an app other than its `XXL-JOB-APPNAME` header is
/// refused.
fn registry_param(body: &[u8], app: &str) -> Result<RegistryParam, Error> {
    let p: RegistryParam =
        tickwork_protocol::decode(body).map_err(|e| Error::invalid(e.to_string()))?;
    if !app.is_empty() && p.registry_key.trim() != app {
        return Err(Error::invalid_field(
            "registryKey",
            format!("names another app than the {APP_NAME_HEADER} header ({app:?})"),
        ));
    }
    Ok(p)
}

/// The envelope's message of a failed call: the error's text, or for an internal failure
/// (logged) a request to try again; the executor keeps (spools) what it sent and does.
fn failure(call: &str, e: &Error) -> String {
    tracing::error_span!("executor call", call)
        .in_scope(|| e.client_message("executor api"))
        .unwrap_or_else(|| "the admin could not handle this request; try again".to_owned())
}
