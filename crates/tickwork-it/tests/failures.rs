//! What follows a run's end: timeouts, retries with backoff, child jobs.

use std::time::Duration;

use serde_json::json;
use tickwork_it::{Cluster, Run, WAIT, e2e, wait_until};

e2e!(
    timeout_ends_run_as_timed_out,
    retries_back_off_and_link_to_parent,
    child_jobs_follow_success_only,
);

/// Time for the admin to act on a run it has just recorded as ended (retries and child runs
/// are written right after the result). Only used before asserting that nothing followed.
const SETTLE: Duration = Duration::from_millis(1500);

async fn timeout_ends_run_as_timed_out(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "handler": "sleep", "params": "5s",
            "timeout_s": 1,
        }))
        .await;
    let run = api.trigger(job["id"].as_i64().unwrap(), None, None).await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.state, "timed_out", "{run:?}");
    assert_eq!(run.handle_code, 502, "{run:?}");
    let ran = run.finished_at.unwrap() - run.dispatched_at.unwrap();
    assert!(
        ran < 4500,
        "stopped at its timeout, not after the sleep: {run:?}"
    );
}

async fn retries_back_off_and_link_to_parent(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "glue_type": "GLUE_SHELL",
            "glue_source": "#!/bin/sh\necho failing on purpose\nexit 3\n",
            "retry_count": 2, "retry_backoff_ms": 500,
        }))
        .await;
    let id = job["id"].as_i64().unwrap();
    api.trigger(id, None, None).await;
    let runs = wait_until("three ended attempts", WAIT, || async {
        let runs = api.runs(id).await;
        (runs.len() >= 3 && runs.iter().all(Run::is_settled)).then_some(runs)
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    let runs_now = api.runs(id).await;
    assert_eq!(
        runs_now.len(),
        3,
        "retry_count 2 means 3 runs: {runs_now:#?}"
    );

    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.attempt, i as i32, "{runs:#?}");
        assert_eq!(r.state, "failed", "{r:?}");
        assert_eq!(r.handle_code, 500, "{r:?}");
    }
    assert_eq!(runs[0].trigger_type, "API");
    assert_eq!(runs[0].parent_run_id, None);
    for i in 1..3 {
        let (prev, r) = (&runs[i - 1], &runs[i]);
        assert_eq!(r.trigger_type, "RETRY", "{r:?}");
        assert_eq!(r.parent_run_id, Some(prev.id), "{runs:#?}");
        // 500 ms after the first failure, then doubled.
        let backoff = 500 << (i - 1);
        let waited = r.scheduled_at - prev.finished_at.unwrap();
        assert!(
            waited >= backoff,
            "retry {i} after {waited} ms, backoff {backoff}: {runs:#?}"
        );
        assert!(
            waited < backoff + 5000,
            "retry {i} after {waited} ms: {runs:#?}"
        );
    }
}

async fn child_jobs_follow_success_only(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let new_job = async |handler: &str, params: &str, children: Vec<i64>| {
        let j = api
            .create_job(json!({
                "group_id": group, "schedule_type": "NONE", "handler": handler,
                "params": params, "child_job_ids": children,
            }))
            .await;
        j["id"].as_i64().unwrap()
    };
    let child = new_job("echo", "child", vec![]).await;
    let other_child = new_job("echo", "other child", vec![]).await;
    let parent = new_job("echo", "parent", vec![child]).await;
    // An unparsable duration: the sleep handler fails at once.
    let failing = new_job("sleep", "not a duration", vec![other_child]).await;

    let p = api.trigger(parent, None, None).await;
    let f = api.trigger(failing, None, None).await;
    let p = api.wait_final(p.id).await;
    assert_eq!(p.state, "succeeded", "{p:?}");
    let f = api.wait_final(f.id).await;
    assert_eq!(f.state, "failed", "{f:?}");

    let runs = api.wait_runs_in(child, "succeeded", 1).await;
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].trigger_type, "PARENT", "{runs:?}");
    assert_eq!(runs[0].parent_run_id, Some(p.id), "{runs:?}");
    assert_eq!(runs[0].handle_msg(), "child", "{runs:?}");

    tokio::time::sleep(SETTLE).await;
    let runs = api.runs(other_child).await;
    assert!(
        runs.is_empty(),
        "a failed parent fired its child: {runs:#?}"
    );
    assert_eq!(api.runs(child).await.len(), 1);
}
