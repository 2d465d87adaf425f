//! Registration, graceful shutdown in both modes and at the deadline, idle workers, run log
//! retention.

mod support;

use std::time::Duration;

use support::*;
use tickwork_executor::{ShutdownMode, ShutdownReport};

#[tokio::test]
async fn registers_at_once_and_stops_at_the_first_admin_that_accepts() {
    let dead = dead_port();
    let good = Admin::start().await;
    let later = Admin::start().await;
    // A dead admin first, then one with a trailing slash after its context path.
    let admins = format!(
        "http://{dead}/xxl-job-admin, {}/ ,{}",
        good.url(),
        later.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let executor = with_test_handlers(test_builder(&admins, dir.path()), &Gate::default())
        .start()
        .await
        .unwrap();
    let port = executor.local_addr().port();
    assert_eq!(executor.address(), format!("http://127.0.0.1:{port}/"));
    let req = wait_until_sync("registration", DEADLINE, || {
        good.requests().into_iter().find(|r| r.method == "registry")
    })
    .await;
    assert_eq!(req.path, "/xxl-job-admin/api/registry");
    assert_eq!(req.token.as_deref(), Some(TOKEN));
    assert_eq!(
        req.body,
        format!(
            r#"{{"registryGroup":"EXECUTOR","registryKey":"{APP}","registryValue":"http://127.0.0.1:{port}/"}}"#
        )
    );
    wait_until_sync("a registered round", DEADLINE, || {
        (executor.stats().registry_ok >= 1).then_some(())
    })
    .await;
    executor.shutdown_and_wait().await.unwrap();
    assert_eq!(good.count("registryRemove"), 1);
    assert_eq!(later.requests().len(), 0, "the third admin is never needed");
}

#[tokio::test]
async fn registers_every_interval_at_the_advertised_address() {
    let admin = Admin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let executor = test_builder(&admin.url().replace("/xxl-job-admin", ""), dir.path())
        .registry_interval(Duration::from_millis(100))
        .advertised_address("http://executor.example:9999/")
        .start()
        .await
        .unwrap();
    wait_until_sync("three registrations", DEADLINE, || {
        (admin.count("registry") >= 3).then_some(())
    })
    .await;
    let req = admin.requests().into_iter().next().unwrap();
    assert_eq!(req.path, "/api/registry", "no context path configured");
    assert_eq!(
        req.registry().registry_value,
        "http://executor.example:9999/"
    );
    executor.shutdown_and_wait().await.unwrap();
}

/// Two jobs each with a run going and one queued, then a shutdown; returns the admin's view.
async fn shutdown_with_runs_in_flight(mode: ShutdownMode) -> (Admin, ShutdownReport) {
    let Harness {
        admin,
        executor,
        client,
        gate,
        dir: _dir,
    } = Harness::start_with(|b| b.shutdown_mode(mode)).await;
    client.run_ok(&trigger(1, 1, "gate")).await;
    client.run_ok(&trigger(2, 2, "gate")).await;
    gate.started().await;
    gate.started().await;
    client.run_ok(&trigger(1, 3, "gate")).await;
    client.run_ok(&trigger(2, 4, "gate")).await;
    executor.shutdown();
    wait_until_sync("deregistration", DEADLINE, || {
        (admin.count("registryRemove") == 1).then_some(())
    })
    .await;
    // Deregistered while the held runs are still running.
    assert!(
        admin.callbacks().iter().all(|c| c.log_id > 2),
        "{:?}",
        admin.callbacks()
    );
    let reply = client.run(&trigger(3, 5, "ok")).await;
    assert_eq!(
        reply.text,
        r#"{"code":500,"msg":"executor is shutting down"}"#
    );
    // The admin can still ask while the executor drains.
    assert_eq!(client.idle_beat(1).await.code(), 500);
    gate.release(4);
    let report = executor.wait().await.unwrap();
    let methods: Vec<String> = admin.requests().into_iter().map(|r| r.method).collect();
    let remove = methods.iter().position(|m| m == "registryRemove").unwrap();
    let first_callback = methods.iter().position(|m| m == "callback").unwrap();
    assert!(remove < first_callback, "deregistration first: {methods:?}");
    (admin, report)
}

#[tokio::test]
async fn wait_all_finishes_running_and_queued_runs() {
    let (admin, report) = shutdown_with_runs_in_flight(ShutdownMode::WaitAll).await;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.dropped_queued, 0);
    for id in 1..=4 {
        assert_eq!(admin.callback(id).await.handle_code, 200, "run {id}");
    }
}

#[tokio::test]
async fn wait_running_fails_queued_runs_with_a_reason() {
    let (admin, report) = shutdown_with_runs_in_flight(ShutdownMode::WaitRunning).await;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.dropped_queued, 2);
    for id in [1, 2] {
        assert_eq!(admin.callback(id).await.handle_code, 200, "run {id}");
    }
    for id in [3, 4] {
        let cb = admin.callback(id).await;
        assert_eq!(
            (cb.handle_code, cb.handle_msg.as_deref()),
            (
                500,
                Some("executor is shutting down [job not executed, in the job queue, killed.]")
            )
        );
    }
}

#[tokio::test]
async fn runs_left_at_the_deadline_are_killed_and_reported() {
    let h = Harness::start_with(|b| b.shutdown_timeout(Duration::from_millis(300))).await;
    h.client.run_ok(&trigger(1, 1, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(1, 2, "gate")).await;
    let report = h.executor.shutdown_and_wait().await.unwrap();
    assert!(!report.is_clean());
    assert_eq!((report.killed_running, report.dropped_queued), (1, 1));
    let cb = h.admin.callback(1).await;
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("executor shutdown deadline exceeded [job running, killed]")
    );
    let cb = h.admin.callback(2).await;
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("executor shutdown deadline exceeded [job not executed, in the job queue, killed.]")
    );
    // Deregistration came first.
    let methods: Vec<String> = h.admin.requests().into_iter().map(|r| r.method).collect();
    let remove = methods.iter().position(|m| m == "registryRemove").unwrap();
    let first_callback = methods.iter().position(|m| m == "callback").unwrap();
    assert!(remove < first_callback, "{methods:?}");
}

#[tokio::test]
async fn idle_workers_end_after_the_idle_timeout() {
    let h = Harness::start_with(|b| b.idle_timeout(Duration::from_millis(200))).await;
    for job in 0..5 {
        h.client.run_ok(&trigger(job, i64::from(job), "ok")).await;
    }
    h.admin.callback_count(5).await;
    wait_until_sync("workers reaped", DEADLINE, || {
        (h.executor.stats().workers == 0).then_some(())
    })
    .await;
    // A job whose worker ended gets a new one.
    h.client.run_ok(&trigger(1, 100, "ok")).await;
    assert_eq!(h.admin.callback(100).await.handle_code, 200);
}

#[tokio::test]
async fn busy_workers_are_not_reaped() {
    let h = Harness::start_with(|b| b.idle_timeout(Duration::from_millis(100))).await;
    h.client.run_ok(&trigger(1, 1, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(1, 2, "gate")).await;
    // Several idle timeouts pass while the run is held: the worker and its queue stay.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.executor.stats().workers, 1);
    h.gate.release(2);
    assert_eq!(h.admin.callback(2).await.handle_code, 200);
}

#[tokio::test]
async fn old_run_logs_are_deleted_when_retention_is_enabled() {
    for (days, expect_deleted) in [(3, true), (2, false)] {
        let admin = Admin::start().await;
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("2001-01-01");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("1.log"), "x\n").unwrap();
        let recent = dir.path().join(
            jiff::Zoned::now()
                .with_time_zone(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d")
                .to_string(),
        );
        std::fs::create_dir_all(&recent).unwrap();
        let executor = test_builder(&admin.url(), dir.path())
            .log_retention_days(days)
            .start()
            .await
            .unwrap();
        if expect_deleted {
            wait_until_sync("old logs deleted", DEADLINE, || {
                (!old.exists()).then_some(())
            })
            .await;
        } else {
            // The clean-up pass runs at start; its absence is checked after the shutdown that
            // waits for every loop.
        }
        executor.shutdown_and_wait().await.unwrap();
        assert_eq!(old.exists(), !expect_deleted, "retention {days}");
        assert!(recent.exists());
    }
}

#[tokio::test]
async fn a_busy_port_is_a_clear_start_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = test_builder("", dir.path())
        .listen(addr)
        .start()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot listen on {addr}: ")),
        "{err}"
    );
    let err = test_builder("ftp://x", dir.path())
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("admin address"), "{err}");
}
