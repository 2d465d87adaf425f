//! SQLite's write-ahead log is copied into the database file by the admin's checkpointer, not
//! by the commits of its one writer (which do so only past a backstop of many thousand pages).

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use support::{Api, Backend, InProcessAdmin, TestDb};
use tickwork_testkit::wait_until;

/// The database file's size: it grows only when a checkpoint copies the log into it.
fn file_size(url: &str) -> u64 {
    let path = url.trim_start_matches("sqlite://");
    let path = path.split('?').next().unwrap_or(path);
    std::fs::metadata(path).expect("the database file").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_log_reaches_the_database_file_without_a_commit_checkpointing_it() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "checkpointed", "").await;
    let stats = admin.admin.scheduler.stats();
    wait_until(
        "a first checkpoint round",
        Duration::from_secs(30),
        || async { (stats.log_checkpoints.load(Ordering::Relaxed) >= 1).then_some(()) },
    )
    .await;
    let before = file_size(&db.url);

    // A few hundred kilobytes of writes: far below the writer's own backstop.
    let api = Api::new(&admin.address);
    let group = api
        .post(
            "groups",
            json!({ "app_name": "logged", "title": "logged", "address_mode": "auto" }),
        )
        .await["id"]
        .as_i64()
        .expect("group id");
    let jobs: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            json!({
                "group_id": group,
                "description": format!("job {i}"),
                "params": "x".repeat(2000),
                "schedule_type": "NONE",
                "handler": "noop",
            })
        })
        .collect();
    api.post("jobs/bulk", json!({ "jobs": jobs })).await;

    let grown = wait_until(
        "the writes copied into the database file",
        Duration::from_secs(30),
        || async {
            let now = file_size(&db.url);
            (now > before).then_some(now)
        },
    )
    .await;
    assert!(grown > before);
    admin.shutdown().await;
    db.drop_database().await;
}
