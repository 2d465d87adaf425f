//! Runs: writing them, their state changes, listing, kill intent.

use super::*;

pub(crate) async fn runs_mark_dispatched_in_one_batch(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "dispatch").await;
    let job = running_job(store, g.id, "dispatch", NOW).await;
    let claimed = store
        .jobs_claim_due(claim("node-a", NOW, 200, 10), &fixed_rate(100, NOW + 200))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 3);
    let ids: Vec<i64> = claimed.runs.iter().map(|r| r.id).collect();
    let sent = store
        .runs_begin_send(BeginSend {
            node_id: "node-a".to_owned(),
            run_ids: ids.clone(),
            live_since: None,
        })
        .await
        .unwrap();
    assert_eq!(sent, ids);
    // A fast executor calls back before the dispatch batch is written: the run is still
    // `sending`.
    let early = planned(store, job.id, Some("node-a"), NOW).await;
    begin_send(store, early.id).await;
    // A run of the node that was never sent takes no dispatch record.
    let unsent = planned(store, job.id, Some("node-a"), NOW).await;
    store
        .complete_plain(RunComplete {
            run_id: early.id,
            handle_code: 200,
            handle_msg: None,
            state: RunState::Succeeded,
            at: NOW + 5,
        })
        .await
        .unwrap()
        .expect("early completion");

    let mut batch: Vec<Dispatched> = claimed
        .runs
        .iter()
        .chain([&early])
        .enumerate()
        .map(|(i, r)| Dispatched {
            run_id: r.id,
            address: format!("http://exec-{i}:9999"),
            trigger_code: 200,
            trigger_msg: Some(format!("routed to exec-{i}")),
            at: NOW + 10 + i as i64,
        })
        .collect();
    batch.push(dispatched(unsent.id, "http://exec-9:9999", NOW));
    batch.push(dispatched(early.id + 1000, "http://nowhere:1", NOW));
    assert_eq!(mark_dispatched(store, "node-a", batch.clone()).await, 4);
    for (i, r) in claimed.runs.iter().enumerate() {
        let run = store.run_get(r.id).await.unwrap();
        assert_eq!(run.state, RunState::Dispatched);
        assert_eq!(run.executor_address, Some(format!("http://exec-{i}:9999")));
        assert_eq!(
            (run.trigger_code, run.dispatched_at),
            (200, Some(NOW + 10 + i as i64))
        );
        assert_eq!(run.trigger_msg, Some(format!("routed to exec-{i}")));
    }
    let early = store.run_get(early.id).await.unwrap();
    assert_eq!(early.state, RunState::Succeeded);
    assert_eq!(
        early.executor_address.as_deref(),
        Some("http://exec-3:9999")
    );
    assert_eq!(store.run_get(unsent.id).await.unwrap(), unsent);
    // Recorded once: a repeat changes nothing.
    assert_eq!(mark_dispatched(store, "node-a", batch).await, 0);
    assert_eq!(mark_dispatched(store, "node-a", Vec::new()).await, 0);
}

/// Texts that a batch statement must carry exactly, whatever the backend encodes its rows
/// with (SQLite's are one JSON array): quotes, backslashes, line breaks, control characters,
/// JSON and SQL syntax, and characters outside ASCII.
const AWKWARD: &str =
    "say \"hi\" \\ C:\\dir\n\ttab \u{1} ]},{\"x\":null}' OR 1=1 -- 调度 \u{1F600}";

pub(crate) async fn batch_writes_keep_any_text_exactly(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "texts").await;
    let mut new = job_new(g.id, "texts");
    new.spec.schedule_type = ScheduleType::FixRate;
    new.spec.schedule_conf = "1".to_owned();
    new.spec.handler = format!("handler {AWKWARD}");
    new.spec.params = format!("params {AWKWARD}");
    new.status = JobStatus::Running;
    new.next_fire_at = Some(NOW);
    let job = store.job_create(new).await.expect("create job");
    let claimed = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &fixed_rate(100, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 1);
    let run = store.run_get(claimed.runs[0].id).await.unwrap();
    assert_eq!(run.handler, job.spec.handler);
    assert_eq!(run.params, job.spec.params);
    assert_eq!(run, claimed.runs[0]);
    begin_send(store, run.id).await;
    let mut record = dispatched(run.id, "http://exec:9999/", NOW + 1);
    record.trigger_msg = Some(format!("trigger {AWKWARD}"));
    assert_eq!(mark_dispatched(store, "node-a", vec![record]).await, 1);
    let done = store
        .complete_batch_plain(&[RunComplete {
            run_id: run.id,
            handle_code: 500,
            handle_msg: Some(format!("handle {AWKWARD}")),
            state: RunState::Failed,
            at: NOW + 2,
        }])
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    let run = store.run_get(run.id).await.unwrap();
    assert_eq!(done[0], run);
    assert_eq!(run.trigger_msg, Some(format!("trigger {AWKWARD}")));
    assert_eq!(run.handle_msg, Some(format!("handle {AWKWARD}")));
    assert_eq!(run.executor_address.as_deref(), Some("http://exec:9999/"));
    assert_eq!((run.state, run.handle_code), (RunState::Failed, 500));
}

pub(crate) async fn runs_complete_finishes_a_batch_once(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "batch").await;
    let job = running_job(store, g.id, "batch", NOW).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let run = planned(store, job.id, Some("n"), NOW).await;
        // Sending: the results beat the dispatch record.
        begin_send(store, run.id).await;
        ids.push(run.id);
    }
    // The third is already final before the batch arrives.
    store
        .complete_plain(RunComplete {
            run_id: ids[2],
            handle_code: 200,
            handle_msg: None,
            state: RunState::Succeeded,
            at: NOW + 1,
        })
        .await
        .unwrap()
        .unwrap();
    let result = |run_id, handle_code, state, msg: &str| RunComplete {
        run_id,
        handle_code,
        handle_msg: Some(msg.to_owned()),
        state,
        at: NOW + 10,
    };
    let batch = [
        result(ids[0], 200, RunState::Succeeded, "ok"),
        result(ids[1], 502, RunState::TimedOut, "slow"),
        result(ids[2], 500, RunState::Failed, "too late"),
        // A resent callback for a run already in this batch counts once.
        result(ids[0], 500, RunState::Failed, "resent"),
        result(987_654, 200, RunState::Succeeded, "unknown"),
    ];
    let mut done = store.complete_batch_plain(&batch).await.unwrap();
    done.sort_by_key(|r| r.id);
    let summary: Vec<_> = done
        .iter()
        .map(|r| {
            (
                r.id,
                r.state,
                r.handle_code,
                r.handle_msg.clone(),
                r.finished_at,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                ids[0],
                RunState::Succeeded,
                200,
                Some("ok".to_owned()),
                Some(NOW + 10)
            ),
            (
                ids[1],
                RunState::TimedOut,
                502,
                Some("slow".to_owned()),
                Some(NOW + 10)
            ),
        ]
    );
    let third = store.run_get(ids[2]).await.unwrap();
    assert_eq!(
        (third.state, third.finished_at),
        (RunState::Succeeded, Some(NOW + 1))
    );
    // The whole batch again changes nothing.
    assert!(store.complete_batch_plain(&batch).await.unwrap().is_empty());
    assert!(store.complete_batch_plain(&[]).await.unwrap().is_empty());
    let bad = [result(ids[0], 200, RunState::Planned, "x")];
    assert!(matches!(
        store.complete_batch_plain(&bad).await,
        Err(Error::Invalid(_))
    ));
}

pub(crate) async fn run_set_shard_records_a_broadcast_shard(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "shard").await;
    let job = running_job(store, g.id, "shard", NOW).await;
    let run = store
        .run_insert(RunNew::new(job.id, TriggerType::Api, NOW))
        .await
        .unwrap();
    assert_eq!((run.shard_index, run.shard_total), (None, None));
    let shard = RunShard {
        run_id: run.id,
        index: 0,
        total: 3,
    };
    store.run_set_shard(shard).await.unwrap();
    let run = store.run_get(run.id).await.unwrap();
    assert_eq!((run.shard_index, run.shard_total), (Some(0), Some(3)));
    let out_of_range = RunShard { index: 3, ..shard };
    assert!(matches!(
        store.run_set_shard(out_of_range).await,
        Err(Error::Invalid(_))
    ));
    let unknown = RunShard {
        run_id: 987_654,
        ..shard
    };
    assert!(
        store
            .run_set_shard(unknown)
            .await
            .unwrap_err()
            .to_string()
            .contains("not found")
    );
}

/// A skip ends a run its node never sent: `planned`, or `sending` (the node knows it did not
/// call `/run` yet). Since the send fence, a `sending` run is skipped too, and only by its
/// owner.
pub(crate) async fn run_skip_ends_only_unsent_runs_of_its_node(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "skip").await;
    let job = running_job(store, g.id, "skip", NOW).await;
    let skip = |run_id, node: &str, reason: &str, at| RunSkip {
        run_id,
        node_id: node.to_owned(),
        reason: reason.to_owned(),
        at,
    };
    let planned_run = planned(store, job.id, Some("n"), NOW).await;
    let skipped = store
        .run_skip(skip(planned_run.id, "n", "job stopped", NOW + 5))
        .await
        .unwrap()
        .expect("a planned run is skipped");
    assert_eq!(skipped.state, RunState::Skipped);
    assert_eq!(skipped.trigger_msg.as_deref(), Some("job stopped"));
    assert_eq!(skipped.finished_at, Some(NOW + 5));
    // Skipping again, or a run that was dispatched, changes nothing.
    let again = skip(planned_run.id, "n", "again", NOW + 6);
    assert_eq!(store.run_skip(again).await.unwrap(), None);
    let dispatched = planned(store, job.id, Some("n"), NOW).await;
    dispatch(store, dispatched.id, "http://exec:1", NOW + 1).await;
    let before = store.run_get(dispatched.id).await.unwrap();
    let late = skip(dispatched.id, "n", "late", NOW + 7);
    assert_eq!(store.run_skip(late).await.unwrap(), None);
    assert_eq!(store.run_get(dispatched.id).await.unwrap(), before);
    // Another node's run is not this node's to skip, planned or sending.
    let foreign = planned(store, job.id, Some("other"), NOW).await;
    let sending = planned(store, job.id, Some("n"), NOW).await;
    begin_send(store, sending.id).await;
    for run_id in [foreign.id, sending.id] {
        let not_mine = skip(run_id, "intruder", "not mine", NOW + 8);
        assert_eq!(store.run_skip(not_mine).await.unwrap(), None);
    }
    assert_eq!(store.run_get(foreign.id).await.unwrap(), foreign);
    assert_eq!(
        store.run_get(sending.id).await.unwrap().state,
        RunState::Sending
    );
    // Its owner skips a run it took to send but never sent.
    let skipped = store
        .run_skip(skip(sending.id, "n", "job stopped", NOW + 9))
        .await
        .unwrap()
        .expect("a sending run is skipped by its owner");
    assert_eq!(
        (skipped.state, skipped.finished_at),
        (RunState::Skipped, Some(NOW + 9))
    );
    let unknown = skip(987_654, "n", "x", NOW);
    assert_eq!(store.run_skip(unknown).await.unwrap(), None);
}

/// A batch of skips (a stop of many jobs) ends exactly the runs a skip of each alone would:
/// the node's planned and sending runs, in one call across more runs than one statement holds.
pub(crate) async fn runs_mark_skipped_ends_what_each_skip_would_in_one_batch(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "skips").await;
    let job = running_job(store, g.id, "skips", NOW).await;
    let batch = |run_ids: Vec<i64>| MarkSkipped {
        node_id: "n".to_owned(),
        run_ids,
        reason: "job stopped".to_owned(),
        at: NOW + 5,
    };
    assert_eq!(
        store.runs_mark_skipped(batch(Vec::new())).await.unwrap(),
        []
    );
    let mut unsent = Vec::new();
    for _ in 0..520 {
        unsent.push(planned(store, job.id, Some("n"), NOW).await.id);
    }
    let sending = planned(store, job.id, Some("n"), NOW).await;
    begin_send(store, sending.id).await;
    unsent.push(sending.id);
    let dispatched = planned(store, job.id, Some("n"), NOW).await;
    dispatch(store, dispatched.id, "http://exec:1", NOW + 1).await;
    let foreign = planned(store, job.id, Some("other"), NOW).await;
    let untouched = [
        store.run_get(dispatched.id).await.unwrap(),
        store.run_get(foreign.id).await.unwrap(),
    ];
    let mut ids = unsent.clone();
    ids.extend([dispatched.id, foreign.id, 987_654]);
    let mut ended = store.runs_mark_skipped(batch(ids.clone())).await.unwrap();
    ended.sort_by_key(|r| r.id);
    assert_eq!(ended.iter().map(|r| r.id).collect::<Vec<_>>(), unsent);
    for run in &ended {
        assert_eq!(
            (run.state, run.trigger_msg.as_deref(), run.finished_at),
            (RunState::Skipped, Some("job stopped"), Some(NOW + 5)),
            "{run:?}"
        );
    }
    for before in untouched {
        assert_eq!(store.run_get(before.id).await.unwrap(), before);
    }
    // Again: nothing left to skip.
    assert_eq!(store.runs_mark_skipped(batch(ids)).await.unwrap(), []);
}

pub(crate) async fn run_complete_moves_to_final_state_once(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "complete").await;
    let job = running_job(store, g.id, "complete", NOW).await;
    let run = planned(store, job.id, Some("n"), NOW).await;
    dispatch(store, run.id, "http://exec:1", NOW + 1).await;
    let done = store
        .complete_plain(RunComplete {
            run_id: run.id,
            handle_code: 200,
            handle_msg: Some("all good".to_owned()),
            state: RunState::Succeeded,
            at: NOW + 100,
        })
        .await
        .unwrap()
        .expect("first completion");
    assert_eq!(done.state, RunState::Succeeded);
    assert_eq!(
        (done.handle_code, done.handle_msg.as_deref()),
        (200, Some("all good"))
    );
    assert_eq!(
        (done.finished_at, done.dispatched_at),
        (Some(NOW + 100), Some(NOW + 1))
    );

    let repeat = store
        .complete_plain(RunComplete {
            run_id: run.id,
            handle_code: 500,
            handle_msg: Some("late failure".to_owned()),
            state: RunState::Failed,
            at: NOW + 200,
        })
        .await
        .unwrap();
    assert_eq!(repeat, None);
    assert_eq!(store.run_get(run.id).await.unwrap(), done);

    let unknown = RunComplete {
        run_id: run.id + 1000,
        handle_code: 200,
        handle_msg: None,
        state: RunState::Succeeded,
        at: NOW,
    };
    assert_eq!(store.complete_plain(unknown.clone()).await.unwrap(), None);
    for state in [
        RunState::Planned,
        RunState::Sending,
        RunState::Dispatched,
        RunState::Misfired,
        RunState::Skipped,
    ] {
        assert_invalid(
            store
                .complete_plain(RunComplete {
                    state,
                    ..unknown.clone()
                })
                .await,
        );
    }

    // A planned run was never sent, so no executor has a result for it: a callback for it
    // ends nothing. (Before the send fence an early callback ended a planned run; now the
    // run is `sending` by the time an executor can answer.)
    let unsent = planned(store, job.id, Some("n"), NOW).await;
    for &state in RunState::EARLY_RESULTS {
        let early = RunComplete {
            run_id: unsent.id,
            handle_code: state.handle_code().max(500),
            handle_msg: None,
            state,
            at: NOW,
        };
        assert_eq!(store.complete_plain(early.clone()).await.unwrap(), None);
        assert!(
            store
                .complete_batch_plain(&[early])
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert_eq!(store.run_get(unsent.id).await.unwrap(), unsent);

    // An oversized message is cut to what every backend stores, never refused (an early
    // result: the run is still sending).
    let other = planned(store, job.id, Some("n"), NOW).await;
    begin_send(store, other.id).await;
    let long = "é".repeat(40_000);
    let timed_out = store
        .complete_plain(RunComplete {
            run_id: other.id,
            handle_code: 502,
            handle_msg: Some(long.clone()),
            state: RunState::TimedOut,
            at: NOW,
        })
        .await
        .unwrap()
        .expect("completion");
    let msg = timed_out.handle_msg.unwrap();
    assert!(msg.len() <= 65_535 && long.starts_with(&msg) && msg.len() > 60_000);
}

pub(crate) async fn run_mark_trigger_failed_ends_the_run(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "refused").await;
    let job = running_job(store, g.id, "refused", NOW).await;
    let run = planned(store, job.id, Some("n"), NOW).await;
    // Only a run being sent fails at trigger time: a planned one was never tried.
    assert_eq!(
        store
            .trigger_failed_plain(trigger_failed(run.id, "n", NOW + 2))
            .await
            .unwrap(),
        None
    );
    begin_send(store, run.id).await;
    let failed = store
        .trigger_failed_plain(TriggerFailed {
            address: Some("http://exec:1".to_owned()),
            trigger_msg: "connection refused".to_owned(),
            ..trigger_failed(run.id, "n", NOW + 3)
        })
        .await
        .unwrap()
        .expect("trigger failure");
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(
        (failed.trigger_code, failed.trigger_msg.as_deref()),
        (500, Some("connection refused"))
    );
    assert_eq!(
        (failed.executor_address.as_deref(), failed.finished_at),
        (Some("http://exec:1"), Some(NOW + 3))
    );
    let again = TriggerFailed {
        trigger_msg: "again".to_owned(),
        ..trigger_failed(run.id, "n", NOW + 4)
    };
    assert_eq!(store.trigger_failed_plain(again).await.unwrap(), None);
    let late = RunComplete {
        run_id: run.id,
        handle_code: 200,
        handle_msg: None,
        state: RunState::Succeeded,
        at: NOW + 5,
    };
    assert_eq!(store.complete_plain(late).await.unwrap(), None);
    // A dispatch record cannot overwrite the trigger failure either.
    let record = dispatched(run.id, "http://other:1", NOW + 6);
    assert_eq!(mark_dispatched(store, "n", vec![record]).await, 0);
    assert_eq!(store.run_get(run.id).await.unwrap(), failed);
}

pub(crate) async fn runs_mark_trigger_failed_ends_each_run_of_a_batch_it_applies_to(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "outage").await;
    let job = running_job(store, g.id, "outage", NOW).await;
    let mut sent = Vec::new();
    for i in 0..3 {
        let run = planned(store, job.id, Some("n"), NOW + i).await;
        begin_send(store, run.id).await;
        sent.push(run.id);
    }
    let never_sent = planned(store, job.id, Some("n"), NOW).await.id;
    let another_nodes = planned(store, job.id, Some("other"), NOW).await.id;
    begin_send(store, another_nodes).await;
    let done = RunComplete {
        run_id: sent[2],
        handle_code: 200,
        handle_msg: None,
        state: RunState::Succeeded,
        at: NOW + 1,
    };
    store.complete_plain(done).await.unwrap().expect("a result");
    let before: Vec<Run> = {
        let mut runs = Vec::new();
        for id in [sent[2], never_sent, another_nodes] {
            runs.push(store.run_get(id).await.unwrap());
        }
        runs
    };
    // Out of order, one twice, one unknown: the runs it applies to end, once each.
    let batch: Vec<TriggerFailed> = [sent[1], never_sent, sent[0], another_nodes, sent[2]]
        .into_iter()
        .chain([sent[1], i64::MAX - 1])
        .map(|id| TriggerFailed {
            trigger_msg: format!("refused {id}"),
            ..trigger_failed(id, "n", NOW + 2)
        })
        .collect();
    let ended = store
        .runs_mark_trigger_failed(&batch, NO_FOLLOW_UPS)
        .await
        .unwrap();
    let mut ids: Vec<i64> = ended.runs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![sent[0], sent[1]]);
    for run in &ended.runs {
        assert_eq!(run.state, RunState::Failed);
        assert_eq!(run.trigger_msg, Some(format!("refused {}", run.id)));
        assert_eq!(store.run_get(run.id).await.unwrap(), *run);
    }
    // The others are as they were.
    for run in before {
        assert_eq!(store.run_get(run.id).await.unwrap(), run);
    }
    // A bad failure refuses the batch and changes nothing.
    let third = planned(store, job.id, Some("n"), NOW + 3).await.id;
    begin_send(store, third).await;
    let bad = [
        trigger_failed(third, "n", NOW + 4),
        TriggerFailed {
            address: Some("x".repeat(100_000)),
            ..trigger_failed(third, "n", NOW + 4)
        },
    ];
    let err = store
        .runs_mark_trigger_failed(&bad, NO_FOLLOW_UPS)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("executor address"), "{err}");
    assert_eq!(store.run_get(third).await.unwrap().state, RunState::Sending);
}

/// A callback's result with the dispatch record the ledger still held: both in one write, and
/// exactly what `runs_complete` then `runs_mark_dispatched` would leave.
pub(crate) async fn runs_complete_dispatched_writes_results_with_dispatch_records(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "one-write").await;
    let job = running_job(store, g.id, "one-write", NOW).await;
    let mut sent = Vec::new();
    for i in 0..4 {
        let run = planned(store, job.id, Some("n"), NOW + i).await;
        begin_send(store, run.id).await;
        sent.push(run.id);
    }
    let [ok, failed, no_result, untouched] = sent[..] else {
        unreachable!()
    };
    let never_sent = planned(store, job.id, Some("n"), NOW).await.id;
    let another_nodes = planned(store, job.id, Some("other"), NOW).await.id;
    begin_send(store, another_nodes).await;
    let early = planned(store, job.id, Some("n"), NOW).await.id;
    begin_send(store, early).await;
    store
        .complete_plain(result(early, RunState::Succeeded, NOW + 1))
        .await
        .unwrap()
        .expect("an early result");
    let before_untouched = store.run_get(untouched).await.unwrap();
    let before_never_sent = store.run_get(never_sent).await.unwrap();

    let results = [
        RunComplete {
            handle_msg: Some(format!("result {AWKWARD}")),
            ..result(failed, RunState::Failed, NOW + 20)
        },
        result(ok, RunState::Succeeded, NOW + 21),
        result(another_nodes, RunState::Succeeded, NOW + 22),
        result(early, RunState::Failed, NOW + 23),
        result(never_sent, RunState::Succeeded, NOW + 24),
        result(i64::MAX - 1, RunState::Succeeded, NOW + 25),
    ];
    let record = |id: i64, at: i64| Dispatched {
        trigger_msg: Some(format!("trigger {AWKWARD} {id}")),
        ..dispatched(id, &format!("http://exec-{id}:9999"), at)
    };
    let records = MarkDispatched {
        node_id: "n".to_owned(),
        runs: [
            ok,
            failed,
            no_result,
            another_nodes,
            early,
            never_sent,
            i64::MAX - 2,
        ]
        .into_iter()
        .map(|id| record(id, NOW + 10))
        .collect(),
    };
    let both = CompleteDispatched {
        results: &results,
        dispatched: &records,
    };
    let ended = store
        .runs_complete_dispatched(both, NO_FOLLOW_UPS)
        .await
        .unwrap();
    let mut ids: Vec<i64> = ended.runs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![ok, failed, another_nodes]);
    for run in &ended.runs {
        assert_eq!(store.run_get(run.id).await.unwrap(), *run);
    }

    let has_record = |run: &Run| {
        let want = record(run.id, NOW + 10);
        assert_eq!(
            run.executor_address.as_ref(),
            Some(&want.address),
            "{run:?}"
        );
        assert_eq!(
            (run.trigger_code, run.dispatched_at, &run.trigger_msg),
            (200, Some(NOW + 10), &want.trigger_msg)
        );
    };
    let run = store.run_get(ok).await.unwrap();
    assert_eq!(
        (run.state, run.finished_at),
        (RunState::Succeeded, Some(NOW + 21))
    );
    has_record(&run);
    let run = store.run_get(failed).await.unwrap();
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.handle_msg, Some(format!("result {AWKWARD}")));
    has_record(&run);
    // A record without a result: dispatched.
    let run = store.run_get(no_result).await.unwrap();
    assert_eq!(run.state, RunState::Dispatched);
    has_record(&run);
    // Another node's run takes the result, not this node's record.
    let run = store.run_get(another_nodes).await.unwrap();
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!((run.executor_address, run.dispatched_at), (None, None));
    // Ended before: the result does not apply, the record does.
    let run = store.run_get(early).await.unwrap();
    assert_eq!(
        (run.state, run.finished_at),
        (RunState::Succeeded, Some(NOW + 1))
    );
    has_record(&run);
    // Never sent, or not in the batch: as they were.
    assert_eq!(store.run_get(never_sent).await.unwrap(), before_never_sent);
    assert_eq!(store.run_get(untouched).await.unwrap(), before_untouched);

    // A record without an address refuses the whole write, result and all.
    let bad = MarkDispatched {
        node_id: "n".to_owned(),
        runs: vec![
            record(untouched, NOW + 30),
            dispatched(untouched, "", NOW + 30),
        ],
    };
    let both = CompleteDispatched {
        results: &[result(untouched, RunState::Succeeded, NOW + 31)],
        dispatched: &bad,
    };
    let err = store
        .runs_complete_dispatched(both, NO_FOLLOW_UPS)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("executor address"), "{err}");
    assert_eq!(store.run_get(untouched).await.unwrap(), before_untouched);
}

pub(crate) async fn run_insert_manual_runs_have_no_fire_key_and_coexist(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "manual").await;
    let mut new = job_new(g.id, "manual");
    new.spec.priority = 9;
    let job = store.job_create(new).await.unwrap();

    let first = store
        .run_insert(RunNew::new(job.id, TriggerType::Manual, NOW))
        .await
        .unwrap();
    let second = store
        .run_insert(RunNew {
            params: Some("override".to_owned()),
            executor_address: Some("http://chosen:9999".to_owned()),
            owner_node: Some("node-a".to_owned()),
            ..RunNew::new(job.id, TriggerType::Manual, NOW)
        })
        .await
        .unwrap();
    let retry = store
        .run_insert(RunNew {
            attempt: 1,
            parent_run_id: Some(first.id),
            scheduled_at: NOW + 15_000,
            shard_index: Some(1),
            shard_total: Some(3),
            ..RunNew::new(job.id, TriggerType::Retry, NOW)
        })
        .await
        .unwrap();
    assert_ne!(first.id, second.id);
    for run in [&first, &second, &retry] {
        assert_eq!(run.fire_key, None);
        assert_eq!(run.state, RunState::Planned);
        assert_eq!((run.job_id, run.group_id, run.priority), (job.id, g.id, 9));
        assert_eq!(run.handler, job.spec.handler);
        assert_eq!(
            (run.trigger_code, run.handle_code, run.alarm_status),
            (0, 0, AlarmStatus::Undecided)
        );
        assert_eq!(run.created_at, NOW);
    }
    assert_eq!(first.params, job.spec.params);
    assert_eq!(
        (first.scheduled_at, first.trigger_type),
        (NOW, TriggerType::Manual)
    );
    assert_eq!(second.params, "override");
    assert_eq!(
        second.executor_address.as_deref(),
        Some("http://chosen:9999")
    );
    assert_eq!(second.owner_node.as_deref(), Some("node-a"));
    assert_eq!((retry.attempt, retry.parent_run_id), (1, Some(first.id)));
    assert_eq!(
        (retry.shard_index, retry.shard_total, retry.scheduled_at),
        (Some(1), Some(3), NOW + 15_000)
    );
    assert_eq!(
        all_runs(store, Some(job.id)).await,
        vec![first, second, retry]
    );

    assert_not_found(
        store
            .run_insert(RunNew::new(job.id + 1000, TriggerType::Manual, NOW))
            .await,
    );
    assert_not_found(store.run_get(-1).await);
}

pub(crate) async fn runs_list_filters(ctx: Ctx) {
    let store = &*ctx.store;
    let a = group(store, "list-a").await;
    let b = group(store, "list-b").await;
    let job_a = running_job(store, a.id, "list-a", NOW).await;
    let job_b = running_job(store, b.id, "list-b", NOW).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let job = if i < 4 { job_a.id } else { job_b.id };
        let run = planned(store, job, Some("n"), NOW + i * 1000).await;
        ids.push(run.id);
    }
    begin_send(store, ids[1]).await;
    store
        .complete_plain(RunComplete {
            run_id: ids[1],
            handle_code: 500,
            handle_msg: None,
            state: RunState::Failed,
            at: NOW,
        })
        .await
        .unwrap();
    let list = |filter: RunFilter| store.runs_list(filter);
    let ids_of = |page: &Paged<Run>| page.items.iter().map(|r| r.id).collect::<Vec<_>>();

    let all = list(RunFilter::default()).await.unwrap();
    assert_eq!(all.total, 6);
    assert_eq!(
        ids_of(&all),
        ids.iter().rev().copied().collect::<Vec<_>>(),
        "newest first"
    );
    let of_a = list(RunFilter {
        job_id: Some(job_a.id),
        ..RunFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(of_a.total, 4);
    let of_b = list(RunFilter {
        group_id: Some(b.id),
        ..RunFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(ids_of(&of_b), [ids[5], ids[4]]);
    let failed = list(RunFilter {
        state: Some(RunState::Failed),
        ..RunFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(ids_of(&failed), [ids[1]]);
    let window = list(RunFilter {
        range: TimeRange {
            from: Some(NOW + 1000),
            to: Some(NOW + 3000),
        },
        ..RunFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(ids_of(&window), [ids[2], ids[1]]);
    let page = list(RunFilter {
        job_id: Some(job_a.id),
        state: Some(RunState::Planned),
        page: PageReq {
            offset: 1,
            limit: 1,
        },
        ..RunFilter::default()
    })
    .await
    .unwrap();
    assert_eq!((page.total, ids_of(&page)), (3, vec![ids[2]]));
}

/// A node's pending runs: planned (its timer reloads them) and sending (it asks the
/// executors about them), not those dispatched.
pub(crate) async fn runs_pending_owned_by_node(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "owners").await;
    running_job(store, g.id, "first", NOW).await;
    let a = store
        .jobs_claim_due(claim("node-a", NOW, 100, 1), &fixed_rate(50, NOW + 100))
        .await
        .unwrap();
    running_job(store, g.id, "second", NOW).await;
    let b = store
        .jobs_claim_due(claim("node-b", NOW, 100, 1), &fixed_rate(50, NOW + 100))
        .await
        .unwrap();
    assert_eq!((a.runs.len(), b.runs.len()), (3, 3));
    assert_eq!(store.runs_pending_owned_by("node-a").await.unwrap(), a.runs);
    assert_eq!(store.runs_pending_owned_by("node-b").await.unwrap(), b.runs);
    begin_send(store, a.runs[0].id).await;
    begin_send(store, a.runs[1].id).await;
    let pending = store.runs_pending_owned_by("node-a").await.unwrap();
    let states: Vec<(i64, RunState)> = pending.iter().map(|r| (r.id, r.state)).collect();
    assert_eq!(
        states,
        [
            (a.runs[0].id, RunState::Sending),
            (a.runs[1].id, RunState::Sending),
            (a.runs[2].id, RunState::Planned),
        ]
    );
    let record = dispatched(a.runs[0].id, "http://exec:1", NOW);
    assert_eq!(mark_dispatched(store, "node-a", vec![record]).await, 1);
    let pending = store.runs_pending_owned_by("node-a").await.unwrap();
    assert_eq!(
        pending.iter().map(|r| r.id).collect::<Vec<_>>(),
        [a.runs[1].id, a.runs[2].id]
    );
    assert!(
        store
            .runs_pending_owned_by("node-c")
            .await
            .unwrap()
            .is_empty()
    );
}

/// The group of each run, for checking a callback against its caller's group.
pub(crate) async fn runs_groups_names_the_group_of_each_run(ctx: Ctx) {
    let store = &*ctx.store;
    let a = group(store, "rg-a").await;
    let b = group(store, "rg-b").await;
    let ja = store.job_create(job_new(a.id, "rg-ja")).await.unwrap();
    let jb = store.job_create(job_new(b.id, "rg-jb")).await.unwrap();
    let ra = planned(store, ja.id, None, NOW).await;
    let rb = planned(store, jb.id, None, NOW).await;
    let mut got = store
        .runs_groups(&[rb.id, ra.id, rb.id + 1000])
        .await
        .unwrap();
    got.sort_by_key(|g| g.run_id);
    assert_eq!(
        got,
        vec![
            RunGroup {
                run_id: ra.id,
                group_id: a.id
            },
            RunGroup {
                run_id: rb.id,
                group_id: b.id
            },
        ]
    );
    assert!(store.runs_groups(&[]).await.unwrap().is_empty());
}

/// A kill recorded on a dispatched run turns a failure or timeout reported after it into
/// `killed` (executors report a killed run as failed); success stays success, and a withdrawn
/// intent changes nothing.
pub(crate) async fn kill_intent_turns_a_later_failure_into_killed(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "kill-app").await;
    let job = running_job(store, g.id, "kill-job", NOW).await;
    let intent = |run_id, at| RunKillIntent { run_id, at };
    let mut runs = Vec::new();
    for _ in 0..5 {
        let r = planned(store, job.id, Some("n1"), NOW).await;
        runs.push(r.id);
    }
    // Only a dispatched run takes a kill.
    assert!(
        !store
            .run_kill_intent(intent(runs[0], Some(NOW)))
            .await
            .unwrap()
    );
    assert!(
        !store
            .run_kill_intent(intent(999_999, Some(NOW)))
            .await
            .unwrap()
    );
    for &id in &runs {
        dispatch(store, id, "http://e:1/", NOW).await;
    }
    for &id in &runs[..4] {
        assert!(store.run_kill_intent(intent(id, Some(NOW))).await.unwrap());
    }
    // Withdrawn: the executor refused the kill.
    assert!(store.run_kill_intent(intent(runs[3], None)).await.unwrap());
    let result = |run_id, state: RunState| RunComplete {
        run_id,
        handle_code: state.handle_code().max(500),
        handle_msg: Some("job killed".into()),
        state,
        at: NOW + 1,
    };
    let batch = store
        .complete_batch_plain(&[
            result(runs[0], RunState::Failed),
            result(runs[3], RunState::Failed),
            result(runs[4], RunState::Failed),
        ])
        .await
        .unwrap();
    let states: HashMap<i64, RunState> = batch.iter().map(|r| (r.id, r.state)).collect();
    assert_eq!(states[&runs[0]], RunState::Killed, "{batch:?}");
    assert_eq!(states[&runs[3]], RunState::Failed, "withdrawn: {batch:?}");
    assert_eq!(states[&runs[4]], RunState::Failed, "no kill: {batch:?}");
    let timed_out = store
        .complete_plain(result(runs[1], RunState::TimedOut))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(timed_out.state, RunState::Killed);
    let succeeded = store
        .complete_plain(result(runs[2], RunState::Succeeded))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(succeeded.state, RunState::Succeeded);
    // Final runs take no kill, and the kill's own answer changes nothing.
    assert!(
        !store
            .run_kill_intent(intent(runs[0], Some(NOW)))
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .complete_plain(result(runs[0], RunState::Killed))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.run_get(runs[0]).await.unwrap().state,
        RunState::Killed
    );
}
