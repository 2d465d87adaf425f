//! Many jobs created on PostgreSQL in as few round trips as a batch allows (see
//! [`JobStore::jobs_create`]). The jobs' ids come from their table's sequence before anything
//! is written, so each job's audit record, which names its id, is made first; then the jobs,
//! their first script versions and their records go as three JSON arrays bound to one
//! statement, which the server runs as one transaction. The ids are taken from the sequence
//! [`IDS_AHEAD`] at a time and kept in a [`JobIds`], so a batch of the API's creates is mostly
//! one round trip, where a transaction cost its begin, its commit and a statement per table and
//! power of two of jobs, each round trip waiting on a busy machine for both processes.
//! Statements stay under [`STATEMENT_BYTES`]; a batch needing more runs its statements in one
//! transaction.

use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::Mutex;

use super::super::audit::{AUDIT_INSERT_COLUMNS, audit_args, check_audit};
use super::super::json_rows::{json_field, json_source};
use super::create::{
    JOB_INSERT_COLUMNS, VERSION_INSERT_COLUMNS, job_args, new_job, row_bytes, version_args,
};
use super::*;

/// The columns of a job insert with its id given.
static NUMBERED_JOB_COLUMNS: LazyLock<String> =
    LazyLock::new(|| format!("id, {}", *JOB_INSERT_COLUMNS));

/// Ids taken from the jobs' sequence beyond a batch's need, kept for the batches after it.
///
/// What this costs: ids come out of one admin in increasing order, but two admins creating
/// jobs at once may give a later job a smaller id (as PostgreSQL's own `CACHE` on a sequence
/// does), and the ids an admin held when it stopped are never used.
const IDS_AHEAD: usize = 64;

/// The job ids a store has taken from the sequence and not yet given to a job, smallest first.
#[derive(Default)]
pub(crate) struct JobIds(Mutex<VecDeque<i64>>);

impl JobIds {
    /// The `n` smallest ids held, if there are that many.
    fn take(&self, n: usize) -> Option<Vec<i64>> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (held.len() >= n).then(|| held.drain(..n).collect())
    }

    /// Adds `fetched` to the ids held and takes the `n` smallest.
    fn add_and_take(&self, fetched: Vec<i64>, n: usize) -> Vec<i64> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.extend(fetched);
        held.make_contiguous().sort_unstable();
        let n = n.min(held.len());
        held.drain(..n).collect()
    }
}

/// `n` ids for new jobs, in increasing order: from those `ids` holds, or else from the jobs'
/// sequence on `conn` with [`IDS_AHEAD`] more kept.
async fn job_ids<B: Backend>(
    ids: &JobIds,
    conn: &mut Conn<B>,
    n: usize,
) -> Result<Vec<i64>, Error> {
    if let Some(taken) = ids.take(n) {
        return Ok(taken);
    }
    let wanted = n + IDS_AHEAD;
    let q = Query::new("SELECT nextval('tw_jobs_id_seq') FROM generate_series(1, ?)")
        .bind(wanted as i64);
    let fetched: Vec<i64> = B::fetch_all::<(i64,)>(conn, q)
        .await?
        .into_iter()
        .map(|(id,)| id)
        .collect();
    if fetched.len() != wanted {
        return Err(Error::corrupt(format!(
            "the job sequence gave {} ids for {wanted}",
            fetched.len()
        )));
    }
    Ok(ids.add_and_take(fetched, n))
}

/// The SQL type an [`Arg`]'s JSON value is cast to.
fn sql_type(arg: &Arg) -> &'static str {
    match arg {
        Arg::Int(_) => "BIGINT",
        Arg::Int32(_) => "INTEGER",
        Arg::Text(_) => "TEXT",
    }
}

/// `INSERT INTO table (columns) SELECT ...` of `rows` as one JSON array, and the array's
/// text; `None` without rows. Each value is cast as its [`Arg`] says, so every batch of a table
/// has the same statement text.
fn insert_from_json(table: &str, columns: &str, rows: &[&[Arg]]) -> Option<(String, String)> {
    let first = rows.first()?;
    let alias = "r";
    let fields: Vec<String> = first
        .iter()
        .enumerate()
        .map(|(n, arg)| json_field(Kind::Postgres, alias, n, sql_type(arg)))
        .collect();
    let sql = format!(
        "INSERT INTO {table} ({columns}) SELECT {} FROM {}",
        fields.join(", "),
        json_source(Kind::Postgres, alias)
    );
    let mut json = JsonRows::with_capacity(rows.len());
    for row in rows {
        row.iter().fold(json.row(), |r, arg| r.arg(arg));
    }
    Some((sql, json.finish()))
}

/// One statement of the inserts `parts`: all but the last as data-modifying `WITH` items.
fn insert_together(parts: Vec<(String, String)>) -> Query {
    let last = parts.len().saturating_sub(1);
    let mut sql = String::new();
    for (n, (insert, _)) in parts.iter().enumerate() {
        if n == last {
            sql.push_str(if n == 0 { "" } else { " " });
            sql.push_str(insert);
        } else {
            let lead = if n == 0 { "WITH " } else { ", " };
            // Writing to a String cannot fail.
            let _ = write!(sql, "{lead}w{n} AS ({insert})");
        }
    }
    parts
        .into_iter()
        .fold(Query::new(sql), |q, (_, json)| q.bind(json))
}

/// The rows of one job: its own, its first script version's, its audit record's.
struct JobRows {
    job: Vec<Arg>,
    version: Option<[Arg; 7]>,
    record: [Arg; 8],
}

impl JobRows {
    fn bytes(&self) -> usize {
        row_bytes(&self.job)
            + self.version.as_ref().map_or(0, |v| row_bytes(v))
            + row_bytes(&self.record)
    }
}

/// The statement that writes `rows`.
fn insert_statement(rows: &[JobRows]) -> Query {
    let jobs: Vec<&[Arg]> = rows.iter().map(|r| &r.job[..]).collect();
    let versions: Vec<&[Arg]> = rows
        .iter()
        .filter_map(|r| Some(&r.version.as_ref()?[..]))
        .collect();
    let records: Vec<&[Arg]> = rows.iter().map(|r| &r.record[..]).collect();
    let parts = [
        insert_from_json("tw_jobs", &NUMBERED_JOB_COLUMNS, &jobs),
        insert_from_json("tw_script_versions", VERSION_INSERT_COLUMNS, &versions),
        insert_from_json("tw_audit", AUDIT_INSERT_COLUMNS, &records),
    ];
    insert_together(parts.into_iter().flatten().collect())
}

/// Writes `chunks` one statement each, stopping at the first error.
async fn write_chunks<B: Backend>(
    conn: &mut Conn<B>,
    chunks: &[&[JobRows]],
) -> Result<(), sqlx::Error> {
    for chunk in chunks {
        B::execute(conn, insert_statement(chunk)).await?;
    }
    Ok(())
}

/// [`JobStore::jobs_create`] on PostgreSQL, of a checked batch with its trimmed `keys`.
///
/// A function beside the store rather than its method: the store's type stays under the
/// house bound on methods, and this path belongs to one backend.
pub(super) async fn create_numbered<B: Backend>(
    store: &SqlStore<B>,
    jobs: Vec<JobCreate>,
    keys: Vec<String>,
    audit: &JobAudit<'_>,
) -> Result<Vec<Job>, Error> {
    let mut conn = store.writes.acquire().await?;
    let ids = job_ids::<B>(&store.job_ids, &mut conn, jobs.len()).await?;
    let created: Vec<Job> = jobs
        .iter()
        .zip(keys.iter().cloned())
        .zip(ids)
        .map(|((c, key), id)| new_job(c, id, key))
        .collect();
    let rows = jobs
        .iter()
        .zip(&created)
        .enumerate()
        .map(|(index, (c, job))| {
            let entry = audit(index, job)?;
            check_audit(&entry)?;
            let mut row = vec![job.id.into()];
            row.extend(job_args(&job.key, &c.job));
            Ok(JobRows {
                job: row,
                version: c
                    .first_script
                    .as_ref()
                    .map(|first| version_args(job, first)),
                record: audit_args(entry),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;

    let chunks = sized_chunks(&rows, JobRows::bytes);
    let written = if let [only] = chunks[..] {
        B::execute(&mut conn, insert_statement(only))
            .await
            .map(drop)
    } else {
        drop(conn);
        let mut tx = B::begin_write(&store.writes).await?;
        match write_chunks::<B>(&mut tx, &chunks).await {
            Ok(()) => tx.commit().await,
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    };
    match written {
        Ok(()) => Ok(created),
        Err(e) => Err(store.explain_insert_failure(e, &jobs, &keys).await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inserts_of_a_batch_are_one_statement_binding_one_array_each() {
        let rows: [&[Arg]; 2] = [
            &[Arg::Int(Some(1)), Arg::Text(Some("a".into()))],
            &[Arg::Int(None), Arg::Text(None)],
        ];
        let (sql, json) = insert_from_json("t", "id, name", &rows).unwrap();
        assert_eq!(
            sql,
            "INSERT INTO t (id, name) SELECT CAST(r.value ->> 0 AS BIGINT), r.value ->> 1 \
             FROM jsonb_array_elements(CAST(? AS jsonb)) AS r(value)"
        );
        assert_eq!(json, r#"[[1,"a"],[null,null]]"#);
        assert_eq!(insert_from_json("t", "id", &[]), None);

        for parts in 1..=3 {
            let inserts = (0..parts).map(|n| (format!("INSERT {n}"), format!("[{n}]")));
            let q = insert_together(inserts.collect());
            let want = match parts {
                1 => "INSERT 0",
                2 => "WITH w0 AS (INSERT 0) INSERT 1",
                _ => "WITH w0 AS (INSERT 0), w1 AS (INSERT 1) INSERT 2",
            };
            assert_eq!(q.sql, want);
            assert_eq!(q.args.len(), parts);
        }
    }

    #[test]
    fn held_ids_go_out_smallest_first_and_only_when_there_are_enough() {
        let ids = JobIds::default();
        assert_eq!(ids.take(1), None);
        assert_eq!(ids.add_and_take(vec![7, 3, 5, 4], 2), vec![3, 4]);
        assert_eq!(ids.take(3), None, "two are held");
        assert_eq!(ids.add_and_take(vec![6, 9], 1), vec![5]);
        assert_eq!(ids.take(3), Some(vec![6, 7, 9]));
        assert_eq!(ids.take(0), Some(vec![]));
        assert_eq!(ids.take(1), None);
    }
}
