//! How an executor call travels: the admin's own HTTP/1.1 client (`http1`) for `http://`
//! executors, and reqwest for `https://` ones (its TLS); either way one deadline for the whole
//! call, no redirect followed and at most a limit of answer read.
//!
//! At 10,000 fires a second reqwest's own layers (URL parsing, its request future, the
//! service stack it puts around hyper) were about a tenth of the admin's CPU, for calls that
//! need none of what they add over hyper; hyper's pooled client in turn cost a call more than
//! the plain client of `http1` (see there).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::CONTENT_TYPE;
use tickwork_protocol::{ACCESS_TOKEN_HEADER, APP_NAME_HEADER};
use tokio::time::Instant;

use super::SendGate;
use super::http1::Http1;

/// The content type of every call's body.
const JSON: &str = "application/json;charset=UTF-8";

/// A call's body: a `/run` that asks its gate first, other calls' bytes, or none.
pub(super) enum CallBody {
    Gated(GatedBody),
    Bytes(Option<Bytes>),
}

/// A `/run` body that asks its gate before it gives its bytes to the connection.
pub(super) struct GatedBody {
    pub(super) bytes: Option<Bytes>,
    pub(super) gate: SendGate,
    pub(super) held_back: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("held back: this node may no longer send the run")]
pub(super) struct HeldBack;

impl http_body::Body for CallBody {
    type Data = Bytes;
    type Error = HeldBack;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HeldBack>>> {
        match self.get_mut() {
            CallBody::Bytes(bytes) => {
                Poll::Ready(bytes.take().map(|b| Ok(http_body::Frame::data(b))))
            }
            CallBody::Gated(body) => {
                let Some(bytes) = body.bytes.take() else {
                    return Poll::Ready(None);
                };
                if !(body.gate)() {
                    body.held_back.store(true, Ordering::SeqCst);
                    return Poll::Ready(Some(Err(HeldBack)));
                }
                Poll::Ready(Some(Ok(http_body::Frame::data(bytes))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            CallBody::Bytes(bytes) => bytes.is_none(),
            CallBody::Gated(body) => body.bytes.is_none(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let bytes = match self {
            CallBody::Bytes(bytes) => bytes.as_ref(),
            CallBody::Gated(body) => body.bytes.as_ref(),
        };
        http_body::SizeHint::with_exact(bytes.map_or(0, |b| b.len() as u64))
    }
}

/// Why a call got no answer to read.
#[derive(Debug)]
pub(super) enum CallFailure {
    /// No (complete) answer: `cause` is `timeout`, `connect` or `other`, `error` the detail
    /// for the log.
    Unreachable {
        cause: &'static str,
        error: String,
    },
    Redirect(StatusCode),
    Status(StatusCode),
    TooLarge,
}

/// What a call sends besides its body.
pub(super) struct CallHeaders<'a> {
    pub(super) token: &'a str,
    pub(super) app_name: Option<&'a str>,
}

impl CallHeaders<'_> {
    /// The headers, by name: the content type, the token unless it is empty, the app name.
    pub(super) fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let token = (!self.token.is_empty()).then_some((ACCESS_TOKEN_HEADER, self.token));
        let app = self.app_name.map(|app| (APP_NAME_HEADER, app));
        [Some((CONTENT_TYPE.as_str(), JSON)), token, app]
            .into_iter()
            .flatten()
    }
}

/// The two clients, with the pools of connections they keep.
#[derive(Clone)]
pub(super) struct Transport {
    plain: Arc<Http1>,
    tls: reqwest::Client,
    timeout: Duration,
}

impl Transport {
    /// Clients keeping at most `idle_per_host` idle connections to an executor for 20 s, each
    /// call given `timeout` in all.
    pub(super) fn new(timeout: Duration, idle_per_host: usize) -> Transport {
        // Below the executor's default header-read timeout (30 s), which also closes idle
        // connections: a job every 30 s would otherwise race the close.
        let idle = Duration::from_secs(20);
        let plain = Arc::new(Http1::new(idle_per_host, idle));
        let tls = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(idle_per_host)
            .pool_idle_timeout(idle)
            .tcp_nodelay(true)
            // A redirect would carry `/run` and the access token to another host.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the HTTP client's fixed configuration is valid");
        Transport {
            plain,
            tls,
            timeout,
        }
    }

    /// POSTs `body` to `url` and reads the answer, at most `limit` bytes of it.
    pub(super) async fn post(
        &self,
        url: &str,
        headers: CallHeaders<'_>,
        body: CallBody,
        limit: usize,
    ) -> Result<Vec<u8>, CallFailure> {
        let deadline = Instant::now() + self.timeout;
        if url.starts_with("http://") {
            self.plain.post(url, headers, body, limit, deadline).await
        } else {
            self.post_tls(url, headers, body, limit).await
        }
    }

    async fn post_tls(
        &self,
        url: &str,
        headers: CallHeaders<'_>,
        body: CallBody,
        limit: usize,
    ) -> Result<Vec<u8>, CallFailure> {
        let unreachable = |e: reqwest::Error| CallFailure::Unreachable {
            cause: if e.is_timeout() {
                "timeout"
            } else if e.is_connect() {
                "connect"
            } else {
                "other"
            },
            error: e.to_string(),
        };
        let req = headers
            .pairs()
            .fold(self.tls.post(url), |req, (name, value)| {
                req.header(name, value)
            });
        let mut resp = req
            .body(reqwest::Body::wrap(body))
            .send()
            .await
            .map_err(unreachable)?;
        check_head(resp.status(), resp.content_length(), limit)?;
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(unreachable)? {
            append_within(&mut bytes, &chunk, limit)?;
        }
        Ok(bytes)
    }
}

pub(super) fn timed_out() -> CallFailure {
    CallFailure::Unreachable {
        cause: "timeout",
        error: "no answer in time".to_owned(),
    }
}

/// A call that got no usable answer, for `error`'s reason (logged, not shown).
pub(super) fn read_failed(error: String) -> CallFailure {
    CallFailure::Unreachable {
        cause: "other",
        error,
    }
}

/// An answer's head: a redirect is never followed (it would resend the run and the token to
/// another host), any status but success is no answer, and a declared length over `limit` is
/// not read.
pub(super) fn check_head(
    status: StatusCode,
    length: Option<u64>,
    limit: usize,
) -> Result<(), CallFailure> {
    if status.is_redirection() {
        return Err(CallFailure::Redirect(status));
    }
    if !status.is_success() {
        return Err(CallFailure::Status(status));
    }
    if length.is_some_and(|n| n > limit as u64) {
        return Err(CallFailure::TooLarge);
    }
    Ok(())
}

/// Adds a piece of the answer to `bytes`, read piece by piece so that an endless or huge
/// answer costs at most `limit`.
pub(super) fn append_within(
    bytes: &mut Vec<u8>,
    piece: &[u8],
    limit: usize,
) -> Result<(), CallFailure> {
    if bytes.len() + piece.len() > limit {
        return Err(CallFailure::TooLarge);
    }
    bytes.extend_from_slice(piece);
    Ok(())
}
