//! Failover of the admin cluster, as the issue states it: three admins (real processes) on one
//! PostgreSQL or MariaDB database, 200 jobs firing every second for 60 s; one admin is killed
//! with SIGKILL at 20 s, another stopped with SIGTERM at 40 s. Every (job, fire time) must have
//! exactly one run that ran exactly once, and the runs the dead node had claimed must run on a
//! survivor within 10 s of their instant.
//!
//! The admins' misfire threshold is a minute, so that a fire late for want of the database (a
//! shared server that stalls under other load) runs late instead of misfiring: lateness is
//! judged by its own bound, every fire dispatched within 10 s of its instant plus the longest
//! the database left the test itself without an answer. The misfire policies have tests of
//! their own (`misfire`, `outage`).
//!
//! `TICKWORK_FAILOVER_JOBS` and `TICKWORK_FAILOVER_SECS` shrink the scenario (for a quick local
//! run); the defaults are the issue's. `TICKWORK_FAILOVER_KILL_PHASE_MS` (default 500) is where
//! in the second the kill and the stop land.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::{Api, Backend, Child, CountingExecutor, TestDb, report, runs_of};
use tickwork_core::run::RunState;
use tickwork_store::{Run, Store};
use tickwork_testkit::wait_until;

/// The admins' configuration: the misfire threshold out of the way (see above).
const ADMIN: &str = r#"
[scheduler]
misfire_threshold_ms = 60000
"#;

/// How late a fire may be dispatched, beyond the database's longest silence.
const LATE_MAX_MS: i64 = 10_000;

/// The longest the database left the test without an answer, and from when.
#[derive(Debug, Clone, Copy, Default)]
struct Silence {
    longest_ms: i64,
    from: i64,
}

/// Asks the database for the node rows every 100 ms until `stop`: the admins cannot fire on
/// time while it does not answer them either.
fn probe_database(
    store: Arc<dyn Store>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Silence> {
    tokio::spawn(async move {
        let mut silence = Silence::default();
        let mut last = support::now_ms();
        while !stop.load(Ordering::Relaxed) {
            if store.nodes_list().await.is_ok() {
                let now = support::now_ms();
                if now - last > silence.longest_ms {
                    silence = Silence {
                        longest_ms: now - last,
                        from: last,
                    };
                }
                last = now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        silence
    })
}

/// What the admins said that matters when a fire went wrong: warnings, errors, and their
/// fence, hold and stop lines, without the fire check's line per late job.
fn notable(admins: &[Child]) -> String {
    let words = ["WARN", "ERROR", "held", "heartbeat", "stopping", "SIGTERM"];
    let mut out = String::new();
    for admin in admins {
        let output = admin.output();
        let lines: Vec<&str> = output
            .lines()
            .filter(|l| words.iter().any(|w| l.contains(w)) && !l.contains("fire alert"))
            .collect();
        out.push_str(&format!(
            "--- {} ({} notable lines, the last 40):\n",
            admin.name,
            lines.len()
        ));
        for line in &lines[lines.len().saturating_sub(40)..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_admins_on_postgres_lose_one_to_sigkill_and_one_to_sigterm() {
    scenario(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_admins_on_mariadb_lose_one_to_sigkill_and_one_to_sigterm() {
    scenario(Backend::MySql).await;
}

/// What happened to the planned runs of a node that went away.
struct Handover {
    /// Planned runs of the node just before it went.
    planned: usize,
    /// Of these, fired by the node itself before it went.
    fired_by_itself: usize,
    /// Fired by a survivor.
    adopted: usize,
    /// The largest dispatch instant minus scheduled instant among the adopted.
    max_delay_ms: i64,
    /// The last adopted dispatch, counted from the node's end.
    last_dispatch_after_end_ms: i64,
}

async fn handover(
    store: &dyn tickwork_store::Store,
    node: &str,
    planned: &[Run],
    end: i64,
) -> Handover {
    let mut h = Handover {
        planned: planned.len(),
        fired_by_itself: 0,
        adopted: 0,
        max_delay_ms: 0,
        last_dispatch_after_end_ms: 0,
    };
    for run in planned {
        let now = store.run_get(run.id).await.expect("run");
        assert_eq!(now.state, RunState::Succeeded, "{now:?}");
        // A run whose result came back before its sender, killed, wrote the dispatch record:
        // sent by the node itself.
        let Some(dispatched) = now.dispatched_at else {
            assert_eq!(now.owner_node.as_deref(), Some(node), "{now:?}");
            h.fired_by_itself += 1;
            continue;
        };
        if now.owner_node.as_deref() == Some(node) {
            h.fired_by_itself += 1;
        } else {
            h.adopted += 1;
            h.max_delay_ms = h.max_delay_ms.max(dispatched - now.scheduled_at);
            h.last_dispatch_after_end_ms = h.last_dispatch_after_end_ms.max(dispatched - end);
        }
    }
    h
}

/// The live node with the most planned runs, and those runs.
async fn busiest(
    store: &dyn tickwork_store::Store,
    nodes: &[&str],
    alive: &[usize],
) -> (usize, Vec<Run>) {
    let mut best = (alive[0], Vec::new());
    for &i in alive {
        let runs = store
            .runs_pending_owned_by(nodes[i])
            .await
            .expect("planned runs");
        if runs.len() > best.1.len() {
            best = (i, runs);
        }
    }
    best
}

async fn scenario(backend: Backend) {
    let _serial = support::serial().await;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let jobs_n = support::env_secs("TICKWORK_FAILOVER_JOBS", 200) as usize;
    let secs = support::env_secs("TICKWORK_FAILOVER_SECS", 60) as i64;
    let started = std::time::Instant::now();
    let store = db.store().await;
    let logs = support::log_dir();

    let mut admins = Vec::new();
    for node in ["node-a", "node-b", "node-c"] {
        admins.push(Child::admin(&logs, node, &db, ADMIN).await);
    }
    let probe_stop = Arc::new(AtomicBool::new(false));
    let probe = probe_database(db.store().await, probe_stop.clone());
    let addresses: Vec<String> = admins.iter().map(|a| a.address.clone()).collect();
    let executor = CountingExecutor::start("failover", &addresses, &db.token).await;
    let executor_address = executor.address();
    support::registered(store.as_ref(), &executor_address).await;

    let api = Api::new(&admins[0].address);
    let group = api.group("failover").await;
    let jobs = api.every_second_jobs(group, jobs_n).await;
    let t0 = jobs[0].1;
    // Between two fire instants (every job fires at .000), so that the kill does not land in
    // the few milliseconds where a run is dispatched but not yet recorded (see ARCHITECTURE);
    // `TICKWORK_FAILOVER_KILL_PHASE_MS` moves it, to measure that window.
    let phase = support::env_secs("TICKWORK_FAILOVER_KILL_PHASE_MS", 500) as i64;
    let mid_second = |offset_s: i64| (t0 / 1000 + offset_s) * 1000 + phase;
    let nodes = ["node-a", "node-b", "node-c"];
    let mut alive = vec![0, 1, 2];

    // 20 s: the node holding the most planned runs dies (which node claims a second's fires
    // is up to chance).
    support::sleep_until_ms(mid_second(secs / 3)).await;
    let (killed, of_killed) = busiest(&*store, &nodes, &alive).await;
    admins[killed].kill().await;
    let killed_at = support::now_ms();
    alive.retain(|&i| i != killed);

    // 40 s: the busiest of the other two stops cleanly.
    support::sleep_until_ms(mid_second(2 * secs / 3)).await;
    let (stopped, of_stopped) = busiest(&*store, &nodes, &alive).await;
    let stopping_at = support::now_ms();
    let status = admins[stopped].terminate(Duration::from_secs(60)).await;
    let stop_took = support::now_ms() - stopping_at;
    assert!(
        status.is_some_and(|s| s.success()),
        "{} did not exit cleanly on SIGTERM ({status:?}); its log:\n{}",
        nodes[stopped],
        admins[stopped].tail(40)
    );
    alive.retain(|&i| i != stopped);
    let last = alive[0];
    let api = Api::new(&admins[last].address);

    // 60 s: the jobs stop.
    support::sleep_until_ms(mid_second(secs)).await;
    let stop_at = support::now_ms();
    api.stop_jobs(jobs.iter().map(|&(id, _)| id)).await;
    // Fires up to two seconds before the stop must all have run.
    let cut = stop_at - 2_000;
    let settled = support::settled_until(&*store, cut).await;
    probe_stop.store(true, Ordering::Relaxed);
    let silence = probe.await.expect("the database probe");
    if let Err(pending) = settled {
        let executed: Vec<(i64, u32)> = pending
            .iter()
            .map(|r| (r.id, executor.count(r.id)))
            .collect();
        panic!(
            "{} runs before the stop never finished (killed {} at {killed_at}, stopped {} at \
             {stopping_at}); executions of these at the executor: {executed:?}; executor: \
             {:?}; database silent {silence:?}; first ones: {:#?}\n{}",
            pending.len(),
            nodes[killed],
            nodes[stopped],
            executor.executor.stats(),
            &pending[..pending.len().min(2)],
            notable(&admins)
        );
    }

    // Every (job, fire time) of the window has exactly one run, and it succeeded.
    let mut fires = 0;
    let mut worst_late: Option<&Run> = None;
    let mut by_owner: BTreeMap<String, usize> = BTreeMap::new();
    let mut runs_by_job = Vec::new();
    for &(job_id, _) in &jobs {
        runs_by_job.push(runs_of(&*store, Some(job_id)).await);
    }
    let late = |r: &Run| r.dispatched_at.map_or(0, |d| d - r.scheduled_at);
    for (&(job_id, created_at), runs) in jobs.iter().zip(&runs_by_job) {
        let mut by_key: HashMap<i64, &Run> = HashMap::new();
        for run in runs {
            let key = run.fire_key.expect("only scheduled fires");
            assert_eq!(key % 1000, 0, "a fire off the second: {run:?}");
            assert!(
                by_key.insert(key, run).is_none(),
                "fire twice in the ledger: {run:?}"
            );
        }
        let first = (created_at / 1000 + 1) * 1000;
        let mut at = first;
        while at <= cut {
            let run = by_key
                .get(&at)
                .unwrap_or_else(|| panic!("job {job_id}: the fire at {at} is missing"));
            assert_eq!(
                run.state,
                RunState::Succeeded,
                "job {job_id}: the fire at {at} did not succeed: {run:?}; killed {} at \
                 {killed_at}, stopped {} at {stopping_at}; database silent {silence:?}\n{}",
                nodes[killed],
                nodes[stopped],
                notable(&admins)
            );
            if worst_late.is_none_or(|w| late(w) < late(run)) {
                worst_late = Some(run);
            }
            *by_owner
                .entry(run.owner_node.clone().unwrap_or_default())
                .or_default() += 1;
            fires += 1;
            at += 1000;
        }
    }
    // On time, but for the database: a fire waits for a survivor at most `LATE_MAX_MS`.
    let worst_late = worst_late.expect("fires in the window");
    assert!(
        late(worst_late) <= LATE_MAX_MS + silence.longest_ms,
        "a fire went out {} ms late, the database silent at most {silence:?}: {worst_late:?}; \
         killed {} at {killed_at}, stopped {} at {stopping_at}\n{}",
        late(worst_late),
        nodes[killed],
        nodes[stopped],
        notable(&admins)
    );
    // And each ran exactly once on the executor.
    let doubles = executor.doubles();
    assert!(
        doubles.is_empty(),
        "runs executed more than once: {doubles:?}"
    );

    let b = handover(&*store, nodes[killed], &of_killed, killed_at).await;
    let c = handover(
        &*store,
        nodes[stopped],
        &of_stopped,
        stopping_at + stop_took,
    )
    .await;
    assert!(b.adopted > 0, "the killed node held no planned run");
    assert!(
        b.max_delay_ms <= 10_000,
        "an adopted run of the killed node fired {} ms late",
        b.max_delay_ms
    );
    assert!(
        c.max_delay_ms <= 10_000,
        "a handed-over run of the stopped node fired {} ms late",
        c.max_delay_ms
    );

    // The last one holds the maintenance lease and is ready. Waited on together: on a loaded
    // machine a heartbeat can come late enough to close the fence for a moment (`/readyz`
    // answers 503 then) while the lease, which lasts longer, is still held.
    let a = api.clone();
    wait_until(
        "the last node to hold the lease and be ready",
        Duration::from_secs(30),
        || {
            let a = a.clone();
            async move {
                let (_, metrics) = a.get("/metrics").await;
                let ready = a.get("/readyz").await.0 == 200;
                (ready && metrics.contains("\ntickwork_lease_held 1\n")).then_some(())
            }
        },
    )
    .await;
    assert!(admins[last].is_running(), "{} exited", nodes[last]);

    report(format!(
        "FAILOVER {backend:?}: {jobs_n} jobs x {secs} s, {fires} fires checked (by node {by_owner:?}), \
         the latest {} ms late, the database silent {} ms at most (from {}); \
         SIGKILL {}: {} planned, {} fired by itself, {} adopted, max delay {} ms, last adopted \
         dispatch {} ms after the kill; SIGTERM {}: exit in {stop_took} ms, {} planned, {} \
         handed over, max delay {} ms; executor doubles 0; test took {:.0} s",
        late(worst_late),
        silence.longest_ms,
        silence.from,
        nodes[killed],
        b.planned,
        b.fired_by_itself,
        b.adopted,
        b.max_delay_ms,
        b.last_dispatch_after_end_ms,
        nodes[stopped],
        c.planned,
        c.adopted,
        c.max_delay_ms,
        started.elapsed().as_secs_f64()
    ));

    drop(admins);
    let _ = executor.executor.shutdown_and_wait().await;
    store.close().await;
    db.drop_database().await;
}
