//! The admin's client of executors: `/run`, `/beat`, `/idleBeat`, `/kill` and `/log` over
//! HTTP with the access token, any executor generation (Java 2.3 to 3.4, Tickwork).

use std::time::Duration;

use serde::de::DeserializeOwned;
use tickwork_protocol::{
    ACCESS_TOKEN_HEADER, Envelope, IdleBeatParam, KillParam, LogParam, LogResult, TriggerParam,
};
use tracing::{debug, warn};

/// The outcome of one call: the executor's envelope code and message, or a transport failure
/// (unreachable, redirect, non-200 status, over-size or unreadable body), which counts as
/// code 500.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome<T = serde_json::Value> {
    pub code: i32,
    pub msg: Option<String>,
    pub payload: Option<T>,
}

impl<T> CallOutcome<T> {
    pub fn is_success(&self) -> bool {
        self.code == tickwork_protocol::CODE_SUCCESS
    }

    fn transport(msg: String) -> Self {
        CallOutcome {
            code: tickwork_protocol::CODE_FAIL,
            msg: Some(msg),
            payload: None,
        }
    }
}

/// Calls executors. Cheap to clone: connections are pooled and kept alive.
#[derive(Clone)]
pub struct ExecutorClient {
    http: reqwest::Client,
    token: String,
}

impl ExecutorClient {
    /// A client that sends `token` (when not empty) and gives up on a call after `timeout`
    /// (XXL-JOB's default is 3 s: a slow `/run` answer is a trigger failure), keeping up to
    /// `idle_per_executor` idle connections to each executor.
    pub fn new(token: &str, timeout: Duration, idle_per_executor: usize) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(idle_per_executor)
            // Below the executor's default header-read timeout (30 s), which also closes idle
            // connections: a job every 30 s would otherwise race the close.
            .pool_idle_timeout(Duration::from_secs(20))
            .tcp_nodelay(true)
            // A redirect would carry `/run` and the access token to another host.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the HTTP client's fixed configuration is valid");
        ExecutorClient {
            http,
            token: token.to_owned(),
        }
    }

    /// The same client (same connections) sending `token` instead: the token of the executor
    /// group being called.
    pub fn with_token(&self, token: &str) -> Self {
        let mut c = self.clone();
        c.token = token.to_owned();
        c
    }

    /// The client that calls `group`'s executors: with the group's own token, or this one's
    /// (the global token) when it has none.
    pub(crate) fn for_group(&self, group: &tickwork_store::Group) -> Self {
        match &group.access_token {
            Some(token) => self.with_token(token),
            None => self.clone(),
        }
    }

    /// `POST <address>/run`: code 200 means queued, not done.
    pub async fn run(&self, address: &str, param: &TriggerParam) -> CallOutcome {
        self.call(address, "run", Some(tickwork_protocol::encode(param)))
            .await
    }

    /// `POST <address>/beat` with no body: is the executor alive?
    pub async fn beat(&self, address: &str) -> CallOutcome {
        self.call(address, "beat", None).await
    }

    /// `POST <address>/idleBeat`: is the job idle there?
    pub async fn idle_beat(&self, address: &str, job_id: i32) -> CallOutcome {
        let body = tickwork_protocol::encode(&IdleBeatParam { job_id });
        self.call(address, "idleBeat", Some(body)).await
    }

    /// `POST <address>/kill`: kill what the job's worker runs and drop its queue.
    pub async fn kill(&self, address: &str, job_id: i32) -> CallOutcome {
        let body = tickwork_protocol::encode(&KillParam { job_id });
        self.call(address, "kill", Some(body)).await
    }

    /// `POST <address>/log`: read a run's log from a line on.
    pub async fn log(&self, address: &str, param: &LogParam) -> CallOutcome<LogResult> {
        self.call(address, "log", Some(tickwork_protocol::encode(param)))
            .await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        address: &str,
        method: &str,
        body: Option<Vec<u8>>,
    ) -> CallOutcome<T> {
        let url = join(address, method);
        let mut req = self
            .http
            .post(&url)
            .header("Content-Type", "application/json;charset=UTF-8");
        if !self.token.is_empty() {
            req = req.header(ACCESS_TOKEN_HEADER, &self.token);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        let mut resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return no_answer(&url, &e),
        };
        let status = resp.status();
        if status.is_redirection() {
            // Never followed: that would resend the run and the token to another host.
            return CallOutcome::transport(format!(
                "{url}: executor answered a redirect ({})",
                status.as_u16()
            ));
        }
        if !status.is_success() {
            return CallOutcome::transport(format!(
                "{url}: executor answered http status {status}"
            ));
        }
        let limit = answer_limit(method);
        let too_large = || {
            CallOutcome::transport(format!(
                "{url}: executor answer over the {limit} byte limit"
            ))
        };
        if resp.content_length().is_some_and(|n| n > limit as u64) {
            return too_large();
        }
        // Read chunk by chunk, so that an endless or huge answer costs at most `limit`.
        let mut bytes = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > limit {
                        return too_large();
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return no_answer(&url, &e),
            }
        }
        match tickwork_protocol::decode::<Envelope<T>>(&bytes) {
            Ok(env) => CallOutcome {
                code: env.code,
                msg: env.msg,
                payload: env.payload,
            },
            Err(e) => {
                debug!(url = %url, error = %e, "unreadable executor answer");
                CallOutcome::transport(format!("{url}: executor answered an unreadable body"))
            }
        }
    }
}

/// The phrases of the transport failures above (metrics tell them from executor refusals).
pub(crate) const TRANSPORT_PHRASES: [&str; 5] = [
    ": executor unreachable",
    ": executor answered a redirect",
    ": executor answered http status ",
    ": executor answer over the ",
    ": executor answered an unreadable body",
];

/// The most the admin reads of an answer to `method`: a log page can be large, the other
/// answers are a few fields.
fn answer_limit(method: &str) -> usize {
    match method {
        "log" => LOG_ANSWER_LIMIT,
        _ => SMALL_ANSWER_LIMIT,
    }
}

/// The most the admin reads of a `/log` answer.
pub const LOG_ANSWER_LIMIT: usize = 4 * 1024 * 1024;
/// The most the admin reads of a `/run`, `/kill`, `/beat` or `/idleBeat` answer.
pub const SMALL_ANSWER_LIMIT: usize = 64 * 1024;

/// `<address>/<method>`, stripping one trailing slash of the registered address (which is
/// kept byte for byte elsewhere).
pub fn join(address: &str, method: &str) -> String {
    let base = address.trim();
    let base = base.strip_suffix('/').unwrap_or(base);
    format!("{base}/{method}")
}

/// A call that got no (complete) answer. What the caller sees says only that: whether the
/// host refused, timed out or reset would tell an open port from a closed one. The cause is
/// logged.
fn no_answer<T>(url: &str, e: &reqwest::Error) -> CallOutcome<T> {
    let cause = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "other"
    };
    warn!(url, cause, error = %e, "executor call failed");
    CallOutcome::transport(format!("{url}: executor unreachable"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;
    use tokio::sync::Barrier;

    use super::{ExecutorClient, join};
    use crate::config::DispatchConfig;

    /// An executor that counts the connections it accepts and answers each `/run` only once
    /// `burst` calls wait at once, so that a burst needs `burst` connections.
    async fn counting_executor(burst: usize) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(Barrier::new(burst));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut read = BufReader::new(read);
                    loop {
                        let mut length = 0;
                        loop {
                            let mut line = String::new();
                            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            let lower = line.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap();
                            }
                            if line == "\r\n" {
                                break;
                            }
                        }
                        let mut body = vec![0; length];
                        read.read_exact(&mut body).await.unwrap();
                        barrier.wait().await;
                        let answer = br#"{"code":200,"msg":null}"#;
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            answer.len()
                        );
                        write.write_all(head.as_bytes()).await.unwrap();
                        write.write_all(answer).await.unwrap();
                    }
                });
            }
        });
        (address, accepted)
    }

    #[tokio::test]
    async fn executor_connections_were_closed_after_each_burst_and_opened_again() {
        let dispatch = DispatchConfig::default();
        let burst = dispatch.concurrency + dispatch.slow_concurrency;
        let (address, accepted) = counting_executor(burst).await;
        let client = ExecutorClient::new(
            "",
            Duration::from_secs(30),
            dispatch.idle_connections_per_executor(),
        );
        for round in 1..=3 {
            let calls = (0..burst).map(|_| {
                let client = client.clone();
                let address = address.clone();
                tokio::spawn(async move { client.run(&address, &Default::default()).await })
            });
            for call in calls.collect::<Vec<_>>() {
                assert!(call.await.unwrap().is_success(), "round {round}");
            }
            // Every burst after the first runs on the first one's connections (64 were kept,
            // so each burst of 288 opened 224 new ones).
            assert_eq!(accepted.load(Ordering::SeqCst), burst, "round {round}");
        }
    }

    #[test]
    fn joins_with_and_without_trailing_slash() {
        assert_eq!(join("http://h:9999/", "run"), "http://h:9999/run");
        assert_eq!(join("http://h:9999", "run"), "http://h:9999/run");
        assert_eq!(
            join(" http://h:9999/ctx/ ", "beat"),
            "http://h:9999/ctx/beat"
        );
    }
}
