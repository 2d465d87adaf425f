//! The rows the store hands out and the parameters its operations take.
//!
//! Times are epoch milliseconds everywhere. Enumerations are the typed names of
//! `tickwork-core`; the store writes them by name and refuses to invent values.

use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::RunState;
use tickwork_core::{GlueType, TriggerType, misfire};

use crate::Error;

/// Declares a two-or-more valued status stored by name, with `as_str` and `FromStr`.
macro_rules! stored_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// The stored name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = Error;

            fn from_str(s: &str) -> Result<Self, Error> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::Invalid(format!(concat!($kind, " {:?} is unknown"), other))),
                }
            }
        }
    };
}

stored_enum! {
    /// Whether the scheduler fires a job.
    JobStatus, "job status" {
        /// Claimed and fired by the scheduler.
        Running = "running",
        /// Fires only by hand.
        Stopped = "stopped",
    }
}

stored_enum! {
    /// Where a group's executor addresses come from.
    AddressMode, "address mode" {
        /// From the registry (executors register themselves).
        Auto = "auto",
        /// From the group's own list.
        Manual = "manual",
    }
}

/// A page request: `limit` rows after skipping `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageReq {
    /// Rows to skip.
    pub offset: u64,
    /// Rows to return, 1 to [`PageReq::MAX_LIMIT`].
    pub limit: u64,
}

impl PageReq {
    /// The largest page the store serves.
    pub const MAX_LIMIT: u64 = 1000;

    /// The first `limit` rows.
    pub const fn first(limit: u64) -> Self {
        PageReq { offset: 0, limit }
    }
}

impl Default for PageReq {
    fn default() -> Self {
        PageReq::first(20)
    }
}

/// One page of a listing and the number of rows matching the filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paged<T> {
    /// The rows of this page.
    pub items: Vec<T>,
    /// All rows that match, on every page.
    pub total: u64,
}

/// A half-open time range `[from, to)`; an open end is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    /// Inclusive start.
    pub from: Option<i64>,
    /// Exclusive end.
    pub to: Option<i64>,
}

// ---- executor groups ----

/// An executor group (XXL: job group), keyed by its `app_name`.
#[derive(Clone, PartialEq, Eq)]
pub struct Group {
    pub id: i64,
    /// The AppName executors register under. Unique.
    pub app_name: String,
    pub title: String,
    pub address_mode: AddressMode,
    /// The manual address list (used when `address_mode` is manual).
    pub addresses: Vec<String>,
    /// The group's own executor access token; `None`: the admin's global one applies.
    /// Kept as it is because the admin sends it to the group's executors.
    pub access_token: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

// By hand, so that a logged group never shows its token.
impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("id", &self.id)
            .field("app_name", &self.app_name)
            .field("title", &self.title)
            .field("address_mode", &self.address_mode)
            .field("addresses", &self.addresses)
            .field("access_token", &self.access_token.as_ref().map(|_| "***"))
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// Sets (or clears) a group's own access token.
#[derive(Clone, PartialEq, Eq)]
pub struct GroupTokenSet {
    pub id: i64,
    /// The new token; `None` goes back to the global token.
    pub token: Option<String>,
    pub now: i64,
}

impl std::fmt::Debug for GroupTokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTokenSet")
            .field("id", &self.id)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("now", &self.now)
            .finish()
    }
}

/// The executor group a run was fired for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunGroup {
    pub run_id: i64,
    pub group_id: i64,
}

/// A group to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupNew {
    pub app_name: String,
    pub title: String,
    pub address_mode: AddressMode,
    pub addresses: Vec<String>,
    pub now: i64,
}

/// New values for every editable field of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupUpdate {
    pub id: i64,
    pub app_name: String,
    pub title: String,
    pub address_mode: AddressMode,
    pub addresses: Vec<String>,
    pub now: i64,
}

// ---- registry ----

/// One executor heartbeat (`/api/registry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryBeat {
    pub app_name: String,
    pub address: String,
    pub now: i64,
}

/// One registry row's identity (`/api/registryRemove`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryKey {
    pub app_name: String,
    pub address: String,
}

/// The live addresses of one app: those that beat at or after `alive_since`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveQuery {
    pub app_name: String,
    pub alive_since: i64,
}

/// One registry row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    pub app_name: String,
    pub address: String,
    pub updated_at: i64,
}

// ---- jobs ----

/// The editable definition of a job: what `job_create` and `job_update` write. It is core's,
/// so the admin validates the very type the store writes, against the same limits.
pub use tickwork_core::job::JobSpec;

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: i64,
    /// Stable unique key, for import/export and jobs-as-code.
    pub key: String,
    pub spec: JobSpec,
    pub status: JobStatus,
    /// The next instant the scheduler claims; `None` when nothing is scheduled.
    pub next_fire_at: Option<i64>,
    /// The latest fire the scheduler planned.
    pub last_fire_at: Option<i64>,
    /// When the script (glue type or source) last changed.
    pub glue_updated_at: i64,
    /// Bumped by every `job_update`, for optimistic edits.
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A job to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobNew {
    pub key: String,
    pub spec: JobSpec,
    pub status: JobStatus,
    /// The first fire, computed by the admin; `None` for a stopped job.
    pub next_fire_at: Option<i64>,
    pub now: i64,
}

/// New values for a job's definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobUpdate {
    pub id: i64,
    /// `Some(v)`: apply only if the job is still at version `v` (else `Conflict`).
    /// `None`: last write wins.
    pub expected_version: Option<i64>,
    pub spec: JobSpec,
    /// The next fire under the new schedule, written as given (`None` = nothing scheduled).
    /// Re-planning a fire that was already claimed is harmless: the ledger skips it.
    pub next_fire_at: Option<i64>,
    pub now: i64,
}

/// Which jobs to list. Text matches description, handler, key and owner, ignoring ASCII case.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobFilter {
    pub group_id: Option<i64>,
    pub status: Option<JobStatus>,
    pub text: Option<String>,
    pub page: PageReq,
}

/// Start or stop a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatusChange {
    pub id: i64,
    pub status: JobStatus,
    /// The next fire when starting; `None` when stopping.
    pub next_fire_at: Option<i64>,
    pub now: i64,
}

/// Move a running job's next fire (fixed delay: counted from a completion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobNextFire {
    pub id: i64,
    pub next_fire_at: Option<i64>,
}

// ---- the claim ----

/// One claim round of one admin node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimParams {
    /// Written as the planned runs' `owner_node`.
    pub node_id: String,
    pub now: i64,
    /// Jobs whose `next_fire_at <= now + lookahead_ms` are claimed.
    pub lookahead_ms: i64,
    /// At most this many jobs per round.
    pub limit: u32,
}

/// One fire the planner decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFire {
    /// The schedule's instant this fire stands for: the ledger key. Unique per job.
    pub fire_key: i64,
    /// When the run fires: `fire_key`, or the planning instant for a misfire catch-up.
    pub scheduled_at: i64,
    pub trigger_type: TriggerType,
    /// `planned` (fires) or `misfired` (recorded, never fires).
    pub state: RunState,
}

impl PlannedFire {
    /// A fire on time, at its scheduled instant.
    pub const fn on_time(at: i64, trigger_type: TriggerType) -> Self {
        PlannedFire {
            fire_key: at,
            scheduled_at: at,
            trigger_type,
            state: RunState::Planned,
        }
    }

    /// A fire recorded as misfired: it never runs, but the ledger shows it was decided.
    pub const fn misfired(at: i64, trigger_type: TriggerType) -> Self {
        PlannedFire {
            fire_key: at,
            scheduled_at: at,
            trigger_type,
            state: RunState::Misfired,
        }
    }

    /// Translates one decision of [`tickwork_core::misfire::plan`]; `scheduled` is the
    /// trigger type of the job's schedule (`CRON`, `FIX_RATE`, ...).
    pub fn from_misfire(fire: &misfire::PlannedFire, scheduled: TriggerType) -> Self {
        PlannedFire {
            fire_key: fire.scheduled_at,
            scheduled_at: fire.fire_at().unwrap_or(fire.scheduled_at),
            trigger_type: fire.trigger_type(scheduled).unwrap_or(scheduled),
            state: fire.state(),
        }
    }
}

/// What the planner decided for one claimed job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobPlan {
    /// Every fire of the window, each with a distinct `fire_key`.
    pub fires: Vec<PlannedFire>,
    /// Where the job continues; `None` stops it.
    pub next_fire_at: Option<i64>,
}

/// The schedule math the admin supplies to a claim: called once per claimed job with the
/// claim's `now`, inside the claim transaction, so it must be quick and must not block.
pub type Planner<'a> = dyn Fn(&Job, i64) -> JobPlan + Send + Sync + 'a;

/// What one claim round did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimResult {
    /// The runs written as `planned`, ordered by `scheduled_at`: the timer fires these.
    pub runs: Vec<Run>,
    /// Jobs claimed (planned, advanced or stopped).
    pub jobs: usize,
    /// Runs written as `misfired`.
    pub misfired: usize,
    /// Fires the ledger already held, so not written again.
    pub duplicates: usize,
}

// ---- runs ----

/// One run (XXL: log row); `id` is the XXL `logId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub id: i64,
    pub job_id: i64,
    pub group_id: i64,
    /// When the run fires (or fired).
    pub scheduled_at: i64,
    /// The ledger key of a scheduled fire; `None` for manual, API, retry and parent runs.
    pub fire_key: Option<i64>,
    pub trigger_type: TriggerType,
    /// 0 for a first run, n for the n-th retry.
    pub attempt: i32,
    pub parent_run_id: Option<i64>,
    pub executor_address: Option<String>,
    pub handler: String,
    pub params: String,
    pub shard_index: Option<i32>,
    pub shard_total: Option<i32>,
    pub state: RunState,
    /// 0 until the trigger outcome is recorded, then 200 or the failure code.
    pub trigger_code: i32,
    pub trigger_msg: Option<String>,
    /// 0 until the result is recorded.
    pub handle_code: i32,
    pub handle_msg: Option<String>,
    /// Where the run's alarm stands; stored as XXL-JOB's integers.
    pub alarm_status: AlarmStatus,
    /// The admin node whose timer holds the run while it is planned.
    pub owner_node: Option<String>,
    pub priority: i32,
    pub created_at: i64,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// A run outside the schedule: manual, API, retry, parent or misfire. It has no ledger key,
/// so any number of them coexist. Group, handler and priority come from the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNew {
    pub job_id: i64,
    pub trigger_type: TriggerType,
    pub scheduled_at: i64,
    pub attempt: i32,
    pub parent_run_id: Option<i64>,
    /// `None`: the job's own params.
    pub params: Option<String>,
    /// A chosen executor, when the caller picked one.
    pub executor_address: Option<String>,
    pub shard_index: Option<i32>,
    pub shard_total: Option<i32>,
    pub owner_node: Option<String>,
    pub now: i64,
}

impl RunNew {
    /// A first attempt of `job_id` with the job's params, firing at `now`.
    pub fn new(job_id: i64, trigger_type: TriggerType, now: i64) -> Self {
        RunNew {
            job_id,
            trigger_type,
            scheduled_at: now,
            attempt: 0,
            parent_run_id: None,
            params: None,
            executor_address: None,
            shard_index: None,
            shard_total: None,
            owner_node: None,
            now,
        }
    }
}

/// The recorded outcome of one accepted `/run` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    pub run_id: i64,
    pub address: String,
    pub trigger_code: i32,
    pub trigger_msg: Option<String>,
    pub at: i64,
}

/// A trigger that failed (no executor, `/run` refused): the run ends as `failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerFailed {
    pub run_id: i64,
    /// The executor that refused, if one was called.
    pub address: Option<String>,
    pub trigger_code: i32,
    pub trigger_msg: String,
    pub at: i64,
}

/// A planned run that will not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSkip {
    pub run_id: i64,
    pub reason: String,
    pub at: i64,
}

/// A run's shard in a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunShard {
    pub run_id: i64,
    pub index: i32,
    pub total: i32,
}

/// A run's result (callback, kill, lost-run monitor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunComplete {
    pub run_id: i64,
    pub handle_code: i32,
    pub handle_msg: Option<String>,
    /// One of succeeded, failed, timed_out, killed, lost.
    pub state: RunState,
    pub at: i64,
}

/// What follows one run that has just ended, as the admin's follow-up planner decides it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FollowUpPlan {
    /// Runs to write as `planned` (a retry, the child jobs' runs). A run of a job that no
    /// longer exists is skipped.
    pub runs: Vec<RunNew>,
    /// The job's new next fire, when the run's end moves its schedule on (a fixed-delay job
    /// waiting for this run). Written only while the job is running and its `next_fire_at`
    /// is still the one the planner was shown.
    pub next_fire_at: Option<i64>,
}

/// The follow-up math the admin supplies to every operation that ends runs: called once per
/// run that reached its final state, with the run as it is now and its job as stored, inside
/// the transaction that ended the run, so it must be quick and must not block. A run whose
/// job is gone has no follow-ups and is not shown.
pub type FollowUps<'a> = dyn Fn(&Run, &Job) -> FollowUpPlan + Send + Sync + 'a;

/// A [`FollowUps`] planner that plans nothing, for tools and tests that end runs by hand
/// (the admin always passes its own).
pub const NO_FOLLOW_UPS: &FollowUps<'static> = &|_: &Run, _: &Job| FollowUpPlan::default();

/// What an operation that ends runs wrote, all in one transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ended {
    /// The runs that reached their final state now.
    pub runs: Vec<Run>,
    /// The follow-up runs written (`planned`, owned as the planner said), by `scheduled_at`:
    /// the caller arms them.
    pub follow_ups: Vec<Run>,
    /// The jobs whose next fire moved.
    pub advanced_jobs: Vec<i64>,
}

/// An operator's kill of a dispatched run, recorded before `/kill` is sent (`at`), or
/// withdrawn when the executor refused it (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKillIntent {
    pub run_id: i64,
    pub at: Option<i64>,
}

/// Which runs to list, newest first. The time range applies to `scheduled_at`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunFilter {
    pub job_id: Option<i64>,
    pub group_id: Option<i64>,
    pub state: Option<RunState>,
    pub range: TimeRange,
    pub page: PageReq,
}

// ---- reports ----

/// Run counts of one day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunReport {
    /// The day's first instant (midnight in the admin's zone).
    pub day: i64,
    pub running: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub updated_at: i64,
}

// ---- cluster ----

/// One admin node's heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBeat {
    pub id: String,
    pub address: String,
    pub now: i64,
}

/// An admin node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub address: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
}

/// Take or renew lease `name` for `node` until `now + ttl_ms`: granted when it is free,
/// expired, or already `node`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    pub name: String,
    pub node: String,
    pub ttl_ms: i64,
    pub now: i64,
}

/// A lease and the node that means to give it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseKey {
    pub name: String,
    pub node: String,
}

/// Take over `planned` runs whose owner is gone: owned by no node, by a node whose row is gone
/// (it left), or by a node whose last heartbeat is older than `dead_before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptParams {
    /// The adopting node: the runs' new `owner_node`. Its own runs are never adopted.
    pub node_id: String,
    /// An owner whose heartbeat is older than this is dead.
    pub dead_before: i64,
    /// At most this many runs per call, oldest `scheduled_at` first.
    pub limit: u32,
}

/// Which of `run_ids` are still `planned` and owned by `node_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRuns {
    pub node_id: String,
    pub run_ids: Vec<i64>,
}

/// Planned runs of `node_id` that the misfire policy decided not to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkMisfired {
    pub node_id: String,
    pub run_ids: Vec<i64>,
    /// Why, for operators (kept in `trigger_msg`).
    pub reason: String,
    pub at: i64,
}

/// A planned run of `node_id` that becomes the catch-up of its job's late fires
/// (`FIRE_ONCE_NOW`): it fires at `at` with trigger type `misfire`, keeping its ledger key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    pub run_id: i64,
    pub node_id: String,
    pub at: i64,
    /// The earliest late fire of the job: a catch-up of the job scheduled at or after it
    /// (written by a claim, or by another node) already covers this run.
    pub late_since: i64,
}

/// Runs that look lost: `dispatched` before `dispatched_before`, and their executor has not
/// beaten since `alive_since` (or is not registered at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostQuery {
    pub dispatched_before: i64,
    pub alive_since: i64,
    /// At most this many, oldest dispatch first.
    pub limit: u32,
}

/// One retention batch: at most `limit` final runs scheduled before `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPurge {
    pub before: i64,
    pub limit: u32,
}

// ---- alarms ----

stored_enum! {
    /// How an alarm channel delivers.
    AlarmKind, "alarm channel kind" {
        /// Email over SMTP.
        Email = "email",
        /// A JSON POST signed with HMAC-SHA256.
        Webhook = "webhook",
        /// A DingTalk group robot.
        DingTalk = "dingtalk",
        /// A WeCom group robot.
        WeCom = "wecom",
        /// A Feishu (Lark) custom bot.
        Feishu = "feishu",
        /// A Slack incoming webhook.
        Slack = "slack",
    }
}

impl AlarmKind {
    /// Every kind, in the order the API lists them.
    pub const ALL: [AlarmKind; 6] = [
        AlarmKind::Email,
        AlarmKind::Webhook,
        AlarmKind::DingTalk,
        AlarmKind::WeCom,
        AlarmKind::Feishu,
        AlarmKind::Slack,
    ];
}

stored_enum! {
    /// Where an alarm delivery stands.
    DeliveryState, "alarm delivery state" {
        /// Waiting for its next attempt (or being sent by the node that claimed it).
        Pending = "pending",
        /// Delivered.
        Sent = "sent",
        /// Given up after the last attempt.
        Failed = "failed",
    }
}

/// A named place alarms go to. `config` is the kind's settings as JSON text; the store keeps
/// it as given (the admin validates it and hides its secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmChannel {
    pub id: i64,
    /// Unique; jobs list the names of their channels.
    pub name: String,
    pub kind: AlarmKind,
    pub config: String,
    /// A disabled channel gets no new deliveries.
    pub enabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A new alarm channel. A taken name is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmChannelNew {
    pub name: String,
    pub kind: AlarmKind,
    pub config: String,
    pub enabled: bool,
    pub now: i64,
}

/// Rewrites a channel. A rename of a channel that jobs use is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmChannelUpdate {
    pub id: i64,
    pub name: String,
    pub kind: AlarmKind,
    pub config: String,
    pub enabled: bool,
    pub now: i64,
}

/// One alarm of one run on one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmDelivery {
    pub id: i64,
    pub run_id: i64,
    pub channel_id: i64,
    /// The channel's name and kind when the delivery was queued (kept if it goes).
    pub channel_name: String,
    pub kind: AlarmKind,
    pub state: DeliveryState,
    /// Attempts finished so far (sent or failed).
    pub attempts: i32,
    /// A pending delivery is due from this instant.
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    /// The node sending it, until `claimed_until`.
    pub claimed_by: Option<String>,
    pub claimed_until: Option<i64>,
    pub sent_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The channels one queued run alarms on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAlarm {
    pub run_id: i64,
    /// Channel ids; empty when the job has none (the run then needs no alarm).
    pub channel_ids: Vec<i64>,
}

/// Queues the deliveries of runs waiting for an alarm ([`AlarmStatus::Queued`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmDeliveriesQueue {
    pub runs: Vec<RunAlarm>,
    pub now: i64,
}

/// Takes up to `limit` pending deliveries due at `now` for `node_id`, which has until
/// `now + hold_ms` to finish them before another node may take them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryClaim {
    pub node_id: String,
    pub now: i64,
    pub hold_ms: i64,
    pub limit: u32,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Delivered.
    Sent,
    /// Failed; try again at `next_attempt_at`.
    Retry { error: String, next_attempt_at: i64 },
    /// Failed for the last time.
    Failed { error: String },
}

/// Records the attempt `node_id` made on delivery `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFinish {
    pub id: i64,
    pub node_id: String,
    pub outcome: DeliveryOutcome,
    pub now: i64,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub run_id: Option<i64>,
    pub state: Option<DeliveryState>,
    pub page: PageReq,
}

// ---- users, sessions, API tokens ----

stored_enum! {
    /// What a console user or API token may do.
    UserRole, "role" {
        /// Everything, including users and tokens of others.
        Admin = "admin",
        /// Changes jobs and runs of the executor groups in its `group_ids`; reads everything.
        Operator = "operator",
        /// Reads everything, changes nothing.
        Viewer = "viewer",
    }
}

/// A console user. `password_hash` is an Argon2id PHC string, never a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    /// Unique.
    pub username: String,
    pub password_hash: String,
    pub role: UserRole,
    /// The executor groups an operator may change (empty for other roles).
    pub group_ids: Vec<i64>,
    /// The console language the user chose, e.g. `en` or `zh-CN`.
    pub locale: Option<String>,
    pub disabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A user to create. A taken username is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserNew {
    pub username: String,
    pub password_hash: String,
    pub role: UserRole,
    pub group_ids: Vec<i64>,
    pub locale: Option<String>,
    pub now: i64,
}

/// The editable fields of a user (everything but name and password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserUpdate {
    pub id: i64,
    pub role: UserRole,
    pub group_ids: Vec<i64>,
    pub locale: Option<String>,
    pub disabled: bool,
    pub now: i64,
}

/// A new password hash for a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPassword {
    pub id: i64,
    pub password_hash: String,
    pub now: i64,
}

/// A console session. The session id itself is only in the browser's cookie; the store keeps
/// its SHA-256 digest, so a copy of the database cannot be used to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id_hash: String,
    pub user_id: i64,
    pub csrf_token: String,
    pub created_at: i64,
    /// Absolute end, whatever the activity.
    pub expires_at: i64,
    /// Last request; the idle timeout counts from here.
    pub last_seen_at: i64,
}

/// Moves a session's `last_seen_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionTouch {
    pub id_hash: String,
    pub now: i64,
}

/// Which sessions are over: past their absolute end at `now`, or unused since `idle_before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPurge {
    pub now: i64,
    pub idle_before: i64,
}

/// An API token. Only the SHA-256 digest of the secret is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub id: i64,
    pub name: String,
    pub token_hash: String,
    /// The token acts with this user's role.
    pub user_id: i64,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A token to create. A digest already stored is a `Conflict`; a missing user is `Invalid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTokenNew {
    pub name: String,
    pub token_hash: String,
    pub user_id: i64,
    pub now: i64,
}

/// Records that a token was used at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiTokenTouch {
    pub id: i64,
    pub now: i64,
}

/// Revokes a token at `now` (a revoked token stays revoked, with its first revocation time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiTokenRevoke {
    pub id: i64,
    pub now: i64,
}

// ---- audit log ----

/// One recorded change: who, when, what, and the target before and after (JSON texts that
/// never hold password hashes or token secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    /// The acting user's id; `None` for the built-in API token and the system itself.
    pub actor_id: Option<i64>,
    /// The acting user's name as it was then.
    pub actor: String,
    /// What was done, e.g. `job.update`.
    pub action: String,
    /// What it was done to: `job`, `group`, `run`, `user`, `api_token`, ...
    pub target_type: String,
    pub target_id: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// An audit record to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditNew {
    pub at: i64,
    pub actor_id: Option<i64>,
    pub actor: String,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// Which audit records to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub target_type: Option<String>,
    pub target_id: Option<String>,
    pub range: TimeRange,
    pub page: PageReq,
}

// ---- script versions ----

/// One saved version of a script job's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptVersion {
    pub id: i64,
    pub job_id: i64,
    /// 1, 2, 3, ... per job.
    pub version: i64,
    pub glue_type: GlueType,
    pub source: String,
    pub comment: String,
    pub author: String,
    pub created_at: i64,
}

/// A version to append: it gets the job's next version number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptVersionNew {
    pub job_id: i64,
    pub glue_type: GlueType,
    pub source: String,
    pub comment: String,
    pub author: String,
    pub now: i64,
}

/// One version of one job's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptVersionKey {
    pub job_id: i64,
    pub version: i64,
}

/// Which final runs an operator clears: scheduled before `before`, optionally of one job or
/// one group. Runs still pending are never cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunClear {
    pub before: i64,
    pub job_id: Option<i64>,
    pub group_id: Option<i64>,
}
