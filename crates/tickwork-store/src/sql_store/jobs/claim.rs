//! The claim: one transaction that takes the due jobs, plans their fires, writes their runs
//! and moves the jobs on.

use std::sync::Arc;

use super::super::json_rows::{json_field, json_source};
use super::*;

/// One fire of a claim, before it is written.
struct NewFire {
    /// Index into the claimed jobs.
    job: usize,
    fire: PlannedFire,
}

impl<B: Backend> SqlStore<B> {
    /// One claim transaction (see [`JobStore::jobs_claim_due`]).
    pub(super) async fn claim_once(
        &self,
        params: &ClaimParams,
        planner: &Planner<'_>,
    ) -> Result<ClaimResult, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let (jobs, dues) = due_jobs::<B>(&mut tx, params, planner).await?;
        if jobs.is_empty() {
            tx.commit().await?;
            return Ok(ClaimResult::default());
        }

        let mut fires = Vec::new();
        let mut next = Vec::with_capacity(jobs.len());
        let mut duplicates = 0;
        for (index, (job, &due)) in jobs.iter().zip(&dues).enumerate() {
            let plan = planner.plan(job, due, params.now);
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
            .zip(&dues)
            .filter_map(|(j, due)| due.fires_left.map(|left| (j.id, left)))
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
        jobs: &[Arc<Job>],
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
        jobs: &[Arc<Job>],
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
}

/// The due jobs a claim takes, locked, in the order of their next fire: each one's definition,
/// the planner's own when it holds the version read (see [`ClaimPlanner::known`]), else read
/// whole; beside it, its due columns as they are now. Reading a definition whole was a tenth
/// of the admin's work at 10,000 fires a second, the same rows every second.
async fn due_jobs<B: Backend>(
    conn: &mut Conn<B>,
    params: &ClaimParams,
    planner: &Planner<'_>,
) -> Result<(Vec<Arc<Job>>, Vec<JobDue>), Error> {
    let horizon = params.now.saturating_add(params.lookahead_ms.max(0));
    let select = Query::new(format!(
        "SELECT id, version, created_at, next_fire_at, last_fire_at, fires_left FROM tw_jobs \
         WHERE status = 'running' AND next_fire_at <= ? ORDER BY next_fire_at, id LIMIT ?{}",
        B::KIND.skip_locked()
    ))
    .bind(horizon)
    .bind(i64::from(params.limit));
    type DueRow = (i64, i64, i64, Option<i64>, Option<i64>, Option<i64>);
    let rows = B::fetch_all::<DueRow>(&mut *conn, select).await?;
    let mut known = Vec::with_capacity(rows.len());
    let mut dues = Vec::with_capacity(rows.len());
    for (id, version, created_at, next_fire_at, last_fire_at, fires_left) in rows {
        known.push((id, planner.known(id, version, created_at)));
        dues.push(JobDue {
            next_fire_at,
            last_fire_at,
            fires_left,
        });
    }
    let unknown: Vec<i64> = known
        .iter()
        .filter(|(_, def)| def.is_none())
        .map(|&(id, _)| id)
        .collect();
    let mut read: HashMap<i64, Arc<Job>> = HashMap::with_capacity(unknown.len());
    // The rows are this transaction's already (locked above, or SQLite's one writer), so a
    // plain read sees them as they are. A locking read here would lock more than them:
    // MariaDB scanned a small table whole for the list and locked every row.
    let select = format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id IN ");
    for q in in_ids::<B>(&select, &unknown) {
        for row in B::fetch_all::<JobRow>(&mut *conn, q).await? {
            let job = Job::try_from(row)?;
            read.insert(job.id, Arc::new(job));
        }
    }
    let jobs = known
        .into_iter()
        .map(|(id, def)| match def {
            Some(def) => Ok(def),
            None => read.remove(&id).ok_or_else(|| Error::not_found("job", id)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((jobs, dues))
}

/// The fires this claim wrote already ended (misfired) end their submissions' runs: their
/// completions are written here, in the claim's transaction. The runs are made only for
/// jobs that carry a submission (an overloaded claim misfires fires by the thousand).
async fn record_claimed_ends<B: Backend>(
    conn: &mut Conn<B>,
    jobs: &[Arc<Job>],
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
