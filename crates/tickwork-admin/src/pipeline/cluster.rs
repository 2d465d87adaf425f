//! Cluster membership: the heartbeat, the fence, the maintenance lease and the adoption of the
//! planned runs of dead or departed nodes.
//!
//! Every node writes a heartbeat row every `heartbeat_interval`; a node whose row is older than
//! `node_dead_after` is dead, and any live node adopts its `planned` runs. Firing is fenced by
//! the node's own heartbeat: a node whose last successful heartbeat is older than
//! `node_dead_after / 2` neither claims nor fires, because from `node_dead_after` on others may
//! adopt what it holds. Runs it cannot fire are held; when its heartbeat succeeds again the
//! fence reopens under a new epoch, and every run armed in an older epoch, or held, is checked
//! against the database before it fires.
//!
//! An admin on SQLite is the only node there can be: no one adopts its runs, so its fence
//! closes only before its first heartbeat. A slow heartbeat there means the one write lock is
//! busy with this node's own work, and holding its runs would only make them misfire.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use tickwork_core::misfire::{self, FireDecision};
use tickwork_core::run::RunState;
use tickwork_core::{MisfireStrategy, TriggerType};
use tickwork_store::{
    AdoptParams, CatchUp, HandBack, LeaseKey, LeaseRequest, MarkMisfired, NodeBeat, OwnedRuns, Run,
    Unsend,
};
use tracing::{debug, info, warn};

use std::sync::Arc;

use super::bounded::{Bounded, BoundedSlot};
use super::{Inner, Scheduler};
use crate::Error;
use crate::config::Config;

/// The lease whose holder runs the maintenance monitors.
pub const MAINTENANCE_LEASE: &str = "maintenance";

/// Orphaned runs adopted per statement.
const ADOPT_BATCH: u32 = 1000;

/// What this node knows about its own standing in the cluster.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    /// No other node can share the database (SQLite), so none can adopt this one's runs.
    alone: bool,
    /// The instant written by the last heartbeat that succeeded (0: none yet). The instant the
    /// write started, not ended: others judge the row by it.
    last_beat: AtomicI64,
    /// Bumped each time the fence reopens; runs armed under an older epoch are checked first.
    epoch: AtomicU64,
    /// Since when the heartbeat has succeeded without a gap that closed the fence.
    connected_since: AtomicI64,
    /// This node holds the maintenance lease until this instant (0: it does not).
    lease_until: AtomicI64,
}

impl Membership {
    /// The standing of a node on a database that others can share (`alone == false`) or not.
    pub(crate) fn new(alone: bool) -> Self {
        Membership {
            alone,
            ..Membership::default()
        }
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Whether no other node can share this node's database.
    pub(crate) fn is_alone(&self) -> bool {
        self.alone
    }

    /// Whether this node may claim and fire at `now`.
    pub(crate) fn fence_open(&self, now: i64, config: &Config) -> bool {
        let last = self.last_beat.load(Ordering::SeqCst);
        last > 0 && (self.alone || now - last < half_dead_after(config))
    }

    /// Whether a run armed under fence epoch `epoch` may still go to its executor at `now`:
    /// the fence is open and has not closed (and reopened) since.
    pub(crate) fn may_send(&self, now: i64, config: &Config, epoch: u64) -> bool {
        self.fence_open(now, config) && epoch == self.epoch()
    }

    pub(crate) fn last_beat(&self) -> i64 {
        self.last_beat.load(Ordering::SeqCst)
    }

    /// Records a heartbeat written at `started`; true when it reopened the fence.
    fn beat_ok(&self, started: i64, config: &Config) -> bool {
        let previous = self.last_beat.load(Ordering::SeqCst);
        let reopened =
            previous == 0 || (!self.alone && started - previous >= half_dead_after(config));
        if reopened {
            // The epoch moves before the fence opens, so that whoever sees the fence open
            // also sees the new epoch.
            self.epoch.fetch_add(1, Ordering::SeqCst);
            self.connected_since.store(started, Ordering::SeqCst);
        }
        self.last_beat.fetch_max(started, Ordering::SeqCst);
        reopened
    }

    /// Whether this node may adopt at `now`: its fence is open and has been for a whole
    /// `node_dead_after`, so every live node had time to beat since the last outage.
    fn may_adopt(&self, now: i64, config: &Config) -> bool {
        let since = self.connected_since.load(Ordering::SeqCst);
        self.fence_open(now, config) && now - since >= dead_after(config)
    }

    pub(crate) fn holds_lease(&self, now: i64, config: &Config) -> bool {
        now < self.lease_until.load(Ordering::SeqCst) && self.fence_open(now, config)
    }
}

fn dead_after(config: &Config) -> i64 {
    config.cluster.node_dead_after.as_millis() as i64
}

fn half_dead_after(config: &Config) -> i64 {
    dead_after(config) / 2
}

/// How long the heartbeat's and the lease's loops wait for one database call: a write that
/// hangs must not keep a loop from trying again with a fresh instant. It bounds database IO,
/// so it is real time; the loops' ticks follow the scheduler's clock.
fn call_bound(config: &Config) -> Duration {
    config.cluster.node_dead_after / 2
}

/// How late an adopted run may be before its misfire policy applies, beyond the misfire
/// threshold: the longest a survivor needs to notice a death (the last beat, the wait for
/// `node_dead_after`, the next adoption round). Without it every failover would misfire the
/// dead node's first fires.
pub(crate) fn failover_grace_ms(config: &Config) -> i64 {
    let c = &config.cluster;
    (c.node_dead_after + c.heartbeat_interval + c.adopt_interval).as_millis() as i64
}

/// Where runs taken over come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// This node's own planned runs, found at start.
    Restart,
    /// Planned runs of a dead or departed node.
    Adopted,
    /// Runs this node held back and still owns.
    Held,
    /// This node's runs that came due later than their misfire threshold.
    Late,
}

impl Origin {
    /// How late a run of this origin may be beyond the misfire threshold. Runs that waited
    /// for a failover (a death noticed, a restart) get its grace, and so do held ones: a node
    /// whose fence closed held them for as long as the others would have waited before
    /// adopting them, and the others would have fired them within that grace. A run that came
    /// due late on an open fence gets none.
    fn grace_ms(self, config: &Config) -> i64 {
        match self {
            Origin::Restart | Origin::Adopted | Origin::Held => failover_grace_ms(config),
            Origin::Late => 0,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Origin::Restart => "restart",
            Origin::Adopted => "adoption",
            Origin::Held => "hold",
            Origin::Late => "late fire",
        }
    }
}

impl Scheduler {
    /// This node's id in the cluster and the run ledger.
    pub fn node_id(&self) -> &str {
        &self.inner.config.node_id
    }

    /// Whether this node holds the maintenance lease (and so runs the monitors).
    pub fn is_lease_holder(&self) -> bool {
        self.inner
            .membership
            .holds_lease(self.inner.clock.now_ms(), &self.inner.config)
    }

    /// Whether this node has stopped claiming and firing because its heartbeat is too old.
    pub fn is_fenced(&self) -> bool {
        !self
            .inner
            .membership
            .fence_open(self.inner.clock.now_ms(), &self.inner.config)
    }

    /// The instant of this node's last successful heartbeat (0: none yet).
    pub fn last_heartbeat(&self) -> i64 {
        self.inner.membership.last_beat()
    }
}

/// Runs this node takes over: a dead node's, its own after a restart, and the ones it held.
#[derive(Clone)]
pub(crate) struct Adoption {
    pub(super) inner: Arc<Inner>,
}

impl Adoption {
    pub(super) fn scheduler(&self) -> Scheduler {
        Scheduler {
            inner: self.inner.clone(),
        }
    }

    /// Adopts the planned runs of dead and departed nodes, every `adopt_interval`.
    pub(crate) async fn adoption_loop(self) {
        let config = &self.inner.config;
        loop {
            tokio::select! {
                _ = self.inner.stop.cancelled() => return,
                _ = self.inner.clock.sleep(config.cluster.adopt_interval) => {}
            }
            self.adopt_round().await;
        }
    }

    /// Adopts the runs nobody owns (handed back by a node that stopped cleanly), at once:
    /// unlike a dead node's, they need no wait for every live node to have beaten.
    pub(crate) async fn adopt_handed_back(&self) -> usize {
        self.adopt(false).await
    }

    /// One adoption round; how many runs were adopted.
    pub(crate) async fn adopt_round(&self) -> usize {
        self.adopt(true).await
    }

    /// Adopts in batches until nothing is left: handed-back runs, and with `dead_nodes` those
    /// of dead nodes too (only once this node may judge who is dead).
    async fn adopt(&self, dead_nodes: bool) -> usize {
        let config = &self.inner.config;
        let mut total = 0;
        loop {
            let now = self.inner.clock.now_ms();
            if !self.inner.membership.fence_open(now, config) || self.inner.stop.is_cancelled() {
                return total;
            }
            let dead_nodes = dead_nodes && self.inner.membership.may_adopt(now, config);
            let params = AdoptParams {
                node_id: config.node_id.clone(),
                dead_before: dead_nodes.then(|| now - dead_after(config)),
                limit: ADOPT_BATCH,
            };
            let runs = match self.inner.store.runs_adopt_orphaned(params).await {
                Ok(runs) => runs,
                Err(e) => {
                    warn!(error = %e, "adoption round failed");
                    return total;
                }
            };
            let n = runs.len();
            if n == 0 {
                return total;
            }
            total += n;
            self.inner
                .stats
                .runs_adopted
                .fetch_add(n as u64, Ordering::Relaxed);
            let first = runs.first().map(|r| r.scheduled_at).unwrap_or_default();
            info!(
                runs = n,
                oldest_late_ms = now - first,
                "adopted planned runs of dead or departed nodes"
            );
            self.take_over(runs, Origin::Adopted).await;
            if n < ADOPT_BATCH as usize {
                return total;
            }
        }
    }

    /// Gives held runs back to the timer: those this node still owns, under their misfire
    /// policy; the others went to another node meanwhile. A held run was never sent: one
    /// already `sending` goes back to `planned` first, and through the send fence again.
    pub(crate) async fn resume_held(&self) {
        let mut runs = std::mem::take(&mut *self.inner.held.lock().expect("held lock"));
        if runs.is_empty() {
            return;
        }
        if let Err(e) = self.unsend(&mut runs).await {
            warn!(error = %e, runs = runs.len(), "held runs not given back; kept for later");
            self.inner.held.lock().expect("held lock").extend(runs);
            return;
        }
        let query = OwnedRuns {
            node_id: self.inner.config.node_id.clone(),
            run_ids: runs.iter().map(|r| r.id).collect(),
        };
        let owned = match self.inner.store.runs_still_owned(query).await {
            Ok(owned) => owned,
            Err(e) => {
                warn!(error = %e, runs = runs.len(), "held runs not checked; kept for later");
                self.inner.held.lock().expect("held lock").extend(runs);
                return;
            }
        };
        let total = runs.len();
        let (mine, gone): (Vec<Run>, Vec<Run>) = runs
            .into_iter()
            .partition(|r| owned.binary_search(&r.id).is_ok());
        self.inner
            .stats
            .runs_disowned
            .fetch_add(gone.len() as u64, Ordering::Relaxed);
        info!(runs = total, still_owned = mine.len(), "resuming held runs");
        self.take_over(mine, Origin::Held).await;
    }

    /// Moves the `sending` runs among `runs` back to `planned` (this node never sent them);
    /// those it no longer owns are dropped from `runs`.
    async fn unsend(&self, runs: &mut Vec<Run>) -> Result<(), Error> {
        let ids: Vec<i64> = runs
            .iter()
            .filter(|r| r.state == RunState::Sending)
            .map(|r| r.id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let unsend = Unsend {
            node_id: self.inner.config.node_id.clone(),
            run_ids: ids,
        };
        let moved = self.inner.store.runs_unsend(unsend).await?;
        runs.retain_mut(|r| {
            if r.state != RunState::Sending {
                return true;
            }
            r.state = RunState::Planned;
            moved.binary_search(&r.id).is_ok()
        });
        Ok(())
    }

    /// Fires runs this node took over (adopted, re-armed, held) under their jobs' misfire
    /// policies: a run on time fires at its instant; late ones are misfired under
    /// `DO_NOTHING`, and under `FIRE_ONCE_NOW` one catch-up per job fires now unless the job
    /// already has one for these fires (a claim after an outage writes its own). Runs with no
    /// ledger key (manual, retry, child) always fire.
    pub(crate) async fn take_over(&self, runs: Vec<Run>, origin: Origin) {
        let config = &self.inner.config;
        let now = self.inner.clock.now_ms();
        let grace = origin.grace_ms(config);
        let threshold = config.scheduler.misfire_threshold.as_millis() as i64 + grace;
        // A dead node's `sending` runs may have reached an executor: asked about, not fired.
        let (maybe_sent, runs): (Vec<Run>, Vec<Run>) =
            runs.into_iter().partition(|r| r.state == RunState::Sending);
        if !maybe_sent.is_empty() {
            self.resolve_maybe_sent(maybe_sent).await;
        }

        let mut fire = Vec::new();
        let mut misfired = Vec::new();
        let mut by_job: BTreeMap<i64, Vec<Run>> = BTreeMap::new();
        for run in runs {
            if run.fire_key.is_some() {
                by_job.entry(run.job_id).or_default().push(run);
            } else {
                fire.push(run);
            }
        }
        for (job_id, runs) in by_job {
            let strategy = match self.scheduler().job(job_id).await {
                Ok(c) => c.job.spec.misfire_strategy,
                // The job was deleted, and its runs with it.
                Err(Error::NotFound(_)) => continue,
                Err(e) => {
                    warn!(job_id, error = %e, "job not loaded; its runs are held");
                    for run in runs {
                        self.scheduler().hold(run, "job not loaded");
                    }
                    continue;
                }
            };
            let instants: Vec<i64> = runs.iter().map(|r| r.scheduled_at).collect();
            let plan = misfire::plan(strategy, &instants, now, threshold);
            let late_since = plan
                .fires
                .iter()
                .filter(|f| f.decision != FireDecision::OnTime)
                .map(|f| f.scheduled_at)
                .min()
                .unwrap_or(now);
            let mut catch_up = None;
            for (run, decision) in runs.into_iter().zip(plan.fires) {
                match decision.decision {
                    FireDecision::OnTime => fire.push(run),
                    FireDecision::Misfired => misfired.push(run),
                    FireDecision::CatchUp { .. } => catch_up = Some(run),
                }
            }
            if let Some(run) = catch_up {
                debug_assert_eq!(strategy, MisfireStrategy::FireOnceNow);
                match self.catch_up(run, late_since, now).await {
                    CatchUpOutcome::Fire(run) => fire.push(run),
                    CatchUpOutcome::Misfire(run) => misfired.push(run),
                    CatchUpOutcome::Gone => {}
                }
            }
        }
        if !misfired.is_empty() {
            self.misfire(misfired, origin, threshold, now).await;
        }
        if !fire.is_empty() {
            debug!(
                runs = fire.len(),
                origin = origin.as_str(),
                "taken-over runs armed"
            );
            self.scheduler().arm_all(fire, grace);
        }
    }

    async fn catch_up(&self, run: Run, late_since: i64, now: i64) -> CatchUpOutcome {
        let store = &self.inner.store;
        let request = CatchUp {
            run_id: run.id,
            node_id: self.inner.config.node_id.clone(),
            at: now,
            late_since,
        };
        match store.run_catch_up(request).await {
            // The job has its catch-up already, from a claim or another node.
            Ok(Some(same)) if same.trigger_type != TriggerType::Misfire => {
                CatchUpOutcome::Misfire(same)
            }
            Ok(Some(caught)) => {
                info!(
                    run_id = caught.id,
                    job_id = caught.job_id,
                    fire_key = caught.fire_key,
                    "late fires caught up once now (FIRE_ONCE_NOW)"
                );
                CatchUpOutcome::Fire(caught)
            }
            Ok(None) => CatchUpOutcome::Gone,
            Err(e) => {
                warn!(run_id = run.id, error = %e, "catch-up not written; run held");
                self.scheduler().hold(run, "catch-up not written");
                CatchUpOutcome::Gone
            }
        }
    }

    async fn misfire(&self, runs: Vec<Run>, origin: Origin, threshold: i64, now: i64) {
        let request = MarkMisfired {
            node_id: self.inner.config.node_id.clone(),
            run_ids: runs.iter().map(|r| r.id).collect(),
            reason: format!(
                "misfired: more than {threshold} ms late when fired after a {}",
                origin.as_str()
            ),
            at: now,
        };
        // A fixed-delay job waiting for one of these runs moves on in the same transaction.
        let scheduler = self.scheduler();
        let planner = scheduler.follow_up_planner();
        match self.inner.store.runs_mark_misfired(request, &planner).await {
            Ok(ended) => {
                let n = ended.runs.len();
                self.inner
                    .stats
                    .runs_misfired
                    .fetch_add(n as u64, Ordering::Relaxed);
                info!(
                    runs = n,
                    jobs_moved_on = ended.advanced_jobs.len(),
                    origin = origin.as_str(),
                    "late runs misfired under their misfire policy"
                );
                scheduler.follow(ended);
            }
            Err(e) => {
                warn!(error = %e, runs = runs.len(), "misfires not recorded; runs held");
                for run in runs {
                    scheduler.hold(run, "misfire not recorded");
                }
            }
        }
    }
}

/// This node's membership: its heartbeat row, the fence, the maintenance lease.
#[derive(Clone)]
pub(crate) struct Heartbeat {
    pub(super) inner: Arc<Inner>,
}

impl Heartbeat {
    /// The first heartbeat; the admin does not start without it.
    pub(crate) async fn join_cluster(&self) -> Result<(), Error> {
        let started = self.inner.clock.now_ms();
        self.inner
            .store
            .node_heartbeat(self.beat_row(started))
            .await?;
        self.inner.membership.beat_ok(started, &self.inner.config);
        self.inner.stats.heartbeats.fetch_add(1, Ordering::Relaxed);
        info!(node = %self.inner.config.node_id, "joined the cluster");
        Ok(())
    }

    fn beat_row(&self, now: i64) -> NodeBeat {
        NodeBeat {
            id: self.inner.config.node_id.clone(),
            address: self.inner.config.listen.to_string(),
            now,
        }
    }

    /// Heartbeats until the admin has written everything at shutdown.
    pub(crate) async fn membership_loop(self) {
        let c = self.inner.config.cluster.clone();
        let call_timeout = call_bound(&self.inner.config);
        let mut beats = BoundedSlot::new();
        loop {
            tokio::select! {
                _ = self.inner.cluster_stop.cancelled() => return,
                _ = self.inner.clock.sleep(c.heartbeat_interval) => {}
            }
            let started = self.inner.clock.now_ms();
            let beat = {
                let (store, row) = (self.inner.store.clone(), self.beat_row(started));
                async move { store.node_heartbeat(row).await }
            };
            let failed = || {
                self.inner
                    .stats
                    .heartbeat_failures
                    .fetch_add(1, Ordering::Relaxed)
            };
            match beats.run(call_timeout, beat).await {
                Bounded::Done(Ok(())) => {
                    self.inner.stats.heartbeats.fetch_add(1, Ordering::Relaxed);
                    if self.inner.membership.beat_ok(started, &self.inner.config) {
                        info!("heartbeat restored: firing again, held runs are checked first");
                    }
                }
                Bounded::Done(Err(e)) => {
                    failed();
                    warn!(error = %e, "heartbeat failed");
                    continue;
                }
                Bounded::Busy => {
                    failed();
                    warn!("heartbeat skipped: the last one still waits for the database");
                    continue;
                }
                Bounded::TimedOut => {
                    failed();
                    let db = self.inner.store.connections();
                    warn!(
                        timeout_ms = call_timeout.as_millis() as u64,
                        db_connections = db.open,
                        db_idle = db.idle,
                        "heartbeat timed out"
                    );
                    continue;
                }
            }
        }
    }

    /// Renews the maintenance lease every heartbeat interval while the fence is open, until
    /// the admin stops. A loop of its own: when the renewal waited in the heartbeat's loop, a
    /// slow one held the next beat back long enough to close the fence.
    pub(crate) async fn lease_loop(self) {
        let c = self.inner.config.cluster.clone();
        let call_timeout = call_bound(&self.inner.config);
        let mut leases = BoundedSlot::new();
        loop {
            tokio::select! {
                _ = self.inner.stop.cancelled() => return,
                _ = self.inner.clock.sleep(c.heartbeat_interval) => {}
            }
            let now = self.inner.clock.now_ms();
            if self.inner.membership.fence_open(now, &self.inner.config) {
                self.renew_lease(&mut leases, call_timeout).await;
            }
        }
    }

    async fn renew_lease(
        &self,
        slot: &mut BoundedSlot<Result<bool, tickwork_store::Error>>,
        call_timeout: Duration,
    ) {
        let c = &self.inner.config.cluster;
        let started = self.inner.clock.now_ms();
        let request = LeaseRequest {
            name: MAINTENANCE_LEASE.to_owned(),
            node: self.inner.config.node_id.clone(),
            ttl_ms: c.lease_ttl.as_millis() as i64,
            now: started,
        };
        let membership = &self.inner.membership;
        let held_before = membership.holds_lease(started, &self.inner.config);
        let acquire = {
            let store = self.inner.store.clone();
            async move { store.lease_acquire(request).await }
        };
        match slot.run(call_timeout, acquire).await {
            Bounded::Done(Ok(true)) => {
                // Trust the lease a beat less than it lasts: clocks of nodes differ a little.
                let until = started + (c.lease_ttl - c.heartbeat_interval).as_millis() as i64;
                membership.lease_until.store(until, Ordering::SeqCst);
                if !held_before {
                    info!("maintenance lease acquired: this node runs the monitors");
                }
            }
            Bounded::Done(Ok(false)) => {
                membership.lease_until.store(0, Ordering::SeqCst);
                if held_before {
                    info!("maintenance lease taken by another node");
                }
            }
            // The lease runs out by itself if this goes on.
            Bounded::Done(Err(e)) => warn!(error = %e, "lease renewal failed"),
            Bounded::TimedOut => warn!("lease renewal timed out"),
            Bounded::Busy => {
                warn!("lease renewal skipped: the last one still waits for the database")
            }
        }
    }

    /// A clean exit: hand the runs back, give up the lease and delete the heartbeat row.
    /// Planned runs (and held or queued ones, which were never sent) lose their owner, so that
    /// the next node to look (another, or this one restarted) fires them at once, in order,
    /// under their misfire policy, instead of after `node_dead_after`.
    pub(crate) async fn leave_cluster(&self) {
        let node = self.inner.config.node_id.clone();
        let mut held = std::mem::take(&mut *self.inner.held.lock().expect("held lock"));
        // Runs fenced ahead of their instant and not sent: back to `planned` with the held ones.
        held.extend(
            self.inner
                .timer
                .remove_where(|_| true)
                .into_iter()
                .map(|(_, armed)| armed.run),
        );
        let adoption = Adoption {
            inner: self.inner.clone(),
        };
        if let Err(e) = adoption.unsend(&mut held).await {
            warn!(error = %e, runs = held.len(), "held runs not given back: others ask about them once this node is dead");
        }
        let back = HandBack {
            node_id: node.clone(),
        };
        match self.inner.store.runs_hand_back(back).await {
            Ok(n) => info!(runs = n, "planned runs handed back"),
            Err(e) => warn!(
                error = %e,
                "handing back planned runs failed: others adopt them once this node is dead"
            ),
        }
        self.inner.membership.lease_until.store(0, Ordering::SeqCst);
        let key = LeaseKey {
            name: MAINTENANCE_LEASE.to_owned(),
            node: node.clone(),
        };
        match self.inner.store.lease_release(key).await {
            Ok(true) => info!("maintenance lease released"),
            Ok(false) => {}
            Err(e) => warn!(error = %e, "releasing the maintenance lease failed"),
        }
        match self.inner.store.node_leave(&node).await {
            Ok(_) => info!(node = %node, "left the cluster: planned runs handed over"),
            Err(e) => warn!(
                error = %e,
                "leaving the cluster failed: other nodes adopt this node's runs once its heartbeat expires"
            ),
        }
    }
}

enum CatchUpOutcome {
    Fire(Run),
    Misfire(Run),
    /// Held, or no longer this node's.
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_closes_at_half_dead_after_and_reopens_in_a_new_epoch() {
        let config = Config::new("sqlite::memory:", "a", "b");
        let m = Membership::new(false);
        assert!(
            !m.fence_open(1_000, &config),
            "closed before the first beat"
        );
        assert!(m.beat_ok(1_000, &config));
        let first = m.epoch();
        assert!(m.fence_open(3_499, &config));
        assert!(!m.fence_open(3_500, &config));
        // A beat in time keeps the epoch.
        assert!(!m.beat_ok(2_000, &config));
        assert_eq!(m.epoch(), first);
        // A gap of half of node_dead_after closed the fence: the next beat opens a new epoch.
        assert!(m.beat_ok(4_600, &config));
        assert_eq!(m.epoch(), first + 1);
        assert!(m.fence_open(4_700, &config));
        // Adoption waits a whole node_dead_after after the fence reopened.
        assert!(!m.may_adopt(5_000, &config));
        for t in (5_000..=9_600).step_by(1000) {
            m.beat_ok(t, &config);
        }
        assert!(m.may_adopt(9_600, &config));
    }

    #[test]
    fn a_sqlite_admin_closed_its_fence_on_a_slow_heartbeat_and_misfired_its_own_runs() {
        let config = Config::new("sqlite::memory:", "a", "b");
        let m = Membership::new(true);
        assert!(
            !m.fence_open(1_000, &config),
            "closed before the first beat"
        );
        assert!(m.beat_ok(1_000, &config));
        let first = m.epoch();
        // The write lock kept the heartbeat waiting for a minute: nobody could adopt.
        assert!(m.fence_open(61_000, &config));
        assert!(!m.beat_ok(61_000, &config), "no gap, no new epoch");
        assert_eq!(m.epoch(), first);
    }

    #[test]
    fn the_lease_is_trusted_only_with_an_open_fence() {
        let config = Config::new("sqlite::memory:", "a", "b");
        let m = Membership::new(false);
        m.beat_ok(1_000, &config);
        m.lease_until.store(5_000, Ordering::SeqCst);
        assert!(m.holds_lease(3_000, &config));
        assert!(!m.holds_lease(3_600, &config), "fence closed");
        assert_eq!(failover_grace_ms(&config), 7_000);
    }

    /// A node whose fence closed for a few seconds held its runs and, once it could fire
    /// again, misfired every one more than the misfire threshold late, where a survivor that
    /// adopted them would have fired them within the failover's grace.
    #[test]
    fn held_runs_are_misfired_only_past_the_failover_grace() {
        let config = Config::new("sqlite::memory:", "a", "b");
        let grace = failover_grace_ms(&config);
        for (origin, expected) in [
            (Origin::Restart, grace),
            (Origin::Adopted, grace),
            (Origin::Held, grace),
            (Origin::Late, 0),
        ] {
            assert_eq!(origin.grace_ms(&config), expected, "{}", origin.as_str());
        }
    }
}
