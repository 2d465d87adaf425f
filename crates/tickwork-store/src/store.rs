//! The `Store` trait and its parts, one per area: every operation the admin performs on the
//! database, named by what it does to state.

use async_trait::async_trait;
use tickwork_core::run::RunState;

use crate::Error;
use crate::model::*;

/// Persistence of the scheduling center: every area's trait. Object-safe: the admin holds an
/// `Arc<dyn Store>`, and a part that needs one area only may hold that area's trait object
/// (`Arc<dyn Store>` coerces to `Arc<dyn AccountStore>`, say).
///
/// In every area, each method is one short transaction (or one statement); none holds a lock
/// across calls. Getters of a single row return [`Error::NotFound`] when it does not exist.
#[async_trait]
pub trait Store:
    GroupStore
    + JobStore
    + RunLedger
    + ClusterStore
    + AlarmStore
    + FireCheckStore
    + AccountStore
    + AuditStore
    + ScriptStore
    + SubmissionStore
    + WorkflowStore
    + Send
    + Sync
    + 'static
{
    /// The backend's name: `sqlite`, `postgres` or `mysql`.
    fn backend(&self) -> &'static str;

    /// Closes the connection pool, waiting for connections in use to come back.
    async fn close(&self);

    /// The connections open now and how many of them are idle.
    fn connections(&self) -> crate::Connections;

    /// Copies the write-ahead log into the database file, beside the writes rather than in
    /// their way: on SQLite a passive checkpoint from a reading connection (the writing one
    /// checkpoints only when the log has grown past a backstop); the other backends
    /// checkpoint on their own and answer with an empty [`LogCheckpoint`].
    async fn log_checkpoint(&self) -> Result<crate::LogCheckpoint, Error>;
}

/// Executor groups and the registry of their live executors.
///
/// An area of its own rather than part of the jobs: groups and their registry are what routing
/// and the executor API read, and neither holds a job or a run.
#[async_trait]
pub trait GroupStore: Send + Sync {
    // ---- executor groups ----

    /// Creates a group. A taken `app_name` is a `Conflict`.
    async fn group_create(&self, group: GroupNew) -> Result<Group, Error>;

    /// Rewrites a group's editable fields.
    async fn group_update(&self, group: GroupUpdate) -> Result<Group, Error>;

    /// Deletes a group; a group that still has jobs is a `Conflict`.
    async fn group_delete(&self, id: i64) -> Result<(), Error>;

    /// One group by id.
    async fn group_get(&self, id: i64) -> Result<Group, Error>;

    /// One group by its `app_name`.
    async fn group_get_by_app_name(&self, app_name: &str) -> Result<Group, Error>;

    /// Every group, by id.
    async fn groups_list(&self) -> Result<Vec<Group>, Error>;

    /// Sets (`Some`) or clears (`None`) a group's own executor access token and moves its
    /// `updated_at`; the group as it is now. The old token is gone at once.
    async fn group_set_token(&self, set: GroupTokenSet) -> Result<Group, Error>;

    // ---- executor registry ----

    /// Records a heartbeat: inserts the (app, address) row or moves its `updated_at`.
    async fn registry_heartbeat(&self, beat: RegistryBeat) -> Result<(), Error>;

    /// Removes one executor at once (its `registryRemove`); whether it was there.
    async fn registry_remove(&self, key: RegistryKey) -> Result<bool, Error>;

    /// Removes every row whose last beat is older than `older_than`; how many went.
    async fn registry_sweep(&self, older_than: i64) -> Result<u64, Error>;

    /// The registry rows of `app_name` that beat at or after `alive_since`, with their last
    /// beat (`updated_at`: a reader knows when each will count as dead), sorted by address.
    async fn registry_live_entries(&self, query: LiveQuery) -> Result<Vec<RegistryEntry>, Error>;

    /// Every registry row, by app and address (for the address cache and the console).
    async fn registry_list(&self) -> Result<Vec<RegistryEntry>, Error>;
}

/// Job definitions, their schedule position, and the claim that turns due fires into runs.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Creates a job at version 1. A taken key is a `Conflict`; a missing group is `Invalid`.
    async fn job_create(&self, job: JobNew) -> Result<Job, Error>;

    /// Creates jobs at version 1 in one transaction, all or none, with multi-row inserts:
    /// each job, its first script version when it has one, and the audit record `audit`
    /// makes of it. Returns the jobs in the order given. A key taken (on the database or
    /// twice in `jobs`) is a `Conflict` naming it; a missing group is `Invalid`; an empty
    /// list writes nothing.
    async fn jobs_create(
        &self,
        jobs: Vec<JobCreate>,
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error>;

    /// Rewrites a job's definition and `next_fire_at`, bumping its version. With
    /// `expected_version`, a job changed in between is a `Conflict`. `glue_updated_at` moves
    /// only when the glue type or source changed.
    async fn job_update(&self, update: JobUpdate) -> Result<Job, Error>;

    /// Deletes a job and all its runs.
    async fn job_delete(&self, id: i64) -> Result<(), Error>;

    /// One job by id.
    async fn job_get(&self, id: i64) -> Result<Job, Error>;

    /// The jobs of `ids` that are there, in ascending id order (statements of a power-of-two
    /// number of ids; a repeated id once).
    async fn jobs_get(&self, ids: &[i64]) -> Result<Vec<Job>, Error>;

    /// One job by its stable key.
    async fn job_get_by_key(&self, key: &str) -> Result<Job, Error>;

    /// One page of jobs matching the filter, in its order ([`JobSort`], done by the database).
    async fn jobs_list(&self, filter: JobFilter) -> Result<Paged<Job>, Error>;

    /// Starts or stops jobs in one transaction, writing each one's status and next fire
    /// (leaving its version alone: this is not an edit of the definition), with the audit
    /// record `audit` makes of each job changed (its index in `change.jobs`, the job as
    /// written). Returns the jobs changed in the order given; a job that is not there is
    /// left out. A job named twice is a conflict; an audit record that cannot be made or
    /// stored changes nothing.
    async fn jobs_set_status(
        &self,
        change: JobsStatusChange,
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error>;

    /// Deletes jobs with their runs in one transaction, as `job_delete` does each, with the
    /// audit record `audit` makes of each (its index in `ids`, the job as it was). Returns the
    /// jobs deleted in the order given; a job that is not there is left out.
    async fn jobs_delete(&self, ids: &[i64], audit: &JobAudit<'_>) -> Result<Vec<Job>, Error>;

    /// Moves the next fire of a job that is running; `false` (and no change) when it is
    /// stopped or gone, so a late completion never restarts a stopped job.
    async fn job_set_next_fire(&self, next: JobNextFire) -> Result<bool, Error>;

    /// The claim (design 3.1). In one transaction: takes up to `limit` running jobs due by
    /// `now + lookahead_ms`, oldest `next_fire_at` first, skipping jobs another node holds;
    /// asks `planner` for each job's fires and next fire (with the definition it holds at
    /// the version read, if any: see [`ClaimPlanner::known`]); writes one run row per fire
    /// (`owner_node = node_id`, `fire_key` = the fire's key); advances each job (`None`
    /// stops it); commits. Fires the ledger already holds are skipped, not returned.
    /// Returns the `planned` runs written. A deadlock is retried a few times.
    async fn jobs_claim_due(
        &self,
        params: ClaimParams,
        planner: &Planner<'_>,
    ) -> Result<ClaimResult, Error>;
}

/// The run ledger: writing runs outside the schedule, moving them through their states with
/// their follow-ups, recovery of runs whose node went away, retention and the daily reports.
#[async_trait]
pub trait RunLedger: Send + Sync {
    // ---- runs ----

    /// Writes a `planned` run outside the schedule (manual, API, retry, parent, misfire),
    /// with no ledger key, copying group, handler, priority (and params unless given) from
    /// the job. A missing job is `NotFound`.
    async fn run_insert(&self, run: RunNew) -> Result<Run, Error>;

    /// Moves the runs of `send` that are still `planned` and the node's to `sending`, in one
    /// statement per chunk, if the node's heartbeat row is recent enough (see [`BeginSend`]).
    /// Returns the ids that moved, ascending: only those may be sent.
    async fn runs_begin_send(&self, send: BeginSend) -> Result<Vec<i64>, Error>;

    /// Moves the node's `sending` runs among `unsend` back to `planned` (see [`Unsend`]);
    /// returns the ids that moved, ascending: those the node still owned.
    async fn runs_unsend(&self, unsend: Unsend) -> Result<Vec<i64>, Error>;

    /// A clean stop's hand-back (see [`HandBack`]); how many runs lost their owner.
    async fn runs_hand_back(&self, hand_back: HandBack) -> Result<u64, Error>;

    /// Records accepted triggers in one transaction: address, trigger code and message,
    /// `dispatched_at`, and `sending -> dispatched`, on runs the batch's node still owns. A
    /// run already completed by an early callback keeps its final state but gains the trigger
    /// record. Runs whose trigger was already recorded, that never ran, or that another node
    /// took, are left alone. Returns how many changed.
    async fn runs_mark_dispatched(&self, batch: MarkDispatched) -> Result<u64, Error>;

    /// Ends a pending run of the failing node as `failed` at trigger time and, in the same
    /// transaction, writes what `follow` plans for it (see [`FollowUps`]). Nothing ended when
    /// the run is unknown, already past that point, or another node's.
    async fn run_mark_trigger_failed(
        &self,
        failed: TriggerFailed,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        self.runs_mark_trigger_failed(std::slice::from_ref(&failed), follow)
            .await
    }

    /// [`RunLedger::run_mark_trigger_failed`] for many runs in one transaction (an executor
    /// outage fails every fire at once: one transaction each fell far behind the fires).
    async fn runs_mark_trigger_failed(
        &self,
        batch: &[TriggerFailed],
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error>;

    /// Ends a run of the node that is `planned`, or `sending` and never sent, as `skipped`
    /// (its job was stopped before the run was due); `None` when the run is unknown, past
    /// that point, or another node's.
    async fn run_skip(&self, skip: RunSkip) -> Result<Option<Run>, Error> {
        let RunSkip {
            run_id,
            node_id,
            reason,
            at,
        } = skip;
        let skipped = MarkSkipped {
            node_id,
            run_ids: vec![run_id],
            reason,
            at,
        };
        Ok(self.runs_mark_skipped(skipped).await?.into_iter().next())
    }

    /// [`RunLedger::run_skip`] for many runs in one transaction: a stop of thousands of jobs
    /// leaves thousands of claimed runs to skip, and one transaction each kept the database
    /// busy long after the stop. Returns the runs that ended, those the skip applied to.
    async fn runs_mark_skipped(&self, skipped: MarkSkipped) -> Result<Vec<Run>, Error>;

    /// Records the shard of a run that became shard `index` of a broadcast of `total`
    /// (its siblings are written with their shard by `run_insert`).
    async fn run_set_shard(&self, shard: RunShard) -> Result<(), Error>;

    /// Moves a pending run to its final state with its result (`failed` and `timed_out` become
    /// `killed` when a kill was requested, see [`RunLedger::run_kill_intent`]), as
    /// [`RunMove::Complete`](tickwork_core::run::RunMove::Complete) allows: a `dispatched`
    /// run, or a `sending` one for a callback's results (`succeeded`, `failed`, `timed_out`:
    /// the callback beat the dispatch record) and for `lost` (maybe sent, nobody could say). In the same transaction it writes what `follow`
    /// plans for it: its retry, its children, its fixed-delay job's next fire (see
    /// [`FollowUps`]); a crash after the commit loses none of them. Nothing ended when the run
    /// is unknown, already final, or not in a state the result applies to: a repeated callback
    /// changes nothing. `state` must be a result state (succeeded, failed, timed_out, killed,
    /// lost), else `Invalid`.
    async fn run_complete(
        &self,
        complete: RunComplete,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error>;

    /// Records (or withdraws) the kill intent of a `dispatched` run, so that every admin sees
    /// it: from then on a failed or timed-out result of the run ends it as `killed` (the
    /// executor reports a killed run as failed, and may do so before `/kill` has answered).
    /// `false`, and no change, when the run is unknown or not dispatched.
    async fn run_kill_intent(&self, intent: RunKillIntent) -> Result<bool, Error>;

    /// Completes many runs in one transaction, as [`RunLedger::run_complete`] does one, with the
    /// follow-ups of each run that ended now. Unknown and already final runs are left alone
    /// and not returned; a run repeated in the batch counts once (its first result).
    async fn runs_complete(
        &self,
        batch: &[RunComplete],
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        let none = MarkDispatched {
            node_id: String::new(),
            runs: Vec::new(),
        };
        let both = CompleteDispatched {
            results: batch,
            dispatched: &none,
        };
        self.runs_complete_dispatched(both, follow).await
    }

    /// [`RunLedger::runs_complete`] and [`RunLedger::runs_mark_dispatched`] in one
    /// transaction: each result as `runs_complete` records it, each dispatch record as
    /// `runs_mark_dispatched` does. A run given both, whose result applies, gains its dispatch
    /// record in the same update (when `runs_mark_dispatched` would give it one; MySQL and
    /// MariaDB write the record first, by its own statement). Returns what ended, as
    /// `runs_complete` does.
    async fn runs_complete_dispatched(
        &self,
        both: CompleteDispatched<'_>,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error>;

    /// One run by id.
    async fn run_get(&self, id: i64) -> Result<Run, Error>;

    /// One page of runs matching the filter, newest first.
    async fn runs_list(&self, filter: RunFilter) -> Result<Paged<Run>, Error>;

    /// The last run of each job among `job_ids` (at most [`PageReq::MAX_LIMIT`] of them) in
    /// two statements whatever their number: its newest run (highest id) that left
    /// `planned`, so fires claimed ahead of their time do not hide the one that ran. Jobs
    /// without one are absent; in no particular order.
    async fn runs_last_of_jobs(&self, job_ids: &[i64]) -> Result<Vec<Run>, Error>;

    /// The `planned` and `sending` runs owned by `node`, by `scheduled_at` (a restarting node
    /// reloads its timer from the first and asks the executors about the second).
    async fn runs_pending_owned_by(&self, node: &str) -> Result<Vec<Run>, Error>;

    /// How many runs scheduled in `range` are in each state (states with none are absent).
    async fn runs_state_counts(&self, range: TimeRange) -> Result<Vec<(RunState, u64)>, Error>;

    // ---- recovery ----

    /// Moves orphaned `planned` runs (see [`AdoptParams`]), and the `sending` runs of dead
    /// nodes, to `node_id`, atomically: rows are locked with `SKIP LOCKED` before their owner
    /// changes, so two adopters never take the same run. Returns the adopted runs (now owned
    /// by `node_id`, in their state), by `scheduled_at`.
    async fn runs_adopt_orphaned(&self, params: AdoptParams) -> Result<Vec<Run>, Error>;

    /// The ids among `run_ids` that are still `planned` or `sending` and owned by `node_id`
    /// (a node checks this before firing runs it held, in case another node took them
    /// meanwhile).
    async fn runs_still_owned(&self, query: OwnedRuns) -> Result<Vec<i64>, Error>;

    /// The executor group of each run among `run_ids` that exists (for checking that a
    /// callback comes from the run's own group); in no particular order.
    async fn runs_groups(&self, run_ids: &[i64]) -> Result<Vec<RunGroup>, Error>;

    /// Ends planned runs of `node_id`, and its sending runs it never sent, as `misfired`
    /// (never run) and writes in the same
    /// transaction what `follow` plans for them: above all the next fire of a fixed-delay job
    /// that waited for a run that will now never run. Runs no longer planned or owned by
    /// someone else are left alone.
    async fn runs_mark_misfired(
        &self,
        misfired: MarkMisfired,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error>;

    /// Makes a planned run of `node_id` its job's catch-up: it fires at `at` with trigger type
    /// `misfire`, unless the job already has a catch-up scheduled at or after `late_since`
    /// (then the run comes back unchanged, for the caller to misfire). Checked and written
    /// under the job's row lock, so that a claim and a takeover never both catch up. `None`
    /// when the run is no longer planned or no longer `node_id`'s.
    async fn run_catch_up(&self, catch_up: CatchUp) -> Result<Option<Run>, Error>;

    /// Dispatched runs that look lost (see [`LostQuery`]), oldest dispatch first. The caller
    /// completes them as `lost` through the usual completion path.
    async fn runs_find_lost(&self, query: LostQuery) -> Result<Vec<Run>, Error>;

    /// The runs dispatched to one executor address before an instant, oldest dispatch first
    /// (a pull executor that reconnects says which of them it still holds).
    async fn runs_dispatched_to(&self, query: DispatchedTo) -> Result<Vec<Run>, Error>;

    // ---- retention ----

    /// Deletes one batch of final runs scheduled before `before` (see [`RunPurge`]); how
    /// many went. Call again until it returns less than the limit.
    async fn runs_purge(&self, purge: RunPurge) -> Result<u64, Error>;

    /// Deletes the reports of days before `before`; how many went.
    async fn reports_purge(&self, before: i64) -> Result<u64, Error>;

    /// Deletes final runs as an operator asks (see [`RunClear`]); how many went.
    async fn runs_clear(&self, clear: RunClear) -> Result<u64, Error>;

    // ---- reports ----

    /// Writes (or overwrites) the counts of one day.
    async fn report_upsert(&self, report: RunReport) -> Result<(), Error>;

    /// The reports whose `day` lies in `range`, by day.
    async fn reports_list(&self, range: TimeRange) -> Result<Vec<RunReport>, Error>;
}

/// The admin nodes of a cluster: heartbeats and leases.
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// Records an admin node's heartbeat (inserting the node on its first beat).
    async fn node_heartbeat(&self, beat: NodeBeat) -> Result<(), Error>;

    /// Every admin node, by id.
    async fn nodes_list(&self) -> Result<Vec<Node>, Error>;

    /// Removes a node's row (a clean shutdown): its planned runs become orphans at once.
    /// Whether the row was there.
    async fn node_leave(&self, node_id: &str) -> Result<bool, Error>;

    /// Removes the rows of nodes whose last heartbeat is older than `older_than`; how many.
    async fn nodes_sweep(&self, older_than: i64) -> Result<u64, Error>;

    /// Takes or renews a lease; `true` when `node` holds it until `now + ttl_ms`.
    async fn lease_acquire(&self, request: LeaseRequest) -> Result<bool, Error>;

    /// Gives up a lease `node` holds; `false` when it was not `node`'s.
    async fn lease_release(&self, key: LeaseKey) -> Result<bool, Error>;

    /// Writes a call for a pull executor whose connection another node holds; its id.
    async fn pull_call_put(&self, call: PullCallNew) -> Result<i64, Error>;

    /// Marks taken and returns the calls for the executors whose connections a node holds
    /// that nobody took and whose deadline has not passed (each is taken once: a call its
    /// writer withdrew meanwhile is not); deletes stale calls.
    async fn pull_calls_take(&self, take: PullCallsTake) -> Result<Vec<PullCall>, Error>;

    /// Writes a taken call's answer; `false` when it was answered already or is gone.
    async fn pull_call_answer(&self, answer: PullCallAnswer) -> Result<bool, Error>;

    /// Where a call is; an answered call is deleted as its answer is read.
    async fn pull_call_collect(&self, id: i64) -> Result<PullCallState, Error>;

    /// Deletes a call nobody took yet ([`PullCallState::Withdrawn`]); a taken one stays and
    /// its state is returned.
    async fn pull_call_withdraw(&self, id: i64) -> Result<PullCallState, Error>;

    /// News of pull calls written and answered by any node, as the database notifies them
    /// (PostgreSQL's `LISTEN`/`NOTIFY`); `None` where it cannot (the nodes poll). Notifications
    /// sent while the listening connection is lost are missed.
    async fn pull_wakeups(&self) -> Result<Option<tokio::sync::mpsc::Receiver<PullWake>>, Error>;
}

/// Alarms: the runs' alarm status, the channels, and the deliveries to them. Queueing a
/// run's alarm is the first step of delivery, so it lives here rather than in the ledger.
#[async_trait]
pub trait AlarmStore: Send + Sync {
    // ---- runs calling for an alarm ----

    /// Queues up to `limit` failed runs (failed, timed out, lost) for an alarm: their
    /// `alarm_status` moves from [`AlarmStatus::Undecided`] to [`AlarmStatus::Queued`],
    /// atomically, so a run is queued once whoever asks. Returns the runs queued now.
    async fn runs_queue_alarms(&self, limit: u32) -> Result<Vec<Run>, Error>;

    /// Up to `limit` runs queued for an alarm ([`AlarmStatus::Queued`]) whose deliveries are
    /// not written yet, by id.
    async fn runs_awaiting_alarm(&self, limit: u32) -> Result<Vec<Run>, Error>;

    // ---- channels and deliveries ----

    /// Creates an alarm channel. A taken name is a `Conflict`.
    async fn alarm_channel_create(&self, channel: AlarmChannelNew) -> Result<AlarmChannel, Error>;

    /// Rewrites a channel. Renaming a channel that jobs list is a `Conflict`.
    async fn alarm_channel_update(
        &self,
        channel: AlarmChannelUpdate,
    ) -> Result<AlarmChannel, Error>;

    /// Deletes a channel that no job lists (else `Conflict`); its pending deliveries end as
    /// failed, its past deliveries stay.
    async fn alarm_channel_delete(&self, id: i64, now: i64) -> Result<(), Error>;

    /// One channel by id.
    async fn alarm_channel_get(&self, id: i64) -> Result<AlarmChannel, Error>;

    /// Every channel, by id.
    async fn alarm_channels_list(&self) -> Result<Vec<AlarmChannel>, Error>;

    /// In one transaction, for each run still [`AlarmStatus::Queued`] and each of its
    /// channels: joins the job's open delivery on the channel (which counts the run) or writes
    /// a pending delivery of its own, due as [`tickwork_core::alarm::group`] decides. The run
    /// then moves to [`AlarmStatus::Delivering`] when it has a delivery of its own,
    /// [`AlarmStatus::Grouped`] when it only joined, [`AlarmStatus::NotNeeded`] when it has
    /// no channel. A (run, channel) pair that already has a delivery is skipped, whoever
    /// queues it again; so are unknown channel ids and runs no longer queued.
    async fn alarm_deliveries_queue(
        &self,
        queue: AlarmDeliveriesQueue,
    ) -> Result<AlarmDeliveriesQueued, Error>;

    /// Claims due pending deliveries (see [`DeliveryClaim`]): rows are locked with
    /// `SKIP LOCKED` and marked as the node's until the hold ends, so two claimers never get
    /// the same delivery. Oldest due first.
    async fn alarm_deliveries_claim_due(
        &self,
        claim: DeliveryClaim,
    ) -> Result<Vec<AlarmDelivery>, Error>;

    /// Records an attempt on a delivery the node claimed: sent, retry later, or failed for
    /// good, releasing the claim; a final outcome also moves the run's `alarm_status` from
    /// delivering (sent, or send-failed if any channel failed; see [`AlarmStatus`]). `false` (and no change) when the delivery is
    /// not pending or not claimed by this node any more.
    async fn alarm_delivery_finish(&self, finish: DeliveryFinish) -> Result<bool, Error>;

    /// One delivery by id.
    async fn alarm_delivery_get(&self, id: i64) -> Result<AlarmDelivery, Error>;

    /// One page of deliveries matching the filter, newest first.
    async fn alarm_deliveries_list(
        &self,
        filter: DeliveryFilter,
    ) -> Result<Paged<AlarmDelivery>, Error>;
}

/// The ledger's check of scheduled fires (rules in `tickwork_core::fire_check`): a cursor
/// behind which every fire is judged, the windows it reads, and the alerts it writes with
/// their alarm deliveries.
#[async_trait]
pub trait FireCheckStore: Send + Sync {
    /// The cursor's position, created at `start` when it has none.
    async fn fire_cursor_open(&self, open: CursorOpen) -> Result<i64, Error>;

    /// The fires of the scan's window that may be anything but on time: runs with a ledger
    /// key that are not final, missed, or reached their executor later than their job's
    /// lateness budget (a superset: the rules decide), each with its job's budget (0 when
    /// the job is gone). In order of (`scheduled_at`, run id).
    async fn fires_to_check(
        &self,
        scan: FireScan,
    ) -> Result<Vec<tickwork_core::fire_check::FireRecord>, Error>;

    /// The ledger keys of the scan's window held by more than one run (`limit` is ignored).
    async fn fires_doubled(
        &self,
        scan: FireScan,
    ) -> Result<Vec<tickwork_core::fire_check::DoubledFire>, Error>;

    /// The earliest `next_fire_at` of running jobs at or after `not_before`: fires before it
    /// are in the ledger, fires from it on are not claimed yet. `None` when no job waits.
    async fn jobs_first_unclaimed_fire(&self, not_before: i64) -> Result<Option<i64>, Error>;

    /// Writes a checked window's alerts, each new one with one pending delivery per enabled
    /// channel (see [`FireAlertsRecord`]). `None`, and nothing written, when the cursor was
    /// not at `from`.
    async fn fire_alerts_record(
        &self,
        record: FireAlertsRecord,
    ) -> Result<Option<Vec<FireAlertWritten>>, Error>;

    /// One alert by id.
    async fn fire_alert_get(&self, id: i64) -> Result<FireAlertRecord, Error>;

    /// The alerts written in `range` (by when they were written), per kind (kinds with none
    /// are absent).
    async fn fire_alerts_totals(&self, range: TimeRange) -> Result<Vec<FireAlertTotal>, Error>;

    /// The newest `limit` alerts written in `range`, newest first.
    async fn fire_alerts_recent(
        &self,
        range: TimeRange,
        limit: u32,
    ) -> Result<Vec<FireAlertRecord>, Error>;

    /// Deletes the alerts written before `before`; how many went.
    async fn fire_alerts_purge(&self, before: i64) -> Result<u64, Error>;
}

/// Operators and their credentials: users, console sessions and API tokens. The console's
/// authentication needs only this trait.
#[async_trait]
pub trait AccountStore: Send + Sync {
    // ---- users ----

    /// Creates a user. A taken username is a `Conflict`.
    async fn user_create(&self, user: UserNew) -> Result<User, Error>;

    /// Rewrites a user's role, groups, locale and disabled flag.
    async fn user_update(&self, update: UserUpdate) -> Result<User, Error>;

    /// Replaces a user's password hash.
    async fn user_set_password(&self, password: UserPassword) -> Result<(), Error>;

    /// Deletes a user with its sessions and API tokens (audit records keep the name).
    async fn user_delete(&self, id: i64) -> Result<(), Error>;

    /// One user by id.
    async fn user_get(&self, id: i64) -> Result<User, Error>;

    /// One user by name (exact, case-sensitive).
    async fn user_get_by_username(&self, username: &str) -> Result<User, Error>;

    /// Every user, by id.
    async fn users_list(&self) -> Result<Vec<User>, Error>;

    /// How many users exist (the first start creates the first admin when none does).
    async fn users_count(&self) -> Result<u64, Error>;

    // ---- sessions ----

    /// Stores a new session. A digest already stored is a `Conflict`.
    async fn session_create(&self, session: Session) -> Result<(), Error>;

    /// The session with this id digest, if it exists (expired or not: the caller decides).
    async fn session_get(&self, id_hash: &str) -> Result<Option<Session>, Error>;

    /// Moves a session's `last_seen_at`; whether it exists.
    async fn session_touch(&self, touch: SessionTouch) -> Result<bool, Error>;

    /// Deletes one session (logout); whether it existed.
    async fn session_delete(&self, id_hash: &str) -> Result<bool, Error>;

    /// Deletes every session of a user (password changed, user disabled); how many.
    async fn sessions_delete_for_user(&self, user_id: i64) -> Result<u64, Error>;

    /// Deletes sessions past their absolute end or idle too long; how many.
    async fn sessions_purge_expired(&self, purge: SessionPurge) -> Result<u64, Error>;

    // ---- API tokens ----

    /// Stores a new token (its digest). A missing user is `Invalid`.
    async fn api_token_create(&self, token: ApiTokenNew) -> Result<ApiToken, Error>;

    /// One token by id.
    async fn api_token_get(&self, id: i64) -> Result<ApiToken, Error>;

    /// The token with this digest, if any (revoked or not: the caller decides).
    async fn api_token_find(&self, token_hash: &str) -> Result<Option<ApiToken>, Error>;

    /// Records a use of a token.
    async fn api_token_touch(&self, touch: ApiTokenTouch) -> Result<(), Error>;

    /// Revokes a token; returns it as it is now.
    async fn api_token_revoke(&self, revoke: ApiTokenRevoke) -> Result<ApiToken, Error>;

    /// The tokens of one user, or of everyone, by id.
    async fn api_tokens_list(&self, user_id: Option<i64>) -> Result<Vec<ApiToken>, Error>;
}

/// The audit log of operator actions.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends one record; its id.
    async fn audit_append(&self, entry: AuditNew) -> Result<i64, Error>;

    /// One page of records matching the filter, newest first.
    async fn audit_list(&self, filter: AuditFilter) -> Result<Paged<AuditEntry>, Error>;
}

/// The version history of GLUE scripts.
#[async_trait]
pub trait ScriptStore: Send + Sync {
    /// Appends a version of a job's script, numbered one past the job's newest. A missing
    /// job is `NotFound`.
    async fn script_version_append(
        &self,
        version: ScriptVersionNew,
    ) -> Result<ScriptVersion, Error>;

    /// Every version of a job's script, newest first.
    async fn script_versions_list(&self, job_id: i64) -> Result<Vec<ScriptVersion>, Error>;

    /// One version of a job's script.
    async fn script_version_get(&self, key: ScriptVersionKey) -> Result<ScriptVersion, Error>;
}

/// Submissions from code: a client's key in an executor group and the job that carries it
/// out, written, read and cancelled together.
#[async_trait]
pub trait SubmissionStore: Send + Sync {
    /// Writes a submission in one transaction: a new key gets its job (`fires_left` set) and
    /// its row; a taken key is left as it is ([`OnConflict::Ignore`]) or has its job written
    /// over and its schedule replaced ([`OnConflict::Replace`]). A new key taken by a
    /// concurrent put meanwhile is a `Conflict`; a missing group is `Invalid`.
    async fn submission_put(&self, put: SubmissionPut) -> Result<SubmissionPutResult, Error>;

    /// One submission with its job; `NotFound` when the key is not there.
    async fn submission_get(&self, key: SubmissionKey) -> Result<SubmissionWithJob, Error>;

    /// Deletes a submission with its job and the job's runs, in one transaction, unless a run
    /// of it is planned, being sent or dispatched and the cancel does not allow that (a
    /// `Conflict`, and nothing changes). Returns what was deleted.
    async fn submission_cancel(&self, cancel: SubmissionCancel)
    -> Result<SubmissionWithJob, Error>;

    /// The ends of a group's submissions' runs that nobody acknowledged yet, oldest first.
    /// Every operation that ends runs writes the ends of submissions' runs in its own
    /// transaction, so none is lost and none is written twice.
    async fn submission_ends(
        &self,
        query: SubmissionEndsQuery,
    ) -> Result<Vec<SubmissionEnd>, Error>;

    /// Acknowledges ends of a group (deletes them); how many there were. Ids of other groups
    /// or already acknowledged are left alone.
    async fn submission_ends_ack(&self, ack: SubmissionEndsAck) -> Result<u64, Error>;

    /// Ends with a webhook channel whose next post is due by `due.now`, earliest first.
    async fn submission_ends_due(
        &self,
        due: SubmissionEndsDue,
    ) -> Result<Vec<SubmissionEnd>, Error>;

    /// Records a failed post of an end: one more attempt, the error, the next try.
    async fn submission_end_retry(&self, retry: SubmissionEndRetry) -> Result<(), Error>;
}

/// Workflows and their instances. An instance's nodes run as ordinary runs of the ledger; a
/// run's link to its node is written with the run (a retry's with the retry).
#[async_trait]
pub trait WorkflowStore: Send + Sync {
    /// Creates a workflow; a taken key is a `Conflict`.
    async fn workflow_create(&self, new: WorkflowNew) -> Result<Workflow, Error>;

    /// Rewrites a workflow's definition; its instances keep their snapshots.
    async fn workflow_update(&self, update: WorkflowUpdate) -> Result<Workflow, Error>;

    /// Deletes a workflow with its ended instances (their runs stay in the ledger); a
    /// `Conflict` while an instance is running or queued.
    async fn workflow_delete(&self, id: i64) -> Result<Workflow, Error>;

    /// One workflow by id.
    async fn workflow_get(&self, id: i64) -> Result<Workflow, Error>;

    /// One workflow by key.
    async fn workflow_get_by_key(&self, key: &str) -> Result<Workflow, Error>;

    /// Every workflow, by key.
    async fn workflows_list(&self) -> Result<Vec<Workflow>, Error>;

    /// Starts or stops a workflow's schedule.
    async fn workflow_set_status(&self, change: WorkflowStatusChange) -> Result<Workflow, Error>;

    /// Running workflows due at `now` (see [`WorkflowsDue`]).
    async fn workflows_due(&self, due: WorkflowsDue) -> Result<Vec<Workflow>, Error>;

    /// Claims a scheduled fire (see [`WorkflowFire`]); `None` when another admin claimed it.
    async fn workflow_fire(&self, fire: WorkflowFire) -> Result<Option<InstanceStarted>, Error>;

    /// Fires a workflow (see [`InstanceStart`]).
    async fn workflow_instance_start(&self, start: InstanceStart)
    -> Result<InstanceStarted, Error>;

    /// Steps an instance (see [`InstanceStep`]).
    async fn workflow_instance_step(&self, step: InstanceStep) -> Result<Stepped, Error>;

    /// One instance with its nodes' runs.
    async fn workflow_instance_get(&self, id: i64) -> Result<InstanceWithRuns, Error>;

    /// Instances matching the query, newest first.
    async fn workflow_instances_list(&self, query: InstancesQuery) -> Result<Vec<Instance>, Error>;

    /// The instances that `run_ids` belong to, each once.
    async fn workflow_instances_of_runs(&self, run_ids: &[i64]) -> Result<Vec<i64>, Error>;
}
