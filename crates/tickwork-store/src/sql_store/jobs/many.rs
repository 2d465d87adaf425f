//! Many jobs read at once ([`JobStore::jobs_get`]), and started, stopped or deleted in one
//! transaction ([`JobStore::jobs_set_status`], [`JobStore::jobs_delete`]): one lock of the
//! jobs, statements of a power-of-two number of jobs, and their audit records, so that a
//! thousand jobs wait once for the write lock rather than a thousand times.

use super::super::audit::{AUDIT_INSERT_COLUMNS, audit_args, check_audit};
use super::create::{insert_rows, row_bytes};
use super::*;

/// Rough bytes a job adds to a statement of ids (its id and its next fire).
const JOB_ID_BYTES: usize = 24;

/// The ids of `ids` in ascending order, or the first id named twice. Transactions that lock
/// jobs in one order cannot deadlock each other.
fn sorted_once(ids: impl Iterator<Item = i64>) -> Result<Vec<i64>, Error> {
    let mut sorted: Vec<i64> = ids.collect();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Conflict(format!(
            "job {} appears twice in the batch",
            w[0]
        )));
    }
    Ok(sorted)
}

impl<B: Backend> SqlStore<B> {
    /// See [`JobStore::jobs_get`].
    pub(super) async fn get_jobs(&self, ids: &[i64]) -> Result<Vec<Job>, Error> {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut conn = self.pool.acquire().await?;
        let mut jobs = Vec::with_capacity(sorted.len());
        for chunk in pow2_chunks(&sorted, |_| JOB_ID_BYTES) {
            let mut q = Query::new(format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id IN "));
            q.push_list(chunk.iter().copied());
            q.push(" ORDER BY id");
            jobs.extend(convert(B::fetch_all::<JobRow>(&mut conn, q).await?)?);
        }
        Ok(jobs)
    }

    /// See [`JobStore::jobs_set_status`].
    pub(super) async fn set_status_of_jobs(
        &self,
        change: JobsStatusChange,
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        if change.jobs.is_empty() {
            return Ok(Vec::new());
        }
        let sorted = sorted_once(change.jobs.iter().map(|(id, _)| *id))?;
        retry_deadlocks(|| self.set_status_once(&change, &sorted, audit)).await
    }

    async fn set_status_once(
        &self,
        change: &JobsStatusChange,
        sorted: &[i64],
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let (mut found, present) = lock_jobs::<B>(&mut tx, sorted).await?;
        let next: HashMap<i64, Option<i64>> = change.jobs.iter().copied().collect();
        for chunk in pow2_chunks(&present, |_| JOB_ID_BYTES) {
            let mut q = Query::new("UPDATE tw_jobs SET status = ");
            q.push_bind(change.status.as_str());
            q.push(", next_fire_at = CASE id");
            for id in chunk {
                q.push(" WHEN ").push_bind(*id);
                q.push(" THEN ").push_bind(next[id]);
            }
            q.push(" END, updated_at = ").push_bind(change.now);
            q.push(" WHERE id IN ");
            q.push_list(chunk.iter().copied());
            B::execute(&mut *tx, q).await?;
        }
        let mut changed = Vec::with_capacity(present.len());
        for (index, (id, next_fire_at)) in change.jobs.iter().enumerate() {
            if let Some(mut job) = found.remove(id) {
                job.status = change.status;
                job.next_fire_at = *next_fire_at;
                job.updated_at = change.now;
                changed.push((index, job));
            }
        }
        let jobs = changed.iter().map(|(i, job)| (*i, job));
        insert_job_records::<B>(&mut tx, jobs, audit).await?;
        tx.commit().await?;
        Ok(changed.into_iter().map(|(_, job)| job).collect())
    }

    /// See [`JobStore::jobs_delete`].
    pub(super) async fn delete_jobs(
        &self,
        ids: &[i64],
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sorted = sorted_once(ids.iter().copied())?;
        retry_deadlocks(|| self.delete_once(ids, &sorted, audit)).await
    }

    async fn delete_once(
        &self,
        ids: &[i64],
        sorted: &[i64],
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let (mut found, present) = lock_jobs::<B>(&mut tx, sorted).await?;
        for chunk in pow2_chunks(&present, |_| JOB_ID_BYTES) {
            delete_job_rows::<B>(&mut tx, chunk).await?;
        }
        let deleted: Vec<(usize, Job)> = ids
            .iter()
            .enumerate()
            .filter_map(|(index, id)| Some((index, found.remove(id)?)))
            .collect();
        let jobs = deleted.iter().map(|(i, job)| (*i, job));
        insert_job_records::<B>(&mut tx, jobs, audit).await?;
        tx.commit().await?;
        Ok(deleted.into_iter().map(|(_, job)| job).collect())
    }
}

/// Locks the jobs `sorted` (ascending ids) by primary key and returns those there, by id and
/// their ids in ascending order.
async fn lock_jobs<B: Backend>(
    conn: &mut Conn<B>,
    sorted: &[i64],
) -> Result<(HashMap<i64, Job>, Vec<i64>), Error> {
    let mut found = HashMap::with_capacity(sorted.len());
    for chunk in pow2_chunks(sorted, |_| JOB_ID_BYTES) {
        let rows = lock_by_id::<B, JobRow>(conn, "tw_jobs", JOB_COLUMNS, chunk).await?;
        let jobs: Vec<Job> = convert(rows)?;
        found.extend(jobs.into_iter().map(|job| (job.id, job)));
    }
    let present = sorted
        .iter()
        .copied()
        .filter(|id| found.contains_key(id))
        .collect();
    Ok((found, present))
}

/// Deletes the jobs `ids` with all that refers to them (their runs' alarm deliveries, their
/// runs, their script versions), what refers to a row before the row; the jobs deleted.
pub(in crate::sql_store) async fn delete_job_rows<B: Backend>(
    conn: &mut Conn<B>,
    ids: &[i64],
) -> Result<u64, Error> {
    let statements = [
        "DELETE FROM tw_alarm_deliveries WHERE run_id IN \
         (SELECT id FROM tw_runs WHERE job_id IN ",
        "DELETE FROM tw_runs WHERE job_id IN ",
        "DELETE FROM tw_script_versions WHERE job_id IN ",
        "DELETE FROM tw_submissions WHERE job_id IN ",
        "DELETE FROM tw_jobs WHERE id IN ",
    ];
    let mut jobs = 0;
    for (n, sql) in statements.iter().enumerate() {
        let mut q = Query::new(*sql);
        q.push_list(ids.iter().copied());
        if n == 0 {
            q.push(")");
        }
        jobs = B::execute(&mut *conn, q).await?.rows;
    }
    Ok(jobs)
}

/// Inserts the audit record `audit` makes of each of `jobs` (with its index in the request),
/// checked, in multi-row statements.
pub(super) async fn insert_job_records<'a, B: Backend>(
    conn: &mut Conn<B>,
    jobs: impl Iterator<Item = (usize, &'a Job)>,
    audit: &JobAudit<'_>,
) -> Result<(), Error> {
    let records = jobs
        .map(|(index, job)| {
            let entry = audit(index, job)?;
            check_audit(&entry)?;
            Ok(audit_args(entry))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    for chunk in pow2_chunks(&records, |row| row_bytes(row)) {
        let rows = chunk.iter().map(|r| &r[..]);
        B::execute(conn, insert_rows("tw_audit", AUDIT_INSERT_COLUMNS, rows)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_once_sorts_and_refuses_an_id_named_twice() {
        for (ids, want) in [
            (vec![], Ok(vec![])),
            (vec![3, 1, 2], Ok(vec![1, 2, 3])),
            (vec![5, 9, 5], Err("job 5 appears twice in the batch")),
        ] {
            let got = sorted_once(ids.into_iter()).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(|m: &str| format!("conflict: {m}")));
        }
    }
}
