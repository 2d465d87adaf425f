//! The admins live through a database outage: two admins (real processes) fire 40 jobs every
//! second on PostgreSQL or MariaDB; 10 s in, the database refuses every connection for 20 s
//! (PostgreSQL: `ALLOW_CONNECTIONS false` and its sessions terminated; MariaDB: the admins'
//! user locked and its connections killed), then comes back.
//!
//! Neither admin may exit; every fire must end with exactly one run that either ran once or was
//! recorded as misfired; the misfires lie in the outage; half of the jobs are `DO_NOTHING`
//! (late fires misfired, none caught up) and half `FIRE_ONCE_NOW` (late fires misfired but one
//! catch-up run per job).

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use support::{Api, Backend, Child, CountingExecutor, TestDb, report, runs_of};
use tickwork_core::TriggerType;
use tickwork_core::run::RunState;
use tickwork_store::Run;
use tickwork_testkit::wait_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admins_on_postgres_ride_out_a_20_s_outage() {
    scenario(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admins_on_mariadb_ride_out_a_20_s_outage() {
    scenario(Backend::MySql).await;
}

/// Sums a counter over the admins' `/metrics`.
async fn metric_sum(apis: &[Api], name: &str) -> u64 {
    let mut sum = 0;
    for api in apis {
        let (_, text) = api.get("/metrics").await;
        sum += support::counter(&text, name).unwrap_or(0);
    }
    sum
}

async fn scenario(backend: Backend) {
    let _serial = support::serial().await;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let started = std::time::Instant::now();
    let outage_s = support::env_secs("TICKWORK_OUTAGE_SECS", 20) as i64;
    let store = db.store().await;
    let logs = support::log_dir();
    let mut admins = Vec::new();
    for node in ["node-a", "node-b"] {
        admins.push(Child::admin(&logs, node, &db, "").await);
    }
    let addresses: Vec<String> = admins.iter().map(|a| a.address.clone()).collect();
    let apis: Vec<Api> = addresses.iter().map(|a| Api::new(a)).collect();
    let executor = CountingExecutor::start("outage", &addresses, &db.token).await;
    let executor_address = executor.address();
    support::registered(store.as_ref(), &executor_address).await;

    let group = apis[0].group("outage").await;
    let mut jobs = Vec::new();
    for i in 0..40 {
        let policy = if i % 2 == 0 {
            "DO_NOTHING"
        } else {
            "FIRE_ONCE_NOW"
        };
        let job = apis[0]
            .post(
                "jobs",
                json!({
                    "group_id": group,
                    "description": format!("{policy} {i}"),
                    "schedule_type": "CRON",
                    "schedule_conf": "* * * * * ?",
                    "misfire_strategy": policy,
                    "handler": "count",
                    "start": true,
                }),
            )
            .await;
        jobs.push((
            job["id"].as_i64().expect("job id"),
            job["created_at"].as_i64().expect("created_at"),
            policy == "FIRE_ONCE_NOW",
        ));
    }
    let t0 = jobs[0].1;
    let mid_second = |offset_s: i64| (t0 / 1000 + offset_s) * 1000 + 500;

    support::sleep_until_ms(mid_second(10)).await;
    let outage_from = support::now_ms();
    db.outage().take_down().await;
    support::sleep_until_ms(mid_second(10 + outage_s)).await;
    for admin in &mut admins {
        assert!(
            admin.is_running(),
            "{} exited during the outage; its log:\n{}",
            admin.name,
            admin.tail(40)
        );
    }
    db.outage().bring_back().await;
    let outage_to = support::now_ms();
    for (admin, api) in admins.iter().zip(&apis) {
        let recovered = wait_until(
            "readiness after the outage",
            Duration::from_secs(60),
            || {
                let api = api.clone();
                async move { (api.get("/readyz").await.0 == 200).then(support::now_ms) }
            },
        )
        .await;
        report(format!(
            "  {} ready again {} ms after the outage",
            admin.name,
            recovered - outage_to
        ));
    }

    support::sleep_until_ms(mid_second(30 + outage_s)).await;
    let stop_at = support::now_ms();
    apis[1].stop_jobs(jobs.iter().map(|&(id, _, _)| id)).await;
    let cut = stop_at - 2_000;
    if let Err(pending) = support::settled_until(&*store, cut).await {
        panic!(
            "{} runs before the stop never finished: {:#?}\n{}",
            pending.len(),
            &pending[..pending.len().min(5)],
            support::tails(&admins)
        );
    }

    let (mut ran, mut misfired, mut caught_up) = (0, 0, 0);
    let (mut first_misfire, mut last_misfire) = (i64::MAX, i64::MIN);
    for &(job_id, created_at, fire_once_now) in &jobs {
        let runs = runs_of(&*store, Some(job_id)).await;
        let mut by_key: HashMap<i64, &Run> = HashMap::new();
        for run in &runs {
            let key = run.fire_key.expect("only scheduled fires");
            assert!(by_key.insert(key, run).is_none(), "fire twice: {run:?}");
        }
        let mut job_misfired = 0;
        let mut catch_ups = Vec::new();
        let mut at = (created_at / 1000 + 1) * 1000;
        while at <= cut {
            let run = by_key
                .get(&at)
                .unwrap_or_else(|| panic!("job {job_id}: the fire at {at} is missing"));
            match run.state {
                RunState::Succeeded => ran += 1,
                RunState::Misfired => {
                    job_misfired += 1;
                    first_misfire = first_misfire.min(at);
                    last_misfire = last_misfire.max(at);
                    assert!(
                        at >= outage_from - 1_000 && at <= outage_to + 5_000,
                        "job {job_id}: the fire at {at} misfired outside the outage \
                         [{outage_from}, {outage_to}]"
                    );
                }
                other => panic!("job {job_id}: the fire at {at} ended {other}: {run:?}"),
            }
            if run.trigger_type == TriggerType::Misfire {
                catch_ups.push(*run);
            }
            at += 1000;
        }
        misfired += job_misfired;
        assert!(
            job_misfired >= 5,
            "job {job_id}: only {job_misfired} fires misfired in a {outage_s} s outage"
        );
        if fire_once_now {
            assert_eq!(
                catch_ups.len(),
                1,
                "job {job_id} (FIRE_ONCE_NOW): one catch-up expected, got {catch_ups:?}"
            );
            let c = catch_ups[0];
            assert_eq!(c.state, RunState::Succeeded, "{c:?}");
            assert!(
                c.scheduled_at >= outage_to,
                "caught up before the end: {c:?}"
            );
            caught_up += 1;
        } else {
            assert!(
                catch_ups.is_empty(),
                "job {job_id} (DO_NOTHING) was caught up: {catch_ups:?}"
            );
        }
    }
    let doubles = executor.doubles();
    assert!(
        doubles.is_empty(),
        "runs executed more than once: {doubles:?}"
    );
    for admin in &mut admins {
        assert!(admin.is_running(), "{} exited", admin.name);
    }
    let held = metric_sum(&apis, "tickwork_runs_held_total").await;
    let failures = metric_sum(&apis, "tickwork_heartbeat_failures_total").await;
    report(format!(
        "OUTAGE {backend:?}: {outage_s} s, {} jobs; {ran} fires ran once, {misfired} misfired \
         (fires {} ms to {} ms after the outage began), {caught_up} catch-ups; {held} runs held \
         by the fence, {failures} failed heartbeats; no admin exited; test took {:.0} s",
        jobs.len(),
        first_misfire - outage_from,
        last_misfire - outage_from,
        started.elapsed().as_secs_f64()
    ));

    drop(admins);
    let _ = executor.executor.shutdown_and_wait().await;
    store.close().await;
    db.drop_database().await;
}
