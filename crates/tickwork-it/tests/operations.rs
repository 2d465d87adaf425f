//! Operating a live system: manual triggers, draining an executor, restarting the admin
//! while runs are in flight.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;
use tickwork_it::{AdminSettings, Cluster, WAIT, e2e, now_ms, rfc3339, wait_until};

e2e!(
    manual_trigger_with_params_and_address,
    drain_on_registry_remove,
    callbacks_survive_admin_restart,
    claimed_fires_survive_admin_restart,
);

async fn manual_trigger_with_params_and_address(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 2).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "route_strategy": "FIRST",
            "handler": "echo", "params": "job params",
        }))
        .await;
    let id = job["id"].as_i64().unwrap();

    // Routing alone would pick the first executor: the chosen address must win.
    let run = api
        .trigger(id, Some("hello from the test"), Some(&ex[1].address))
        .await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.state, "succeeded", "{run:?}");
    assert_eq!(run.trigger_type, "API", "{run:?}");
    assert_eq!(run.address(), ex[1].address, "{run:?}");
    assert_eq!(run.params, "hello from the test", "{run:?}");
    assert_eq!(run.handle_msg(), "hello from the test", "{run:?}");

    let run = api.trigger(id, None, None).await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.address(), ex[0].address, "{run:?}");
    assert_eq!(run.handle_msg(), "job params", "{run:?}");

    let r = api
        .call(
            reqwest::Method::POST,
            &format!("/jobs/{id}/trigger"),
            Some(&json!({ "address": "127.0.0.1:1" })),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(r.error_message().contains("address"), "{:?}", r.body);
    assert_eq!(api.runs(id).await.len(), 2);
}

async fn drain_on_registry_remove(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 2).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "FIX_RATE", "schedule_conf": "100ms",
            "route_strategy": "ROUND", "handler": "echo", "start": true,
        }))
        .await;
    let id = job["id"].as_i64().unwrap();
    wait_until("runs on both executors", WAIT, || async {
        let runs = api.runs(id).await;
        let on = |e: &tickwork_it::Executor| {
            runs.iter()
                .any(|r| r.state == "succeeded" && r.address() == e.address)
        };
        (on(&ex[0]) && on(&ex[1])).then_some(())
    })
    .await;

    // SIGTERM: the executor deregisters (registryRemove) before it drains. Its own log says
    // when the admin accepted that; the group is not read meanwhile, since reading it
    // refreshes the admin's cached address list and would hide a stale one.
    c.signal_executor(&ex[0], Signal::SIGTERM);
    wait_until("the executor to deregister", WAIT, || async {
        c.executor_log(&ex[0])
            .contains("deregistered")
            .then_some(())
    })
    .await;
    let removed_at = now_ms();
    let after = |r: &tickwork_it::Run| r.scheduled_at > removed_at;
    let runs = wait_until("runs after the removal", WAIT, || async {
        let runs = api.runs(id).await;
        let done = runs
            .iter()
            .filter(|r| after(r) && r.state == "succeeded" && r.is_settled());
        (done.count() >= 10).then_some(runs)
    })
    .await;
    // Every run sent somewhere (dispatched, or ended with its dispatch recorded) went to the
    // survivor; planned runs have no executor yet.
    let sent = |r: &&tickwork_it::Run| r.state == "dispatched" || r.is_settled();
    for r in runs.iter().filter(|r| after(r)).filter(sent) {
        assert_eq!(
            r.address(),
            ex[1].address,
            "a run went to the removed executor: {r:?}"
        );
        assert!(
            matches!(r.state.as_str(), "succeeded" | "dispatched"),
            "{r:?}"
        );
    }
    assert_eq!(api.live_addresses(group).await, [ex[1].address.clone()]);
    let status = c.wait_executor_exit(&ex[0]).await;
    assert!(
        status.success(),
        "the drained executor exited with {status}"
    );
}

async fn callbacks_survive_admin_restart(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, ex) = c.executor_group("it-app", 1).await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "handler": "sleep", "params": "5s",
        }))
        .await;
    let run = api.trigger(job["id"].as_i64().unwrap(), None, None).await;
    let run = api.wait_dispatched(run.id).await;
    assert_eq!(run.state, "dispatched", "{run:?}");

    c.stop_admin().await;
    // The run ends while no admin listens: the executor keeps its result on disk.
    let spool = ex[0].logs.join("callbacklogs");
    wait_until("the executor to spool its callback", WAIT, || async {
        let files = std::fs::read_dir(&spool).ok()?;
        (files.count() > 0).then_some(())
    })
    .await;

    let api = c.start_admin().await;
    // The executor resends with a backoff of up to 30 s.
    let run = wait_until("the spooled result", Duration::from_secs(90), || async {
        let r = api.run(run.id).await;
        r.is_settled().then_some(r)
    })
    .await;
    assert_eq!(run.state, "succeeded", "{run:?}");
    assert_eq!(run.handle_code, 200, "{run:?}");
    assert!(run.finished_at.is_some(), "{run:?}");
}

async fn claimed_fires_survive_admin_restart(mut c: Cluster) {
    // A long look-ahead: the fires below are claimed (written as planned runs of this node)
    // well before they are due, and the admin restarts in between.
    c.settings = AdminSettings {
        lookahead_ms: 8000,
        ..AdminSettings::default()
    };
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("it-app", 1).await;
    let at = (now_ms() + 6000) / 1000 * 1000;
    let once = api
        .create_job(json!({
            "group_id": group, "schedule_type": "ONCE", "schedule_conf": rfc3339(at),
            "handler": "echo", "start": true,
        }))
        .await;
    let once = once["id"].as_i64().unwrap();
    let cron = api
        .create_job(json!({
            "group_id": group, "schedule_type": "CRON", "schedule_conf": "* * * * * ?",
            "handler": "echo", "start": true,
        }))
        .await;
    let cron = cron["id"].as_i64().unwrap();
    wait_until("the ONCE fire to be claimed", WAIT, || async {
        let runs = api.runs(once).await;
        runs.iter().any(|r| r.state == "planned").then_some(())
    })
    .await;

    c.stop_admin().await;
    let api = c.start_admin().await;
    assert!(
        now_ms() < at,
        "the restart took too long to test a claimed fire"
    );
    let runs = wait_until("the claimed ONCE fire to end", WAIT, || async {
        let runs = api.runs(once).await;
        (runs.len() == 1 && runs[0].is_settled()).then_some(runs)
    })
    .await;
    assert_eq!(
        runs[0].state, "succeeded",
        "a claimed fire was lost: {runs:#?}"
    );
    assert_eq!(runs[0].scheduled_at, at, "{runs:#?}");

    // The cron job's fires claimed before the restart ran too (late, but they ran): none is
    // left planned or skipped once the ones after the restart have run.
    let restarted = now_ms();
    let runs = wait_until("cron fires after the restart", WAIT, || async {
        let runs = api.runs(cron).await;
        runs.iter()
            .any(|r| r.scheduled_at > restarted + 1000 && r.is_settled())
            .then_some(runs)
    })
    .await;
    for r in runs.iter().filter(|r| r.scheduled_at < restarted) {
        let r = api.wait_final(r.id).await;
        assert_eq!(r.state, "succeeded", "{r:?}");
    }
    // Each second fired exactly once across both admin processes.
    let mut keys: Vec<i64> = runs.iter().filter_map(|r| r.fire_key).collect();
    keys.sort();
    for w in keys.windows(2) {
        assert_eq!(w[1] - w[0], 1000, "cron fires missing or doubled: {keys:?}");
    }
}
