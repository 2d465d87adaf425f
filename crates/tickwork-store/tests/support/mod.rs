//! Fresh databases for the conformance suite: every test gets its own, on every backend.
//!
//! SQLite: a file in a temporary folder. PostgreSQL and MySQL/MariaDB: `CREATE DATABASE
//! tw_<pid>_<random>` on the server named by `TICKWORK_TEST_POSTGRES` / `TICKWORK_TEST_MYSQL`,
//! dropped afterwards (best effort, also when the test panics). An unreachable server skips the
//! test with a loud banner, or fails it when `CI` is set.

use std::future::Future;
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::{ConnectOptions, Connection, Executor};
use tickwork_store::{Store, StoreOptions};

const POSTGRES_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";
const MYSQL_DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    /// Whether claims skip rows another transaction holds (rather than waiting for them).
    pub fn skips_locked_rows(self) -> bool {
        self != Backend::Sqlite
    }
}

/// What a test gets: the store, and the means to open a second one on the same database
/// (another admin node).
#[derive(Clone)]
pub struct Ctx {
    pub store: Arc<dyn Store>,
    pub url: String,
    pub backend: Backend,
}

impl Ctx {
    /// Another store on the same database; runs the migrations again.
    pub async fn connect_again(&self) -> Arc<dyn Store> {
        tickwork_store::connect(&self.url, &StoreOptions::default())
            .await
            .expect("second connection to the test database")
    }
}

/// Runs `test` on a fresh database of `backend`, then drops the database.
pub async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(mut db) = TestDb::create(backend).await else {
        return;
    };
    test(db.ctx.clone()).await;
    db.ctx.store.close().await;
    if let Some(server) = db.server.take() {
        server.drop_database().await;
    }
}

/// A database on a server, to drop at the end.
struct ServerDb {
    backend: Backend,
    admin_url: String,
    name: String,
}

impl ServerDb {
    async fn drop_database(&self) {
        let sql = match self.backend {
            // FORCE ends the sessions a panicking test left behind (PostgreSQL >= 13).
            Backend::Postgres => format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            _ => format!("DROP DATABASE IF EXISTS {}", self.name),
        };
        let result = admin_execute(self.backend, &self.admin_url, &sql).await;
        if let Err(e) = result {
            eprintln!("note: could not drop test database {}: {e}", self.name);
        }
    }
}

struct TestDb {
    ctx: Ctx,
    server: Option<ServerDb>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for TestDb {
    /// Only reached with `server` still set when the test panicked: drop the database from a
    /// thread of its own, since this may run inside the test's runtime.
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(server.drop_database());
                }
            })
            .join();
        }
    }
}

impl TestDb {
    async fn create(backend: Backend) -> Option<TestDb> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temporary folder");
                let url = format!("sqlite://{}?mode=rwc", dir.path().join("tw.db").display());
                let store = tickwork_store::connect(&url, &StoreOptions::default())
                    .await
                    .expect("open the SQLite test database");
                Some(TestDb {
                    ctx: Ctx {
                        store,
                        url,
                        backend,
                    },
                    server: None,
                    _dir: Some(dir),
                })
            }
            Backend::Postgres | Backend::MySql => {
                let (env, default, what) = if backend == Backend::Postgres {
                    ("TICKWORK_TEST_POSTGRES", POSTGRES_DEFAULT, "PostgreSQL")
                } else {
                    ("TICKWORK_TEST_MYSQL", MYSQL_DEFAULT, "MySQL/MariaDB")
                };
                let admin_url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
                let name = format!("tw_{}_{:012x}", std::process::id(), fastrand::u64(..) >> 16);
                let create = if backend == Backend::Postgres {
                    format!("CREATE DATABASE {name}")
                } else {
                    format!("CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
                };
                if let Err(e) = admin_execute(backend, &admin_url, &create).await {
                    return unreachable(what, &admin_url, &e);
                }
                let server = ServerDb {
                    backend,
                    admin_url: admin_url.clone(),
                    name: name.clone(),
                };
                let url = with_database(&admin_url, &name);
                let store = match tickwork_store::connect(&url, &StoreOptions::default()).await {
                    Ok(store) => store,
                    Err(e) => {
                        server.drop_database().await;
                        panic!("open the {what} test database: {e:?}");
                    }
                };
                Some(TestDb {
                    ctx: Ctx {
                        store,
                        url,
                        backend,
                    },
                    server: Some(server),
                    _dir: None,
                })
            }
        }
    }
}

/// Skips (or, under CI, fails) a test whose server cannot be reached.
fn unreachable(what: &str, url: &str, error: &str) -> Option<TestDb> {
    if std::env::var_os("CI").is_some() {
        panic!("{what} not reachable at {url}: {error} (CI is set, so this is a failure)");
    }
    // Straight to the process's stderr: `eprintln!` would be captured with the test's output,
    // and a passing test's output is never shown.
    let bar = "!".repeat(78);
    let banner = format!("\n{bar}\nSKIPPED: {what} not reachable at {url}: {error}\n{bar}\n");
    let _ = std::io::stderr().write_all(banner.as_bytes());
    None
}

/// Runs one statement on the server's admin database over a connection of its own.
async fn admin_execute(backend: Backend, url: &str, sql: &str) -> Result<(), String> {
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

/// `url` with its database name replaced by `name`, keeping any query string.
fn with_database(url: &str, name: &str) -> String {
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

/// Instantiates every listed test (an `async fn(Ctx)` at the crate root) once per backend:
/// `sqlite::name`, `postgres::name`, `mysql::name`.
#[macro_export]
macro_rules! conformance {
    ($($test:ident),+ $(,)?) => {
        $crate::conformance!(@backend sqlite, Sqlite, $($test),+);
        $crate::conformance!(@backend postgres, Postgres, $($test),+);
        $crate::conformance!(@backend mysql, MySql, $($test),+);
    };
    (@backend $module:ident, $variant:ident, $($test:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    $crate::support::run($crate::support::Backend::$variant, super::$test).await;
                }
            )+
        }
    };
}
