//! Tickwork's persistence: the [`Store`] trait (one part per area: [`GroupStore`],
//! [`JobStore`], [`RunLedger`], [`ClusterStore`], [`AlarmStore`], [`AccountStore`],
//! [`AuditStore`], [`ScriptStore`], [`SubmissionStore`]) and its implementation on SQLite,
//! PostgreSQL and MySQL/MariaDB, chosen by URL.
//!
//! This crate knows nothing about HTTP. It does no schedule math either: the claim takes a
//! planner closure built by the admin on `tickwork-core`. What it guarantees is the ledger:
//! a unique key on (job, fire key) makes a double scheduled fire impossible at the database,
//! whatever the admin nodes do.
//!
//! Layout: `model` (rows and parameters), `store` (the traits), `sql` (one query, three
//! dialects), `backends` (driver glue per database), `bounds` (what a session may hold, and
//! for how long), `sql_store` (the shared implementation),
//! `rows` (decoding), and `migrations/<backend>` embedded at build time.

mod backends;
mod bounds;
mod error;
mod model;
mod rows;
mod sql;
mod sql_store;
mod store;

use std::sync::Arc;
use std::time::Duration;

pub use bounds::SessionBounds;
pub use error::Error;
pub use model::*;
pub use store::{
    AccountStore, AlarmStore, AuditStore, ClusterStore, FireCheckStore, GroupStore, JobStore,
    RunLedger, ScriptStore, Store, SubmissionStore, WorkflowStore,
};
pub use tickwork_core::alarm::AlarmStatus;
pub use tickwork_core::run::RunState;

use backends::{MySqlBackend, PostgresBackend, SqliteBackend};
use sql_store::SqlStore;

// One type per backend; all three share the implementation in `sql_store`.
type SqliteStore = SqlStore<SqliteBackend>;
type PostgresStore = SqlStore<PostgresBackend>;
type MySqlStore = SqlStore<MySqlBackend>;

/// The store's database connections at one moment: how many are open and how many of those
/// wait idle in the pool (the rest are in use).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Connections {
    pub open: u32,
    pub idle: u32,
}

/// What one [`Store::log_checkpoint`] found: the frames the write-ahead log holds and how
/// many of them are in the database file now (both 0 where the backend has no such log).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCheckpoint {
    pub frames: u64,
    pub copied: u64,
}

/// Connection settings shared by every backend.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Pool size; `None` picks 4 for SQLite (one writer at a time anyway) and 10 otherwise.
    pub max_connections: Option<u32>,
    /// How long an operation waits for a free connection.
    pub acquire_timeout: Duration,
    /// How long a SQLite writer waits for the write lock before giving up.
    pub sqlite_busy_timeout: Duration,
    /// The server-side bounds of every PostgreSQL or MySQL/MariaDB session (SQLite has none).
    pub session_bounds: SessionBounds,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: None,
            acquire_timeout: Duration::from_secs(10),
            sqlite_busy_timeout: Duration::from_secs(10),
            session_bounds: SessionBounds::default(),
        }
    }
}

/// Opens the database named by `url`, applies its migrations, and returns the store.
///
/// Schemes: `sqlite://path` (add `?mode=rwc` to create the file; `sqlite::memory:` for a
/// throw-away database), `postgres://` or `postgresql://`, `mysql://` or `mariadb://`.
///
/// Any failure is an [`Error::Open`] naming the cause and the URL without its password.
pub async fn connect(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, Error> {
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or_default();
    let opened: Result<Arc<dyn Store>, Error> = match scheme {
        "sqlite" => SqliteStore::open(url, options)
            .await
            .map(|s| Arc::new(s) as Arc<dyn Store>),
        "postgres" | "postgresql" => PostgresStore::open(url, options)
            .await
            .map(|s| Arc::new(s) as Arc<dyn Store>),
        "mysql" | "mariadb" => MySqlStore::open(url, options)
            .await
            .map(|s| Arc::new(s) as Arc<dyn Store>),
        _ => Err(Error::Invalid(format!(
            "database url scheme {scheme:?} is not one of sqlite, postgres, mysql, mariadb"
        ))),
    };
    opened.map_err(|e| error::open_error(url, e))
}
