//! API writes while the admin is overloaded (`--scenario overload`): a thousand extra jobs,
//! started on a schedule that does not fire during the run (so the load stays what it is),
//! stopped and started again in one `POST /jobs/actions` each in the middle of the window
//! (`api_stop_1k_s`, `api_start_1k_s`), then one of them stopped and started ten times, a
//! request each (`api_one_job_p50_ms`, `api_one_job_max_ms`: a person's click); after the
//! window, every job stopped in requests of [`JOBS_ACTION_MAX`] (`stop_all_s`).

use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tickwork_protocol::api::JOBS_ACTION_MAX;

use super::api::Api;
use super::creates::{create_in_one_request, job_on};

/// Fires once a year, at 03:00 on January 1st: never during a run of the bench but one
/// that spans New Year's night.
const YEARLY: &str = "0 0 3 1 1 ?";

/// Creates [`JOBS_ACTION_MAX`] jobs of `group_id` started on [`YEARLY`], in one
/// `POST /jobs/bulk`; their ids.
pub(super) async fn create_idle(api: &Api, group_id: i64, app: &str) -> anyhow::Result<Vec<i64>> {
    let jobs: Vec<Value> = (0..JOBS_ACTION_MAX)
        .map(|i| {
            job_on(
                YEARLY,
                format!("{app}-idle-{i}"),
                group_id,
                "FIRST",
                i,
                true,
            )
        })
        .collect();
    create_in_one_request(api, jobs).await
}

/// `action` on `ids` (at most [`JOBS_ACTION_MAX`]) in one `POST /jobs/actions`, every job
/// done; the seconds from sending the request to its answer.
pub(super) async fn act(api: &Api, action: &str, ids: &[i64]) -> anyhow::Result<f64> {
    let t = Instant::now();
    let answer = api
        .post(0, "/jobs/actions", &json!({ "action": action, "ids": ids }))
        .await?;
    let secs = t.elapsed().as_secs_f64();
    let done = answer
        .get("done")
        .and_then(Value::as_array)
        .map(Vec::len)
        .context("no done list in the answer")?;
    if done != ids.len() {
        bail!("{action}: {done} of {} jobs done: {answer}", ids.len());
    }
    Ok(secs)
}

/// What the API's writes took in the middle of an overloaded window, as the `RESULT` line
/// gives it (`none` where not measured).
pub(super) struct MidWindow {
    pub stop_1k_s: String,
    pub start_1k_s: String,
    pub one_job_p50_ms: String,
    pub one_job_max_ms: String,
}

/// How many times the one job is stopped and started again.
const ONE_JOB_ROUNDS: usize = 10;

impl MidWindow {
    pub(super) fn none() -> Self {
        MidWindow {
            stop_1k_s: "none".to_owned(),
            start_1k_s: "none".to_owned(),
            one_job_p50_ms: "none".to_owned(),
            one_job_max_ms: "none".to_owned(),
        }
    }

    /// Stops and starts `ids` in one request each, then `ids[0]` alone, a request per write.
    pub(super) async fn measure(api: &Api, ids: &[i64]) -> Self {
        let stop = act(api, "stop", ids).await;
        let start = act(api, "start", ids).await;
        let mut took = Vec::new();
        let mut failed = None;
        for i in 0..ONE_JOB_ROUNDS * 2 {
            let action = if i % 2 == 0 { "stop" } else { "start" };
            let t = Instant::now();
            match api
                .post(0, &format!("/jobs/{}/{action}", ids[0]), &json!({}))
                .await
            {
                Ok(_) => took.push(t.elapsed().as_secs_f64() * 1000.0),
                Err(e) => failed = Some(e),
            }
        }
        let (p50, max) = match failed {
            Some(e) => {
                println!("mid-window: one job stopped and started: not measured: {e:#}");
                ("none".to_owned(), "none".to_owned())
            }
            None => {
                took.sort_by(f64::total_cmp);
                let (p50, max) = (took[took.len() / 2], took[took.len() - 1]);
                println!(
                    "mid-window: one job stopped and started {ONE_JOB_ROUNDS} times, a request \
                     each: p50 {p50:.1} ms, max {max:.1} ms"
                );
                (format!("{p50:.1}"), format!("{max:.1}"))
            }
        };
        MidWindow {
            stop_1k_s: secs_or_none("mid-window: 1,000 jobs stopped", stop),
            start_1k_s: secs_or_none("mid-window: 1,000 jobs started", start),
            one_job_p50_ms: p50,
            one_job_max_ms: max,
        }
    }
}

/// Stops every job of `ids`, [`JOBS_ACTION_MAX`] per request, one request after the other;
/// the seconds it took.
pub(super) async fn stop_all(api: &Api, ids: &[i64]) -> anyhow::Result<f64> {
    let t = Instant::now();
    for chunk in ids.chunks(JOBS_ACTION_MAX) {
        act(api, "stop", chunk).await?;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// The seconds of a measured step as the `RESULT` line gives them, `none` when it failed.
pub(super) fn secs_or_none(step: &str, measured: anyhow::Result<f64>) -> String {
    match measured {
        Ok(s) => {
            println!("{step}: {s:.2} s");
            format!("{s:.2}")
        }
        Err(e) => {
            println!("{step}: not measured: {e:#}");
            "none".to_owned()
        }
    }
}
