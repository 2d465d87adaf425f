//! Jobs, and the claim that turns their due fires into runs.

use super::*;

mod claim;
mod create;
mod many;
mod numbered;

pub(super) use many::delete_job_rows;
pub(super) use numbered::JobIds;

/// How often a claim that lost a deadlock is tried again.
const CLAIM_RETRIES: u32 = 3;

/// The job columns a definition writes, in the order [`bind_spec`] binds them.
const SPEC_COLUMNS: &str = "group_id, description, owner, alarm_channels, schedule_type, \
     schedule_conf, time_zone, misfire_strategy, route_strategy, handler, params, \
     block_strategy, timeout_s, retry_count, retry_backoff_ms, child_job_ids, priority, \
     glue_type, glue_source, delivery, lateness_budget_ms";

/// One `?` per column of [`SPEC_COLUMNS`].
static SPEC_MARKS: LazyLock<String> =
    LazyLock::new(|| vec!["?"; SPEC_COLUMNS.split(',').count()].join(", "));

/// `group_id = ?, description = ?, ...` for updates.
static SPEC_ASSIGNMENTS: LazyLock<String> = LazyLock::new(|| {
    SPEC_COLUMNS
        .split(',')
        .map(|c| format!("{} = ?", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
});

/// The columns a claim writes per fire (the rest take their defaults).
const FIRE_COLUMNS: &str = "job_id, group_id, scheduled_at, fire_key, trigger_type, attempt, \
     handler, params, state, owner_node, priority, created_at, finished_at";

fn check_spec(spec: &JobSpec) -> Result<(), Error> {
    check_len("description", &spec.description, DESCRIPTION_MAX)?;
    check_len("owner", &spec.owner, OWNER_MAX)?;
    check_bytes(
        "alarm_channels",
        &spec.alarm_channels,
        JOB.alarm_channels_bytes,
    )?;
    check_len("schedule_conf", &spec.schedule_conf, SCHEDULE_CONF_MAX)?;
    check_required("time_zone", &spec.time_zone, TIME_ZONE_MAX)?;
    check_len("handler", &spec.handler, HANDLER_MAX)?;
    check_bytes("params", &spec.params, JOB.params_bytes)?;
    check_bytes("glue_source", &spec.glue_source, JOB.glue_source_bytes)?;
    if spec.timeout_s < 0 || spec.retry_count < 0 || spec.retry_backoff_ms < 0 {
        return Err(Error::Invalid(
            "timeout, retry count and retry backoff must not be negative".to_owned(),
        ));
    }
    if let Some(id) = spec.child_job_ids.iter().find(|&&id| id <= 0) {
        return Err(Error::Invalid(format!("child job id {id} is not a job id")));
    }
    Ok(())
}

/// The values of the definition columns, in [`SPEC_COLUMNS`] order.
fn spec_args(spec: &JobSpec) -> [Arg; 21] {
    [
        spec.group_id.into(),
        (&spec.description).into(),
        (&spec.owner).into(),
        (&spec.alarm_channels).into(),
        spec.schedule_type.as_str().into(),
        (&spec.schedule_conf).into(),
        (&spec.time_zone).into(),
        spec.misfire_strategy.as_str().into(),
        spec.route_strategy.as_str().into(),
        spec.handler.trim().into(),
        (&spec.params).into(),
        spec.block_strategy.as_str().into(),
        spec.timeout_s.into(),
        spec.retry_count.into(),
        spec.retry_backoff_ms.into(),
        child_ids_text(&spec.child_job_ids).into(),
        spec.priority.into(),
        spec.glue_type.as_str().into(),
        (&spec.glue_source).into(),
        spec.delivery.as_str().into(),
        spec.lateness_budget_ms.into(),
    ]
}

/// Binds the definition columns in [`SPEC_COLUMNS`] order.
fn bind_spec(q: Query, spec: &JobSpec) -> Query {
    spec_args(spec).into_iter().fold(q, Query::bind)
}

impl<B: Backend> SqlStore<B> {
    pub(super) async fn job_in(conn: &mut Conn<B>, id: i64) -> Result<Job, Error> {
        let q = Query::new(format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id = ?")).bind(id);
        match B::fetch_optional::<JobRow>(conn, q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("job", id)),
        }
    }

    /// The WHERE clause of a job listing.
    fn job_filter(filter: &JobFilter) -> Query {
        let mut q = Query::new(" WHERE 1 = 1");
        if let Some(group) = filter.group_id {
            q.push(" AND group_id = ").push_bind(group);
        }
        if let Some(status) = filter.status {
            q.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(text) = filter
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let pattern = contains_pattern(text);
            q.push(" AND (");
            for (i, column) in ["description", "handler", "job_key", "owner"]
                .iter()
                .enumerate()
            {
                if i > 0 {
                    q.push(" OR ");
                }
                q.push(&format!("LOWER({column}) LIKE "))
                    .push_bind(pattern.as_str())
                    .push(" ESCAPE '!'");
            }
            q.push(")");
        }
        q
    }
}

/// Inserts one job at version 1 (`job_create`, and a submission's new job in its
/// transaction), with `fires_left` (see [`Job::fires_left`]).
pub(super) async fn insert_job<B: Backend>(
    conn: &mut Conn<B>,
    job: JobNew,
    fires_left: Option<i64>,
) -> Result<Job, Error> {
    let key = job.key.trim().to_owned();
    check_required("job key", &key, JOB_KEY_MAX)?;
    check_spec(&job.spec)?;
    let q = Query::new(format!(
        "INSERT INTO tw_jobs (job_key, {SPEC_COLUMNS}, glue_updated_at, status, \
         next_fire_at, last_fire_at, fires_left, version, created_at, updated_at) \
         VALUES (?, {}, ?, ?, ?, ?, ?, 1, ?, ?)",
        *SPEC_MARKS
    ))
    .bind(&key);
    let q = bind_spec(q, &job.spec)
        .bind(job.now)
        .bind(job.status.as_str())
        .bind(job.next_fire_at)
        .bind(None::<i64>)
        .bind(fires_left)
        .bind(job.now)
        .bind(job.now);
    let group_id = job.spec.group_id;
    let id = SqlStore::<B>::insert_id(conn, q)
        .await
        .map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::Invalid(format!("group {group_id} does not exist"))
            } else {
                unique_or(e, || Error::Conflict(format!("job key {key:?} is taken")))
            }
        })?
        .ok_or_else(|| Error::corrupt("the job insert wrote no row".to_owned()))?;
    let mut spec = job.spec;
    spec.handler = spec.handler.trim().to_owned();
    Ok(Job {
        id,
        key,
        spec,
        status: job.status,
        next_fire_at: job.next_fire_at,
        last_fire_at: None,
        fires_left,
        glue_updated_at: job.now,
        version: 1,
        created_at: job.now,
        updated_at: job.now,
    })
}

/// Writes `job` over job `id` in `conn`'s transaction (a submission replaced): its definition,
/// status, next fire and `fires_left`; the key stays, the version moves on. The job as written.
pub(super) async fn rewrite_job<B: Backend>(
    conn: &mut Conn<B>,
    id: i64,
    job: &JobNew,
    fires_left: Option<i64>,
) -> Result<Job, Error> {
    check_spec(&job.spec)?;
    let q = Query::new(format!(
        "UPDATE tw_jobs SET {}, glue_updated_at = ?, status = ?, next_fire_at = ?, \
         fires_left = ?, version = version + 1, updated_at = ? WHERE id = ?",
        *SPEC_ASSIGNMENTS
    ));
    let q = bind_spec(q, &job.spec)
        .bind(job.now)
        .bind(job.status.as_str())
        .bind(job.next_fire_at)
        .bind(fires_left)
        .bind(job.now)
        .bind(id);
    B::execute(&mut *conn, q).await?;
    SqlStore::<B>::job_in(conn, id).await
}

#[async_trait]
impl<B: Backend> JobStore for SqlStore<B> {
    async fn job_create(&self, job: JobNew) -> Result<Job, Error> {
        let mut conn = self.writes.acquire().await?;
        insert_job::<B>(&mut conn, job, None).await
    }

    async fn jobs_create(
        &self,
        jobs: Vec<JobCreate>,
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        self.create_jobs(jobs, audit).await
    }

    async fn job_update(&self, update: JobUpdate) -> Result<Job, Error> {
        check_spec(&update.spec)?;
        let id = update.id;
        let mut tx = B::begin_write(&self.writes).await?;
        let current = Query::new(format!(
            "SELECT version, glue_type, glue_source, glue_updated_at FROM tw_jobs WHERE id = ?{}",
            B::KIND.for_update()
        ))
        .bind(id);
        let mut row =
            B::fetch_optional::<(i64, String, String, i64)>(&mut *tx, current.clone()).await?;
        // MariaDB can answer a locking read that waited for a claim's lock on the row without
        // the row (see `lock_runs`): look again while a plain read still finds it.
        let exists = Query::new("SELECT id FROM tw_jobs WHERE id = ?").bind(id);
        for _ in 0..10 {
            if row.is_some()
                || B::KIND != Kind::MySql
                || B::fetch_optional::<(i64,)>(&mut *tx, exists.clone())
                    .await?
                    .is_none()
            {
                break;
            }
            row =
                B::fetch_optional::<(i64, String, String, i64)>(&mut *tx, current.clone()).await?;
        }
        let Some((version, glue_type, glue_source, glue_updated_at)) = row else {
            return Err(Error::not_found("job", id));
        };
        if let Some(expected) = update.expected_version
            && expected != version
        {
            return Err(Error::Conflict(format!(
                "job {id} was changed by someone else (version {version}, not {expected})"
            )));
        }
        let glue_changed =
            glue_type != update.spec.glue_type.as_str() || glue_source != update.spec.glue_source;
        let q = Query::new(format!(
            "UPDATE tw_jobs SET {}, glue_updated_at = ?, next_fire_at = ?, \
             version = version + 1, updated_at = ? WHERE id = ?",
            *SPEC_ASSIGNMENTS
        ));
        let group_id = update.spec.group_id;
        let q = bind_spec(q, &update.spec)
            .bind(if glue_changed {
                update.now
            } else {
                glue_updated_at
            })
            .bind(update.next_fire_at)
            .bind(update.now)
            .bind(id);
        B::execute(&mut *tx, q).await.map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::Invalid(format!("group {group_id} does not exist"))
            } else {
                Error::Database(e)
            }
        })?;
        let job = Self::job_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(job)
    }

    async fn job_delete(&self, id: i64) -> Result<(), Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        if many::delete_job_rows::<B>(&mut tx, &[id]).await? == 0 {
            return Err(Error::not_found("job", id));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn job_get(&self, id: i64) -> Result<Job, Error> {
        let mut conn = self.pool.acquire().await?;
        Self::job_in(&mut conn, id).await
    }

    async fn jobs_get(&self, ids: &[i64]) -> Result<Vec<Job>, Error> {
        self.get_jobs(ids).await
    }

    async fn job_get_by_key(&self, key: &str) -> Result<Job, Error> {
        let q = Query::new(format!(
            "SELECT {JOB_COLUMNS} FROM tw_jobs WHERE job_key = ?"
        ))
        .bind(key.trim());
        match self.fetch_optional::<JobRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("job", key)),
        }
    }

    async fn jobs_list(&self, filter: JobFilter) -> Result<Paged<Job>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let clause = Self::job_filter(&filter);
        let total = self.count("tw_jobs", &clause).await?;
        let mut q = Query::new(format!("SELECT {JOB_COLUMNS} FROM tw_jobs"));
        q.append(&clause);
        q.push(" ORDER BY ").push(&order_by(filter.sort));
        q.push(" LIMIT ").push_bind(limit);
        q.push(" OFFSET ").push_bind(offset);
        let items = convert(self.fetch_all::<JobRow>(q).await?)?;
        Ok(Paged { items, total })
    }

    async fn jobs_set_status(
        &self,
        change: JobsStatusChange,
        audit: &JobAudit<'_>,
    ) -> Result<Vec<Job>, Error> {
        self.set_status_of_jobs(change, audit).await
    }

    async fn jobs_delete(&self, ids: &[i64], audit: &JobAudit<'_>) -> Result<Vec<Job>, Error> {
        self.delete_jobs(ids, audit).await
    }

    async fn job_set_next_fire(&self, next: JobNextFire) -> Result<bool, Error> {
        let q =
            Query::new("UPDATE tw_jobs SET next_fire_at = ? WHERE id = ? AND status = 'running'")
                .bind(next.next_fire_at)
                .bind(next.id);
        Ok(self.execute(q).await? > 0)
    }

    async fn jobs_claim_due(
        &self,
        params: ClaimParams,
        planner: &Planner<'_>,
    ) -> Result<ClaimResult, Error> {
        check_required("node id", &params.node_id, NODE_ID_MAX)?;
        if params.limit == 0 {
            return Ok(ClaimResult::default());
        }
        let mut retries = 0;
        loop {
            match self.claim_once(&params, planner).await {
                Err(Error::Database(e)) if retries < CLAIM_RETRIES && is_retryable(&e) => {
                    retries += 1;
                    tracing::debug!(error = %e, retries, "claim lost a deadlock, trying again");
                }
                other => return other,
            }
        }
    }
}

/// The `ORDER BY` of a job listing: the key, then the id, both in the sort's direction.
/// Missing values (no next fire, never ran) come last either way, written as the far end of
/// the direction (`COALESCE`), so the expression is evaluated once per row on every backend
/// (they disagree on where NULLs sort). Text compares lowercased: the backends' collations
/// differ, ASCII case at least sorts alike.
fn order_by(sort: JobSort) -> String {
    // Not i64::MIN: PostgreSQL reads that literal as a numeric, not a bigint.
    let (dir, last) = if sort.descending {
        ("DESC", i64::MIN + 1)
    } else {
        ("ASC", i64::MAX)
    };
    let key = match sort.key {
        JobSortKey::Id => return format!("id {dir}"),
        JobSortKey::Description => "LOWER(description)".to_owned(),
        JobSortKey::Group => "(SELECT LOWER(CASE WHEN g.title = '' THEN g.app_name \
             ELSE g.title END) FROM tw_groups g WHERE g.id = tw_jobs.group_id)"
            .to_owned(),
        // A fixed-delay job waiting for its run holds i64::MAX: it has no next fire either.
        JobSortKey::NextFire => format!(
            "CASE WHEN next_fire_at IS NULL OR next_fire_at = {} THEN {last} \
             ELSE next_fire_at END",
            i64::MAX
        ),
        // The run `runs_last_of_jobs` finds, by the same index (job_id, id).
        JobSortKey::LastRun => format!(
            "COALESCE((SELECT r.scheduled_at FROM tw_runs r WHERE r.job_id = tw_jobs.id \
             AND r.state <> {} ORDER BY r.job_id DESC, r.id DESC LIMIT 1), {last})",
            state_literal(RunState::Planned)
        ),
    };
    format!("{key} {dir}, id {dir}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_assignments_follow_the_column_list() {
        assert!(SPEC_ASSIGNMENTS.starts_with("group_id = ?, description = ?"));
        assert_eq!(
            SPEC_ASSIGNMENTS.matches('?').count(),
            spec_args(&JobSpec::blank(1)).len()
        );
    }
}
