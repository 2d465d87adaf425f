//! On PostgreSQL a statement the store prepared while the ledger was small finds runs by id
//! once the ledger has grown, on a server that never analyzes.
//!
//! A prepared statement runs on a plan of its own for its first five executions and may then
//! keep a generic plan made with the table's size of that moment, until the table's statistics
//! change. With autovacuum off they never do, and the pool keeps a session for up to half an
//! hour: the dispatch record's join of its batch with the ledger, prepared on a fresh
//! database, read the whole ledger at every batch for as long. The sessions plan every execution
//! (`plan_cache_mode`); the test counts the sequential reads of the ledger the server reports.

use std::time::Duration;

use sqlx::PgPool;
use tickwork_core::run::RunState;
use tickwork_store::*;
use tickwork_testkit::{Backend, TestDb, Wait};

use super::{NODE, NOW, planned_runs};

/// Fires taken through send, dispatch record and end while the ledger is small: more than the
/// five executions after which the server may keep a generic plan.
const SMALL_FIRES: usize = 8;
/// Ended runs added behind the store's back: a ledger where reading all of it costs far more
/// than a hundred lookups by id (the server's guess of a batch's rows).
const GROWN_BY: i64 = 100_000;

/// The updates and the sequential reads of `tw_runs` the server reports.
async fn ledger_counters(server: &PgPool) -> (i64, i64) {
    sqlx::query_as("SELECT n_tup_upd, seq_scan FROM pg_stat_user_tables WHERE relname = 'tw_runs'")
        .fetch_one(server)
        .await
        .expect("read the ledger's counters")
}

/// The sequential reads of the ledger once the server reports at least `updates` updates of
/// it: a session hands its counters over when it goes idle, within ten seconds.
async fn seq_scans_after(server: &PgPool, updates: i64) -> i64 {
    Wait::new(
        format!("the server to report {updates} updates of the ledger"),
        Duration::from_secs(60),
    )
    .until(|| async move {
        let (updated, scans) = ledger_counters(server).await;
        if updated >= updates {
            Ok(scans)
        } else {
            Err(updated)
        }
    })
    .await
}

/// Sends the run, writes its dispatch record and ends it: the three updates of a fire.
async fn fire(store: &dyn Store, run_id: i64) {
    let sent = store
        .runs_begin_send(BeginSend {
            node_id: NODE.to_owned(),
            run_ids: vec![run_id],
            live_since: None,
        })
        .await
        .expect("send");
    assert_eq!(sent, vec![run_id]);
    let written = store
        .runs_mark_dispatched(MarkDispatched {
            node_id: NODE.to_owned(),
            runs: vec![Dispatched {
                run_id,
                address: "http://127.0.0.1:9999/".to_owned(),
                trigger_code: 200,
                trigger_msg: None,
                at: NOW + 10,
            }],
        })
        .await
        .expect("dispatch record");
    assert_eq!(written, 1);
    let result = RunComplete {
        run_id,
        handle_code: 200,
        handle_msg: None,
        state: RunState::Succeeded,
        at: NOW + 20,
    };
    let ended = store
        .runs_complete(&[result], NO_FOLLOW_UPS)
        .await
        .expect("end");
    assert_eq!(ended.runs.len(), 1);
}

#[tokio::test]
async fn a_dispatch_record_prepared_on_a_small_ledger_reads_no_more_than_its_runs_once_it_grew() {
    let Some(db) = TestDb::create(Backend::Postgres, "tw").await else {
        return;
    };
    // One session, so that every execution goes to the same prepared statement.
    let options = StoreOptions {
        max_connections: Some(1),
        ..StoreOptions::default()
    };
    let store = tickwork_store::connect(db.url(), &options)
        .await
        .expect("open the test database");
    let (job, runs) = planned_runs(&*store, "plans", SMALL_FIRES + 1).await;
    for &run in &runs[..SMALL_FIRES] {
        fire(&*store, run).await;
    }
    let server = PgPool::connect(db.url()).await.expect("connect");
    let small_updates = 3 * SMALL_FIRES as i64;
    let before = seq_scans_after(&server, small_updates).await;

    sqlx::query(
        "INSERT INTO tw_runs (job_id, group_id, scheduled_at, trigger_type, handler, params, \
         state, created_at, finished_at) \
         SELECT $1, $2, $3 - g, 'cron', $4, '', 'succeeded', $3, $3 \
         FROM generate_series(1, $5) AS g",
    )
    .bind(job.id)
    .bind(job.spec.group_id)
    .bind(NOW)
    .bind(&job.spec.handler)
    .bind(GROWN_BY)
    .execute(&server)
    .await
    .expect("grow the ledger");

    fire(&*store, runs[SMALL_FIRES]).await;
    let after = seq_scans_after(&server, small_updates + 3).await;
    assert_eq!(
        after - before,
        0,
        "a fire on the grown ledger read all of it: its statements kept the plans made \
         while it held {} runs",
        runs.len()
    );

    server.close().await;
    store.close().await;
    db.drop_database().await;
}
