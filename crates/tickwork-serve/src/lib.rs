//! The HTTP/1.1 server loop of the admin and the executor. `axum::serve` has neither a
//! header-read timeout nor a connection cap, so half-sent requests stayed open forever and
//! enough of them exhausted the process's file descriptors. This loop serves an axum
//! [`Router`] with hyper's HTTP/1 connection builder and adds:
//!
//! - a **header-read timeout**: a connection that has not sent a complete request head this
//!   long after it opened (or after its previous response) is closed; idle keep-alive
//!   connections therefore close after the same time;
//! - a **connection cap**: at the cap a new connection first takes the slot of the connection
//!   idle the longest between two requests (closed, as its keep-alive timeout would) once it
//!   has been idle for [`Limits::idle_before_close`], else it waits for a connection to end,
//!   and the next ones wait in the kernel's listen backlog instead of costing a file
//!   descriptor each. A legitimate client is served late rather than refused (accept-and-close
//!   would turn a dispatch or callback into an error), idle connections of one busy client
//!   never keep the others out, and a client between two of its requests keeps its
//!   connection. The timeout bounds how long a slow client holds a slot, so the wait is
//!   bounded too;
//! - the client's address as `ConnectInfo<SocketAddr>` on every request, as
//!   `into_make_service_with_connect_info` gave it;
//! - a **graceful stop**: when the token is cancelled the loop stops accepting, idle
//!   connections close, requests in flight finish, and [`serve`] returns once every
//!   connection has ended.
//!
//! It knows nothing about the admin or the executor: both depend on it, not on each other.

mod idle;

use std::ops::RangeInclusive;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

use crate::idle::{Closing, ConnectionIdleness, IdleConnections};

/// Accepted header-read timeouts: below 100 ms a slow network fails honest clients.
pub const HEADER_READ_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(3600);
/// Accepted connection caps.
pub const MAX_CONNECTIONS_RANGE: RangeInclusive<usize> = 1..=1_000_000;

/// How long the loop waits after an accept error that is not about one connection (such as
/// running out of file descriptors) before accepting again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The limits of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A connection that has not sent a complete request head this long after it opened or
    /// after its previous response is closed (idle keep-alive connections too).
    pub header_read_timeout: Duration,
    /// Connections served at once; at the cap a new one takes the slot of the one idle the
    /// longest between requests, else waits (the next ones in the listen backlog) until one
    /// ends.
    pub max_connections: usize,
    /// How long a connection must have been idle before the cap closes it to make room: a
    /// connection just answered most likely carries its client's next request in a moment,
    /// and a close at that moment ends the request unanswered (the client does not resend a
    /// POST).
    pub idle_before_close: Duration,
}

impl Default for Limits {
    /// 30 s (hyper's own default) and 512 connections, well below the usual limit of 1024
    /// open files, which the process also needs for its database, logs and outgoing calls; a
    /// connection idle for a second makes room at the cap (a client between two requests
    /// comes back within milliseconds).
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(30),
            max_connections: 512,
            idle_before_close: Duration::from_secs(1),
        }
    }
}

impl Limits {
    /// `Err` naming the limit out of its range, under the name the caller's configuration
    /// gives it.
    pub fn check(&self, timeout_name: &str, connections_name: &str) -> Result<(), String> {
        let ms = |d: &Duration| d.as_millis();
        let range = HEADER_READ_TIMEOUT_RANGE;
        if !range.contains(&self.header_read_timeout) {
            return Err(format!(
                "{timeout_name} ({} ms) is out of range {}-{} ms",
                ms(&self.header_read_timeout),
                ms(range.start()),
                ms(range.end())
            ));
        }
        let range = MAX_CONNECTIONS_RANGE;
        if !range.contains(&self.max_connections) {
            return Err(format!(
                "{connections_name} ({}) is out of range {}-{}",
                self.max_connections,
                range.start(),
                range.end()
            ));
        }
        Ok(())
    }
}

/// Serves `router` on `listener` within `limits` until `stop` is cancelled, then stops
/// gracefully (see the crate documentation). Accept errors are logged and retried, never
/// returned, so the result is always `Ok` (the type matches `axum::serve`'s).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let idle = Arc::new(IdleConnections::default());
    'accept: loop {
        let (tcp, remote) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => continue,
                    }
                }
            },
        };
        // At the cap the connection idle the longest makes room once it has been idle long
        // enough; until then this one waits for a slot (and the next ones in the listen
        // backlog).
        let slot = loop {
            if let Ok(slot) = Arc::clone(&slots).try_acquire_owned() {
                break slot;
            }
            // One closed connection makes one slot: then only the slot is waited for.
            let closing = idle.close_longest_idle(limits.idle_before_close);
            let look_again = match closing {
                Closing::TooRecent(left) => Some(left),
                Closing::NoneIdle | Closing::Closed => None,
            };
            tokio::select! {
                _ = stop.cancelled() => break 'accept,
                slot = Arc::clone(&slots).acquire_owned() => {
                    break slot.expect("the semaphore is never closed");
                }
                _ = idle.one_became_idle(), if closing == Closing::NoneIdle => {}
                _ = tokio::time::sleep(look_again.unwrap_or_default()), if look_again.is_some() => {}
            }
        };
        // Small request/response pairs: Nagle would add delay for nothing.
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let close = stop.child_token();
        let idleness = Arc::new(ConnectionIdleness::new(Arc::clone(&idle), close.clone()));
        let track = Arc::clone(&idleness);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(remote));
            track.busy();
            // A router is cheap to clone; calling one needs `&mut`.
            let answer = router.clone().call(request);
            let track = Arc::clone(&track);
            async move {
                let answer = answer.await;
                track.idle();
                answer
            }
        });
        // Upgrades (a pull executor's WebSocket) leave the loop: the connection's task ends and
        // its slot is free, and the upgraded socket lives in a task of its own.
        let conn = builder
            .serve_connection(TokioIo::new(tcp), service)
            .with_upgrades();
        connections.spawn(async move {
            let _slot = slot;
            let mut conn = pin!(conn);
            let outcome = tokio::select! {
                outcome = conn.as_mut() => outcome,
                // The server stops, or the connection makes room at the cap.
                _ = close.cancelled() => {
                    // Idle connections close now; a request in flight finishes first.
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            idleness.ended();
            if let Err(e) = outcome {
                tracing::debug!(%remote, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Errors about one connection that was reset or aborted before it was accepted: the next
/// accept is fine.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}
