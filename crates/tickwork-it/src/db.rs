//! A fresh database per test, on each backend the admin supports.
//!
//! SQLite is a file in the test's folder. PostgreSQL and MySQL/MariaDB get `CREATE DATABASE
//! tw_it_<random>` on the server named by `TICKWORK_TEST_POSTGRES` / `TICKWORK_TEST_MYSQL`
//! (defaults below), dropped when the test ends, also when it panics (best effort). A server
//! that cannot be reached fails the test when `CI` is set, and skips it loudly otherwise.

use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::{ConnectOptions, Connection, Executor};

const POSTGRES_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";
const MYSQL_DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A database backend of the admin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
            Backend::MySql => "MySQL/MariaDB",
        }
    }
}

/// One test's database: its URL for `tickwork admin --db`, dropped on drop.
pub struct TestDb {
    pub url: String,
    server: Option<ServerDb>,
}

/// A database created on a server, to drop at the end.
struct ServerDb {
    backend: Backend,
    admin_url: String,
    name: String,
}

impl TestDb {
    /// Creates the database; `None` when the test is to be skipped (server unreachable
    /// outside CI). `dir` holds the SQLite file.
    pub async fn create(backend: Backend, dir: &Path) -> Option<TestDb> {
        let (env, default) = match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}?mode=rwc", dir.join("tickwork.db").display());
                return Some(TestDb { url, server: None });
            }
            Backend::Postgres => ("TICKWORK_TEST_POSTGRES", POSTGRES_DEFAULT),
            Backend::MySql => ("TICKWORK_TEST_MYSQL", MYSQL_DEFAULT),
        };
        let admin_url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
        let name = format!("tw_it_{:016x}", fastrand::u64(..));
        let create = match backend {
            Backend::MySql => {
                format!("CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            }
            _ => format!("CREATE DATABASE {name}"),
        };
        if let Err(e) = server_execute(backend, &admin_url, &create).await {
            skip_or_fail(backend, &admin_url, &e);
            return None;
        }
        let url = with_database(&admin_url, &name);
        Some(TestDb {
            url,
            server: Some(ServerDb {
                backend,
                admin_url,
                name,
            }),
        })
    }
}

impl Drop for TestDb {
    /// Drops the server database from a thread of its own: this runs inside the test's
    /// runtime, which cannot be blocked on from within.
    fn drop(&mut self) {
        let Some(server) = self.server.take() else {
            return;
        };
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let sql = match server.backend {
                // FORCE ends sessions a killed admin may have left behind (PostgreSQL >= 13).
                Backend::Postgres => {
                    format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", server.name)
                }
                _ => format!("DROP DATABASE IF EXISTS {}", server.name),
            };
            if let Err(e) = rt.block_on(server_execute(server.backend, &server.admin_url, &sql)) {
                eprintln!("note: could not drop test database {}: {e}", server.name);
            }
        })
        .join();
    }
}

/// Fails under CI; otherwise prints a banner that is hard to miss.
fn skip_or_fail(backend: Backend, url: &str, error: &str) {
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

/// Runs one statement on the server over a connection of its own.
async fn server_execute(backend: Backend, url: &str, sql: &str) -> Result<(), String> {
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
    match tokio::time::timeout(CONNECT_TIMEOUT, work).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
    }
}

/// `url` naming database `name` instead, query string kept.
fn with_database(url: &str, name: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            u.set_path(&format!("/{name}"));
            u.to_string()
        }
        Err(e) => panic!("database URL {url:?} does not parse: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_name_is_replaced() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/test", "tw_it_1"),
            "postgres://postgres@127.0.0.1:5432/tw_it_1"
        );
        assert_eq!(
            with_database("mysql://root:pw@db:3306/test?ssl-mode=disabled", "x"),
            "mysql://root:pw@db:3306/x?ssl-mode=disabled"
        );
    }
}
