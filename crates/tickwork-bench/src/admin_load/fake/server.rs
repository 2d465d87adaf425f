//! The fake executor's own HTTP/1.1 server (`--fake-server raw`, the default): a task per
//! connection reads requests with `httparse` and writes each answer whole, without hyper or a
//! router, so that the executor's share of the shared cores is as small as an executor's can
//! be and what the bench measures is the admin's.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;
use tickwork_protocol::ACCESS_TOKEN_HEADER;

/// The content type of every answer, as XXL-JOB executors send it.
pub(super) const CONTENT_TYPE: &str = "application/json;charset=UTF-8";
/// Longest request head: a bigger one is refused.
const HEAD_LIMIT: usize = 16 * 1024;
/// Longest request body: a bigger one is refused.
const BODY_LIMIT: usize = 1024 * 1024;

/// Which server the fake executor answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FakeServer {
    /// Its own HTTP/1.1 server: requests read with `httparse`, each answer written whole.
    Raw,
    /// axum on the project's server (`tickwork-serve`), as before: about twice the CPU a call.
    Axum,
}

/// Serves `shared`'s routes on `listener` until `stop`, then waits for its connections.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((socket, _)) => {
                connections.spawn(connection(socket, Arc::clone(&shared), stop.clone()));
            }
            // Out of descriptors for a moment: the admin tries again on its next call.
            Err(e) => eprintln!("fake executor: accept failed: {e}"),
        }
    }
    connections.close();
    connections.wait().await;
}

/// What one complete request in the buffer asks.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    Run,
    Ok,
    NotFound,
}

/// One request read from the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    ask: Ask,
    /// Bytes of head and body: what to drop from the buffer once answered.
    len: usize,
    /// Where the body is in the buffer.
    body: std::ops::Range<usize>,
    /// Where the access token's value is in the buffer, when there is one.
    token: Option<std::ops::Range<usize>>,
    /// The client asked for the connection to end after this answer (or spoke HTTP/1.0).
    close: bool,
}

/// Why a request cannot be answered: the connection gets a 400 and ends.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    Head,
    TooBig,
    Chunked,
}

/// The first request in `buf`: `Ok(None)` while it is not complete.
fn request(buf: &[u8]) -> Result<Option<Request>, Refused> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > HEAD_LIMIT => return Err(Refused::TooBig),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Refused::Head),
    };
    let mut length = 0;
    let mut token = None;
    let mut close = req.version != Some(1);
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(Refused::Head)?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // The admin sends every body with its length.
            return Err(Refused::Chunked);
        } else if h.name.eq_ignore_ascii_case(ACCESS_TOKEN_HEADER) {
            let at = h.value.as_ptr() as usize - buf.as_ptr() as usize;
            token = Some(at..at + h.value.len());
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.eq_ignore_ascii_case(b"close");
        }
    }
    if length > BODY_LIMIT {
        return Err(Refused::TooBig);
    }
    if buf.len() < head + length {
        return Ok(None);
    }
    let ask = match (req.method, req.path) {
        (Some("POST"), Some("/run")) => Ask::Run,
        (Some("POST"), Some("/beat" | "/idleBeat" | "/kill")) => Ask::Ok,
        _ => Ask::NotFound,
    };
    Ok(Some(Request {
        ask,
        len: head + length,
        body: head..head + length,
        token,
        close,
    }))
}

/// Appends an answer with `status` and `body` to `out`.
fn append_answer(out: &mut Vec<u8>, status: &str, body: &[u8], close: bool) {
    use std::io::Write;
    let connection = if close { "close" } else { "keep-alive" };
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: {CONTENT_TYPE}\r\ncontent-length: {}\r\n\
         connection: {connection}\r\n\r\n",
        body.len()
    );
    out.extend_from_slice(body);
}

/// Answers the requests of one connection, in order, until it ends, one is refused or `stop`.
async fn connection(mut socket: TcpStream, shared: Arc<Shared>, stop: CancellationToken) {
    let _ = socket.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(512);
    loop {
        // Every complete request in the buffer, answered in one write.
        let mut close = false;
        let mut used = 0;
        while !close {
            let req = match request(&buf[used..]) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(why) => {
                    let msg = format!("bad request: {why:?}");
                    append_answer(&mut out, "400 Bad Request", msg.as_bytes(), true);
                    close = true;
                    break;
                }
            };
            let at = |r: std::ops::Range<usize>| &buf[used + r.start..used + r.end];
            let token = req.token.clone().map(at);
            let body = match req.ask {
                Ask::Run => shared.on_run(token, at(req.body.clone())),
                Ask::Ok => shared.on_ok(token),
                Ask::NotFound => {
                    append_answer(&mut out, "404 Not Found", b"not found", req.close);
                    used += req.len;
                    close = req.close;
                    continue;
                }
            };
            append_answer(&mut out, "200 OK", &body, req.close);
            used += req.len;
            close = req.close;
        }
        buf.drain(..used);
        if !out.is_empty() {
            if socket.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
        let read = tokio::select! {
            _ = stop.cancelled() => return,
            r = socket.read_buf(&mut buf) => r,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_whole_or_not_at_all() {
        let run = b"POST /run HTTP/1.1\r\nhost: x\r\nXXL-JOB-ACCESS-TOKEN: t\r\ncontent-length: 2\r\n\r\n{}";
        let whole = request(run).unwrap().unwrap();
        assert_eq!(whole.ask, Ask::Run);
        assert_eq!(whole.len, run.len());
        assert_eq!(&run[whole.body.clone()], b"{}");
        assert_eq!(&run[whole.token.clone().unwrap()], b"t");
        assert!(!whole.close);
        // Every shorter prefix is incomplete, not an error.
        for cut in 0..run.len() {
            assert_eq!(request(&run[..cut]), Ok(None), "cut at {cut}");
        }
        // (request, what it asks, whether the connection ends after it)
        for (req, ask, close) in [
            (&b"POST /beat HTTP/1.1\r\n\r\n"[..], Ask::Ok, false),
            (
                b"POST /kill HTTP/1.1\r\nConnection: close\r\n\r\n",
                Ask::Ok,
                true,
            ),
            (b"POST /idleBeat HTTP/1.0\r\n\r\n", Ask::Ok, true),
            (b"GET /run HTTP/1.1\r\n\r\n", Ask::NotFound, false),
            (b"POST /log HTTP/1.1\r\n\r\n", Ask::NotFound, false),
        ] {
            let r = request(req).unwrap().unwrap();
            assert_eq!(
                (r.ask, r.close),
                (ask, close),
                "{}",
                String::from_utf8_lossy(req)
            );
        }
    }

    #[test]
    fn bad_requests_are_refused() {
        for (req, why) in [
            (
                &b"POST /run HTTP/1.1\r\ncontent-length: x\r\n\r\n"[..],
                Refused::Head,
            ),
            (
                b"POST /run HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
                Refused::Chunked,
            ),
            (
                b"POST /run HTTP/1.1\r\ncontent-length: 99999999\r\n\r\n",
                Refused::TooBig,
            ),
            (b"\x01\x02 nonsense\r\n\r\n", Refused::Head),
        ] {
            assert_eq!(request(req), Err(why), "{}", String::from_utf8_lossy(req));
        }
        let endless = [b'a'; HEAD_LIMIT + 1];
        assert_eq!(
            request(
                b"POST /run HTTP/1.1\r\nx: "
                    .iter()
                    .chain(&endless)
                    .copied()
                    .collect::<Vec<_>>()
                    .as_slice()
            ),
            Err(Refused::TooBig)
        );
    }

    /// Reads answers from `socket` until `n` are whole; their status codes and bodies.
    async fn answers(socket: &mut TcpStream, n: usize) -> Vec<(u16, String)> {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while got.len() < n {
            let head = crate::admin_load::floor::answer_head(&buf).expect("an answer");
            if let Some(head) = head
                && buf.len() >= head.at + head.length
            {
                let body = &buf[head.at..head.at + head.length];
                got.push((head.status, String::from_utf8_lossy(body).into_owned()));
                buf.drain(..head.at + head.length);
                continue;
            }
            assert!(socket.read_buf(&mut buf).await.unwrap() > 0, "closed early");
        }
        got
    }

    #[tokio::test]
    async fn pipelined_calls_are_answered_in_order_and_only_runs_with_the_token_recorded() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exec = super::super::start(super::super::FakeSpec {
            index: 0,
            admins: &[],
            token: "secret",
            app: "test",
            server: FakeServer::Raw,
        })
        .await
        .unwrap();
        let addr = exec
            .address
            .trim_start_matches("http://")
            .trim_end_matches('/');
        let mut socket = TcpStream::connect(addr).await.unwrap();
        let run = tickwork_protocol::encode(&tickwork_protocol::TriggerParam {
            job_id: 7,
            log_id: 70,
            log_date_time: 1_000,
            ..Default::default()
        });
        let post = |path: &str, token: &str, body: &[u8]| {
            let mut r = format!(
                "POST {path} HTTP/1.1\r\nhost: x\r\n{ACCESS_TOKEN_HEADER}: {token}\r\n\
                 content-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            r.extend_from_slice(body);
            r
        };
        let mut calls = post("/run", "secret", &run);
        calls.extend(post("/run", "wrong", &run));
        calls.extend(post("/beat", "secret", b""));
        calls.extend(post("/nothing", "secret", b""));
        calls.extend(post("/run", "secret", b"{not json"));
        socket.write_all(&calls).await.unwrap();
        let got = answers(&mut socket, 5).await;
        let codes: Vec<_> = got.iter().map(|(status, _)| *status).collect();
        assert_eq!(codes, [200, 200, 200, 404, 200]);
        assert!(got[0].1.contains("\"code\":200"), "{:?}", got[0]);
        assert!(got[1].1.contains("\"code\":500"), "{:?}", got[1]);
        assert!(got[2].1.contains("\"code\":200"), "{:?}", got[2]);
        assert!(got[4].1.contains("\"code\":500"), "{:?}", got[4]);
        // The connection stays open: a bad request on it gets a 400, then its end.
        socket.write_all(b"BAD\x01\r\n\r\n").await.unwrap();
        assert_eq!(answers(&mut socket, 1).await[0].0, 400);
        let mut rest = Vec::new();
        assert_eq!(socket.read_to_end(&mut rest).await.unwrap(), 0);
        let records = exec.finish().await;
        let seen: Vec<_> = records.iter().map(|a| (a.job_id, a.log_id)).collect();
        assert_eq!(seen, [(7, 70)]);
    }
}
