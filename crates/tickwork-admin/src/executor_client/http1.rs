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

/// The most an answer's head may take; an executor's is a few lines.
const HEAD_LIMIT: usize = 16 * 1024;
/// Most header lines read in an answer's head.
const HEADERS: usize = 32;
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

/// Where a URL sends a call: what to connect to, the `Host` header, the request target.
#[derive(Debug, PartialEq, Eq)]
struct Target<'a> {
    connect: String,
    host: &'a str,
    path: &'a str,
}

/// `http://host[:port][/path]` split for a call; `None` for any other form, and for a byte
/// that has no place in a request line or a header (a space, a control character), so that an
/// address cannot write headers of its own.
fn target(url: &str) -> Option<Target<'_>> {
    let rest = url.strip_prefix("http://")?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    // User info is not sent on; the host is what follows it.
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if host.is_empty() {
        return None;
    }
    let has_port = match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    };
    let connect = if has_port {
        host.to_owned()
    } else {
        format!("{host}:80")
    };
    Some(Target {
        connect,
        host,
        path,
    })
}

/// Whether a header's value can be written as it is: no line break or other control byte.
fn header_value_ok(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    /// At the connection's end (no length, not chunked): the connection is not kept.
    Close,
}

/// An answer's head, as far as a call needs it.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    framing: Framing,
    keep_alive: bool,
    /// Bytes of the buffer the head took.
    len: usize,
}

/// Reads the answer's head at the start of `buf`: `Ok(None)` until it is whole. Informational
/// answers (`1xx`) before it are skipped by the caller, which drops their bytes.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS];
    let mut answer = httparse::Response::new(&mut headers);
    let len = match answer.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("unreadable answer head: {e}")),
    };
    let status = answer.code.unwrap_or(0);
    let mut keep_alive = answer.version == Some(1);
    let mut length = None;
    let mut chunked = false;
    for h in answer.headers.iter() {
        let value = std::str::from_utf8(h.value).map_err(|_| "a header not in UTF-8")?;
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| format!("a content-length that is no number: {value}"))?;
            if length.is_some_and(|m| m != n) {
                return Err("two different content-lengths".to_owned());
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        }
    }
    let framing = if matches!(status, 204 | 304) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        keep_alive = false;
        Framing::Close
    };
    Ok(Some(Head {
        status,
        framing,
        keep_alive,
        len,
    }))
}

/// Where a chunked body's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// At a chunk's size line.
    Size,
    /// Inside a chunk, with this many bytes of it to come.
    Data(usize),
    /// After a chunk's bytes, at the line break that ends it.
    DataEnd,
    /// After the last chunk, at the trailer's lines.
    Trailer,
}

/// Decodes a chunked body incrementally: each step reads what `buf` holds from `pos` on.
struct Dechunk {
    state: Chunk,
    pos: usize,
}

impl Dechunk {
    /// Appends the body's bytes in `buf` to `out`; `Ok(true)` once the body ended (then `pos`
    /// is its end), `Ok(false)` when more is needed.
    fn step(&mut self, buf: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<bool, CallFailure> {
        let bad = |what: &str| read_failed(format!("bad chunked answer: {what}"));
        loop {
            match self.state {
                Chunk::Size | Chunk::Trailer => {
                    let Some(end) = find_crlf(&buf[self.pos..]) else {
                        return if buf.len() - self.pos > HEAD_LIMIT {
                            Err(bad("a line too long"))
                        } else {
                            Ok(false)
                        };
                    };
                    let line = &buf[self.pos..self.pos + end];
                    self.pos += end + 2;
                    if self.state == Chunk::Trailer {
                        if line.is_empty() {
                            return Ok(true);
                        }
                        continue;
                    }
                    let size = line.split(|&b| b == b';').next().unwrap_or_default();
                    let size = std::str::from_utf8(size)
                        .ok()
                        .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                        .ok_or_else(|| bad("a chunk size that is no number"))?;
                    self.state = if size == 0 {
                        Chunk::Trailer
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let here = left.min(buf.len() - self.pos);
                    if here == 0 {
                        return Ok(false);
                    }
                    append_within(out, &buf[self.pos..self.pos + here], limit)?;
                    self.pos += here;
                    self.state = if here == left {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - here)
                    };
                }
                Chunk::DataEnd => {
                    if buf.len() - self.pos < 2 {
                        return Ok(false);
                    }
                    if &buf[self.pos..self.pos + 2] != b"\r\n" {
                        return Err(bad("a chunk longer than its size"));
                    }
                    self.pos += 2;
                    self.state = Chunk::Size;
                }
            }
        }
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
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
        let other = |error: String| CallFailure::Unreachable {
            cause: "other",
            error,
        };
        let target = target(url).ok_or_else(|| other(format!("not a callable url: {url:?}")))?;
        let mut request = Vec::with_capacity(512);
        request.extend_from_slice(b"POST ");
        request.extend_from_slice(target.path.as_bytes());
        request.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        request.extend_from_slice(target.host.as_bytes());
        for (name, value) in headers.pairs() {
            if !header_value_ok(value) {
                return Err(other(format!("a {name} header that cannot be sent")));
            }
            request.extend_from_slice(b"\r\n");
            request.extend_from_slice(name.as_bytes());
            request.extend_from_slice(b": ");
            request.extend_from_slice(value.as_bytes());
        }
        let (bytes, gated) = match body {
            CallBody::Bytes(bytes) => (bytes, None),
            CallBody::Gated(g) => (g.bytes, Some((g.gate, g.held_back))),
        };
        let bytes = bytes.unwrap_or_default();
        request
            .extend_from_slice(format!("\r\ncontent-length: {}\r\n\r\n", bytes.len()).as_bytes());
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
            append_within(&mut body, &conn.buf[head.len..], limit)?;
            loop {
                conn.buf.clear();
                conn.buf.reserve(4096);
                match conn.stream.read_buf(&mut conn.buf).await {
                    Ok(0) => break,
                    Ok(_) => append_within(&mut body, &conn.buf, limit)?,
                    Err(e) => return Err(read_failed(format!("answer not read: {e}"))),
                }
            }
            return Ok((body, false));
        }
    };
    // Bytes past the answer were never asked for: the connection is not trusted again.
    Ok((body, head.keep_alive && conn.buf.len() == end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_what_to_connect_to_the_host_and_the_path() {
        // (url, connect, host, path); None: refused.
        for (url, want) in [
            ("http://h:9999/run", Some(("h:9999", "h:9999", "/run"))),
            ("http://h/ctx/beat", Some(("h:80", "h", "/ctx/beat"))),
            ("http://h:1", Some(("h:1", "h:1", "/"))),
            ("http://[::1]:9/run", Some(("[::1]:9", "[::1]:9", "/run"))),
            ("http://[::1]/run", Some(("[::1]:80", "[::1]", "/run"))),
            ("http://u:p@h:9/run", Some(("h:9", "h:9", "/run"))),
            ("https://h:9/run", None),
            ("http://", None),
            ("http://@/run", None),
            ("http://h:9/r un", None),
            ("http://h:9/run\r\nx-injected: 1", None),
            ("http://h:9/ré", None),
        ] {
            let got = target(url).map(|t| (t.connect, t.host, t.path));
            let want = want.map(|(c, h, p)| (c.to_owned(), h, p));
            assert_eq!(got, want, "{url:?}");
        }
    }

    #[test]
    fn header_values_with_a_line_break_are_not_written() {
        for (value, ok) in [
            ("tok-123", true),
            ("a b\tc", true),
            ("a\r\nx: y", false),
            ("a\nb", false),
            ("a\0b", false),
        ] {
            assert_eq!(header_value_ok(value), ok, "{value:?}");
        }
    }

    #[test]
    fn answer_heads_give_status_framing_and_keep_alive() {
        use Framing::*;
        // (head, status, framing, keep-alive)
        for (head, status, framing, keep) in [
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
                200,
                Length(12),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\n",
                200,
                Length(3),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n",
                200,
                Length(3),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n",
                200,
                Length(3),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                200,
                Chunked,
                true,
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", 200, Close, false),
            ("HTTP/1.1 204 No Content\r\n\r\n", 204, Length(0), true),
            (
                "HTTP/1.1 302 Found\r\nLocation: x\r\n\r\n",
                302,
                Close,
                false,
            ),
        ] {
            let got = parse_head(head.as_bytes())
                .expect("readable")
                .expect("whole");
            assert_eq!(
                (got.status, got.framing, got.keep_alive, got.len),
                (status, framing, keep, head.len()),
                "{head:?}"
            );
        }
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    /// A chunked body decoded whole and fed in every split, so that a read that ends anywhere
    /// in it gives the same body.
    #[test]
    fn chunked_bodies_decode_however_they_arrive() {
        // (wire, body); None: refused.
        for (wire, want) in [
            ("5\r\nhello\r\n0\r\n\r\n", Some("hello")),
            (
                "2;ext=1\r\nhe\r\n3\r\nllo\r\n0\r\nx-trailer: 1\r\n\r\n",
                Some("hello"),
            ),
            ("0\r\n\r\n", Some("")),
            ("A\r\n0123456789\r\n0\r\n\r\n", Some("0123456789")),
            ("zz\r\nhello\r\n0\r\n\r\n", None),
            ("2\r\nhello\r\n0\r\n\r\n", None),
        ] {
            let wire = wire.as_bytes();
            for split in 0..=wire.len() {
                let mut dechunk = Dechunk {
                    state: Chunk::Size,
                    pos: 0,
                };
                let mut body = Vec::new();
                let first = dechunk.step(&wire[..split], &mut body, 1024);
                let got = match first {
                    Ok(true) => Ok(true),
                    Ok(false) => dechunk.step(wire, &mut body, 1024),
                    Err(e) => Err(e),
                };
                match want {
                    Some(text) => {
                        assert!(matches!(got, Ok(true)), "{wire:?} split at {split}");
                        assert_eq!(body, text.as_bytes(), "{wire:?} split at {split}");
                        assert_eq!(dechunk.pos, wire.len(), "{wire:?} split at {split}");
                    }
                    None => assert!(got.is_err(), "{wire:?} split at {split}"),
                }
            }
        }
        // The limit holds for a chunked body as for any other.
        let mut dechunk = Dechunk {
            state: Chunk::Size,
            pos: 0,
        };
        let got = dechunk.step(b"5\r\nhello\r\n0\r\n\r\n", &mut Vec::new(), 4);
        assert!(matches!(got, Err(CallFailure::TooLarge)));
    }

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
