//! Callbacks: batching, spooling when the admin refuses or is unreachable, resending when it
//! is back, also from a new executor started on the same log folder.

mod support;

use std::path::Path;
use std::time::Duration;

use support::*;

fn spool_files(logs: &Path) -> usize {
    std::fs::read_dir(logs.join("callbacklogs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn results_are_posted_in_batches_of_at_most_50() {
    let h = Harness::start_with(|b| b.callback_linger(Duration::from_millis(50))).await;
    // Many jobs so runs complete in parallel, in bursts.
    let runs = 200;
    let triggers: Vec<_> = (0..runs)
        .map(|i| trigger(i as i32 % 20, 10_000 + i, "ok"))
        .collect();
    let replies = futures::future::join_all(triggers.iter().map(|t| h.client.run(t))).await;
    assert!(replies.iter().all(|r| r.code() == 200));
    let all = h.admin.callback_count(runs as usize).await;
    let mut ids: Vec<i64> = all.iter().map(|c| c.log_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), runs as usize, "every result exactly once");
    let posts: Vec<usize> = h
        .admin
        .requests()
        .iter()
        .filter(|r| r.method == "callback")
        .map(|r| r.callbacks().len())
        .collect();
    assert!(posts.iter().all(|&n| (1..=50).contains(&n)), "{posts:?}");
    assert!(posts.len() < runs as usize, "batched: {posts:?}");
}

#[tokio::test]
async fn refused_callbacks_are_spooled_and_resent() {
    for mode in [Mode::RefuseCode, Mode::HttpError, Mode::NotJson] {
        let h = Harness::start().await;
        h.admin.set_mode(mode);
        h.client.run_ok(&trigger(1, 77, "ok")).await;
        wait_until_sync("spooled callback", DEADLINE, || {
            (h.executor.stats().callbacks_spooled == 1).then_some(())
        })
        .await;
        assert_eq!(spool_files(h.dir.path()), 1, "{mode:?}");
        let spooled: Vec<serde_json::Value> = std::fs::read_dir(h.dir.path().join("callbacklogs"))
            .unwrap()
            .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
            .collect();
        assert_eq!(spooled[0][0]["logId"], 77, "spool holds the JSON array");
        h.admin.set_mode(Mode::Accept);
        let cb = h.admin.callback(77).await;
        assert_eq!(cb.handle_code, 200);
        wait_until_sync("spool emptied", DEADLINE, || {
            (spool_files(h.dir.path()) == 0).then_some(())
        })
        .await;
        assert_eq!(h.admin.callbacks().len(), 1, "{mode:?}: resent once");
    }
}

#[tokio::test]
async fn callbacks_made_while_the_admin_is_down_arrive_when_it_is_back() {
    let port = dead_port();
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::default();
    let url = format!("http://{port}/xxl-job-admin");
    let executor = with_test_handlers(test_builder(&url, dir.path()), &gate)
        .start()
        .await
        .unwrap();
    let client = Client::new(executor.local_addr(), Some(TOKEN));
    for i in 0..3 {
        client.run_ok(&trigger(i, 100 + i64::from(i), "ok")).await;
    }
    wait_until_sync("spooled callbacks", DEADLINE, || {
        (executor.stats().callbacks_spooled == 3).then_some(())
    })
    .await;
    let admin = Admin::start_on(port).await;
    let mut ids: Vec<i64> = admin
        .callback_count(3)
        .await
        .iter()
        .map(|c| c.log_id)
        .collect();
    ids.sort();
    assert_eq!(ids, vec![100, 101, 102]);
    // Back to direct delivery.
    client.run_ok(&trigger(9, 109, "ok")).await;
    admin.callback(109).await;
    wait_until_sync("spool emptied", DEADLINE, || {
        (spool_files(dir.path()) == 0).then_some(())
    })
    .await;
    executor.shutdown_and_wait().await.unwrap();
    admin.stop().await;
}

#[tokio::test]
async fn spooled_callbacks_survive_an_executor_restart() {
    let port = dead_port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{port}/xxl-job-admin");
    let gate = Gate::default();
    let first = with_test_handlers(test_builder(&url, dir.path()), &gate)
        .start()
        .await
        .unwrap();
    let client = Client::new(first.local_addr(), Some(TOKEN));
    client.run_ok(&trigger(1, 4242, "ok")).await;
    wait_until_sync("spooled callback", DEADLINE, || {
        (first.stats().callbacks_spooled == 1).then_some(())
    })
    .await;
    let report = first.shutdown_and_wait().await.unwrap();
    assert_eq!(report.spooled_batches, 1);
    assert_eq!(spool_files(dir.path()), 1);

    let admin = Admin::start_on(port).await;
    let second = with_test_handlers(test_builder(&url, dir.path()), &gate)
        .start()
        .await
        .unwrap();
    let cb = admin.callback(4242).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (200, Some("ok"))
    );
    wait_until_sync("spool emptied", DEADLINE, || {
        (spool_files(dir.path()) == 0).then_some(())
    })
    .await;
    second.shutdown_and_wait().await.unwrap();
    admin.stop().await;
}

#[tokio::test]
async fn results_still_queued_at_shutdown_are_spooled() {
    let h = Harness::start().await;
    h.admin.set_mode(Mode::RefuseCode);
    h.client.run_ok(&trigger(1, 88, "gate")).await;
    h.gate.started().await;
    let handle = h.executor.shutdown_handle();
    handle.shutdown();
    h.gate.release(1);
    let report = h.executor.wait().await.unwrap();
    assert!(report.is_clean());
    assert_eq!(report.spooled_batches, 1);
    assert_eq!(spool_files(h.dir.path()), 1);
}
