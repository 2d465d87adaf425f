//! The misfire decision: what to do with fires that are too late.
//!
//! The admin claims a job's fires for a look-ahead window, or adopts a dead node's planned runs,
//! and asks [`plan`] what becomes of each one. The plan names every input instant exactly once,
//! so the caller can write one run row per instant and the (job, fire time) key keeps holding.

use crate::{MisfireStrategy, TriggerType, run::RunState};

/// A usual misfire threshold: fires more than this late are misfires (XXL-JOB's 5 s).
pub const DEFAULT_THRESHOLD_MS: i64 = 5_000;

/// What becomes of one scheduled instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireDecision {
    /// Not late: fire at the scheduled instant, with the schedule's own trigger type.
    OnTime,
    /// Late and not run: record it as misfired.
    Misfired,
    /// Late, and stands for the whole group of late fires: fire once at `fire_at` (the
    /// planning instant) with trigger type `MISFIRE`.
    CatchUp {
        /// When the catch-up run fires: `now`.
        fire_at: i64,
    },
}

/// One input instant and its fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFire {
    /// The instant the schedule gave, as passed in.
    pub scheduled_at: i64,
    /// What to do with it.
    pub decision: FireDecision,
}

impl PlannedFire {
    /// When this fire runs, or `None` when it does not.
    pub const fn fire_at(&self) -> Option<i64> {
        match self.decision {
            FireDecision::OnTime => Some(self.scheduled_at),
            FireDecision::CatchUp { fire_at } => Some(fire_at),
            FireDecision::Misfired => None,
        }
    }

    /// The trigger type of the run this fire makes, given the schedule's own (`CRON`,
    /// `FIX_RATE`, ...); `None` when it does not run.
    pub const fn trigger_type(&self, scheduled: TriggerType) -> Option<TriggerType> {
        match self.decision {
            FireDecision::OnTime => Some(scheduled),
            FireDecision::CatchUp { .. } => Some(TriggerType::Misfire),
            FireDecision::Misfired => None,
        }
    }

    /// The state the fire's run row takes: `planned` when it runs, `misfired` when it does not.
    pub const fn state(&self) -> RunState {
        match self.decision {
            FireDecision::OnTime | FireDecision::CatchUp { .. } => RunState::Planned,
            FireDecision::Misfired => RunState::Misfired,
        }
    }
}

/// The fate of every input instant, in input order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MisfirePlan {
    /// One entry per input instant, in the order given.
    pub fires: Vec<PlannedFire>,
}

impl MisfirePlan {
    /// The catch-up fire, if any (at most one).
    pub fn catch_up(&self) -> Option<&PlannedFire> {
        self.fires
            .iter()
            .find(|f| matches!(f.decision, FireDecision::CatchUp { .. }))
    }

    /// How many fires run (on time or caught up).
    pub fn run_count(&self) -> usize {
        self.fires.iter().filter(|f| f.fire_at().is_some()).count()
    }

    /// How many fires are recorded as misfired.
    pub fn misfired_count(&self) -> usize {
        self.fires
            .iter()
            .filter(|f| f.decision == FireDecision::Misfired)
            .count()
    }
}

/// Whether a fire scheduled at `scheduled_at` is a misfire at `now_ms`: strictly more than
/// `threshold_ms` late. A negative threshold counts as zero.
pub const fn is_late(scheduled_at: i64, now_ms: i64, threshold_ms: i64) -> bool {
    let threshold = if threshold_ms < 0 { 0 } else { threshold_ms };
    scheduled_at < now_ms.saturating_sub(threshold)
}

/// Decides the fate of each instant in `scheduled` (any order) at `now_ms`.
///
/// On-time instants fire as scheduled. Late ones (see [`is_late`]) are all misfired under
/// `DO_NOTHING`; under `FIRE_ONCE_NOW` the latest late instant becomes the one catch-up run,
/// firing at `now_ms`, and the others are misfired. The latest is chosen because it is the fire
/// the job would have had most recently, so its parameters and ledger key are the least stale.
pub fn plan(
    policy: MisfireStrategy,
    scheduled: &[i64],
    now_ms: i64,
    threshold_ms: i64,
) -> MisfirePlan {
    let late = |at: i64| is_late(at, now_ms, threshold_ms);
    // The first position of the latest late instant, so duplicates still yield one catch-up.
    let catch_up = match policy {
        MisfireStrategy::DoNothing => None,
        MisfireStrategy::FireOnceNow => scheduled
            .iter()
            .enumerate()
            .filter(|&(_, &at)| late(at))
            .fold(None, |best: Option<(usize, i64)>, (i, &at)| match best {
                Some((_, b)) if b >= at => best,
                _ => Some((i, at)),
            })
            .map(|(i, _)| i),
    };
    let fires = scheduled
        .iter()
        .enumerate()
        .map(|(i, &scheduled_at)| PlannedFire {
            scheduled_at,
            decision: if !late(scheduled_at) {
                FireDecision::OnTime
            } else if catch_up == Some(i) {
                FireDecision::CatchUp { fire_at: now_ms }
            } else {
                FireDecision::Misfired
            },
        })
        .collect();
    MisfirePlan { fires }
}
