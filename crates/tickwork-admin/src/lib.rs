//! The Tickwork admin: stores jobs, fires them on time and records every run.
//!
//! The pipeline is claim -> ledger -> timer -> dispatch -> complete (see ARCHITECTURE.md):
//! [`Admin::start`] runs it on a [`tickwork_store::Store`]; the operations in `service` are what
//! the HTTP layer, the console and the CLI call. Several admins share one database: `cluster`
//! (heartbeats, the fence, adoption of a dead node's runs, the maintenance lease) and
//! `monitor` (what the lease holder maintains) make that safe; `alarm` sends the alarms of
//! failed runs; `metrics` renders `/metrics`.

mod accounts;
mod admin;
mod alarm;
mod audit;
pub mod auth;
mod cluster;
pub mod config;
mod console;
pub mod dispatch;
mod error;
pub mod executor_client;
mod metrics;
mod monitor;
pub mod openapi;
pub mod planner;
mod service;
pub mod timer;

pub use admin::{Admin, Running, Stats, retry_delay_ms};
pub use auth::{Auth, NewSession, Principal, Role, SESSION_COOKIE, SessionInfo, check_csrf};
pub use cluster::MAINTENANCE_LEASE;
pub use config::Config;
pub use error::Error;
pub use service::{ExecutorAuth, ExecutorCaller};
pub use tickwork_protocol::api::{
    GroupInput, GroupView, JobInput, JobQuery, JobView, RunQuery, RunView, TriggerInput,
};
pub mod http;
