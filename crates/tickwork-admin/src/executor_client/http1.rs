//! The admin's HTTP/1.1 client of `http://` executors: each call takes an idle connection of
//! its executor (or opens one), writes its request whole in one buffer and reads the answer in
//! the calling task, then keeps the connection for the next call.
//!
//! A call to an executor is one small POST and one small answer. hyper's pooled client drives
//! each connection in a task of its own, so a request and its answer cross between two tasks,
//! and it builds a header map per request; the send floor without either took 28% less of the
//! machine a call (15.9 against 22.1-22.4 us at 10,000 calls a second).

use std::collections::HashMap;
use std::io::ErrorKind;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::SendGate;
use super::transport::{
    CallBody, CallFailure, CallHeaders, append_within, check_head, read_failed, timed_out,
};
use wire::{Chunk, Dechunk, Framing, HEAD_LIMIT, Target, header_value_ok, parse_head, target};

mod wire;

/// The most of its answer buffer an idle connection keeps.
const KEPT_BUFFER: usize = 8 * 1024;
/// How often the idle connections of every executor are looked over, so that those of an
/// executor no longer called are closed too.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// A connection to one executor and the buffer its answers are read into.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    idle_since: Instant,
}

/// The idle connections, by executor authority (`host:port`).
struct Idle {
    hosts: HashMap<String, Vec<Conn>>,
    swept: Instant,
}

/// The client: idle connections kept per executor, at most `per_host` of them, for `idle_for`.
pub(super) struct Http1 {
    idle: Mutex<Idle>,
    per_host: usize,
    idle_for: Duration,
}

impl Http1 {
    pub(super) fn new(per_host: usize, idle_for: Duration) -> Http1 {
        Http1 {
            idle: Mutex::new(Idle {
                hosts: HashMap::new(),
                swept: Instant::now(),
            }),
            per_host,
            idle_for,
        }
    }

    /// POSTs `body` to `url` and reads the answer, at most `limit` bytes of it, all by
    /// `deadline`.
    pub(super) async fn post(
        &self,
        url: &str,
        headers: CallHeaders<'_>,
        body: CallBody,
        limit: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>, CallFailure> {
        let target =
            target(url).ok_or_else(|| read_failed(format!("not a callable url: {url:?}")))?;
        let (bytes, gated) = match body {
            CallBody::Bytes(bytes) => (bytes, None),
            CallBody::Gated(g) => (g.bytes, Some((g.gate, g.held_back))),
        };
        let bytes = bytes.unwrap_or_default();
        // One allocation: the head (some 150 bytes with a token) and the body.
        let mut request = Vec::with_capacity(256 + bytes.len());
        request.extend_from_slice(b"POST ");
        request.extend_from_slice(target.path.as_bytes());
        request.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        request.extend_from_slice(target.host.as_bytes());
        for (name, value) in headers.pairs() {
            if !header_value_ok(value) {
                return Err(read_failed(format!("a {name} header that cannot be sent")));
            }
            request.extend_from_slice(b"\r\n");
            request.extend_from_slice(name.as_bytes());
            request.extend_from_slice(b": ");
            request.extend_from_slice(value.as_bytes());
        }
        // Written into the request itself: no string of its own on every call.
        let _ = write!(request, "\r\ncontent-length: {}\r\n\r\n", bytes.len());
        request.extend_from_slice(&bytes);
        let gated = gated.as_ref();
        let call = async {
            if let Some(kept) = self.take(&target.connect) {
                match self.exchange(kept, &target, &request, gated, limit).await {
                    Ok(answer) => return Ok(answer),
                    // The executor closed the kept connection as this call took it: the
                    // request could not be written, so nothing reached the executor; or a call
                    // that changes nothing (not a `/run`) got no byte of answer. Once more, on
                    // a new connection.
                    Err(Failed::Unwritten(_)) => {}
                    Err(Failed::NoAnswer(_)) if gated.is_none() => {}
                    Err(failed) => return Err(failed.failure()),
                }
            }
            let fresh = connect(&target.connect).await?;
            self.exchange(fresh, &target, &request, gated, limit)
                .await
                .map_err(Failed::failure)
        };
        match tokio::time::timeout_at(deadline, call).await {
            Ok(answer) => answer,
            Err(_) => Err(timed_out()),
        }
    }

    /// Writes `request` on `conn` once `gate` (for a `/run`) lets it leave, and reads the
    /// answer; keeps the connection for another call if the answer allows it.
    async fn exchange(
        &self,
        mut conn: Conn,
        target: &Target<'_>,
        request: &[u8],
        gated: Option<&(SendGate, Arc<AtomicBool>)>,
        limit: usize,
    ) -> Result<Vec<u8>, Failed> {
        if let Some((gate, held_back)) = gated
            && !gate()
        {
            held_back.store(true, Ordering::SeqCst);
            return Err(Failed::HeldBack);
        }
        conn.stream
            .write_all(request)
            .await
            .map_err(Failed::Unwritten)?;
        match read_answer(&mut conn, limit).await {
            Ok((answer, keep)) => {
                if keep {
                    self.put(&target.connect, conn);
                }
                Ok(answer)
            }
            Err(e) if conn.buf.is_empty() => Err(Failed::NoAnswer(e)),
            Err(e) => Err(Failed::Other(e)),
        }
    }

    /// An idle connection to `host` that is still open, the most recently used first.
    fn take(&self, host: &str) -> Option<Conn> {
        let now = Instant::now();
        let mut idle = self.idle.lock().expect("idle connections lock");
        if now.duration_since(idle.swept) >= SWEEP_EVERY {
            idle.swept = now;
            let idle_for = self.idle_for;
            idle.hosts.retain(|_, conns| {
                conns.retain(|c| now.duration_since(c.idle_since) < idle_for);
                !conns.is_empty()
            });
        }
        let conns = idle.hosts.get_mut(host)?;
        while let Some(conn) = conns.pop() {
            if now.duration_since(conn.idle_since) < self.idle_for && still_open(&conn.stream) {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for the next call to `host`, unless `per_host` are kept already.
    fn put(&self, host: &str, mut conn: Conn) {
        conn.idle_since = Instant::now();
        conn.buf.clear();
        // A log page read on this connection does not stay allocated while it is idle.
        conn.buf.shrink_to(KEPT_BUFFER);
        let mut idle = self.idle.lock().expect("idle connections lock");
        match idle.hosts.get_mut(host) {
            Some(conns) if conns.len() >= self.per_host => {}
            Some(conns) => conns.push(conn),
            None => {
                idle.hosts.insert(host.to_owned(), vec![conn]);
            }
        }
    }
}

/// How a call on one connection failed.
enum Failed {
    /// Its gate held it back: nothing was written.
    HeldBack,
    /// The connection would not take the request.
    Unwritten(std::io::Error),
    /// The connection ended or failed before any byte of answer.
    NoAnswer(CallFailure),
    Other(CallFailure),
}

impl Failed {
    fn failure(self) -> CallFailure {
        match self {
            Failed::HeldBack => {
                read_failed("held back: this node may no longer send the run".into())
            }
            Failed::Unwritten(e) => read_failed(format!("request not written: {e}")),
            Failed::NoAnswer(f) | Failed::Other(f) => f,
        }
    }
}

/// Whether a kept connection is still open: the executor has not closed it, nor written to it
/// out of turn.
fn still_open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

async fn connect(host: &str) -> Result<Conn, CallFailure> {
    let stream = TcpStream::connect(host)
        .await
        .map_err(|e| CallFailure::Unreachable {
            cause: "connect",
            error: e.to_string(),
        })?;
    // Nagle would hold a request's last bytes back for the executor's acknowledgement.
    let _ = stream.set_nodelay(true);
    Ok(Conn {
        stream,
        buf: Vec::with_capacity(1024),
        idle_since: Instant::now(),
    })
}

/// Reads more of the answer into `conn`'s buffer; the executor's close is a failure here.
async fn read_more(conn: &mut Conn) -> Result<usize, CallFailure> {
    conn.buf.reserve(4096);
    match conn.stream.read_buf(&mut conn.buf).await {
        Ok(0) => Err(read_failed("the executor closed the connection".to_owned())),
        Ok(n) => Ok(n),
        Err(e) => Err(read_failed(format!("answer not read: {e}"))),
    }
}

/// Reads one answer on `conn`: its body, and whether the connection can carry another call.
async fn read_answer(conn: &mut Conn, limit: usize) -> Result<(Vec<u8>, bool), CallFailure> {
    let head = loop {
        match parse_head(&conn.buf).map_err(read_failed)? {
            Some(head) if (100..200).contains(&head.status) && head.status != 101 => {
                conn.buf.drain(..head.len);
            }
            Some(head) => break head,
            None if conn.buf.len() > HEAD_LIMIT => {
                return Err(read_failed("an answer head too long".to_owned()));
            }
            None => {
                read_more(conn).await?;
            }
        }
    };
    let status = StatusCode::from_u16(head.status)
        .map_err(|_| read_failed(format!("answer status {}", head.status)))?;
    let declared = match head.framing {
        Framing::Length(n) => Some(n as u64),
        _ => None,
    };
    check_head(status, declared, limit)?;
    let mut body = Vec::new();
    let end = match head.framing {
        Framing::Length(n) => {
            while conn.buf.len() < head.len + n {
                read_more(conn).await?;
            }
            body.extend_from_slice(&conn.buf[head.len..head.len + n]);
            head.len + n
        }
        Framing::Chunked => {
            let mut dechunk = Dechunk {
                state: Chunk::Size,
                pos: head.len,
            };
            while !dechunk.step(&conn.buf, &mut body, limit)? {
                read_more(conn).await?;
            }
            dechunk.pos
        }
        Framing::Close => {
            // Read whole into the buffer as the other framings are, so that a failure part
            // way is never taken for a connection that gave no byte of answer.
            while conn.buf.len() - head.len <= limit {
                conn.buf.reserve(4096);
                match conn.stream.read_buf(&mut conn.buf).await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => return Err(read_failed(format!("answer not read: {e}"))),
                }
            }
            append_within(&mut body, &conn.buf[head.len..], limit)?;
            return Ok((body, false));
        }
    };
    // Bytes past the answer were never asked for: the connection is not trusted again.
    Ok((body, head.keep_alive && conn.buf.len() == end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the executor a test plays does with each request it reads, in order across its
    /// connections.
    #[derive(Clone, Copy)]
    enum Act {
        /// Writes this answer and keeps the connection.
        Answer(&'static str),
        /// Writes this answer and closes the connection.
        AnswerAndClose(&'static str),
        /// Closes the connection without a byte of answer.
        Vanish,
    }

    /// An executor on a loopback port playing `acts`; its base URL, and the connections and
    /// requests it took, and a signal each time it closed a connection.
    struct Played {
        url: String,
        connections: Arc<std::sync::atomic::AtomicUsize>,
        requests: Arc<std::sync::atomic::AtomicUsize>,
        closed: Arc<tokio::sync::Notify>,
    }

    async fn play(acts: Vec<Act>) -> Played {
        use std::sync::atomic::AtomicUsize;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(tokio::sync::Notify::new());
        let acts = Arc::new(acts);
        let (c, r, n) = (connections.clone(), requests.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (acts, r, n) = (acts.clone(), r.clone(), n.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: its head, then its body by its length.
                        let (head, length) = loop {
                            let mut headers = [httparse::EMPTY_HEADER; 16];
                            let mut req = httparse::Request::new(&mut headers);
                            if let Ok(httparse::Status::Complete(head)) = req.parse(&buf) {
                                let length = req
                                    .headers
                                    .iter()
                                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                                    .map(|h| std::str::from_utf8(h.value).unwrap().parse())
                                    .transpose()
                                    .unwrap()
                                    .unwrap_or(0usize);
                                break (head, length);
                            }
                            if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                                return;
                            }
                        };
                        while buf.len() < head + length {
                            if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                                return;
                            }
                        }
                        buf.drain(..head + length);
                        let act = acts[r.fetch_add(1, Ordering::SeqCst)];
                        let (answer, close) = match act {
                            Act::Answer(a) => (a, false),
                            Act::AnswerAndClose(a) => (a, true),
                            Act::Vanish => ("", true),
                        };
                        socket.write_all(answer.as_bytes()).await.expect("answer");
                        if close {
                            drop(socket);
                            n.notify_one();
                            return;
                        }
                    }
                });
            }
        });
        Played {
            url,
            connections,
            requests,
            closed,
        }
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n{\"code\":200}";

    async fn post(client: &Http1, url: &str, gate: Option<SendGate>) -> Result<Vec<u8>, String> {
        let headers = CallHeaders {
            token: "tok",
            app_name: None,
        };
        let bytes = Some(bytes::Bytes::from_static(b"{}"));
        let body = match gate {
            Some(gate) => CallBody::Gated(super::super::transport::GatedBody {
                bytes,
                gate,
                held_back: Arc::default(),
            }),
            None => CallBody::Bytes(bytes),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        client
            .post(&format!("{url}/run"), headers, body, 1024, deadline)
            .await
            .map_err(|f| format!("{f:?}"))
    }

    fn client() -> Http1 {
        Http1::new(4, Duration::from_secs(20))
    }

    #[tokio::test]
    async fn answers_read_by_length_chunks_or_close_and_kept_only_when_they_allow() {
        let executor = play(vec![
            Act::Answer(OK),
            Act::Answer("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nab"),
            Act::Answer("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n"),
            Act::AnswerAndClose("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\nz"),
            Act::AnswerAndClose("HTTP/1.1 200 OK\r\n\r\nuntil the end"),
            Act::Answer(OK),
        ])
        .await;
        let client = client();
        let mut bodies = Vec::new();
        for _ in 0..6 {
            let body = post(&client, &executor.url, None).await.expect("answered");
            bodies.push(String::from_utf8(body).expect("text"));
        }
        assert_eq!(
            bodies,
            [
                "{\"code\":200}",
                "ab",
                "abc",
                "z",
                "until the end",
                "{\"code\":200}"
            ]
        );
        // The first three on one connection; each answer that closed its own took it along.
        assert_eq!(executor.connections.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_kept_connection_the_executor_closed_does_not_fail_the_next_call() {
        let executor = play(vec![Act::AnswerAndClose(OK), Act::Answer(OK)]).await;
        let client = client();
        let closed = executor.closed.notified();
        post(&client, &executor.url, None).await.expect("first");
        // The answer did not say that the connection closes; the executor closed it after.
        closed.await;
        post(&client, &executor.url, None).await.expect("second");
        assert_eq!(executor.connections.load(Ordering::SeqCst), 2);
    }

    /// A kept connection that ends without a byte of answer once the request was written: the
    /// executor may have taken the request. A `/run` is not sent again (it could run twice);
    /// a call that changes nothing is.
    #[tokio::test]
    async fn a_run_whose_connection_ended_without_an_answer_is_not_sent_again() {
        let always: SendGate = Arc::new(|| true);
        // (gated, the second call's outcome, requests, connections)
        for (gated, answered, requests, connections) in [(true, false, 2, 1), (false, true, 3, 2)] {
            let executor = play(vec![Act::Answer(OK), Act::Vanish, Act::Answer(OK)]).await;
            let client = client();
            post(&client, &executor.url, None).await.expect("first");
            let second = post(&client, &executor.url, gated.then(|| always.clone())).await;
            assert_eq!(second.is_ok(), answered, "gated {gated}: {second:?}");
            assert_eq!(
                executor.requests.load(Ordering::SeqCst),
                requests,
                "gated {gated}"
            );
            assert_eq!(
                executor.connections.load(Ordering::SeqCst),
                connections,
                "gated {gated}"
            );
        }
    }

    #[tokio::test]
    async fn a_bad_url_or_header_value_sends_nothing() {
        let executor = play(vec![]).await;
        let client = client();
        let bad_url = format!("{}/r\r\nx: 1", executor.url);
        let headers = CallHeaders {
            token: "tok\r\nx-injected: 1",
            app_name: None,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        for (url, headers) in [
            (
                bad_url.as_str(),
                CallHeaders {
                    token: "",
                    app_name: None,
                },
            ),
            (&format!("{}/run", executor.url), headers),
        ] {
            let got = client
                .post(url, headers, CallBody::Bytes(None), 1024, deadline)
                .await;
            assert!(got.is_err(), "{url:?}");
        }
        assert_eq!(executor.connections.load(Ordering::SeqCst), 0);
    }
}
