//! Health (`/healthz`, `/readyz`) and Prometheus metrics (`/metrics`).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tracing::error;

use crate::Scheduler;

pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// Ready when the database answers and holds a recent heartbeat of this node (a node that
/// cannot heartbeat stops firing, so a load balancer should stop sending it work too).
pub(super) async fn readyz(State(admin): State<Scheduler>) -> Response {
    let now = admin.clock().now_ms();
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
pub(super) async fn metrics(State(admin): State<Scheduler>) -> Response {
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
