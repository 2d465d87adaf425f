//! The send fence: a node moves its runs to `sending` in the database before `/run`, only
//! while it owns them and its heartbeat is recent; what it writes about them afterwards lands
//! only while it still owns them. Adoption, unsend and the clean stop's hand-back.

use super::*;

fn begin(node: &str, run_ids: &[i64], live_since: Option<i64>) -> BeginSend {
    BeginSend {
        node_id: node.to_owned(),
        run_ids: run_ids.to_vec(),
        live_since,
    }
}

fn unsend(node: &str, run_ids: &[i64]) -> Unsend {
    Unsend {
        node_id: node.to_owned(),
        run_ids: run_ids.to_vec(),
    }
}

fn hand_back(node: &str) -> HandBack {
    HandBack {
        node_id: node.to_owned(),
    }
}

/// The state and owner of each run, in the order given.
async fn states(store: &dyn Store, ids: &[i64]) -> Vec<(RunState, Option<String>)> {
    let mut out = Vec::with_capacity(ids.len());
    for &id in ids {
        let run = store.run_get(id).await.unwrap();
        out.push((run.state, run.owner_node));
    }
    out
}

fn ids(runs: &[Run]) -> Vec<i64> {
    runs.iter().map(|r| r.id).collect()
}

/// Only the node's planned runs move, and the answer names exactly those: not another node's,
/// not an unowned one, not one already sending or past it, not an unknown id. The same ids
/// again move nothing, so a run is never handed to `/run` twice.
pub(crate) async fn begin_send_moves_only_the_nodes_planned_runs(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "send").await;
    let job = running_job(store, g.id, "send", NOW).await;
    let mut mine = Vec::new();
    for i in 0..3 {
        mine.push(planned(store, job.id, Some("a"), NOW + i).await.id);
    }
    let already = planned(store, job.id, Some("a"), NOW).await.id;
    begin_send(store, already).await;
    let dispatched_run = planned(store, job.id, Some("a"), NOW).await.id;
    dispatch(store, dispatched_run, "http://exec:1", NOW).await;
    let ended = planned(store, job.id, Some("a"), NOW).await.id;
    complete(store, ended, RunState::Succeeded).await;
    let foreign = planned(store, job.id, Some("b"), NOW).await.id;
    let unowned = planned(store, job.id, None, NOW).await.id;
    // Given in no particular order, with an unknown id and a repeat.
    let asked = [
        foreign,
        mine[2],
        987_654,
        already,
        mine[0],
        unowned,
        dispatched_run,
        mine[1],
        ended,
        mine[0],
    ];
    let known: Vec<i64> = asked.iter().copied().filter(|&id| id != 987_654).collect();
    let before = states(store, &known).await;
    let moved = store
        .runs_begin_send(begin("a", &asked, Some(NOW)))
        .await
        .unwrap();
    // Without a heartbeat row the condition on it fails: "a" beats first (below).
    assert!(
        moved.is_empty(),
        "no heartbeat row, nothing moves: {moved:?}"
    );
    assert_eq!(states(store, &known).await, before);
    beat(store, "a", NOW).await;
    let moved = store
        .runs_begin_send(begin("a", &asked, Some(NOW)))
        .await
        .unwrap();
    assert_eq!(moved, mine, "exactly the planned runs of a, ascending");
    for &id in &mine {
        let run = store.run_get(id).await.unwrap();
        assert_eq!(
            (run.state, run.owner_node.as_deref()),
            (RunState::Sending, Some("a"))
        );
    }
    let rest = [foreign, already, unowned, dispatched_run, ended];
    let want: Vec<_> = [
        (RunState::Planned, Some("b")),
        (RunState::Sending, Some("a")),
        (RunState::Planned, None),
        (RunState::Dispatched, Some("a")),
        (RunState::Succeeded, Some("a")),
    ]
    .into_iter()
    .map(|(s, o)| (s, o.map(str::to_owned)))
    .collect();
    assert_eq!(states(store, &rest).await, want);
    // A second send of the same runs moves nothing, alone or beside a run that does move.
    assert!(
        store
            .runs_begin_send(begin("a", &asked, Some(NOW)))
            .await
            .unwrap()
            .is_empty()
    );
    let fresh = planned(store, job.id, Some("a"), NOW).await.id;
    let mut again = mine.clone();
    again.push(fresh);
    assert_eq!(
        store
            .runs_begin_send(begin("a", &again, None))
            .await
            .unwrap(),
        [fresh],
        "only the run that moved now may be sent"
    );
    assert!(
        store
            .runs_begin_send(begin("a", &[], Some(NOW)))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A node paused past its heartbeat sends nothing, even before anyone adopted its runs; once
/// another node adopted them, they are no longer its to send, whatever its heartbeat says.
pub(crate) async fn begin_send_refuses_a_paused_node_and_adopted_runs(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "paused").await;
    let job = running_job(store, g.id, "paused", NOW).await;
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(planned(store, job.id, Some("a"), NOW + i).await.id);
    }
    // "a" last beat 10 s ago; it takes runs only if it beat within the last 5 s.
    beat(store, "a", NOW - 10_000).await;
    assert!(
        store
            .runs_begin_send(begin("a", &runs, Some(NOW - 5_000)))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        states(store, &runs)
            .await
            .iter()
            .all(|(s, o)| *s == RunState::Planned && o.as_deref() == Some("a"))
    );
    // Exactly at the limit counts as live.
    assert_eq!(
        store
            .runs_begin_send(begin("a", &runs[..1], Some(NOW - 10_000)))
            .await
            .unwrap(),
        runs[..1]
    );
    // Meanwhile "b" found "a" dead and adopted its runs, the one being sent as sending.
    beat(store, "b", NOW).await;
    let adopted = store
        .runs_adopt_orphaned(adopt("b", NOW - 5_000, 100))
        .await
        .unwrap();
    assert_eq!(ids(&adopted), runs);
    assert_eq!(adopted[0].state, RunState::Sending);
    assert!(adopted[1..].iter().all(|r| r.state == RunState::Planned));
    // "a" resumes and beats again: the runs are "b"'s now, with or without the fence.
    beat(store, "a", NOW + 1).await;
    for live_since in [Some(NOW), None] {
        assert!(
            store
                .runs_begin_send(begin("a", &runs, live_since))
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert!(
        store
            .runs_unsend(unsend("a", &runs[..1]))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        states(store, &runs)
            .await
            .iter()
            .all(|(_, o)| o.as_deref() == Some("b"))
    );
    assert_eq!(
        store
            .runs_begin_send(begin("b", &runs, Some(NOW)))
            .await
            .unwrap(),
        runs[1..]
    );
}

/// Unsend gives back only the node's own `sending` runs; its planned, dispatched and ended
/// runs and another node's sending runs stay as they are.
pub(crate) async fn unsend_moves_only_the_nodes_sending_runs_back(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "unsend").await;
    let job = running_job(store, g.id, "unsend", NOW).await;
    let mut sending = Vec::new();
    for i in 0..2 {
        let id = planned(store, job.id, Some("a"), NOW + i).await.id;
        begin_send(store, id).await;
        sending.push(id);
    }
    let planned_run = planned(store, job.id, Some("a"), NOW).await.id;
    let dispatched_run = planned(store, job.id, Some("a"), NOW).await.id;
    dispatch(store, dispatched_run, "http://exec:1", NOW).await;
    let early = planned(store, job.id, Some("a"), NOW).await.id;
    complete(store, early, RunState::Failed).await;
    let foreign = planned(store, job.id, Some("b"), NOW).await.id;
    begin_send(store, foreign).await;
    let others = [planned_run, dispatched_run, early, foreign];
    let before = states(store, &others).await;
    let mut asked = vec![foreign, early, 987_654, dispatched_run, planned_run];
    asked.extend(sending.iter().rev());
    let back = store.runs_unsend(unsend("a", &asked)).await.unwrap();
    assert_eq!(back, sending);
    for &id in &sending {
        let run = store.run_get(id).await.unwrap();
        assert_eq!(
            (run.state, run.owner_node.as_deref()),
            (RunState::Planned, Some("a"))
        );
    }
    assert_eq!(states(store, &others).await, before);
    // Given back once: again moves nothing; an empty list neither.
    assert!(
        store
            .runs_unsend(unsend("a", &asked))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .runs_unsend(unsend("a", &[]))
            .await
            .unwrap()
            .is_empty()
    );
    // Planned again, they can be taken to be sent again.
    assert_eq!(
        store
            .runs_begin_send(begin("a", &sending, None))
            .await
            .unwrap(),
        sending
    );
}

/// A clean stop's hand-back: the node's planned runs lose their owner; its sending runs (maybe
/// sent) keep it, and so do its runs past sending and every other node's runs.
pub(crate) async fn hand_back_releases_only_the_nodes_planned_runs(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "hand-back").await;
    let job = running_job(store, g.id, "hand-back", NOW).await;
    let mut mine = Vec::new();
    for i in 0..3 {
        mine.push(planned(store, job.id, Some("a"), NOW + i).await.id);
    }
    let sending = planned(store, job.id, Some("a"), NOW).await.id;
    begin_send(store, sending).await;
    let dispatched_run = planned(store, job.id, Some("a"), NOW).await.id;
    dispatch(store, dispatched_run, "http://exec:1", NOW).await;
    let foreign = planned(store, job.id, Some("b"), NOW).await.id;
    let others = [sending, dispatched_run, foreign];
    let before = states(store, &others).await;
    assert_eq!(store.runs_hand_back(hand_back("a")).await.unwrap(), 3);
    assert_eq!(
        states(store, &mine).await,
        vec![(RunState::Planned, None); 3]
    );
    assert_eq!(states(store, &others).await, before);
    assert_eq!(store.runs_hand_back(hand_back("a")).await.unwrap(), 0);
    assert_eq!(store.runs_hand_back(hand_back("nobody")).await.unwrap(), 0);
    // Handed back, they are no longer "a"'s to send.
    assert!(
        store
            .runs_begin_send(begin("a", &mine, None))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(&store.runs_pending_owned_by("a").await.unwrap()),
        [sending]
    );
}

/// Adoption with no `dead_before` (nobody is presumed dead) takes only runs without an owner,
/// and only planned ones: a dead node's runs, planned or sending, wait for an adoption that
/// names the dead.
pub(crate) async fn adoption_without_dead_before_takes_only_unowned_planned_runs(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "unowned").await;
    let job = running_job(store, g.id, "unowned", NOW).await;
    beat(store, "dead", NOW - 60_000).await;
    beat(store, "live", NOW).await;
    beat(store, "me", NOW).await;
    let unowned = [
        planned(store, job.id, None, NOW + 2).await.id,
        planned(store, job.id, None, NOW + 1).await.id,
    ];
    let dead_planned = planned(store, job.id, Some("dead"), NOW).await.id;
    let dead_sending = planned(store, job.id, Some("dead"), NOW).await.id;
    begin_send(store, dead_sending).await;
    let gone_planned = planned(store, job.id, Some("gone"), NOW).await.id;
    let live_planned = planned(store, job.id, Some("live"), NOW).await.id;
    let owned = [dead_planned, dead_sending, gone_planned, live_planned];
    let before = states(store, &owned).await;
    let no_dead = AdoptParams {
        node_id: "me".to_owned(),
        dead_before: None,
        limit: 100,
    };
    let taken = store.runs_adopt_orphaned(no_dead.clone()).await.unwrap();
    assert_eq!(ids(&taken), [unowned[1], unowned[0]], "oldest first");
    for run in &taken {
        assert_eq!(
            (run.state, run.owner_node.as_deref()),
            (RunState::Planned, Some("me"))
        );
    }
    assert_eq!(states(store, &owned).await, before);
    assert!(store.runs_adopt_orphaned(no_dead).await.unwrap().is_empty());
    // Naming the dead takes the dead and departed nodes' runs, never the live one's.
    let taken = store
        .runs_adopt_orphaned(adopt("me", NOW - 5_000, 100))
        .await
        .unwrap();
    let mut taken = ids(&taken);
    taken.sort_unstable();
    let mut want = vec![dead_planned, dead_sending, gone_planned];
    want.sort_unstable();
    assert_eq!(taken, want);
    assert_eq!(
        store
            .run_get(live_planned)
            .await
            .unwrap()
            .owner_node
            .as_deref(),
        Some("live")
    );
}

/// A dead node's `sending` runs (maybe sent) are adopted as they are: still `sending`, for the
/// adopter to ask the executors about; a live node's sending runs are never taken, nor its
/// planned ones. The adopter then answers for them: the old owner no longer can.
pub(crate) async fn adoption_takes_a_dead_nodes_sending_runs_keeping_them_sending(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "adopt-sending").await;
    let job = running_job(store, g.id, "adopt-sending", NOW).await;
    beat(store, "dead", NOW - 60_000).await;
    beat(store, "live", NOW).await;
    beat(store, "me", NOW).await;
    let mut dead_sending = Vec::new();
    for i in 0..2 {
        let id = planned(store, job.id, Some("dead"), NOW + i).await.id;
        begin_send(store, id).await;
        dead_sending.push(id);
    }
    let dead_dispatched = planned(store, job.id, Some("dead"), NOW).await.id;
    dispatch(store, dead_dispatched, "http://exec:1", NOW).await;
    let live_sending = planned(store, job.id, Some("live"), NOW).await.id;
    begin_send(store, live_sending).await;
    let live_planned = planned(store, job.id, Some("live"), NOW).await.id;
    let my_sending = planned(store, job.id, Some("me"), NOW).await.id;
    begin_send(store, my_sending).await;
    let others = [dead_dispatched, live_sending, live_planned, my_sending];
    let before = states(store, &others).await;

    let taken = store
        .runs_adopt_orphaned(adopt("me", NOW - 5_000, 100))
        .await
        .unwrap();
    assert_eq!(ids(&taken), dead_sending);
    for run in &taken {
        assert_eq!(
            (run.state, run.owner_node.as_deref()),
            (RunState::Sending, Some("me"))
        );
        assert_eq!(store.run_get(run.id).await.unwrap(), *run);
    }
    assert_eq!(states(store, &others).await, before);
    assert!(
        store
            .runs_adopt_orphaned(adopt("me", NOW - 5_000, 100))
            .await
            .unwrap()
            .is_empty()
    );
    // The adopter holds them: pending and still its own, neither planned for its timer nor
    // to be sent again before it asked.
    let pending = store.runs_pending_owned_by("me").await.unwrap();
    let mut pending_ids = ids(&pending);
    pending_ids.sort_unstable();
    let mut want = vec![dead_sending[0], dead_sending[1], my_sending];
    want.sort_unstable();
    assert_eq!(pending_ids, want);
    let still = store
        .runs_still_owned(OwnedRuns {
            node_id: "me".to_owned(),
            run_ids: dead_sending.clone(),
        })
        .await
        .unwrap();
    assert_eq!(still, dead_sending);
    assert!(
        store
            .runs_begin_send(begin("me", &dead_sending, Some(NOW)))
            .await
            .unwrap()
            .is_empty()
    );
    // The old owner's late dispatch record lands nowhere; the adopter's, once it learnt an
    // executor has the run, does. The other one it found unsent gives back to planned.
    let late = vec![dispatched(dead_sending[0], "http://exec:1", NOW + 1)];
    assert_eq!(mark_dispatched(store, "dead", late.clone()).await, 0);
    assert_eq!(mark_dispatched(store, "me", late).await, 1);
    assert_eq!(
        store
            .runs_unsend(unsend("me", &dead_sending))
            .await
            .unwrap(),
        dead_sending[1..]
    );
    assert_eq!(
        states(store, &dead_sending).await,
        vec![
            (RunState::Dispatched, Some("me".to_owned())),
            (RunState::Planned, Some("me".to_owned())),
        ]
    );
}

/// Regression: an admin paused past its heartbeat resumed and recorded trigger failures (and
/// could have written dispatch records and skips) on runs another admin had meanwhile adopted
/// and fired. Whatever a node writes about a run it no longer owns changes nothing.
pub(crate) async fn resumed_admin_cannot_fail_runs_another_admin_adopted_and_fired(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "resumed").await;
    let job = running_job(store, g.id, "resumed", NOW).await;
    beat(store, "a", NOW).await;
    // "a" took three runs to send and froze before `/run`; a fourth was still planned.
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(planned(store, job.id, Some("a"), NOW + i).await.id);
    }
    assert_eq!(
        store
            .runs_begin_send(begin("a", &runs[..3], Some(NOW)))
            .await
            .unwrap(),
        runs[..3]
    );
    // "b" found it dead and adopted all four; it fired the sending ones after asking (it
    // learnt no executor had them) and the planned one, and one of them already ended.
    beat(store, "b", NOW + 20_000).await;
    let adopted = store
        .runs_adopt_orphaned(adopt("b", NOW + 10_000, 100))
        .await
        .unwrap();
    assert_eq!(ids(&adopted), runs);
    assert_eq!(
        store.runs_unsend(unsend("b", &runs[..3])).await.unwrap(),
        runs[..3]
    );
    assert_eq!(
        store
            .runs_begin_send(begin("b", &runs[..3], Some(NOW + 20_000)))
            .await
            .unwrap(),
        runs[..3]
    );
    let records: Vec<Dispatched> = runs[..3]
        .iter()
        .map(|&id| dispatched(id, "http://exec-b:1", NOW + 20_001))
        .collect();
    assert_eq!(mark_dispatched(store, "b", records).await, 3);
    store
        .complete_plain(result(runs[2], RunState::Succeeded, NOW + 20_002))
        .await
        .unwrap()
        .expect("the result of b's dispatch");
    let before: Vec<Run> = {
        let mut v = Vec::new();
        for &id in &runs {
            v.push(store.run_get(id).await.unwrap());
        }
        v
    };

    // "a" resumes and writes what it would have written about its old batch.
    for &id in &runs {
        let failed = TriggerFailed {
            address: Some("http://exec-a:1".to_owned()),
            trigger_msg: "connection refused".to_owned(),
            ..trigger_failed(id, "a", NOW + 30_000)
        };
        assert_eq!(store.trigger_failed_plain(failed).await.unwrap(), None);
        let skip = RunSkip {
            run_id: id,
            node_id: "a".to_owned(),
            reason: "job stopped".to_owned(),
            at: NOW + 30_000,
        };
        assert_eq!(store.run_skip(skip).await.unwrap(), None);
    }
    let records: Vec<Dispatched> = runs
        .iter()
        .map(|&id| dispatched(id, "http://exec-a:1", NOW + 30_000))
        .collect();
    assert_eq!(mark_dispatched(store, "a", records).await, 0);
    let misfired = MarkMisfired {
        node_id: "a".to_owned(),
        run_ids: runs.clone(),
        reason: "late".to_owned(),
        at: NOW + 30_000,
    };
    assert_eq!(store.misfire_plain(misfired).await.unwrap(), 0);
    for (id, want) in runs.iter().zip(&before) {
        assert_eq!(&store.run_get(*id).await.unwrap(), want, "run {id}");
    }
    // The owner's own trigger failure still lands.
    begin_send(store, runs[3]).await;
    let failed = store
        .trigger_failed_plain(trigger_failed(runs[3], "b", NOW + 30_001))
        .await
        .unwrap()
        .expect("b's trigger failure on b's run");
    assert_eq!(failed.state, RunState::Failed);
}

/// A node id that is empty or too long is refused with an error by every operation that
/// names the node, and nothing changes.
pub(crate) async fn send_fence_operations_refuse_a_bad_node_id(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "bad-node").await;
    let job = running_job(store, g.id, "bad-node", NOW).await;
    let planned_run = planned(store, job.id, Some("a"), NOW).await.id;
    let sending = planned(store, job.id, Some("a"), NOW).await.id;
    begin_send(store, sending).await;
    let unowned = planned(store, job.id, None, NOW).await.id;
    let all = [planned_run, sending, unowned];
    let before = states(store, &all).await;
    let too_long = "n".repeat(65);
    for bad in ["", too_long.as_str()] {
        assert_invalid(
            store
                .runs_begin_send(begin(bad, &[planned_run], None))
                .await,
        );
        // Refused before looking at the runs, even with none.
        assert_invalid(store.runs_begin_send(begin(bad, &[], None)).await);
        assert_invalid(store.runs_unsend(unsend(bad, &[sending])).await);
        assert_invalid(store.runs_unsend(unsend(bad, &[])).await);
        assert_invalid(store.runs_hand_back(hand_back(bad)).await);
        assert_invalid(
            store
                .runs_adopt_orphaned(AdoptParams {
                    node_id: bad.to_owned(),
                    dead_before: None,
                    limit: 10,
                })
                .await,
        );
    }
    assert_eq!(states(store, &all).await, before);
}
