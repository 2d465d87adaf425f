//! Run states, the moves between them, and the operations that make those moves.
//!
//! This module is the one definition of the run state machine: the store builds the state
//! conditions of its statements from [`RunMove`], so it cannot make a move that
//! [`RunState::can_move_to`] refuses.
//!
//! ```text
//!                                 dispatch
//!  claim, insert --> planned ---------------------> dispatched
//!                       |                               |
//!                       +-- misfire -------> misfired   +-- callback, kill, lost-run monitor -->
//!                       +-- skip ----------> skipped    |     succeeded | failed | timed_out
//!                       +-- trigger fail --> failed     |     | killed | lost
//!                       +-- early callback -->          +-- trigger fail --> failed
//!                             succeeded | failed | timed_out
//!
//!  claim, already too late --> misfired
//! ```
//!
//! - A run is written `planned`, or `misfired` when the claim finds its fire already too late.
//! - An executor may call back before the dispatch record is written (a fast job): the
//!   result then moves the run straight from `planned`, and the dispatch record still lands on
//!   it later without moving it ([`RunState::EARLY_RESULTS`]). `killed` and `lost` are never
//!   early: only a dispatched run can be killed, and the lost-run monitor only looks at
//!   dispatched runs.
//! - A kill is recorded on a dispatched run first ([`RunMove::KillIntent`]); a failure or
//!   timeout reported after it is written as `killed` by the completion itself
//!   ([`RunState::with_kill_intent`]), so no final state is ever left.
//! - Catch-up (a late fire becomes the job's one catch-up fire), adoption (a live node takes a
//!   dead node's planned runs) and the kill intent change other fields of a run and keep its
//!   state: they are listed as moves because they too apply only in given states.
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
    /// The states a run row is written in: `planned`, or `misfired` when the claim finds the
    /// fire already too late.
    pub const INITIAL: &'static [RunState] = &[RunState::Planned, RunState::Misfired];

    /// The results a run can end with (what a callback, the kill or the lost-run monitor
    /// reports).
    pub const RESULTS: &'static [RunState] = &[
        RunState::Succeeded,
        RunState::Failed,
        RunState::TimedOut,
        RunState::Killed,
        RunState::Lost,
    ];

    /// The results an early callback gives a run still `planned` (the executor answered
    /// before the dispatch record was written): those a handle code means
    /// ([`RunState::from_handle_code`]). The dispatch record still lands on such a run,
    /// without moving it.
    pub const EARLY_RESULTS: &'static [RunState] =
        &[RunState::Succeeded, RunState::Failed, RunState::TimedOut];

    /// Whether no transition leaves this state.
    pub const fn is_final(self) -> bool {
        !matches!(self, RunState::Planned | RunState::Dispatched)
    }

    /// Whether the state machine allows moving from `self` to `to`. Staying put is not a move.
    pub const fn can_move_to(self, to: RunState) -> bool {
        use RunState::*;
        match self {
            // Succeeded and timed_out (and failed, besides a trigger failure) come from an
            // early callback: the result beat the dispatch record.
            Planned => matches!(
                to,
                Dispatched | Misfired | Skipped | Failed | Succeeded | TimedOut
            ),
            Dispatched => matches!(to, Succeeded | Failed | TimedOut | Killed | Lost),
            Succeeded | Failed | TimedOut | Killed | Lost | Misfired | Skipped => false,
        }
    }

    /// Whether a run is written in this state ([`RunState::INITIAL`]).
    pub const fn is_initial(self) -> bool {
        matches!(self, RunState::Planned | RunState::Misfired)
    }

    /// Whether this is a result ([`RunState::RESULTS`]).
    pub const fn is_result(self) -> bool {
        matches!(
            self,
            RunState::Succeeded
                | RunState::Failed
                | RunState::TimedOut
                | RunState::Killed
                | RunState::Lost
        )
    }

    /// Whether a run ending in this state calls for an alarm: the failures. A kill is an
    /// operator's own decision, and a misfire or skip is the policy working.
    pub const fn calls_for_alarm(self) -> bool {
        matches!(self, RunState::Failed | RunState::TimedOut | RunState::Lost)
    }

    /// The result a run whose kill was asked for ends with when it reports `self`: executors
    /// report a killed run as failed (or timed out), so that failure is the kill. Other
    /// results stay as they are.
    pub const fn with_kill_intent(self) -> RunState {
        match self {
            RunState::Failed | RunState::TimedOut => RunState::Killed,
            other => other,
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

/// Every operation that moves a run, or writes a run only while it is in given states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunMove {
    /// An executor accepted the run: `planned -> dispatched`.
    Dispatch,
    /// No executor took the run (none registered, or `/run` refused): `planned | dispatched
    /// -> failed`. The store also requires that no result was recorded yet.
    TriggerFail,
    /// A result arrives (callback, kill, lost-run monitor): `dispatched`, or `planned` for an
    /// early callback ([`RunState::EARLY_RESULTS`]), to the result ([`RunState::with_kill_intent`] of it when a kill was
    /// asked for). A state that is not a result moves nothing.
    Complete(RunState),
    /// Too late under the misfire policy: `planned -> misfired`.
    Misfire,
    /// Deliberately not run (the job was stopped before its fire): `planned -> skipped`.
    Skip,
    /// A late fire becomes its job's catch-up fire: stays `planned`, with a new fire time.
    CatchUp,
    /// A live node takes a dead node's run: stays `planned`, with a new owner.
    Adopt,
    /// A kill is recorded on the run (or withdrawn): stays `dispatched`.
    KillIntent,
}

impl RunMove {
    /// Every operation, with one `Complete` per result.
    pub const ALL: &'static [RunMove] = &[
        RunMove::Dispatch,
        RunMove::TriggerFail,
        RunMove::Complete(RunState::Succeeded),
        RunMove::Complete(RunState::Failed),
        RunMove::Complete(RunState::TimedOut),
        RunMove::Complete(RunState::Killed),
        RunMove::Complete(RunState::Lost),
        RunMove::Misfire,
        RunMove::Skip,
        RunMove::CatchUp,
        RunMove::Adopt,
        RunMove::KillIntent,
    ];

    /// The states the operation applies to; a run in any other state is left alone.
    pub const fn from_states(self) -> &'static [RunState] {
        use RunState::*;
        match self {
            RunMove::Dispatch
            | RunMove::Misfire
            | RunMove::Skip
            | RunMove::CatchUp
            | RunMove::Adopt => &[Planned],
            RunMove::KillIntent => &[Dispatched],
            RunMove::TriggerFail => &[Planned, Dispatched],
            // See `RunState::EARLY_RESULTS`.
            RunMove::Complete(Succeeded | Failed | TimedOut) => &[Planned, Dispatched],
            // Only a dispatched run is killed, or found lost.
            RunMove::Complete(Killed | Lost) => &[Dispatched],
            RunMove::Complete(Planned | Dispatched | Misfired | Skipped) => &[],
        }
    }

    /// Whether the operation applies to a run in `state`.
    pub fn applies_to(self, state: RunState) -> bool {
        self.from_states().contains(&state)
    }

    /// The state the run is in afterwards (without a kill intent; see
    /// [`RunState::with_kill_intent`]). For an operation that keeps the state, the state it
    /// applies to.
    pub const fn to(self) -> RunState {
        match self {
            RunMove::Dispatch => RunState::Dispatched,
            RunMove::TriggerFail => RunState::Failed,
            RunMove::Complete(result) => result,
            RunMove::Misfire => RunState::Misfired,
            RunMove::Skip => RunState::Skipped,
            RunMove::CatchUp | RunMove::Adopt => RunState::Planned,
            RunMove::KillIntent => RunState::Dispatched,
        }
    }

    /// The state the run is in afterwards when a kill of it was asked for: a completion's
    /// failure or timeout is that kill ([`RunState::with_kill_intent`]); no other operation
    /// looks at the kill.
    pub const fn to_with_kill_intent(self) -> RunState {
        match self {
            RunMove::Complete(result) => result.with_kill_intent(),
            other => other.to(),
        }
    }

    /// Whether the operation changes other fields only, never the state.
    pub const fn keeps_state(self) -> bool {
        matches!(
            self,
            RunMove::CatchUp | RunMove::Adopt | RunMove::KillIntent
        )
    }
}

impl fmt::Display for RunMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunMove::Dispatch => f.write_str("dispatch"),
            RunMove::TriggerFail => f.write_str("trigger fail"),
            RunMove::Complete(result) => write!(f, "complete {result}"),
            RunMove::Misfire => f.write_str("misfire"),
            RunMove::Skip => f.write_str("skip"),
            RunMove::CatchUp => f.write_str("catch up"),
            RunMove::Adopt => f.write_str("adopt"),
            RunMove::KillIntent => f.write_str("kill intent"),
        }
    }
}
