//! The pipeline: claim -> timer -> dispatch -> ledger -> completion, with cluster membership
//! and the lease holder's maintenance. [`Scheduler`] owns all of it; each loop is stoppable
//! through a cancellation token and observable through [`Stats`].
//!
//! Entry points: `claim` (the claim loop), `lanes` (due runs to the dispatch lanes, routing and
//! broadcast), `ledger` (the batched dispatch records), `complete` (results and what follows
//! them), `executor_api` (registry and callbacks: executors drive the pipeline), `cluster`
//! (heartbeat, fence, adoption, lease) and `monitor` (what the lease holder maintains). Every
//! time read and timed wait goes through the scheduler's `clock` (the system clock unless a
//! test hands it a manual one).

mod addresses;
pub(crate) mod alarm_delivery;
mod bounded;
mod claim;
pub mod clock;
pub(crate) mod cluster;
pub(crate) mod complete;
mod completion_delivery;
pub(crate) mod dispatch;
mod dispatch_records;
pub(crate) mod executor_api;
mod fire_check;
mod job_cache;
mod lanes;
mod ledger;
mod log_checkpoint;
mod maybe_sent;
pub(crate) mod monitor;
pub mod planner;
pub(crate) mod pull;
mod pull_relay;
mod results;
mod senders;
pub mod timer;
pub(crate) mod workflows;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tickwork_core::routing::Router;
use tickwork_core::run::RunState;
use tickwork_store::{Run, RunComplete, Store};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use crate::Error;
use crate::config::Config;
use crate::executor_client::ExecutorClient;
use crate::metrics::Metrics;
use crate::service::PipelineHandle;
use crate::timer::{Released, Timer};
use addresses::AddressCache;
pub(crate) use addresses::live_addresses;
use clock::Clock;
use cluster::{Membership, Origin};
pub(crate) use job_cache::CachedJob;
use job_cache::JobCache;
use monitor::Monitor;
use tickwork_protocol::api::LatenessView;

/// How long a stopping admin keeps trying to record what it dispatched before giving up. It
/// bounds database IO, so it is real time (`Instant`), not the scheduler's clock.
const SHUTDOWN_WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// Counters of the pipeline, for metrics and for tests that wait on progress.
#[derive(Debug, Default)]
pub struct Stats {
    pub claim_rounds: AtomicU64,
    /// Claim rounds put off because the pipeline was behind: its backlog at
    /// `scheduler.max_backlog`, or the send fence meeting runs late with more waiting.
    pub claims_deferred: AtomicU64,
    /// The clock's time at the latest successful claim round (0: none yet), set once the
    /// round's runs are armed: a test that moved the clock waits for a round that saw it.
    pub last_claim_at: AtomicI64,
    pub runs_claimed: AtomicU64,
    /// Runs recorded as misfired: at claim, and after adoption or a hold.
    pub runs_misfired: AtomicU64,
    pub dispatched: AtomicU64,
    /// Of those, the runs whose dispatch record was written with their result, in one update.
    pub dispatched_with_result: AtomicU64,
    /// Trigger failures, all causes; the `dispatch_*` counters split them.
    pub dispatch_failed: AtomicU64,
    pub dispatch_no_executor: AtomicU64,
    pub dispatch_refused: AtomicU64,
    pub dispatch_transport: AtomicU64,
    pub completed: AtomicU64,
    pub retries: AtomicU64,
    pub children: AtomicU64,
    /// Workflow instance steps this node wrote (nodes started, skipped or stopped, ends).
    pub workflow_steps: AtomicU64,
    /// Scheduled workflow fires this node claimed (an instance written or a misfire skipped).
    pub workflow_fires: AtomicU64,
    /// Planned runs of dead or departed nodes this node took over.
    pub runs_adopted: AtomicU64,
    /// Runs held back instead of fired (fence closed, database unreachable).
    pub runs_held: AtomicU64,
    /// Held or adopted runs dropped at the ownership check: another node had them.
    pub runs_disowned: AtomicU64,
    /// Runs the lost-run monitor ended as `lost`.
    pub runs_lost: AtomicU64,
    /// Maybe-sent runs (left `sending` by a node that went away) an executor said it had.
    pub runs_maybe_sent_accepted: AtomicU64,
    /// Maybe-sent runs every executor said it did not have: fired under their misfire policy.
    pub runs_maybe_sent_unsent: AtomicU64,
    /// Maybe-sent runs nobody could answer for, ended as `lost` (`AT_MOST_ONCE`).
    pub runs_maybe_sent_lost: AtomicU64,
    /// Maybe-sent runs nobody could answer for, sent again (`AT_LEAST_ONCE`).
    pub runs_maybe_sent_resent: AtomicU64,
    /// Fires the ledger's check judged missed, late and doubled (on the lease holder).
    pub fires_missed: AtomicU64,
    pub fires_late: AtomicU64,
    pub fires_doubled: AtomicU64,
    /// Rounds of the ledger's check of fires finished on this node.
    pub fire_checks: AtomicU64,
    /// Failed runs queued for an alarm.
    pub alarms_queued: AtomicU64,
    /// Alarm deliveries written (one per run and channel).
    pub alarm_deliveries_queued: AtomicU64,
    /// Failed runs carried by their job's pending alarms instead of alarms of their own.
    pub alarm_runs_grouped: AtomicU64,
    /// Rounds of the alarm delivery loop run on this node (as lease holder).
    pub alarm_rounds: AtomicU64,
    /// Alarm deliveries sent.
    pub alarms_sent: AtomicU64,
    /// Alarm send attempts that failed (retried or not).
    pub alarm_send_errors: AtomicU64,
    /// Alarm deliveries given up after their last attempt.
    pub alarms_failed: AtomicU64,
    pub heartbeats: AtomicU64,
    pub heartbeat_failures: AtomicU64,
    pub reports_written: AtomicU64,
    pub runs_purged: AtomicU64,
    /// Rounds of the log checkpointer (SQLite only).
    pub log_checkpoints: AtomicU64,
}

/// How long before its instant a `planned` run goes through the send fence: the fence's write
/// is off the run's path to the executor, and the run waits `sending` in the timer for its
/// instant (a node that stops meanwhile gives it back to `planned`). A burst meets the fence
/// in writes of up to 5,000 runs one after another: 20,000 runs due at once on PostgreSQL took
/// longer than 50 ms, and the lead of 50 ms it had left the burst's median 80-95 ms later.
pub const FENCE_LEAD_MS: i64 = 250;
/// Runs due within this many ms of each other meet the fence in one write.
const FENCE_WINDOW_MS: i64 = 20;

/// A run waiting in the timer or a lane, with what the fence needs to know about it.
pub(crate) struct Armed {
    pub(crate) run: Run,
    /// The fence epoch when it was armed: a `sending` run armed before the fence last closed
    /// is checked against the database before it is sent again (a `planned` one is checked by
    /// the send fence itself).
    pub(crate) epoch: u64,
    /// How much later than the misfire threshold the run may fire before its misfire policy
    /// applies: the failover's detection time for adopted and re-armed runs, else 0.
    pub(crate) grace_ms: i64,
}

/// Per-job slow-dispatch accounting (XXL-JOB's fast/slow trigger pools).
#[derive(Default)]
struct SlowCount {
    minute: i64,
    count: u32,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    /// Every time read and timed wait of the pipeline (not the timeouts of IO).
    pub(crate) clock: Clock,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) client: ExecutorClient,
    router: Mutex<Router>,
    /// `planned` runs, released [`FENCE_LEAD_MS`] before their instant to the send fence.
    pub(crate) fence_timer: Timer<Armed>,
    /// `sending` runs, released at their instant to the lanes.
    pub(crate) timer: Timer<Armed>,
    /// Runs either timer released that the send loop has not yet put in a lane, back in the
    /// timer, held or ended: in the channel, or while their fence or misfire is written.
    released: Released,
    jobs: Mutex<JobCache>,
    pub(crate) addresses: Arc<AddressCache>,
    slow: Mutex<HashMap<i64, SlowCount>>,
    claim_wake: Notify,
    /// Set by the send fence while it meets runs later than half the misfire threshold with
    /// more waiting behind them: the claim waits, so that sending gets the database first.
    send_behind: AtomicBool,
    /// Wakes the alarm delivery loop (deliveries were queued).
    pub(crate) alarm_wake: Notify,
    pub(crate) senders: Arc<crate::alarm::Senders>,
    fast_lane: mpsc::UnboundedSender<Box<Armed>>,
    slow_lane: mpsc::UnboundedSender<Box<Armed>>,
    ledger: mpsc::UnboundedSender<ledger::Entry>,
    /// Accepted runs' dispatch records, held by the ledger for their callback.
    pub(crate) dispatch_records: dispatch_records::DispatchRecords,
    /// Callback requests for the results writer.
    results: mpsc::UnboundedSender<results::ResultsRequest>,
    /// Ended node runs, to the workflow loop.
    workflow_ends: mpsc::UnboundedSender<Vec<i64>>,
    /// Runs taken out of the flow (fence closed, database unreachable); the claim loop checks
    /// their ownership and fires them again, under the misfire policy.
    pub(crate) held: Mutex<Vec<Run>>,
    pub(crate) membership: Membership,
    pub(crate) metrics: Arc<Metrics>,
    /// Stops claiming, dispatching, adoption and the monitors.
    pub(crate) stop: CancellationToken,
    /// Stops the ledger, once nothing can be dispatched any more.
    ledger_stop: CancellationToken,
    /// Set at shutdown: ledger writes that still fail after this instant are given up.
    write_deadline: std::sync::OnceLock<Instant>,
    /// Stops the heartbeat, once the ledger has written everything.
    pub(crate) cluster_stop: CancellationToken,
    pub(crate) stats: Stats,
}

/// The running pipeline; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) inner: Arc<Inner>,
}

/// The pipeline's background tasks; [`Scheduler::shutdown`] stops them and waits. Dropping
/// it without a shutdown aborts them all.
pub(crate) struct Tasks {
    pipeline: JoinSet<()>,
    ledger: JoinSet<()>,
    cluster: JoinSet<()>,
}

/// Runs waiting in a node's memory ([`Scheduler::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    /// In the timer, for their instant.
    pub timer: usize,
    /// Held back (fence closed or database unreachable), to be checked and fired.
    pub held: usize,
    /// Released by a timer and being fenced or checked, due and waiting for a dispatch slot
    /// in a lane, or dispatched and waiting for the ledger to record the outcome.
    pub queued: usize,
    /// Of `queued`, the accepted runs whose dispatch record is held for their callback.
    pub records: usize,
}

impl Waiting {
    /// What the claim weighs against `scheduler.max_backlog`: every run between the claim and
    /// the ledger (held runs wait for the fence, not for the pipeline, and are left out).
    pub fn backlog(&self) -> usize {
        self.timer + self.queued
    }
}

impl Scheduler {
    /// Starts the pipeline on `store` and `clock`, after a first heartbeat. Runs this node
    /// planned before a restart go back into the timer (checked against the database before
    /// they fire, late ones under their misfire policy).
    pub(crate) async fn start(
        mut config: Config,
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        clock: Clock,
    ) -> Result<(Scheduler, Tasks), Error> {
        // MySQL/MariaDB evaluate a `SET` left to right, so a result and its run's dispatch
        // record are two statements there anyway: a held record would only make the
        // callback's transaction longer.
        if store.backend() == "mysql" {
            config.dispatch.record_hold = Duration::ZERO;
        }
        // The executor client's timeouts bound network IO: real time, whatever the clock.
        let client = ExecutorClient::new(&config.access_token, config.dispatch.executor_timeout);
        let stop = CancellationToken::new();
        let (due_tx, due_rx) = mpsc::unbounded_channel();
        let released = Released::default();
        let fence_timer = Timer::start(
            due_tx.clone(),
            released.clone(),
            stop.clone(),
            clock.clone(),
            FENCE_WINDOW_MS,
        );
        let timer = Timer::start(due_tx, released.clone(), stop.clone(), clock.clone(), 0);
        let (fast_tx, fast_rx) = mpsc::unbounded_channel();
        let (slow_tx, slow_rx) = mpsc::unbounded_channel();
        let (ledger_tx, ledger_rx) = mpsc::unbounded_channel();
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        let (workflow_tx, workflow_rx) = mpsc::unbounded_channel();
        let addresses = Arc::new(AddressCache::new(
            store.clone(),
            client.clone(),
            clock.clone(),
            config.registry.address_cache,
            config.registry.dead_after,
        ));
        let inner = Arc::new(Inner {
            clock,
            router: Mutex::new(Router::new()),
            fence_timer,
            timer,
            released,
            jobs: Mutex::new(JobCache::default()),
            addresses,
            slow: Mutex::new(HashMap::new()),
            claim_wake: Notify::new(),
            send_behind: AtomicBool::new(false),
            alarm_wake: Notify::new(),
            senders: Arc::new(crate::alarm::Senders::new()),
            fast_lane: fast_tx,
            slow_lane: slow_tx,
            ledger: ledger_tx,
            dispatch_records: Default::default(),
            results: results_tx,
            workflow_ends: workflow_tx,
            held: Mutex::new(Vec::new()),
            membership: Membership::new(store.backend() == "sqlite"),
            metrics,
            stop,
            ledger_stop: CancellationToken::new(),
            write_deadline: std::sync::OnceLock::new(),
            cluster_stop: CancellationToken::new(),
            stats: Stats::default(),
            client,
            store,
            config,
        });
        let scheduler = Scheduler { inner };

        // The first heartbeat comes before the first claim: no run is ever owned by a node
        // that has no heartbeat row.
        scheduler.heartbeat().join_cluster().await?;
        let own = scheduler
            .inner
            .store
            .runs_pending_owned_by(&scheduler.inner.config.node_id)
            .await?;
        if !own.is_empty() {
            info!(runs = own.len(), "re-arming the runs of this node");
            scheduler.adoption().take_over(own, Origin::Restart).await;
        }
        // Runs a node handed back when it stopped cleanly (this one, restarted, or another)
        // fire now, not after the adoption interval.
        scheduler.adoption().adopt_handed_back().await;

        let s = &scheduler;
        let mut pipeline = JoinSet::new();
        pipeline.spawn(s.clone().claim_loop());
        pipeline.spawn(s.clone().due_loop(due_rx));
        let fast = s.inner.config.dispatch.concurrency;
        let slow = s.inner.config.dispatch.slow_concurrency;
        pipeline.spawn(s.clone().lane_loop(fast_rx, fast, 0));
        pipeline.spawn(s.clone().lane_loop(slow_rx, slow, 1));
        pipeline.spawn(s.adoption().adoption_loop());
        for monitor in Monitor::ALL {
            pipeline.spawn(s.maintenance().monitor_loop(monitor));
        }
        pipeline.spawn(s.maintenance().alarm_loop());
        pipeline.spawn(workflows::workflow_loop(s.clone(), workflow_rx));
        if s.inner.store.backend() == "sqlite" {
            pipeline.spawn(log_checkpoint::log_checkpoint_loop(s.inner.clone()));
        }
        let mut ledger = JoinSet::new();
        ledger.spawn(ledger::Ledger { s: s.clone() }.run(ledger_rx));
        let results = results::Results {
            scheduler: s.clone(),
        };
        ledger.spawn(results.run(results_rx));
        let mut cluster = JoinSet::new();
        cluster.spawn(s.heartbeat().membership_loop());
        cluster.spawn(s.heartbeat().lease_loop());
        // A SQLite admin is the only node: nothing to relay.
        if s.inner.store.backend() != "sqlite" {
            s.inner
                .client
                .pull_links()
                .set_relay(crate::pull_links::Relay::new(
                    s.inner.store.clone(),
                    s.inner.config.cluster.node_dead_after,
                ));
            cluster.spawn(pull_relay::relay_loop(s.clone()));
            match s.inner.store.pull_wakeups().await {
                Ok(Some(wakes)) => {
                    cluster.spawn(pull_relay::wake_loop(s.clone(), wakes));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "no notifications of relayed pull calls; polling")
                }
            }
        }
        let tasks = Tasks {
            pipeline,
            ledger,
            cluster,
        };
        Ok((scheduler, tasks))
    }

    /// Stops the pipeline cleanly and hands its work over: claiming and firing stop,
    /// dispatches in flight finish and are recorded, then the node gives up the maintenance
    /// lease and deletes its heartbeat row, so that the other nodes adopt its planned runs at
    /// once (a node that dies instead is adopted from after `node_dead_after`).
    pub(crate) async fn shutdown(&self, mut tasks: Tasks) {
        let inner = &self.inner;
        let began = Instant::now();
        let ms = || began.elapsed().as_millis() as u64;
        inner.stop.cancel();
        while tasks.pipeline.join_next().await.is_some() {}
        info!(elapsed_ms = ms(), "stopping: claims and dispatches ended");
        // Nothing is dispatched any more: write every outcome still on its way.
        let _ = inner
            .write_deadline
            .set(Instant::now() + SHUTDOWN_WRITE_DEADLINE);
        inner.ledger_stop.cancel();
        while let Some(done) = tasks.ledger.join_next().await {
            if let Err(e) = done {
                error!(error = %e, "the ledger task failed");
            }
        }
        info!(elapsed_ms = ms(), "stopping: outcomes and results written");
        // The heartbeat ran until now so that no other node adopted what was in flight.
        inner.cluster_stop.cancel();
        while tasks.cluster.join_next().await.is_some() {}
        self.heartbeat().leave_cluster().await;
        info!(elapsed_ms = ms(), "stopping: left the cluster");
    }

    /// What executors call: registry and callbacks.
    pub fn executor_api(&self) -> executor_api::ExecutorApi {
        executor_api::ExecutorApi {
            scheduler: self.clone(),
        }
    }

    pub(crate) fn maintenance(&self) -> monitor::Maintenance {
        monitor::Maintenance {
            inner: self.inner.clone(),
        }
    }

    pub(crate) fn heartbeat(&self) -> cluster::Heartbeat {
        cluster::Heartbeat {
            inner: self.inner.clone(),
        }
    }

    pub(crate) fn adoption(&self) -> cluster::Adoption {
        cluster::Adoption {
            inner: self.inner.clone(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The clock the pipeline reads and waits on.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// How many runs wait in this node's memory, and where.
    /// Read in the order runs move through: from a timer to a lane, each stage counts a run
    /// before the one it left lets go of it, so a run moving between two reads is seen.
    pub fn waiting(&self) -> Waiting {
        let timer = self.inner.fence_timer.len() + self.inner.timer.len();
        let released = self.inner.released.count();
        let queued = self.inner.metrics.queued();
        let records = self.inner.dispatch_records.len();
        Waiting {
            timer,
            held: self.inner.held.lock().expect("held lock").len(),
            queued: released + queued + records,
            records,
        }
    }

    /// Wakes the claim loop (a job was created, started or changed).
    pub(crate) fn wake_scheduler(&self) {
        self.inner.claim_wake.notify_one();
    }

    /// Forgets what is cached of a job (it changed or was deleted).
    pub(crate) fn forget_job(&self, job_id: i64) {
        self.inner.jobs.lock().expect("jobs lock").remove(job_id);
        self.inner
            .router
            .lock()
            .expect("router lock")
            .forget_job(job_id);
    }

    /// Puts a run into the timer (manual, API, retry and child runs).
    pub(crate) fn arm(&self, run: Run) {
        self.arm_all(vec![run], 0);
    }

    /// Puts runs into the timer; `grace_ms`: see [`Armed::grace_ms`]. A `planned` run meets
    /// the send fence [`FENCE_LEAD_MS`] before its instant, a `sending` one is sent at it.
    pub(crate) fn arm_all(&self, runs: Vec<Run>, grace_ms: i64) {
        let epoch = self.inner.membership.epoch();
        let (sending, planned): (Vec<Run>, Vec<Run>) =
            runs.into_iter().partition(|r| r.state == RunState::Sending);
        let armed = move |run: Run, lead: i64| {
            let at = run.scheduled_at - lead;
            let armed = Armed {
                run,
                epoch,
                grace_ms,
            };
            (at, armed)
        };
        if !planned.is_empty() {
            self.inner
                .fence_timer
                .schedule_all(planned.into_iter().map(|r| armed(r, FENCE_LEAD_MS)));
        }
        if !sending.is_empty() {
            self.inner
                .timer
                .schedule_all(sending.into_iter().map(|r| armed(r, 0)));
        }
    }

    /// Takes a run out of the flow; the claim loop gives it back once this node may fire
    /// again and still owns it.
    pub(crate) fn hold(&self, run: Run, why: &str) {
        debug!(run_id = run.id, job_id = run.job_id, why, "run held");
        self.inner.stats.runs_held.fetch_add(1, Ordering::Relaxed);
        self.inner.held.lock().expect("held lock").push(run);
    }
}

/// The service's handle on the pipeline.
#[async_trait::async_trait]
impl PipelineHandle for Scheduler {
    fn wake(&self) {
        self.wake_scheduler();
    }

    fn arm(&self, run: Run) {
        Scheduler::arm(self, run);
    }

    fn forget_job(&self, job_id: i64) {
        Scheduler::forget_job(self, job_id);
    }

    fn forget_group(&self, group_id: i64) {
        self.inner.addresses.forget(group_id);
    }

    async fn complete(&self, c: RunComplete) -> Result<Option<Run>, Error> {
        Scheduler::complete(self, c).await
    }

    fn lateness(&self) -> Option<LatenessView> {
        self.inner.metrics.lateness.summary().map(|s| LatenessView {
            count: s.count,
            mean_ms: s.mean_ms,
            p50_ms: s.p50_ms,
            p99_ms: s.p99_ms,
        })
    }
}
