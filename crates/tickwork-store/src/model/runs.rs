//! Runs: new ones, their transitions and what follows their end, filters, daily reports.

use tickwork_core::TriggerType;
use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::RunState;

use super::{Job, PageReq, TimeRange};

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
    /// The run's own timeout in seconds, over its job's: a workflow node's override (its
    /// retries keep it); `None` for the job's.
    pub timeout_s: Option<i32>,
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
    /// Its own timeout over the job's (a workflow node's override).
    pub timeout_s: Option<i32>,
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
            timeout_s: None,
            now,
        }
    }
}

/// Runs `node_id` takes to call `/run` (`planned -> sending`), in one statement. Only runs
/// still `planned` and owned by `node_id` move, and none while the node's heartbeat row is
/// older than `live_since` (a node paused past it may have lost them to another node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeginSend {
    pub node_id: String,
    pub run_ids: Vec<i64>,
    /// `None`: no heartbeat condition (a node no other node can share the database with).
    pub live_since: Option<i64>,
}

/// `sending` runs of `node_id` it never called `/run` for (held back, or queued when it
/// stopped): they become `planned` again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsend {
    pub node_id: String,
    pub run_ids: Vec<i64>,
}

/// A node that stops cleanly gives its `planned` runs back: they lose their owner, so that
/// the next node to look (another, or this one restarted) adopts them at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandBack {
    pub node_id: String,
}

/// The dispatch records `node_id` writes for runs it sent: only runs it still owns gain them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkDispatched {
    pub node_id: String,
    pub runs: Vec<Dispatched>,
}

/// Results of runs with the dispatch records `dispatched.node_id` had not written yet for
/// some of them: a run with both gains both in one update, one row version instead of two
/// (see [`RunLedger::runs_complete_dispatched`](crate::RunLedger::runs_complete_dispatched)).
#[derive(Debug, Clone, Copy)]
pub struct CompleteDispatched<'a> {
    pub results: &'a [RunComplete],
    /// Dispatch records, of runs among `results` or not.
    pub dispatched: &'a MarkDispatched,
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

/// A trigger that failed (no executor, `/run` refused): the run ends as `failed`, when
/// `node_id`, the node that tried, still owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerFailed {
    pub run_id: i64,
    pub node_id: String,
    /// The executor that refused, if one was called.
    pub address: Option<String>,
    pub trigger_code: i32,
    pub trigger_msg: String,
    pub at: i64,
}

/// A run of `node_id` that will not run, and why: `planned`, or `sending` and never sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSkip {
    pub run_id: i64,
    pub node_id: String,
    pub reason: String,
    pub at: i64,
}

/// Runs of `node_id` that will not run because their job was stopped: [`RunSkip`] for many
/// runs at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkSkipped {
    pub node_id: String,
    pub run_ids: Vec<i64>,
    /// Why, for operators (kept in `trigger_msg`).
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

impl RunComplete {
    /// Run `run_id` ended `lost` at `at` (the handle code of a failure), for `reason`.
    pub fn lost(run_id: i64, reason: String, at: i64) -> Self {
        RunComplete {
            run_id,
            handle_code: tickwork_core::HANDLE_CODE_FAIL,
            handle_msg: Some(reason),
            state: RunState::Lost,
            at,
        }
    }
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
