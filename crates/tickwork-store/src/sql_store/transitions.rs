//! The writes that move runs on: the dispatch record, and the ends of runs (completion,
//! trigger failure, misfire) with the follow-ups written in the same transaction.

use tickwork_core::ScheduleType;
use tickwork_core::follow_up;

use super::json_rows::{json_field, json_source};
use super::*;

/// `state` condition of the runs a dispatch record lands on: those it moves, and those an
/// early callback ended before it was written (which keep their state).
static DISPATCH_RECORD_STATES: LazyLock<String> = LazyLock::new(|| {
    let mut states = RunMove::Dispatch.from_states().to_vec();
    states.extend_from_slice(RunState::EARLY_RESULTS);
    state_in(&states)
});

/// The jobs whose runs can have follow-ups ([`follow_up::can_follow`]): those that retry, have
/// children, or whose schedule waits for their runs' ends. PostgreSQL indexes them apart
/// (`tw_jobs_followed`).
pub(super) static CAN_FOLLOW: LazyLock<String> = LazyLock::new(|| {
    let waiting: Vec<String> = ScheduleType::ALL
        .iter()
        .filter(|&&t| follow_up::can_follow(t, 0, false))
        .map(|t| format!("'{}'", t.as_str()))
        .collect();
    format!(
        "(retry_count > 0 OR child_job_ids <> '' OR schedule_type IN ({}))",
        waiting.join(", ")
    )
});

/// The `state` a completion writes for `result`: the result, or what it means when a kill of
/// the run was asked for ([`RunMove::to_with_kill_intent`]), decided in the statement itself
/// so that no final state is ever left. Binds its values to `q`.
fn push_result_state(q: &mut Query, result: RunState) {
    let killed = RunMove::Complete(result).to_with_kill_intent();
    if killed == result {
        q.push_bind(result.as_str());
    } else {
        q.push("CASE WHEN kill_requested_at IS NULL THEN ");
        q.push_bind(result.as_str());
        q.push(" ELSE ").push_bind(killed.as_str()).push(" END");
    }
}

impl<B: Backend> SqlStore<B> {
    /// One attempt of [`RunLedger::runs_begin_send`].
    pub(super) async fn runs_begin_send_once(&self, send: &BeginSend) -> Result<Vec<i64>, Error> {
        // The fence, in the database: a node paused past its heartbeat moves nothing, even if
        // no other node has adopted its runs yet.
        let live = send.live_since.map(|since| {
            let mut q = Query::new(" AND EXISTS (SELECT 1 FROM tw_nodes WHERE id = ").one_off();
            q.push_bind(send.node_id.as_str());
            q.push(" AND heartbeat_at >= ").push_bind(since).push(")");
            q
        });
        self.move_owned(RunMove::Send, &send.node_id, &send.run_ids, live.as_ref())
            .await
    }

    /// One attempt of [`RunLedger::runs_unsend`].
    pub(super) async fn runs_unsend_once(&self, unsend: &Unsend) -> Result<Vec<i64>, Error> {
        self.move_owned(RunMove::Unsend, &unsend.node_id, &unsend.run_ids, None)
            .await
    }

    /// Makes `op` (which changes the state only) on the runs among `ids` that `node` owns,
    /// under the extra condition `when`, in one transaction; returns the ids that moved,
    /// ascending.
    async fn move_owned(
        &self,
        op: RunMove,
        node: &str,
        ids: &[i64],
        when: Option<&Query>,
    ) -> Result<Vec<i64>, Error> {
        let mut moved = Vec::with_capacity(ids.len());
        let mut tx = B::begin_write(&self.writes).await?;
        if B::KIND != Kind::MySql {
            // No lock first: what the update changed is what moved, read back by RETURNING.
            // SQLite has one writer, and PostgreSQL looks at a row's state again after
            // waiting for another transaction's lock on it. Locking first cost PostgreSQL a
            // locking read and a log record a run before the update, for every fire sent. The
            // ids go in ascending, the order every batch locks rows in; the state is kept off
            // its index, so the planner finds each run by its id. On SQLite one statement, the
            // ids one JSON array; on PostgreSQL a list of ids a statement, which it always
            // looks up by key: a join with JSON rows is planned by the ledger's size when the
            // statement is prepared, and a ledger still small then was scanned whole at every
            // send (the first fires of a fresh database late by 400 ms; under overload none
            // sent for 40 s).
            let mut sorted = ids.to_vec();
            sorted.sort_unstable();
            let update = format!(
                "UPDATE tw_runs SET state = {} WHERE id IN ",
                state_literal(op.to())
            );
            let statements = if B::KIND == Kind::Sqlite {
                in_ids::<B>(&update, &sorted)
            } else {
                id_lists(&update, &sorted)
            };
            for mut q in statements {
                q.push(" AND ").push(B::KIND.state_beside_ids());
                q.push(&state_in(op.from_states()));
                q.push(" AND owner_node = ").push_bind(node);
                if let Some(when) = when {
                    q.append(when);
                }
                q.push(" RETURNING id");
                moved.extend(
                    B::fetch_all::<(i64,)>(&mut *tx, q)
                        .await?
                        .into_iter()
                        .map(|(id,)| id),
                );
            }
            tx.commit().await?;
            moved.sort_unstable();
            return Ok(moved);
        }
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            // Lock the runs first and keep those in the old state: a run of `ids` already in
            // the new state (sent by an earlier batch) is then never counted as moved here.
            let from: Vec<i64> = Self::lock_runs(&mut tx, chunk)
                .await?
                .into_iter()
                .filter(|&(_, state)| op.applies_to(state))
                .map(|(id, _)| id)
                .collect();
            if from.is_empty() {
                continue;
            }
            let mut q = Query::new(format!(
                "UPDATE tw_runs SET state = {} WHERE ",
                state_literal(op.to())
            ))
            .one_off();
            q.push(B::KIND.state_beside_ids());
            q.push(&state_in(op.from_states()));
            q.push(" AND owner_node = ").push_bind(node);
            q.push(" AND id IN ").push_list(from.iter().copied());
            if let Some(when) = when {
                q.append(when);
            }
            let rows = B::execute(&mut *tx, q).await?.rows;
            if rows == 0 {
                continue;
            }
            // Under the lock every run of `from` was in the old state: when all of them moved
            // (the usual case: all this node's), they are the answer without reading back.
            if rows == from.len() as u64 {
                moved.extend_from_slice(&from);
                continue;
            }
            // Under the lock, those of `from` now in the new state are exactly those just
            // moved.
            let mut read = Query::new("SELECT id FROM tw_runs WHERE id IN ").one_off();
            read.push_list(from.iter().copied());
            read.push(" AND ").push(B::KIND.state_beside_ids());
            read.push(&state_in(&[op.to()]));
            read.push(" AND owner_node = ").push_bind(node);
            moved.extend(
                B::fetch_all::<(i64,)>(&mut *tx, read)
                    .await?
                    .into_iter()
                    .map(|(id,)| id),
            );
        }
        tx.commit().await?;
        moved.sort_unstable();
        Ok(moved)
    }

    /// One attempt of [`RunLedger::runs_mark_dispatched`].
    pub(super) async fn runs_mark_dispatched_once(
        &self,
        batch: &MarkDispatched,
    ) -> Result<u64, Error> {
        if batch.runs.is_empty() {
            return Ok(0);
        }
        let records: Vec<&Dispatched> = batch.runs.iter().collect();
        let mut tx = B::begin_write(&self.writes).await?;
        let changed = Self::write_dispatch_records(&mut tx, &batch.node_id, &records).await?;
        tx.commit().await?;
        Ok(changed)
    }

    /// The dispatch records of `node` (see [`RunLedger::runs_mark_dispatched`]); how many
    /// runs changed.
    async fn write_dispatch_records(
        conn: &mut Conn<B>,
        node: &str,
        batch: &[&Dispatched],
    ) -> Result<u64, Error> {
        if batch.is_empty() {
            return Ok(0);
        }
        if B::KIND != Kind::MySql {
            // One statement for the batch, the rows as JSON (see [`JsonRows`]), in the order
            // of their ids (PostgreSQL locks them in that order, as every batch does). The
            // state and owner are kept off their index (`+state` on SQLite), so the planner
            // walks the rows and finds each run by its id.
            let k = B::KIND;
            let f = |n, ty| json_field(k, "d", n, ty);
            let sql = format!(
                "UPDATE tw_runs SET state = CASE WHEN state{} THEN {} ELSE state END, \
                 executor_address = {}, trigger_code = {}, trigger_msg = {}, \
                 dispatched_at = {} FROM {} WHERE tw_runs.id = {} \
                 AND dispatched_at IS NULL AND trigger_code = 0 AND {}{} \
                 AND {} = ?",
                state_in(RunMove::Dispatch.from_states()),
                state_literal(RunMove::Dispatch.to()),
                f(1, "TEXT"),
                f(2, "INTEGER"),
                f(3, "TEXT"),
                f(4, "BIGINT"),
                json_source(k, "d"),
                f(0, "BIGINT"),
                k.state_beside_ids(),
                &*DISPATCH_RECORD_STATES,
                if k == Kind::Sqlite {
                    "+owner_node"
                } else {
                    "owner_node"
                },
            );
            let mut sorted = batch.to_vec();
            sorted.sort_by_key(|d| d.run_id);
            let mut rows = JsonRows::with_capacity(batch.len());
            for d in sorted {
                rows.row()
                    .int(d.run_id)
                    .str(&d.address)
                    .int(d.trigger_code.into())
                    .opt_str(clip(d.trigger_msg.as_deref()).as_deref())
                    .int(d.at);
            }
            let q = Query::new(sql).bind(rows.finish()).bind(node);
            return Ok(B::execute(&mut *conn, q).await?.rows);
        }
        // MySQL/MariaDB (its JSON_TABLE is not in every supported release): four CASE arms
        // of two binds and their text per row, plus the strings.
        let row_bytes =
            |d: &&Dispatched| 160 + d.address.len() + d.trigger_msg.as_deref().map_or(0, str::len);
        let mut changed = 0;
        for chunk in sized_chunks(batch, row_bytes) {
            let mut q = Query::new(format!(
                "UPDATE tw_runs SET state = CASE WHEN state{} THEN {} ELSE state END",
                state_in(RunMove::Dispatch.from_states()),
                state_literal(RunMove::Dispatch.to())
            ))
            .one_off();
            let id = |d: &&Dispatched| d.run_id;
            push_case(&mut q, "executor_address", chunk, id, |d| {
                d.address.as_str().into()
            });
            push_case(&mut q, "trigger_code", chunk, id, |d| d.trigger_code.into());
            push_case(&mut q, "trigger_msg", chunk, id, |d| {
                clip(d.trigger_msg.as_deref()).into()
            });
            push_case(&mut q, "dispatched_at", chunk, id, |d| d.at.into());
            q.push(" WHERE id IN ");
            q.push_list(chunk.iter().map(id));
            // A callback can beat the batch here: such a run is already final, and only gains
            // its trigger record. Trigger failures, misfires and skips are left alone.
            q.push(" AND dispatched_at IS NULL AND trigger_code = 0 AND ");
            q.push(B::KIND.state_beside_ids());
            q.push(&DISPATCH_RECORD_STATES);
            q.push(" AND owner_node = ").push_bind(node);
            changed += B::execute(&mut *conn, q).await?.rows;
        }
        Ok(changed)
    }

    /// One attempt of [`RunLedger::runs_complete_dispatched`].
    pub(super) async fn runs_complete_once(
        &self,
        both: CompleteDispatched<'_>,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        let batch = both.results;
        let node = both.dispatched.node_id.as_str();
        let records: HashMap<i64, &Dispatched> =
            both.dispatched.runs.iter().map(|d| (d.run_id, d)).collect();
        if let Some(c) = batch.iter().find(|c| !c.state.is_result()) {
            return Err(Error::Invalid(format!("{} is not a result state", c.state)));
        }
        let mut seen = HashSet::new();
        let batch: Vec<&RunComplete> = batch.iter().filter(|c| seen.insert(c.run_id)).collect();
        if batch.is_empty() && records.is_empty() {
            return Ok(Ended::default());
        }
        let mut done = Vec::with_capacity(batch.len());
        let mut tx = B::begin_write(&self.writes).await?;
        if B::KIND != Kind::MySql {
            // One statement per result state, the rows as JSON (see [`JsonRows`]) in the
            // order of their ids, the runs that ended read back by RETURNING. No lock first:
            // SQLite has one writer, and PostgreSQL looks at a row's state again after
            // waiting for another transaction's lock on it, so what RETURNING gives is exactly
            // what the statement changed.
            let k = B::KIND;
            let f = |n, ty| json_field(k, "c", n, ty);
            let mut sorted = batch;
            sorted.sort_by_key(|c| c.run_id);
            let mut by_state: BTreeMap<RunState, JsonRows> = BTreeMap::new();
            for c in &sorted {
                let rows = by_state
                    .entry(c.state)
                    .or_insert_with(|| JsonRows::with_capacity(sorted.len()));
                rows.row()
                    .int(c.run_id)
                    .int(c.handle_code.into())
                    .opt_str(clip(c.handle_msg.as_deref()).as_deref())
                    .int(c.at);
                if records.is_empty() {
                    continue;
                }
                match records.get(&c.run_id) {
                    Some(d) => rows
                        .str(&d.address)
                        .int(d.trigger_code.into())
                        .opt_str(clip(d.trigger_msg.as_deref()).as_deref())
                        .int(d.at),
                    None => rows.null().null().null().null(),
                };
            }
            for (state, rows) in by_state {
                let mut q = Query::new("UPDATE tw_runs SET state = ");
                push_result_state(&mut q, state);
                q.push(&format!(
                    ", handle_code = {}, handle_msg = {}, finished_at = {}",
                    f(1, "INTEGER"),
                    f(2, "TEXT"),
                    f(3, "BIGINT")
                ));
                if !records.is_empty() {
                    // The dispatch record where `runs_mark_dispatched` would write it, in the
                    // same update: the old row's values decide, as in every SET.
                    for (column, n, ty) in [
                        ("executor_address", 4, "TEXT"),
                        ("trigger_code", 5, "INTEGER"),
                        ("trigger_msg", 6, "TEXT"),
                        ("dispatched_at", 7, "BIGINT"),
                    ] {
                        q.push(&format!(
                            ", {column} = CASE WHEN {} IS NOT NULL AND tw_runs.dispatched_at \
                             IS NULL AND tw_runs.trigger_code = 0 AND tw_runs.state{} \
                             AND tw_runs.owner_node = ",
                            f(7, "BIGINT"),
                            state_in(RunMove::Dispatch.from_states())
                        ));
                        q.push_bind(node);
                        q.push(&format!(" THEN {} ELSE tw_runs.{column} END", f(n, ty)));
                    }
                }
                q.push(" FROM ");
                let source = json_source(k, "c");
                let (before, after) = source.split_once('?').expect("one parameter");
                q.push(before).push_bind(rows.finish()).push(after);
                // The state kept off its index: the planner walks the rows and finds each run
                // by its id.
                q.push(&format!(" WHERE tw_runs.id = {} AND ", f(0, "BIGINT")));
                q.push(k.state_beside_ids());
                q.push(&state_in(RunMove::Complete(state).from_states()));
                q.push(" RETURNING ").push(RUN_COLUMNS);
                for row in B::fetch_all::<RunRow>(&mut *tx, q).await? {
                    done.push(Run::try_from(row)?);
                }
            }
            // The records of runs no result ended now, on their own.
            let ended_now: HashSet<i64> = done.iter().map(|r| r.id).collect();
            let rest: Vec<&Dispatched> = both
                .dispatched
                .runs
                .iter()
                .filter(|d| !ended_now.contains(&d.run_id))
                .collect();
            Self::write_dispatch_records(&mut tx, node, &rest).await?;
            let ended = Self::write_follow_ups(&mut tx, done, follow).await?;
            tx.commit().await?;
            return Ok(ended);
        }
        // MySQL/MariaDB, which has no RETURNING on UPDATE, and evaluates a SET left to right
        // (a CASE on the old row as above would see the new one): the dispatch records first,
        // in the same transaction, then the results; four CASE arms (the state's with its kill
        // choice) and the id, with their binds.
        let all: Vec<&Dispatched> = both.dispatched.runs.iter().collect();
        Self::write_dispatch_records(&mut tx, node, &all).await?;
        let row_bytes = |c: &&RunComplete| 220 + c.handle_msg.as_deref().map_or(0, str::len);
        for chunk in sized_chunks(&batch, row_bytes) {
            // Lock the runs, then keep those their result applies to, so that what is updated
            // is exactly what is returned.
            let ids: Vec<i64> = chunk.iter().map(|c| c.run_id).collect();
            let states: HashMap<i64, RunState> =
                Self::lock_runs(&mut tx, &ids).await?.into_iter().collect();
            let rows: Vec<&RunComplete> = chunk
                .iter()
                .copied()
                .filter(|c| {
                    states
                        .get(&c.run_id)
                        .is_some_and(|&s| RunMove::Complete(c.state).applies_to(s))
                })
                .collect();
            if rows.is_empty() {
                continue;
            }
            let id = |c: &&RunComplete| c.run_id;
            let mut q = Query::new("UPDATE tw_runs SET state = CASE id").one_off();
            for c in &rows {
                q.push(" WHEN ").push_bind(c.run_id).push(" THEN ");
                push_result_state(&mut q, c.state);
            }
            q.push(" END");
            push_case(&mut q, "handle_code", &rows, id, |c| c.handle_code.into());
            push_case(&mut q, "handle_msg", &rows, id, |c| {
                clip(c.handle_msg.as_deref()).into()
            });
            push_case(&mut q, "finished_at", &rows, id, |c| c.at.into());
            // Under the lock the rows are exactly those found above; the condition on the
            // states is kept as the statement's own guard.
            let from: BTreeSet<RunState> = rows
                .iter()
                .flat_map(|c| RunMove::Complete(c.state).from_states())
                .copied()
                .collect();
            let from: Vec<RunState> = from.into_iter().collect();
            q.push(" WHERE id IN ");
            q.push_list(rows.iter().map(id));
            q.push(" AND ").push(B::KIND.state_beside_ids());
            q.push(&state_in(&from));
            B::execute(&mut *tx, q).await?;
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(rows.iter().map(id));
            for row in B::fetch_all::<RunRow>(&mut *tx, read).await? {
                done.push(Run::try_from(row)?);
            }
        }
        let ended = Self::write_follow_ups(&mut tx, done, follow).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// One attempt of [`RunLedger::run_complete`].
    pub(super) async fn run_complete_once(
        &self,
        complete: &RunComplete,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        let q = Self::complete_update(complete);
        let mut tx = B::begin_write(&self.writes).await?;
        let ended = Self::ended_one(&mut tx, q, complete.run_id).await?;
        let ended = Self::write_follow_ups(&mut tx, ended, follow).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// One attempt of [`RunLedger::runs_mark_trigger_failed`]: each run by its own guarded
    /// update, in the order of their ids (so two writers lock in the same order), and one
    /// commit.
    pub(super) async fn runs_mark_trigger_failed_once(
        &self,
        batch: &[TriggerFailed],
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        let mut sorted: Vec<&TriggerFailed> = batch.iter().collect();
        sorted.sort_by_key(|f| f.run_id);
        sorted.dedup_by_key(|f| f.run_id);
        if sorted.is_empty() {
            return Ok(Ended::default());
        }
        let mut ended = Vec::new();
        let mut tx = B::begin_write(&self.writes).await?;
        let update = format!(
            "UPDATE tw_runs SET state = {}, executor_address = COALESCE(?, executor_address), \
             trigger_code = ?, trigger_msg = ?, finished_at = ? \
             WHERE id = ? AND state{} AND handle_code = 0 AND owner_node = ?",
            state_literal(RunMove::TriggerFail.to()),
            state_in(RunMove::TriggerFail.from_states())
        );
        for failed in sorted {
            let q = Query::new(update.clone())
                .bind(failed.address.clone())
                .bind(failed.trigger_code)
                .bind(clip(Some(&failed.trigger_msg)))
                .bind(failed.at)
                .bind(failed.run_id)
                .bind(failed.node_id.as_str());
            ended.extend(Self::ended_one(&mut tx, q, failed.run_id).await?);
        }
        let ended = Self::write_follow_ups(&mut tx, ended, follow).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// The UPDATE that records one result, or changes nothing when the run is past it.
    fn complete_update(complete: &RunComplete) -> Query {
        // `planned` too for a callback's results: an executor may call back before the
        // dispatch batch is written.
        let mut q = Query::new("UPDATE tw_runs SET state = ");
        push_result_state(&mut q, complete.state);
        q.push(", handle_code = ?, handle_msg = ?, finished_at = ? WHERE id = ? AND state");
        q.push(&state_in(RunMove::Complete(complete.state).from_states()));
        q.bind(complete.handle_code)
            .bind(clip(complete.handle_msg.as_deref()))
            .bind(complete.at)
            .bind(complete.run_id)
    }

    /// Runs `end`, an UPDATE that ends run `run_id` or changes nothing, and reads the run
    /// back when it ended.
    pub(super) async fn ended_one(
        conn: &mut Conn<B>,
        end: Query,
        run_id: i64,
    ) -> Result<Vec<Run>, Error> {
        if B::execute(&mut *conn, end).await?.rows == 0 {
            return Ok(Vec::new());
        }
        let read =
            Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id = ?")).bind(run_id);
        convert(B::fetch_all::<RunRow>(conn, read).await?)
    }

    /// One attempt of [`RunLedger::runs_mark_misfired`].
    pub(super) async fn runs_mark_misfired_once(
        &self,
        misfired: &MarkMisfired,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        if misfired.run_ids.is_empty() {
            return Ok(Ended::default());
        }
        let mut tx = B::begin_write(&self.writes).await?;
        let unsent = Unsent {
            end: RunMove::Misfire,
            node_id: &misfired.node_id,
            run_ids: &misfired.run_ids,
            reason: &misfired.reason,
            at: misfired.at,
        };
        let done = end_unsent::<B>(&mut tx, unsent).await?;
        let ended = Self::write_follow_ups(&mut tx, done, follow).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// Writes what follows `ended`, the runs this transaction just ended: asks `follow` about
    /// each run whose job still exists, writes the runs it plans (a run of a job that is gone
    /// is skipped) and moves the job's next fire when it says so, if the job is still running
    /// and still where the planner saw it.
    async fn write_follow_ups(
        conn: &mut Conn<B>,
        ended: Vec<Run>,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        let job_ids: Vec<i64> = ended
            .iter()
            .map(|r| r.job_id)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        submissions::record_ends::<B>(&mut *conn, &ended, &job_ids).await?;
        // A workflow node's runs follow its rules (its retries, no child jobs).
        let node_rules = workflows::node_rules::<B>(&mut *conn, &ended).await?;
        // Only the jobs something can follow from are read (most are neither retried, nor
        // parents, nor waiting for their runs): a job that is not read plans nothing, as a
        // deleted one. A workflow node's job is read whatever its own rules.
        let node_jobs: BTreeSet<i64> = ended
            .iter()
            .filter(|r| node_rules.contains_key(&r.id))
            .map(|r| r.job_id)
            .collect();
        let (of_nodes, others): (Vec<i64>, Vec<i64>) =
            job_ids.iter().partition(|id| node_jobs.contains(id));
        let mut jobs: HashMap<i64, Job> = HashMap::with_capacity(job_ids.len());
        let every = format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id IN ");
        let followed = format!(
            "SELECT {JOB_COLUMNS} FROM tw_jobs WHERE {} AND id IN ",
            *CAN_FOLLOW
        );
        let reads = in_ids::<B>(&every, &of_nodes)
            .into_iter()
            .chain(in_ids::<B>(&followed, &others));
        for q in reads {
            for job in convert::<JobRow, Job>(B::fetch_all::<JobRow>(&mut *conn, q).await?)? {
                jobs.insert(job.id, job);
            }
        }
        let mut ids = Vec::new();
        // (retry, the run it retries): a retry of a workflow node's run runs for that node.
        let mut retries = Vec::new();
        let mut advanced_jobs = Vec::new();
        for run in &ended {
            // The job was deleted meanwhile: nothing follows.
            let Some(job) = jobs.get_mut(&run.job_id) else {
                continue;
            };
            let plan = match node_rules.get(&run.id) {
                Some(rules) => follow(run, &rules.apply(job)),
                None => follow(run, job),
            };
            for new in plan.runs {
                check_run_new(&new)?;
                let retry = new.trigger_type == TriggerType::Retry;
                if let Some(id) = Self::insert_id(&mut *conn, insert_run(new)).await? {
                    ids.push(id);
                    if retry {
                        retries.push((id, run.id));
                    }
                }
            }
            let Some(next) = plan.next_fire_at else {
                continue;
            };
            let q = match job.next_fire_at {
                Some(seen) => Query::new(
                    "UPDATE tw_jobs SET next_fire_at = ? WHERE id = ? AND status = 'running' \
                     AND next_fire_at = ?",
                )
                .bind(next)
                .bind(job.id)
                .bind(seen),
                None => Query::new(
                    "UPDATE tw_jobs SET next_fire_at = ? WHERE id = ? AND status = 'running' \
                     AND next_fire_at IS NULL",
                )
                .bind(next)
                .bind(job.id),
            };
            if B::execute(&mut *conn, q).await?.rows > 0 {
                // A later run of the same job in this batch sees where the job is now.
                job.next_fire_at = Some(next);
                advanced_jobs.push(job.id);
            }
        }
        workflows::link_retries::<B>(&mut *conn, &retries).await?;
        let mut follow_ups = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(chunk.iter().copied());
            follow_ups.extend(convert(B::fetch_all::<RunRow>(&mut *conn, read).await?)?);
        }
        follow_ups.sort_by_key(|r: &Run| (r.scheduled_at, r.id));
        Ok(Ended {
            runs: ended,
            follow_ups,
            advanced_jobs,
        })
    }
}

/// Runs of one node that end without being sent (see [`end_unsent`]).
pub(super) struct Unsent<'a> {
    /// [`RunMove::Misfire`] or [`RunMove::Skip`]: both apply to `planned` and `sending` runs.
    pub(super) end: RunMove,
    pub(super) node_id: &'a str,
    pub(super) run_ids: &'a [i64],
    /// Why, for operators (kept in `trigger_msg`).
    pub(super) reason: &'a str,
    pub(super) at: i64,
}

/// Ends the runs of `unsent` that are still in a state its move applies to and the node's, one
/// statement per chunk, and returns them as they are now.
pub(super) async fn end_unsent<B: Backend>(
    tx: &mut Conn<B>,
    unsent: Unsent<'_>,
) -> Result<Vec<Run>, Error> {
    let reason = clip(Some(unsent.reason));
    let mut done = Vec::new();
    for chunk in unsent.run_ids.chunks(ROWS_PER_STATEMENT) {
        // Lock the runs first, so that the ones read now are exactly those the update below
        // ends.
        let open: Vec<i64> = SqlStore::<B>::lock_runs(&mut *tx, chunk)
            .await?
            .into_iter()
            .filter(|&(_, state)| unsent.end.applies_to(state))
            .map(|(id, _)| id)
            .collect();
        if open.is_empty() {
            continue;
        }
        let mut q = Query::new(format!(
            "UPDATE tw_runs SET state = {}, trigger_msg = ",
            state_literal(unsent.end.to())
        ))
        .one_off();
        q.push_bind(reason.clone());
        q.push(", finished_at = ").push_bind(unsent.at);
        q.push(" WHERE ").push(B::KIND.state_beside_ids());
        q.push(&state_in(unsent.end.from_states()))
            .push(" AND owner_node = ")
            .push_bind(unsent.node_id);
        q.push(" AND id IN ");
        q.push_list(open.iter().copied());
        B::execute(&mut *tx, q).await?;
        let mut read =
            Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
        read.push_list(open.iter().copied());
        read.push(" AND ")
            .push(B::KIND.state_beside_ids())
            .push(&state_in(&[unsent.end.to()]))
            .push(" AND owner_node = ")
            .push_bind(unsent.node_id);
        done.extend(convert(B::fetch_all::<RunRow>(&mut *tx, read).await?)?);
    }
    Ok(done)
}
