//! Block policies: what an executor does with a run of a job that is already busy.
//!
//! The messages are XXL-JOB's, byte for byte (including the full-width colon `：`), because
//! they end up in run records that operators of mixed Java/Tickwork fleets compare and search.

use crate::BlockStrategy;

/// The `/run` refusal message of `DISCARD_LATER` on a busy worker.
pub const DISCARD_LATER_MESSAGE: &str = "block strategy effect：Discard Later";

/// The kill reason given to the runs that `COVER_EARLY` replaces.
pub const COVER_EARLY_REASON: &str = "block strategy effect：Cover Early";

/// What a job's worker is doing when a new run arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkerState {
    /// A run of the job is executing right now.
    pub running: bool,
    /// How many runs wait in the worker's queue.
    pub queued: usize,
}

impl WorkerState {
    /// Whether the worker has anything to do: a run in progress or one waiting.
    pub const fn is_busy(self) -> bool {
        self.running || self.queued > 0
    }
}

/// What to do with the new run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockDecision {
    /// Put it at the end of the worker's queue.
    Enqueue,
    /// Refuse it; `message` is the `/run` answer (with code 500).
    Reject { message: &'static str },
    /// Kill the running run and every queued one with `reason`, then run the new one.
    ReplaceRunning { reason: &'static str },
}

/// Applies `strategy` to a new run arriving at a worker in state `worker`. An idle worker
/// always takes the run, whatever the strategy.
pub const fn decide(strategy: BlockStrategy, worker: WorkerState) -> BlockDecision {
    if !worker.is_busy() {
        return BlockDecision::Enqueue;
    }
    match strategy {
        BlockStrategy::SerialExecution => BlockDecision::Enqueue,
        BlockStrategy::DiscardLater => BlockDecision::Reject {
            message: DISCARD_LATER_MESSAGE,
        },
        BlockStrategy::CoverEarly => BlockDecision::ReplaceRunning {
            reason: COVER_EARLY_REASON,
        },
    }
}

/// The result message of a run killed while executing: `<reason> [job running, killed]`.
pub fn killed_running_message(reason: &str) -> String {
    format!("{reason} [job running, killed]")
}

/// The result message of a queued run dropped before it started:
/// `<reason> [job not executed, in the job queue, killed.]`.
pub fn killed_queued_message(reason: &str) -> String {
    format!("{reason} [job not executed, in the job queue, killed.]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let idle = WorkerState::default();
        let running = WorkerState {
            running: true,
            queued: 0,
        };
        let queued = WorkerState {
            running: false,
            queued: 2,
        };
        let both = WorkerState {
            running: true,
            queued: 1,
        };
        let reject = BlockDecision::Reject {
            message: DISCARD_LATER_MESSAGE,
        };
        let replace = BlockDecision::ReplaceRunning {
            reason: COVER_EARLY_REASON,
        };
        use BlockStrategy::*;
        let cases = [
            (SerialExecution, idle, BlockDecision::Enqueue),
            (DiscardLater, idle, BlockDecision::Enqueue),
            (CoverEarly, idle, BlockDecision::Enqueue),
            (SerialExecution, running, BlockDecision::Enqueue),
            (SerialExecution, queued, BlockDecision::Enqueue),
            (SerialExecution, both, BlockDecision::Enqueue),
            (DiscardLater, running, reject),
            (DiscardLater, queued, reject),
            (DiscardLater, both, reject),
            (CoverEarly, running, replace),
            (CoverEarly, queued, replace),
            (CoverEarly, both, replace),
        ];
        for (strategy, worker, expected) in cases {
            assert_eq!(decide(strategy, worker), expected, "{strategy} {worker:?}");
        }
    }

    #[test]
    fn exact_messages() {
        // The colon is U+FF1A FULLWIDTH COLON, as XXL-JOB writes it.
        assert_eq!(
            DISCARD_LATER_MESSAGE,
            "block strategy effect\u{ff1a}Discard Later"
        );
        assert_eq!(
            COVER_EARLY_REASON,
            "block strategy effect\u{ff1a}Cover Early"
        );
        let cases = [
            (
                killed_running_message(COVER_EARLY_REASON),
                "block strategy effect\u{ff1a}Cover Early [job running, killed]",
            ),
            (
                killed_queued_message(COVER_EARLY_REASON),
                "block strategy effect\u{ff1a}Cover Early \
                 [job not executed, in the job queue, killed.]",
            ),
            (
                killed_running_message("shutting down"),
                "shutting down [job running, killed]",
            ),
            (
                killed_queued_message("shutting down"),
                "shutting down [job not executed, in the job queue, killed.]",
            ),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
    }
}
