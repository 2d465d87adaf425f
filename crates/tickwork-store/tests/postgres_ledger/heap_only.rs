//! The send and the dispatch record of a run are heap-only updates (no index entry written),
//! and the generated columns `is_open` and `calls_alarm` say what the core says of every
//! state. The updates are read off the table's page itself (`pageinspect`): the row version
//! each one leaves is a heap-only tuple, which no index points at.

use sqlx::{Connection, PgConnection};
use tickwork_core::run::RunState;
use tickwork_store::*;
use tickwork_testkit::{Backend, TestDb};

use super::{NODE, NOW, planned_runs};

/// Runs of the test: few enough that all stay on the table's first page.
const RUNS: usize = 8;
/// `HEAP_ONLY_TUPLE` in a tuple's `t_infomask2`.
const HEAP_ONLY: i32 = 0x8000;

/// The latest row versions on the ledger's first page (never updated nor deleted), and how
/// many of them are heap-only.
async fn latest_versions(conn: &mut PgConnection) -> (i64, i64) {
    sqlx::query_as(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE (t_infomask2 & $1) <> 0) \
         FROM heap_page_items(get_raw_page('tw_runs', 0)) WHERE lp_flags = 1 AND t_xmax = '0'",
    )
    .bind(HEAP_ONLY)
    .fetch_one(conn)
    .await
    .expect("read the ledger's first page")
}

#[tokio::test]
async fn sends_and_dispatch_records_write_no_index_entry_on_postgres() {
    let Some(db) = TestDb::create(Backend::Postgres, "tw").await else {
        return;
    };
    let store = tickwork_store::connect(db.url(), &StoreOptions::default())
        .await
        .expect("open the test database");
    let mut conn = PgConnection::connect(db.url()).await.expect("connect");
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pageinspect")
        .execute(&mut conn)
        .await
        .expect("pageinspect");

    let (_, ids) = planned_runs(&*store, "hot", RUNS).await;
    let runs = RUNS as i64;
    assert_eq!(latest_versions(&mut conn).await, (runs, 0), "inserted");
    // Found through the open-run index, by owner.
    let pending = store.runs_pending_owned_by(NODE).await.expect("pending");
    assert_eq!(pending.iter().map(|r| r.id).collect::<Vec<_>>(), ids);

    let sent = store
        .runs_begin_send(BeginSend {
            node_id: NODE.to_owned(),
            run_ids: ids.clone(),
            live_since: None,
        })
        .await
        .expect("send");
    assert_eq!(sent, ids);
    assert_eq!(latest_versions(&mut conn).await, (runs, runs), "sent");

    let records = ids
        .iter()
        .map(|&run_id| Dispatched {
            run_id,
            address: "http://127.0.0.1:9999/".to_owned(),
            trigger_code: 200,
            trigger_msg: Some("ok".to_owned()),
            at: NOW + 10,
        })
        .collect();
    let written = store
        .runs_mark_dispatched(MarkDispatched {
            node_id: NODE.to_owned(),
            runs: records,
        })
        .await
        .expect("dispatch records");
    assert_eq!(written, runs as u64);
    assert_eq!(
        latest_versions(&mut conn).await,
        (runs, runs),
        "dispatch records written"
    );
    let pending = store.runs_pending_owned_by(NODE).await.expect("pending");
    assert!(pending.is_empty(), "dispatched runs are not pending");

    // Every state: the generated columns agree with the core.
    for &state in RunState::ALL {
        let (open, alarm): (bool, bool) = sqlx::query_as(
            "UPDATE tw_runs SET state = $1 WHERE id = $2 RETURNING is_open, calls_alarm",
        )
        .bind(state.as_str())
        .bind(ids[0])
        .fetch_one(&mut conn)
        .await
        .expect("set a state");
        assert_eq!(open, !state.is_final(), "is_open of {state}");
        assert_eq!(alarm, state.calls_for_alarm(), "calls_alarm of {state}");
    }

    conn.close().await.expect("close");
    store.close().await;
    db.drop_database().await;
}
