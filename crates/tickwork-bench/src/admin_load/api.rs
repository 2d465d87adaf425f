//! A small client of the admin's JSON API (`/openapi/v1`, bearer token), spreading requests
//! over several admins, with bulk helpers that keep a fixed number of requests in flight.

use std::future::Future;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::Value;

/// Tries per request: a busy admin may answer 5xx or drop a connection under load.
const TRIES: u32 = 3;

#[derive(Clone)]
pub(super) struct Api {
    client: reqwest::Client,
    bases: Vec<String>,
    token: String,
}

impl Api {
    /// A client of the admins at `bases` (`http://ip:port`).
    pub(super) fn new(bases: Vec<String>, token: &str) -> anyhow::Result<Api> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Api {
            client,
            bases,
            token: token.to_owned(),
        })
    }

    /// `method path` on admin number `i` (modulo the admin count).
    pub(super) async fn call(
        &self,
        i: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}/openapi/v1{path}", self.bases[i % self.bases.len()]);
        let mut last = None;
        for attempt in 0..TRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            let mut req = self
                .client
                .request(method.clone(), &url)
                .bearer_auth(&self.token);
            if let Some(b) = body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    if status.is_success() {
                        return serde_json::from_str(&text)
                            .with_context(|| format!("{method} {path}: not JSON: {text}"));
                    }
                    if status.is_client_error() {
                        bail!("{method} {path}: {status} {text}");
                    }
                    last = Some(anyhow::anyhow!("{method} {path}: {status} {text}"));
                }
                Err(e) => last = Some(anyhow::anyhow!("{method} {path}: {e}")),
            }
        }
        Err(last.expect("at least one try"))
    }

    /// One GET without retries, cut off after `limit` (polling a busy admin).
    pub(super) async fn get_once(&self, path: &str, limit: Duration) -> anyhow::Result<Value> {
        let url = format!("{}/openapi/v1{path}", self.bases[0]);
        let resp = self
            .client
            .get(&url)
            .bearer_auth(&self.token)
            .timeout(limit)
            .send()
            .await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("GET {path}: {status} {text}");
        }
        Ok(serde_json::from_str(&text)?)
    }

    pub(super) async fn get(&self, i: usize, path: &str) -> anyhow::Result<Value> {
        self.call(i, reqwest::Method::GET, path, None).await
    }

    pub(super) async fn post(&self, i: usize, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(i, reqwest::Method::POST, path, Some(body)).await
    }

    /// `POST /jobs/{id}/{verb}` for each of `ids`, `concurrency` in flight, cut off after
    /// `max`: how many were done, failed and cut off, and the first error.
    pub(super) async fn post_each(
        &self,
        ids: &[i64],
        verb: &str,
        concurrency: usize,
        max: Duration,
    ) -> (usize, usize, usize, Option<String>) {
        let results = bulk(ids.len(), concurrency, max, |i| {
            let api = self.clone();
            let path = format!("/jobs/{}/{verb}", ids[i]);
            async move { api.call(i, reqwest::Method::POST, &path, None).await }
        })
        .await;
        tally(&results)
    }

    /// Counts over the whole run, summed over the admins: runs adopted from a node thought
    /// dead, runs held by a closed fence, and the share of dispatched runs whose dispatch
    /// record was written with their result in one update.
    pub(super) async fn run_counts(&self) -> RunCounts {
        let names = [
            "tickwork_runs_adopted_total",
            "tickwork_runs_held_total",
            "tickwork_runs_dispatched_total",
            "tickwork_runs_dispatched_with_result_total",
        ];
        match self.counter_sums(names).await {
            Ok(sums) => RunCounts(Some(sums)),
            Err(e) => {
                println!("metrics: run counts not read: {e:#}");
                RunCounts(None)
            }
        }
    }

    /// The sums over every admin of the Prometheus counters `names` (their `/metrics` lines
    /// `name value`), each admin's read once, or why they could not be read.
    pub(super) async fn counter_sums<const N: usize>(
        &self,
        names: [&str; N],
    ) -> anyhow::Result<[u64; N]> {
        let mut sums = [0; N];
        for base in &self.bases {
            let text = self
                .client
                .get(format!("{base}/metrics"))
                .bearer_auth(&self.token)
                .send()
                .await?
                .error_for_status()?
                .text()
                .await?;
            for (sum, name) in sums.iter_mut().zip(names) {
                let value = text
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                    .with_context(|| format!("{base}/metrics has no {name}"))?;
                *sum += value
                    .trim()
                    .parse::<u64>()
                    .with_context(|| format!("{name} is not a count: {value}"))?;
            }
        }
        Ok(sums)
    }
}

/// Runs `f(0..n)` with at most `concurrency` calls in flight, until all are done or `limit`
/// has passed; results in index order, `None` for the calls the limit cut off.
pub(super) async fn bulk<T, F, Fut>(
    n: usize,
    concurrency: usize,
    limit: Duration,
    f: F,
) -> Vec<Option<anyhow::Result<T>>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut out: Vec<Option<anyhow::Result<T>>> = (0..n).map(|_| None).collect();
    let calls = futures::stream::iter(0..n)
        .map(|i| {
            let fut = f(i);
            async move { (i, fut.await) }
        })
        .buffer_unordered(concurrency.max(1));
    futures::pin_mut!(calls);
    while let Ok(Some((i, r))) = tokio::time::timeout_at(deadline, calls.next()).await {
        out[i] = Some(r);
    }
    out
}

/// How a bulk operation went: done, failed (with the first error), cut off by the limit.
pub(super) fn tally<T>(
    results: &[Option<anyhow::Result<T>>],
) -> (usize, usize, usize, Option<String>) {
    let mut done = 0;
    let mut failed = 0;
    let mut first = None;
    for r in results {
        match r {
            Some(Ok(_)) => done += 1,
            Some(Err(e)) => {
                failed += 1;
                first.get_or_insert_with(|| format!("{e:#}"));
            }
            None => {}
        }
    }
    (done, failed, results.len() - done - failed, first)
}

/// The id of a created object.
pub(super) fn id_of(v: &Value) -> anyhow::Result<i64> {
    v.get("id")
        .and_then(Value::as_i64)
        .with_context(|| format!("no id in {v}"))
}

/// What [`Api::run_counts`] read, as the end of a RESULT line (`none` when not read).
pub(super) struct RunCounts(Option<[u64; 4]>);

impl std::fmt::Display for RunCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some([adopted, held, dispatched, with_result]) = self.0 else {
            return write!(f, "adopted=none held=none one_write_pct=none");
        };
        let pct = match dispatched {
            0 => "none".to_owned(),
            n => format!("{:.1}", with_result as f64 * 100.0 / n as f64),
        };
        write!(f, "adopted={adopted} held={held} one_write_pct={pct}")
    }
}
