//! Each schedule type end to end: the runs the admin writes and dispatches, and their times.

use serde_json::json;
use tickwork_it::{Cluster, Run, WAIT, e2e, now_ms, rfc3339, wait_until};

e2e!(
    cron_fires_on_whole_seconds,
    fix_rate_fires_every_interval,
    fix_delay_counts_from_completion,
    once_fires_exactly_once,
    none_runs_only_when_triggered,
);

/// Runs of the job's own schedule, by fire time; asserts each fire appears once.
fn scheduled(runs: &[Run]) -> Vec<&Run> {
    let mut s: Vec<&Run> = runs.iter().filter(|r| r.fire_key.is_some()).collect();
    s.sort_by_key(|r| r.fire_key);
    for w in s.windows(2) {
        assert_ne!(
            w[0].fire_key, w[1].fire_key,
            "a fire recorded twice: {s:#?}"
        );
    }
    s
}

async fn cron_fires_on_whole_seconds(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "CRON", "schedule_conf": "*/1 * * * * ?",
            "handler": "echo", "params": "tick", "start": true,
        }))
        .await;
    let id = job["id"].as_i64().unwrap();
    api.wait_runs_in(id, "succeeded", 3).await;
    api.stop_job(id).await;
    let runs = api.runs(id).await;
    let fires = scheduled(&runs);
    assert!(fires.len() >= 3, "{runs:#?}");
    for r in &fires {
        assert_eq!(r.trigger_type, "CRON", "{r:?}");
        assert_eq!(r.fire_key, Some(r.scheduled_at), "{r:?}");
        assert_eq!(
            r.scheduled_at % 1000,
            0,
            "a fire off the whole second: {r:?}"
        );
        // Runs claimed before the stop end as skipped or are still on their way.
        assert!(
            matches!(
                r.state.as_str(),
                "succeeded" | "skipped" | "planned" | "sending" | "dispatched"
            ),
            "{r:?}"
        );
    }
    for w in fires.windows(2) {
        assert_eq!(
            w[1].scheduled_at - w[0].scheduled_at,
            1000,
            "fires not one second apart: {fires:#?}"
        );
    }
    let ok = fires
        .iter()
        .find(|r| r.state == "succeeded" && r.is_settled())
        .unwrap();
    assert_eq!(ok.handle_msg(), "tick");
    assert!(ok.dispatched_at.unwrap() >= ok.scheduled_at, "{ok:?}");
}

async fn fix_rate_fires_every_interval(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "FIX_RATE", "schedule_conf": "500ms",
            "handler": "echo", "start": true,
        }))
        .await;
    let id = job["id"].as_i64().unwrap();
    api.wait_runs_in(id, "succeeded", 5).await;
    api.stop_job(id).await;
    let runs = api.runs(id).await;
    let fires = scheduled(&runs);
    for r in &fires {
        assert_eq!(r.trigger_type, "FIX_RATE", "{r:?}");
        assert_eq!(r.fire_key, Some(r.scheduled_at), "{r:?}");
        assert!(r.state != "failed" && r.state != "misfired", "{r:?}");
    }
    for w in fires.windows(2) {
        assert_eq!(
            w[1].scheduled_at - w[0].scheduled_at,
            500,
            "fires not 500 ms apart: {fires:#?}"
        );
    }
}

async fn fix_delay_counts_from_completion(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    // Each run takes 700 ms: a fixed rate of 1 s would start the next one 300 ms after the
    // previous ended; a fixed delay waits the full second after it.
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "FIX_DELAY", "schedule_conf": "1s",
            "handler": "sleep", "params": "700ms", "start": true,
        }))
        .await;
    let id = job["id"].as_i64().unwrap();
    api.wait_runs_in(id, "succeeded", 3).await;
    api.stop_job(id).await;
    let runs = api.runs(id).await;
    let fires = scheduled(&runs);
    let done: Vec<&&Run> = fires.iter().filter(|r| r.state == "succeeded").collect();
    assert!(done.len() >= 3, "{runs:#?}");
    for r in &fires {
        assert_eq!(r.trigger_type, "FIX_DELAY", "{r:?}");
    }
    for w in fires.windows(2) {
        let (prev, next) = (w[0], w[1]);
        let Some(finished) = prev.finished_at else {
            panic!("a run started before the previous one ended: {fires:#?}");
        };
        let gap = next.scheduled_at - finished;
        assert!(
            (1000..6000).contains(&gap),
            "next fire {gap} ms after the previous run ended, expected 1 s: {fires:#?}"
        );
    }
}

async fn once_fires_exactly_once(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    // A whole second at least 1.5 s ahead, so the job is saved well before it is due.
    let at = (now_ms() + 2500) / 1000 * 1000;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "ONCE", "schedule_conf": rfc3339(at),
            "handler": "echo", "params": "once", "start": true,
        }))
        .await;
    let id = job["id"].as_i64().unwrap();
    assert_eq!(job["status"], "running", "{job}");
    assert_eq!(job["next_fire_at"], at, "{job}");
    // A busy job alongside proves the scheduler kept claiming after the single fire.
    let control = api
        .create_job(json!({
            "group_id": group, "schedule_type": "FIX_RATE", "schedule_conf": "200ms",
            "handler": "echo", "start": true,
        }))
        .await;
    let control = control["id"].as_i64().unwrap();

    let runs = api.wait_runs_in(id, "succeeded", 1).await;
    let run = &runs[0];
    assert_eq!(run.trigger_type, "ONCE", "{run:?}");
    assert_eq!(run.scheduled_at, at, "{run:?}");
    assert_eq!(run.handle_msg(), "once", "{run:?}");
    let job = api.job(id).await;
    assert_eq!(job["status"], "stopped", "{job}");
    assert!(job["next_fire_at"].is_null(), "{job}");

    let seen = api.runs(control).await.len();
    api.wait_runs_in(control, "succeeded", seen + 5).await;
    assert_eq!(api.runs(id).await.len(), 1, "{:#?}", api.runs(id).await);
}

async fn none_runs_only_when_triggered(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let none = json!({
        "group_id": group, "schedule_type": "NONE", "handler": "echo", "params": "by hand",
    });

    let mut started = none.clone();
    started["start"] = json!(true);
    let r = api
        .call(reqwest::Method::POST, "/jobs", Some(&started))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(r.error_message().contains("NONE"), "{:?}", r.body);
    assert_eq!(api.get("/jobs").await["total"], 0);

    let job = api.create_job(none).await;
    let id = job["id"].as_i64().unwrap();
    assert_eq!(job["status"], "stopped", "{job}");
    assert!(job["next_fire_at"].is_null(), "{job}");
    let r = api
        .call(reqwest::Method::POST, &format!("/jobs/{id}/start"), None)
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.error_code(), "invalid_input", "{:?}", r.body);
    assert_eq!(api.job(id).await["status"], "stopped");

    // The scheduler is demonstrably at work (a busy job runs) while the NONE job stays idle.
    let control = api
        .create_job(json!({
            "group_id": group, "schedule_type": "FIX_RATE", "schedule_conf": "200ms",
            "handler": "echo", "start": true,
        }))
        .await;
    api.wait_runs_in(control["id"].as_i64().unwrap(), "succeeded", 5)
        .await;
    assert!(api.runs(id).await.is_empty(), "{:#?}", api.runs(id).await);

    let run = api.trigger(id, None, None).await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.state, "succeeded", "{run:?}");
    assert_eq!(run.trigger_type, "API", "{run:?}");
    assert_eq!(run.handle_msg(), "by hand", "{run:?}");
    assert_eq!(run.fire_key, None, "{run:?}");
    let all = wait_until("exactly one run", WAIT, || async {
        let runs = api.runs(id).await;
        (runs.len() == 1).then_some(runs)
    })
    .await;
    assert_eq!(all[0].id, run.id);
}
