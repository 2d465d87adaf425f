//! A fresh database per test, on every backend Tickwork supports, for all of its test suites.
//!
//! SQLite: a file in a temporary folder. PostgreSQL and MySQL/MariaDB: `CREATE DATABASE
//! <prefix>_<pid>_<random>` on the server named by `TICKWORK_TEST_POSTGRES` /
//! `TICKWORK_TEST_MYSQL` (defaults: [`POSTGRES_DEFAULT`], [`MYSQL_DEFAULT`]), dropped afterwards
//! (best effort, also when the test panics). An unreachable server fails the test when `CI` is
//! set, and otherwise skips it with a banner that is hard to miss.

use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::{ConnectOptions, Connection, Executor};

/// The PostgreSQL server used when `TICKWORK_TEST_POSTGRES` is not set.
pub const POSTGRES_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The MySQL/MariaDB server used when `TICKWORK_TEST_MYSQL` is not set.
pub const MYSQL_DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";
/// How long a statement on the server may take, connecting included.
const SERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// A database backend of Tickwork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    /// Every backend, SQLite first.
    pub const ALL: [Backend; 3] = [Backend::Sqlite, Backend::Postgres, Backend::MySql];

    /// The backend's name for people.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
            Backend::MySql => "MySQL/MariaDB",
        }
    }

    /// Whether claims skip rows another transaction holds (rather than waiting for them).
    pub fn skips_locked_rows(self) -> bool {
        self != Backend::Sqlite
    }

    /// The server's URL: from its environment variable, or the local default. `None` for
    /// SQLite, which has no server.
    pub fn server_url(self) -> Option<String> {
        let (env, default) = match self {
            Backend::Sqlite => return None,
            Backend::Postgres => ("TICKWORK_TEST_POSTGRES", POSTGRES_DEFAULT),
            Backend::MySql => ("TICKWORK_TEST_MYSQL", MYSQL_DEFAULT),
        };
        Some(std::env::var(env).unwrap_or_else(|_| default.to_owned()))
    }
}

/// One test's database: created by [`TestDb::create`], dropped by [`TestDb::drop_database`]
/// or, when the test panicked, on drop.
pub struct TestDb {
    backend: Backend,
    url: String,
    server: Option<ServerDb>,
    /// The SQLite file's folder, when the database owns it.
    dir: Option<tempfile::TempDir>,
}

/// A database created on a server, and what else to remove with it.
struct ServerDb {
    backend: Backend,
    server_url: String,
    name: String,
    /// Statements run after the database is dropped (say, dropping a user of the test).
    cleanup: Vec<String>,
}

impl ServerDb {
    async fn drop_all(&self) {
        let drop = match self.backend {
            // FORCE ends the sessions a panicking test or killed process left behind
            // (PostgreSQL >= 13).
            Backend::Postgres => format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            _ => format!("DROP DATABASE IF EXISTS {}", self.name),
        };
        for sql in std::iter::once(&drop).chain(&self.cleanup) {
            if let Err(e) = server_execute(self.backend, &self.server_url, sql).await {
                eprintln!("note: test database cleanup `{sql}` failed: {e}");
            }
        }
    }
}

impl TestDb {
    /// A fresh database on `backend` whose name starts with `prefix` (SQLite: a file in a
    /// temporary folder of its own); `None`, after a loud banner, when the server cannot be
    /// reached outside CI.
    pub async fn create(backend: Backend, prefix: &str) -> Option<TestDb> {
        if backend == Backend::Sqlite {
            let dir = tempfile::tempdir().expect("temporary folder");
            let mut db = TestDb::sqlite(dir.path());
            db.dir = Some(dir);
            return Some(db);
        }
        TestDb::on_server(backend, prefix).await
    }

    /// Like [`TestDb::create`], with the SQLite file in `dir`, a folder the caller keeps.
    pub async fn create_in(backend: Backend, prefix: &str, dir: &Path) -> Option<TestDb> {
        if backend == Backend::Sqlite {
            return Some(TestDb::sqlite(dir));
        }
        TestDb::on_server(backend, prefix).await
    }

    fn sqlite(dir: &Path) -> TestDb {
        TestDb {
            backend: Backend::Sqlite,
            url: format!("sqlite://{}?mode=rwc", dir.join("tickwork.db").display()),
            server: None,
            dir: None,
        }
    }

    async fn on_server(backend: Backend, prefix: &str) -> Option<TestDb> {
        let server_url = backend.server_url().expect("a server backend");
        let name = unique_name(prefix);
        let create = match backend {
            Backend::MySql => {
                format!("CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            }
            _ => format!("CREATE DATABASE {name}"),
        };
        if let Err(e) = server_execute(backend, &server_url, &create).await {
            skip_or_fail(backend, &server_url, &e);
            return None;
        }
        Some(TestDb {
            backend,
            url: with_database(&server_url, &name),
            server: Some(ServerDb {
                backend,
                server_url,
                name,
                cleanup: Vec::new(),
            }),
            dir: None,
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL of the test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of the server the database lives on, as an administrator; `None` for SQLite.
    pub fn server_url(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.server_url.as_str())
    }

    /// The database's name on its server; `None` for SQLite.
    pub fn name(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.name.as_str())
    }

    /// Runs one statement on the server, as its administrator, over a connection of its own.
    /// Panics for SQLite.
    pub async fn execute(&self, sql: &str) -> Result<(), String> {
        let server = self.server.as_ref().expect("a server database");
        server_execute(self.backend, &server.server_url, sql).await
    }

    /// Has `sql` run on the server after the database is dropped (best effort, in the order
    /// given). Panics for SQLite.
    pub fn cleanup_after(&mut self, sql: String) {
        let server = self.server.as_mut().expect("a server database");
        server.cleanup.push(sql);
    }

    /// Drops the database (and runs the cleanup statements).
    pub async fn drop_database(mut self) {
        if let Some(server) = self.server.take() {
            server.drop_all().await;
        }
    }
}

impl Drop for TestDb {
    /// Reached with the server database still there when the test panicked or did not call
    /// [`TestDb::drop_database`]: drops it from a thread of its own, since this may run inside
    /// the test's runtime, which cannot be blocked on from within.
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(server.drop_all());
                }
            })
            .join();
        }
    }
}

/// `<prefix>_<pid>_<random>`: fresh on every run, and telling which process left it behind.
fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{:012x}",
        std::process::id(),
        fastrand::u64(..) >> 16
    )
}

/// Fails the test under CI; otherwise prints a banner that is hard to miss, and the caller
/// skips the test.
pub fn skip_or_fail(backend: Backend, url: &str, error: &str) {
    let what = backend.name();
    if std::env::var_os("CI").is_some() {
        panic!("{what} not reachable at {url}: {error} (CI is set, so this is a failure)");
    }
    // Straight to the process's stderr: `eprintln!` is captured by the test harness and only
    // shown when a test fails, and a skipped test passes.
    let bar = "!".repeat(78);
    let banner = format!("\n{bar}\nSKIPPED: {what} not reachable at {url}: {error}\n{bar}\n");
    let _ = std::io::stderr().write_all(banner.as_bytes());
}

/// Runs one statement on the server at `url` over a connection of its own. Nothing for SQLite.
pub async fn server_execute(backend: Backend, url: &str, sql: &str) -> Result<(), String> {
    let work = async {
        match backend {
            Backend::Postgres => {
                let mut conn = sqlx::postgres::PgConnectOptions::from_str(url)?
                    .connect()
                    .await?;
                conn.execute(sqlx::AssertSqlSafe(sql.to_owned())).await?;
                conn.close().await
            }
            Backend::MySql => {
                let mut conn = sqlx::mysql::MySqlConnectOptions::from_str(url)?
                    .connect()
                    .await?;
                conn.execute(sqlx::AssertSqlSafe(sql.to_owned())).await?;
                conn.close().await
            }
            Backend::Sqlite => Ok(()),
        }
    };
    match tokio::time::timeout(SERVER_TIMEOUT, work).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {SERVER_TIMEOUT:?}")),
    }
}

/// `url` with its database name replaced by `name`, keeping any query string.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{name}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// `url` with its credentials replaced by `user` and `password`.
pub fn with_user(url: &str, user: &str, password: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let host = match (rest.find('@'), rest.find('/')) {
        (Some(at), Some(slash)) if at < slash => &rest[at + 1..],
        (Some(at), None) => &rest[at + 1..],
        _ => rest,
    };
    format!("{}{user}:{password}@{host}", &url[..start])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_name_is_replaced() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/test", "tw_1"),
            "postgres://postgres@127.0.0.1:5432/tw_1"
        );
        assert_eq!(
            with_database("mysql://root:pw@db:3306/test?ssl-mode=disabled", "x"),
            "mysql://root:pw@db:3306/x?ssl-mode=disabled"
        );
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
    }

    #[test]
    fn credentials_are_replaced() {
        assert_eq!(
            with_user("mysql://root@127.0.0.1:3306/x", "u", "pw"),
            "mysql://u:pw@127.0.0.1:3306/x"
        );
        assert_eq!(
            with_user("mysql://root:secret@127.0.0.1:3306/x?a=b", "u", "pw"),
            "mysql://u:pw@127.0.0.1:3306/x?a=b"
        );
        assert_eq!(
            with_user("mysql://127.0.0.1:3306/x", "u", "pw"),
            "mysql://u:pw@127.0.0.1:3306/x"
        );
    }

    #[test]
    fn names_are_fresh_and_prefixed() {
        let a = unique_name("tw");
        let b = unique_name("tw");
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("tw_{}_", std::process::id())), "{a}");
    }

    #[test]
    fn only_server_backends_have_a_server() {
        assert_eq!(Backend::Sqlite.server_url(), None);
        assert!(Backend::Postgres.server_url().is_some());
        assert!(Backend::MySql.server_url().is_some());
        assert_eq!(
            Backend::ALL
                .iter()
                .filter(|b| b.skips_locked_rows())
                .count(),
            2
        );
    }
}
