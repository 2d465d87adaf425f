//! Creating jobs through the JSON API: one request per job (`create_jobs_per_s`, a fixed
//! number of requests in flight) and 10,000 jobs in one `POST /jobs/bulk`
//! (`bulk_import_10k_s`). Both are part of fire-rate (the bulk import after its window);
//! `--scenario create-jobs` measures them alone, on an admin without executors.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};
use tickwork_protocol::api::JOBS_BULK_MAX;

use super::api::{self, Api};
use super::report::print_log_summary;
use super::{ADMIN_EXIT_GRACE, EVERY_SECOND, HANDLER, Plan, SETUP_MAX};
use super::{db::BenchDb, procs};

/// Jobs of one bulk import: the most one request may create.
pub(super) const BULK_JOBS: usize = JOBS_BULK_MAX;

/// A job of the bench as the API takes it: due every second, stopped unless `start`.
fn job(key: String, group_id: i64, route: &str, i: usize, start: bool) -> Value {
    job_on(EVERY_SECOND, key, group_id, route, i, start)
}

/// A job of the bench on the cron `schedule`, stopped unless `start`.
pub(super) fn job_on(
    schedule: &str,
    key: String,
    group_id: i64,
    route: &str,
    i: usize,
    start: bool,
) -> Value {
    json!({
        "start": start,
        "key": key,
        "group_id": group_id,
        "description": format!("bench job {i}"),
        "schedule_type": "CRON",
        "schedule_conf": schedule,
        "route_strategy": route,
        "handler": HANDLER,
    })
}

/// Creates `n` jobs of `group_id`, one request each with `concurrency` in flight; their ids
/// and the rate.
pub(super) async fn one_by_one(
    api: &Api,
    n: usize,
    concurrency: usize,
    group_id: i64,
    app: &str,
    route: &str,
) -> anyhow::Result<(Vec<i64>, f64)> {
    let t = Instant::now();
    let created = api::bulk(n, concurrency, SETUP_MAX, |i| {
        let api = api.clone();
        let body = job(format!("{app}-{i}"), group_id, route, i, false);
        async move { api::id_of(&api.post(i, "/jobs", &body).await?) }
    })
    .await;
    let (done, failed, cut, first) = api::tally(&created);
    if done < n {
        bail!(
            "{done} of {n} jobs created in {:.0} s ({failed} failed, {cut} cut off); first error: {}",
            t.elapsed().as_secs_f64(),
            first.unwrap_or_default()
        );
    }
    let ids: Vec<i64> = created.into_iter().flatten().flatten().collect();
    let secs = t.elapsed().as_secs_f64();
    let per_s = ids.len() as f64 / secs;
    println!(
        "setup: created {} jobs in {secs:.2} s ({per_s:.0}/s, {concurrency} in flight)",
        ids.len()
    );
    Ok((ids, per_s))
}

/// Creates `jobs` in one `POST /jobs/bulk`, all or none; their ids.
pub(super) async fn create_in_one_request(api: &Api, jobs: Vec<Value>) -> anyhow::Result<Vec<i64>> {
    let n = jobs.len();
    let answer = api.post(0, "/jobs/bulk", &json!({ "jobs": jobs })).await?;
    let ids: Vec<i64> = answer
        .get("jobs")
        .and_then(Value::as_array)
        .map(|jobs| jobs.iter().filter_map(|j| j.get("id")?.as_i64()).collect())
        .unwrap_or_default();
    if ids.len() != n {
        bail!("a bulk import created {} of {n} jobs: {answer}", ids.len());
    }
    Ok(ids)
}

/// Creates [`BULK_JOBS`] stopped jobs of `group_id` in one `POST /jobs/bulk`; the seconds
/// from sending the request to its answer.
pub(super) async fn bulk_import(api: &Api, group_id: i64, app: &str) -> anyhow::Result<f64> {
    let jobs: Vec<Value> = (0..BULK_JOBS)
        .map(|i| job(format!("{app}-bulk-{i}"), group_id, "FIRST", i, false))
        .collect();
    let t = Instant::now();
    create_in_one_request(api, jobs).await?;
    let secs = t.elapsed().as_secs_f64();
    println!("imported {BULK_JOBS} jobs in one request in {secs:.2} s");
    Ok(secs)
}

/// Creates `n` jobs of `group_id` already started, [`BULK_JOBS`] per `POST /jobs/bulk`, one
/// request after the other (overload: one-by-one starts slow down as the admin falls behind,
/// and would leave most jobs stopped); their ids.
pub(super) async fn bulk_started(
    api: &Api,
    n: usize,
    group_id: i64,
    app: &str,
    route: &str,
) -> anyhow::Result<Vec<i64>> {
    let t = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for first in (0..n).step_by(BULK_JOBS) {
        let jobs: Vec<Value> = (first..n.min(first + BULK_JOBS))
            .map(|i| job(format!("{app}-{i}"), group_id, route, i, true))
            .collect();
        ids.extend(create_in_one_request(api, jobs).await?);
        println!(
            "setup: {} jobs created started after {:.2} s",
            ids.len(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(ids)
}

/// `--scenario create-jobs`: one admin, a group, `--jobs` creates one by one, then a bulk
/// import; ends with the `RESULT` line.
pub(super) async fn drive(plan: &Plan, db: &BenchDb) -> anyhow::Result<()> {
    let args = &plan.args;
    let super::single::Single {
        admin,
        api,
        app,
        group_id,
        ..
    } = super::single::start(plan, db, None).await?;
    let cpu0 = procs::cpu_ticks(admin.pid).unwrap_or(0);
    let (_, per_s) = one_by_one(
        &api,
        plan.jobs,
        args.api_concurrency,
        group_id,
        &app,
        "FIRST",
    )
    .await?;
    let cpu1 = procs::cpu_ticks(admin.pid).unwrap_or(0);
    let bulk_s = bulk_import(&api, group_id, &app).await?;
    let cpu2 = procs::cpu_ticks(admin.pid).unwrap_or(0);
    let hz = procs::ticks_per_second().max(1) as f64;
    let ms_per = |ticks: u64, n: usize| ticks as f64 / hz * 1000.0 / n as f64;
    println!(
        "admin cpu: {:.3} ms per job created one by one, {:.3} ms per job imported in bulk",
        ms_per(cpu1.saturating_sub(cpu0), plan.jobs),
        ms_per(cpu2.saturating_sub(cpu1), BULK_JOBS)
    );
    drop(api);
    let log = admin.log.clone();
    let status = admin.terminate(ADMIN_EXIT_GRACE).await;
    println!("admin-0: exit {status}");
    print_log_summary("admin-0", &log);
    // Let the exit settle before the database is dropped.
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!(
        "RESULT scenario=create-jobs db={} jobs={} api_concurrency={} \
         create_jobs_per_s={per_s:.0} bulk_import_10k_s={bulk_s:.2}",
        db.kind.as_str(),
        plan.jobs,
        args.api_concurrency
    );
    Ok(())
}
