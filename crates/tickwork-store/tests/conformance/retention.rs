//! Retention, clearing and the daily counts.

use super::*;

pub(crate) async fn reports_and_state_counts(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "reports").await;
    let job = running_job(store, g.id, "reports", NOW).await;
    for i in 0..3 {
        let run = planned(store, job.id, Some("n"), NOW + i).await;
        if i > 0 {
            begin_send(store, run.id).await;
            store
                .complete_plain(RunComplete {
                    run_id: run.id,
                    handle_code: 200,
                    handle_msg: None,
                    state: RunState::Succeeded,
                    at: NOW,
                })
                .await
                .unwrap()
                .expect("a sending run takes an early result");
        }
    }
    // A run being sent is counted in its own state.
    let sending = planned(store, job.id, Some("n"), NOW - 1).await;
    begin_send(store, sending.id).await;
    let counts = store.runs_state_counts(TimeRange::default()).await.unwrap();
    assert_eq!(
        counts,
        [
            (RunState::Planned, 1),
            (RunState::Sending, 1),
            (RunState::Succeeded, 2)
        ]
    );
    let later = store
        .runs_state_counts(TimeRange {
            from: Some(NOW + 2),
            to: None,
        })
        .await
        .unwrap();
    assert_eq!(later, [(RunState::Succeeded, 1)]);

    const DAY: i64 = 86_400_000;
    let day = NOW - NOW % DAY;
    let report = RunReport {
        day,
        running: 1,
        succeeded: 2,
        failed: 0,
        updated_at: NOW,
    };
    store.report_upsert(report).await.unwrap();
    let report = RunReport {
        failed: 4,
        updated_at: NOW + 1,
        ..report
    };
    store.report_upsert(report).await.unwrap();
    let yesterday = RunReport {
        day: day - DAY,
        running: 0,
        succeeded: 9,
        failed: 1,
        updated_at: NOW,
    };
    store.report_upsert(yesterday).await.unwrap();
    assert_eq!(
        store.reports_list(TimeRange::default()).await.unwrap(),
        [yesterday, report]
    );
    assert_eq!(
        store
            .reports_list(TimeRange {
                from: Some(day),
                to: Some(day + DAY)
            })
            .await
            .unwrap(),
        [report]
    );
}

pub(crate) async fn retention_purges_in_batches(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "retention").await;
    let job = running_job(store, g.id, "retention", NOW).await;
    let cut = NOW - 30 * 86_400_000;
    let mut kept = Vec::new();
    for i in 0..25 {
        let run = planned(store, job.id, Some("n"), cut - 1 - i).await;
        complete(store, run.id, RunState::Succeeded).await;
    }
    // Old but not final: never deleted. New and final: kept.
    kept.push(planned(store, job.id, Some("n"), cut - 50).await.id);
    let dispatched = planned(store, job.id, Some("n"), cut - 60).await;
    dispatch(store, dispatched.id, "http://exec:1", cut - 60).await;
    kept.push(dispatched.id);
    for i in 0..3 {
        let run = planned(store, job.id, Some("n"), cut + i).await;
        complete(store, run.id, RunState::Failed).await;
        kept.push(run.id);
    }
    let purge = RunPurge {
        before: cut,
        limit: 10,
    };
    let mut batches = Vec::new();
    loop {
        let n = store.runs_purge(purge).await.unwrap();
        batches.push(n);
        if n < 10 {
            break;
        }
    }
    assert_eq!(batches, [10, 10, 5]);
    let mut left: Vec<i64> = all_runs(store, None).await.iter().map(|r| r.id).collect();
    left.sort_unstable();
    kept.sort_unstable();
    assert_eq!(left, kept);

    const DAY: i64 = 86_400_000;
    for day in [cut - 2 * DAY, cut - DAY, cut, cut + DAY] {
        store
            .report_upsert(RunReport {
                day,
                running: 0,
                succeeded: 1,
                failed: 0,
                updated_at: NOW,
            })
            .await
            .unwrap();
    }
    assert_eq!(store.reports_purge(cut).await.unwrap(), 2);
    let days: Vec<i64> = store
        .reports_list(TimeRange::default())
        .await
        .unwrap()
        .iter()
        .map(|r| r.day)
        .collect();
    assert_eq!(days, [cut, cut + DAY]);
}

pub(crate) async fn runs_clear_deletes_only_final_runs_matching(ctx: Ctx) {
    let store = &*ctx.store;
    let g1 = group(store, "clear-1").await;
    let g2 = group(store, "clear-2").await;
    let j1 = running_job(store, g1.id, "clear-1", NOW).await;
    let j2 = running_job(store, g2.id, "clear-2", NOW).await;
    let mut final_runs = Vec::new();
    for (job, at) in [
        (j1.id, NOW - 10),
        (j1.id, NOW - 20),
        (j2.id, NOW - 10),
        (j1.id, NOW + 10),
    ] {
        let r = planned(store, job, Some("n"), at).await;
        complete(store, r.id, RunState::Failed).await;
        final_runs.push(r.id);
    }
    let pending = planned(store, j1.id, Some("n"), NOW - 30).await;
    // Of one job: its two old final runs.
    let n = store
        .runs_clear(RunClear {
            before: NOW,
            job_id: Some(j1.id),
            group_id: None,
        })
        .await
        .unwrap();
    assert_eq!(n, 2);
    // Of one group: nothing left there before NOW but the pending run, which stays.
    let n = store
        .runs_clear(RunClear {
            before: NOW,
            job_id: None,
            group_id: Some(g1.id),
        })
        .await
        .unwrap();
    assert_eq!(n, 0);
    let n = store
        .runs_clear(RunClear {
            before: NOW,
            job_id: None,
            group_id: None,
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let mut left: Vec<i64> = all_runs(store, None).await.iter().map(|r| r.id).collect();
    left.sort_unstable();
    let mut want = vec![final_runs[3], pending.id];
    want.sort_unstable();
    assert_eq!(left, want);
}
