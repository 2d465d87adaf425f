//! A webhook receiver: a real HTTP server on a free loopback port that records every request
//! it gets, in order, answers each path with a script of statuses or holds its answers until
//! released, and lets a test wait (on a notification, not a timer) until a path got its n-th
//! request.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;
use tokio::sync::Notify;

/// One request a [`Receiver`] got.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// The query string, without its `?` ("" when there is none).
    pub query: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: String,
    /// It came while its path was held ([`Receiver::hold`]): its sender waited for the answer
    /// until the release.
    pub held: bool,
}

impl Received {
    /// The body as JSON; panics when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not a JSON body ({e}): {}", self.body))
    }
}

/// A running receiver; the server stops when the last clone is dropped.
///
/// Every path answers 200 with `{"errcode":0,"code":0,"msg":"ok"}` (what the chat services'
/// webhooks answer), unless [`Receiver::script`] gave it statuses; a failure status answers
/// "receiver says no".
#[derive(Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    inner: Arc<Inner>,
    _server: Arc<Server>,
}

#[derive(Default)]
struct Inner {
    requests: Mutex<Vec<Received>>,
    scripts: Mutex<HashMap<String, Vec<u16>>>,
    held: Mutex<HashSet<String>>,
    changed: Notify,
}

/// Aborts the server's task when dropped.
struct Server(tokio::task::JoinHandle<()>);

impl Drop for Server {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

async fn record(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let path = uri.path().to_owned();
    let held = lock(&inner.held).contains(&path);
    let status = match lock(&inner.scripts).get_mut(&path) {
        Some(script) if script.len() > 1 => script.remove(0),
        Some(script) => script.first().copied().unwrap_or(200),
        None => 200,
    };
    lock(&inner.requests).push(Received {
        method: method.to_string(),
        path: path.clone(),
        query: uri.query().unwrap_or("").to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body,
        held,
    });
    inner.changed.notify_waiters();
    loop {
        // Registered before the check, so that a release between the two is not missed.
        let released = inner.changed.notified();
        if !lock(&inner.held).contains(&path) {
            break;
        }
        released.await;
    }
    let status = StatusCode::from_u16(status).expect("a valid status");
    let reply = if status.is_success() {
        r#"{"errcode":0,"code":0,"msg":"ok"}"#
    } else {
        "receiver says no"
    };
    (status, reply.to_owned())
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("receiver listener");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let inner = Arc::new(Inner::default());
        let app = axum::Router::new()
            .fallback(record)
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            base,
            inner,
            _server: Arc::new(Server(server)),
        }
    }

    /// Answers `path` with these statuses, one per request, the last one repeating.
    pub fn script(&self, path: &str, statuses: &[u16]) {
        lock(&self.inner.scripts).insert(path.to_owned(), statuses.to_vec());
    }

    /// Holds the answers to `path`: its requests are recorded as they come, and each waits for
    /// its answer until [`Receiver::release`].
    pub fn hold(&self, path: &str) {
        lock(&self.inner.held).insert(path.to_owned());
    }

    /// Answers the held requests to `path`, and the ones to come at once.
    pub fn release(&self, path: &str) {
        lock(&self.inner.held).remove(path);
        self.inner.changed.notify_waiters();
    }

    /// The URL of `path` (which may carry a query) on this receiver.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Every request so far, in the order received.
    pub fn all(&self) -> Vec<Received> {
        lock(&self.inner.requests).clone()
    }

    /// Every request to `path` so far, in the order received.
    pub fn requests(&self, path: &str) -> Vec<Received> {
        lock(&self.inner.requests)
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Waits until `path` got at least `n` requests and returns them all (the n-th is at
    /// `n - 1`); panics after `timeout`, saying how many came and which paths were asked.
    pub async fn wait_for(&self, path: &str, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before the check, so that a request between the two is not missed.
            let changed = self.inner.changed.notified();
            let got = self.requests(path);
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                let paths: Vec<String> = self.all().into_iter().map(|r| r.path).collect();
                panic!(
                    "timed out after {timeout:?} waiting for {n} request(s) to {path}; got {}; \
                     all requests so far: {paths:?}",
                    got.len()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A POST over a plain socket; the answer's status line.
    async fn post(rx: &Receiver, path: &str, body: &str) -> String {
        let addr = rx.base.trim_start_matches("http://");
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nX-Seq: {body}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.expect("send");
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.expect("answer");
        answer.lines().next().unwrap_or("").to_owned()
    }

    #[tokio::test]
    async fn requests_are_recorded_in_order() {
        let rx = Receiver::start().await;
        for (path, body) in [("/a", "1"), ("/b?x=y", "2"), ("/a", "3")] {
            assert_eq!(post(&rx, path, body).await, "HTTP/1.1 200 OK");
        }
        let all: Vec<(String, String)> = rx.all().into_iter().map(|r| (r.path, r.body)).collect();
        let want = [("/a", "1"), ("/b", "2"), ("/a", "3")].map(|(p, b)| (p.into(), b.into()));
        assert_eq!(all, want);
        let a = rx.wait_for("/a", 2, Duration::from_secs(10)).await;
        assert_eq!(a[1].body, "3", "the second request to /a");
        assert_eq!(a[1].headers["x-seq"], "3");
        assert_eq!(a[1].method, "POST");
        assert_eq!(rx.requests("/b")[0].query, "x=y");
    }

    #[tokio::test]
    async fn a_wait_ends_when_the_request_comes() {
        let rx = Receiver::start().await;
        let sender = rx.clone();
        let send = tokio::spawn(async move { post(&sender, "/later", "{\"n\":1}").await });
        let got = rx.wait_for("/later", 1, Duration::from_secs(30)).await;
        assert_eq!(got[0].json()["n"], 1);
        send.await.expect("sent");
    }

    #[tokio::test]
    async fn scripts_answer_in_turn_and_the_last_repeats() {
        let rx = Receiver::start().await;
        rx.script("/flaky", &[500, 200]);
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(post(&rx, "/flaky", "x").await);
        }
        assert_eq!(
            statuses,
            [
                "HTTP/1.1 500 Internal Server Error",
                "HTTP/1.1 200 OK",
                "HTTP/1.1 200 OK"
            ]
        );
    }

    #[tokio::test]
    async fn held_requests_are_answered_on_release() {
        let rx = Receiver::start().await;
        rx.hold("/slow");
        let sender = rx.clone();
        let send = tokio::spawn(async move { post(&sender, "/slow", "1").await });
        let got = rx.wait_for("/slow", 1, Duration::from_secs(30)).await;
        assert!(got[0].held);
        assert!(!send.is_finished(), "answered while held");
        rx.release("/slow");
        assert_eq!(send.await.expect("sent"), "HTTP/1.1 200 OK");
        assert_eq!(post(&rx, "/slow", "2").await, "HTTP/1.1 200 OK");
        assert!(!rx.requests("/slow")[1].held);
    }

    #[tokio::test]
    #[should_panic(
        expected = "waiting for 1 request(s) to /never; got 0; all requests so far: [\"/other\"]"
    )]
    async fn a_timeout_says_what_came() {
        let rx = Receiver::start().await;
        post(&rx, "/other", "").await;
        rx.wait_for("/never", 1, Duration::from_millis(50)).await;
    }
}
