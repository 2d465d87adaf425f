//! How long the database lets one of the store's sessions hold what it holds: a transaction
//! whose client went silent, a wait for a lock, one statement. Without these a paused or
//! partitioned admin keeps its rows locked (and other admins skipping them) until TCP notices,
//! which can take hours. SQLite has no sessions of other processes to wait for: it ignores them.

use std::fmt::Write as _;
use std::time::Duration;

use crate::Error;

/// The server-side bounds of every session the store opens on PostgreSQL or MySQL/MariaDB.
///
/// Each bound lies between [`SessionBounds::MIN`] and [`SessionBounds::MAX`], and the lock wait
/// is at most the statement bound (a statement bound below it would cut every long wait first).
/// MySQL and MariaDB count whole seconds: a bound there is rounded up to the next second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBounds {
    transaction_idle: Duration,
    lock_wait: Duration,
    statement: Duration,
}

/// Which server of the MySQL family a session talks to: their bounds have different names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MySqlFlavor {
    MySql,
    MariaDb,
}

impl MySqlFlavor {
    /// The flavor behind a `SELECT VERSION()` answer (MariaDB names itself in it).
    pub(crate) fn of_version(version: &str) -> Self {
        if version.to_ascii_lowercase().contains("mariadb") {
            MySqlFlavor::MariaDb
        } else {
            MySqlFlavor::MySql
        }
    }
}

impl SessionBounds {
    /// The shortest bound: shorter ones would end healthy transactions of a busy client, and
    /// MySQL counts whole seconds.
    pub const MIN: Duration = Duration::from_secs(1);
    /// The longest bound: a day (PostgreSQL takes at most 24 days in milliseconds).
    pub const MAX: Duration = Duration::from_secs(86_400);

    /// Checks and builds the bounds.
    ///
    /// - `transaction_idle`: a session idle inside a transaction for longer (its client paused,
    ///   crashed or cut off) is ended by the server, which rolls the transaction back and
    ///   releases its locks.
    /// - `lock_wait`: a statement that waits longer for a row lock fails instead.
    /// - `statement`: a statement that runs longer is cancelled (on MySQL only reads are).
    pub fn new(
        transaction_idle: Duration,
        lock_wait: Duration,
        statement: Duration,
    ) -> Result<Self, Error> {
        for (name, value) in [
            ("transaction_idle", transaction_idle),
            ("lock_wait", lock_wait),
            ("statement", statement),
        ] {
            if !(Self::MIN..=Self::MAX).contains(&value) {
                return Err(Error::Invalid(format!(
                    "session bound {name} ({} ms) is out of range 1000-86400000 ms",
                    value.as_millis()
                )));
            }
        }
        if lock_wait > statement {
            return Err(Error::Invalid(format!(
                "session bound lock_wait ({} ms) must be at most the statement bound ({} ms)",
                lock_wait.as_millis(),
                statement.as_millis()
            )));
        }
        Ok(SessionBounds {
            transaction_idle,
            lock_wait,
            statement,
        })
    }

    /// How long a session may stay idle inside a transaction.
    pub fn transaction_idle(&self) -> Duration {
        self.transaction_idle
    }

    /// How long a statement may wait for a lock.
    pub fn lock_wait(&self) -> Duration {
        self.lock_wait
    }

    /// How long one statement may run.
    pub fn statement(&self) -> Duration {
        self.statement
    }

    /// PostgreSQL's settings, sent in the connection's startup packet so that every session
    /// has them from its first statement. Besides the three bounds, server-side TCP keepalives:
    /// a session whose client vanished without closing (a partition, a dead host) is dropped
    /// after about twice the idle bound of silence instead of the system's two hours.
    pub(crate) fn postgres_settings(&self) -> Vec<(&'static str, String)> {
        let idle_s = whole_seconds(self.transaction_idle);
        vec![
            (
                "idle_in_transaction_session_timeout",
                self.transaction_idle.as_millis().to_string(),
            ),
            ("lock_timeout", self.lock_wait.as_millis().to_string()),
            ("statement_timeout", self.statement.as_millis().to_string()),
            ("tcp_keepalives_idle", idle_s.to_string()),
            ("tcp_keepalives_interval", idle_s.div_ceil(3).to_string()),
            ("tcp_keepalives_count", "3".to_owned()),
        ]
    }

    /// One `SET SESSION` statement with the bounds of a MySQL or MariaDB session.
    ///
    /// MariaDB ends a transaction idle for too long with `idle_transaction_timeout`. MySQL has
    /// no such setting: `wait_timeout` ends any session idle for longer, in a transaction or
    /// not; the pool checks a connection before handing it out and replaces one the server
    /// closed. The statement bound is MariaDB's `max_statement_time` (every statement) and
    /// MySQL's `max_execution_time` (reads only). The lock wait is InnoDB's on both.
    pub(crate) fn mysql_settings(&self, flavor: MySqlFlavor) -> String {
        let mut sql = format!(
            "SET SESSION innodb_lock_wait_timeout = {}",
            whole_seconds(self.lock_wait)
        );
        let idle_s = whole_seconds(self.transaction_idle);
        // A client frozen while the server writes it a result (a claim's due jobs, read FOR
        // UPDATE) or reads its statement is not idle: the server waits on the socket, its
        // locks held, for net_write_timeout / net_read_timeout (60 s / 30 s by default).
        let _ = write!(
            sql,
            ", SESSION net_write_timeout = {idle_s}, SESSION net_read_timeout = {idle_s}"
        );
        let _ = match flavor {
            MySqlFlavor::MariaDb => write!(
                sql,
                ", SESSION idle_transaction_timeout = {idle_s}, \
                 SESSION max_statement_time = {}",
                whole_seconds(self.statement)
            ),
            MySqlFlavor::MySql => write!(
                sql,
                ", SESSION wait_timeout = {idle_s}, SESSION max_execution_time = {}",
                self.statement.as_millis()
            ),
        };
        sql
    }
}

/// The lock and statement bounds of a PostgreSQL session lifted, for the migrations: building
/// an index on a big table is long and legitimate, and the migrator waits for the lock of
/// another admin's migrations. (A MySQL session has the bounds only once they are set.)
pub(crate) const POSTGRES_UNBOUNDED: &str = "SET lock_timeout = 0; SET statement_timeout = 0";

impl Default for SessionBounds {
    /// Bounds for any client of the store: a silent transaction or a lock wait ends after
    /// 30 s, a statement after 5 min. The admin sets its own from its cluster's timing.
    fn default() -> Self {
        SessionBounds {
            transaction_idle: Duration::from_secs(30),
            lock_wait: Duration::from_secs(30),
            statement: Duration::from_secs(300),
        }
    }
}

/// A duration in whole seconds, rounded up (a bound is never made shorter than asked).
fn whole_seconds(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn bounds_out_of_range_or_a_lock_wait_over_the_statement_bound_are_refused() {
        for (idle, lock, statement, field) in [
            (0.0, 1.0, 1.0, "transaction_idle"),
            (0.999, 1.0, 1.0, "transaction_idle"),
            (1.0, 0.5, 1.0, "lock_wait"),
            (1.0, 1.0, 86_400.001, "statement"),
            (1.0, 2.0, 1.5, "lock_wait"),
        ] {
            let e = SessionBounds::new(secs(idle), secs(lock), secs(statement)).unwrap_err();
            assert!(
                matches!(&e, Error::Invalid(m) if m.contains(field)),
                "{idle} {lock} {statement}: {e}"
            );
        }
        let b = SessionBounds::new(secs(1.0), secs(86_400.0), secs(86_400.0)).unwrap();
        assert_eq!(
            (b.transaction_idle(), b.lock_wait(), b.statement()),
            (secs(1.0), secs(86_400.0), secs(86_400.0))
        );
        let d = SessionBounds::default();
        assert_eq!(
            SessionBounds::new(d.transaction_idle(), d.lock_wait(), d.statement()).unwrap(),
            d
        );
    }

    #[test]
    fn postgres_gets_milliseconds_and_keepalives_of_the_idle_bound() {
        let b = SessionBounds::new(secs(2.5), secs(5.0), secs(300.0)).unwrap();
        let settings = b.postgres_settings();
        let got: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("idle_in_transaction_session_timeout", "2500"),
                ("lock_timeout", "5000"),
                ("statement_timeout", "300000"),
                ("tcp_keepalives_idle", "3"),
                ("tcp_keepalives_interval", "1"),
                ("tcp_keepalives_count", "3"),
            ]
        );
    }

    #[test]
    fn mysql_and_mariadb_get_their_own_names_in_whole_seconds() {
        let b = SessionBounds::new(secs(2.5), secs(5.0), secs(300.0)).unwrap();
        assert_eq!(
            b.mysql_settings(MySqlFlavor::MariaDb),
            "SET SESSION innodb_lock_wait_timeout = 5, SESSION net_write_timeout = 3, \
             SESSION net_read_timeout = 3, SESSION idle_transaction_timeout = 3, \
             SESSION max_statement_time = 300"
        );
        assert_eq!(
            b.mysql_settings(MySqlFlavor::MySql),
            "SET SESSION innodb_lock_wait_timeout = 5, SESSION net_write_timeout = 3, \
             SESSION net_read_timeout = 3, SESSION wait_timeout = 3, \
             SESSION max_execution_time = 300000"
        );
        assert_eq!(
            MySqlFlavor::of_version("10.11.19-MariaDB-0+deb12u1"),
            MySqlFlavor::MariaDb
        );
        assert_eq!(MySqlFlavor::of_version("8.0.36"), MySqlFlavor::MySql);
    }
}
