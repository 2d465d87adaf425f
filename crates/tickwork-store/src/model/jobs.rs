//! Jobs and the claim that plans their fires.

use std::sync::Arc;

use tickwork_core::run::RunState;
use tickwork_core::{TriggerType, misfire};

use super::{JobStatus, PageReq, Run};

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
    /// Fires it has left, counted down by the claim (a submission's repeat count); `None`:
    /// no bound.
    pub fires_left: Option<i64>,
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

/// Which jobs to list, in which order. Text matches description, handler, key and owner,
/// ignoring ASCII case.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobFilter {
    pub group_id: Option<i64>,
    pub status: Option<JobStatus>,
    pub text: Option<String>,
    pub sort: JobSort,
    pub page: PageReq,
}

stored_enum! {
    /// What a job listing is ordered by (named as the API and the console's links name it).
    JobSortKey, "job sort" {
        /// The job's id.
        Id = "id",
        /// The description, ignoring ASCII case.
        Description = "description",
        /// The executor group's title (its app name when it has none), ignoring ASCII case.
        Group = "group",
        /// The next fire; jobs with none come last either way.
        NextFire = "next_fire",
        /// When the job's last run (see [`RunLedger::runs_last_of_jobs`]) was scheduled; jobs
        /// that never ran come last either way.
        ///
        /// [`RunLedger::runs_last_of_jobs`]: crate::RunLedger::runs_last_of_jobs
        LastRun = "last_run",
    }
}

impl JobSortKey {
    /// Every key, in the order the console shows its columns.
    pub const ALL: &'static [JobSortKey] = &[
        JobSortKey::Id,
        JobSortKey::Description,
        JobSortKey::Group,
        JobSortKey::NextFire,
        JobSortKey::LastRun,
    ];
}

/// The order of a job listing, done by the database. Ties are broken by id in the same
/// direction, so pages never overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSort {
    pub key: JobSortKey,
    pub descending: bool,
}

impl Default for JobSort {
    /// By id, ascending.
    fn default() -> Self {
        JobSort {
            key: JobSortKey::Id,
            descending: false,
        }
    }
}

/// Start or stop many jobs together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsStatusChange {
    pub status: JobStatus,
    /// Each job by id with its next fire: the first one when starting, `None` when stopping.
    pub jobs: Vec<(i64, Option<i64>)>,
    pub now: i64,
}

/// Move a running job's next fire (fixed delay: counted from a completion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobNextFire {
    pub id: i64,
    pub next_fire_at: Option<i64>,
}

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

/// What a claim reads of a job every time, beside its definition: the columns the claim itself
/// moves, as they are now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobDue {
    pub next_fire_at: Option<i64>,
    pub last_fire_at: Option<i64>,
    pub fires_left: Option<i64>,
}

impl Job {
    /// This row's [`JobDue`] columns.
    pub fn due(&self) -> JobDue {
        JobDue {
            next_fire_at: self.next_fire_at,
            last_fire_at: self.last_fire_at,
            fires_left: self.fires_left,
        }
    }
}

/// The schedule math the admin supplies to a claim: called once per claimed job with the
/// claim's `now`, inside the claim transaction, so it must be quick and must not block.
///
/// A closure `Fn(&Job, i64) -> JobPlan` is one: it holds no jobs, so the claim reads each
/// job's whole row and passes it.
pub trait ClaimPlanner: Send + Sync {
    /// Job `id`'s definition when the planner holds it at `version` (and `created_at`, so that
    /// a row under a reissued id is never taken for the old one): the claim then reads only
    /// the job's [`JobDue`] columns, not its whole row, and plans with this definition, whose
    /// own due columns may be older than the ones it passes. A definition changes only with
    /// the version.
    fn known(&self, id: i64, version: i64, created_at: i64) -> Option<Arc<Job>> {
        let _ = (id, version, created_at);
        None
    }

    /// The fires of `job` at `now`, its due columns being `due` (those inside `job` may be
    /// older when it came from [`ClaimPlanner::known`]).
    fn plan(&self, job: &Job, due: JobDue, now: i64) -> JobPlan;
}

impl<F: Fn(&Job, i64) -> JobPlan + Send + Sync> ClaimPlanner for F {
    fn plan(&self, job: &Job, _due: JobDue, now: i64) -> JobPlan {
        // Never given a job from `known`: this row was read whole, its due columns included.
        self(job, now)
    }
}

/// The planner a claim is given (see [`ClaimPlanner`]).
pub type Planner<'a> = dyn ClaimPlanner + 'a;

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

/// One job of [`JobStore::jobs_create`](crate::JobStore::jobs_create): the job, and the first
/// version of its script when it has one to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCreate {
    pub job: JobNew,
    /// Written as the job's script version 1 (its glue type and source, at `job.now`).
    pub first_script: Option<FirstScript>,
}

/// Who wrote a new job's script, and the comment of its first version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstScript {
    pub author: String,
    pub comment: String,
}

/// The audit record of a job just written, given its index in the batch and the job as
/// stored (with its id): the admin's, which knows the record's format. Called inside the
/// transaction, so it must be quick and must not block.
pub type JobAudit<'a> =
    dyn Fn(usize, &Job) -> Result<super::AuditNew, crate::Error> + Send + Sync + 'a;
