//! Exactly once at the executor under crashes and pauses: three admins (real processes) on one
//! PostgreSQL or MariaDB database, 200 jobs due at the same millisecond every second. One admin
//! is SIGKILLed, or frozen with SIGSTOP for 20 s and resumed, a few milliseconds into a
//! second's burst, while it is sending. Counted at the executor, not in the ledger: no run is
//! executed twice, and the ledger says what happened (a run the executor ran is recorded as
//! sent and ended with its result; a run recorded as failed at trigger time never reached it).
//!
//! A third fault freezes an admin inside its claim transaction (a test-only fault point stops
//! it there): the others must fire every job again within the stated takeover time.
//!
//! `TICKWORK_CHAOS_PHASE_MS` (default 3) is where in the second the fault lands.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use nix::sys::signal::Signal;
use support::java_like::JavaLikeExecutor;
use support::{Api, Backend, Child, CountingExecutor, TestDb, report, runs_of};
use tickwork_core::run::RunState;
use tickwork_testkit::wait_until_sync;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Kill,
    /// SIGSTOP for this long, then SIGCONT.
    Pause(Duration),
    /// Frozen for this long inside a claim transaction, the jobs it claims locked (the admin
    /// stops itself there: a test-only fault point), then SIGCONT.
    PauseInClaim(Duration),
}

/// Which executor receives the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The Tickwork SDK executor: asked which runs it accepted, drops a repeated run id.
    Tickwork,
    /// An executor that answers as a Java one: cannot be asked, only its logs tell.
    JavaLike,
    /// Two Tickwork SDK executors in pull mode, connected to the first admin: the other
    /// admins' runs reach them through the database, and they dial another admin when theirs
    /// is killed.
    Pull,
}

enum Exec {
    Tickwork(CountingExecutor),
    JavaLike(JavaLikeExecutor),
    /// Two executors of the group: a run counts wherever it ran.
    Pair(CountingExecutor, CountingExecutor),
}

/// Where the fault lands: on the admin with the most runs of the second, or on the admin that
/// holds the pull executor's connection.
fn pick_victim(kind: Kind, most_runs: usize) -> usize {
    if kind == Kind::Pull { 0 } else { most_runs }
}

impl Exec {
    async fn start(kind: Kind, admins: &[String], token: &str) -> Exec {
        match kind {
            Kind::Tickwork => Exec::Tickwork(CountingExecutor::start("chaos", admins, token).await),
            Kind::Pull => Exec::Pair(
                CountingExecutor::start_pull("chaos", admins, token).await,
                CountingExecutor::start_pull("chaos", admins, token).await,
            ),
            Kind::JavaLike => Exec::JavaLike(JavaLikeExecutor::start("chaos", admins, token).await),
        }
    }

    fn addresses(&self) -> Vec<String> {
        match self {
            Exec::Tickwork(e) => vec![e.address()],
            Exec::JavaLike(e) => vec![e.address.clone()],
            Exec::Pair(a, b) => vec![a.address(), b.address()],
        }
    }

    fn count(&self, run_id: i64) -> u32 {
        match self {
            Exec::Tickwork(e) => e.count(run_id),
            Exec::JavaLike(e) => e.count(run_id),
            Exec::Pair(a, b) => a.count(run_id) + b.count(run_id),
        }
    }

    fn doubles(&self) -> Vec<(i64, u32)> {
        match self {
            Exec::Tickwork(e) => e.doubles(),
            Exec::JavaLike(e) => e.doubles(),
            Exec::Pair(a, b) => {
                let mut ran: BTreeMap<i64, u32> = BTreeMap::new();
                for e in [a, b] {
                    for (&id, &n) in e.executions.lock().unwrap().iter() {
                        *ran.entry(id).or_default() += n;
                    }
                }
                ran.into_iter().filter(|&(_, n)| n > 1).collect()
            }
        }
    }

    /// When each `/run` of `run_id` came, where the executor records it (the Java-like one).
    fn arrivals(&self, run_id: i64) -> Vec<i64> {
        match self {
            Exec::JavaLike(e) => e.arrivals(run_id),
            Exec::Tickwork(_) | Exec::Pair(..) => Vec::new(),
        }
    }

    async fn stop(self) {
        match self {
            Exec::Tickwork(e) => {
                let _ = e.executor.shutdown_and_wait().await;
            }
            Exec::Pair(a, b) => {
                let _ = a.executor.shutdown_and_wait().await;
                let _ = b.executor.shutdown_and_wait().await;
            }
            Exec::JavaLike(_) => {}
        }
    }
}

const PAUSE: Fault = Fault::Pause(Duration::from_secs(20));
const PAUSE_IN_CLAIM: Fault = Fault::PauseInClaim(Duration::from_secs(20));
/// The admins' default `cluster.node_dead_after`: the takeover time the session bounds keep.
const NODE_DEAD_AFTER_MS: i64 = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_killed_mid_burst_fires_nothing_twice() {
    scenario(Backend::Postgres, Fault::Kill, Kind::Tickwork).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_killed_mid_burst_fires_nothing_twice() {
    scenario(Backend::MySql, Fault::Kill, Kind::Tickwork).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_killed_mid_burst_to_a_java_executor_fires_nothing_twice() {
    scenario(Backend::Postgres, Fault::Kill, Kind::JavaLike).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_killed_mid_burst_to_a_java_executor_fires_nothing_twice() {
    scenario(Backend::MySql, Fault::Kill, Kind::JavaLike).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_paused_mid_burst_to_a_java_executor_sends_nothing_after_it_resumes() {
    scenario(Backend::Postgres, PAUSE, Kind::JavaLike).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_paused_mid_burst_sends_nothing_after_it_resumes() {
    scenario(Backend::Postgres, PAUSE, Kind::Tickwork).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_paused_mid_burst_sends_nothing_after_it_resumes() {
    scenario(Backend::MySql, PAUSE, Kind::Tickwork).await;
}

/// Also the regression test of a callback storm that drained the pools: with one connection
/// per callback request the surviving admins' heartbeats starved until after the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_paused_mid_burst_to_a_java_executor_sends_nothing_after_it_resumes() {
    scenario(Backend::MySql, PAUSE, Kind::JavaLike).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_holding_a_pull_executor_killed_mid_burst_fires_nothing_twice() {
    scenario(Backend::Postgres, Fault::Kill, Kind::Pull).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_paused_inside_its_claim_holds_no_one_back() {
    scenario(Backend::Postgres, PAUSE_IN_CLAIM, Kind::Tickwork).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_paused_inside_its_claim_holds_no_one_back() {
    scenario(Backend::MySql, PAUSE_IN_CLAIM, Kind::Tickwork).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_paused_inside_its_claim_to_a_java_executor_holds_no_one_back() {
    scenario(Backend::Postgres, PAUSE_IN_CLAIM, Kind::JavaLike).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_paused_inside_its_claim_to_a_java_executor_holds_no_one_back() {
    scenario(Backend::MySql, PAUSE_IN_CLAIM, Kind::JavaLike).await;
}

async fn scenario(backend: Backend, fault: Fault, kind: Kind) {
    let _serial = support::serial().await;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let jobs_n = 200;
    let store = db.store().await;
    let logs = support::log_dir();
    let nodes = ["node-a", "node-b", "node-c"];
    // Once this file exists, the first admin to plan a job takes it and stops inside its
    // claim (a job is claimed for several fires at once, so one given admin could go many
    // rounds without winning a claim).
    let stop_file = logs.path().join("stop-in-claim");
    let stop_env = stop_file.to_str().expect("a UTF-8 path");
    let mut admins = Vec::new();
    for node in nodes {
        let env: &[(&str, &str)] = match fault {
            Fault::PauseInClaim(_) => &[("TICKWORK_TEST_STOP_IN_CLAIM", stop_env)],
            _ => &[],
        };
        admins.push(Child::admin_with(&logs, node, &db, "", None, env).await);
    }
    let addresses: Vec<String> = admins.iter().map(|a| a.address.clone()).collect();
    let executor = Exec::start(kind, &addresses, &db.token).await;
    for address in executor.addresses() {
        support::registered(store.as_ref(), &address).await;
    }

    let api = Api::new(&admins[0].address);
    let group = api.group("chaos").await;
    let jobs: Vec<i64> = api
        .every_second_jobs(group, jobs_n)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let phase = support::env_secs("TICKWORK_CHAOS_PHASE_MS", 3) as i64;
    let t0 = support::now_ms() / 1000 * 1000;

    // A few seconds in, a few milliseconds into a second: the node that holds that second's
    // runs is sending them.
    let fault_second = t0 + 5_000;
    // By then the claim's look-ahead has planned that second on whichever nodes claimed it.
    support::sleep_until_ms(fault_second - 1_000).await;
    let mut counts = Vec::new();
    for node in nodes {
        let n = store
            .runs_pending_owned_by(node)
            .await
            .expect("pending runs")
            .iter()
            .filter(|r| r.scheduled_at == fault_second)
            .count();
        counts.push(n);
    }
    let busiest = (0..nodes.len())
        .max_by_key(|&i| (counts[i], usize::MAX - i))
        .unwrap_or(0);
    let mut victim = pick_victim(kind, busiest);
    let most = counts[victim];
    if !matches!(fault, Fault::PauseInClaim(_)) {
        support::sleep_until_ms(fault_second + phase).await;
    }
    let mut fault_at = support::now_ms();
    match fault {
        Fault::Kill => {
            admins[victim].kill().await;
        }
        Fault::Pause(pause) => {
            admins[victim].signal(Signal::SIGSTOP);
            support::sleep_until_ms(fault_at + pause.as_millis() as i64).await;
            admins[victim].signal(Signal::SIGCONT);
        }
        Fault::PauseInClaim(pause) => {
            std::fs::write(&stop_file, b"").expect("the stop file");
            victim = wait_until_sync(
                "an admin's stop inside a claim",
                Duration::from_secs(30),
                || {
                    admins
                        .iter()
                        .position(|a| a.output().contains("TW-STOPPED-IN-CLAIM"))
                },
            )
            .await;
            fault_at = support::now_ms();
            support::sleep_until_ms(fault_at + pause.as_millis() as i64).await;
            admins[victim].signal(Signal::SIGCONT);
        }
    }
    let resumed_at = support::now_ms();
    let survivor = (victim + 1) % nodes.len();
    let api = Api::new(&admins[survivor].address);

    // Long enough after the fault for the survivors to adopt and for a resumed node to act.
    support::sleep_until_ms(support::now_ms() + 10_000).await;
    let stop_at = support::now_ms();
    api.stop_jobs(jobs.iter().copied()).await;
    let cut = stop_at - 2_000;
    if let Err(pending) = support::settled_until(&*store, cut).await {
        panic!(
            "{} runs up to the cut never ended; first ones: {:#?}\n{}",
            pending.len(),
            &pending[..pending.len().min(3)],
            support::tails(&admins)
        );
    }

    // Counted at the executor: nothing twice.
    let doubles = executor.doubles();
    if !doubles.is_empty() {
        // What the ledger says of each, and when each `/run` came against the fault.
        let runs = runs_of(&*store, None).await;
        let told: Vec<String> = doubles
            .iter()
            .map(|&(id, _)| {
                let came: Vec<i64> = executor
                    .arrivals(id)
                    .iter()
                    .map(|at| at - fault_at)
                    .collect();
                let run = runs.iter().find(|r| r.id == id);
                format!("run {id}: /run at {came:?} ms after the fault; {run:#?}")
            })
            .collect();
        panic!(
            "runs executed twice: {doubles:?}; {} admin (of {nodes:?}) hit at {fault_at}, \
             resumed {} ms later\n{}\n{}",
            nodes[victim],
            resumed_at - fault_at,
            told.join("\n"),
            support::tails(&admins)
        );
    }
    // The ledger says what the executor saw.
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    let mut senders: BTreeMap<String, usize> = BTreeMap::new();
    let mut maybe_sent = 0;
    for run in runs_of(&*store, None).await {
        if run.scheduled_at > cut {
            continue;
        }
        let ran = executor.count(run.id) > 0;
        *states.entry(run.state.to_string()).or_default() += 1;
        if ran {
            let node = run.owner_node.clone().unwrap_or_default();
            *senders.entry(node).or_default() += 1;
        }
        match run.state {
            RunState::Succeeded => assert!(ran, "recorded as succeeded, never ran: {run:?}"),
            RunState::Failed => {
                assert!(!ran, "recorded as failed, but the executor ran it: {run:?}");
            }
            RunState::Misfired | RunState::Skipped => {
                assert!(
                    !ran,
                    "recorded as not run, but the executor ran it: {run:?}"
                );
            }
            RunState::Lost => {
                assert!(
                    !ran,
                    "recorded as lost, but the executor ran it and said so: {run:?}"
                );
                maybe_sent += 1;
            }
            other => panic!("a run up to the cut is {other}: {run:?}"),
        }
    }
    if let Fault::PauseInClaim(_) = fault {
        // Within the stated takeover time (a dead node's detection, plus a claim round and the
        // look-ahead) the others fire every job again, the frozen node's locked ones included.
        let from = fault_at + NODE_DEAD_AFTER_MS + 3_000;
        let to = resumed_at - 1_000;
        let runs = runs_of(&*store, None).await;
        let stuck: Vec<i64> = jobs
            .iter()
            .copied()
            .filter(|job| {
                !runs.iter().any(|r| {
                    r.job_id == *job
                        && r.state == RunState::Succeeded
                        && (from..to).contains(&r.scheduled_at)
                })
            })
            .collect();
        assert!(
            stuck.is_empty(),
            "{} jobs had no run fired from {} to {} ms after the stop: {:?}",
            stuck.len(),
            from - fault_at,
            to - fault_at,
            &stuck[..stuck.len().min(10)]
        );
    }
    if kind == Kind::Pull {
        // One connection each, to one admin at a time: the runs the other admins sent went
        // through the database.
        assert!(
            senders.len() >= 2,
            "the runs the executor ran were all sent by one admin: {senders:?}"
        );
    }
    let hit = match fault {
        Fault::PauseInClaim(_) => format!("{} stopped inside a claim", nodes[victim]),
        _ => format!(
            "{} had {most} runs of the second {fault_second} when hit at +{} ms",
            nodes[victim],
            fault_at - fault_second
        ),
    };
    report(format!(
        "CHAOS {backend:?} {fault:?} {kind:?} executor: {jobs_n} jobs every second, {hit}; \
         ledger up to the cut: {states:?}; ran, by sending admin: {senders:?}; lost as maybe sent: \
         {maybe_sent}; executor doubles 0"
    ));
    drop(admins);
    executor.stop().await;
    store.close().await;
    db.drop_database().await;
}
