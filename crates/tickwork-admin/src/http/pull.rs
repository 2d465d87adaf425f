//! `GET /api/pull`: a pull executor's WebSocket. The token (and a 3.5-style app name) are
//! checked before the upgrade, as for the executor API's calls; after it, this only moves
//! text between the socket and the pipeline's side of the connection.

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use tickwork_protocol::pull::{Frame, MAX_FRAME_BYTES};
use tickwork_protocol::{ACCESS_TOKEN_HEADER, APP_NAME_HEADER, msg};
use tokio::sync::mpsc;

use super::executor::header;
use crate::Scheduler;
use crate::pipeline::executor_api::ExecutorAuth;
use crate::pipeline::pull::{self, Goodbye};

/// Frames waiting for the socket's writer at most; the pipeline's senders wait past it.
const OUTBOX: usize = 1024;

pub(super) async fn pull_connection(
    State(scheduler): State<Scheduler>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Ok(upgrade) = upgrade else {
        return (
            StatusCode::BAD_REQUEST,
            "a pull connection is a WebSocket: GET with Upgrade: websocket",
        )
            .into_response();
    };
    let token = header(&headers, ACCESS_TOKEN_HEADER);
    let auth = match scheduler.executor_api().executor_auth(token).await {
        Ok(Some(auth)) => auth,
        Ok(None) => return (StatusCode::UNAUTHORIZED, msg::WRONG_TOKEN).into_response(),
        Err(e) => {
            let _ = e.client_message("pull executor");
            return (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response();
        }
    };
    let app = header(&headers, APP_NAME_HEADER).to_owned();
    if !app.is_empty() && !auth.stands_for_app(&app) {
        return (StatusCode::FORBIDDEN, msg::TOKEN_OR_APP_INVALID).into_response();
    }
    upgrade
        .max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| bridge(scheduler, auth, app, socket))
}

/// Moves messages between `socket` and the pipeline until the connection ends, then closes
/// it with the reason.
async fn bridge(scheduler: Scheduler, auth: ExecutorAuth, app: String, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (in_tx, in_rx) = mpsc::channel::<String>(64);
    let (out_tx, mut out_rx) = mpsc::channel::<Frame>(OUTBOX);
    let mut serving = tokio::spawn(pull::serve(scheduler, auth, app, in_rx, out_tx));
    // Reading ends with the connection; dropping `in_tx` then ends the pipeline's side.
    let reader = tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            match message {
                Message::Text(text) => {
                    if in_tx.send(text.as_str().to_owned()).await.is_err() {
                        break;
                    }
                }
                Message::Close(_) => break,
                // Pings are answered by the socket itself; binary frames are not ours.
                Message::Binary(_) => break,
                Message::Ping(_) | Message::Pong(_) => {}
            }
        }
    });
    let goodbye = loop {
        tokio::select! {
            ended = &mut serving => break ended.unwrap_or_else(|e| Goodbye(format!("admin task failed: {e}"))),
            Some(frame) = out_rx.recv() => {
                // A failed write means the connection is gone: the reader sees it and ends.
                let _ = sink.send(Message::Text(frame.to_text().into())).await;
            }
        }
    };
    reader.abort();
    // A close reason is at most 123 bytes.
    let mut reason = goodbye.0;
    while reason.len() > 123 {
        reason.pop();
    }
    let close = CloseFrame {
        code: close_code::NORMAL,
        reason: reason.into(),
    };
    let _ = sink.send(Message::Close(Some(close))).await;
}
