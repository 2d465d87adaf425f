//! The ledger's check of scheduled fires: its cursor, the windows it reads, and the alerts it
//! writes (the judging itself is `tickwork_core::fire_check`).

use tickwork_core::fire_check::{FireAlert, FireAlertKind};

/// The fires of the window `(after, until]` to read, in order of (instant, run id); at most
/// `limit` when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireScan {
    pub after: i64,
    pub until: i64,
    pub limit: Option<u32>,
}

/// The check's cursor, named (one per check), created at `start` when it does not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorOpen {
    pub name: String,
    pub start: i64,
    pub now: i64,
}

/// One alert to write, with the channels its job alarms on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireAlertNew {
    pub alert: FireAlert,
    /// Channel ids; unknown ones are skipped.
    pub channel_ids: Vec<i64>,
}

/// Writes the alerts of a checked window and moves the cursor `name` from `from` to `until`,
/// in one transaction, only if the cursor is still at `from` (another node that checked the
/// same window first wins, and nothing is written twice). An alert whose job and kind already
/// has one written at or after `quiet_since` is added to that one (its fires, its last
/// instant, its worst lateness) and sends nothing: a job failing for an hour alarms once per
/// quiet period, not once per window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireAlertsRecord {
    pub name: String,
    pub from: i64,
    pub until: i64,
    pub alerts: Vec<FireAlertNew>,
    pub quiet_since: i64,
    pub now: i64,
}

/// What became of one alert of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FireAlertWritten {
    /// A new alert, with its deliveries.
    New(FireAlertRecord),
    /// Added to the recent alert `id` of the same job and kind.
    Added { id: i64, alert: FireAlert },
}

/// A written alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireAlertRecord {
    pub id: i64,
    pub alert: FireAlert,
    pub created_at: i64,
}

/// The alerts of one kind written in a range: how many, over how many fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireAlertTotal {
    pub kind: FireAlertKind,
    pub alerts: u64,
    pub fires: u64,
}
