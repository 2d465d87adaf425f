//! Tickwork's pure domain logic: job definitions and their limits, schedules and time zones,
//! the schedule ahead (fires per bucket and their peaks), misfire decisions, the ledger's check
//! of fires (missed, late, doubled), routing, block policies, run states, alarm statuses,
//! what follows a run's end, and workflows (a DAG's checks and an instance's rules).
//!
//! This crate knows nothing about SQL, HTTP or async runtimes: every function here is a plain
//! computation over its arguments, so that it can be tested with tables of cases.

// First, so that `named_enum!` is in scope in every module below.
#[macro_use]
mod names;

pub mod alarm;
pub mod block;
pub mod cron;
mod error;
pub mod fire_check;
pub mod follow_up;
pub mod heatmap;
pub mod job;
pub mod misfire;
pub mod routing;
pub mod run;
pub mod schedule;
pub mod submission;
pub mod workflow;

pub use error::Error;
pub use names::{
    BlockStrategy, Delivery, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType,
};

/// Handle code of a successful run, as on the XXL-JOB wire.
pub const HANDLE_CODE_SUCCESS: i32 = 200;
/// Handle code of a failed run.
pub const HANDLE_CODE_FAIL: i32 = 500;
/// Handle code of a run that exceeded its timeout.
pub const HANDLE_CODE_TIMEOUT: i32 = 502;
