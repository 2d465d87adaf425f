//! Route strategies against three live executors. The admin routes over the group's live
//! addresses in ascending string order, so "first" and "last" are positions in that order.

use nix::sys::signal::Signal;
use serde_json::json;
use tickwork_it::{Api, Cluster, Executor, Run, WAIT, e2e, wait_until};

e2e!(
    routes_without_probes,
    route_sharding_broadcast,
    route_busyover,
    route_failover,
);

/// A job with no schedule, run by API triggers; its id.
async fn job(api: &Api, group: i64, route: &str, handler: &str) -> i64 {
    let j = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "route_strategy": route,
            "handler": handler,
        }))
        .await;
    j["id"].as_i64().unwrap()
}

/// Triggers `job_id` `n` times, one after the other; the ended runs, all succeeded.
async fn trigger_n(api: &Api, job_id: i64, n: usize) -> Vec<Run> {
    let mut runs = Vec::new();
    for _ in 0..n {
        let r = api.trigger(job_id, None, None).await;
        let r = api.wait_final(r.id).await;
        assert_eq!(r.state, "succeeded", "{r:?}");
        runs.push(r);
    }
    runs
}

fn position(executors: &[Executor], run: &Run) -> usize {
    executors
        .iter()
        .position(|e| e.address == run.address())
        .unwrap_or_else(|| panic!("run went to an unknown executor: {run:?}"))
}

async fn routes_without_probes(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 3).await;
    let strategies = [
        ("FIRST", 3),
        ("LAST", 3),
        ("ROUND", 6),
        ("RANDOM", 6),
        ("CONSISTENT_HASH", 4),
        ("LEAST_FREQUENTLY_USED", 9),
        ("LEAST_RECENTLY_USED", 6),
    ];
    // The strategies are independent per job: exercise them all at once.
    let work = strategies.iter().map(|&(route, n)| {
        let api = api.clone();
        async move {
            let id = job(&api, group, route, "echo").await;
            (route, trigger_n(&api, id, n).await)
        }
    });
    let results = join_all(work).await;
    for (route, runs) in results {
        let at: Vec<usize> = runs.iter().map(|r| position(&ex, r)).collect();
        match route {
            "FIRST" => assert!(at.iter().all(|&i| i == 0), "{route}: {at:?}"),
            "LAST" => assert!(at.iter().all(|&i| i == 2), "{route}: {at:?}"),
            // Round robin starts anywhere, then cycles in address order.
            "ROUND" => {
                for w in at.windows(2) {
                    assert_eq!(w[1], (w[0] + 1) % 3, "{route}: {at:?}");
                }
            }
            "RANDOM" => {} // `position` already checked that every run stayed in the group
            "CONSISTENT_HASH" => assert!(at.iter().all(|&i| i == at[0]), "{route}: {at:?}"),
            "LEAST_FREQUENTLY_USED" => {
                for i in 0..3 {
                    assert!(at.contains(&i), "{route} never used #{i}: {at:?}");
                }
            }
            // Every executor once, then the same order again.
            "LEAST_RECENTLY_USED" => {
                let mut first: Vec<usize> = at[..3].to_vec();
                assert_eq!(at[3..], first[..], "{route}: {at:?}");
                first.sort();
                assert_eq!(first, [0, 1, 2], "{route}: {at:?}");
            }
            _ => unreachable!(),
        }
    }
}

async fn route_sharding_broadcast(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 3).await;
    let id = job(&api, group, "SHARDING_BROADCAST", "echo").await;
    api.trigger(id, Some("shards"), None).await;
    let runs = wait_until("three ended shards", WAIT, || async {
        let runs = api.runs(id).await;
        (runs.len() >= 3 && runs.iter().all(Run::is_settled)).then_some(runs)
    })
    .await;
    assert_eq!(runs.len(), 3, "one run per executor: {runs:#?}");
    // What each executor was told, from its run log (the echo handler logs its shard).
    let mut told = Vec::new();
    for r in &runs {
        assert_eq!(r.state, "succeeded", "{r:?}");
        assert_eq!(r.trigger_type, "API", "{r:?}");
        assert_eq!(r.params, "shards", "{r:?}");
        let log = api.get(&format!("/runs/{}/log?from_line=1", r.id)).await;
        let log = log["content"].as_str().unwrap_or_default().to_owned();
        let shard = (0..3)
            .find(|i| log.contains(&format!("(shard {i}/3)")))
            .unwrap_or_else(|| panic!("run {} was not told its shard: {log:?}", r.id));
        told.push((shard, position(&ex, r)));
    }
    told.sort();
    // Shard i runs on the i-th executor in address order.
    assert_eq!(told, [(0, 0), (1, 1), (2, 2)], "{runs:#?}");
    // And the ledger records which shard each run was.
    let mut recorded: Vec<(Option<i32>, Option<i32>, usize)> = runs
        .iter()
        .map(|r| (r.shard_index, r.shard_total, position(&ex, r)))
        .collect();
    recorded.sort();
    assert_eq!(
        recorded,
        [
            (Some(0), Some(3), 0),
            (Some(1), Some(3), 1),
            (Some(2), Some(3), 2)
        ],
        "{runs:#?}"
    );
    broadcast_retries_stay_on_their_shard(&api, group).await;
}

/// A failed shard retries on its own executor as the same shard; it is not broadcast again.
async fn broadcast_retries_stay_on_their_shard(api: &Api, group: i64) {
    let j = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "route_strategy": "SHARDING_BROADCAST",
            // An unparsable duration: every shard fails at once.
            "handler": "sleep", "params": "not a duration", "retry_count": 1,
        }))
        .await;
    let id = j["id"].as_i64().unwrap();
    api.trigger(id, None, None).await;
    wait_until("three shards and their retries", WAIT, || async {
        let runs = api.runs(id).await;
        (runs.len() >= 6 && runs.iter().all(Run::is_settled)).then_some(())
    })
    .await;
    // Time for any run the admin would wrongly add after the last result.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let runs = api.runs(id).await;
    assert_eq!(runs.len(), 6, "3 shards and 3 retries: {runs:#?}");
    for r in runs.iter().filter(|r| r.attempt == 1) {
        let parent = runs
            .iter()
            .find(|p| Some(p.id) == r.parent_run_id)
            .unwrap_or_else(|| panic!("retry without its parent: {runs:#?}"));
        assert_eq!(r.address(), parent.address(), "{runs:#?}");
        assert_eq!(r.shard_index, parent.shard_index, "{runs:#?}");
    }
}

async fn route_busyover(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 3).await;
    let id = job(&api, group, "BUSYOVER", "sleep").await;
    let long = api.trigger(id, Some("5s"), None).await;
    let long = api.wait_dispatched(long.id).await;
    assert_eq!(long.state, "dispatched", "{long:?}");
    assert_eq!(
        long.address(),
        ex[0].address,
        "an idle first executor takes it: {long:?}"
    );

    let short = api.trigger(id, Some("10ms"), None).await;
    let short = api.wait_final(short.id).await;
    assert_eq!(short.state, "succeeded", "{short:?}");
    assert_eq!(short.address(), ex[1].address, "{short:?}");
    let probe = format!("idle beat {}: code 500", ex[0].address);
    assert!(short.trigger_msg().contains(&probe), "{short:?}");

    let long = api.wait_final(long.id).await;
    assert_eq!(long.state, "succeeded", "{long:?}");
}

async fn route_failover(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 3).await;
    let id = job(&api, group, "FAILOVER", "echo").await;
    let r = trigger_n(&api, id, 1).await;
    assert_eq!(r[0].address(), ex[0].address, "{r:?}");

    // Killed without deregistering: the registry still lists it, only the probe can tell.
    c.signal_executor(&ex[0], Signal::SIGKILL);
    c.wait_executor_exit(&ex[0]).await;
    assert_eq!(api.live_addresses(group).await.len(), 3);
    for r in trigger_n(&api, id, 2).await {
        assert_eq!(r.address(), ex[1].address, "{r:?}");
        let failed = format!("beat {}: code 500", ex[0].address);
        assert!(r.trigger_msg().contains(&failed), "{r:?}");
    }
}

/// Runs futures concurrently and collects their outputs in order.
async fn join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}
