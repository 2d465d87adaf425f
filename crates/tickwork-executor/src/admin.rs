//! Calls to the admins (`/api/registry`, `/api/registryRemove`, `/api/callback`) and the
//! registration loop.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tickwork_protocol::{ACCESS_TOKEN_HEADER, Envelope};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::config::ExecutorConfig;
use crate::error::error_chain;
use crate::executor::Counters;

/// `<base>/api/<method>`, whatever trailing slashes the configured base has, so that both
/// `http://h:8080/xxl-job-admin` (XXL <= 3.4.0) and `http://h:8080/` (3.4.1+) work.
pub(crate) fn api_url(base: &str, method: &str) -> String {
    format!("{}/api/{method}", base.trim().trim_end_matches('/'))
}

/// The admins of one executor, tried in order; a pull executor's connection first while it
/// is up.
pub(crate) struct AdminClient {
    http: reqwest::Client,
    bases: Vec<String>,
    token: String,
    timeout: std::time::Duration,
    pull: Option<Arc<crate::pull::PullCalls>>,
}

impl AdminClient {
    pub(crate) fn new(config: &ExecutorConfig) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.admin_timeout)
            .timeout(config.admin_timeout)
            // Below the admin's default header-read timeout (30 s), which also closes idle
            // connections: a call every 30 s would otherwise race the close.
            .pool_idle_timeout(std::time::Duration::from_secs(20))
            .tcp_nodelay(true)
            .build()
            .map_err(Error::HttpClient)?;
        Ok(AdminClient {
            http,
            bases: config.admin_addresses.clone(),
            token: config.access_token.trim().to_owned(),
            timeout: config.admin_timeout,
            pull: None,
        })
    }

    /// Makes calls over a pull connection while one is up.
    pub(crate) fn with_pull(mut self, calls: Arc<crate::pull::PullCalls>) -> Self {
        self.pull = Some(calls);
        self
    }

    /// Posts `body` to each admin in turn until one answers code 200; returns the URL that
    /// accepted, or every admin's reason.
    pub(crate) async fn call(&self, method: &'static str, body: Bytes) -> Result<String, Error> {
        if let Some(pull) = &self.pull
            && let Some(answer) = pull.call(method, &body, self.timeout).await
        {
            let bytes = serde_json::to_vec(&answer).unwrap_or_default();
            return accepted(&bytes)
                .map(|()| "the pull connection".to_owned())
                .map_err(|reason| Error::Admin {
                    method,
                    reasons: format!("the pull connection: {reason}"),
                });
        }
        if self.bases.is_empty() {
            return Err(Error::Admin {
                method,
                reasons: "no admin address is configured".into(),
            });
        }
        let mut reasons = Vec::new();
        for base in &self.bases {
            let url = api_url(base, method);
            match self.post(&url, body.clone()).await {
                Ok(()) => return Ok(url),
                Err(reason) => reasons.push(format!("{url}: {reason}")),
            }
        }
        Err(Error::Admin {
            method,
            reasons: reasons.join("; "),
        })
    }

    async fn post(&self, url: &str, body: Bytes) -> Result<(), String> {
        let mut request = self
            .http
            .post(url)
            .header("Content-Type", "application/json;charset=UTF-8")
            .header("Accept-Charset", "UTF-8")
            .body(body);
        if !self.token.is_empty() {
            request = request.header(ACCESS_TOKEN_HEADER, &self.token);
        }
        let response = request.send().await.map_err(describe)?;
        let status = response.status();
        let text = response.bytes().await.map_err(describe)?;
        if status != reqwest::StatusCode::OK {
            return Err(format!("http status {}", status.as_u16()));
        }
        accepted(&text)
    }
}

/// Whether an admin's answer `body` is an envelope of code 200; otherwise why not.
fn accepted(body: &[u8]) -> Result<(), String> {
    let envelope: Envelope =
        tickwork_protocol::decode(body).map_err(|e| format!("unreadable answer: {e}"))?;
    if envelope.is_success() {
        Ok(())
    } else {
        Err(format!(
            "code {}: {}",
            envelope.code,
            envelope.msg.as_deref().unwrap_or("")
        ))
    }
}

fn describe(e: reqwest::Error) -> String {
    error_chain(&e)
}

/// Registers now, then every `interval`, until `stop`. A failed round is logged and retried at
/// the next tick: the admin drops an executor only after 90 s without a beat.
pub(crate) async fn registry_loop(
    admin: Arc<AdminClient>,
    body: Bytes,
    interval: Duration,
    stop: CancellationToken,
    counters: Arc<Counters>,
) {
    if admin.bases.is_empty() {
        return;
    }
    loop {
        let round = admin.call("registry", body.clone());
        let outcome = tokio::select! {
            _ = stop.cancelled() => return,
            outcome = round => outcome,
        };
        match outcome {
            Ok(url) => {
                counters.registry_ok.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%url, "registered");
            }
            Err(e) => {
                counters.registry_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "registration failed");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::api_url;

    #[test]
    fn urls_join_with_or_without_context_path() {
        assert_eq!(
            api_url("http://h:8080/xxl-job-admin", "registry"),
            "http://h:8080/xxl-job-admin/api/registry"
        );
        assert_eq!(
            api_url("http://h:8080/xxl-job-admin//", "callback"),
            "http://h:8080/xxl-job-admin/api/callback"
        );
        assert_eq!(
            api_url("http://h:8080/", "registryRemove"),
            "http://h:8080/api/registryRemove"
        );
        assert_eq!(
            api_url("http://h:8080", "registry"),
            "http://h:8080/api/registry"
        );
    }
}
