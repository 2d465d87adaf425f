//! The thin layer that lets one body of SQL serve three databases.
//!
//! Statements are written once, with `?` placeholders, into a [`Query`] that carries its
//! arguments as plain values ([`Arg`]). A [`Backend`] (one small impl per database, in
//! `backends.rs`) binds those values to the concrete sqlx driver and rewrites placeholders
//! where needed. The few real dialect differences (row locks, insert-or-skip, upsert,
//! `RETURNING`) are answered by [`Kind`]. The store logic itself (`sql_store`) is generic
//! over `Backend` and never names a driver type.

use std::future::Future;
use std::sync::LazyLock;

use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, FromRow, Pool, Transaction};
use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::RunState;

use crate::{Error, StoreOptions};

/// One bound value. Every column of the schema is an integer or text, possibly NULL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Int32(Option<i32>),
    Text(Option<String>),
}

macro_rules! arg_from {
    ($($t:ty => |$v:ident| $e:expr),+ $(,)?) => {
        $(impl From<$t> for Arg {
            fn from($v: $t) -> Self {
                $e
            }
        })+
    };
}

arg_from! {
    i64 => |v| Arg::Int(Some(v)),
    Option<i64> => |v| Arg::Int(v),
    i32 => |v| Arg::Int32(Some(v)),
    Option<i32> => |v| Arg::Int32(v),
    String => |v| Arg::Text(Some(v)),
    &String => |v| Arg::Text(Some(v.clone())),
    &str => |v| Arg::Text(Some(v.to_owned())),
    Option<String> => |v| Arg::Text(v),
    Option<&str> => |v| Arg::Text(v.map(str::to_owned)),
}

/// SQL text with `?` placeholders and the values that fill them, in order.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub(crate) sql: String,
    pub(crate) args: Vec<Arg>,
    /// Whether the driver may cache the prepared statement. Off for statements whose text
    /// varies with the batch size, which would only churn the cache.
    pub(crate) persistent: bool,
}

impl Query {
    pub(crate) fn new(sql: impl Into<String>) -> Self {
        Query {
            sql: sql.into(),
            args: Vec::new(),
            persistent: true,
        }
    }

    /// Marks the statement as one-off (see `persistent`).
    pub(crate) fn one_off(mut self) -> Self {
        self.persistent = false;
        self
    }

    pub(crate) fn bind(mut self, value: impl Into<Arg>) -> Self {
        self.args.push(value.into());
        self
    }

    pub(crate) fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends one placeholder and its value.
    pub(crate) fn push_bind(&mut self, value: impl Into<Arg>) -> &mut Self {
        self.sql.push('?');
        self.args.push(value.into());
        self
    }

    /// Appends another query's text and arguments.
    pub(crate) fn append(&mut self, other: &Query) -> &mut Self {
        self.sql.push_str(&other.sql);
        self.args.extend(other.args.iter().cloned());
        self
    }

    /// Appends `(?, ?, ...)` with one placeholder per value.
    pub(crate) fn push_list<A: Into<Arg>>(&mut self, values: impl IntoIterator<Item = A>) {
        self.sql.push('(');
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.sql.push_str(", ");
            }
            self.push_bind(v);
        }
        self.sql.push(')');
    }
}

/// The condition ` = 'a'` or ` IN ('a', 'b')` that follows a state column, for the states of
/// `tickwork_core::run`. The names are the core's fixed lowercase words, so they are written
/// as literals: every planner sees a constant list, and the text stays the same from call to
/// call. An empty list matches nothing.
pub(crate) fn state_in(states: &[RunState]) -> String {
    in_list(states.iter().map(|s| format!("'{}'", s.as_str())))
}

/// `state IN (...)` of the states of runs not yet ended: the `WHERE` of the partial index
/// `tw_runs_open` on SQLite, and the expression of the generated column `is_open` on
/// PostgreSQL.
pub(crate) static OPEN_STATES: LazyLock<String> = LazyLock::new(|| {
    let open: Vec<RunState> = RunState::ALL
        .iter()
        .copied()
        .filter(|s| !s.is_final())
        .collect();
    format!("state{}", state_in(&open))
});

/// `state IN (...)` of the states that call for an alarm ([`RunState::calls_for_alarm`]):
/// the `WHERE` of the partial index `tw_runs_alarm` on SQLite, and the expression of the
/// generated column `calls_alarm` on PostgreSQL.
pub(crate) static ALARM_STATES: LazyLock<String> = LazyLock::new(|| {
    let states: Vec<RunState> = RunState::ALL
        .iter()
        .copied()
        .filter(|s| s.calls_for_alarm())
        .collect();
    format!("state{}", state_in(&states))
});

/// The condition on open runs in `states`, as a query that finds them by state writes it:
/// `state IN (...)` and the open-run index's condition after it, term for term
/// ([`Kind::open_run`]).
pub(crate) fn open_runs_in(kind: Kind, states: &[RunState]) -> String {
    debug_assert!(
        states.iter().all(|s| !s.is_final()),
        "open runs only: {states:?}"
    );
    format!("state{} AND {}", state_in(states), kind.open_run())
}

/// The condition ` = 0` or ` IN (4, 2)` that follows an alarm status column, as
/// [`state_in`] does for run states.
pub(crate) fn alarm_in(statuses: &[AlarmStatus]) -> String {
    in_list(statuses.iter().map(|s| s.code().to_string()))
}

fn in_list(values: impl Iterator<Item = String>) -> String {
    let values: Vec<String> = values.collect();
    match values.as_slice() {
        [] => " IN (NULL)".to_owned(),
        [one] => format!(" = {one}"),
        many => format!(" IN ({})", many.join(", ")),
    }
}

/// A run state as an SQL literal (`'planned'`), for the value a statement writes.
pub(crate) fn state_literal(state: RunState) -> String {
    format!("'{}'", state.as_str())
}

/// Which database, for the statements that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
    MySql,
}

impl Kind {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::MySql => "mysql",
        }
    }

    /// Suffix of a claim's select. SQLite has no row locks: its write transaction
    /// (`BEGIN IMMEDIATE`) already excludes every other writer.
    pub(crate) const fn skip_locked(self) -> &'static str {
        match self {
            Kind::Sqlite => "",
            Kind::Postgres | Kind::MySql => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// The condition on runs not yet ended, whole: the `WHERE` of the partial index
    /// `tw_runs_open`, which a query that finds runs by state and owner adds as it is, since
    /// SQLite uses a partial index only for a query that carries its condition. On
    /// PostgreSQL it is a generated column: an index whose key or condition names `state`
    /// takes a new entry at every change of it, where an update that changes no indexed
    /// column and fits its page writes none (a heap-only update). The send and the dispatch
    /// record change the state between open states only, so `is_open` stays as it was and
    /// both are heap-only. MySQL/MariaDB have no partial index; the condition is the states.
    pub(crate) fn open_run(self) -> &'static str {
        match self {
            Kind::Postgres => "is_open",
            Kind::Sqlite | Kind::MySql => OPEN_STATES.as_str(),
        }
    }

    /// The condition on runs that call for an alarm, whole, as [`Kind::open_run`] is for
    /// open runs: the states, and on PostgreSQL the generated column `calls_alarm` that the
    /// partial index `tw_runs_alarm` names.
    pub(crate) fn alarm_runs(self) -> String {
        match self {
            Kind::Postgres => format!("{} AND calls_alarm", *ALARM_STATES),
            Kind::Sqlite | Kind::MySql => ALARM_STATES.clone(),
        }
    }

    /// The run state column where rows are also picked by a list of ids, written so that no
    /// index on it is considered: the ids are looked up in the primary key. SQLite's planner
    /// would rather walk the state index (every planned run). PostgreSQL has no index on the
    /// state (see [`Kind::open_run`]); when it had, with statistics older than the table's
    /// growth it intersected the ids with that index and read every entry of it, dead ones
    /// included. MySQL estimates ranges from the index itself and picks the primary key.
    pub(crate) const fn state_beside_ids(self) -> &'static str {
        match self {
            Kind::Sqlite => "+state",
            Kind::Postgres | Kind::MySql => "state",
        }
    }

    /// Suffix of a select that is about to be updated in the same transaction.
    pub(crate) const fn for_update(self) -> &'static str {
        match self {
            Kind::Sqlite => "",
            Kind::Postgres | Kind::MySql => " FOR UPDATE",
        }
    }

    /// Start of an insert whose rows are skipped when they collide with a unique key
    /// (finished by [`Kind::on_conflict_skip`]).
    pub(crate) const fn insert_or_skip(self) -> &'static str {
        match self {
            Kind::MySql => "INSERT IGNORE INTO ",
            Kind::Sqlite | Kind::Postgres => "INSERT INTO ",
        }
    }

    /// End of an insert-or-skip on the unique key `target` (a column list).
    pub(crate) fn on_conflict_skip(self, target: &str) -> String {
        match self {
            Kind::MySql => String::new(),
            Kind::Sqlite | Kind::Postgres => format!(" ON CONFLICT ({target}) DO NOTHING"),
        }
    }

    /// End of an insert that, when the unique key `target` collides, overwrites `columns`
    /// with the inserted values instead.
    pub(crate) fn on_conflict_update(self, target: &str, columns: &[&str]) -> String {
        match self {
            // VALUES() is deprecated in MySQL 8.0.20 but still works, and MariaDB lacks the
            // row alias syntax that replaces it.
            Kind::MySql => {
                let sets: Vec<String> = columns
                    .iter()
                    .map(|c| format!("{c} = VALUES({c})"))
                    .collect();
                format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", "))
            }
            Kind::Sqlite | Kind::Postgres => {
                let sets: Vec<String> = columns
                    .iter()
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect();
                format!(" ON CONFLICT ({target}) DO UPDATE SET {}", sets.join(", "))
            }
        }
    }

    /// Whether `INSERT ... RETURNING` is available. MariaDB has it, MySQL 8 does not, so the
    /// MySQL family never uses it.
    pub(crate) const fn has_returning(self) -> bool {
        !matches!(self, Kind::MySql)
    }
}

/// What a statement changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    /// Rows inserted, deleted, or matched by an update (MySQL connections are opened with
    /// `CLIENT_FOUND_ROWS`, so an update that leaves a row unchanged still counts it).
    pub(crate) rows: u64,
    /// The id of the (first) row inserted, where the driver reports it.
    pub(crate) last_id: i64,
}

/// A row type readable from all three backends (what `#[derive(sqlx::FromRow)]` gives).
pub(crate) trait AnyRow:
    for<'r> FromRow<'r, SqliteRow>
    + for<'r> FromRow<'r, PgRow>
    + for<'r> FromRow<'r, MySqlRow>
    + Send
    + Unpin
    + 'static
{
}

impl<T> AnyRow for T where
    T: for<'r> FromRow<'r, SqliteRow>
        + for<'r> FromRow<'r, PgRow>
        + for<'r> FromRow<'r, MySqlRow>
        + Send
        + Unpin
        + 'static
{
}

/// The connection type of a backend.
/// The connections of a store: write transactions and lone writes take `writes`, the rest
/// `reads`. One pool on a server database; on SQLite, which has one writer at a time, `writes`
/// holds one connection, so writers queue in the process (first come, first served) instead
/// of polling the file lock through the busy handler, which sleeps up to 100 ms per try.
pub(crate) struct Pools<D: Database> {
    pub(crate) reads: Pool<D>,
    pub(crate) writes: Pool<D>,
    /// Two pools (a SQLite file), not one under two names.
    pub(crate) separate: bool,
    /// The heartbeat's and the lease's own connections on a server database (`None`: they
    /// take `writes`). Behind a burst's writes in the shared pool a heartbeat came late, the
    /// node's fence closed, and it held its runs until they misfired.
    pub(crate) cluster: Option<Pool<D>>,
}

impl<D: Database> Pools<D> {
    /// One pool for both.
    pub(crate) fn one(pool: Pool<D>) -> Self {
        Pools {
            writes: pool.clone(),
            reads: pool,
            separate: false,
            cluster: None,
        }
    }

    /// A server database's pool, and the cluster's own.
    pub(crate) fn server(pool: Pool<D>, cluster: Pool<D>) -> Self {
        Pools {
            cluster: Some(cluster),
            ..Pools::one(pool)
        }
    }
}

/// Connections of a server database's cluster pool: a heartbeat that timed out may still hold
/// one while the lease is renewed.
pub(crate) const CLUSTER_CONNECTIONS: u32 = 2;

pub(crate) type Conn<B> = <<B as Backend>::Db as Database>::Connection;

/// One database: how to connect, migrate, open a write transaction and run a [`Query`].
pub(crate) trait Backend: Send + Sync + 'static {
    type Db: Database;
    const KIND: Kind;

    /// Opens the pools.
    fn open(
        url: &str,
        options: &StoreOptions,
    ) -> impl Future<Output = Result<Pools<Self::Db>, Error>> + Send;

    /// Applies the embedded migrations of this backend (a no-op when they are applied).
    fn migrate(pool: &Pool<Self::Db>) -> impl Future<Output = Result<(), Error>> + Send;

    /// Opens a transaction that will write.
    fn begin_write(
        pool: &Pool<Self::Db>,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, sqlx::Error>> + Send;

    fn execute(
        conn: &mut Conn<Self>,
        query: Query,
    ) -> impl Future<Output = Result<Done, sqlx::Error>> + Send;

    fn fetch_all<T: AnyRow>(
        conn: &mut Conn<Self>,
        query: Query,
    ) -> impl Future<Output = Result<Vec<T>, sqlx::Error>> + Send;

    fn fetch_optional<T: AnyRow>(
        conn: &mut Conn<Self>,
        query: Query,
    ) -> impl Future<Output = Result<Option<T>, sqlx::Error>> + Send;

    /// The notifications of `channels` (PostgreSQL's `LISTEN`), each turned by `read` from
    /// (channel, payload) into an item (or dropped), read by a task of its own until the
    /// receiver is dropped; `None` where the database has none.
    fn listen<T: Send + 'static>(
        pool: &Pool<Self::Db>,
        channels: &'static [&'static str],
        read: fn(&str, &str) -> Option<T>,
    ) -> impl Future<Output = Result<Option<tokio::sync::mpsc::Receiver<T>>, Error>> + Send {
        let _ = (pool, channels, read);
        async { Ok(None) }
    }
}

/// Rewrites `?` placeholders as PostgreSQL's `$1, $2, ...`, leaving quoted text alone.
pub(crate) fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_quotes() {
        assert_eq!(
            numbered_placeholders("SELECT a FROM t WHERE b = ? AND c = '?' AND d IN (?, ?)"),
            "SELECT a FROM t WHERE b = $1 AND c = '?' AND d IN ($2, $3)"
        );
    }

    #[test]
    fn query_lists_bind_in_order() {
        let mut q = Query::new("SELECT 1 WHERE x IN ");
        q.push_list([1_i64, 2, 3]);
        assert_eq!(q.sql, "SELECT 1 WHERE x IN (?, ?, ?)");
        assert_eq!(q.args.len(), 3);
        assert_eq!(q.args[2], Arg::Int(Some(3)));
    }

    #[test]
    fn state_and_alarm_conditions() {
        use RunState::*;
        assert_eq!(state_in(&[Planned]), " = 'planned'");
        assert_eq!(
            state_in(&[Planned, Dispatched, TimedOut]),
            " IN ('planned', 'dispatched', 'timed_out')"
        );
        assert_eq!(state_in(&[]), " IN (NULL)");
        assert_eq!(state_literal(TimedOut), "'timed_out'");
        assert_eq!(alarm_in(&[AlarmStatus::Queued]), " = -1");
        assert_eq!(
            alarm_in(&[AlarmStatus::Delivering, AlarmStatus::Sent]),
            " IN (4, 2)"
        );
    }

    #[test]
    fn upserts_per_dialect() {
        assert_eq!(
            Kind::Postgres.on_conflict_update("name", &["holder"]),
            " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder"
        );
        assert_eq!(
            Kind::MySql.on_conflict_update("name", &["holder"]),
            " ON DUPLICATE KEY UPDATE holder = VALUES(holder)"
        );
    }
}
