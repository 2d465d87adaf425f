//! Ready-made handlers: an HTTP call restricted to an allow-list of hosts, an echo and a sleep
//! (handy for demos and tests).

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use crate::config::parse_duration;
use crate::handler::{HandlerFuture, JobContext, JobHandler, JobOutcome};

/// Name of the HTTP-call handler, as in XXL-JOB's sample executor.
pub const HTTP_HANDLER: &str = "httpJobHandler";
/// Name of the echo handler.
pub const ECHO_HANDLER: &str = "echo";
/// Name of the sleep handler.
pub const SLEEP_HANDLER: &str = "sleep";

/// How much of an HTTP response body goes into the run log.
const MAX_LOGGED_BODY: usize = 64 * 1024;

/// Logs its parameter and succeeds with it as the message.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoHandler;

impl JobHandler for EchoHandler {
    fn run(&self, ctx: JobContext) -> HandlerFuture {
        Box::pin(async move {
            ctx.log(format!(
                "echo: {} (shard {}/{})",
                ctx.params(),
                ctx.shard_index(),
                ctx.shard_total()
            ));
            if ctx.params().is_empty() {
                Ok(JobOutcome::success())
            } else {
                Ok(JobOutcome::success_with(ctx.params()))
            }
        })
    }
}

/// Sleeps for the duration in its parameter (`500ms`, `2s`, `1m`; a bare number is seconds),
/// stopping early when the run is killed.
#[derive(Debug, Clone, Copy, Default)]
pub struct SleepHandler;

impl JobHandler for SleepHandler {
    fn run(&self, ctx: JobContext) -> HandlerFuture {
        Box::pin(async move {
            let text = if ctx.params().trim().is_empty() {
                "1s"
            } else {
                ctx.params()
            };
            let duration = match parse_duration(text) {
                Ok(d) => d,
                Err(e) => return Ok(JobOutcome::failure(e.to_string())),
            };
            ctx.log(format!("sleeping {duration:?}"));
            tokio::select! {
                _ = tokio::time::sleep(duration) => Ok(JobOutcome::success_with(format!("slept {duration:?}"))),
                _ = ctx.cancelled() => Ok(JobOutcome::failure("sleep interrupted")),
            }
        })
    }
}

/// Calls a URL given in the job parameter, one `key: value` per line as in XXL-JOB's sample:
///
/// ```text
/// url: https://example.com/hook
/// method: POST
/// data: {"hello":"world"}
/// timeout: 10s
/// ```
///
/// Only hosts on the allow-list may be called (an entry `host` allows any port, `host:port`
/// one port), redirects included. A 2xx answer succeeds; the body goes to the run log.
#[derive(Debug, Clone)]
pub struct HttpJobHandler {
    allow: Arc<Vec<String>>,
    client: reqwest::Client,
}

impl HttpJobHandler {
    /// A handler allowed to call the given hosts.
    pub fn new<I, S>(allow: I) -> Result<Self, crate::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        crate::executor::install_crypto_provider();
        let allow: Arc<Vec<String>> = Arc::new(
            allow
                .into_iter()
                .map(|h| h.as_ref().trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
        );
        let policy_allow = Arc::clone(&allow);
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 5 {
                    attempt.error("too many redirects")
                } else if is_allowed(&policy_allow, attempt.url()) {
                    attempt.follow()
                } else {
                    let host = attempt.url().host_str().unwrap_or("").to_owned();
                    attempt.error(format!(
                        "redirect to host {host:?} is not on the allow-list"
                    ))
                }
            }))
            .build()
            .map_err(crate::Error::HttpClient)?;
        Ok(HttpJobHandler { allow, client })
    }
}

/// The parsed parameter of an HTTP job.
#[derive(Debug, PartialEq, Eq)]
struct HttpCall {
    url: String,
    method: String,
    data: Option<String>,
    timeout: Duration,
}

fn parse_call(params: &str) -> Result<HttpCall, String> {
    let mut call = HttpCall {
        url: String::new(),
        method: "GET".into(),
        data: None,
        timeout: Duration::from_secs(30),
    };
    for line in params.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("parameter line {line:?} is not `key: value`"));
        };
        let value = value.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "url" => call.url = value.to_owned(),
            "method" => call.method = value.to_ascii_uppercase(),
            "data" => call.data = Some(value.to_owned()),
            "timeout" => call.timeout = parse_duration(value).map_err(|e| e.to_string())?,
            other => {
                return Err(format!(
                    "unknown parameter {other:?} (expected url, method, data, timeout)"
                ));
            }
        }
    }
    if call.url.is_empty() {
        return Err("parameter `url: ...` is missing".into());
    }
    if call.method != "GET" && call.method != "POST" {
        return Err(format!("method {:?} is not GET or POST", call.method));
    }
    Ok(call)
}

fn is_allowed(allow: &[String], url: &Url) -> bool {
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    let with_port = url.port_or_known_default().map(|p| format!("{host}:{p}"));
    allow
        .iter()
        .any(|entry| *entry == host || Some(entry) == with_port.as_ref())
}

impl JobHandler for HttpJobHandler {
    fn run(&self, ctx: JobContext) -> HandlerFuture {
        let this = self.clone();
        Box::pin(async move {
            let call = match parse_call(ctx.params()) {
                Ok(call) => call,
                Err(e) => return Ok(JobOutcome::failure(e)),
            };
            let url = match Url::parse(&call.url) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => url,
                Ok(url) => {
                    return Ok(JobOutcome::failure(format!(
                        "url scheme {:?} is not http or https",
                        url.scheme()
                    )));
                }
                Err(e) => {
                    return Ok(JobOutcome::failure(format!(
                        "url {:?} is invalid: {e}",
                        call.url
                    )));
                }
            };
            if !is_allowed(&this.allow, &url) {
                return Ok(JobOutcome::failure(format!(
                    "host {:?} is not on this executor's http allow-list",
                    url.host_str().unwrap_or("")
                )));
            }
            ctx.log(format!("http {} {url}", call.method));
            let mut request = if call.method == "POST" {
                this.client.post(url)
            } else {
                this.client.get(url)
            };
            request = request.timeout(call.timeout);
            if let Some(data) = call.data {
                request = request
                    .header("Content-Type", "application/json;charset=UTF-8")
                    .body(data);
            }
            let exchange = async {
                let response = request.send().await?;
                let status = response.status();
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, body))
            };
            let (status, body) = tokio::select! {
                r = exchange => r?,
                _ = ctx.cancelled() => return Ok(JobOutcome::failure("http call interrupted")),
            };
            let shown = &body[..body.len().min(MAX_LOGGED_BODY)];
            ctx.log(format!(
                "http status {}, {} bytes: {}",
                status.as_u16(),
                body.len(),
                String::from_utf8_lossy(shown)
            ));
            if status.is_success() {
                Ok(JobOutcome::success_with(format!(
                    "http status {}",
                    status.as_u16()
                )))
            } else {
                Ok(JobOutcome::failure(format!(
                    "http status {}",
                    status.as_u16()
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_parse_like_the_xxl_sample() {
        let call =
            parse_call("url: http://example.com/x?a=1\nmethod: post\ndata: {\"k\":1}\n").unwrap();
        assert_eq!(call.url, "http://example.com/x?a=1");
        assert_eq!(call.method, "POST");
        assert_eq!(call.data.as_deref(), Some("{\"k\":1}"));
        assert!(parse_call("method: GET").unwrap_err().contains("url"));
        assert!(
            parse_call("url: http://x\nmethod: DELETE")
                .unwrap_err()
                .contains("DELETE")
        );
        assert!(parse_call("url http://x").is_err());
    }

    #[test]
    fn allow_list_matches_host_or_host_and_port() {
        let allow = vec!["example.com".to_owned(), "127.0.0.1:8080".to_owned()];
        let ok = |u: &str| is_allowed(&allow, &Url::parse(u).unwrap());
        assert!(ok("https://EXAMPLE.com/a"));
        assert!(ok("http://example.com:81/"));
        assert!(ok("http://127.0.0.1:8080/"));
        assert!(!ok("http://127.0.0.1:8081/"));
        assert!(!ok("http://evil.example.com/"));
    }
}
