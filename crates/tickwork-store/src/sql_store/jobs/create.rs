//! Many jobs in one transaction (see [`JobStore::jobs_create`]): the jobs, their first script
//! versions and their audit records, each with multi-row inserts in statements of bounded size.

use super::*;

/// The columns a job insert writes, in [`job_args`] order.
pub(super) static JOB_INSERT_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "job_key, {SPEC_COLUMNS}, glue_updated_at, status, next_fire_at, last_fire_at, \
         version, created_at, updated_at"
    )
});

/// The columns of a script version insert, in [`version_args`] order.
pub(super) const VERSION_INSERT_COLUMNS: &str = "job_id, version, glue_type, source, comment, author, \
     created_at";

/// Keys per `IN (...)` list when looking keys up again: under every backend's bind limit.
const KEYS_PER_LOOKUP: usize = 500;

/// The values of a new job's row, in [`JOB_INSERT_COLUMNS`] order.
pub(super) fn job_args(key: &str, job: &JobNew) -> Vec<Arg> {
    let mut args = Vec::with_capacity(27);
    args.push(key.into());
    args.extend(spec_args(&job.spec));
    args.extend([
        job.now.into(),
        job.status.as_str().into(),
        job.next_fire_at.into(),
        None::<i64>.into(),
        1_i64.into(),
        job.now.into(),
        job.now.into(),
    ]);
    args
}

/// The values of a job's first script version.
pub(super) fn version_args(job: &Job, first: &FirstScript) -> [Arg; 7] {
    [
        job.id.into(),
        1_i64.into(),
        job.spec.glue_type.as_str().into(),
        (&job.spec.glue_source).into(),
        (&first.comment).into(),
        (&first.author).into(),
        job.created_at.into(),
    ]
}

/// Rough bytes of SQL text and values a row adds to a statement.
pub(super) fn row_bytes(args: &[Arg]) -> usize {
    args.iter()
        .map(|a| match a {
            Arg::Text(Some(t)) => t.len() + 4,
            _ => 12,
        })
        .sum()
}

/// `INSERT INTO table (columns) VALUES (...), (...)` of `rows`.
pub(super) fn insert_rows<'a>(
    table: &str,
    columns: &str,
    rows: impl IntoIterator<Item = &'a [Arg]>,
) -> Query {
    let mut q = Query::new(format!("INSERT INTO {table} ({columns}) VALUES "));
    for (n, row) in rows.into_iter().enumerate() {
        if n > 0 {
            q.push(", ");
        }
        q.push_list(row.iter().cloned());
    }
    q
}

/// Checks a batch before anything is written: each job as `job_create` does, each first
/// script version as `script_version_append` does, and no key twice.
fn check_batch(jobs: &[JobCreate]) -> Result<Vec<String>, Error> {
    let mut keys = Vec::with_capacity(jobs.len());
    let mut seen = HashSet::with_capacity(jobs.len());
    for c in jobs {
        let key = c.job.key.trim().to_owned();
        check_required("job key", &key, JOB_KEY_MAX)?;
        check_spec(&c.job.spec)?;
        if let Some(first) = &c.first_script {
            check_len("comment", &first.comment, COMMENT_MAX)?;
            check_required("author", &first.author, USERNAME_MAX)?;
        }
        if !seen.insert(key.clone()) {
            return Err(Error::Conflict(format!(
                "job key {key:?} appears twice in the batch"
            )));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// "job key "a" is taken", or several of them, the first few named.
fn keys_taken(taken: &[String]) -> Error {
    const NAMED: usize = 5;
    let named: Vec<String> = taken.iter().take(NAMED).map(|k| format!("{k:?}")).collect();
    let more = taken.len().saturating_sub(NAMED);
    Error::Conflict(match (taken.len(), more) {
        (0, _) => "a job key of the batch is taken".to_owned(),
        (1, _) => format!("job key {} is taken", named[0]),
        (_, 0) => format!("job keys {} are taken", named.join(", ")),
        _ => format!("job keys {} and {more} more are taken", named.join(", ")),
    })
}

/// The job `c` becomes once written with `id` (the handler trimmed, as the checks read it).
pub(super) fn new_job(c: &JobCreate, id: i64, key: String) -> Job {
    let mut spec = c.job.spec.clone();
    spec.handler = spec.handler.trim().to_owned();
    Job {
        id,
        key,
        spec,
        status: c.job.status,
        next_fire_at: c.job.next_fire_at,
        last_fire_at: None,
        fires_left: None,
        glue_updated_at: c.job.now,
        version: 1,
        created_at: c.job.now,
        updated_at: c.job.now,
    }
}

impl<B: Backend> SqlStore<B> {
    /// See [`JobStore::jobs_create`].
    pub(super) async fn create_jobs(
        &self,
        jobs: Vec<JobCreate>,
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let keys = check_batch(&jobs)?;
        if B::KIND == Kind::Postgres {
            return numbered::create_numbered(self, jobs, keys, audit).await;
        }
        let mut tx = B::begin_write(&self.writes).await?;
        let ids = match Self::insert_jobs(&mut tx, &jobs, &keys).await {
            Ok(ids) => ids,
            Err(e) => {
                // The transaction is spoilt (PostgreSQL); find what collided outside it.
                tx.rollback().await?;
                return Err(self.explain_insert_failure(e, &jobs, &keys).await);
            }
        };
        let created: Vec<Job> = jobs
            .iter()
            .zip(keys)
            .map(|(c, key)| {
                let id = ids.get(&key).copied().ok_or_else(|| {
                    Error::corrupt(format!("the insert of job {key:?} returned no id"))
                })?;
                Ok(new_job(c, id, key))
            })
            .collect::<Result<_, Error>>()?;

        let versions: Vec<[Arg; 7]> = jobs
            .iter()
            .zip(&created)
            .filter_map(|(c, job)| Some(version_args(job, c.first_script.as_ref()?)))
            .collect();
        for chunk in pow2_chunks(&versions, |row| row_bytes(row)) {
            let rows = chunk.iter().map(|r| &r[..]);
            let q = insert_rows("tw_script_versions", VERSION_INSERT_COLUMNS, rows);
            B::execute(&mut *tx, q).await?;
        }

        super::many::insert_job_records::<B>(&mut tx, created.iter().enumerate(), audit).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Inserts the job rows; their ids by key.
    async fn insert_jobs(
        conn: &mut Conn<B>,
        jobs: &[JobCreate],
        keys: &[String],
    ) -> Result<HashMap<String, i64>, sqlx::Error> {
        let rows: Vec<Vec<Arg>> = jobs
            .iter()
            .zip(keys)
            .map(|(c, key)| job_args(key, &c.job))
            .collect();
        let mut ids = HashMap::with_capacity(jobs.len());
        let mut start = 0;
        for chunk in pow2_chunks(&rows, |row| row_bytes(row)) {
            let chunk_keys = &keys[start..start + chunk.len()];
            start += chunk.len();
            let mut q = insert_rows("tw_jobs", &JOB_INSERT_COLUMNS, chunk.iter().map(|r| &r[..]));
            if B::KIND.has_returning() {
                q.push(" RETURNING id, job_key");
                ids.extend(
                    B::fetch_all::<(i64, String)>(conn, q)
                        .await?
                        .into_iter()
                        .map(|(id, key)| (key, id)),
                );
            } else {
                // Ids of a multi-row insert need not be consecutive (InnoDB's interleaved
                // auto-increment): read them back by key, which the insert just took.
                B::execute(conn, q).await?;
                let mut select = Query::new("SELECT id, job_key FROM tw_jobs WHERE job_key IN ");
                select.push_list(chunk_keys.iter().map(String::as_str));
                ids.extend(
                    B::fetch_all::<(i64, String)>(conn, select)
                        .await?
                        .into_iter()
                        .map(|(id, key)| (key, id)),
                );
            }
        }
        Ok(ids)
    }

    /// The error of a failed insert of `jobs`: which keys are taken, which groups missing.
    pub(super) async fn explain_insert_failure(
        &self,
        e: sqlx::Error,
        jobs: &[JobCreate],
        keys: &[String],
    ) -> Error {
        if is_foreign_key_violation(&e) {
            let wanted: BTreeSet<i64> = jobs.iter().map(|c| c.job.spec.group_id).collect();
            let mut q = Query::new("SELECT id FROM tw_groups WHERE id IN ").one_off();
            q.push_list(wanted.iter().copied());
            return match self.fetch_all::<(i64,)>(q).await {
                Ok(found) => {
                    let found: HashSet<i64> = found.into_iter().map(|(id,)| id).collect();
                    match wanted.iter().find(|id| !found.contains(id)) {
                        Some(id) => Error::Invalid(format!("group {id} does not exist")),
                        None => Error::Invalid("a group of the batch does not exist".to_owned()),
                    }
                }
                Err(e) => e,
            };
        }
        if !is_unique_violation(&e) {
            return Error::Database(e);
        }
        let mut taken = Vec::new();
        for chunk in keys.chunks(KEYS_PER_LOOKUP) {
            let mut q = Query::new("SELECT job_key FROM tw_jobs WHERE job_key IN ").one_off();
            q.push_list(chunk.iter().map(String::as_str));
            match self.fetch_all::<(String,)>(q).await {
                Ok(found) => taken.extend(found.into_iter().map(|(k,)| k)),
                Err(e) => return e,
            }
        }
        // In the order of the batch, for a stable message.
        let taken: HashSet<String> = taken.into_iter().collect();
        let ordered: Vec<String> = keys
            .iter()
            .filter(|k| taken.contains(*k))
            .cloned()
            .collect();
        keys_taken(&ordered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_insert_columns_match_their_values() {
        let job = JobNew {
            key: "k".to_owned(),
            spec: JobSpec::new(1, "h"),
            status: JobStatus::Stopped,
            next_fire_at: None,
            now: 1,
        };
        assert_eq!(
            JOB_INSERT_COLUMNS.split(',').count(),
            job_args("k", &job).len()
        );
        assert_eq!(
            super::super::super::audit::AUDIT_INSERT_COLUMNS
                .split(',')
                .count(),
            8
        );
        assert_eq!(VERSION_INSERT_COLUMNS.split(',').count(), 7);
    }

    #[test]
    fn taken_keys_are_named_up_to_five() {
        let keys: Vec<String> = (1..=7).map(|n| format!("k{n}")).collect();
        let text = |n: usize| keys_taken(&keys[..n]).to_string();
        assert_eq!(text(1), "conflict: job key \"k1\" is taken");
        assert_eq!(text(2), "conflict: job keys \"k1\", \"k2\" are taken");
        assert!(
            text(7).ends_with("\"k5\" and 2 more are taken"),
            "{}",
            text(7)
        );
    }
}
