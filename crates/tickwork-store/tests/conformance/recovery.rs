//! Recovery: adoption, misfires and catch-ups, lost runs, callbacks racing the ledger.

use super::*;

pub(crate) async fn adopt_orphaned_takes_runs_of_dead_and_departed_nodes(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "adopt").await;
    let job = running_job(store, g.id, "adopt", NOW).await;
    beat(store, "alive", NOW).await;
    beat(store, "dead", NOW - 10_000).await;
    beat(store, "me", NOW - 60_000).await;
    // A claim of the dead node: runs with ledger keys.
    let claimed = store
        .jobs_claim_due(claim("dead", NOW, 200, 1), &fixed_rate(100, NOW + 200))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 3);
    let of_alive = planned(store, job.id, Some("alive"), NOW + 1).await;
    let of_gone = planned(store, job.id, Some("gone"), NOW + 50).await;
    let of_nobody = planned(store, job.id, None, NOW + 500).await;
    let of_me = planned(store, job.id, Some("me"), NOW).await;
    // Runs of the dead node that are no longer planned stay where they are.
    let dispatched = planned(store, job.id, Some("dead"), NOW - 5).await;
    dispatch(store, dispatched.id, "http://exec:1", NOW).await;
    let done = planned(store, job.id, Some("dead"), NOW - 4).await;
    complete(store, done.id, RunState::Succeeded).await;

    let first = store
        .runs_adopt_orphaned(adopt("me", NOW - 5000, 2))
        .await
        .unwrap();
    // Oldest first, within the limit.
    assert_eq!(
        first.iter().map(|r| r.id).collect::<Vec<_>>(),
        [claimed.runs[0].id, of_gone.id]
    );
    let rest = store
        .runs_adopt_orphaned(adopt("me", NOW - 5000, 100))
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|r| r.id).collect::<Vec<_>>(),
        [claimed.runs[1].id, claimed.runs[2].id, of_nobody.id]
    );
    for run in first.iter().chain(&rest) {
        assert_eq!(run.owner_node.as_deref(), Some("me"));
        assert_eq!(run.state, RunState::Planned);
        assert_eq!(store.run_get(run.id).await.unwrap(), *run);
    }
    // The keyed runs keep their keys and instants.
    assert_eq!(first[0].fire_key, Some(NOW));
    assert_eq!(first[0].scheduled_at, NOW);
    assert!(
        store
            .runs_adopt_orphaned(adopt("me", NOW - 5000, 100))
            .await
            .unwrap()
            .is_empty()
    );
    // Untouched: the live node's run, the adopter's own, the runs past planned.
    for (id, owner) in [
        (of_alive.id, "alive"),
        (of_me.id, "me"),
        (dispatched.id, "dead"),
        (done.id, "dead"),
    ] {
        assert_eq!(
            store.run_get(id).await.unwrap().owner_node.as_deref(),
            Some(owner)
        );
    }
    // The live node dies too: a later adopter takes its run, but never another's fresh one.
    let later = store
        .runs_adopt_orphaned(adopt("other", NOW + 10, 100))
        .await
        .unwrap();
    let ids: HashSet<i64> = later.iter().map(|r| r.id).collect();
    assert!(ids.contains(&of_alive.id) && ids.contains(&of_me.id));
    // Every owner alive, one run without an owner: that run alone.
    beat(store, "other", NOW).await;
    let unowned = planned(store, job.id, None, NOW + 600).await;
    let taken = store
        .runs_adopt_orphaned(adopt("me", NOW - 5000, 100))
        .await
        .unwrap();
    assert_eq!(taken.iter().map(|r| r.id).collect::<Vec<_>>(), [unowned.id]);
    assert_invalid(store.runs_adopt_orphaned(adopt("", NOW, 1)).await);
    assert!(
        store
            .runs_adopt_orphaned(adopt("me", NOW, 0))
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn adoption_race_two_adopters_never_share_a_run(ctx: Ctx) {
    let g = group(&*ctx.store, "adopt-race").await;
    beat(&*ctx.store, "dead", NOW - 60_000).await;
    let mut expected = HashSet::new();
    for i in 0..6 {
        running_job(&*ctx.store, g.id, &format!("adopt-race-{i}"), NOW).await;
        let claimed = ctx
            .store
            .jobs_claim_due(claim("dead", NOW, 4_000, 1), &fixed_rate(100, NOW + 4_000))
            .await
            .unwrap();
        expected.extend(claimed.runs.iter().map(|r| r.id));
    }
    assert_eq!(expected.len(), 6 * 41);

    // Two stores stand for two surviving nodes (alive: a run moved to one of them is not an
    // orphan again); each adopts in small batches until nothing is left.
    beat(&*ctx.store, "survivor-0", NOW).await;
    beat(&*ctx.store, "survivor-1", NOW).await;
    let stores = [ctx.store.clone(), ctx.connect_again().await];
    let mut tasks = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("survivor-{i}");
            let mut mine = Vec::new();
            loop {
                let batch = store
                    .runs_adopt_orphaned(adopt(&node, NOW - 5_000, 7))
                    .await
                    .expect("adopt");
                if batch.is_empty() {
                    break;
                }
                assert!(batch.len() <= 7);
                mine.extend(batch);
                tokio::task::yield_now().await;
            }
            (node, mine)
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        let (node, runs) = task.await.unwrap();
        for run in runs {
            assert!(seen.insert(run.id), "run {} adopted twice", run.id);
            assert_eq!(run.owner_node.as_deref(), Some(node.as_str()));
            let stored = ctx.store.run_get(run.id).await.unwrap();
            assert_eq!(stored.owner_node.as_deref(), Some(node.as_str()));
        }
    }
    assert_eq!(seen, expected);
    stores[1].close().await;
}

pub(crate) async fn misfire_marking_catch_up_and_ownership(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "misfire").await;
    let job = running_job(store, g.id, "misfire", NOW).await;
    let claimed = store
        .jobs_claim_due(claim("me", NOW, 400, 1), &fixed_rate(100, NOW + 400))
        .await
        .unwrap();
    let runs = claimed.runs;
    assert_eq!(runs.len(), 5);
    let foreign = planned(store, job.id, Some("other"), NOW).await;
    dispatch(store, runs[4].id, "http://exec:1", NOW + 400).await;

    let ids: Vec<i64> = runs.iter().map(|r| r.id).chain([foreign.id]).collect();
    let owned = store
        .runs_still_owned(OwnedRuns {
            node_id: "me".to_owned(),
            run_ids: ids.clone(),
        })
        .await
        .unwrap();
    assert_eq!(owned, runs[..4].iter().map(|r| r.id).collect::<Vec<_>>());

    // Only planned runs of "me" are marked: not the foreign one, not the dispatched one.
    let marked = store
        .misfire_plain(MarkMisfired {
            node_id: "me".to_owned(),
            run_ids: vec![runs[0].id, runs[1].id, runs[4].id, foreign.id],
            reason: "late by 9 s after a failover".to_owned(),
            at: NOW + 9_000,
        })
        .await
        .unwrap();
    assert_eq!(marked, 2);
    for run in &runs[..2] {
        let stored = store.run_get(run.id).await.unwrap();
        assert_eq!(stored.state, RunState::Misfired);
        assert_eq!(stored.finished_at, Some(NOW + 9_000));
        assert_eq!(
            stored.trigger_msg.as_deref(),
            Some("late by 9 s after a failover")
        );
        assert_eq!(stored.fire_key, run.fire_key);
    }
    assert_eq!(
        store.run_get(runs[4].id).await.unwrap().state,
        RunState::Dispatched
    );
    assert_eq!(
        store.run_get(foreign.id).await.unwrap().state,
        RunState::Planned
    );
    // A misfired run is final: marking again changes nothing.
    let again = store
        .misfire_plain(MarkMisfired {
            node_id: "me".to_owned(),
            run_ids: vec![runs[0].id],
            reason: "again".to_owned(),
            at: NOW + 10_000,
        })
        .await
        .unwrap();
    assert_eq!(again, 0);

    // The catch-up keeps the ledger key and moves the instant.
    let caught = store
        .run_catch_up(CatchUp {
            run_id: runs[3].id,
            node_id: "me".to_owned(),
            at: NOW + 9_500,
            late_since: NOW,
        })
        .await
        .unwrap()
        .expect("planned run of me");
    assert_eq!(caught.scheduled_at, NOW + 9_500);
    assert_eq!(caught.trigger_type, TriggerType::Misfire);
    assert_eq!(caught.fire_key, runs[3].fire_key);
    assert_eq!(caught.state, RunState::Planned);
    // The job has its catch-up now: another late run of it comes back unchanged, to be
    // misfired, however it got there (the second node of a takeover, say).
    let second = store
        .run_catch_up(CatchUp {
            run_id: runs[2].id,
            node_id: "me".to_owned(),
            at: NOW + 9_600,
            late_since: NOW,
        })
        .await
        .unwrap()
        .expect("planned run of me");
    assert_eq!(second, store.run_get(runs[2].id).await.unwrap());
    assert_eq!(second.trigger_type, TriggerType::FixRate);
    assert_eq!(second.scheduled_at, runs[2].scheduled_at);
    // A catch-up before the late fires began does not count.
    let other_late = store
        .run_catch_up(CatchUp {
            run_id: runs[2].id,
            node_id: "me".to_owned(),
            at: NOW + 9_700,
            late_since: NOW + 9_501,
        })
        .await
        .unwrap()
        .expect("planned run of me");
    assert_eq!(other_late.trigger_type, TriggerType::Misfire);
    // Not "me"'s, or no longer planned: nothing happens.
    for (run_id, node) in [
        (foreign.id, "me"),
        (runs[2].id, "other"),
        (runs[0].id, "me"),
    ] {
        let none = store
            .run_catch_up(CatchUp {
                run_id,
                node_id: node.to_owned(),
                at: NOW,
                late_since: NOW,
            })
            .await
            .unwrap();
        assert_eq!(none, None);
    }
}

/// A planner giving a due job's first fire as misfired and the next as its catch-up.
fn catch_up_planner(job: &Job, now: i64) -> JobPlan {
    let first = job.next_fire_at.expect("a claimed job has a next fire");
    JobPlan {
        fires: vec![
            PlannedFire::misfired(first, TriggerType::FixRate),
            PlannedFire {
                fire_key: first + 100,
                scheduled_at: now,
                trigger_type: TriggerType::Misfire,
                state: RunState::Planned,
            },
        ],
        next_fire_at: Some(now + 3_600_000),
    }
}

pub(crate) async fn one_catch_up_per_job_between_claims_and_takeovers(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "catch-up").await;
    // A job whose planned runs a node took over after an outage, and made one its catch-up.
    let taken = running_job(store, g.id, "taken-over", NOW).await;
    let runs = store
        .jobs_claim_due(claim("b", NOW, 200, 10), &fixed_rate(100, NOW + 200))
        .await
        .unwrap()
        .runs;
    let caught = store
        .run_catch_up(CatchUp {
            run_id: runs[0].id,
            node_id: "b".to_owned(),
            at: NOW + 9_000,
            late_since: NOW,
        })
        .await
        .unwrap()
        .expect("planned run of b");
    assert_eq!(caught.trigger_type, TriggerType::Misfire);
    // A job nobody caught up.
    let fresh = running_job(store, g.id, "fresh", NOW + 5_000).await;

    // The claim after the outage: the taken-over job's catch-up is recorded as misfired.
    let claimed = store
        .jobs_claim_due(claim("a", NOW + 9_000, 0, 10), &catch_up_planner)
        .await
        .unwrap();
    assert_eq!(claimed.jobs, 2);
    let fired: Vec<(i64, TriggerType)> = claimed
        .runs
        .iter()
        .map(|r| (r.job_id, r.trigger_type))
        .collect();
    assert_eq!(fired, [(fresh.id, TriggerType::Misfire)]);
    assert_eq!(claimed.misfired, 3);
    let taken_runs = all_runs(store, Some(taken.id)).await;
    let catch_ups: Vec<i64> = taken_runs
        .iter()
        .filter(|r| r.trigger_type == TriggerType::Misfire)
        .map(|r| r.id)
        .collect();
    assert_eq!(
        catch_ups,
        [caught.id],
        "one catch-up for the job: {taken_runs:?}"
    );
    let skipped = taken_runs
        .iter()
        .find(|r| r.fire_key == Some(NOW + 400))
        .expect("the claim's catch-up fire is in the ledger");
    assert_eq!(skipped.state, RunState::Misfired);
}

pub(crate) async fn lost_run_selection(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "lost").await;
    let job = running_job(store, g.id, "lost", NOW).await;
    let live = "http://live:9999/";
    let dead = "http://dead:9999/";
    let ghost = "http://never-registered:9999/";
    for (address, at) in [(live, NOW), (dead, NOW - 120_000)] {
        store
            .registry_heartbeat(RegistryBeat {
                app_name: "lost".to_owned(),
                address: address.to_owned(),
                now: at,
            })
            .await
            .unwrap();
    }
    let timeout_cut = NOW - 600_000;
    let mut lost = Vec::new();
    // (address, dispatched at, whether it is lost)
    for (address, at, is_lost) in [
        (dead, timeout_cut - 2, true),
        (live, timeout_cut - 10, false),
        (ghost, timeout_cut - 1, true),
        (dead, timeout_cut + 1, false),
        (dead, timeout_cut - 5, true),
    ] {
        let run = planned(store, job.id, Some("n"), at).await;
        dispatch(store, run.id, address, at).await;
        if is_lost {
            lost.push((at, run.id));
        }
    }
    // A run that ended, and one never dispatched, are never lost; nor is one being sent
    // (maybe sent: its owner, or its adopter, asks the executors instead).
    let ended = planned(store, job.id, Some("n"), NOW).await;
    dispatch(store, ended.id, dead, timeout_cut - 100).await;
    complete(store, ended.id, RunState::Succeeded).await;
    planned(store, job.id, Some("n"), timeout_cut - 100).await;
    let sending = planned(store, job.id, Some("n"), timeout_cut - 100).await;
    begin_send(store, sending.id).await;

    lost.sort_unstable();
    let expected: Vec<i64> = lost.iter().map(|&(_, id)| id).collect();
    let query = LostQuery {
        dispatched_before: timeout_cut,
        alive_since: NOW - 90_000,
        limit: 100,
    };
    let found = store.runs_find_lost(query).await.unwrap();
    assert_eq!(found.iter().map(|r| r.id).collect::<Vec<_>>(), expected);
    assert!(found.iter().all(|r| r.state == RunState::Dispatched));
    let two = store
        .runs_find_lost(LostQuery { limit: 2, ..query })
        .await
        .unwrap();
    assert_eq!(two.iter().map(|r| r.id).collect::<Vec<_>>(), expected[..2]);
    // Once the dead executor beats again, only the unregistered one stays lost.
    store
        .registry_heartbeat(RegistryBeat {
            app_name: "other-app".to_owned(),
            address: dead.to_owned(),
            now: NOW,
        })
        .await
        .unwrap();
    let found = store.runs_find_lost(query).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].executor_address.as_deref(), Some(ghost));
}

pub(crate) async fn callbacks_racing_the_ledger_are_never_lost(ctx: Ctx) {
    // An executor may call back while the dispatch batch of the same runs is being written:
    // whichever commits first, every result must land.
    let g = group(&*ctx.store, "race-ledger").await;
    let job = running_job(&*ctx.store, g.id, "race-ledger", NOW).await;
    let other = ctx.connect_again().await;
    for round in 0..40 {
        let mut ids = Vec::new();
        for _ in 0..50 {
            ids.push(
                planned(&*ctx.store, job.id, Some("n"), NOW + round)
                    .await
                    .id,
            );
        }
        // Sent: `/run` is called once the runs are `sending`, so the callbacks find them there.
        let send = BeginSend {
            node_id: "n".to_owned(),
            run_ids: ids.clone(),
            live_since: None,
        };
        assert_eq!(ctx.store.runs_begin_send(send).await.unwrap(), ids);
        let dispatched = MarkDispatched {
            node_id: "n".to_owned(),
            runs: ids
                .iter()
                .map(|&run_id| dispatched(run_id, "http://exec:1", NOW))
                .collect(),
        };
        let results: Vec<RunComplete> = ids
            .iter()
            .map(|&run_id| RunComplete {
                run_id,
                handle_code: 200,
                handle_msg: None,
                state: RunState::Succeeded,
                at: NOW + 1,
            })
            .collect();
        // Both sides retry a write the database refused (a deadlock), as the admin's ledger
        // and the executors' callbacks do; a result ignored is never sent again.
        let ledger = {
            let store = ctx.store.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    match store.runs_mark_dispatched(dispatched.clone()).await {
                        Err(Error::Database(_)) => continue,
                        other => return other,
                    }
                }
                panic!("the ledger write kept failing");
            })
        };
        let callback = {
            let store = other.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    match store.complete_batch_plain(&results).await {
                        Err(Error::Database(_) | Error::Conflict(_)) => continue,
                        other => return other,
                    }
                }
                panic!("the callback write kept failing");
            })
        };
        ledger.await.unwrap().expect("ledger write");
        let done = callback.await.unwrap().expect("callback write");
        assert_eq!(done.len(), ids.len(), "round {round}: callbacks ignored");
        for &id in &ids {
            let run = ctx.store.run_get(id).await.unwrap();
            assert_eq!(
                (run.state, run.handle_code, run.trigger_code),
                (RunState::Succeeded, 200, 200),
                "round {round}: {run:?}"
            );
        }
    }
    other.close().await;
}

pub(crate) async fn callbacks_racing_the_ledger_and_a_claim_are_never_lost(ctx: Ctx) {
    // The admin's real mix: claimed runs get their dispatch record and their results at the
    // same moment while another node claims other jobs. (MariaDB once answered the results'
    // row locks without the rows here.)
    let g = group(&*ctx.store, "mix").await;
    let other = ctx.connect_again().await;
    let third = ctx.connect_again().await;
    // Each job fires once at its next fire and stops, so every round claims fresh jobs only.
    let once = |job: &Job, _now: i64| JobPlan {
        fires: vec![PlannedFire::on_time(
            job.next_fire_at.expect("due"),
            TriggerType::FixRate,
        )],
        next_fire_at: None,
    };
    for round in 0..30 {
        let at = NOW + round * 100_000;
        for j in 0..20 {
            running_job(&*ctx.store, g.id, &format!("mix-{round}-{j}"), at).await;
        }
        let claimed = ctx
            .store
            .jobs_claim_due(claim("node-a", at, 0, 1000), &once)
            .await
            .unwrap();
        let ids: Vec<i64> = claimed.runs.iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), 20);
        for j in 0..20 {
            running_job(&*ctx.store, g.id, &format!("mix-more-{round}-{j}"), at).await;
        }
        let send = BeginSend {
            node_id: "node-a".to_owned(),
            run_ids: ids.clone(),
            live_since: None,
        };
        assert_eq!(ctx.store.runs_begin_send(send).await.unwrap(), ids);
        let dispatched = MarkDispatched {
            node_id: "node-a".to_owned(),
            runs: ids
                .iter()
                .map(|&run_id| dispatched(run_id, "http://exec:1", at))
                .collect(),
        };
        let results: Vec<RunComplete> = ids
            .iter()
            .map(|&run_id| RunComplete {
                run_id,
                handle_code: 200,
                handle_msg: None,
                state: RunState::Succeeded,
                at,
            })
            .collect();
        // Deadlocks are retried, as the ledger and the executors do.
        let ledger = {
            let store = ctx.store.clone();
            tokio::spawn(async move {
                loop {
                    match store.runs_mark_dispatched(dispatched.clone()).await {
                        Err(Error::Database(_)) => continue,
                        other => return other,
                    }
                }
            })
        };
        let callback = {
            let store = other.clone();
            tokio::spawn(async move {
                loop {
                    match store.complete_batch_plain(&results).await {
                        Err(Error::Database(_) | Error::Conflict(_)) => continue,
                        other => return other,
                    }
                }
            })
        };
        let claimer = {
            let store = third.clone();
            tokio::spawn(async move {
                store
                    .jobs_claim_due(claim("node-b", at, 0, 1000), &once)
                    .await
            })
        };
        ledger.await.unwrap().expect("ledger write");
        let done = callback.await.unwrap().expect("callback write");
        claimer.await.unwrap().expect("claim");
        assert_eq!(done.len(), ids.len(), "round {round}: results ignored");
        for &id in &ids {
            let run = ctx.store.run_get(id).await.unwrap();
            assert_eq!(
                (run.state, run.trigger_code),
                (RunState::Succeeded, 200),
                "round {round}: {run:?}"
            );
        }
    }
    other.close().await;
    third.close().await;
}

/// The runs dispatched to one address before an instant: not another address's, not a later
/// one, not one that ended or is still being sent.
pub(crate) async fn runs_dispatched_to_one_address(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "pulled").await;
    let job = running_job(store, g.id, "pulled", NOW).await;
    let here = "pull://inst-1";
    let mut expected = Vec::new();
    for (address, at, listed) in [
        (here, NOW - 30, true),
        ("pull://inst-2", NOW - 20, false),
        (here, NOW + 5, false),
        (here, NOW - 40, true),
    ] {
        let run = planned(store, job.id, Some("n"), at).await;
        dispatch(store, run.id, address, at).await;
        if listed {
            expected.push((at, run.id));
        }
    }
    let ended = planned(store, job.id, Some("n"), NOW - 50).await;
    dispatch(store, ended.id, here, NOW - 50).await;
    complete(store, ended.id, RunState::Succeeded).await;
    let sending = planned(store, job.id, Some("n"), NOW - 60).await;
    begin_send(store, sending.id).await;
    expected.sort_unstable();
    let query = DispatchedTo {
        address: here.to_owned(),
        dispatched_before: NOW,
        limit: 100,
    };
    let found = store.runs_dispatched_to(query.clone()).await.unwrap();
    let ids: Vec<i64> = found.iter().map(|r| r.id).collect();
    assert_eq!(ids, expected.iter().map(|&(_, id)| id).collect::<Vec<_>>());
    let one = store
        .runs_dispatched_to(DispatchedTo { limit: 1, ..query })
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].id, expected[0].1);
}
