//! Pull mode: the executor listens on no port. It dials one admin (a WebSocket at
//! `/api/pull`, the admins of its list in turn while none answers), says hello with its
//! instance id, its free slots and the runs it holds, and answers the admin's calls (`/run`,
//! `/kill`, `/log`, ...) read from that connection exactly as the HTTP server answers them.
//! It gives a credit back for each run that ends or that a `/run` did not queue, beats with
//! the runs it holds, sends its results as `callback` calls over the same connection while it
//! is up ([`PullCalls`]; by HTTP otherwise), and says it drains when it shuts down.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tickwork_protocol::pull::{Frame, MAX_FRAME_BYTES, PULL_PATH};
use tickwork_protocol::{ACCESS_TOKEN_HEADER, APP_NAME_HEADER, Envelope, msg};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

use crate::error::error_chain;
use crate::server::{Endpoint, answer};
use crate::worker::Runtime;

/// First pause before dialling again; doubled per failure up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long the admin has for its welcome.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// A call of the admin's API to make over the pull connection.
#[derive(Debug)]
struct OutCall {
    path: String,
    body: serde_json::Value,
    answer: oneshot::Sender<serde_json::Value>,
}

/// The executor's calls of the admin (its results) over the pull connection, while one is up.
#[derive(Debug, Default)]
pub(crate) struct PullCalls {
    current: Mutex<Option<mpsc::Sender<OutCall>>>,
}

impl PullCalls {
    /// Makes `path` with `body` over the connection and returns the admin's envelope; `None`
    /// when no connection is up or it ended before the answer (the caller goes by HTTP).
    pub(crate) async fn call(
        &self,
        path: &str,
        body: &[u8],
        timeout: Duration,
    ) -> Option<serde_json::Value> {
        let sender = self.current.lock().expect("pull calls lock").clone()?;
        let body = serde_json::from_slice(body).ok()?;
        let (answer, rx) = oneshot::channel();
        let call = OutCall {
            path: path.to_owned(),
            body,
            answer,
        };
        tokio::time::timeout(timeout, async {
            sender.send(call).await.ok()?;
            rx.await.ok()
        })
        .await
        .ok()
        .flatten()
    }

    fn set(&self, sender: Option<mpsc::Sender<OutCall>>) {
        *self.current.lock().expect("pull calls lock") = sender;
    }

    /// Whether a connection is up now (from its welcome to its end).
    pub(crate) fn is_up(&self) -> bool {
        self.current.lock().expect("pull calls lock").is_some()
    }
}

/// What the pull loop needs.
pub(crate) struct Pull {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) admins: Vec<String>,
    pub(crate) token: String,
    pub(crate) app: String,
    pub(crate) instance: String,
    pub(crate) slots: u32,
    pub(crate) connect_timeout: Duration,
    /// The run id of each result the workers produce.
    pub(crate) ended: mpsc::UnboundedReceiver<i64>,
    /// The results sent over the connection (up while a connection is).
    pub(crate) calls: Arc<PullCalls>,
    /// The runs whose results are on the way (listed in the hello as held).
    pub(crate) counters: Arc<crate::executor::Counters>,
}

/// `ws://<host>/<context>/api/pull` for an admin base `http://<host>/<context>`, `wss://` for
/// `https://` (TLS with rustls, the system's root certificates, or the file `SSL_CERT_FILE`
/// names).
pub(crate) fn ws_url(base: &str) -> Result<String, String> {
    let base = base.trim().trim_end_matches('/');
    if let Some(rest) = base.strip_prefix("http://") {
        Ok(format!("ws://{rest}{PULL_PATH}"))
    } else if let Some(rest) = base.strip_prefix("https://") {
        Ok(format!("wss://{rest}{PULL_PATH}"))
    } else {
        Err(format!("{base:?} is not an http:// or https:// address"))
    }
}

/// Dials admins until `stop`; `drain` is the shutdown's start (the admin is told to send no
/// more runs).
pub(crate) async fn pull_loop(mut pull: Pull, drain: CancellationToken, stop: CancellationToken) {
    // The runs this executor holds that came over a pull connection (queued or running).
    let mut held = HashSet::new();
    let mut backoff = MIN_BACKOFF;
    let mut next = 0;
    loop {
        let base = pull.admins[next % pull.admins.len()].clone();
        next += 1;
        match pull.dial(&base).await {
            Ok(socket) => {
                let why = pull.session(socket, &mut held, &drain, &stop).await;
                if stop.is_cancelled() {
                    tracing::info!(admin = %base, "pull connection closed");
                    return;
                }
                tracing::warn!(admin = %base, reason = %why, "pull connection lost; dialling again");
                backoff = MIN_BACKOFF;
                // The same admin first: it is probably only a blip.
                next -= 1;
            }
            Err(e) => tracing::warn!(admin = %base, error = %e, "cannot dial the admin"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Pull {
    async fn dial(&self, base: &str) -> Result<Socket, String> {
        let url = ws_url(base)?;
        let mut request = url.into_client_request().map_err(|e| error_chain(&e))?;
        let headers = request.headers_mut();
        if !self.token.is_empty() {
            let token = HeaderValue::from_str(&self.token).map_err(|e| e.to_string())?;
            headers.insert(ACCESS_TOKEN_HEADER, token);
        }
        let app = HeaderValue::from_str(&self.app).map_err(|e| e.to_string())?;
        headers.insert(APP_NAME_HEADER, app);
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME_BYTES))
            .max_frame_size(Some(MAX_FRAME_BYTES));
        let dial = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
        match tokio::time::timeout(self.connect_timeout, dial).await {
            Err(_) => Err("timeout".into()),
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
                let body = response
                    .body()
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default()
                    .into_owned();
                Err(format!(
                    "refused: http status {}: {body}",
                    response.status()
                ))
            }
            Ok(Err(e)) => Err(error_chain(&e)),
            Ok(Ok((socket, _))) => Ok(socket),
        }
    }

    /// One connection, from hello to its end; returns why it ended.
    async fn session(
        &mut self,
        socket: Socket,
        held: &mut HashSet<i64>,
        drain: &CancellationToken,
        stop: &CancellationToken,
    ) -> String {
        let (mut sink, mut stream) = socket.split();
        // Runs that ended while no connection was up: the hello counts them free.
        while let Ok(id) = self.ended.try_recv() {
            held.remove(&id);
        }
        // Held: queued or running, or ended with the result still on its way; the admin
        // counts every other run it dispatched here as lost.
        let mut running: HashSet<i64> = held.iter().copied().collect();
        running.extend(self.counters.unreported());
        let hello = Frame::Hello {
            app: self.app.clone(),
            instance: self.instance.clone(),
            credits: self.slots.saturating_sub(held.len() as u32),
            running: running.into_iter().collect(),
        };
        if let Err(e) = sink.send(Message::text(hello.to_text())).await {
            return format!("cannot send the hello: {}", error_chain(&e));
        }
        let beat_every = match tokio::time::timeout(WELCOME_TIMEOUT, stream.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => match Frame::from_text(text.as_str()) {
                Ok(Frame::Welcome {
                    address,
                    beat_interval_ms,
                }) => {
                    tracing::info!(%address, "connected to the admin in pull mode");
                    Duration::from_millis(beat_interval_ms.max(100))
                }
                _ => return format!("expected a welcome, got {text}"),
            },
            Ok(Some(Ok(Message::Close(frame)))) => return refused(frame),
            Ok(Some(Ok(other))) => return format!("expected a welcome, got {other:?}"),
            Ok(Some(Err(e))) => return error_chain(&e),
            Ok(None) => return "closed before the welcome".into(),
            Err(_) => return "no welcome in time".into(),
        };
        let (calls_tx, calls) = mpsc::channel::<OutCall>(16);
        self.calls.set(Some(calls_tx));
        let why = self
            .serve((sink, stream), held, beat_every, calls, (drain, stop))
            .await;
        // Calls waiting for an answer fail now, and their callers go by HTTP.
        self.calls.set(None);
        why
    }

    /// The connection after the welcome, until it ends; returns why it ended.
    async fn serve(
        &mut self,
        (mut sink, mut stream): (
            futures::stream::SplitSink<Socket, Message>,
            futures::stream::SplitStream<Socket>,
        ),
        held: &mut HashSet<i64>,
        beat_every: Duration,
        mut calls: mpsc::Receiver<OutCall>,
        (drain, stop): (&CancellationToken, &CancellationToken),
    ) -> String {
        let mut drained = false;
        let mut next_id = 0u64;
        let mut pending: HashMap<u64, oneshot::Sender<serde_json::Value>> = HashMap::new();
        let mut beat = tokio::time::interval(beat_every);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Answers of the calls that take a while (a log page) come back through here.
        let (answers_tx, mut answers) = mpsc::channel::<Frame>(64);
        loop {
            let out = tokio::select! {
                _ = stop.cancelled() => {
                    let close = CloseFrame { code: CloseCode::Normal, reason: "executor stopped".into() };
                    let _ = sink.send(Message::Close(Some(close))).await;
                    return "executor stopped".into();
                }
                _ = drain.cancelled(), if !drained => {
                    drained = true;
                    Frame::Drain
                }
                _ = beat.tick() => Frame::Beat { running: held.iter().copied().collect() },
                Some(id) = self.ended.recv() => {
                    if !held.remove(&id) {
                        continue;
                    }
                    Frame::Credit { n: 1 }
                }
                Some(frame) = answers.recv() => frame,
                Some(call) = calls.recv() => {
                    next_id += 1;
                    pending.insert(next_id, call.answer);
                    Frame::Call { id: next_id, path: call.path, body: call.body }
                }
                message = stream.next() => match message {
                    None => return "connection closed".into(),
                    Some(Err(e)) => return error_chain(&e),
                    Some(Ok(Message::Close(frame))) => return refused(frame),
                    Some(Ok(Message::Text(text))) => match Frame::from_text(text.as_str()) {
                        Ok(Frame::Call { id, path, body }) => {
                            for frame in self.call(id, &path, body, held, &answers_tx).await {
                                if let Err(e) = sink.send(Message::text(frame.to_text())).await {
                                    return error_chain(&e);
                                }
                            }
                            continue;
                        }
                        Ok(Frame::Answer { id, body }) => {
                            if let Some(waiter) = pending.remove(&id) {
                                let _ = waiter.send(body);
                            }
                            continue;
                        }
                        Ok(other) => return format!("unexpected frame from the admin: {other:?}"),
                        Err(e) => return format!("unreadable frame from the admin: {e}"),
                    },
                    Some(Ok(_)) => continue,
                },
            };
            if let Err(e) = sink.send(Message::text(out.to_text())).await {
                return error_chain(&e);
            }
        }
    }

    /// Answers one call of the admin: the frames to send now. A `/run` is answered here and
    /// now (with a credit back when it queued nothing), so the set of held runs changes in one
    /// place; other calls are answered from a task of their own through `answers`.
    async fn call(
        &self,
        id: u64,
        path: &str,
        body: serde_json::Value,
        held: &mut HashSet<i64>,
        answers: &mpsc::Sender<Frame>,
    ) -> Vec<Frame> {
        let Some(endpoint) = Endpoint::from_path(path) else {
            let fail = Envelope::<()>::fail(msg::uri_not_found(path));
            let body = serde_json::to_value(fail).expect("an envelope is always serializable");
            return vec![Frame::Answer { id, body }];
        };
        let bytes = serde_json::to_vec(&body).expect("a JSON value is always serializable");
        if endpoint == Endpoint::Run {
            let run_id = body.get("logId").and_then(serde_json::Value::as_i64);
            let fresh = run_id.is_some_and(|id| held.insert(id));
            let answered = answer(&self.runtime, endpoint, &bytes).await;
            let mut frames = vec![Frame::Answer {
                id,
                body: value_of(&answered.body),
            }];
            if !answered.queued {
                if let (true, Some(run_id)) = (fresh, run_id) {
                    held.remove(&run_id);
                }
                frames.push(Frame::Credit { n: 1 });
            }
            return frames;
        }
        let runtime = self.runtime.clone();
        let answers = answers.clone();
        tokio::spawn(async move {
            let answered = answer(&runtime, endpoint, &bytes).await;
            let body = value_of(&answered.body);
            let _ = answers.send(Frame::Answer { id, body }).await;
        });
        Vec::new()
    }
}

fn value_of(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).expect("answers are JSON")
}

fn refused(frame: Option<CloseFrame>) -> String {
    match frame {
        Some(f) => format!("closed by the admin: {}", f.reason.as_str()),
        None => "closed by the admin".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::ws_url;

    #[test]
    fn the_pull_url_keeps_the_admins_context_path() {
        for (base, url) in [
            ("http://h:8080", "ws://h:8080/api/pull"),
            ("http://h:8080/", "ws://h:8080/api/pull"),
            ("http://h/xxl-job-admin/", "ws://h/xxl-job-admin/api/pull"),
            ("https://h:8443", "wss://h:8443/api/pull"),
        ] {
            assert_eq!(ws_url(base).unwrap(), url);
        }
        assert!(ws_url("ftp://h/").is_err());
    }
}
