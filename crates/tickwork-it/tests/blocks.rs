//! Block policies: what an executor does with a run of a job that is already running there.

use serde_json::json;
use tickwork_it::{Api, Cluster, e2e};

e2e!(
    block_serial_execution,
    block_discard_later,
    block_cover_early
);

/// A `sleep` job with `policy`, routed to the group's only executor; its id.
async fn sleep_job(c: &mut Cluster, policy: &str) -> (Api, i64) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let j = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "handler": "sleep",
            "block_strategy": policy,
        }))
        .await;
    (api, j["id"].as_i64().unwrap())
}

async fn block_serial_execution(mut c: Cluster) {
    let (api, id) = sleep_job(&mut c, "SERIAL_EXECUTION").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(api.trigger(id, Some("1s"), None).await.id);
    }
    let mut runs = Vec::new();
    for id in ids {
        runs.push(api.wait_final(id).await);
    }
    for r in &runs {
        assert_eq!(r.state, "succeeded", "{r:?}");
    }
    // One after the other: the last ends at least two sleeps after the first (together,
    // they would all end within moments of each other).
    let mut ends: Vec<i64> = runs.iter().map(|r| r.finished_at.unwrap()).collect();
    ends.sort();
    assert!(ends[2] - ends[0] >= 1900, "runs overlapped: {runs:#?}");
    assert!(ends[1] - ends[0] >= 900, "runs overlapped: {runs:#?}");
}

async fn block_discard_later(mut c: Cluster) {
    let (api, id) = sleep_job(&mut c, "DISCARD_LATER").await;
    let busy = api.trigger(id, Some("3s"), None).await;
    let busy = api.wait_dispatched(busy.id).await;
    assert_eq!(busy.state, "dispatched", "{busy:?}");

    let later = api.trigger(id, Some("10ms"), None).await;
    let later = api.wait_final(later.id).await;
    assert_eq!(later.state, "failed", "{later:?}");
    assert_eq!(later.trigger_code, 500, "{later:?}");
    assert!(
        later
            .trigger_msg()
            .contains("block strategy effect：Discard Later"),
        "{later:?}"
    );
    let busy = api.wait_final(busy.id).await;
    assert_eq!(
        busy.state, "succeeded",
        "the running one is untouched: {busy:?}"
    );
}

async fn block_cover_early(mut c: Cluster) {
    let (api, id) = sleep_job(&mut c, "COVER_EARLY").await;
    let early = api.trigger(id, Some("20s"), None).await;
    let early = api.wait_dispatched(early.id).await;
    assert_eq!(early.state, "dispatched", "{early:?}");

    let cover = api.trigger(id, Some("10ms"), None).await;
    let cover = api.wait_final(cover.id).await;
    assert_eq!(cover.state, "succeeded", "{cover:?}");
    let early = api.wait_final(early.id).await;
    assert_eq!(early.state, "failed", "{early:?}");
    assert!(early.handle_msg().contains("Cover Early"), "{early:?}");
    // Cut short, not slept out.
    let ran = early.finished_at.unwrap() - early.dispatched_at.unwrap();
    assert!(ran < 15_000, "{early:?}");
}
