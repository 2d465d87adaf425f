//! The executor's HTTP endpoints, answering as the Java executor does: always HTTP 200, the
//! outcome in a JSON envelope, `text/html;charset=UTF-8`, checks in the order method, exact
//! URI (query string included), token, then dispatch. Besides XXL-JOB's five endpoints,
//! `/tickwork/accepted` tells an admin which of the runs it asks about were accepted here.
//! A pull executor answers the same calls, read from its connection, with [`answer`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde::Serialize;
use subtle::ConstantTimeEq;
use tickwork_protocol::{
    ACCEPTED_PATH, ACCESS_TOKEN_HEADER, AcceptedQuery, AcceptedRuns, CODE_SUCCESS, Envelope,
    IdleBeatParam, KillParam, LogParam, TriggerParam, msg,
};

use crate::error::error_chain;
use crate::worker::{Runtime, Triggered};

/// What the server needs.
pub(crate) struct ServerState {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) token: String,
}

pub(crate) fn router(state: Arc<ServerState>) -> Router {
    // Every request goes to one function: the Java executor matches the raw URI exactly, which
    // a path router would not (it ignores query strings).
    Router::new().fallback(dispatch).with_state(state)
}

/// The calls an admin makes, by their path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Beat,
    IdleBeat,
    Run,
    Kill,
    Log,
    Accepted,
}

impl Endpoint {
    pub(crate) fn from_path(path: &str) -> Option<Endpoint> {
        Some(match path {
            "/beat" => Endpoint::Beat,
            "/idleBeat" => Endpoint::IdleBeat,
            "/run" => Endpoint::Run,
            "/kill" => Endpoint::Kill,
            "/log" => Endpoint::Log,
            ACCEPTED_PATH => Endpoint::Accepted,
            _ => return None,
        })
    }
}

/// An answer's body, and whether it queued a run (a `/run` that was not a duplicate).
pub(crate) struct Answered {
    pub(crate) body: Vec<u8>,
    pub(crate) queued: bool,
}

impl From<Vec<u8>> for Answered {
    fn from(body: Vec<u8>) -> Self {
        Answered {
            body,
            queued: false,
        }
    }
}

async fn dispatch(State(state): State<Arc<ServerState>>, request: Request) -> Response {
    let keep_alive = request
        .headers()
        .get(header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("keep-alive"));
    let body = handle(&state, request).await;
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html;charset=UTF-8"),
    );
    if keep_alive {
        headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    }
    response
}

fn reply<T: Serialize>(envelope: &Envelope<T>) -> Vec<u8> {
    tickwork_protocol::encode(envelope)
}

fn fail(message: impl Into<String>) -> Vec<u8> {
    reply(&Envelope::<()>::fail(message))
}

fn success() -> Vec<u8> {
    reply(&Envelope::<()>::success())
}

async fn handle(state: &ServerState, request: Request) -> Vec<u8> {
    if request.method() != Method::POST {
        return fail(msg::METHOD_NOT_SUPPORTED);
    }
    let uri = request
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("");
    if uri.is_empty() {
        return fail(msg::URI_EMPTY);
    }
    let Some(endpoint) = Endpoint::from_path(uri) else {
        return fail(msg::uri_not_found(uri));
    };
    if !state.token.is_empty() {
        // An empty header counts as absent (3.3+ clients send it empty).
        let given = request
            .headers()
            .get(ACCESS_TOKEN_HEADER)
            .map(|v| v.as_bytes())
            .filter(|v| !v.is_empty());
        // In constant time: the answer must not tell how much of a guess was right.
        let right = given.is_some_and(|g| bool::from(g.ct_eq(state.token.as_bytes())));
        if !right {
            return fail(msg::WRONG_TOKEN);
        }
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > crate::MAX_BODY_BYTES as u64) {
        return fail(too_large());
    }
    let body = match axum::body::to_bytes(request.into_body(), crate::MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(e) => {
            // A chunked body over the limit: axum reports it as a length limit error.
            let text = error_chain(&e);
            return if text.contains("length limit") {
                fail(too_large())
            } else {
                fail(format!(
                    "request error: cannot read the request body: {text}"
                ))
            };
        }
    };
    answer(&state.runtime, endpoint, &body).await.body
}

/// Answers one call whose checks passed (over HTTP: method, URI, token, size; over a pull
/// connection: the connection's).
pub(crate) async fn answer(rt: &Arc<Runtime>, endpoint: Endpoint, body: &[u8]) -> Answered {
    match endpoint {
        // The body is ignored: empty from 3.3+ admins, `""` from older ones.
        Endpoint::Beat => success().into(),
        Endpoint::IdleBeat => match tickwork_protocol::decode::<IdleBeatParam>(body) {
            Ok(p) if rt.is_busy(p.job_id) => fail(msg::JOB_BUSY).into(),
            Ok(_) => success().into(),
            Err(e) => fail(format!("request error: {e}")).into(),
        },
        Endpoint::Run => match tickwork_protocol::decode::<TriggerParam>(body) {
            Ok(trigger) => {
                let (job_id, log_id) = (trigger.job_id, trigger.log_id);
                match rt.trigger(trigger) {
                    Ok(Triggered::Queued) => Answered {
                        body: success(),
                        queued: true,
                    },
                    Ok(Triggered::Duplicate) => {
                        rt.counters.runs_duplicate.fetch_add(1, Ordering::Relaxed);
                        let message = tickwork_protocol::duplicate_run_msg(log_id);
                        tracing::info!(run_id = log_id, job_id, "duplicate run ignored");
                        // Code 200: the run is accepted, once.
                        reply(&Envelope::<()> {
                            code: CODE_SUCCESS,
                            msg: Some(message),
                            payload: None,
                        })
                        .into()
                    }
                    Err(refusal) => {
                        tracing::debug!(job_id, log_id, %refusal, "run refused");
                        fail(refusal).into()
                    }
                }
            }
            Err(e) => fail(format!("request error: {e}")).into(),
        },
        Endpoint::Kill => match tickwork_protocol::decode::<KillParam>(body) {
            Ok(p) => {
                if rt.kill(p.job_id, msg::KILLED_BY_ADMIN) {
                    tracing::info!(job_id = p.job_id, "job killed by the admin");
                    success().into()
                } else {
                    reply(&Envelope::success_with(msg::JOB_ALREADY_KILLED)).into()
                }
            }
            Err(e) => fail(format!("request error: {e}")).into(),
        },
        Endpoint::Log => match tickwork_protocol::decode::<LogParam>(body) {
            Ok(p) => reply(&Envelope::success_with(rt.logs.read(&p).await)).into(),
            Err(e) => fail(format!("request error: {e}")).into(),
        },
        Endpoint::Accepted => match tickwork_protocol::decode::<AcceptedQuery>(body) {
            Ok(q) => {
                let (accepted, record_since) = rt.accepted.query(&q.log_ids);
                reply(&Envelope::success_with(AcceptedRuns {
                    accepted,
                    record_since,
                }))
                .into()
            }
            Err(e) => fail(format!("request error: {e}")).into(),
        },
    }
}

fn too_large() -> String {
    format!(
        "request error: request body is larger than {} MiB",
        crate::MAX_BODY_BYTES / (1024 * 1024)
    )
}
