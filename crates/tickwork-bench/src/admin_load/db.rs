//! The benchmark's database: a SQLite file in the run's temporary folder, or a fresh database
//! `tw_bench_<random>` on a PostgreSQL or MySQL/MariaDB server, dropped afterwards. After the
//! run the ledger (`tw_runs`) is read directly, to cross-check what the executors saw.

use std::path::Path;

use anyhow::Context;
use sqlx::AssertSqlSafe;

/// The database backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DbKind {
    Sqlite,
    Postgres,
    Mysql,
}

impl DbKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Postgres => "postgres",
            DbKind::Mysql => "mysql",
        }
    }

    /// Command names of the server's processes, for the CPU split.
    pub(crate) fn process_names(self) -> Vec<&'static str> {
        match self {
            DbKind::Sqlite => Vec::new(),
            DbKind::Postgres => vec!["postgres"],
            DbKind::Mysql => vec!["mariadbd", "mysqld"],
        }
    }
}

enum Pool {
    Sqlite(sqlx::SqlitePool),
    Pg(sqlx::PgPool),
    My(sqlx::MySqlPool),
}

impl Pool {
    async fn close(self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Pg(p) => p.close().await,
            Pool::My(p) => p.close().await,
        }
    }
}

/// The runs of one group scheduled in a window: binds group id, from, to.
const WHERE: &str = "WHERE group_id = ? AND scheduled_at >= ? AND scheduled_at < ?";

/// `?` placeholders as PostgreSQL writes them (`$1`, `$2`, ...).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs one query on whichever backend, binding `i64` values in order.
macro_rules! fetch {
    ($pool:expr, $row:ty, $sql:expr, $binds:expr) => {{
        let sql: String = $sql;
        match &$pool {
            Pool::Sqlite(p) => {
                let mut q = sqlx::query_as::<sqlx::Sqlite, $row>(AssertSqlSafe(sql));
                for b in $binds {
                    q = q.bind(*b);
                }
                q.fetch_all(p).await?
            }
            Pool::Pg(p) => {
                let mut q = sqlx::query_as::<sqlx::Postgres, $row>(AssertSqlSafe(numbered(&sql)));
                for b in $binds {
                    q = q.bind(*b);
                }
                q.fetch_all(p).await?
            }
            Pool::My(p) => {
                let mut q = sqlx::query_as::<sqlx::MySql, $row>(AssertSqlSafe(sql));
                for b in $binds {
                    q = q.bind(*b);
                }
                q.fetch_all(p).await?
            }
        }
    }};
}

/// The database of one benchmark run.
pub(super) struct BenchDb {
    pub kind: DbKind,
    /// The URL the admins use.
    pub url: String,
    /// The server URL and the database name, for the drop (server backends only).
    server: Option<(String, String)>,
}

impl BenchDb {
    /// Creates the database: a file under `dir`, or a fresh database on `server_url`.
    pub(super) async fn create(
        kind: DbKind,
        server_url: &str,
        dir: &Path,
    ) -> anyhow::Result<BenchDb> {
        if kind == DbKind::Sqlite {
            let file = dir.join("bench.db");
            return Ok(BenchDb {
                kind,
                url: format!("sqlite://{}?mode=rwc", file.display()),
                server: None,
            });
        }
        let name = format!("tw_bench_{:08x}", rand_u32());
        let create = format!("CREATE DATABASE {name}");
        match kind {
            DbKind::Postgres => {
                let pool = sqlx::PgPool::connect(server_url)
                    .await
                    .with_context(|| format!("cannot connect to {server_url}"))?;
                sqlx::query(AssertSqlSafe(create)).execute(&pool).await?;
                pool.close().await;
            }
            _ => {
                let pool = sqlx::MySqlPool::connect(server_url)
                    .await
                    .with_context(|| format!("cannot connect to {server_url}"))?;
                sqlx::query(AssertSqlSafe(create)).execute(&pool).await?;
                pool.close().await;
            }
        }
        let mut url = reqwest::Url::parse(server_url).context("invalid server url")?;
        url.set_path(&format!("/{name}"));
        Ok(BenchDb {
            kind,
            url: url.to_string(),
            server: Some((server_url.to_owned(), name)),
        })
    }

    /// Drops a server database (a SQLite file goes with the temporary folder).
    pub(super) async fn drop_database(&self) -> anyhow::Result<()> {
        let Some((server_url, name)) = &self.server else {
            return Ok(());
        };
        match self.kind {
            DbKind::Postgres => {
                let pool = sqlx::PgPool::connect(server_url).await?;
                let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::query(AssertSqlSafe(sql)).execute(&pool).await?;
                pool.close().await;
            }
            _ => {
                let pool = sqlx::MySqlPool::connect(server_url).await?;
                let sql = format!("DROP DATABASE IF EXISTS {name}");
                sqlx::query(AssertSqlSafe(sql)).execute(&pool).await?;
                pool.close().await;
            }
        }
        Ok(())
    }

    /// A read pool on the database (read-only for SQLite, whose admin may still be running).
    async fn pool(&self) -> anyhow::Result<Pool> {
        Ok(match self.kind {
            DbKind::Sqlite => {
                let ro = self.url.replace("mode=rwc", "mode=ro");
                Pool::Sqlite(sqlx::SqlitePool::connect(&ro).await?)
            }
            DbKind::Postgres => Pool::Pg(sqlx::PgPool::connect(&self.url).await?),
            DbKind::Mysql => Pool::My(sqlx::MySqlPool::connect(&self.url).await?),
        })
    }

    /// Runs `statements` (whole SQL, no parameters) in order on a writing connection: the
    /// bench's own rows, written around the admin (`--scenario jobs-page`'s run history).
    pub(super) async fn execute(&self, statements: &[String]) -> anyhow::Result<()> {
        macro_rules! run_all {
            ($pool:expr) => {{
                let pool = $pool;
                for sql in statements {
                    sqlx::query(AssertSqlSafe(sql.clone()))
                        .execute(&pool)
                        .await?;
                }
                pool.close().await;
            }};
        }
        match self.kind {
            DbKind::Sqlite => run_all!(sqlx::SqlitePool::connect(&self.url).await?),
            DbKind::Postgres => run_all!(sqlx::PgPool::connect(&self.url).await?),
            DbKind::Mysql => run_all!(sqlx::MySqlPool::connect(&self.url).await?),
        }
        Ok(())
    }

    /// Runs of `group_id` scheduled in `[from_ms, to_ms)` in a final state (neither `planned`
    /// nor `dispatched`): their result is recorded. Read while the admins run.
    pub(super) async fn final_runs(
        &self,
        group_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> anyhow::Result<i64> {
        self.count(
            format!(
                "SELECT COUNT(*) FROM tw_runs {WHERE} AND state NOT IN ('planned', 'sending', 'dispatched')"
            ),
            &[group_id, from_ms, to_ms],
        )
        .await
    }

    /// Jobs of `group_id` whose next fire is before `at_ms`: not yet claimed past it (every
    /// fire the claim passed is in the ledger). Read while the admins run.
    pub(super) async fn jobs_unclaimed_before(
        &self,
        group_id: i64,
        at_ms: i64,
    ) -> anyhow::Result<i64> {
        self.count(
            "SELECT COUNT(*) FROM tw_jobs WHERE group_id = ? AND next_fire_at < ?".to_owned(),
            &[group_id, at_ms],
        )
        .await
    }

    /// The number a `SELECT COUNT(*)` without binds answers. Read while the admins run.
    pub(super) async fn count_of(&self, sql: &str) -> anyhow::Result<i64> {
        self.count(sql.to_owned(), &[]).await
    }

    /// Every workflow instance: id, workflow, state, scheduled instant.
    pub(super) async fn workflow_instances(
        &self,
    ) -> anyhow::Result<Vec<(i64, i64, String, Option<i64>)>> {
        let pool = self.pool().await?;
        let rows = fetch!(
            pool,
            (i64, i64, String, Option<i64>),
            "SELECT id, workflow_id, state, fire_key FROM tw_workflow_instances".to_owned(),
            &[] as &[i64]
        );
        pool.close().await;
        Ok(rows)
    }

    /// Every run of a workflow node: instance, node index, run id, dispatched, finished.
    pub(super) async fn workflow_node_runs(
        &self,
    ) -> anyhow::Result<Vec<(i64, i64, i64, Option<i64>, Option<i64>)>> {
        let pool = self.pool().await?;
        let rows = fetch!(
            pool,
            (i64, i64, i64, Option<i64>, Option<i64>),
            "SELECT w.instance_id, w.node_index, r.id, r.dispatched_at, r.finished_at \
             FROM tw_workflow_runs w JOIN tw_runs r ON r.id = w.run_id"
                .to_owned(),
            &[] as &[i64]
        );
        pool.close().await;
        Ok(rows)
    }

    /// The number a `SELECT COUNT(*)` with `binds` answers, on a pool of its own.
    async fn count(&self, sql: String, binds: &[i64]) -> anyhow::Result<i64> {
        let pool = self.pool().await?;
        let n = fetch!(pool, (i64,), sql, binds);
        pool.close().await;
        Ok(n.first().map_or(0, |r| r.0))
    }

    /// Reads the ledger of the runs of `group_id` scheduled in `[from_ms, to_ms)`.
    pub(super) async fn ledger(
        &self,
        group_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> anyhow::Result<Ledger> {
        let pool = self.pool().await?;
        let binds = [group_id, from_ms, to_ms];
        let states = fetch!(
            pool,
            (Option<String>, i64),
            format!("SELECT state, COUNT(*) FROM tw_runs {WHERE} GROUP BY state ORDER BY state"),
            &binds
        );
        let owners = fetch!(
            pool,
            (Option<String>, i64),
            format!(
                "SELECT owner_node, COUNT(*) FROM tw_runs {WHERE} \
                 GROUP BY owner_node ORDER BY owner_node"
            ),
            &binds
        );
        let duplicated = fetch!(
            pool,
            (i64,),
            format!(
                "SELECT COUNT(*) FROM (SELECT job_id, scheduled_at FROM tw_runs {WHERE} \
                 GROUP BY job_id, scheduled_at HAVING COUNT(*) > 1) d"
            ),
            &binds
        );
        let scheduled = fetch!(
            pool,
            (i64,),
            format!(
                "SELECT COUNT(*) FROM (SELECT DISTINCT job_id, scheduled_at FROM tw_runs \
                 {WHERE} AND fire_key IS NOT NULL) d"
            ),
            &binds
        );
        let rows = fetch!(
            pool,
            (i64, i64, Option<i64>, Option<i64>),
            format!(
                "SELECT scheduled_at, created_at, dispatched_at, finished_at FROM tw_runs {WHERE}"
            ),
            &binds
        );
        pool.close().await;
        Ok(Ledger {
            states: states
                .into_iter()
                .map(|(s, n)| (s.unwrap_or_default(), n))
                .collect(),
            owners: owners
                .into_iter()
                .map(|(s, n)| (s.unwrap_or_else(|| "-".into()), n))
                .collect(),
            duplicated: duplicated.first().map_or(0, |r| r.0),
            distinct_scheduled: scheduled.first().map_or(0, |r| r.0),
            rows: rows
                .into_iter()
                .map(
                    |(scheduled_at, created_at, dispatched_at, finished_at)| LedgerRow {
                        scheduled_at,
                        created_at,
                        dispatched_at,
                        finished_at,
                    },
                )
                .collect(),
        })
    }
}

/// What the ledger holds for the window.
#[derive(Debug, Clone)]
pub(super) struct Ledger {
    /// Runs by state.
    pub states: Vec<(String, i64)>,
    /// Runs by owning admin node.
    pub owners: Vec<(String, i64)>,
    /// (job, scheduled_at) pairs with more than one run.
    pub duplicated: i64,
    /// Distinct scheduled (job, fire) pairs.
    pub distinct_scheduled: i64,
    pub rows: Vec<LedgerRow>,
}

/// The timestamps of one run.
#[derive(Debug, Clone, Copy)]
pub(super) struct LedgerRow {
    pub scheduled_at: i64,
    pub created_at: i64,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
}

impl Ledger {
    /// Runs of the window in `state`.
    pub(super) fn count_of(&self, state: &str) -> i64 {
        self.states
            .iter()
            .filter(|(s, _)| s == state)
            .map(|(_, n)| n)
            .sum()
    }
}

/// A random 32-bit number from the standard library's hasher seed (no extra dependency).
pub(super) fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() as u32
}
