//! The running admin: its shared state and the pipeline loops (claim -> timer -> dispatch ->
//! ledger), each stoppable through one cancellation token and observable through [`Stats`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tickwork_core::routing::Router;
use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::{RouteStrategy, ScheduleType, TriggerType};
use tickwork_store::{
    ClaimParams, Dispatched, Group, Job, JobNextFire, JobStatus, LiveQuery, Run, RunComplete,
    RunNew, RunShard, RunSkip, Store, TriggerFailed,
};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::Error;
use crate::config::Config;
use crate::dispatch::{DispatchOutcome, DispatchRequest, dispatch};
use crate::executor_client::ExecutorClient;
use crate::planner::{PlanLimits, WAITING_FOR_COMPLETION, plan_job};
use crate::timer::{Timer, now_ms};

/// Counters of the pipeline, for metrics and for tests that wait on progress.
#[derive(Debug, Default)]
pub struct Stats {
    pub claim_rounds: AtomicU64,
    pub runs_claimed: AtomicU64,
    pub runs_misfired: AtomicU64,
    pub dispatched: AtomicU64,
    pub dispatch_failed: AtomicU64,
    pub completed: AtomicU64,
    pub retries: AtomicU64,
    pub children: AtomicU64,
}

/// A job as the pipeline uses it: the stored row and its parsed schedule.
struct CachedJob {
    job: Job,
    schedule: Option<Schedule>,
}

/// A group's live addresses, read at `at`.
struct CachedAddresses {
    app_name: String,
    addresses: Arc<Vec<String>>,
    at: Instant,
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
    timer: Timer<Run>,
    jobs: Mutex<HashMap<i64, Arc<CachedJob>>>,
    groups: Mutex<HashMap<i64, CachedAddresses>>,
    slow: Mutex<HashMap<i64, SlowCount>>,
    claim_wake: Notify,
    fast_lane: mpsc::UnboundedSender<Run>,
    slow_lane: mpsc::UnboundedSender<Run>,
    ledger: mpsc::UnboundedSender<(Run, DispatchOutcome)>,
    pub(crate) stop: CancellationToken,
    pub(crate) stats: Stats,
}

/// A handle to the running admin; cheap to clone.
#[derive(Clone)]
pub struct Admin {
    pub(crate) inner: Arc<Inner>,
}

/// The admin's background tasks; [`Running::shutdown`] stops them and waits.
pub struct Running {
    pub admin: Admin,
    tasks: JoinSet<()>,
}

impl Running {
    /// Stops every loop and waits for them. Runs still in the timer stay `planned` with this
    /// node as owner; a restart of the node (or a surviving node) fires them.
    pub async fn shutdown(mut self) {
        self.admin.inner.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

impl Admin {
    /// Starts the pipeline on `store`. Runs this node planned before a restart are put back
    /// into the timer.
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
            fast_lane: fast_tx,
            slow_lane: slow_tx,
            ledger: ledger_tx,
            stop,
            stats: Stats::default(),
            client,
            store,
            config,
        });
        let admin = Admin { inner };

        let own = admin
            .inner
            .store
            .runs_planned_owned_by(&admin.inner.config.node_id)
            .await?;
        if !own.is_empty() {
            info!(runs = own.len(), "re-arming planned runs of this node");
            admin
                .inner
                .timer
                .schedule_all(own.into_iter().map(|r| (r.scheduled_at, r)));
        }

        let mut tasks = JoinSet::new();
        tasks.spawn(admin.clone().claim_loop());
        tasks.spawn(admin.clone().due_loop(due_rx));
        let fast = admin.inner.config.dispatch.concurrency;
        let slow = admin.inner.config.dispatch.slow_concurrency;
        tasks.spawn(admin.clone().lane_loop(fast_rx, fast));
        tasks.spawn(admin.clone().lane_loop(slow_rx, slow));
        tasks.spawn(admin.clone().ledger_loop(ledger_rx));
        tasks.spawn(admin.clone().registry_sweep_loop());
        Ok(Running { admin, tasks })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// Runs waiting in the timer.
    pub fn timer_len(&self) -> usize {
        self.inner.timer.len()
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

    /// Forgets the cached address lists of every group of `app_name` (an executor came or
    /// went), so the next dispatch reads the registry again.
    pub(crate) fn forget_addresses_of(&self, app_name: &str) {
        self.inner
            .groups
            .lock()
            .expect("groups lock")
            .retain(|_, g| g.app_name != app_name);
    }

    /// Forgets the cached address list of one group.
    pub(crate) fn forget_group(&self, group_id: i64) {
        self.inner
            .groups
            .lock()
            .expect("groups lock")
            .remove(&group_id);
    }

    /// Puts a run into the timer (manual, API, retry and child runs).
    pub(crate) fn arm(&self, run: Run) {
        self.inner.timer.schedule(run.scheduled_at, run);
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
        loop {
            if inner.stop.is_cancelled() {
                return;
            }
            let now = now_ms();
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
                    inner
                        .timer
                        .schedule_all(result.runs.into_iter().map(|r| (r.scheduled_at, r)));
                    full
                }
                Err(e) => {
                    // The database may be down: keep the loop alive, try again shortly.
                    warn!(error = %e, "claim failed");
                    false
                }
            };
            if more {
                continue;
            }
            tokio::select! {
                _ = inner.stop.cancelled() => return,
                _ = inner.claim_wake.notified() => {}
                _ = tokio::time::sleep(s.claim_interval) => {}
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

    async fn job(&self, job_id: i64) -> Result<Arc<CachedJob>, Error> {
        if let Some(c) = self.inner.jobs.lock().expect("jobs lock").get(&job_id) {
            return Ok(c.clone());
        }
        let job = self.inner.store.job_get(job_id).await?;
        Ok(self.cache_job(job))
    }

    // ---- dispatch ----

    /// Sorts each batch of due runs by priority and sends it to its lane.
    async fn due_loop(self, mut due: mpsc::UnboundedReceiver<Vec<(i64, Run)>>) {
        while let Some(mut batch) = due.recv().await {
            // Higher priority first when several runs are due at once; fire order otherwise.
            batch.sort_by_key(|(at, r)| (std::cmp::Reverse(r.priority), *at));
            for (_, run) in batch {
                let lane = if self.is_slow(run.job_id) {
                    &self.inner.slow_lane
                } else {
                    &self.inner.fast_lane
                };
                let _ = lane.send(run);
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
    async fn lane_loop(self, mut lane: mpsc::UnboundedReceiver<Run>, concurrency: usize) {
        let permits = Arc::new(Semaphore::new(concurrency));
        let mut running = JoinSet::new();
        loop {
            let run = tokio::select! {
                _ = self.inner.stop.cancelled() => break,
                run = lane.recv() => match run { Some(r) => r, None => break },
            };
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

    async fn dispatch_run(&self, run: Run) {
        match self.job(run.job_id).await {
            // The job was deleted, and its runs with it.
            Err(Error::NotFound(_)) => {
                debug!(
                    run_id = run.id,
                    job_id = run.job_id,
                    "run of a deleted job dropped"
                );
                return;
            }
            // Only a stop that came after the claim skips the run: the claim itself stops a
            // job whose last fire it planned (ONCE, a cron with an end), and that fire must
            // run. A claim leaves `updated_at` alone; a stop sets it.
            Ok(c)
                if c.job.status == JobStatus::Stopped
                    && run.fire_key.is_some()
                    && c.job.updated_at > run.created_at =>
            {
                let skip = RunSkip {
                    run_id: run.id,
                    reason: "job stopped before the run was due".to_owned(),
                    at: now_ms(),
                };
                if let Err(e) = self.inner.store.run_skip(skip).await {
                    warn!(run_id = run.id, error = %e, "skipping a run of a stopped job failed");
                }
                return;
            }
            _ => {}
        }
        let outcome = self.route_and_call(&run).await;
        let _ = self.inner.ledger.send((run, outcome));
    }

    async fn route_and_call(&self, run: &Run) -> DispatchOutcome {
        let refused = |msg: String| DispatchOutcome {
            run_id: run.id,
            address: None,
            trigger_code: tickwork_protocol::CODE_FAIL,
            trigger_msg: msg,
        };
        let cached = match self.job(run.job_id).await {
            Ok(c) => c,
            Err(e) => return refused(format!("job {} cannot be loaded: {e}", run.job_id)),
        };
        let spec = &cached.job.spec;
        let candidates = match self.addresses(spec.group_id).await {
            Ok(a) => a,
            Err(e) => return refused(format!("executor group cannot be loaded: {e}")),
        };
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
        let outcome = dispatch(
            &self.inner.client,
            &self.inner.router,
            &req,
            &candidates,
            now_ms(),
        )
        .await;
        self.count_slow(run.job_id, started.elapsed());
        outcome
    }

    /// The live addresses of a group: its manual list, or the registry's live executors of
    /// its app name (sorted ascending, as XXL-JOB does).
    pub(crate) async fn addresses(&self, group_id: i64) -> Result<Arc<Vec<String>>, Error> {
        let ttl = self.inner.config.registry.address_cache;
        if let Some(c) = self
            .inner
            .groups
            .lock()
            .expect("groups lock")
            .get(&group_id)
            && c.at.elapsed() < ttl
        {
            return Ok(c.addresses.clone());
        }
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
        self.inner.groups.lock().expect("groups lock").insert(
            group_id,
            CachedAddresses {
                app_name: group.app_name,
                addresses: addresses.clone(),
                at: Instant::now(),
            },
        );
        Ok(addresses)
    }

    // ---- ledger ----

    /// Writes dispatch outcomes in batches: one transaction for many accepted runs.
    async fn ledger_loop(self, mut outcomes: mpsc::UnboundedReceiver<(Run, DispatchOutcome)>) {
        const BATCH: usize = 1000;
        let mut buf = Vec::with_capacity(BATCH);
        loop {
            let n = if self.inner.stop.is_cancelled() {
                // The lanes finish their last `/run` calls within the executor timeout: write
                // what they hand over, so that no dispatched run stays `planned` (a restart
                // would fire it again), then end.
                let grace = self.inner.config.dispatch.executor_timeout + Duration::from_secs(1);
                match tokio::time::timeout(grace, outcomes.recv_many(&mut buf, BATCH)).await {
                    Ok(n) => n,
                    Err(_) => return,
                }
            } else {
                tokio::select! {
                    n = outcomes.recv_many(&mut buf, BATCH) => n,
                    _ = self.inner.stop.cancelled() => continue,
                }
            };
            if n == 0 {
                return;
            }
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
                let mut tries = 0;
                loop {
                    match self.inner.store.runs_mark_dispatched(&accepted).await {
                        Ok(_) => break,
                        Err(e) => {
                            // Keep the record: the executor runs these; retry until the
                            // database answers (or the admin stops).
                            tries += 1;
                            warn!(error = %e, runs = n, tries, "recording dispatched runs failed");
                            if self.inner.stop.is_cancelled() {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(200 * tries.min(25))).await;
                        }
                    }
                }
                self.inner.stats.dispatched.fetch_add(n, Ordering::Relaxed);
            }
            for (run, out) in refused {
                self.inner
                    .stats
                    .dispatch_failed
                    .fetch_add(1, Ordering::Relaxed);
                warn!(run_id = run.id, job_id = run.job_id, msg = %out.trigger_msg, "trigger failed");
                let failed = TriggerFailed {
                    run_id: run.id,
                    address: out.address,
                    trigger_code: out.trigger_code,
                    trigger_msg: out.trigger_msg,
                    at,
                };
                match self.inner.store.run_mark_trigger_failed(failed).await {
                    Ok(Some(run)) => self.after_complete(&run).await,
                    Ok(None) => {}
                    Err(e) => {
                        warn!(run_id = run.id, error = %e, "recording a trigger failure failed")
                    }
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
                    match self.inner.store.run_insert(new).await {
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
                match self.inner.store.run_insert(new).await {
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

    // ---- registry ----

    async fn registry_sweep_loop(self) {
        let r = &self.inner.config.registry;
        loop {
            tokio::select! {
                _ = self.inner.stop.cancelled() => return,
                _ = tokio::time::sleep(r.sweep_interval) => {}
            }
            let older_than = now_ms() - r.dead_after.as_millis() as i64;
            match self.inner.store.registry_sweep(older_than).await {
                Ok(0) => {}
                Ok(n) => {
                    info!(removed = n, "dead executors removed from the registry");
                    self.inner.groups.lock().expect("groups lock").clear();
                }
                Err(e) => warn!(error = %e, "registry sweep failed"),
            }
        }
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
