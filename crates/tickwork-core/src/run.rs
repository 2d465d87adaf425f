//! Run states and their allowed transitions.
//!
//! ```text
//!            dispatch             callback / kill / lost-run monitor
//! planned ------------> dispatched ----------------------------------> succeeded | failed
//!    |                                                                 | timed_out | killed | lost
//!    +--> misfired | skipped   (misfire policy)
//!    +--> failed               (trigger refused, no executor)
//! ```
//!
//! Every final state is a dead end: a retry is a new run linked to its parent, never a way back.

use std::fmt;
use std::str::FromStr;

use crate::{Error, HANDLE_CODE_FAIL, HANDLE_CODE_SUCCESS, HANDLE_CODE_TIMEOUT};

named_enum! {
    /// Where a run is in its life. Stored by name in the run ledger.
    RunState, "run state" {
        /// Claimed by an admin node and waiting for its fire time.
        Planned = "planned",
        /// Sent to an executor, which accepted it; waiting for the result.
        Dispatched = "dispatched",
        /// The executor reported success.
        Succeeded = "succeeded",
        /// The trigger was refused or the executor reported a failure.
        Failed = "failed",
        /// The executor stopped the run at its timeout.
        TimedOut = "timed_out",
        /// Killed on request.
        Killed = "killed",
        /// The executor went away without reporting a result.
        Lost = "lost",
        /// Too late under the misfire policy: never ran.
        Misfired = "misfired",
        /// Deliberately not run (for example, the job was stopped before its fire).
        Skipped = "skipped",
    }
}

impl RunState {
    /// Whether no transition leaves this state.
    pub const fn is_final(self) -> bool {
        !matches!(self, RunState::Planned | RunState::Dispatched)
    }

    /// Whether the state machine allows moving from `self` to `to`. Staying put is not a move.
    pub const fn can_move_to(self, to: RunState) -> bool {
        use RunState::*;
        match self {
            Planned => matches!(to, Dispatched | Misfired | Skipped | Failed),
            Dispatched => matches!(to, Succeeded | Failed | TimedOut | Killed | Lost),
            Succeeded | Failed | TimedOut | Killed | Lost | Misfired | Skipped => false,
        }
    }

    /// The state a final handle code (from a callback) means: 200 succeeded, 502 timed out, any
    /// other positive code failed. A code `<= 0` carries no result (XXL-JOB's "result lost"),
    /// so the caller decides; `None` here.
    pub const fn from_handle_code(code: i32) -> Option<RunState> {
        match code {
            HANDLE_CODE_SUCCESS => Some(RunState::Succeeded),
            HANDLE_CODE_TIMEOUT => Some(RunState::TimedOut),
            c if c > 0 => Some(RunState::Failed),
            _ => None,
        }
    }

    /// The XXL-JOB `handle_code` this state shows as: 200, 502, 500 for the other ended runs,
    /// and 0 ("no result yet") for runs that are pending or never ran.
    ///
    /// A `failed` run shows 500 even when it failed at trigger time, where XXL-JOB leaves the
    /// handle code at 0 and puts the failure in the trigger code: the state alone cannot tell
    /// the two apart, so views that need the difference read the stored trigger code.
    pub const fn handle_code(self) -> i32 {
        match self {
            RunState::Succeeded => HANDLE_CODE_SUCCESS,
            RunState::TimedOut => HANDLE_CODE_TIMEOUT,
            RunState::Failed | RunState::Killed | RunState::Lost => HANDLE_CODE_FAIL,
            RunState::Planned | RunState::Dispatched | RunState::Misfired | RunState::Skipped => 0,
        }
    }

    /// Moves to `to` if the state machine allows it.
    pub fn transition(self, to: RunState) -> Result<RunState, Error> {
        transition(self, to)
    }
}

/// Checks the move `from -> to`: `Ok(to)` when allowed, else [`Error::RunTransition`].
pub fn transition(from: RunState, to: RunState) -> Result<RunState, Error> {
    if from.can_move_to(to) {
        Ok(to)
    } else {
        Err(Error::RunTransition { from, to })
    }
}
