//! The claim, and the ledger that makes a fire run once.

use super::*;

pub(crate) async fn claim_writes_every_fire_in_window(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "fast").await;
    let job = running_job(store, g.id, "every-100ms", NOW).await;
    let result = store
        .jobs_claim_due(claim("node-a", NOW, 1000, 10), &fixed_rate(100, NOW + 1000))
        .await
        .unwrap();
    assert_eq!((result.jobs, result.misfired, result.duplicates), (1, 0, 0));
    let expected: Vec<i64> = (0..=10).map(|i| NOW + i * 100).collect();
    assert_eq!(
        result
            .runs
            .iter()
            .map(|r| r.scheduled_at)
            .collect::<Vec<_>>(),
        expected
    );
    for run in &result.runs {
        assert_eq!(run.fire_key, Some(run.scheduled_at));
        assert_eq!(run.state, RunState::Planned);
        assert_eq!(run.trigger_type, TriggerType::FixRate);
        assert_eq!(run.owner_node.as_deref(), Some("node-a"));
        assert_eq!((run.job_id, run.group_id), (job.id, g.id));
        assert_eq!(run.handler, job.spec.handler);
        assert_eq!(run.params, job.spec.params);
    }
    // What the claim returned is exactly what it wrote.
    let stored = all_runs(store, Some(job.id)).await;
    assert_eq!(stored, result.runs);

    let after = store.job_get(job.id).await.unwrap();
    assert_eq!(after.next_fire_at, Some(NOW + 1100));
    assert_eq!(after.last_fire_at, Some(NOW + 1000));
    assert_eq!(after.status, JobStatus::Running);
    assert_eq!(
        (after.version, after.updated_at),
        (job.version, job.updated_at)
    );

    // The next round starts where this one stopped.
    let next = store
        .jobs_claim_due(
            claim("node-a", NOW + 1000, 1000, 10),
            &fixed_rate(100, NOW + 2000),
        )
        .await
        .unwrap();
    assert_eq!(next.runs.first().map(|r| r.scheduled_at), Some(NOW + 1100));
    assert_eq!(next.runs.len(), 10);
}

pub(crate) async fn claim_stops_job_when_plan_has_no_next(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "once").await;
    let job = running_job(store, g.id, "once", NOW).await;
    let once = |job: &Job, _now: i64| JobPlan {
        fires: vec![PlannedFire::on_time(
            job.next_fire_at.unwrap(),
            TriggerType::Once,
        )],
        next_fire_at: None,
    };
    let result = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &once)
        .await
        .unwrap();
    assert_eq!(result.runs.len(), 1);
    let after = store.job_get(job.id).await.unwrap();
    assert_eq!(
        (after.status, after.next_fire_at),
        (JobStatus::Stopped, None)
    );
    assert_eq!(after.last_fire_at, Some(NOW));
    let again = store
        .jobs_claim_due(claim("node-a", NOW + 10_000, 0, 10), &once)
        .await
        .unwrap();
    assert_eq!(again, ClaimResult::default());
}

pub(crate) async fn claim_respects_limit_and_order(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "many").await;
    let mut by_next = HashMap::new();
    for (key, offset) in [("d", -10), ("b", -40), ("c", -30), ("e", 0), ("a", -50)] {
        let job = running_job(store, g.id, key, NOW + offset).await;
        by_next.insert(job.id, key);
    }
    // Neither a future job nor a stopped one is claimed.
    running_job(store, g.id, "future", NOW + 60_000).await;
    let mut stopped = job_new(g.id, "stopped");
    stopped.next_fire_at = Some(NOW - 100);
    store.job_create(stopped).await.unwrap();

    let one_fire = |job: &Job, _now: i64| JobPlan {
        fires: vec![PlannedFire::on_time(
            job.next_fire_at.unwrap(),
            TriggerType::Cron,
        )],
        next_fire_at: Some(NOW + 3_600_000),
    };
    let mut order = Vec::new();
    for _ in 0..3 {
        let result = store
            .jobs_claim_due(claim("node-a", NOW, 1000, 2), &one_fire)
            .await
            .unwrap();
        assert!(result.jobs <= 2);
        order.extend(result.runs.iter().map(|r| by_next[&r.job_id]));
    }
    assert_eq!(order, ["a", "b", "c", "d", "e"]);
    let none = store
        .jobs_claim_due(claim("node-a", NOW, 1000, 2), &one_fire)
        .await
        .unwrap();
    assert_eq!(none.jobs, 0);
}

pub(crate) async fn claim_returns_only_planned_runs(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "late").await;
    let job = running_job(store, g.id, "late", NOW - 30_000).await;
    // Two late fires and one on time, decided by the core's misfire policy.
    let planner = |job: &Job, now: i64| {
        let start = job.next_fire_at.unwrap();
        let instants = [start, start + 10_000, now];
        let plan = misfire::plan(MisfireStrategy::DoNothing, &instants, now, 5_000);
        JobPlan {
            fires: plan
                .fires
                .iter()
                .map(|f| PlannedFire::from_misfire(f, TriggerType::Cron))
                .collect(),
            next_fire_at: Some(now + 10_000),
        }
    };
    let result = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &planner)
        .await
        .unwrap();
    assert_eq!((result.runs.len(), result.misfired), (1, 2));
    assert_eq!(result.runs[0].scheduled_at, NOW);

    let stored = all_runs(store, Some(job.id)).await;
    let states: Vec<(i64, RunState)> = stored.iter().map(|r| (r.scheduled_at, r.state)).collect();
    assert_eq!(
        states,
        [
            (NOW - 30_000, RunState::Misfired),
            (NOW - 20_000, RunState::Misfired),
            (NOW, RunState::Planned)
        ]
    );
    assert!(
        stored
            .iter()
            .filter(|r| r.state == RunState::Misfired)
            .all(|r| r.finished_at == Some(NOW))
    );
    assert_eq!(store.job_get(job.id).await.unwrap().last_fire_at, Some(NOW));

    // FIRE_ONCE_NOW: the latest late fire becomes a catch-up at `now`, keyed by its instant.
    let catch_up = store.job_create(JobNew {
        next_fire_at: Some(NOW - 30_000),
        status: JobStatus::Running,
        ..job_new(g.id, "catch-up")
    });
    let catch_up = catch_up.await.unwrap();
    let planner = |job: &Job, now: i64| {
        let start = job.next_fire_at.unwrap();
        let plan = misfire::plan(
            MisfireStrategy::FireOnceNow,
            &[start, start + 10_000],
            now,
            5_000,
        );
        JobPlan {
            fires: plan
                .fires
                .iter()
                .map(|f| PlannedFire::from_misfire(f, TriggerType::Cron))
                .collect(),
            next_fire_at: Some(now + 10_000),
        }
    };
    let result = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &planner)
        .await
        .unwrap();
    assert_eq!((result.runs.len(), result.misfired), (1, 1));
    let run = &result.runs[0];
    assert_eq!(
        (run.job_id, run.scheduled_at, run.fire_key),
        (catch_up.id, NOW, Some(NOW - 20_000))
    );
    assert_eq!(run.trigger_type, TriggerType::Misfire);
}

pub(crate) async fn claim_rejects_a_planner_state_that_is_not_a_fire(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "bad").await;
    let job = running_job(store, g.id, "bad-plan", NOW).await;
    let bad = |job: &Job, _now: i64| JobPlan {
        fires: vec![PlannedFire {
            state: RunState::Succeeded,
            ..PlannedFire::on_time(job.next_fire_at.unwrap(), TriggerType::Cron)
        }],
        next_fire_at: Some(NOW + 1000),
    };
    assert_invalid(
        store
            .jobs_claim_due(claim("node-a", NOW, 0, 10), &bad)
            .await,
    );
    // Nothing of the failed round was kept.
    assert!(all_runs(store, None).await.is_empty());
    assert_eq!(store.job_get(job.id).await.unwrap().next_fire_at, Some(NOW));
}

/// A planner holding job definitions: it knows a job only at the version and creation it
/// holds, and records what it was asked and what it planned with.
struct Holding {
    held: Vec<Arc<Job>>,
    asked: std::sync::Mutex<Vec<(i64, i64, bool)>>,
    planned: std::sync::Mutex<Vec<(i64, JobDue, String)>>,
}

impl ClaimPlanner for Holding {
    fn known(&self, id: i64, version: i64, created_at: i64) -> Option<Arc<Job>> {
        let hit = self
            .held
            .iter()
            .find(|j| j.id == id && j.version == version && j.created_at == created_at)
            .cloned();
        self.asked
            .lock()
            .unwrap()
            .push((id, version, hit.is_some()));
        hit
    }

    fn plan(&self, job: &Job, due: JobDue, _now: i64) -> JobPlan {
        self.planned
            .lock()
            .unwrap()
            .push((job.id, due, job.spec.handler.clone()));
        let at = due.next_fire_at.expect("a claimed job has a next fire");
        JobPlan {
            fires: vec![PlannedFire::on_time(at, TriggerType::FixRate)],
            next_fire_at: Some(at + 1000),
        }
    }
}

pub(crate) async fn claim_plans_a_known_job_with_its_held_definition_and_fresh_due_columns(
    ctx: Ctx,
) {
    let store = &*ctx.store;
    let g = group(store, "held").await;
    let held_job = running_job(store, g.id, "held", NOW).await;
    let edited = running_job(store, g.id, "edited", NOW).await;
    let unheld = running_job(store, g.id, "unheld", NOW).await;
    let reissued = running_job(store, g.id, "reissued", NOW).await;
    // The planner's copies: a handler the rows do not have (so a run shows which definition
    // it came from), and due columns older than the rows'.
    let copy = |job: &Job, created_at: i64| {
        let mut c = job.clone();
        c.spec.handler = format!("held-{}", job.key);
        c.next_fire_at = None;
        c.last_fire_at = Some(1);
        c.created_at = created_at;
        Arc::new(c)
    };
    let planner = Holding {
        held: vec![
            copy(&held_job, held_job.created_at),
            copy(&edited, edited.created_at),
            copy(&reissued, reissued.created_at + 1),
        ],
        asked: Default::default(),
        planned: Default::default(),
    };
    let mut spec = edited.spec.clone();
    spec.handler = "edited-now".to_owned();
    let edited = store
        .job_update(JobUpdate {
            id: edited.id,
            expected_version: None,
            spec,
            next_fire_at: Some(NOW),
            now: NOW,
        })
        .await
        .unwrap();

    let result = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &planner)
        .await
        .unwrap();
    let handler_of = |job: &Job| {
        let runs: Vec<&Run> = result.runs.iter().filter(|r| r.job_id == job.id).collect();
        assert_eq!(runs.len(), 1, "one run of job {}", job.key);
        assert_eq!(runs[0].scheduled_at, NOW);
        runs[0].handler.clone()
    };
    assert_eq!(handler_of(&held_job), "held-held", "the held definition");
    assert_eq!(
        handler_of(&edited),
        "edited-now",
        "an edit makes a new version"
    );
    assert_eq!(handler_of(&unheld), unheld.spec.handler, "read whole");
    assert_eq!(handler_of(&reissued), reissued.spec.handler, "another row");
    let mut asked = planner.asked.lock().unwrap().clone();
    asked.sort();
    let mut want = vec![
        (held_job.id, held_job.version, true),
        (edited.id, edited.version, false),
        (unheld.id, unheld.version, false),
        (reissued.id, reissued.version, false),
    ];
    want.sort();
    assert_eq!(asked, want);
    // Every job planned with its due columns as the rows held them, not the copies'.
    for (id, due, _) in planner.planned.lock().unwrap().drain(..) {
        assert_eq!(
            due,
            JobDue {
                next_fire_at: Some(NOW),
                last_fire_at: None,
                fires_left: None
            },
            "job {id}"
        );
    }

    // The next round reads what this one moved.
    let next = store
        .jobs_claim_due(claim("node-a", NOW + 1000, 0, 10), &planner)
        .await
        .unwrap();
    assert_eq!(next.runs.len(), 4);
    let planned = planner.planned.lock().unwrap().clone();
    let held_due = planned
        .iter()
        .find(|(id, _, _)| *id == held_job.id)
        .map(|(_, due, handler)| (due.next_fire_at, due.last_fire_at, handler.as_str()));
    assert_eq!(held_due, Some((Some(NOW + 1000), Some(NOW), "held-held")));
}

pub(crate) async fn ledger_skips_a_forced_duplicate_fire(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "ledger").await;
    let job = running_job(store, g.id, "twice", NOW).await;
    let first = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(first.runs.len(), 1);

    // Rewind the job, as a stale admin or an edit racing a claim would: the same fire is
    // planned again, and the ledger refuses it.
    set_status(store, job.id, JobStatus::Running, Some(NOW), NOW)
        .await
        .expect("the job is there");
    let second = store
        .jobs_claim_due(claim("node-b", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert!(second.runs.is_empty(), "{second:?}");
    assert_eq!((second.jobs, second.duplicates), (1, 1));

    // A plan naming one fire twice, beside an old one and a new one.
    set_status(store, job.id, JobStatus::Running, Some(NOW), NOW)
        .await
        .expect("the job is there");
    let repeated = |_: &Job, _: i64| JobPlan {
        fires: vec![
            PlannedFire::on_time(NOW, TriggerType::Cron),
            PlannedFire::on_time(NOW + 1000, TriggerType::Cron),
            PlannedFire::on_time(NOW + 1000, TriggerType::Cron),
        ],
        next_fire_at: Some(NOW + 2000),
    };
    let third = store
        .jobs_claim_due(claim("node-c", NOW, 1000, 10), &repeated)
        .await
        .unwrap();
    assert_eq!(
        third
            .runs
            .iter()
            .map(|r| r.scheduled_at)
            .collect::<Vec<_>>(),
        [NOW + 1000]
    );
    assert_eq!(third.duplicates, 2);

    let stored = all_runs(store, Some(job.id)).await;
    assert_eq!(
        stored.iter().map(|r| r.fire_key).collect::<Vec<_>>(),
        [Some(NOW), Some(NOW + 1000)]
    );
    assert_eq!(stored[0].owner_node.as_deref(), Some("node-a"));
}

pub(crate) async fn ledger_racing_claimers_write_each_fire_once(ctx: Ctx) {
    let g = group(&*ctx.store, "race").await;
    let mut jobs = Vec::new();
    for i in 0..12 {
        jobs.push(
            running_job(&*ctx.store, g.id, &format!("race-{i}"), NOW)
                .await
                .id,
        );
    }
    // Two stores stand for two admin nodes; each runs two claimers. A rewinder keeps setting
    // the jobs back to the start, so the claimers plan the same fires again and again.
    let nodes = [ctx.store.clone(), ctx.connect_again().await];
    let mut tasks = Vec::new();
    for claimer in 0..4 {
        let store = nodes[claimer % 2].clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for round in 0..15 {
                let now = NOW + round * 50;
                let result = store
                    .jobs_claim_due(
                        claim(&format!("node-{claimer}"), now, 500, 5),
                        &fixed_rate(100, now + 500),
                    )
                    .await
                    .expect("claim");
                mine.extend(result.runs);
            }
            mine
        }));
    }
    let rewinder = {
        let store = ctx.store.clone();
        let jobs = jobs.clone();
        tokio::spawn(async move {
            for _ in 0..5 {
                for &id in &jobs {
                    set_status(&*store, id, JobStatus::Running, Some(NOW), NOW)
                        .await
                        .expect("rewind");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut claimed = Vec::new();
    for task in tasks {
        claimed.extend(task.await.unwrap());
    }
    rewinder.await.unwrap();

    let mut keys = HashSet::new();
    for run in &claimed {
        assert!(
            keys.insert((run.job_id, run.fire_key)),
            "fire claimed twice: {run:?}"
        );
    }
    // Every row of the ledger went to exactly one claimer, and every claimed run is a row.
    let stored = all_runs(&*ctx.store, None).await;
    let stored_ids: HashSet<i64> = stored.iter().map(|r| r.id).collect();
    let claimed_ids: HashSet<i64> = claimed.iter().map(|r| r.id).collect();
    assert_eq!(stored.len(), claimed.len());
    assert_eq!(stored_ids, claimed_ids);
    assert!(
        stored.len() >= jobs.len(),
        "the race claimed too little: {}",
        stored.len()
    );
    nodes[1].close().await;
}

pub(crate) async fn concurrent_claimers_never_share_a_job(ctx: Ctx) {
    let g = group(&*ctx.store, "shared").await;
    for i in 0..10 {
        running_job(&*ctx.store, g.id, &format!("shared-{i}"), NOW - i).await;
    }
    let other = ctx.connect_again().await;
    let planning = Arc::new(AtomicBool::new(false));
    let b_done = Arc::new(AtomicBool::new(false));
    let b_done_while_a_held = Arc::new(AtomicBool::new(false));

    // A claims 5 jobs and holds them (inside its transaction) until B has finished, at most
    // 3 s. With SKIP LOCKED, B takes the other 5 meanwhile; SQLite's single writer makes B
    // wait instead, so A does not wait there.
    let a = {
        let store = ctx.store.clone();
        let (planning, b_done, held) = (
            planning.clone(),
            b_done.clone(),
            b_done_while_a_held.clone(),
        );
        let wait = ctx.backend.skips_locked_rows();
        tokio::spawn(async move {
            let planner = move |job: &Job, _now: i64| {
                if !planning.swap(true, Ordering::SeqCst) && wait {
                    // block_in_place: a worker stuck in a sleep would also stall the runtime's
                    // timers and sockets, and with them B.
                    tokio::task::block_in_place(|| {
                        let deadline = Instant::now() + Duration::from_secs(3);
                        while !b_done.load(Ordering::SeqCst) && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    });
                    held.store(b_done.load(Ordering::SeqCst), Ordering::SeqCst);
                }
                JobPlan {
                    fires: vec![PlannedFire::on_time(
                        job.next_fire_at.unwrap(),
                        TriggerType::Cron,
                    )],
                    next_fire_at: Some(NOW + 3_600_000),
                }
            };
            store
                .jobs_claim_due(claim("node-a", NOW, 0, 5), &planner)
                .await
                .unwrap()
        })
    };
    while !planning.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let b = other
        .jobs_claim_due(claim("node-b", NOW, 0, 10), &fixed_rate(3_600_000, NOW))
        .await
        .unwrap();
    b_done.store(true, Ordering::SeqCst);
    let a = a.await.unwrap();

    let a_jobs: HashSet<i64> = a.runs.iter().map(|r| r.job_id).collect();
    let b_jobs: HashSet<i64> = b.runs.iter().map(|r| r.job_id).collect();
    assert_eq!((a_jobs.len(), b_jobs.len()), (5, 5), "a: {a:?}, b: {b:?}");
    assert!(a_jobs.is_disjoint(&b_jobs));
    if ctx.backend.skips_locked_rows() {
        assert!(
            b_done_while_a_held.load(Ordering::SeqCst),
            "the second claimer waited for the first instead of skipping its jobs"
        );
    }
    other.close().await;
}
