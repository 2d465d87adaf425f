//! The admin's client of executors: `/run`, `/beat`, `/idleBeat`, `/kill` and `/log` over
//! HTTP with the access token, any executor generation (Java 2.3 to 3.4, Tickwork).

use std::time::Duration;

use serde::de::DeserializeOwned;
use tickwork_protocol::{
    ACCESS_TOKEN_HEADER, Envelope, IdleBeatParam, KillParam, LogParam, LogResult, TriggerParam,
};

/// The outcome of one call: the executor's envelope code and message, or a transport failure
/// (connection refused, timeout, non-200 status, unreadable body), which counts as code 500.
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
    /// (XXL-JOB's default is 3 s: a slow `/run` answer is a trigger failure).
    pub fn new(token: &str, timeout: Duration) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(64)
            // Below the executor's default header-read timeout (30 s), which also closes idle
            // connections: a job every 30 s would otherwise race the close.
            .pool_idle_timeout(Duration::from_secs(20))
            .tcp_nodelay(true)
            .build()
            .expect("the HTTP client's fixed configuration is valid");
        ExecutorClient {
            http,
            token: token.to_owned(),
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
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return CallOutcome::transport(describe(&e, &url)),
        };
        let status = resp.status();
        if !status.is_success() {
            return CallOutcome::transport(format!("{url} answered http status {status}"));
        }
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return CallOutcome::transport(describe(&e, &url)),
        };
        match tickwork_protocol::decode::<Envelope<T>>(&bytes) {
            Ok(env) => CallOutcome {
                code: env.code,
                msg: env.msg,
                payload: env.payload,
            },
            Err(e) => CallOutcome::transport(format!("{url} answered an unreadable body: {e}")),
        }
    }
}

/// `<address>/<method>`, stripping one trailing slash of the registered address (which is
/// kept byte for byte elsewhere).
pub fn join(address: &str, method: &str) -> String {
    let base = address.trim();
    let base = base.strip_suffix('/').unwrap_or(base);
    format!("{base}/{method}")
}

fn describe(e: &reqwest::Error, url: &str) -> String {
    if e.is_timeout() {
        format!("{url} timed out")
    } else if e.is_connect() {
        format!("{url} refused the connection or could not be reached")
    } else {
        format!("{url} failed: {e}")
    }
}

#[cfg(test)]
mod tests {
    use super::join;

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
