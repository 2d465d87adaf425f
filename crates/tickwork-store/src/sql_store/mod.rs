//! The one implementation of [`Store`], generic over the [`Backend`]: every statement is
//! written here once. This module holds the type, the limits of the columns and the helpers
//! every area shares; each area's trait is implemented in its own file.

mod accounts;
mod alarms;
mod audit;
mod cluster;
mod fire_check;
mod groups;
mod jobs;
mod json_rows;
mod runs;
mod scripts;
mod submissions;
mod transitions;
mod workflows;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::LazyLock;

use async_trait::async_trait;
use sqlx::Pool;
use tickwork_core::TriggerType;
use tickwork_core::alarm::AlarmStatus;
use tickwork_core::job::Limits;
use tickwork_core::run::{RunMove, RunState};

use json_rows::JsonRows;

use crate::error::{is_foreign_key_violation, is_retryable, is_unique_violation};
use crate::model::*;
use crate::rows::*;
use crate::sql::{
    Arg, Backend, Conn, Kind, Query, alarm_in, open_runs_in, state_in, state_literal,
};
use crate::store::{
    AccountStore, AlarmStore, AuditStore, ClusterStore, FireCheckStore, GroupStore, JobStore,
    RunLedger, ScriptStore, Store,
};
use crate::{Error, StoreOptions};

/// Column limits, the same on every backend (they are MySQL's VARCHAR sizes). A job's are
/// core's [`Limits::STANDARD`], which the admin validates against.
const APP_NAME_MAX: usize = 64;
const TITLE_MAX: usize = 128;
const ADDRESS_MAX: usize = 255;
const JOB: Limits = Limits::STANDARD;
const JOB_KEY_MAX: usize = JOB.key_chars;
const DESCRIPTION_MAX: usize = JOB.description_chars;
const OWNER_MAX: usize = JOB.owner_chars;
const SCHEDULE_CONF_MAX: usize = JOB.schedule_conf_chars;
const TIME_ZONE_MAX: usize = JOB.time_zone_chars;
const HANDLER_MAX: usize = JOB.handler_chars;
const NODE_ID_MAX: usize = 64;
const LEASE_NAME_MAX: usize = 64;
const CHANNEL_NAME_MAX: usize = 64;
const USERNAME_MAX: usize = 64;
const PASSWORD_HASH_MAX: usize = 255;
const LOCALE_MAX: usize = 16;
const DIGEST_MAX: usize = 64;
const TOKEN_NAME_MAX: usize = 128;
const ACTION_MAX: usize = 64;
const TARGET_TYPE_MAX: usize = 32;
const TARGET_ID_MAX: usize = 128;
const COMMENT_MAX: usize = 255;
/// MySQL's TEXT holds 65,535 bytes.
const TEXT_MAX_BYTES: usize = 65_535;
/// MySQL's MEDIUMTEXT holds 16 MiB.
const GLUE_MAX_BYTES: usize = 16 * 1024 * 1024 - 1;

/// Rows per multi-row statement: well under every backend's bind limit (SQLite 32,766).
const ROWS_PER_STATEMENT: usize = 500;

/// Bytes of SQL text and binds one batch statement aims to stay under. sqlx leaves Nagle's
/// algorithm on, and a statement that leaves in more than one write (seen above 16 KiB) waits
/// for the server's delayed ACK, about 40 ms on Linux, each time.
const STATEMENT_BYTES: usize = 12 * 1024;

/// The statements of `select` (a query ending in `IN `) over `ids`: on SQLite and
/// PostgreSQL one, the ids as one JSON array (see [`JsonRows`]), so that it is prepared once
/// whatever their number; on MySQL/MariaDB [`id_lists`].
fn in_ids<B: Backend>(select: &str, ids: &[i64]) -> Vec<Query> {
    if ids.is_empty() {
        return Vec::new();
    }
    if B::KIND != Kind::MySql {
        let mut rows = JsonRows::with_capacity(ids.len());
        for &id in ids {
            rows.row().int(id);
        }
        let q = Query::new(format!(
            "{select}(SELECT {} FROM {})",
            json_rows::json_field(B::KIND, "i", 0, "BIGINT"),
            json_rows::json_source(B::KIND, "i")
        ))
        .bind(rows.finish());
        return vec![q];
    }
    id_lists(select, ids)
}

/// The statements of `select` (a query ending in `IN `) over `ids` as lists of ids, one per
/// [`ROWS_PER_STATEMENT`], each made for one use: every planner looks such a list up by key,
/// whatever it knew of the table's size when it planned.
fn id_lists(select: &str, ids: &[i64]) -> Vec<Query> {
    ids.chunks(ROWS_PER_STATEMENT)
        .map(|chunk| {
            let mut q = Query::new(select).one_off();
            q.push_list(chunk.iter().copied());
            q
        })
        .collect()
}

/// Splits `items` into runs of rows whose estimated statement size stays under
/// [`STATEMENT_BYTES`] (and at most [`ROWS_PER_STATEMENT`] rows); a row bigger than the
/// budget goes alone.
fn sized_chunks<T>(items: &[T], row_bytes: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let size = row_bytes(item);
        if i > start && (bytes + size > STATEMENT_BYTES || i - start == ROWS_PER_STATEMENT) {
            chunks.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < items.len() {
        chunks.push(&items[start..]);
    }
    chunks
}

/// Most rows of one insert. Inserts are prepared once per row count and kept by the driver,
/// so row counts are powers of two up to this: a handful of statement texts per table. A
/// statement prepared for one use costs MySQL a prepare and a close each time, and the close
/// (which the server does not answer) holds the next request back until the server's delayed
/// ACK, some 40 ms.
const MAX_ROWS: usize = 64;

/// Splits `items` into runs of a power-of-two length (at most [`MAX_ROWS`]) whose estimated
/// statement size stays under [`STATEMENT_BYTES`]; a row bigger than that goes alone.
fn pow2_chunks<T>(items: &[T], row_bytes: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let left = MAX_ROWS.min(items.len() - start);
        let mut n = 1 << left.ilog2();
        while n > 1
            && items[start..start + n]
                .iter()
                .map(&row_bytes)
                .sum::<usize>()
                > STATEMENT_BYTES
        {
            n /= 2;
        }
        chunks.push(&items[start..start + n]);
        start += n;
    }
    chunks
}

/// A [`Store`] on one backend.
pub(crate) struct SqlStore<B: Backend> {
    pool: Pool<B::Db>,
    /// Write transactions and lone writes (see [`crate::sql::Pools`]).
    writes: Pool<B::Db>,
    /// `writes` is a pool of its own, not a clone of `pool`.
    separate_writes: bool,
    /// The heartbeat's and the lease's writes (see [`crate::sql::Pools`]): `writes` on SQLite.
    cluster: Pool<B::Db>,
    /// `cluster` is a pool of its own.
    separate_cluster: bool,
    /// Job ids taken ahead from the jobs' sequence (PostgreSQL only).
    job_ids: jobs::JobIds,
    backend: PhantomData<B>,
}

fn check_len(field: &str, value: &str, max_chars: usize) -> Result<(), Error> {
    if value.chars().count() > max_chars {
        return Err(Error::Invalid(format!(
            "{field} is longer than {max_chars} characters"
        )));
    }
    Ok(())
}

fn check_required(field: &str, value: &str, max_chars: usize) -> Result<(), Error> {
    if value.trim().is_empty() {
        return Err(Error::Invalid(format!("{field} is empty")));
    }
    check_len(field, value, max_chars)
}

fn check_bytes(field: &str, value: &str, max_bytes: usize) -> Result<(), Error> {
    if value.len() > max_bytes {
        return Err(Error::Invalid(format!(
            "{field} is longer than {max_bytes} bytes"
        )));
    }
    Ok(())
}

/// Cuts a free-text message to what every backend stores, on a character boundary.
/// Messages come from executors and must never make a callback fail.
fn clip(message: Option<&str>) -> Option<String> {
    message.map(|m| {
        let mut end = m.len().min(TEXT_MAX_BYTES);
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        m[..end].to_owned()
    })
}

fn check_page(page: PageReq) -> Result<(i64, i64), Error> {
    if page.limit == 0 || page.limit > PageReq::MAX_LIMIT {
        return Err(Error::Invalid(format!(
            "page limit must be between 1 and {}",
            PageReq::MAX_LIMIT
        )));
    }
    let offset = i64::try_from(page.offset)
        .map_err(|_| Error::Invalid("page offset is too large".to_owned()))?;
    Ok((offset, page.limit as i64))
}

fn child_ids_text(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Checks the fields of a run to write outside the schedule.
fn check_run_new(run: &RunNew) -> Result<(), Error> {
    if let Some(address) = &run.executor_address {
        check_len("executor address", address, ADDRESS_MAX)?;
    }
    if let Some(node) = &run.owner_node {
        check_len("owner node", node, NODE_ID_MAX)?;
    }
    if let Some(params) = &run.params {
        check_bytes("params", params, JOB.params_bytes)?;
    }
    Ok(())
}

/// The INSERT of a run outside the schedule. INSERT ... SELECT copies the job's fields in the
/// same statement, so a missing job writes nothing instead of an orphan run.
fn insert_run(run: RunNew) -> Query {
    Query::new(
        "INSERT INTO tw_runs (job_id, group_id, scheduled_at, trigger_type, attempt, \
         parent_run_id, executor_address, handler, params, shard_index, shard_total, state, \
         owner_node, priority, created_at, timeout_s) \
         SELECT id, group_id, ?, ?, ?, ?, ?, handler, COALESCE(?, params), ?, ?, ?, \
         ?, priority, ?, ? FROM tw_jobs WHERE id = ?",
    )
    .bind(run.scheduled_at)
    .bind(run.trigger_type.as_str())
    .bind(run.attempt)
    .bind(run.parent_run_id)
    .bind(run.executor_address)
    .bind(run.params)
    .bind(run.shard_index)
    .bind(run.shard_total)
    .bind(RunState::Planned.as_str())
    .bind(run.owner_node)
    .bind(run.now)
    .bind(run.timeout_s.map(i64::from))
    .bind(run.job_id)
}

/// A unique-key collision becomes `conflict`; anything else stays a database error.
fn unique_or(e: sqlx::Error, conflict: impl FnOnce() -> Error) -> Error {
    if is_unique_violation(&e) {
        conflict()
    } else {
        Error::Database(e)
    }
}

/// `LIKE` pattern matching `text` anywhere, with `!` escaping the wildcards.
fn contains_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.to_lowercase().chars() {
        if matches!(c, '!' | '%' | '_') {
            p.push('!');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// ` AND column >= ? AND column < ?` for the ends of `range` that are set.
fn push_range(q: &mut Query, column: &str, range: TimeRange) {
    if let Some(from) = range.from {
        q.push(&format!(" AND {column} >= ")).push_bind(from);
    }
    if let Some(to) = range.to {
        q.push(&format!(" AND {column} < ")).push_bind(to);
    }
}

/// `, column = CASE id WHEN ? THEN ? ... END`: one value per row in a batched update.
fn push_case<T>(
    q: &mut Query,
    column: &str,
    rows: &[T],
    id: impl Fn(&T) -> i64,
    value: impl Fn(&T) -> Arg,
) {
    q.push(&format!(", {column} = CASE id"));
    for r in rows {
        q.push(" WHEN ").push_bind(id(r));
        q.push(" THEN ").push_bind(value(r));
    }
    q.push(" END");
}

/// Runs a write transaction again when it lost a deadlock or a serialization conflict: a
/// callback batch and a dispatch batch may lock the same runs in different orders (MySQL and
/// MariaDB report it as error 1213), and the loser must not turn into an error the executor
/// has to resend.
async fn retry_deadlocks<T, F, Fut>(mut attempt: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut retries = 0;
    loop {
        match attempt().await {
            Err(Error::Database(e)) if retries < DEADLOCK_RETRIES && is_retryable(&e) => {
                retries += 1;
                tracing::debug!(error = %e, retries, "write lost a deadlock, trying again");
            }
            other => return other,
        }
    }
}

/// How often a batch write that lost a deadlock is tried again.
const DEADLOCK_RETRIES: u32 = 5;

impl<B: Backend> SqlStore<B> {
    /// Opens the pool and brings the schema up to date.
    pub(crate) async fn open(url: &str, options: &StoreOptions) -> Result<Self, Error> {
        let pools = B::open(url, options).await?;
        B::migrate(&pools.writes).await?;
        Ok(SqlStore {
            separate_writes: pools.separate,
            separate_cluster: pools.cluster.is_some(),
            cluster: pools.cluster.unwrap_or_else(|| pools.writes.clone()),
            pool: pools.reads,
            writes: pools.writes,
            job_ids: Default::default(),
            backend: PhantomData,
        })
    }

    async fn fetch_all<T: crate::sql::AnyRow>(&self, q: Query) -> Result<Vec<T>, Error> {
        let mut conn = self.pool.acquire().await?;
        Ok(B::fetch_all(&mut *conn, q).await?)
    }

    async fn fetch_optional<T: crate::sql::AnyRow>(&self, q: Query) -> Result<Option<T>, Error> {
        let mut conn = self.pool.acquire().await?;
        Ok(B::fetch_optional(&mut *conn, q).await?)
    }

    /// Runs one statement on its own (autocommit); the number of rows it touched.
    async fn execute(&self, q: Query) -> Result<u64, sqlx::Error> {
        let mut conn = self.writes.acquire().await?;
        Ok(B::execute(&mut *conn, q).await?.rows)
    }

    /// Runs an INSERT and returns the new row's id, or `None` when it inserted nothing.
    async fn insert_id(conn: &mut Conn<B>, mut q: Query) -> Result<Option<i64>, sqlx::Error> {
        if B::KIND.has_returning() {
            q.push(" RETURNING id");
            Ok(B::fetch_optional::<(i64,)>(conn, q).await?.map(|(id,)| id))
        } else {
            let done = B::execute(conn, q).await?;
            Ok((done.rows > 0).then_some(done.last_id))
        }
    }

    async fn count(&self, table: &str, filter: &Query) -> Result<u64, Error> {
        let mut q = Query::new(format!("SELECT COUNT(*) FROM {table}"));
        q.append(filter);
        let (n,): (i64,) = self
            .fetch_optional(q)
            .await?
            .ok_or_else(|| Error::corrupt("COUNT returned no row".to_owned()))?;
        Ok(n.max(0) as u64)
    }

    /// Locks the runs `ids` by primary key and returns their (id, state).
    ///
    /// The state is not part of the lock's WHERE: InnoDB could then scan the state index,
    /// and under READ COMMITTED a locking scan there misses a row whose state another
    /// transaction is changing.
    async fn lock_runs(conn: &mut Conn<B>, ids: &[i64]) -> Result<Vec<(i64, RunState)>, Error> {
        lock_by_id::<B, (i64, String)>(conn, "tw_runs", "id, state", ids)
            .await?
            .into_iter()
            .map(|(id, state)| Ok((id, parse::<RunState>("state", &state)?)))
            .collect()
    }
}

/// Locks the rows `ids` of `table` by primary key and returns their `columns`, those there.
/// On MariaDB (seen on 10.11) even a locking read by primary key that had to wait for another
/// transaction's row locks can come back without those rows: the result is compared with a
/// plain count of the same rows, and the lock taken again until both agree. The statements
/// are kept prepared for a power-of-two number of ids (see [`MAX_ROWS`]), made for one use
/// otherwise.
async fn lock_by_id<B: Backend, T: crate::sql::AnyRow>(
    conn: &mut Conn<B>,
    table: &str,
    columns: &str,
    ids: &[i64],
) -> Result<Vec<T>, Error> {
    const TRIES: usize = 10;
    let statement = |select: &str| {
        let mut q = Query::new(format!("SELECT {select} FROM {table} WHERE id IN "));
        if !ids.len().is_power_of_two() || ids.len() > MAX_ROWS {
            q = q.one_off();
        }
        q.push_list(ids.iter().copied());
        q
    };
    for _ in 0..TRIES {
        let mut lock = statement(columns);
        lock.push(B::KIND.for_update());
        let locked = B::fetch_all::<T>(conn, lock).await?;
        if B::KIND != Kind::MySql || locked.len() == ids.len() {
            return Ok(locked);
        }
        // Rows only ever go (deleted), so equal counts mean equal sets.
        let (there,): (i64,) = B::fetch_optional(conn, statement("COUNT(*)"))
            .await?
            .ok_or_else(|| Error::corrupt("COUNT returned no row".to_owned()))?;
        if there == locked.len() as i64 {
            return Ok(locked);
        }
        tracing::debug!(
            table,
            locked = locked.len(),
            wanted = ids.len(),
            "a locking read came back short; locking again"
        );
    }
    Err(Error::Conflict(format!(
        "the {} kept changing while being locked; try again",
        table.trim_start_matches("tw_")
    )))
}

#[async_trait]
impl<B: Backend> Store for SqlStore<B> {
    fn backend(&self) -> &'static str {
        B::KIND.name()
    }

    async fn close(&self) {
        self.cluster.close().await;
        self.writes.close().await;
        self.pool.close().await;
    }

    fn connections(&self) -> crate::Connections {
        let mut open = self.pool.size();
        let mut idle = self.pool.num_idle() as u32;
        if self.separate_writes {
            open += self.writes.size();
            idle += self.writes.num_idle() as u32;
        }
        if self.separate_cluster {
            open += self.cluster.size();
            idle += self.cluster.num_idle() as u32;
        }
        crate::Connections { open, idle }
    }

    async fn log_checkpoint(&self) -> Result<crate::LogCheckpoint, Error> {
        if B::KIND != Kind::Sqlite {
            return Ok(crate::LogCheckpoint::default());
        }
        // PASSIVE copies what no reader still needs without taking the write lock, so the
        // writer goes on meanwhile. The answer is (busy, frames in the log, frames copied),
        // -1 for the two counts when the database has no log (in memory).
        let q = Query::new("PRAGMA wal_checkpoint(PASSIVE)");
        let rows = self.fetch_all::<(i64, i64, i64)>(q).await?;
        let (_, frames, copied) = rows.first().copied().unwrap_or((0, 0, 0));
        Ok(crate::LogCheckpoint {
            frames: frames.max(0) as u64,
            copied: copied.max(0) as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{ALARM_STATES, OPEN_STATES};

    /// SQLite uses a partial index only for a query that carries its condition term for term,
    /// so the queries' conditions are the indexes' conditions, written out; on PostgreSQL the
    /// conditions are generated columns of the same states. The follow-ups' read of its jobs
    /// carries the condition of PostgreSQL's index of the jobs it can find.
    #[test]
    fn queries_carry_the_partial_indexes_conditions() {
        let sqlite = include_str!("../../migrations/sqlite/0014_open_runs.sql");
        for condition in [
            Kind::Sqlite.open_run().to_owned(),
            Kind::Sqlite.alarm_runs(),
        ] {
            let index = format!("WHERE {condition}");
            assert!(sqlite.contains(&index), "{index} not in {sqlite}");
        }
        let postgres = include_str!("../../migrations/postgres/0015_heap_only_updates.sql");
        for (column, states) in [("is_open", &*OPEN_STATES), ("calls_alarm", &*ALARM_STATES)] {
            let generated = format!("{column} BOOLEAN GENERATED ALWAYS AS ({states}) STORED");
            assert!(
                postgres.contains(&generated),
                "{generated} not in {postgres}"
            );
            let index = format!("WHERE {column};");
            assert!(postgres.contains(&index), "{index} not in {postgres}");
        }
        assert_eq!(Kind::Postgres.open_run(), "is_open");
        assert!(Kind::Postgres.alarm_runs().ends_with(" AND calls_alarm"));
        // The follow-ups' read of its jobs, on the index of the jobs it can find.
        let followed = include_str!("../../migrations/postgres/0016_followed_jobs.sql");
        let index = format!("WHERE {};", *transitions::CAN_FOLLOW);
        assert!(followed.contains(&index), "{index} not in {followed}");
    }

    #[test]
    fn like_patterns_escape_wildcards_and_fold_case() {
        assert_eq!(contains_pattern("100%_Done!"), "%100!%!_done!!%");
    }

    #[test]
    fn messages_are_clipped_on_a_char_boundary() {
        let long = "é".repeat(TEXT_MAX_BYTES);
        let clipped = clip(Some(&long)).unwrap();
        assert!(clipped.len() <= TEXT_MAX_BYTES && clipped.len() >= TEXT_MAX_BYTES - 1);
        assert_eq!(clip(Some("short")).as_deref(), Some("short"));
        assert_eq!(clip(None), None);
    }

    #[test]
    fn batch_statements_stay_under_the_size_budget() {
        let lens = |chunks: Vec<&[usize]>| chunks.iter().map(|c| c.len()).collect::<Vec<_>>();
        // (row sizes, expected chunk lengths)
        let cases: &[(Vec<usize>, Vec<usize>)] = &[
            (vec![], vec![]),
            (vec![100; 3], vec![3]),
            (vec![STATEMENT_BYTES / 4; 9], vec![4, 4, 1]),
            (vec![10, STATEMENT_BYTES * 2, 10], vec![1, 1, 1]),
            (vec![1; ROWS_PER_STATEMENT + 1], vec![ROWS_PER_STATEMENT, 1]),
        ];
        for (sizes, want) in cases {
            assert_eq!(&lens(sized_chunks(sizes, |&n| n)), want, "sizes {sizes:?}");
        }
    }

    #[test]
    fn inserts_have_a_power_of_two_rows_within_the_size_budget() {
        let lens = |chunks: Vec<&[usize]>| chunks.iter().map(|c| c.len()).collect::<Vec<_>>();
        // (row sizes, expected chunk lengths)
        let cases: &[(Vec<usize>, Vec<usize>)] = &[
            (vec![], vec![]),
            (vec![100; 7], vec![4, 2, 1]),
            (vec![100; MAX_ROWS * 2 + 3], vec![MAX_ROWS, MAX_ROWS, 2, 1]),
            (vec![STATEMENT_BYTES / 5; 9], vec![4, 4, 1]),
            (vec![10, STATEMENT_BYTES * 2, 10, 10], vec![1, 1, 2]),
        ];
        for (sizes, want) in cases {
            assert_eq!(&lens(pow2_chunks(sizes, |&n| n)), want, "sizes {sizes:?}");
        }
    }
}
