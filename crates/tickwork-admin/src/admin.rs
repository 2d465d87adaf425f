//! The running admin: its shared state and the pipeline loops (claim -> timer -> dispatch ->
//! ledger), each stoppable through a cancellation token and observable through [`Stats`].
//!
//! Cluster membership (heartbeat, fence, adoption, lease) lives in `cluster`, the lease
//! holder's maintenance in `monitor`, the Prometheus rendering in `metrics`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tickwork_core::routing::Router;
use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::{RouteStrategy, ScheduleType, TriggerType};
use tickwork_store::{
    ClaimParams, Dispatched, Group, Job, JobNextFire, JobStatus, LiveQuery, OwnedRuns, Run,
    RunComplete, RunNew, RunShard, RunSkip, Store, TriggerFailed,
};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::Error;
use crate::auth::Auth;
use crate::cluster::{Membership, Origin};
use crate::config::Config;
use crate::dispatch::{DispatchOutcome, DispatchRequest, dispatch};
use crate::executor_client::ExecutorClient;
use crate::metrics::{DispatchCause, Metrics};
use crate::monitor::Monitor;
use crate::planner::{PlanLimits, WAITING_FOR_COMPLETION, plan_job};
use crate::timer::{Timer, now_ms};

/// How long a dispatch waits for a group's addresses it must read before it falls back on
/// the last known list (or, without one, holds the run).
const ADDRESS_REFRESH_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a stopping admin keeps trying to record what it dispatched before giving up.
const SHUTDOWN_WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// Counters of the pipeline, for metrics and for tests that wait on progress.
#[derive(Debug, Default)]
pub struct Stats {
    pub claim_rounds: AtomicU64,
    pub runs_claimed: AtomicU64,
    /// Runs recorded as misfired: at claim, and after adoption or a hold.
    pub runs_misfired: AtomicU64,
    pub dispatched: AtomicU64,
    /// Trigger failures, all causes; the `dispatch_*` counters split them.
    pub dispatch_failed: AtomicU64,
    pub dispatch_no_executor: AtomicU64,
    pub dispatch_refused: AtomicU64,
    pub dispatch_transport: AtomicU64,
    pub completed: AtomicU64,
    pub retries: AtomicU64,
    pub children: AtomicU64,
    /// Planned runs of dead or departed nodes this node took over.
    pub runs_adopted: AtomicU64,
    /// Runs held back instead of fired (fence closed, database unreachable).
    pub runs_held: AtomicU64,
    /// Held or adopted runs dropped at the ownership check: another node had them.
    pub runs_disowned: AtomicU64,
    /// Runs the lost-run monitor ended as `lost`.
    pub runs_lost: AtomicU64,
    /// Failed runs queued for an alarm.
    pub alarms_queued: AtomicU64,
    /// Alarm deliveries written (one per run and channel).
    pub alarm_deliveries_queued: AtomicU64,
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
}

/// A run waiting in the timer or a lane, with what the fence needs to know about it.
pub(crate) struct Armed {
    pub(crate) run: Run,
    /// The fence epoch when it was armed: a run armed before the fence last closed is checked
    /// against the database before it fires.
    pub(crate) epoch: u64,
    /// Check ownership before firing (adopted runs, runs re-armed after a restart).
    pub(crate) verify: bool,
}

/// A job as the pipeline uses it: the stored row and its parsed schedule.
pub(crate) struct CachedJob {
    pub(crate) job: Job,
    schedule: Option<Schedule>,
}

/// A group's live addresses, read at `at`, and the client that calls them with the group's
/// token.
pub(crate) struct CachedAddresses {
    app_name: String,
    addresses: Arc<Vec<String>>,
    client: ExecutorClient,
    at: Instant,
    /// Read again before the cache time is over (its executors changed).
    expired: bool,
    /// A background refresh of this expired entry is under way.
    refreshing: bool,
}

/// Per-job slow-dispatch accounting (XXL-JOB's fast/slow trigger pools).
#[derive(Default)]
struct SlowCount {
    minute: i64,
    count: u32,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) client: ExecutorClient,
    router: Mutex<Router>,
    pub(crate) timer: Timer<Armed>,
    jobs: Mutex<HashMap<i64, Arc<CachedJob>>>,
    pub(crate) groups: Mutex<HashMap<i64, CachedAddresses>>,
    slow: Mutex<HashMap<i64, SlowCount>>,
    claim_wake: Notify,
    /// Wakes the alarm delivery loop (deliveries were queued).
    pub(crate) alarm_wake: Notify,
    pub(crate) senders: crate::alarm::Senders,
    fast_lane: mpsc::UnboundedSender<Armed>,
    slow_lane: mpsc::UnboundedSender<Armed>,
    ledger: mpsc::UnboundedSender<(Run, DispatchOutcome)>,
    /// Runs taken out of the flow (fence closed, database unreachable); the claim loop checks
    /// their ownership and fires them again, under the misfire policy.
    pub(crate) held: Mutex<Vec<Run>>,
    pub(crate) membership: Membership,
    pub(crate) metrics: Metrics,
    /// Stops claiming, dispatching, adoption and the monitors.
    pub(crate) stop: CancellationToken,
    /// Stops the ledger, once nothing can be dispatched any more.
    ledger_stop: CancellationToken,
    /// Set at shutdown: ledger writes that still fail after this instant are given up.
    write_deadline: std::sync::OnceLock<Instant>,
    /// Stops the heartbeat, once the ledger has written everything.
    pub(crate) cluster_stop: CancellationToken,
    pub(crate) stats: Stats,
    pub(crate) auth: Arc<Auth>,
}

/// A handle to the running admin; cheap to clone.
#[derive(Clone)]
pub struct Admin {
    pub(crate) inner: Arc<Inner>,
}

/// The admin's background tasks; [`Running::shutdown`] stops them and waits.
pub struct Running {
    pub admin: Admin,
    /// The password generated for the first admin account when this start created it (and
    /// none was configured): the caller shows it once; it is stored only as a hash.
    pub generated_admin_password: Option<String>,
    pipeline: JoinSet<()>,
    ledger: JoinSet<()>,
    cluster: JoinSet<()>,
}

impl Running {
    /// Stops the admin cleanly and hands its work over: claiming and firing stop, dispatches
    /// in flight finish and are recorded, then the node gives up the maintenance lease and
    /// deletes its heartbeat row, so that the other nodes adopt its planned runs at once
    /// (a node that dies instead is adopted from after `node_dead_after`).
    pub async fn shutdown(mut self) {
        let inner = &self.admin.inner;
        inner.stop.cancel();
        while self.pipeline.join_next().await.is_some() {}
        // Nothing is dispatched any more: write every outcome still on its way.
        let _ = inner
            .write_deadline
            .set(Instant::now() + SHUTDOWN_WRITE_DEADLINE);
        inner.ledger_stop.cancel();
        while let Some(done) = self.ledger.join_next().await {
            if let Err(e) = done {
                error!(error = %e, "the ledger task failed");
            }
        }
        // The heartbeat ran until now so that no other node adopted what was in flight.
        inner.cluster_stop.cancel();
        while self.cluster.join_next().await.is_some() {}
        self.admin.leave_cluster().await;
    }
}

impl Admin {
    /// Starts the pipeline on `store`, after a first heartbeat. Runs this node planned before a
    /// restart go back into the timer (checked against the database before they fire, late
    /// ones under their misfire policy).
    pub async fn start(config: Config, store: Arc<dyn Store>) -> Result<Running, Error> {
        config.validate()?;
        let client = ExecutorClient::new(&config.access_token, config.dispatch.executor_timeout);
        let stop = CancellationToken::new();
        let (due_tx, due_rx) = mpsc::unbounded_channel();
        let timer = Timer::start(due_tx, stop.clone());
        let (fast_tx, fast_rx) = mpsc::unbounded_channel();
        let (slow_tx, slow_rx) = mpsc::unbounded_channel();
        let (ledger_tx, ledger_rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            router: Mutex::new(Router::new()),
            timer,
            jobs: Mutex::new(HashMap::new()),
            groups: Mutex::new(HashMap::new()),
            slow: Mutex::new(HashMap::new()),
            claim_wake: Notify::new(),
            alarm_wake: Notify::new(),
            senders: crate::alarm::Senders::new(),
            fast_lane: fast_tx,
            slow_lane: slow_tx,
            ledger: ledger_tx,
            held: Mutex::new(Vec::new()),
            membership: Membership::default(),
            metrics: Metrics::default(),
            stop,
            ledger_stop: CancellationToken::new(),
            write_deadline: std::sync::OnceLock::new(),
            cluster_stop: CancellationToken::new(),
            stats: Stats::default(),
            auth: Arc::new(Auth::new(
                store.clone(),
                config.auth.clone(),
                &config.api_token,
            )),
            client,
            store,
            config,
        });
        let admin = Admin { inner };
        // Before anything is served: there is never a moment without an admin account, and
        // never a default password.
        let generated_admin_password = admin.inner.auth.ensure_first_admin().await?;

        // The first heartbeat comes before the first claim: no run is ever owned by a node
        // that has no heartbeat row.
        admin.join_cluster().await?;
        let own = admin
            .inner
            .store
            .runs_planned_owned_by(&admin.inner.config.node_id)
            .await?;
        if !own.is_empty() {
            info!(runs = own.len(), "re-arming planned runs of this node");
            admin.take_over(own, Origin::Restart).await;
        }

        let mut pipeline = JoinSet::new();
        pipeline.spawn(admin.clone().claim_loop());
        pipeline.spawn(admin.clone().due_loop(due_rx));
        let fast = admin.inner.config.dispatch.concurrency;
        let slow = admin.inner.config.dispatch.slow_concurrency;
        pipeline.spawn(admin.clone().lane_loop(fast_rx, fast, 0));
        pipeline.spawn(admin.clone().lane_loop(slow_rx, slow, 1));
        pipeline.spawn(admin.clone().adoption_loop());
        for monitor in Monitor::ALL {
            pipeline.spawn(admin.clone().monitor_loop(monitor));
        }
        pipeline.spawn(admin.clone().alarm_loop());
        // Sets of tasks, so that dropping `Running` without a shutdown aborts them all.
        let mut ledger = JoinSet::new();
        ledger.spawn(admin.clone().ledger_loop(ledger_rx));
        let mut cluster = JoinSet::new();
        cluster.spawn(admin.clone().membership_loop());
        Ok(Running {
            admin,
            generated_admin_password,
            pipeline,
            ledger,
            cluster,
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Logins, sessions and API credentials.
    pub fn auth(&self) -> &Arc<Auth> {
        &self.inner.auth
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// Runs waiting in the timer.
    pub fn timer_len(&self) -> usize {
        self.inner.timer.len()
    }

    /// Runs held back (fence closed or database unreachable), waiting to be checked and fired.
    pub fn held_len(&self) -> usize {
        self.inner.held.lock().expect("held lock").len()
    }

    /// Wakes the claim loop (a job was created, started or changed).
    pub fn wake_scheduler(&self) {
        self.inner.claim_wake.notify_one();
    }

    /// Forgets what is cached of a job (it changed or was deleted).
    pub(crate) fn forget_job(&self, job_id: i64) {
        self.inner.jobs.lock().expect("jobs lock").remove(&job_id);
        self.inner
            .router
            .lock()
            .expect("router lock")
            .forget_job(job_id);
    }

    /// An executor of `app_name` beat: a group that does not list it yet reads the registry
    /// again (in the background), so a new executor is routable at once. A beat of a known
    /// executor changes nothing, and above all does not empty the cache: dispatch would then
    /// wait for the database at every beat.
    pub(crate) fn executor_seen(&self, app_name: &str, address: &str) {
        let mut groups = self.inner.groups.lock().expect("groups lock");
        for g in groups.values_mut() {
            if g.app_name == app_name && !g.addresses.iter().any(|a| a == address) {
                g.expired = true;
            }
        }
    }

    /// An executor of `app_name` deregistered: it leaves every cached list at once, so no run
    /// goes to it from now on; the lists are then read again in the background.
    pub(crate) fn executor_gone(&self, app_name: &str, address: &str) {
        let mut groups = self.inner.groups.lock().expect("groups lock");
        for g in groups.values_mut() {
            if g.app_name == app_name {
                let kept: Vec<String> = g
                    .addresses
                    .iter()
                    .filter(|a| *a != address)
                    .cloned()
                    .collect();
                g.addresses = Arc::new(kept);
                g.expired = true;
            }
        }
    }

    /// Forgets the cached address list of one group.
    pub(crate) fn forget_group(&self, group_id: i64) {
        self.inner
            .groups
            .lock()
            .expect("groups lock")
            .remove(&group_id);
    }

    /// The client that calls `group`'s executors: with the group's own token, or the global
    /// one when it has none.
    pub(crate) fn client_for(&self, group: &Group) -> ExecutorClient {
        match &group.access_token {
            Some(token) => self.inner.client.with_token(token),
            None => self.inner.client.clone(),
        }
    }

    /// Puts a run into the timer (manual, API, retry and child runs).
    pub(crate) fn arm(&self, run: Run) {
        self.arm_all(vec![run], false);
    }

    /// Puts runs into the timer; `verify`: check in the database that they are still this
    /// node's before firing them.
    pub(crate) fn arm_all(&self, runs: Vec<Run>, verify: bool) {
        let epoch = self.inner.membership.epoch();
        self.inner.timer.schedule_all(
            runs.into_iter()
                .map(|run| (run.scheduled_at, Armed { run, epoch, verify })),
        );
    }

    /// Takes a run out of the flow; the claim loop gives it back once this node may fire
    /// again and still owns it.
    pub(crate) fn hold(&self, run: Run, why: &str) {
        debug!(run_id = run.id, job_id = run.job_id, why, "run held");
        self.inner.stats.runs_held.fetch_add(1, Ordering::Relaxed);
        self.inner.held.lock().expect("held lock").push(run);
    }

    // ---- claim ----

    async fn claim_loop(self) {
        let inner = &self.inner;
        let s = &inner.config.scheduler;
        let limits = PlanLimits {
            lookahead_ms: s.lookahead.as_millis() as i64,
            misfire_threshold_ms: s.misfire_threshold.as_millis() as i64,
            max_fires_per_job: s.max_fires_per_job,
        };
        // Successful claim rounds in a row: held runs go back once two rounds passed, so that
        // the late fires of every due job were planned (and their catch-ups written) first.
        let mut ok_rounds = 0u32;
        loop {
            if inner.stop.is_cancelled() {
                return;
            }
            let now = now_ms();
            if !inner.membership.fence_open(now, &inner.config) {
                // Others may soon count this node as dead: claim nothing they would adopt.
                ok_rounds = 0;
                tokio::select! {
                    _ = inner.stop.cancelled() => return,
                    _ = tokio::time::sleep(s.claim_interval) => {}
                }
                continue;
            }
            let params = ClaimParams {
                node_id: inner.config.node_id.clone(),
                now,
                lookahead_ms: limits.lookahead_ms,
                limit: s.claim_limit,
            };
            let planner = |job: &Job, now: i64| {
                let cached = self.cache_job(job.clone());
                plan_job(job, cached.schedule.as_ref(), now, limits)
            };
            let more = match inner.store.jobs_claim_due(params, &planner).await {
                Ok(result) => {
                    inner.stats.claim_rounds.fetch_add(1, Ordering::Relaxed);
                    inner
                        .stats
                        .runs_claimed
                        .fetch_add(result.runs.len() as u64, Ordering::Relaxed);
                    inner
                        .stats
                        .runs_misfired
                        .fetch_add(result.misfired as u64, Ordering::Relaxed);
                    if result.duplicates > 0 {
                        warn!(
                            duplicates = result.duplicates,
                            "claim met fires the ledger already held"
                        );
                    }
                    let full = result.jobs >= s.claim_limit as usize;
                    self.arm_all(result.runs, false);
                    ok_rounds = ok_rounds.saturating_add(1);
                    full
                }
                Err(e) => {
                    // The database may be down: keep the loop alive, try again shortly.
                    warn!(error = %e, "claim failed");
                    ok_rounds = 0;
                    false
                }
            };
            if more {
                continue;
            }
            if ok_rounds >= 2 {
                self.resume_held().await;
            }
            // A random pause between half and all of the interval: admins that started
            // together would otherwise keep the same phase, and the one whose claim always
            // comes first after a fire instant enters the window would take every job.
            let pause = s.claim_interval.mul_f64(0.5 + fastrand::f64() / 2.0);
            tokio::select! {
                _ = inner.stop.cancelled() => return,
                _ = inner.claim_wake.notified() => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Caches `job` with its parsed schedule, reusing the parse while the job is unchanged.
    fn cache_job(&self, job: Job) -> Arc<CachedJob> {
        let mut jobs = self.inner.jobs.lock().expect("jobs lock");
        if let Some(c) = jobs.get(&job.id)
            && c.job.version == job.version
        {
            return c.clone();
        }
        let schedule = match Schedule::parse(
            job.spec.schedule_type,
            &job.spec.schedule_conf,
            &job.spec.time_zone,
        ) {
            Ok(s) => Some(s),
            Err(e) => {
                warn!(job_id = job.id, error = %e, "job schedule no longer parses; stopping it");
                None
            }
        };
        let cached = Arc::new(CachedJob { job, schedule });
        jobs.insert(cached.job.id, cached.clone());
        cached
    }

    pub(crate) async fn job(&self, job_id: i64) -> Result<Arc<CachedJob>, Error> {
        if let Some(c) = self.inner.jobs.lock().expect("jobs lock").get(&job_id) {
            return Ok(c.clone());
        }
        let job = self.inner.store.job_get(job_id).await?;
        Ok(self.cache_job(job))
    }

    // ---- dispatch ----

    /// Sorts each batch of due runs by priority and sends it to its lane. Runs that must be
    /// checked first (adopted, armed before the fence last closed) are checked in one query.
    async fn due_loop(self, mut due: mpsc::UnboundedReceiver<Vec<(i64, Armed)>>) {
        while let Some(mut batch) = due.recv().await {
            // Higher priority first when several runs are due at once; fire order otherwise.
            batch.sort_by_key(|(at, a)| (std::cmp::Reverse(a.run.priority), *at));
            let now = now_ms();
            let epoch = self.inner.membership.epoch();
            let mut check = Vec::new();
            for (_, armed) in batch {
                if !self.inner.membership.fence_open(now, &self.inner.config) {
                    self.hold(armed.run, "heartbeat too old");
                } else if armed.verify || armed.epoch != epoch {
                    check.push(armed.run);
                } else {
                    self.to_lane(armed);
                }
            }
            if !check.is_empty() {
                self.check_and_send(check, epoch).await;
            }
        }
    }

    fn to_lane(&self, armed: Armed) {
        let (lane, index) = if self.is_slow(armed.run.job_id) {
            (&self.inner.slow_lane, 1)
        } else {
            (&self.inner.fast_lane, 0)
        };
        self.inner.metrics.lane_sent(index);
        if lane.send(armed).is_err() {
            // The lane stopped: the admin is shutting down and the run stays planned.
            self.inner.metrics.lane_received(index);
        }
    }

    /// Fires the runs of `runs` this node still owns; drops the others (another node took
    /// them), holds all of them when the database cannot say.
    async fn check_and_send(&self, runs: Vec<Run>, epoch: u64) {
        let query = OwnedRuns {
            node_id: self.inner.config.node_id.clone(),
            run_ids: runs.iter().map(|r| r.id).collect(),
        };
        match self.inner.store.runs_still_owned(query).await {
            Ok(owned) => {
                for run in runs {
                    if owned.binary_search(&run.id).is_ok() {
                        self.to_lane(Armed {
                            run,
                            epoch,
                            verify: false,
                        });
                    } else {
                        debug!(run_id = run.id, "run no longer this node's: not fired");
                        self.inner
                            .stats
                            .runs_disowned
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, runs = runs.len(), "ownership check failed; runs held");
                for run in runs {
                    self.hold(run, "ownership check failed");
                }
            }
        }
    }

    fn is_slow(&self, job_id: i64) -> bool {
        let minute = now_ms() / 60_000;
        let slow = self.inner.slow.lock().expect("slow lock");
        slow.get(&job_id).is_some_and(|c| {
            c.minute == minute && c.count > self.inner.config.dispatch.slow_calls_per_minute
        })
    }

    fn count_slow(&self, job_id: i64, took: Duration) {
        if took < self.inner.config.dispatch.slow_call {
            return;
        }
        let minute = now_ms() / 60_000;
        let mut slow = self.inner.slow.lock().expect("slow lock");
        slow.retain(|_, c| c.minute >= minute - 1);
        let c = slow.entry(job_id).or_default();
        if c.minute != minute {
            *c = SlowCount { minute, count: 0 };
        }
        c.count += 1;
    }

    /// Dispatches runs of one lane, at most `concurrency` at once.
    async fn lane_loop(
        self,
        mut lane: mpsc::UnboundedReceiver<Armed>,
        concurrency: usize,
        index: usize,
    ) {
        let permits = Arc::new(Semaphore::new(concurrency));
        let mut running = JoinSet::new();
        loop {
            let run = tokio::select! {
                _ = self.inner.stop.cancelled() => break,
                run = lane.recv() => match run { Some(r) => r, None => break },
            };
            self.inner.metrics.lane_received(index);
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let admin = self.clone();
            running.spawn(async move {
                admin.dispatch_run(run).await;
                drop(permit);
            });
            // Reap finished tasks so the set does not grow.
            while running.try_join_next().is_some() {}
        }
        while running.join_next().await.is_some() {}
    }

    async fn dispatch_run(&self, armed: Armed) {
        let Armed { run, epoch, .. } = armed;
        let cached = match self.job(run.job_id).await {
            Ok(c) => c,
            // The job was deleted, and its runs with it.
            Err(Error::NotFound(_)) => {
                debug!(
                    run_id = run.id,
                    job_id = run.job_id,
                    "run of a deleted job dropped"
                );
                return;
            }
            Err(e) => {
                // Not the run's fault: the database is unreachable. Try again later.
                warn!(run_id = run.id, job_id = run.job_id, error = %e, "job not loaded; run held");
                self.hold(run, "job not loaded");
                return;
            }
        };
        // Only a stop that came after the claim skips the run: the claim itself stops a job
        // whose last fire it planned (ONCE, a cron with an end), and that fire must run. A
        // claim leaves `updated_at` alone; a stop sets it.
        if cached.job.status == JobStatus::Stopped
            && run.fire_key.is_some()
            && cached.job.updated_at > run.created_at
        {
            let skip = RunSkip {
                run_id: run.id,
                reason: "job stopped before the run was due".to_owned(),
                at: now_ms(),
            };
            if let Err(e) = self.inner.store.run_skip(skip).await {
                warn!(run_id = run.id, error = %e, "skipping a run of a stopped job failed");
                self.hold(run, "skip not recorded");
            }
            return;
        }
        let (candidates, client) = match self.executors(cached.job.spec.group_id).await {
            Ok(a) => a,
            Err(Error::NotFound(m)) => {
                let outcome = DispatchOutcome {
                    run_id: run.id,
                    address: None,
                    trigger_code: tickwork_protocol::CODE_FAIL,
                    trigger_msg: format!("executor group cannot be loaded: {m}"),
                };
                self.to_ledger(run, outcome);
                return;
            }
            Err(e) => {
                warn!(run_id = run.id, error = %e, "executor addresses not loaded; run held");
                self.hold(run, "addresses not loaded");
                return;
            }
        };
        // The last moment before `/run`: a node whose heartbeat is too old, or whose fence
        // closed since the run was armed, may have lost the run to another node.
        if !self
            .inner
            .membership
            .fence_open(now_ms(), &self.inner.config)
            || epoch != self.inner.membership.epoch()
        {
            self.hold(run, "fence closed before dispatch");
            return;
        }
        let outcome = self
            .route_and_call(&run, &cached, &candidates, &client)
            .await;
        self.to_ledger(run, outcome);
    }

    fn to_ledger(&self, run: Run, outcome: DispatchOutcome) {
        self.inner.metrics.ledger_sent();
        if self.inner.ledger.send((run, outcome)).is_err() {
            self.inner.metrics.ledger_received(1);
        }
    }

    async fn route_and_call(
        &self,
        run: &Run,
        cached: &CachedJob,
        candidates: &Arc<Vec<String>>,
        client: &ExecutorClient,
    ) -> DispatchOutcome {
        let refused = |msg: String| DispatchOutcome {
            run_id: run.id,
            address: None,
            trigger_code: tickwork_protocol::CODE_FAIL,
            trigger_msg: msg,
        };
        let spec = &cached.job.spec;
        let mut req = DispatchRequest {
            run_id: run.id,
            job_id: run.job_id,
            scheduled_at: run.scheduled_at,
            route: spec.route_strategy,
            address: run.executor_address.clone(),
            handler: spec.handler.clone(),
            params: run.params.clone(),
            block_strategy: spec.block_strategy.as_str().to_owned(),
            timeout_s: spec.timeout_s,
            glue_type: spec.glue_type,
            glue_source: spec.glue_source.clone(),
            glue_updated_at: cached.job.glue_updated_at,
            shard_index: run.shard_index.unwrap_or(0),
            shard_total: run.shard_total.unwrap_or(1),
        };
        if spec.route_strategy == RouteStrategy::ShardingBroadcast && run.shard_total.is_none() {
            if candidates.is_empty() {
                return refused(tickwork_core::Error::NoExecutor.to_string());
            }
            // One run per executor: this run is shard 0; the others become runs of their own.
            let total = candidates.len() as i32;
            // Recorded first, so that a retry of this run stays shard 0 instead of broadcasting
            // again.
            let shard = RunShard {
                run_id: run.id,
                index: 0,
                total,
            };
            if let Err(e) = self.inner.store.run_set_shard(shard).await {
                return refused(format!("broadcast shard not recorded: {e}"));
            }
            for (i, address) in candidates.iter().enumerate().skip(1) {
                let mut new = RunNew::new(run.job_id, run.trigger_type, run.scheduled_at);
                new.params = Some(run.params.clone());
                new.executor_address = Some(address.clone());
                new.shard_index = Some(i as i32);
                new.shard_total = Some(total);
                new.owner_node = Some(self.inner.config.node_id.clone());
                new.parent_run_id = run.parent_run_id;
                new.attempt = run.attempt;
                match self.inner.store.run_insert(new).await {
                    Ok(shard) => self.arm(shard),
                    Err(e) => {
                        warn!(run_id = run.id, shard = i, error = %e, "broadcast shard not written")
                    }
                }
            }
            req.address = Some(candidates[0].clone());
            req.shard_index = 0;
            req.shard_total = total;
        }
        let started = Instant::now();
        let now = now_ms();
        self.inner
            .metrics
            .lateness
            .observe_ms(now.saturating_sub(run.scheduled_at));
        let outcome = dispatch(client, &self.inner.router, &req, candidates, now).await;
        self.count_slow(run.job_id, started.elapsed());
        outcome
    }

    /// The live addresses of a group: its manual list, or the registry's live executors of
    /// its app name (sorted ascending, as XXL-JOB does). An entry older than the cache time
    /// is still used while a background task reads the new list: dispatch never waits for
    /// the database unless the group was never read (or its executors just changed).
    pub(crate) async fn addresses(&self, group_id: i64) -> Result<Arc<Vec<String>>, Error> {
        Ok(self.executors(group_id).await?.0)
    }

    /// A group's live addresses (as [`Admin::addresses`]) and the client that calls them
    /// with the group's token.
    pub(crate) async fn executors(
        &self,
        group_id: i64,
    ) -> Result<(Arc<Vec<String>>, ExecutorClient), Error> {
        let ttl = self.inner.config.registry.address_cache;
        // The list to fall back on when a read that must be waited for fails.
        let fallback = {
            let mut groups = self.inner.groups.lock().expect("groups lock");
            match groups.get_mut(&group_id) {
                Some(c) if !c.expired && c.at.elapsed() < ttl => {
                    return Ok((c.addresses.clone(), c.client.clone()));
                }
                // Its executors changed: read now.
                Some(c) if c.expired => Some((c.addresses.clone(), c.client.clone())),
                // Merely old: keep using it while a background task reads the new list.
                Some(c) => {
                    if !c.refreshing {
                        c.refreshing = true;
                        let admin = self.clone();
                        tokio::spawn(async move { admin.refresh_addresses(group_id).await });
                    }
                    return Ok((c.addresses.clone(), c.client.clone()));
                }
                None => None,
            }
        };
        // A database that hangs must not stall dispatch for long.
        let read = match tokio::time::timeout(
            ADDRESS_REFRESH_TIMEOUT,
            self.load_addresses(group_id),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(Error::Unavailable(
                "the registry did not answer in time".to_owned(),
            )),
        };
        match (read, fallback) {
            (Ok(addresses), _) => Ok(addresses),
            (Err(e @ (Error::Store(_) | Error::Unavailable(_))), Some(last)) => {
                debug!(group_id, error = %e, "registry unreachable; using the last known addresses");
                Ok(last)
            }
            (Err(e), _) => Err(e),
        }
    }

    async fn refresh_addresses(&self, group_id: i64) {
        if let Err(e) = self.load_addresses(group_id).await {
            debug!(group_id, error = %e, "address refresh failed; the last list stays");
            if let Some(c) = self
                .inner
                .groups
                .lock()
                .expect("groups lock")
                .get_mut(&group_id)
            {
                c.refreshing = false;
            }
        }
    }

    /// Reads a group's addresses from the database into the cache.
    async fn load_addresses(
        &self,
        group_id: i64,
    ) -> Result<(Arc<Vec<String>>, ExecutorClient), Error> {
        let group: Group = self.inner.store.group_get(group_id).await?;
        let addresses = if group.address_mode == tickwork_store::AddressMode::Manual {
            group.addresses.clone()
        } else {
            let dead_after = self.inner.config.registry.dead_after.as_millis() as i64;
            self.inner
                .store
                .registry_live(LiveQuery {
                    app_name: group.app_name.clone(),
                    alive_since: now_ms() - dead_after,
                })
                .await?
        };
        let addresses = Arc::new(addresses);
        let client = self.client_for(&group);
        self.inner.groups.lock().expect("groups lock").insert(
            group_id,
            CachedAddresses {
                app_name: group.app_name,
                addresses: addresses.clone(),
                client: client.clone(),
                at: Instant::now(),
                expired: false,
                refreshing: false,
            },
        );
        Ok((addresses, client))
    }

    // ---- ledger ----

    /// Writes dispatch outcomes in batches: one transaction for many accepted runs. A write
    /// that fails is tried again until the database answers: the executor runs these, and a
    /// run left `planned` would be fired again by whoever adopts it.
    async fn ledger_loop(self, mut outcomes: mpsc::UnboundedReceiver<(Run, DispatchOutcome)>) {
        const BATCH: usize = 1000;
        let mut buf = Vec::with_capacity(BATCH);
        loop {
            let n = tokio::select! {
                biased;
                n = outcomes.recv_many(&mut buf, BATCH) => n,
                _ = self.inner.ledger_stop.cancelled() => {
                    while let Ok(item) = outcomes.try_recv() {
                        buf.push(item);
                    }
                    buf.len()
                }
            };
            if n == 0 {
                return;
            }
            self.inner.metrics.ledger_received(n);
            self.write_outcomes(&mut buf).await;
            if self.inner.ledger_stop.is_cancelled() && outcomes.is_empty() {
                return;
            }
        }
    }

    async fn write_outcomes(&self, buf: &mut Vec<(Run, DispatchOutcome)>) {
        let at = now_ms();
        let mut accepted = Vec::with_capacity(buf.len());
        let mut refused = Vec::new();
        for (run, out) in buf.drain(..) {
            if out.accepted() {
                accepted.push(Dispatched {
                    run_id: out.run_id,
                    address: out.address.unwrap_or_default(),
                    trigger_code: out.trigger_code,
                    trigger_msg: Some(out.trigger_msg),
                    at,
                });
            } else {
                refused.push((run, out));
            }
        }
        if !accepted.is_empty() {
            let n = accepted.len() as u64;
            let written = self
                .persist("recording dispatched runs", || {
                    self.inner.store.runs_mark_dispatched(&accepted)
                })
                .await;
            if written.is_some() {
                self.inner.stats.dispatched.fetch_add(n, Ordering::Relaxed);
            } else {
                error!(
                    runs = n,
                    "dispatched runs not recorded; another node may fire them again"
                );
            }
        }
        for (run, out) in refused {
            let cause = DispatchCause::of(&out);
            self.inner
                .stats
                .dispatch_failed
                .fetch_add(1, Ordering::Relaxed);
            let counter = match cause {
                DispatchCause::NoExecutor => &self.inner.stats.dispatch_no_executor,
                DispatchCause::Refused => &self.inner.stats.dispatch_refused,
                DispatchCause::Transport => &self.inner.stats.dispatch_transport,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            warn!(
                run_id = run.id,
                job_id = run.job_id,
                cause = cause.as_str(),
                msg = %out.trigger_msg,
                "trigger failed"
            );
            let failed = TriggerFailed {
                run_id: run.id,
                address: out.address,
                trigger_code: out.trigger_code,
                trigger_msg: out.trigger_msg,
                at,
            };
            let done = self
                .persist("recording a trigger failure", || {
                    self.inner.store.run_mark_trigger_failed(failed.clone())
                })
                .await;
            if let Some(Some(run)) = done {
                self.after_complete(&run).await;
            }
        }
    }

    /// Runs a ledger write until it succeeds. Gives up (`None`) when the store refuses the
    /// input, or when the admin is stopping and the database stayed unreachable for
    /// [`SHUTDOWN_WRITE_DEADLINE`].
    async fn persist<T, F, Fut>(&self, what: &str, mut write: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, tickwork_store::Error>>,
    {
        let mut tries: u64 = 0;
        loop {
            match write().await {
                Ok(v) => return Some(v),
                // Only the database failing is worth waiting for; bad input stays bad.
                Err(
                    e
                    @ (tickwork_store::Error::Invalid(_) | tickwork_store::Error::NotFound { .. }),
                ) => {
                    error!(error = %e, "{what} refused");
                    return None;
                }
                Err(e) => {
                    tries += 1;
                    warn!(error = %e, tries, "{what} failed");
                    if self
                        .inner
                        .write_deadline
                        .get()
                        .is_some_and(|d| Instant::now() >= *d)
                    {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(200 * tries.min(25))).await;
                }
            }
        }
    }

    // ---- completion ----

    /// Records a run's result (callback, kill, lost-run monitor). `None` when the run was
    /// unknown or already final: a repeated callback changes nothing.
    pub async fn complete(&self, c: RunComplete) -> Result<Option<Run>, Error> {
        let done = self.inner.store.run_complete(c).await?;
        if let Some(run) = &done {
            self.inner.stats.completed.fetch_add(1, Ordering::Relaxed);
            self.after_complete(run).await;
        }
        Ok(done)
    }

    /// Records many results in one transaction; returns how many runs reached their final
    /// state now.
    pub async fn complete_many(&self, batch: &[RunComplete]) -> Result<usize, Error> {
        let done = self.inner.store.runs_complete(batch).await?;
        self.inner
            .stats
            .completed
            .fetch_add(done.len() as u64, Ordering::Relaxed);
        for run in &done {
            self.after_complete(run).await;
        }
        Ok(done.len())
    }

    /// What follows a final state: child jobs on success, a retry on failure, the next fire
    /// of a fixed-delay job.
    async fn after_complete(&self, run: &Run) {
        let cached = match self.job(run.job_id).await {
            Ok(c) => c,
            Err(_) => return, // the job was deleted meanwhile: nothing follows
        };
        let spec = &cached.job.spec;
        let now = now_ms();
        match run.state {
            RunState::Succeeded => {
                for &child in &spec.child_job_ids {
                    if child == run.job_id {
                        continue;
                    }
                    let mut new = RunNew::new(child, TriggerType::Parent, now);
                    new.parent_run_id = Some(run.id);
                    new.owner_node = Some(self.inner.config.node_id.clone());
                    match self.insert_with_retries(new).await {
                        Ok(r) => {
                            self.inner.stats.children.fetch_add(1, Ordering::Relaxed);
                            self.arm(r)
                        }
                        Err(e) => warn!(run_id = run.id, child, error = %e, "child job not fired"),
                    }
                }
            }
            RunState::Failed | RunState::TimedOut | RunState::Lost
                if run.attempt < spec.retry_count =>
            {
                let delay = retry_delay_ms(spec.retry_backoff_ms, run.attempt);
                let mut new = RunNew::new(run.job_id, TriggerType::Retry, now + delay);
                new.attempt = run.attempt + 1;
                new.parent_run_id = Some(run.id);
                new.params = Some(run.params.clone());
                new.shard_index = run.shard_index;
                new.shard_total = run.shard_total;
                new.executor_address = run.shard_total.and(run.executor_address.clone());
                new.owner_node = Some(self.inner.config.node_id.clone());
                match self.insert_with_retries(new).await {
                    Ok(r) => {
                        debug!(run_id = run.id, retry = r.id, delay, "retry planned");
                        self.inner.stats.retries.fetch_add(1, Ordering::Relaxed);
                        self.arm(r)
                    }
                    Err(e) => warn!(run_id = run.id, error = %e, "retry not planned"),
                }
            }
            _ => {}
        }
        if spec.schedule_type == ScheduleType::FixDelay && is_scheduled(run.trigger_type) {
            self.advance_fixed_delay(run.job_id, cached.schedule.as_ref(), now)
                .await;
        }
    }

    /// Writes a follow-up run (retry, child), trying a few times over a second or two: the
    /// run that asked for it is already final, so this is the only chance.
    async fn insert_with_retries(&self, new: RunNew) -> Result<Run, Error> {
        let mut tries = 0;
        loop {
            match self.inner.store.run_insert(new.clone()).await {
                Err(tickwork_store::Error::Database(e)) if tries < 3 => {
                    tries += 1;
                    debug!(error = %e, tries, "run insert failed, trying again");
                    tokio::time::sleep(Duration::from_millis(100 << (2 * tries))).await;
                }
                other => return Ok(other?),
            }
        }
    }

    /// Sets the next fire of a fixed-delay job whose run just ended. The cache holds the job
    /// as it was claimed, so the stored row decides whether it still waits for this run.
    async fn advance_fixed_delay(&self, job_id: i64, schedule: Option<&Schedule>, now: i64) {
        let Some(schedule) = schedule else { return };
        match self.inner.store.job_get(job_id).await {
            Ok(job) if job.next_fire_at == Some(WAITING_FOR_COMPLETION) => {}
            Ok(_) => return,
            Err(e) => {
                warn!(job_id, error = %e, "fixed-delay job not advanced");
                return;
            }
        }
        let next = JobNextFire {
            id: job_id,
            next_fire_at: schedule.next_after(now),
        };
        if let Err(e) = self.inner.store.job_set_next_fire(next).await {
            warn!(job_id, error = %e, "fixed-delay job not advanced");
        }
        self.forget_job(job_id);
        self.wake_scheduler();
    }
}

/// Whether a run comes from the job's own schedule (so its completion moves the schedule on).
fn is_scheduled(t: TriggerType) -> bool {
    matches!(t, TriggerType::FixDelay | TriggerType::Misfire)
}

/// The pause before retry `attempt + 1`: the backoff doubled per attempt, at most one hour.
pub fn retry_delay_ms(backoff_ms: i64, attempt: i32) -> i64 {
    let factor = 1i64 << attempt.clamp(0, 20);
    backoff_ms.max(0).saturating_mul(factor).min(3_600_000)
}

#[cfg(test)]
mod tests {
    use super::retry_delay_ms;

    #[test]
    fn retry_backoff_doubles_and_is_capped() {
        assert_eq!(retry_delay_ms(0, 0), 0);
        assert_eq!(retry_delay_ms(1000, 0), 1000);
        assert_eq!(retry_delay_ms(1000, 1), 2000);
        assert_eq!(retry_delay_ms(1000, 3), 8000);
        assert_eq!(retry_delay_ms(1000, 40), 3_600_000);
        assert_eq!(retry_delay_ms(-5, 2), 0);
    }
}
