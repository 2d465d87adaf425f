//! From the timer to the executor: runs about to be due checked against their misfire policy,
//! moved to `sending` in the database in batches (the send fence, a little ahead of their
//! instant), then at their instant sorted by priority into the fast or slow lane, routed
//! (broadcast included) and sent; outcomes go to the ledger.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tickwork_core::RouteStrategy;
use tickwork_core::run::RunState;
use tickwork_store::{BeginSend, JobStatus, OwnedRuns, Run, RunNew, RunShard};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::cluster::Origin;
use super::dispatch::{DispatchOutcome, DispatchRequest, dispatch};
use super::senders::Senders;
use super::{Armed, CachedJob, Scheduler, SlowCount, ledger};
use crate::Error;
use crate::executor_client::{ExecutorClient, SendGate};

/// How due runs are checked in the database before they are sent.
enum SendCheck {
    /// `planned -> sending`, for this node's runs while its heartbeat is recent.
    Fence(BeginSend),
    /// Still `sending` and this node's (a maybe-sent run sent again after the fence closed).
    Owned(OwnedRuns),
}

/// Most runs moved to `sending` by one statement batch: due runs that queue up while one batch
/// is written go together in the next.
const SEND_BATCH: usize = 5000;

/// How often a wait for a burst to be sent looks at the fast lane again.
const BURST_WAIT: Duration = Duration::from_millis(5);

impl Scheduler {
    /// Takes each batch of due runs (and whatever else came due meanwhile) through the send
    /// fence: late ones go to their misfire policy, the others move to `sending` in one write
    /// and go to their lane, higher priority first.
    pub(super) async fn due_loop(self, mut due: mpsc::UnboundedReceiver<Vec<(i64, Box<Armed>)>>) {
        while let Some(mut batch) = due.recv().await {
            while batch.len() < SEND_BATCH {
                match due.try_recv() {
                    Ok(more) => batch.extend(more),
                    Err(_) => break,
                }
            }
            let taken = batch.len();
            // Higher priority first when several runs are due at once; fire order otherwise.
            // The timer's batches come in fire order: sorted only when out of this order (runs
            // of several priorities). Runs stay in the timer's boxes from here to their sender:
            // each step moves a pointer, not a run of some 400 bytes.
            let order = |(at, a): &(i64, Box<Armed>)| (std::cmp::Reverse(a.run.priority), *at);
            if !batch.is_sorted_by_key(order) {
                batch.sort_by_key(order);
            }
            let now = self.inner.clock.now_ms();
            let oldest = batch
                .iter()
                .map(|(_, a)| a.run.scheduled_at)
                .min()
                .unwrap_or(now);
            let epoch = self.inner.membership.epoch();
            let threshold = self.inner.config.scheduler.misfire_threshold.as_millis() as i64;
            let mut late = Vec::new();
            let mut send = Vec::new();
            let mut check = Vec::new();
            for (_, armed) in batch {
                if !self.inner.membership.fence_open(now, &self.inner.config) {
                    self.hold(armed.run, "heartbeat too old");
                } else if armed.run.state == RunState::Sending {
                    // Fenced and now at its instant, or a maybe-sent run found unsent: sent,
                    // checked again if the fence closed since it was armed.
                    if armed.epoch == epoch {
                        self.to_lane(armed);
                    } else {
                        check.push(armed);
                    }
                } else if armed.run.fire_key.is_some()
                    && now - armed.run.scheduled_at > threshold + armed.grace_ms
                {
                    // Late is late wherever it comes from (a claim that committed after a
                    // pause, a slow database): the misfire policy decides, at send time.
                    late.push(armed.run);
                } else {
                    send.push(armed);
                }
            }
            // Sending first: runs on time must not wait for the writes about late ones.
            if !send.is_empty() {
                // Those that do not move are no longer this node's: another node adopted them
                // (this node was paused, or its heartbeat failed), and they are not sent.
                let live_since = (!self.inner.membership.is_alone())
                    .then(|| now - self.inner.config.cluster.node_dead_after.as_millis() as i64);
                let fence = BeginSend {
                    node_id: self.inner.config.node_id.clone(),
                    run_ids: send.iter().map(|a| a.run.id).collect(),
                    live_since,
                };
                self.check_and_send(send, epoch, SendCheck::Fence(fence))
                    .await;
            }
            if !check.is_empty() {
                let query = OwnedRuns {
                    node_id: self.inner.config.node_id.clone(),
                    run_ids: check.iter().map(|a| a.run.id).collect(),
                };
                self.check_and_send(check, epoch, SendCheck::Owned(query))
                    .await;
            }
            if !late.is_empty() {
                self.adoption().take_over(late, Origin::Late).await;
            }
            self.inner.released.passed_on(taken);
            // Behind: this batch met the fence later than half the misfire threshold and more
            // is waiting. The claim waits until a batch is on time or nothing waits, so that
            // the fence's writes come first and fires that cannot be sent in time are recorded
            // misfired by the claim itself (one insert) instead of planned, armed, and misfired
            // here (an insert, a timer entry and an update each). A burst of 10,000 runs due
            // at once meets the fence within a second.
            let behind = now - oldest > threshold / 2 && !due.is_empty();
            self.inner.send_behind.store(behind, Ordering::Relaxed);
        }
        self.inner.send_behind.store(false, Ordering::Relaxed);
    }

    /// Hands `armed` to its lane, to be sent under the fence of its epoch.
    fn to_lane(&self, armed: Box<Armed>) {
        let (lane, index) = if self.is_slow(armed.run.job_id) {
            (&self.inner.slow_lane, 1)
        } else {
            (&self.inner.fast_lane, 0)
        };
        self.inner.metrics.lane_sent(index);
        if let Err(back) = lane.send(armed) {
            // The lane stopped: the admin is shutting down. The run was not sent; the
            // shutdown hands it back.
            self.inner.metrics.lane_received(index);
            self.hold(back.0.run, "admin stopping");
        }
    }

    /// Sends the runs of `runs` that pass `check` in the database; drops the others
    /// (another node took them), holds all of them when the database cannot say.
    #[expect(
        clippy::vec_box,
        reason = "a run keeps the timer's box to its sender; unboxed here it is copied twice more"
    )]
    async fn check_and_send(&self, runs: Vec<Box<Armed>>, epoch: u64, check: SendCheck) {
        let (checked, failure) = match check {
            SendCheck::Fence(send) => (
                self.inner.store.runs_begin_send(send).await,
                "send fence not written",
            ),
            SendCheck::Owned(query) => (
                self.inner.store.runs_still_owned(query).await,
                "ownership check failed",
            ),
        };
        match checked {
            Ok(passed) => {
                // Fenced ahead of their instant: they wait for it in the timer.
                let now = self.inner.clock.now_ms();
                let mut early = Vec::new();
                for mut armed in runs {
                    if passed.binary_search(&armed.run.id).is_ok() {
                        // Checked under this epoch's fence: sent under it, now or at its instant.
                        armed.run.state = RunState::Sending;
                        armed.epoch = epoch;
                        armed.grace_ms = 0;
                        if armed.run.scheduled_at > now {
                            early.push(armed);
                        } else {
                            self.to_lane(armed);
                        }
                    } else {
                        debug!(run_id = armed.run.id, "run no longer this node's: not sent");
                        self.inner
                            .stats
                            .runs_disowned
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
                if !early.is_empty() {
                    self.inner
                        .timer
                        .schedule_all(early.into_iter().map(|a| (a.run.scheduled_at, a)));
                }
            }
            Err(e) => {
                warn!(error = %e, runs = runs.len(), "{failure}; runs held");
                for armed in runs {
                    self.hold(armed.run, failure);
                }
            }
        }
    }

    /// Waits while the fast lane has runs queued for a dispatch slot (a burst is being sent),
    /// at most `at_most`: for work that can come a little later (the claim's next fires, the
    /// writes of results), so that the burst has the cores. Whether the lane emptied.
    pub(super) async fn wait_for_burst(&self, at_most: Duration) -> bool {
        let inner = &self.inner;
        wait_while(|| inner.metrics.fast_lane_queued(), at_most, &inner.stop).await
    }

    fn is_slow(&self, job_id: i64) -> bool {
        let minute = self.inner.clock.now_ms() / 60_000;
        let slow = self.inner.slow.lock().expect("slow lock");
        slow.get(&job_id).is_some_and(|c| {
            c.minute == minute && c.count > self.inner.config.dispatch.slow_calls_per_minute
        })
    }

    fn count_slow(&self, job_id: i64, took: Duration) {
        if took < self.inner.config.dispatch.slow_call {
            return;
        }
        let minute = self.inner.clock.now_ms() / 60_000;
        let mut slow = self.inner.slow.lock().expect("slow lock");
        slow.retain(|_, c| c.minute >= minute - 1);
        let c = slow.entry(job_id).or_default();
        if c.minute != minute {
            *c = SlowCount { minute, count: 0 };
        }
        c.count += 1;
    }

    /// Dispatches runs of one lane, at most `concurrency` at once.
    pub(super) async fn lane_loop(
        self,
        mut lane: mpsc::UnboundedReceiver<Box<Armed>>,
        concurrency: usize,
        index: usize,
    ) {
        let scheduler = self.clone();
        let dispatch = move |run| {
            let scheduler = scheduler.clone();
            async move { scheduler.dispatch_run(run).await }
        };
        let mut senders = Senders::new(dispatch, concurrency);
        loop {
            let run = tokio::select! {
                _ = self.inner.stop.cancelled() => break,
                run = lane.recv() => match run { Some(r) => r, None => break },
            };
            self.inner.metrics.lane_received(index);
            senders.send(run).await;
        }
        // Runs still queued were never sent: held, for the shutdown to hand back.
        lane.close();
        while let Ok(armed) = lane.try_recv() {
            self.inner.metrics.lane_received(index);
            self.hold(armed.run, "admin stopping");
        }
        senders.finish().await;
    }

    async fn dispatch_run(&self, armed: Box<Armed>) {
        let Armed { run, epoch, .. } = *armed;
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
            // Written in batches: a stop of thousands of jobs skips thousands of runs at once.
            self.send_to_ledger(ledger::Entry::Skipped(run));
            return;
        }
        let (candidates, client) = match self
            .inner
            .addresses
            .executors(cached.job.spec.group_id)
            .await
        {
            Ok(a) => a,
            Err(Error::NotFound(m)) => {
                let outcome = DispatchOutcome {
                    run_id: run.id,
                    address: None,
                    trigger_code: tickwork_protocol::CODE_FAIL,
                    trigger_msg: format!("executor group cannot be loaded: {m}"),
                    held_back: false,
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
            .may_send(self.inner.clock.now_ms(), &self.inner.config, epoch)
        {
            self.hold(run, "fence closed before dispatch");
            return;
        }
        let outcome = self
            .route_and_call(&run, &cached, &candidates, &client, epoch)
            .await;
        if outcome.held_back {
            // The check above passed, then the node froze on its way (a GC-like pause, a
            // stalled disk): the body never left.
            self.hold(run, "fence closed while sending");
            return;
        }
        self.to_ledger(run, outcome);
    }

    fn to_ledger(&self, run: Run, outcome: DispatchOutcome) {
        self.send_to_ledger(ledger::Entry::Dispatched(run, outcome));
    }

    fn send_to_ledger(&self, entry: ledger::Entry) {
        self.inner.metrics.ledger_sent();
        if self.inner.ledger.send(entry).is_err() {
            self.inner.metrics.ledger_received(1);
        }
    }

    async fn route_and_call(
        &self,
        run: &Run,
        cached: &CachedJob,
        candidates: &Arc<Vec<String>>,
        client: &ExecutorClient,
        epoch: u64,
    ) -> DispatchOutcome {
        let refused = |msg: String| DispatchOutcome {
            run_id: run.id,
            address: None,
            trigger_code: tickwork_protocol::CODE_FAIL,
            trigger_msg: msg,
            held_back: false,
        };
        let spec = &cached.job.spec;
        let mut req = DispatchRequest::new(run, &cached.job);
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
                new.timeout_s = run.timeout_s;
                match self.inner.store.run_insert(new).await {
                    Ok(shard) => self.arm(shard),
                    Err(e) => {
                        warn!(run_id = run.id, shard = i, error = %e, "broadcast shard not written")
                    }
                }
            }
            req.address = Some(candidates[0].clone());
            req.body.broadcast_index = 0;
            req.body.broadcast_total = total;
        }
        // How long the call takes is real time (a slow executor is slow on any clock); when it
        // fires is the scheduler's.
        let started = Instant::now();
        let now = self.inner.clock.now_ms();
        self.inner
            .metrics
            .lateness
            .observe_ms(now.saturating_sub(run.scheduled_at));
        // The same check as before the call, again at the last moment before the body leaves.
        let gate: SendGate = {
            let inner = self.inner.clone();
            Arc::new(move || {
                inner
                    .membership
                    .may_send(inner.clock.now_ms(), &inner.config, epoch)
            })
        };
        let outcome = dispatch(client, &self.inner.router, &req, candidates, now, gate).await;
        self.count_slow(run.job_id, started.elapsed());
        outcome
    }
}

/// Waits while `busy` says so, looking every [`BURST_WAIT`]: at most `at_most`, and not past
/// `stop`; whether `busy` ended. Real time: what is awaited is the cores, on any clock the
/// scheduler runs on.
async fn wait_while(
    mut busy: impl FnMut() -> bool,
    at_most: Duration,
    stop: &CancellationToken,
) -> bool {
    let until = tokio::time::Instant::now() + at_most;
    loop {
        if !busy() {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(BURST_WAIT) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `busy` that says yes the first `n` times it is asked, then no.
    fn busy_for(n: u32) -> impl FnMut() -> bool {
        let mut asked = 0;
        move || {
            asked += 1;
            asked <= n
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_burst_ends_when_it_is_sent_or_at_its_cap() {
        let cap = Duration::from_millis(500);
        let stop = CancellationToken::new();
        // (busy for how many looks, how long the wait lasts, whether the burst ended)
        for (looks, lasts, ended) in [
            (0, Duration::ZERO, true),
            (3, BURST_WAIT * 3, true),
            (1_000, cap, false),
        ] {
            let start = tokio::time::Instant::now();
            let passed = wait_while(busy_for(looks), cap, &stop).await;
            assert_eq!(start.elapsed(), lasts, "busy for {looks} looks");
            assert_eq!(passed, ended, "busy for {looks} looks");
        }
        // A stopping admin does not wait.
        stop.cancel();
        let start = tokio::time::Instant::now();
        assert!(!wait_while(busy_for(1_000), cap, &stop).await);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
