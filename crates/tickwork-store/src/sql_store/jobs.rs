//! Jobs, and the claim that turns their due fires into runs.

use super::json_rows::{json_field, json_source};
use super::*;

mod create;
mod many;

pub(super) use many::delete_job_rows;

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

/// One fire of a claim, before it is written.
struct NewFire {
    /// Index into the claimed jobs.
    job: usize,
    fire: PlannedFire,
}

impl<B: Backend> SqlStore<B> {
    pub(super) async fn job_in(conn: &mut Conn<B>, id: i64) -> Result<Job, Error> {
        let q = Query::new(format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id = ?")).bind(id);
        match B::fetch_optional::<JobRow>(conn, q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("job", id)),
        }
    }

    /// One claim transaction (see [`JobStore::jobs_claim_due`]).
    async fn claim_once(
        &self,
        params: &ClaimParams,
        planner: &Planner<'_>,
    ) -> Result<ClaimResult, Error> {
        let horizon = params.now.saturating_add(params.lookahead_ms.max(0));
        let mut tx = B::begin_write(&self.writes).await?;
        let select = Query::new(format!(
            "SELECT {JOB_COLUMNS} FROM tw_jobs WHERE status = 'running' AND next_fire_at <= ? \
             ORDER BY next_fire_at, id LIMIT ?{}",
            B::KIND.skip_locked()
        ))
        .bind(horizon)
        .bind(i64::from(params.limit));
        let jobs: Vec<Job> = convert(B::fetch_all::<JobRow>(&mut *tx, select).await?)?;
        if jobs.is_empty() {
            tx.commit().await?;
            return Ok(ClaimResult::default());
        }

        let mut fires = Vec::new();
        let mut next = Vec::with_capacity(jobs.len());
        let mut duplicates = 0;
        for (index, job) in jobs.iter().enumerate() {
            let plan = planner(job, params.now);
            let mut keys = HashSet::with_capacity(plan.fires.len());
            for fire in plan.fires {
                if !fire.state.is_initial() {
                    return Err(Error::Invalid(format!(
                        "the planner gave job {} a fire in state {}",
                        job.id, fire.state
                    )));
                }
                // Two fires with one key in one plan: the ledger would keep the first anyway.
                if keys.insert(fire.fire_key) {
                    fires.push(NewFire { job: index, fire });
                } else {
                    duplicates += 1;
                }
            }
            next.push((job.id, plan.next_fire_at));
        }

        Self::skip_second_catch_ups(&mut tx, &jobs, &mut fires).await?;
        let ids = Self::insert_fires(&mut tx, &jobs, &fires, params).await?;

        let mut last_fire: HashMap<i64, i64> = HashMap::new();
        for f in &fires {
            let job_id = jobs[f.job].id;
            if f.fire.state == RunState::Planned && ids.contains_key(&(job_id, f.fire.fire_key)) {
                let last = last_fire.entry(job_id).or_insert(f.fire.scheduled_at);
                *last = (*last).max(f.fire.scheduled_at);
            }
        }
        // A job with fires left counts down by the fires written (misfired ones too), not
        // by those the ledger already held.
        let mut fires_left: HashMap<i64, i64> = jobs
            .iter()
            .filter_map(|j| j.fires_left.map(|left| (j.id, left)))
            .collect();
        if !fires_left.is_empty() {
            for f in &fires {
                let job_id = jobs[f.job].id;
                if let Some(left) = fires_left.get_mut(&job_id)
                    && ids.contains_key(&(job_id, f.fire.fire_key))
                {
                    *left = (*left - 1).max(0);
                }
            }
        }
        Self::advance_jobs(&mut tx, &next, &last_fire, &fires_left).await?;
        record_claimed_ends::<B>(&mut tx, &jobs, &fires, &ids, params).await?;
        tx.commit().await?;

        let mut result = ClaimResult {
            jobs: jobs.len(),
            duplicates,
            ..ClaimResult::default()
        };
        for f in fires {
            let job = &jobs[f.job];
            let Some(&id) = ids.get(&(job.id, f.fire.fire_key)) else {
                result.duplicates += 1;
                continue;
            };
            if f.fire.state != RunState::Planned {
                result.misfired += 1;
                continue;
            }
            result.runs.push(claimed_run(job, &f, id, params));
        }
        result.runs.sort_by_key(|r| (r.scheduled_at, r.id));
        Ok(result)
    }

    /// A job gets one catch-up for its late fires (FIRE_ONCE_NOW). After an outage a node
    /// may have made one of the job's earlier planned runs that catch-up (see
    /// [`RunLedger::run_catch_up`]); then this claim records its own catch-up as misfired. The
    /// job's row lock, held here and taken by `run_catch_up`, orders the two.
    async fn skip_second_catch_ups(
        conn: &mut Conn<B>,
        jobs: &[Job],
        fires: &mut [NewFire],
    ) -> Result<(), Error> {
        // Per job given a catch-up: its earliest late fire.
        let mut late_since: HashMap<i64, i64> = HashMap::new();
        for f in fires.iter() {
            let job_id = jobs[f.job].id;
            if f.fire.trigger_type == TriggerType::Misfire && f.fire.state == RunState::Planned {
                late_since.entry(job_id).or_insert(i64::MAX);
            }
        }
        if late_since.is_empty() {
            return Ok(());
        }
        for f in fires.iter() {
            let late =
                f.fire.state == RunState::Misfired || f.fire.trigger_type == TriggerType::Misfire;
            if let (true, Some(since)) = (late, late_since.get_mut(&jobs[f.job].id)) {
                *since = (*since).min(f.fire.fire_key);
            }
        }
        let mut q =
            Query::new("SELECT job_id, MAX(scheduled_at) FROM tw_runs WHERE trigger_type = ")
                .one_off();
        q.push_bind(TriggerType::Misfire.as_str())
            .push(" AND job_id IN ");
        q.push_list(late_since.keys().copied());
        q.push(" GROUP BY job_id");
        let caught: HashSet<i64> = B::fetch_all::<(i64, i64)>(conn, q)
            .await?
            .into_iter()
            .filter(|(job_id, at)| late_since.get(job_id).is_some_and(|since| at >= since))
            .map(|(job_id, _)| job_id)
            .collect();
        for f in fires.iter_mut() {
            let job = &jobs[f.job];
            if caught.contains(&job.id) && f.fire.trigger_type == TriggerType::Misfire {
                f.fire =
                    PlannedFire::misfired(f.fire.fire_key, job.spec.schedule_type.trigger_type());
            }
        }
        Ok(())
    }

    /// Writes the fires with multi-row inserts that skip ledger collisions, and returns the
    /// ids of the rows this call wrote, keyed by (job id, fire key).
    async fn insert_fires(
        conn: &mut Conn<B>,
        jobs: &[Job],
        fires: &[NewFire],
        params: &ClaimParams,
    ) -> Result<HashMap<(i64, i64), i64>, Error> {
        let mut ids = HashMap::with_capacity(fires.len());
        if B::KIND != Kind::MySql {
            // One statement, the rows as JSON (see [`JsonRows`]); `WHERE true` tells SQLite's
            // parser that ON CONFLICT belongs to the insert, not to a join.
            let mut rows = JsonRows::with_capacity(fires.len());
            for f in fires {
                let job = &jobs[f.job];
                let finished_at = (f.fire.state != RunState::Planned).then_some(params.now);
                rows.row()
                    .int(job.id)
                    .int(job.spec.group_id)
                    .int(f.fire.scheduled_at)
                    .int(f.fire.fire_key)
                    .str(f.fire.trigger_type.as_str())
                    .str(&job.spec.handler)
                    .str(&job.spec.params)
                    .str(f.fire.state.as_str())
                    .int(job.spec.priority.into())
                    .opt_int(finished_at);
            }
            let k = B::KIND;
            let f = |n, ty| json_field(k, "f", n, ty);
            let q = Query::new(format!(
                "INSERT INTO tw_runs ({FIRE_COLUMNS}) SELECT {}, {}, {}, {}, {}, 0, {}, {}, {}, \
                 ?, {}, ?, {} FROM {} WHERE true ON CONFLICT (job_id, fire_key) DO NOTHING \
                 RETURNING id, job_id, fire_key",
                f(0, "BIGINT"),
                f(1, "BIGINT"),
                f(2, "BIGINT"),
                f(3, "BIGINT"),
                f(4, "TEXT"),
                f(5, "TEXT"),
                f(6, "TEXT"),
                f(7, "TEXT"),
                f(8, "INTEGER"),
                f(9, "BIGINT"),
                json_source(k, "f"),
            ))
            .bind(params.node_id.as_str())
            .bind(params.now)
            .bind(rows.finish());
            for (id, job, key) in B::fetch_all::<(i64, i64, i64)>(conn, q).await? {
                ids.insert((job, key), id);
            }
            return Ok(ids);
        }
        // MySQL/MariaDB: thirteen binds and their placeholders per row, plus the job's
        // handler and params.
        let row_bytes = |f: &NewFire| {
            let spec = &jobs[f.job].spec;
            240 + spec.handler.len() + spec.params.len()
        };
        for chunk in sized_chunks(fires, row_bytes) {
            let wanted: HashSet<(i64, i64)> = chunk
                .iter()
                .map(|f| (jobs[f.job].id, f.fire.fire_key))
                .collect();
            // Without RETURNING, tell our rows from older ones by what was there before. Sound
            // because only a claim writes a job's keyed runs, and it holds the job's row lock,
            // as this transaction does now: nobody else adds keys for these jobs between the
            // two reads.
            let existing: HashSet<(i64, i64)> = Self::ledger_rows(conn, &wanted)
                .await?
                .into_iter()
                .map(|(_, job, key)| (job, key))
                .collect();

            let mut q = Query::new(B::KIND.insert_or_skip()).one_off();
            q.push("tw_runs (").push(FIRE_COLUMNS).push(") VALUES ");
            for (n, f) in chunk.iter().enumerate() {
                if n > 0 {
                    q.push(", ");
                }
                let job = &jobs[f.job];
                let finished_at = (f.fire.state != RunState::Planned).then_some(params.now);
                q.push_list([
                    Arg::from(job.id),
                    job.spec.group_id.into(),
                    f.fire.scheduled_at.into(),
                    f.fire.fire_key.into(),
                    f.fire.trigger_type.as_str().into(),
                    0_i32.into(),
                    job.spec.handler.as_str().into(),
                    job.spec.params.as_str().into(),
                    f.fire.state.as_str().into(),
                    params.node_id.as_str().into(),
                    job.spec.priority.into(),
                    params.now.into(),
                    finished_at.into(),
                ]);
            }
            q.push(&B::KIND.on_conflict_skip("job_id, fire_key"));
            B::execute(conn, q).await?;
            for (id, job, key) in Self::ledger_rows(conn, &wanted).await? {
                if !existing.contains(&(job, key)) {
                    ids.insert((job, key), id);
                }
            }
        }
        Ok(ids)
    }

    /// The ledger rows (id, job, key) among `wanted`, found through the unique index
    /// (fire_key, job_id): the rows of the keys' span (a few seconds of fires) for these jobs,
    /// then filtered exactly.
    async fn ledger_rows(
        conn: &mut Conn<B>,
        wanted: &HashSet<(i64, i64)>,
    ) -> Result<Vec<(i64, i64, i64)>, Error> {
        let job_ids: BTreeSet<i64> = wanted.iter().map(|&(job, _)| job).collect();
        let (Some(low), Some(high)) = (
            wanted.iter().map(|&(_, k)| k).min(),
            wanted.iter().map(|&(_, k)| k).max(),
        ) else {
            return Ok(Vec::new());
        };
        let mut q =
            Query::new("SELECT id, job_id, fire_key FROM tw_runs WHERE job_id IN ").one_off();
        q.push_list(job_ids);
        q.push(" AND fire_key >= ").push_bind(low);
        q.push(" AND fire_key <= ").push_bind(high);
        let rows = B::fetch_all::<(i64, i64, i64)>(conn, q).await?;
        Ok(rows
            .into_iter()
            .filter(|&(_, job, key)| wanted.contains(&(job, key)))
            .collect())
    }

    /// Moves each claimed job to its next fire (stopping it at `None`), records its last
    /// planned fire and, for a job with a bound, the fires it has left, with one batched
    /// UPDATE per chunk. Leaves `version` and `updated_at` alone: scheduling is not an edit.
    async fn advance_jobs(
        conn: &mut Conn<B>,
        next: &[(i64, Option<i64>)],
        last_fire: &HashMap<i64, i64>,
        fires_left: &HashMap<i64, i64>,
    ) -> Result<(), Error> {
        if B::KIND != Kind::MySql {
            // One statement, the rows as JSON (see [`JsonRows`]): id, next fire (null stops
            // the job), last planned fire and fires left (null keeps the one it has).
            let mut rows = JsonRows::with_capacity(next.len());
            for &(id, at) in next {
                rows.row()
                    .int(id)
                    .opt_int(at)
                    .opt_int(last_fire.get(&id).copied())
                    .opt_int(fires_left.get(&id).copied());
            }
            let k = B::KIND;
            let f = |n| json_field(k, "n", n, "BIGINT");
            let q = Query::new(format!(
                "UPDATE tw_jobs SET next_fire_at = {next}, \
                 status = CASE WHEN {next} IS NULL THEN 'stopped' ELSE status END, \
                 last_fire_at = COALESCE({}, last_fire_at), \
                 fires_left = COALESCE({}, fires_left) \
                 FROM {} WHERE tw_jobs.id = {}",
                f(2),
                f(3),
                json_source(k, "n"),
                f(0),
                next = f(1),
            ))
            .bind(rows.finish());
            B::execute(conn, q).await?;
            return Ok(());
        }
        // MySQL/MariaDB: CASE arms.
        for chunk in sized_chunks(next, |_| 120) {
            // A no-op first assignment, so every real one below can start with a comma.
            let mut q = Query::new("UPDATE tw_jobs SET updated_at = updated_at").one_off();
            push_case(&mut q, "next_fire_at", chunk, |r| r.0, |r| r.1.into());
            let stopped: Vec<i64> = chunk
                .iter()
                .filter(|r| r.1.is_none())
                .map(|r| r.0)
                .collect();
            if !stopped.is_empty() {
                q.push(", status = CASE WHEN id IN ");
                q.push_list(stopped);
                q.push(" THEN 'stopped' ELSE status END");
            }
            let fired: Vec<(i64, i64)> = chunk
                .iter()
                .filter_map(|r| last_fire.get(&r.0).map(|&at| (r.0, at)))
                .collect();
            if !fired.is_empty() {
                q.push(", last_fire_at = CASE id");
                for (id, at) in fired {
                    q.push(" WHEN ").push_bind(id);
                    q.push(" THEN ").push_bind(at);
                }
                q.push(" ELSE last_fire_at END");
            }
            let counted: Vec<(i64, i64)> = chunk
                .iter()
                .filter_map(|r| fires_left.get(&r.0).map(|&left| (r.0, left)))
                .collect();
            if !counted.is_empty() {
                q.push(", fires_left = CASE id");
                for (id, left) in counted {
                    q.push(" WHEN ").push_bind(id);
                    q.push(" THEN ").push_bind(left);
                }
                q.push(" ELSE fires_left END");
            }
            q.push(" WHERE id IN ");
            q.push_list(chunk.iter().map(|r| r.0));
            B::execute(conn, q).await?;
        }
        Ok(())
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

/// The fires this claim wrote already ended (misfired) end their submissions' runs: their
/// completions are written here, in the claim's transaction. The runs are made only for
/// jobs that carry a submission (an overloaded claim misfires fires by the thousand).
async fn record_claimed_ends<B: Backend>(
    conn: &mut Conn<B>,
    jobs: &[Job],
    fires: &[NewFire],
    ids: &HashMap<(i64, i64), i64>,
    params: &ClaimParams,
) -> Result<(), Error> {
    let ended_jobs: BTreeSet<i64> = fires
        .iter()
        .filter(|f| f.fire.state != RunState::Planned)
        .map(|f| jobs[f.job].id)
        .collect();
    if ended_jobs.is_empty() {
        return Ok(());
    }
    let job_ids: Vec<i64> = ended_jobs.into_iter().collect();
    let carried = submissions::carried_by::<B>(conn, &job_ids).await?;
    if carried.is_empty() {
        return Ok(());
    }
    let ended: Vec<Run> = fires
        .iter()
        .filter(|f| f.fire.state != RunState::Planned && carried.contains_key(&jobs[f.job].id))
        .filter_map(|f| {
            let job = &jobs[f.job];
            let &id = ids.get(&(job.id, f.fire.fire_key))?;
            Some(claimed_run(job, f, id, params))
        })
        .collect();
    submissions::insert_ends::<B>(conn, &carried, &ended).await
}

/// The run a claim wrote for fire `f` of `job` under id `id`: planned for this node, or
/// already ended (misfired) at the claim's instant.
fn claimed_run(job: &Job, f: &NewFire, id: i64, params: &ClaimParams) -> Run {
    Run {
        id,
        job_id: job.id,
        group_id: job.spec.group_id,
        scheduled_at: f.fire.scheduled_at,
        fire_key: Some(f.fire.fire_key),
        trigger_type: f.fire.trigger_type,
        attempt: 0,
        parent_run_id: None,
        executor_address: None,
        handler: job.spec.handler.clone(),
        params: job.spec.params.clone(),
        shard_index: None,
        shard_total: None,
        state: f.fire.state,
        trigger_code: 0,
        trigger_msg: None,
        handle_code: 0,
        handle_msg: None,
        alarm_status: AlarmStatus::Undecided,
        owner_node: Some(params.node_id.clone()),
        priority: job.spec.priority,
        created_at: params.now,
        dispatched_at: None,
        finished_at: (f.fire.state != RunState::Planned).then_some(params.now),
        timeout_s: None,
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

    async fn job_set_status(&self, change: JobStatusChange) -> Result<Job, Error> {
        let q = Query::new(
            "UPDATE tw_jobs SET status = ?, next_fire_at = ?, updated_at = ? WHERE id = ?",
        )
        .bind(change.status.as_str())
        .bind(change.next_fire_at)
        .bind(change.now)
        .bind(change.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("job", change.id));
        }
        self.job_get(change.id).await
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
