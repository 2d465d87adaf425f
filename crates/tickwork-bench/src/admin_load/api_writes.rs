//! API writes while the admin is overloaded (`--scenario overload`): a thousand extra jobs,
//! started on a schedule that does not fire during the run (so the load stays what it is),
//! stopped and started again in one `POST /jobs/actions` each in the middle of the window
//! (`api_stop_1k_s`, `api_start_1k_s`); after the window, every job stopped in requests of
//! [`JOBS_ACTION_MAX`] (`stop_all_s`).

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
