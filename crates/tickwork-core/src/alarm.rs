//! A run's alarm status and its moves, kept as the integers XXL-JOB writes.
//!
//! ```text
//!  undecided (0) --queue--> queued (-1) --+--> not_needed (1)      (the job has no channel)
//!                                         |
//!                                         +--> grouped (5)   (carried by its job's open alarm)
//!                                         |
//!                                         +--> delivering (4) --+--> sent (2)
//!                                                               |       | a later channel
//!                                                               |       v failed
//!                                                               +--> send_failed (3)
//! ```
//!
//! Only a run whose final state calls for an alarm ([`RunState::calls_for_alarm`]) is queued;
//! every other run stays `undecided`. Queuing writes one delivery per channel of the job and
//! moves the run to `delivering` (or `not_needed`). Each delivery's outcome then moves it: a
//! sent one to `sent`, a failed one to `send_failed`, which a failure on one channel shows
//! whatever the others did, so `sent` can still turn into `send_failed`.
//!
//! A job that keeps failing does not send an alarm per run: [`group`] keeps its alarms on a
//! channel at least a window apart. A run whose every channel already holds an alarm of its job
//! not yet sent joins those alarms (they count it) and ends `grouped`.
//!
//! [`RunState::calls_for_alarm`]: crate::run::RunState::calls_for_alarm

use std::fmt;

/// Where a run's alarm stands (the run's `alarm_status` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AlarmStatus {
    /// Nothing decided yet: every run starts here.
    Undecided,
    /// A failed run waiting for its deliveries to be written (XXL-JOB's "locked" value).
    Queued,
    /// No alarm needed: the job has no alarm channel.
    NotNeeded,
    /// The alarm was sent.
    Sent,
    /// Sending the alarm failed on at least one channel.
    SendFailed,
    /// One delivery per alarm channel of the job was written; `sent` or `send_failed` follow
    /// as they finish.
    Delivering,
    /// Carried by alarms of its job not yet sent when it was queued, which count it: it has
    /// no delivery of its own.
    Grouped,
}

impl AlarmStatus {
    /// Every value, in declaration order.
    pub const ALL: &'static [AlarmStatus] = &[
        AlarmStatus::Undecided,
        AlarmStatus::Queued,
        AlarmStatus::NotNeeded,
        AlarmStatus::Sent,
        AlarmStatus::SendFailed,
        AlarmStatus::Delivering,
        AlarmStatus::Grouped,
    ];

    /// The integer stored for this status (XXL-JOB's values, and 4 and 5 for `delivering` and
    /// `grouped`).
    pub const fn code(self) -> i32 {
        match self {
            AlarmStatus::Undecided => 0,
            AlarmStatus::Queued => -1,
            AlarmStatus::NotNeeded => 1,
            AlarmStatus::Sent => 2,
            AlarmStatus::SendFailed => 3,
            AlarmStatus::Delivering => 4,
            AlarmStatus::Grouped => 5,
        }
    }

    /// The status a stored integer stands for; `None` for an integer no status uses.
    pub const fn from_code(code: i32) -> Option<AlarmStatus> {
        match code {
            0 => Some(AlarmStatus::Undecided),
            -1 => Some(AlarmStatus::Queued),
            1 => Some(AlarmStatus::NotNeeded),
            2 => Some(AlarmStatus::Sent),
            3 => Some(AlarmStatus::SendFailed),
            4 => Some(AlarmStatus::Delivering),
            5 => Some(AlarmStatus::Grouped),
            _ => None,
        }
    }

    /// The status's name, for messages and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            AlarmStatus::Undecided => "undecided",
            AlarmStatus::Queued => "queued",
            AlarmStatus::NotNeeded => "not_needed",
            AlarmStatus::Sent => "sent",
            AlarmStatus::SendFailed => "send_failed",
            AlarmStatus::Delivering => "delivering",
            AlarmStatus::Grouped => "grouped",
        }
    }

    /// Whether the alarm status machine allows moving from `self` to `to`. Staying put is
    /// not a move.
    pub const fn can_move_to(self, to: AlarmStatus) -> bool {
        use AlarmStatus::*;
        match self {
            Undecided => matches!(to, Queued),
            Queued => matches!(to, NotNeeded | Delivering | Grouped),
            Delivering => matches!(to, Sent | SendFailed),
            // One channel sent, a later one failed: the failure is what the run shows.
            Sent => matches!(to, SendFailed),
            NotNeeded | SendFailed | Grouped => false,
        }
    }

    /// The statuses that may move to `to`: what a store's update to `to` requires.
    pub const fn sources_of(to: AlarmStatus) -> &'static [AlarmStatus] {
        use AlarmStatus::*;
        match to {
            Queued => &[Undecided],
            NotNeeded | Delivering | Grouped => &[Queued],
            Sent => &[Delivering],
            SendFailed => &[Delivering, Sent],
            Undecided => &[],
        }
    }
}

impl fmt::Display for AlarmStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the newest alarm of a job on one channel stands, as [`group`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestAlarm {
    /// When it was first due: the start of its window.
    pub due_at: i64,
    /// Waiting for its first attempt and taken by no sender: a run can still join it.
    pub open: bool,
}

/// What the alarm of a failed run on one channel becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// It joins its job's open alarm there, which counts it.
    Join,
    /// An alarm of its own, first due at `due_at`.
    New { due_at: i64 },
}

/// Keeps a job's alarms on a channel at least `window_ms` apart, so a job failing every second
/// sends one alarm a window, which counts the runs it carries, instead of one a second. A run
/// joins the job's alarm not yet sent; otherwise its own alarm is due a window after the job's
/// last one was (at once if that is past). A window of 0 gives every run its own alarm at once.
pub fn group(latest: Option<LatestAlarm>, now: i64, window_ms: i64) -> Grouping {
    match latest {
        Some(l) if window_ms > 0 && l.open => Grouping::Join,
        Some(l) if window_ms > 0 => Grouping::New {
            due_at: now.max(l.due_at.saturating_add(window_ms)),
        },
        _ => Grouping::New { due_at: now },
    }
}
