//! The three [`Backend`]s: connection setup, migrations, write transactions, and the binding
//! of [`Query`] values to each sqlx driver. Everything else is shared.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlConnection, MySqlPoolOptions};
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, Postgres};
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Connection, Database, Executor, Pool, Transaction};

use crate::bounds::{MySqlFlavor, POSTGRES_UNBOUNDED};
use crate::sql::{
    AnyRow, Arg, Backend, CLUSTER_CONNECTIONS, Conn, Done, Kind, Pools, Query,
    numbered_placeholders,
};
use crate::{Error, StoreOptions};

// `sqlx::migrate!` lives behind sqlx's `macros` feature, which we leave off; the proc macro
// it forwards to is reachable through the `derive` feature, and expands to the same thing.
static SQLITE_MIGRATOR: Migrator = sqlx::sqlx_macros::migrate!("migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::sqlx_macros::migrate!("migrations/postgres");
static MYSQL_MIGRATOR: Migrator = sqlx::sqlx_macros::migrate!("migrations/mysql");

/// A server database's pooled connection idle longer than this is pinged before it is handed
/// out, and one idle for less is handed out as it is.
const PING_AFTER_IDLE: Duration = Duration::from_secs(5);

/// `options` with connections pinged before use only after [`PING_AFTER_IDLE`]. sqlx pings a
/// connection when it comes back to the pool and, by default, again before it is handed out:
/// a round trip before every statement or transaction of the store, which on a busy machine
/// waits for both processes to be scheduled (a tenth of the time of a batch of job creates
/// on PostgreSQL). A connection back for a moment passed its return ping; one idle for longer
/// may have been cut (a server restart, a firewall's idle timeout) and is checked, a dead one
/// replaced.
fn pinged_when_idle<DB: Database>(options: PoolOptions<DB>) -> PoolOptions<DB> {
    options
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(
                async move { Ok(meta.idle_for < PING_AFTER_IDLE || conn.ping().await.is_ok()) },
            )
        })
}

/// The three query methods of a backend, identical but for the driver type, the placeholder
/// style and where the inserted id comes from.
macro_rules! query_methods {
    ($db:ty, $prepare:expr, |$done:ident| $last_id:expr) => {
        async fn execute(conn: &mut Conn<Self>, query: Query) -> Result<Done, sqlx::Error> {
            let Query {
                sql,
                args,
                persistent,
            } = query;
            let mut q = sqlx::query::<$db>(AssertSqlSafe($prepare(sql))).persistent(persistent);
            for arg in args {
                q = match arg {
                    Arg::Int(v) => q.bind(v),
                    Arg::Int32(v) => q.bind(v),
                    Arg::Text(v) => q.bind(v),
                };
            }
            let $done = q.execute(&mut *conn).await?;
            Ok(Done {
                rows: $done.rows_affected(),
                last_id: $last_id,
            })
        }

        async fn fetch_all<T: AnyRow>(
            conn: &mut Conn<Self>,
            query: Query,
        ) -> Result<Vec<T>, sqlx::Error> {
            let Query {
                sql,
                args,
                persistent,
            } = query;
            let mut q =
                sqlx::query_as::<$db, T>(AssertSqlSafe($prepare(sql))).persistent(persistent);
            for arg in args {
                q = match arg {
                    Arg::Int(v) => q.bind(v),
                    Arg::Int32(v) => q.bind(v),
                    Arg::Text(v) => q.bind(v),
                };
            }
            q.fetch_all(&mut *conn).await
        }

        async fn fetch_optional<T: AnyRow>(
            conn: &mut Conn<Self>,
            query: Query,
        ) -> Result<Option<T>, sqlx::Error> {
            let Query {
                sql,
                args,
                persistent,
            } = query;
            let mut q =
                sqlx::query_as::<$db, T>(AssertSqlSafe($prepare(sql))).persistent(persistent);
            for arg in args {
                q = match arg {
                    Arg::Int(v) => q.bind(v),
                    Arg::Int32(v) => q.bind(v),
                    Arg::Text(v) => q.bind(v),
                };
            }
            q.fetch_optional(&mut *conn).await
        }
    };
}

fn as_written(sql: String) -> String {
    sql
}

fn numbered(sql: String) -> String {
    numbered_placeholders(&sql)
}

/// How long the one direct connection attempt after a pool time-out may take.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A pool that could not connect in time (it retries a refused connection until then) says
/// only "timed out": one direct attempt names the real cause (connection refused, ...).
async fn explain_timeout<C>(e: sqlx::Error, options: &C) -> sqlx::Error
where
    C: sqlx::ConnectOptions,
    C::Connection: Sized,
{
    if !matches!(e, sqlx::Error::PoolTimedOut) {
        return e;
    }
    match tokio::time::timeout(PROBE_TIMEOUT, options.connect()).await {
        Ok(Err(cause)) => cause,
        _ => e,
    }
}

/// A URL the driver cannot parse. The URL itself is not repeated: it may hold a password.
fn bad_url(_: sqlx::Error) -> Error {
    Error::Invalid("the database url is not valid".to_owned())
}

/// Pages (4 KiB) the write-ahead log may hold before a commit checkpoints it itself: about
/// three seconds of writes at 10,000 fires a second, so it is reached only when nothing else
/// checkpoints.
const WAL_BACKSTOP_PAGES: u32 = 20_000;

/// Rows a SQLite statement hands to its caller before it waits for the caller to take them.
const SQLITE_ROW_BUFFER: usize = 1024;

/// Embedded SQLite: one file, WAL, one writer at a time.
pub(crate) struct SqliteBackend;

impl Backend for SqliteBackend {
    type Db = Sqlite;
    const KIND: Kind = Kind::Sqlite;

    async fn open(url: &str, options: &StoreOptions) -> Result<Pools<Sqlite>, Error> {
        let connect = SqliteConnectOptions::from_str(url)
            .map_err(bad_url)?
            .journal_mode(SqliteJournalMode::Wal)
            // NORMAL is durable in WAL mode except for the last commits before a power loss.
            .synchronous(SqliteSynchronous::Normal)
            // The admin copies the log into the file from a reading connection
            // (`Store::log_checkpoint`): a checkpoint in the commit that crosses SQLite's
            // default of 1,000 pages held the one write lock for a third of its time at
            // 10,000 fires a second. The writer checkpoints only past this backstop.
            .pragma("wal_autocheckpoint", WAL_BACKSTOP_PAGES.to_string())
            .busy_timeout(options.sqlite_busy_timeout)
            // A statement's rows cross from SQLite's thread to the caller through a bounded
            // channel; at the default of 50 rows a claim's or a batch of results' thousands
            // stopped and woke SQLite's thread every 50 rows.
            .row_buffer_size(SQLITE_ROW_BUFFER)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new().acquire_timeout(options.acquire_timeout);
        // Every connection to `:memory:` is a database of its own: keep exactly one, forever.
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        if in_memory {
            let pool = pool
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
            return match pool.connect_with(connect.clone()).await {
                Ok(pool) => Ok(Pools::one(pool)),
                Err(e) => Err(explain_timeout(e, &connect).await.into()),
            };
        }
        let reads = pool.max_connections(options.max_connections.unwrap_or(4));
        let writes = SqlitePoolOptions::new()
            .acquire_timeout(options.acquire_timeout)
            .max_connections(1);
        let reads = match reads.connect_with(connect.clone()).await {
            Ok(pool) => pool,
            Err(e) => return Err(explain_timeout(e, &connect).await.into()),
        };
        // Lazily: the file exists once the read pool opened it.
        let writes = writes.connect_lazy_with(connect);
        Ok(Pools {
            reads,
            writes,
            separate: true,
            cluster: None,
        })
    }

    async fn migrate(pool: &Pool<Sqlite>) -> Result<(), Error> {
        Ok(SQLITE_MIGRATOR.run(pool).await?)
    }

    async fn begin_write(pool: &Pool<Sqlite>) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        // A deferred BEGIN that later writes fails at once with "database is locked" when
        // another writer got in first; IMMEDIATE takes the write lock up front and so waits
        // out the busy timeout instead.
        pool.begin_with("BEGIN IMMEDIATE").await
    }

    query_methods!(Sqlite, as_written, |done| done.last_insert_rowid());
}

/// The planning of a PostgreSQL session: every execution of a prepared statement is planned
/// for the tables as they are then. After five executions the server may instead keep a
/// generic plan made with the sizes of that moment until the table's statistics change; on a
/// server that never analyzes they never do, and the pool keeps a session for up to half an
/// hour. The dispatch record's join of its batch with the ledger, prepared on a fresh
/// database, then read the whole ledger at every batch (500 ms a batch at a million runs).
/// Planning the ledger's statements each time costs the server far less than one such read.
const POSTGRES_PLANNING: [(&str, &str); 1] = [("plan_cache_mode", "force_custom_plan")];

/// PostgreSQL.
pub(crate) struct PostgresBackend;

impl Backend for PostgresBackend {
    type Db = Postgres;
    const KIND: Kind = Kind::Postgres;

    async fn open(url: &str, options: &StoreOptions) -> Result<Pools<Postgres>, Error> {
        // In the startup packet: the session has its bounds before its first statement.
        let connect = PgConnectOptions::from_str(url)
            .map_err(bad_url)?
            .options(options.session_bounds.postgres_settings())
            .options(POSTGRES_PLANNING);
        let pool = pinged_when_idle(PgPoolOptions::new()).acquire_timeout(options.acquire_timeout);
        match pool
            .clone()
            .max_connections(options.max_connections.unwrap_or(10))
            .connect_with(connect.clone())
            .await
        {
            Ok(opened) => Ok(Pools::server(
                opened,
                pool.max_connections(CLUSTER_CONNECTIONS)
                    .connect_lazy_with(connect),
            )),
            Err(e) => Err(explain_timeout(e, &connect).await.into()),
        }
    }

    async fn migrate(pool: &Pool<Postgres>) -> Result<(), Error> {
        // On a connection of its own without the lock and statement bounds: an index built on
        // a big table is long, and the migrator's advisory lock waits for another admin's
        // migrations. Closed afterwards, so the lifted bounds never reach the store's pool.
        let unbounded = PgPoolOptions::new()
            .max_connections(1)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(POSTGRES_UNBOUNDED).await?;
                    Ok(())
                })
            })
            .connect_with((*pool.connect_options()).clone())
            .await?;
        let migrated = POSTGRES_MIGRATOR.run(&unbounded).await;
        unbounded.close().await;
        Ok(migrated?)
    }

    async fn begin_write(
        pool: &Pool<Postgres>,
    ) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        pool.begin().await
    }

    // PostgreSQL reports inserted ids only through RETURNING, which the store uses instead.
    query_methods!(Postgres, numbered, |_done| 0);

    async fn listen<T: Send + 'static>(
        pool: &Pool<Postgres>,
        channels: &'static [&'static str],
        read: fn(&str, &str) -> Option<T>,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<T>>, Error> {
        // A pool of its own: a listener keeps its connection for good, which must not shrink
        // the store's pool.
        let own = PgPoolOptions::new()
            .max_connections(1)
            .connect_with((*pool.connect_options()).clone())
            .await?;
        let mut listener = sqlx::postgres::PgListener::connect_with(&own).await?;
        listener.listen_all(channels.iter().copied()).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                // A lost connection is opened again by the next `recv` (what was notified
                // meanwhile is missed: the listeners poll slowly as well).
                let notification = tokio::select! {
                    _ = tx.closed() => return,
                    n = listener.recv() => n,
                };
                match notification {
                    Ok(n) => {
                        let Some(item) = read(n.channel(), n.payload()) else {
                            continue;
                        };
                        if tx.try_send(item).is_err() && tx.is_closed() {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "notification listener lost its connection");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(Some(rx))
    }
}

/// MySQL 8 and MariaDB >= 10.6 (both have `SKIP LOCKED`).
pub(crate) struct MySqlBackend;

impl Backend for MySqlBackend {
    type Db = MySql;
    const KIND: Kind = Kind::MySql;

    async fn open(url: &str, options: &StoreOptions) -> Result<Pools<MySql>, Error> {
        // The driver speaks to both; only the scheme name differs.
        let url = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        let connect = MySqlConnectOptions::from_str(&url).map_err(bad_url)?;
        let bounds = options.session_bounds;
        let pool = pinged_when_idle(MySqlPoolOptions::new())
            .acquire_timeout(options.acquire_timeout)
            // READ COMMITTED, as on PostgreSQL. Under InnoDB's default REPEATABLE READ a claim's
            // `FOR UPDATE SKIP LOCKED` scan also locks the index entry after the last row it
            // returns, so a second claimer waits on it and the two deadlock; edits of jobs
            // being claimed deadlock the same way. (Needs row or mixed binlog format, the
            // default of MySQL 8 and MariaDB.)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    conn.execute(MYSQL_READ_COMMITTED).await?;
                    let flavor = mysql_flavor(conn).await?;
                    conn.execute(AssertSqlSafe(bounds.mysql_settings(flavor)))
                        .await?;
                    Ok(())
                })
            });
        let opened = pool
            .clone()
            .max_connections(options.max_connections.unwrap_or(10))
            .connect_with(connect.clone())
            .await;
        match opened {
            Ok(opened) => Ok(Pools::server(
                opened,
                pool.max_connections(CLUSTER_CONNECTIONS)
                    .connect_lazy_with(connect),
            )),
            Err(e) => Err(explain_timeout(e, &connect).await.into()),
        }
    }

    async fn migrate(pool: &Pool<MySql>) -> Result<(), Error> {
        // As on PostgreSQL. The store's pool sets the bounds after connecting; this one
        // connects with the same options and sets only the isolation level.
        let unbounded = MySqlPoolOptions::new()
            .max_connections(1)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(MYSQL_READ_COMMITTED).await?;
                    Ok(())
                })
            })
            .connect_with((*pool.connect_options()).clone())
            .await?;
        let migrated = MYSQL_MIGRATOR.run(&unbounded).await;
        unbounded.close().await;
        Ok(migrated?)
    }

    async fn begin_write(pool: &Pool<MySql>) -> Result<Transaction<'static, MySql>, sqlx::Error> {
        pool.begin().await
    }

    query_methods!(MySql, as_written, |done| done.last_insert_id() as i64);
}

/// The isolation level of every MySQL and MariaDB session (see [`MySqlBackend::open`]).
const MYSQL_READ_COMMITTED: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// Whether a MySQL-protocol session talks to MySQL or MariaDB: their session bounds differ.
async fn mysql_flavor(conn: &mut MySqlConnection) -> Result<MySqlFlavor, sqlx::Error> {
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *conn)
        .await?;
    Ok(MySqlFlavor::of_version(&version))
}
