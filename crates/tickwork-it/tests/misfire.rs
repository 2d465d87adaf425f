//! Misfire policies: fires that fall due while the admin is down are late when it comes back;
//! `DO_NOTHING` records them as `misfired`, `FIRE_ONCE_NOW` runs one catch-up for them all.

use std::time::Duration;

use serde_json::json;
use tickwork_it::{AdminSettings, Cluster, Run, WAIT, e2e, now_ms, wait_until};

e2e!(misfire_policies);

const RATE_MS: i64 = 500;
const LOOKAHEAD_MS: i64 = 500;
const THRESHOLD_MS: i64 = 1000;
/// How long the admin stays down: several fires fall due past the threshold.
const DOWN: Duration = Duration::from_millis(5000);

async fn misfire_policies(mut c: Cluster) {
    c.settings = AdminSettings {
        lookahead_ms: LOOKAHEAD_MS as u64,
        claim_interval_ms: 100,
        misfire_threshold_ms: THRESHOLD_MS as u64,
        ..AdminSettings::default()
    };
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let mut ids = Vec::new();
    for policy in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
        let job = api
            .create_job(json!({
                "group_id": group, "schedule_type": "FIX_RATE",
                "schedule_conf": format!("{RATE_MS}ms"), "misfire_strategy": policy,
                "handler": "echo", "start": true,
            }))
            .await;
        ids.push(job["id"].as_i64().unwrap());
    }
    let (do_nothing, fire_once) = (ids[0], ids[1]);
    for &id in &ids {
        api.wait_runs_in(id, "succeeded", 2).await;
    }

    c.stop_admin().await;
    let stopped_at = now_ms();
    // The point of the test: fires fall due while nobody schedules them.
    tokio::time::sleep(DOWN).await;
    let restarted_at = now_ms();
    let api = c.start_admin().await;

    // Both jobs go on with on-time fires after the restart.
    for &id in &ids {
        wait_until(&format!("job {id} back on schedule"), WAIT, || async {
            let runs = api.runs(id).await;
            runs.iter()
                .any(|r| r.state == "succeeded" && r.scheduled_at > restarted_at + THRESHOLD_MS)
                .then_some(())
        })
        .await;
    }

    // Fires the stopped admin cannot have claimed (beyond a look-ahead past the last fire it
    // could claim) and that were already more than the threshold late when the new one
    // started.
    let in_gap =
        |key: i64| key > stopped_at + 2 * LOOKAHEAD_MS && key < restarted_at - THRESHOLD_MS;

    let runs = ledger(&api, do_nothing).await;
    let gap: Vec<&Run> = runs
        .iter()
        .filter(|r| in_gap(r.fire_key.unwrap()))
        .collect();
    assert!(gap.len() >= 4, "expected several late fires: {runs:#?}");
    for r in &gap {
        assert_eq!(r.state, "misfired", "DO_NOTHING ran a late fire: {r:?}");
        assert_eq!(r.dispatched_at, None, "{r:?}");
        assert_eq!(r.executor_address, None, "{r:?}");
    }
    assert!(
        runs.iter().all(|r| r.trigger_type != "MISFIRE"),
        "DO_NOTHING caught up: {runs:#?}"
    );

    let runs = ledger(&api, fire_once).await;
    let catch_up: Vec<&Run> = runs
        .iter()
        .filter(|r| r.trigger_type == "MISFIRE")
        .collect();
    assert_eq!(catch_up.len(), 1, "FIRE_ONCE_NOW must run once: {runs:#?}");
    let cu = catch_up[0];
    let cu = api.wait_final(cu.id).await;
    assert_eq!(cu.state, "succeeded", "{cu:?}");
    assert!(
        cu.scheduled_at >= restarted_at,
        "catch-up not fired now: {cu:?}"
    );
    let gap: Vec<&Run> = runs
        .iter()
        .filter(|r| in_gap(r.fire_key.unwrap()))
        .collect();
    assert!(gap.len() >= 4, "expected several late fires: {runs:#?}");
    let last_late = gap.iter().map(|r| r.fire_key.unwrap()).max().unwrap();
    // The catch-up stands for the latest late fire; the earlier ones are all misfired.
    assert!(cu.fire_key.unwrap() >= last_late, "{cu:?}");
    for r in gap.iter().filter(|r| r.id != cu.id) {
        assert_eq!(r.state, "misfired", "{r:?}");
        assert_eq!(r.dispatched_at, None, "{r:?}");
    }
}

/// The job's scheduled runs by fire time, checking that every fire of the rate appears
/// exactly once from the first to the last: late fires are recorded, never dropped or doubled.
async fn ledger(api: &tickwork_it::Api, job_id: i64) -> Vec<Run> {
    let mut runs: Vec<Run> = api
        .runs(job_id)
        .await
        .into_iter()
        .filter(|r| r.fire_key.is_some())
        .collect();
    runs.sort_by_key(|r| r.fire_key);
    for w in runs.windows(2) {
        assert_eq!(
            w[1].fire_key.unwrap() - w[0].fire_key.unwrap(),
            RATE_MS,
            "fires missing or doubled between {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    runs
}
