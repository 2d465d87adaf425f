//! What follows the end of a run: a retry after a failure, the child jobs after a success, and
//! the next fire of a job that waited for the run (fixed delay, cron after end).
//!
//! The admin asks this inside the transaction that ends the run, so that the run's end and
//! what follows it are written together or not at all.

use crate::run::RunState;
use crate::{ScheduleType, TriggerType};

/// The longest pause before a retry: one hour.
pub const MAX_RETRY_DELAY_MS: i64 = 3_600_000;

/// The pause before retry `attempt + 1`: the backoff doubled per attempt, at most
/// [`MAX_RETRY_DELAY_MS`]. A negative backoff counts as none.
pub fn retry_delay_ms(backoff_ms: i64, attempt: i32) -> i64 {
    let factor = 1i64 << attempt.clamp(0, 20);
    backoff_ms
        .max(0)
        .saturating_mul(factor)
        .min(MAX_RETRY_DELAY_MS)
}

/// A run that has just reached a final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndedRun {
    pub job_id: i64,
    pub state: RunState,
    /// 0 for a first run, n for the n-th retry.
    pub attempt: i32,
    pub trigger_type: TriggerType,
    /// When it ended: retries and the next fire of a job waiting for it count from here.
    pub at: i64,
}

/// What the run's job says about follow-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRules<'a> {
    pub schedule_type: ScheduleType,
    /// Retries after a failed run.
    pub retry_count: i32,
    /// The pause before the first retry (doubled per attempt).
    pub retry_backoff_ms: i64,
    /// Jobs fired when a run succeeds.
    pub child_job_ids: &'a [i64],
    /// The job is running and its next fire waits for the end of its current run (a
    /// fixed-delay or cron-after-end job between a fire and the end of that fire).
    pub waits_for_a_run: bool,
}

/// The follow-ups of one ended run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FollowUps {
    /// A retry, due at this instant.
    pub retry_at: Option<i64>,
    /// Jobs to fire now, each once, never the run's own job.
    pub children: Vec<i64>,
    /// The job's schedule moves on: its next fire is the schedule's first after `at`.
    pub next_fire: bool,
}

/// Whether any run of a job can have a follow-up: one that retries, has children or waits for
/// its runs' ends. A job for which this is false gets nothing from [`follow_ups`], whatever its
/// run, so a store ending runs need not read it (a workflow node's own rules aside).
pub fn can_follow(schedule_type: ScheduleType, retry_count: i32, has_children: bool) -> bool {
    retry_count > 0 || has_children || schedule_type.waits_for_end()
}

/// Decides the follow-ups of `run`:
/// - a failed, timed-out or lost run is retried while `attempt < retry_count` (a killed run
///   never: the kill was meant);
/// - a succeeded run fires its job's children;
/// - a scheduled run of a job that waits for its runs' ends (`FIX_DELAY`, `CRON_AFTER_END`:
///   its own fire or its misfire catch-up) moves the schedule on, whatever its end (misfired
///   and skipped too), when the job waits for it.
pub fn follow_ups(run: &EndedRun, job: &JobRules<'_>) -> FollowUps {
    let retry_at = match run.state {
        RunState::Failed | RunState::TimedOut | RunState::Lost if run.attempt < job.retry_count => {
            Some(
                run.at
                    .saturating_add(retry_delay_ms(job.retry_backoff_ms, run.attempt)),
            )
        }
        _ => None,
    };
    let mut children = Vec::new();
    if run.state == RunState::Succeeded {
        for &child in job.child_job_ids {
            if child != run.job_id && !children.contains(&child) {
                children.push(child);
            }
        }
    }
    let scheduled = run.trigger_type == job.schedule_type.trigger_type()
        || run.trigger_type == TriggerType::Misfire;
    let next_fire = job.schedule_type.waits_for_end()
        && scheduled
        && run.state.is_final()
        && job.waits_for_a_run;
    FollowUps {
        retry_at,
        children,
        next_fire,
    }
}
