//! Run states, the moves between them, and the operations that make those moves.
//!
//! This module is the one definition of the run state machine: the store builds the state
//! conditions of its statements from [`RunMove`], so it cannot make a move that
//! [`RunState::can_move_to`] refuses.
//!
//! ```text
//!                           send (owner, live)              executor accepted
//!  claim, insert --> planned ------------------> sending ---------------------> dispatched
//!                     |  ^                         |                               |
//!                     |  +------ unsend -----------+                               |
//!                     |     (held, handed back:    +-- trigger fail --> failed     |
//!                     |      never called /run)    +-- skip, misfire (never sent)  |
//!                     +-- misfire --> misfired     +-- early callback, maybe lost  |
//!                     +-- skip -----> skipped      |     (asked, not answerable)   |
//!                                                  v                               v
//!                                  succeeded | failed | timed_out | lost     results, killed
//!
//!  claim, already too late --> misfired
//! ```
//!
//! What each state says about "was it sent?": `planned`: no executor has it (only its owner
//! node sends it, and only after moving it to `sending` in the database). `sending`: maybe: its
//! owner is calling `/run`, or died while doing so; a node that adopts it asks the executors
//! before anything is sent again. `dispatched`: an executor accepted it. `failed` with a
//! trigger code other than 200: no executor accepted it.
//!
//! - A run is written `planned`, or `misfired` when the claim finds its fire already too late.
//! - Only the run's owner moves it to `sending`, in a batch, under a condition the database
//!   checks: it still owns the run and its heartbeat is recent. A node paused past its
//!   heartbeat finds its runs adopted and its batch refused, and sends nothing.
//! - An executor may call back before the dispatch record is written (a fast job): the
//!   result then moves the run straight from `sending`, and the dispatch record still lands on
//!   it later without moving it ([`RunState::EARLY_RESULTS`]). `killed` is never early: only
//!   a dispatched run can be killed. `lost` comes from `sending` only when the executors could
//!   not say whether they have the run and its job says at most once.
//! - A kill is recorded on a dispatched run first ([`RunMove::KillIntent`]); a failure or
//!   timeout reported after it is written as `killed` by the completion itself
//!   ([`RunState::with_kill_intent`]), so no final state is ever left.
//! - Catch-up (a late fire becomes the job's one catch-up fire), adoption (a live node takes a
//!   dead node's planned or sending runs) and the kill intent change other fields of a run and
//!   keep its state: they are listed as moves because they too apply only in given states.
//!
//! Every final state is a dead end: a retry is a new run linked to its parent, never a way back.

use std::fmt;
use std::str::FromStr;

use crate::{Error, HANDLE_CODE_FAIL, HANDLE_CODE_SUCCESS, HANDLE_CODE_TIMEOUT};

named_enum! {
    /// Where a run is in its life. Stored by name in the run ledger.
    RunState, "run state" {
        /// Claimed by an admin node and waiting for its fire time: not sent.
        Planned = "planned",
        /// Taken by its owner to be sent: `/run` may have reached an executor.
        Sending = "sending",
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

    /// The results an early callback gives a run still `sending` (the executor answered
    /// before the dispatch record was written): those a handle code means
    /// ([`RunState::from_handle_code`]). The dispatch record still lands on such a run,
    /// without moving it.
    pub const EARLY_RESULTS: &'static [RunState] =
        &[RunState::Succeeded, RunState::Failed, RunState::TimedOut];

    /// Whether no transition leaves this state.
    pub const fn is_final(self) -> bool {
        !matches!(
            self,
            RunState::Planned | RunState::Sending | RunState::Dispatched
        )
    }

    /// Whether the state machine allows moving from `self` to `to`. Staying put is not a move.
    pub const fn can_move_to(self, to: RunState) -> bool {
        use RunState::*;
        match self {
            Planned => matches!(to, Sending | Misfired | Skipped),
            // Succeeded and timed_out (and failed, besides a trigger failure) come from an
            // early callback: the result beat the dispatch record. Planned again: its owner
            // never called `/run`; lost: maybe sent, and nobody could say.
            Sending => matches!(
                to,
                Planned | Dispatched | Failed | Succeeded | TimedOut | Lost | Skipped | Misfired
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
            RunState::Planned
            | RunState::Sending
            | RunState::Dispatched
            | RunState::Misfired
            | RunState::Skipped => 0,
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
    /// Its owner takes the run to call `/run`: `planned -> sending`. The store requires that
    /// the node still owns the run and that its heartbeat is recent.
    Send,
    /// Its owner gives the run back without having called `/run` (held, handed back at a
    /// clean stop): `sending -> planned`.
    Unsend,
    /// An executor accepted the run: `sending -> dispatched`.
    Dispatch,
    /// No executor took the run (none registered, or `/run` refused): `sending | dispatched
    /// -> failed`. The store also requires that no result was recorded yet.
    TriggerFail,
    /// A result arrives (callback, kill, lost-run monitor): `dispatched`, or `sending` for an
    /// early callback ([`RunState::EARLY_RESULTS`]) or a maybe-sent run nobody could answer
    /// for (`lost`), to the result ([`RunState::with_kill_intent`] of it when a kill was asked
    /// for). A state that is not a result moves nothing.
    Complete(RunState),
    /// Too late under the misfire policy: `planned | sending -> misfired`, the latter only by
    /// the owner, which knows it did not call `/run`.
    Misfire,
    /// Deliberately not run (the job was stopped before its fire): `planned | sending ->
    /// skipped`, the latter only by the owner, which knows it did not call `/run`.
    Skip,
    /// A late fire becomes its job's catch-up fire: stays `planned`, with a new fire time.
    CatchUp,
    /// A live node takes a dead (or departed) node's run: stays `planned`, with a new owner.
    Adopt,
    /// A live node takes a dead node's run that may have been sent: stays `sending`, with a
    /// new owner, which asks the executors before anything is sent again.
    AdoptSending,
    /// A kill is recorded on the run (or withdrawn): stays `dispatched`.
    KillIntent,
}

impl RunMove {
    /// Every operation, with one `Complete` per result.
    pub const ALL: &'static [RunMove] = &[
        RunMove::Send,
        RunMove::Unsend,
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
        RunMove::AdoptSending,
        RunMove::KillIntent,
    ];

    /// The states the operation applies to; a run in any other state is left alone.
    pub const fn from_states(self) -> &'static [RunState] {
        use RunState::*;
        match self {
            RunMove::Send | RunMove::CatchUp | RunMove::Adopt => &[Planned],
            RunMove::Unsend | RunMove::Dispatch | RunMove::AdoptSending => &[Sending],
            RunMove::Skip | RunMove::Misfire => &[Planned, Sending],
            RunMove::KillIntent => &[Dispatched],
            // See `RunState::EARLY_RESULTS`; lost from `sending`: maybe sent, nobody could say.
            RunMove::TriggerFail | RunMove::Complete(Succeeded | Failed | TimedOut | Lost) => {
                &[Sending, Dispatched]
            }
            // Only a dispatched run is killed.
            RunMove::Complete(Killed) => &[Dispatched],
            RunMove::Complete(Planned | Sending | Dispatched | Misfired | Skipped) => &[],
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
            RunMove::Send | RunMove::AdoptSending => RunState::Sending,
            RunMove::Unsend => RunState::Planned,
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
            RunMove::CatchUp | RunMove::Adopt | RunMove::AdoptSending | RunMove::KillIntent
        )
    }
}

impl fmt::Display for RunMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunMove::Send => f.write_str("send"),
            RunMove::Unsend => f.write_str("unsend"),
            RunMove::Dispatch => f.write_str("dispatch"),
            RunMove::TriggerFail => f.write_str("trigger fail"),
            RunMove::Complete(result) => write!(f, "complete {result}"),
            RunMove::Misfire => f.write_str("misfire"),
            RunMove::Skip => f.write_str("skip"),
            RunMove::CatchUp => f.write_str("catch up"),
            RunMove::Adopt => f.write_str("adopt"),
            RunMove::AdoptSending => f.write_str("adopt sending"),
            RunMove::KillIntent => f.write_str("kill intent"),
        }
    }
}
