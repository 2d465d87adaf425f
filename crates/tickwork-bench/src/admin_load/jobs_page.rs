//! `--scenario jobs-page`: the console's job list for an operator with many jobs. One admin
//! without executors, 500 jobs created in one bulk request and 50,000 finished runs written
//! into the ledger (100 per job); then the jobs page (signed in, as a browser asks for it) and
//! the REST API's job list, each asked many times per sort and page size. Prints the time to
//! the whole answer, median, p95 and worst, and the `RESULT` line.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::api::Api;
use super::db::BenchDb;
use super::report::print_log_summary;
use super::{ADMIN_EXIT_GRACE, HANDLER, Plan, db};

const JOBS: usize = 500;
const RUNS_PER_JOB: usize = 100;
/// Answers timed per case, after warm-up answers.
const SAMPLES: usize = 40;
const WARMUP: usize = 3;
/// Rows of one insert statement.
const ROWS_PER_INSERT: usize = 500;
const PASSWORD: &str = "bench-console-password";

/// A duration in milliseconds, to a tenth.
fn ms(d: Duration) -> String {
    super::stats::ms(d.as_micros() as i64)
}

/// What is asked, and of which interface: (label, path; console paths start with `/jobs`).
const CASES: &[(&str, &str)] = &[
    ("console default, 50 a page, page 2", "/jobs?page=2"),
    (
        "console by last run desc, 200 a page",
        "/jobs?sort=last_run&order=desc&size=200",
    ),
    (
        "console by next fire, 100 a page, page 3",
        "/jobs?sort=next_fire&size=100&page=3",
    ),
    (
        "console by description, 50 a page, page 5",
        "/jobs?sort=description&size=50&page=5",
    ),
    (
        "api by last run desc, 200 a page",
        "/openapi/v1/jobs?sort=last_run&order=desc&size=200",
    ),
    ("api default, 50 a page", "/openapi/v1/jobs?size=50"),
];

pub(super) async fn drive(plan: &Plan, db: &BenchDb) -> anyhow::Result<()> {
    let super::single::Single {
        admin,
        base,
        api,
        api_token,
        app,
        group_id,
        ..
    } = super::single::start(plan, db, Some(PASSWORD)).await?;
    let ids = create_jobs(&api, group_id, &app).await?;
    let t = Instant::now();
    db.execute(&run_inserts(&ids, group_id, super::now_ms()))
        .await?;
    println!(
        "setup: {} runs written in {:.2} s",
        ids.len() * RUNS_PER_JOB,
        t.elapsed().as_secs_f64()
    );

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let session = sign_in(&client, &base).await?;
    let mut result = Vec::new();
    for (label, path) in CASES {
        let mut times = Vec::with_capacity(SAMPLES);
        for i in 0..WARMUP + SAMPLES {
            let mut req = client.get(format!("{base}{path}"));
            req = if path.starts_with("/openapi") {
                req.bearer_auth(&api_token)
            } else {
                req.header("cookie", &session)
            };
            let t = Instant::now();
            let resp = req.send().await?;
            let status = resp.status();
            let body = resp.text().await?;
            let took = t.elapsed();
            if !status.is_success() {
                bail!("GET {path}: {status} {body}");
            }
            if i >= WARMUP {
                times.push(took);
            }
        }
        times.sort();
        let (p50, p95, max) = (
            times[times.len() / 2],
            times[times.len() * 95 / 100],
            times[times.len() - 1],
        );
        println!(
            "{label}: median {} ms, p95 {} ms, worst {} ms ({SAMPLES} answers)",
            ms(p50),
            ms(p95),
            ms(max)
        );
        result.push(p50);
    }
    let log = admin.log.clone();
    let status = admin.terminate(ADMIN_EXIT_GRACE).await;
    println!("admin-0: exit {status}");
    print_log_summary("admin-0", &log);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let worst_console = result[..4].iter().max().copied().unwrap_or_default();
    println!(
        "RESULT scenario=jobs-page db={} jobs={} runs={} console_worst_median_ms={} \
         console_by_last_run_200_median_ms={} api_by_last_run_200_median_ms={}",
        db.kind.as_str(),
        ids.len(),
        ids.len() * RUNS_PER_JOB,
        ms(worst_console),
        ms(result[1]),
        ms(result[4]),
    );
    Ok(())
}

/// [`JOBS`] stopped jobs with varied descriptions, in one bulk request; their ids.
async fn create_jobs(api: &Api, group_id: i64, app: &str) -> anyhow::Result<Vec<i64>> {
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| {
            json!({
                "key": format!("{app}-{i}"),
                "group_id": group_id,
                // Not in id order, so that sorting by description has work to do.
                "description": format!("job {:04}", (i * 7919) % 10_000),
                "schedule_type": "CRON",
                "schedule_conf": format!("0 {} * * * ?", i % 60),
                "handler": HANDLER,
            })
        })
        .collect();
    let answer = api.post(0, "/jobs/bulk", &json!({ "jobs": jobs })).await?;
    let ids: Vec<i64> = answer["jobs"]
        .as_array()
        .context("no jobs in the bulk answer")?
        .iter()
        .filter_map(|j| j["id"].as_i64())
        .collect();
    if ids.len() != JOBS {
        bail!(
            "the bulk create made {} of {JOBS} jobs: {answer}",
            ids.len()
        );
    }
    Ok(ids)
}

/// The run history: [`RUNS_PER_JOB`] finished runs per job over the last days, one in ten
/// failed (its alarm already decided, so the admin has nothing to do for them), interleaved
/// between jobs as a ledger is.
fn run_inserts(ids: &[i64], group_id: i64, now: i64) -> Vec<String> {
    let mut rows = Vec::with_capacity(ids.len() * RUNS_PER_JOB);
    for k in 0..RUNS_PER_JOB {
        for (n, job) in ids.iter().enumerate() {
            let at = now - 86_400_000 * 3 + (k * ids.len() + n) as i64 * 5_000;
            let (state, code) = if (k + n) % 10 == 0 {
                ("failed", 500)
            } else {
                ("succeeded", 200)
            };
            rows.push(format!(
                "({job}, {group_id}, {at}, 'CRON', '{HANDLER}', '', '{state}', 200, {code}, 1, \
                 {at}, {at}, {})",
                at + 20
            ));
        }
    }
    rows.chunks(ROWS_PER_INSERT)
        .map(|chunk| {
            format!(
                "INSERT INTO tw_runs (job_id, group_id, scheduled_at, trigger_type, handler, \
                 params, state, trigger_code, handle_code, alarm_status, created_at, \
                 dispatched_at, finished_at) VALUES {}",
                chunk.join(", ")
            )
        })
        .collect()
}

/// Signs in as the console's `admin` (the login form's double-submit CSRF token chosen here);
/// the session cookie (`name=value`).
async fn sign_in(client: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let csrf = format!(
        "{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        db::rand_u32(),
        db::rand_u32(),
        db::rand_u32(),
        db::rand_u32(),
        db::rand_u32(),
        db::rand_u32(),
        db::rand_u32(),
        db::rand_u32()
    );
    let resp = client
        .post(format!("{base}/login"))
        .header("cookie", format!("tw_login_csrf={csrf}"))
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        // Every value is URL-safe as it is.
        .body(format!(
            "_csrf={csrf}&username=admin&password={PASSWORD}&next=%2F"
        ))
        .send()
        .await?;
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("tw_session="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .with_context(|| format!("the console login failed: {}", resp.status()))
}
