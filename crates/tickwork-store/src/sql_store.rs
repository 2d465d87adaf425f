//! The one implementation of [`Store`], generic over the [`Backend`]: every statement is
//! written here once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::LazyLock;

use async_trait::async_trait;
use sqlx::Pool;
use tickwork_core::TriggerType;
use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::{RunMove, RunState};

use crate::error::{is_foreign_key_violation, is_retryable, is_unique_violation};
use crate::model::*;
use crate::rows::*;
use crate::sql::{Arg, Backend, Conn, Kind, Query, alarm_in, state_in, state_literal};
use crate::store::{
    AccountStore, AlarmStore, AuditStore, ClusterStore, GroupStore, JobStore, RunLedger,
    ScriptStore, Store,
};
use crate::{Error, StoreOptions};

/// Column limits, the same on every backend (they are MySQL's VARCHAR sizes).
const APP_NAME_MAX: usize = 64;
const TITLE_MAX: usize = 128;
const ADDRESS_MAX: usize = 255;
const JOB_KEY_MAX: usize = 128;
const DESCRIPTION_MAX: usize = 255;
const OWNER_MAX: usize = 64;
const SCHEDULE_CONF_MAX: usize = 255;
const TIME_ZONE_MAX: usize = 64;
const HANDLER_MAX: usize = 255;
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

/// How often a claim that lost a deadlock is tried again.
const CLAIM_RETRIES: u32 = 3;

/// `state` condition of the runs that call for an alarm ([`RunState::calls_for_alarm`]).
static ALARM_STATES: LazyLock<String> = LazyLock::new(|| {
    let states: Vec<RunState> = RunState::ALL
        .iter()
        .copied()
        .filter(|s| s.calls_for_alarm())
        .collect();
    state_in(&states)
});

/// `state` condition of the runs retention may delete: every final one.
static FINAL_STATES: LazyLock<String> = LazyLock::new(|| {
    let states: Vec<RunState> = RunState::ALL
        .iter()
        .copied()
        .filter(|s| s.is_final())
        .collect();
    state_in(&states)
});

/// `state` condition of the runs a dispatch record lands on: those it moves, and those an
/// early callback ended before it was written (which keep their state).
static DISPATCH_RECORD_STATES: LazyLock<String> = LazyLock::new(|| {
    let mut states = RunMove::Dispatch.from_states().to_vec();
    states.extend_from_slice(RunState::EARLY_RESULTS);
    state_in(&states)
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

/// The job columns a definition writes, in the order [`bind_spec`] binds them.
const SPEC_COLUMNS: &str = "group_id, description, owner, alarm_channels, schedule_type, \
     schedule_conf, time_zone, misfire_strategy, route_strategy, handler, params, \
     block_strategy, timeout_s, retry_count, retry_backoff_ms, child_job_ids, priority, \
     glue_type, glue_source";

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

/// A [`Store`] on one backend.
pub(crate) struct SqlStore<B: Backend> {
    pool: Pool<B::Db>,
    backend: PhantomData<B>,
}

// ---- validation ----

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

/// An executor access token travels in an HTTP header: 16 to 128 visible ASCII characters.
fn check_token(token: &str) -> Result<(), Error> {
    if !(16..=128).contains(&token.len()) || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::Invalid(
            "access_token must be 16 to 128 visible ascii characters".to_owned(),
        ));
    }
    Ok(())
}

/// Validates a group and joins its address list for storage.
fn group_fields(app_name: &str, title: &str, addresses: &[String]) -> Result<String, Error> {
    check_required("app_name", app_name, APP_NAME_MAX)?;
    check_len("title", title, TITLE_MAX)?;
    for a in addresses {
        check_required("address", a, ADDRESS_MAX)?;
        if a.contains(',') {
            return Err(Error::Invalid(format!("address {a:?} contains a comma")));
        }
    }
    let joined = addresses
        .iter()
        .map(|a| a.trim())
        .collect::<Vec<_>>()
        .join(",");
    check_bytes("addresses", &joined, TEXT_MAX_BYTES)?;
    Ok(joined)
}

fn check_spec(spec: &JobSpec) -> Result<(), Error> {
    check_len("description", &spec.description, DESCRIPTION_MAX)?;
    check_len("owner", &spec.owner, OWNER_MAX)?;
    check_bytes("alarm_channels", &spec.alarm_channels, TEXT_MAX_BYTES)?;
    check_len("schedule_conf", &spec.schedule_conf, SCHEDULE_CONF_MAX)?;
    check_required("time_zone", &spec.time_zone, TIME_ZONE_MAX)?;
    check_len("handler", &spec.handler, HANDLER_MAX)?;
    check_bytes("params", &spec.params, TEXT_MAX_BYTES)?;
    check_bytes("glue_source", &spec.glue_source, GLUE_MAX_BYTES)?;
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
        check_bytes("params", params, TEXT_MAX_BYTES)?;
    }
    Ok(())
}

/// The INSERT of a run outside the schedule. INSERT ... SELECT copies the job's fields in the
/// same statement, so a missing job writes nothing instead of an orphan run.
fn insert_run(run: RunNew) -> Query {
    Query::new(
        "INSERT INTO tw_runs (job_id, group_id, scheduled_at, trigger_type, attempt, \
         parent_run_id, executor_address, handler, params, shard_index, shard_total, state, \
         owner_node, priority, created_at) \
         SELECT id, group_id, ?, ?, ?, ?, ?, handler, COALESCE(?, params), ?, ?, ?, \
         ?, priority, ? FROM tw_jobs WHERE id = ?",
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
    .bind(run.job_id)
}

/// An operator's groups as stored: ids joined by commas.
fn group_ids_text(ids: &[i64]) -> Result<String, Error> {
    if let Some(id) = ids.iter().find(|&&id| id <= 0) {
        return Err(Error::Invalid(format!("group id {id} is not a group id")));
    }
    Ok(child_ids_text(ids))
}

/// Binds the definition columns in [`SPEC_COLUMNS`] order.
fn bind_spec(q: Query, spec: &JobSpec) -> Query {
    q.bind(spec.group_id)
        .bind(&spec.description)
        .bind(&spec.owner)
        .bind(&spec.alarm_channels)
        .bind(spec.schedule_type.as_str())
        .bind(&spec.schedule_conf)
        .bind(&spec.time_zone)
        .bind(spec.misfire_strategy.as_str())
        .bind(spec.route_strategy.as_str())
        .bind(spec.handler.trim())
        .bind(&spec.params)
        .bind(spec.block_strategy.as_str())
        .bind(spec.timeout_s)
        .bind(spec.retry_count)
        .bind(spec.retry_backoff_ms)
        .bind(child_ids_text(&spec.child_job_ids))
        .bind(spec.priority)
        .bind(spec.glue_type.as_str())
        .bind(&spec.glue_source)
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

/// The owners whose planned runs may be adopted (see `orphan_owners`).
struct Orphans {
    /// Owners without a recent heartbeat (or without a row: they left).
    dead: Vec<String>,
    /// Some planned run has no owner.
    unowned: bool,
}

/// One fire of a claim, before it is written.
struct NewFire {
    /// Index into the claimed jobs.
    job: usize,
    fire: PlannedFire,
}

impl<B: Backend> SqlStore<B> {
    /// One attempt of [`RunLedger::runs_mark_dispatched`].
    async fn runs_mark_dispatched_once(&self, batch: &[Dispatched]) -> Result<u64, Error> {
        if batch.is_empty() {
            return Ok(0);
        }
        for d in batch {
            check_required("executor address", &d.address, ADDRESS_MAX)?;
        }
        let mut changed = 0;
        let mut tx = B::begin_write(&self.pool).await?;
        // Four CASE arms of two binds and their text per row, plus the strings.
        let row_bytes =
            |d: &Dispatched| 160 + d.address.len() + d.trigger_msg.as_deref().map_or(0, str::len);
        for chunk in sized_chunks(batch, row_bytes) {
            let mut q = Query::new(format!(
                "UPDATE tw_runs SET state = CASE WHEN state{} THEN {} ELSE state END",
                state_in(RunMove::Dispatch.from_states()),
                state_literal(RunMove::Dispatch.to())
            ))
            .one_off();
            let id = |d: &Dispatched| d.run_id;
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
            changed += B::execute(&mut *tx, q).await?.rows;
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// One attempt of [`RunLedger::runs_complete`].
    async fn runs_complete_once(
        &self,
        batch: &[RunComplete],
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        if let Some(c) = batch.iter().find(|c| !c.state.is_result()) {
            return Err(Error::Invalid(format!("{} is not a result state", c.state)));
        }
        let mut seen = HashSet::new();
        let batch: Vec<&RunComplete> = batch.iter().filter(|c| seen.insert(c.run_id)).collect();
        if batch.is_empty() {
            return Ok(Ended::default());
        }
        let mut done = Vec::with_capacity(batch.len());
        let mut tx = B::begin_write(&self.pool).await?;
        // Four CASE arms (the state's with its kill choice) and the id, with their binds.
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
    async fn run_complete_once(
        &self,
        complete: &RunComplete,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        // `planned` too for a callback's results: an executor may call back before the
        // dispatch batch is written.
        let mut q = Query::new("UPDATE tw_runs SET state = ");
        push_result_state(&mut q, complete.state);
        q.push(", handle_code = ?, handle_msg = ?, finished_at = ? WHERE id = ? AND state");
        q.push(&state_in(RunMove::Complete(complete.state).from_states()));
        let q = q
            .bind(complete.handle_code)
            .bind(clip(complete.handle_msg.as_deref()))
            .bind(complete.at)
            .bind(complete.run_id);
        let mut tx = B::begin_write(&self.pool).await?;
        let ended = Self::ended_one(&mut tx, q, complete.run_id).await?;
        let ended = Self::write_follow_ups(&mut tx, ended, follow).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// One attempt of [`RunLedger::run_mark_trigger_failed`].
    async fn run_mark_trigger_failed_once(
        &self,
        failed: &TriggerFailed,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        let q = Query::new(format!(
            "UPDATE tw_runs SET state = {}, executor_address = COALESCE(?, executor_address), \
             trigger_code = ?, trigger_msg = ?, finished_at = ? \
             WHERE id = ? AND state{} AND handle_code = 0",
            state_literal(RunMove::TriggerFail.to()),
            state_in(RunMove::TriggerFail.from_states())
        ))
        .bind(failed.address.clone())
        .bind(failed.trigger_code)
        .bind(clip(Some(&failed.trigger_msg)))
        .bind(failed.at)
        .bind(failed.run_id);
        let mut tx = B::begin_write(&self.pool).await?;
        let ended = Self::ended_one(&mut tx, q, failed.run_id).await?;
        let ended = Self::write_follow_ups(&mut tx, ended, follow).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// Runs `end`, an UPDATE that ends run `run_id` or changes nothing, and reads the run
    /// back when it ended.
    async fn ended_one(conn: &mut Conn<B>, end: Query, run_id: i64) -> Result<Vec<Run>, Error> {
        if B::execute(&mut *conn, end).await?.rows == 0 {
            return Ok(Vec::new());
        }
        let read =
            Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id = ?")).bind(run_id);
        convert(B::fetch_all::<RunRow>(conn, read).await?)
    }

    /// One attempt of [`RunLedger::runs_mark_misfired`].
    async fn runs_mark_misfired_once(
        &self,
        misfired: &MarkMisfired,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        if misfired.run_ids.is_empty() {
            return Ok(Ended::default());
        }
        let reason = clip(Some(&misfired.reason));
        let mut done = Vec::new();
        let mut tx = B::begin_write(&self.pool).await?;
        for chunk in misfired.run_ids.chunks(ROWS_PER_STATEMENT) {
            // Lock the runs first, so that the planned ones read now are exactly those the
            // update below ends.
            let planned: Vec<i64> = Self::lock_runs(&mut tx, chunk)
                .await?
                .into_iter()
                .filter(|&(_, state)| RunMove::Misfire.applies_to(state))
                .map(|(id, _)| id)
                .collect();
            if planned.is_empty() {
                continue;
            }
            let mut q = Query::new(format!(
                "UPDATE tw_runs SET state = {}, trigger_msg = ",
                state_literal(RunMove::Misfire.to())
            ))
            .one_off();
            q.push_bind(reason.clone());
            q.push(", finished_at = ").push_bind(misfired.at);
            q.push(" WHERE ").push(B::KIND.state_beside_ids());
            q.push(&state_in(RunMove::Misfire.from_states()))
                .push(" AND owner_node = ")
                .push_bind(misfired.node_id.as_str());
            q.push(" AND id IN ");
            q.push_list(planned.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(planned.iter().copied());
            read.push(" AND ")
                .push(B::KIND.state_beside_ids())
                .push(&state_in(&[RunMove::Misfire.to()]))
                .push(" AND owner_node = ")
                .push_bind(misfired.node_id.as_str());
            done.extend(convert(B::fetch_all::<RunRow>(&mut *tx, read).await?)?);
        }
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
        let mut jobs: HashMap<i64, Job> = HashMap::with_capacity(job_ids.len());
        for chunk in job_ids.chunks(ROWS_PER_STATEMENT) {
            let mut q =
                Query::new(format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id IN ")).one_off();
            q.push_list(chunk.iter().copied());
            for job in convert::<JobRow, Job>(B::fetch_all::<JobRow>(&mut *conn, q).await?)? {
                jobs.insert(job.id, job);
            }
        }
        let mut ids = Vec::new();
        let mut advanced_jobs = Vec::new();
        for run in &ended {
            // The job was deleted meanwhile: nothing follows.
            let Some(job) = jobs.get_mut(&run.job_id) else {
                continue;
            };
            let plan = follow(run, job);
            for new in plan.runs {
                check_run_new(&new)?;
                if let Some(id) = Self::insert_id(&mut *conn, insert_run(new)).await? {
                    ids.push(id);
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

    /// Opens the pool and brings the schema up to date.
    pub(crate) async fn open(url: &str, options: &StoreOptions) -> Result<Self, Error> {
        let pool = B::open(url, options).await?;
        B::migrate(&pool).await?;
        Ok(SqlStore {
            pool,
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
        let mut conn = self.pool.acquire().await?;
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

    async fn job_in(conn: &mut Conn<B>, id: i64) -> Result<Job, Error> {
        let q = Query::new(format!("SELECT {JOB_COLUMNS} FROM tw_jobs WHERE id = ?")).bind(id);
        match B::fetch_optional::<JobRow>(conn, q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("job", id)),
        }
    }

    async fn run_find(&self, id: i64) -> Result<Option<Run>, Error> {
        let q = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id = ?")).bind(id);
        self.fetch_optional::<RunRow>(q)
            .await?
            .map(Run::try_from)
            .transpose()
    }

    /// One claim transaction (see [`JobStore::jobs_claim_due`]).
    async fn claim_once(
        &self,
        params: &ClaimParams,
        planner: &Planner<'_>,
    ) -> Result<ClaimResult, Error> {
        let horizon = params.now.saturating_add(params.lookahead_ms.max(0));
        let mut tx = B::begin_write(&self.pool).await?;
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
        Self::advance_jobs(&mut tx, &next, &last_fire).await?;
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
            result.runs.push(Run {
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
                state: RunState::Planned,
                trigger_code: 0,
                trigger_msg: None,
                handle_code: 0,
                handle_msg: None,
                alarm_status: AlarmStatus::Undecided,
                owner_node: Some(params.node_id.clone()),
                priority: job.spec.priority,
                created_at: params.now,
                dispatched_at: None,
                finished_at: None,
            });
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
        // Thirteen binds and their placeholders per row, plus the job's handler and params.
        let row_bytes = |f: &NewFire| {
            let spec = &jobs[f.job].spec;
            240 + spec.handler.len() + spec.params.len()
        };
        for chunk in sized_chunks(fires, row_bytes) {
            let wanted: HashSet<(i64, i64)> = chunk
                .iter()
                .map(|f| (jobs[f.job].id, f.fire.fire_key))
                .collect();
            // Without RETURNING (MySQL), tell our rows from older ones by what was there
            // before. Sound because only a claim writes a job's keyed runs, and it holds the
            // job's row lock, as this transaction does now: nobody else adds keys for these
            // jobs between the two reads.
            let existing: HashSet<(i64, i64)> = if B::KIND.has_returning() {
                HashSet::new()
            } else {
                Self::ledger_rows(conn, &wanted)
                    .await?
                    .into_iter()
                    .map(|(_, job, key)| (job, key))
                    .collect()
            };

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

            if B::KIND.has_returning() {
                q.push(" RETURNING id, job_id, fire_key");
                for (id, job, key) in B::fetch_all::<(i64, i64, i64)>(conn, q).await? {
                    ids.insert((job, key), id);
                }
            } else {
                B::execute(conn, q).await?;
                for (id, job, key) in Self::ledger_rows(conn, &wanted).await? {
                    if !existing.contains(&(job, key)) {
                        ids.insert((job, key), id);
                    }
                }
            }
        }
        Ok(ids)
    }

    /// The ledger rows (id, job, key) among `wanted`, found through the (job_id, fire_key)
    /// index: the jobs' rows within the keys' span, then filtered exactly.
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

    /// Moves each claimed job to its next fire (stopping it at `None`) and records its last
    /// planned fire, with one batched UPDATE per chunk. Leaves `version` and `updated_at`
    /// alone: scheduling is not an edit.
    async fn advance_jobs(
        conn: &mut Conn<B>,
        next: &[(i64, Option<i64>)],
        last_fire: &HashMap<i64, i64>,
    ) -> Result<(), Error> {
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
            q.push(" WHERE id IN ");
            q.push_list(chunk.iter().map(|r| r.0));
            B::execute(conn, q).await?;
        }
        Ok(())
    }

    /// Who may hold orphaned planned runs: the owners of planned runs, other than
    /// `params.node_id`, without a heartbeat since `params.dead_before`, and whether some
    /// planned run has no owner at all. `None`: nobody. The owners are found by walking the
    /// `(state, owner_node)` index one owner at a time, a few probes for a few nodes, where
    /// one scan would visit every planned run of every live node at each adoption round.
    async fn orphan_owners(&self, params: &AdoptParams) -> Result<Option<Orphans>, Error> {
        let mut conn = self.pool.acquire().await?;
        // One state (`planned`): the walk below relies on an equality on the index's first
        // column.
        let adoptable = state_in(RunMove::Adopt.from_states());
        let unowned = Query::new(format!(
            "SELECT id FROM tw_runs WHERE state{adoptable} AND owner_node IS NULL LIMIT 1"
        ));
        let unowned = B::fetch_optional::<(i64,)>(&mut *conn, unowned)
            .await?
            .is_some();
        let mut owners = Vec::new();
        let mut after = String::new();
        loop {
            let next = Query::new(format!(
                "SELECT owner_node FROM tw_runs WHERE state{adoptable} AND owner_node > ? \
                 ORDER BY owner_node LIMIT 1"
            ))
            .bind(after.as_str());
            let Some((owner,)) = B::fetch_optional::<(String,)>(&mut *conn, next).await? else {
                break;
            };
            after.clone_from(&owner);
            if owner != params.node_id {
                owners.push(owner);
            }
        }
        if !owners.is_empty() {
            let mut live = Query::new("SELECT id FROM tw_nodes WHERE heartbeat_at >= ? AND id IN ")
                .bind(params.dead_before)
                .one_off();
            live.push_list(owners.iter().map(String::as_str));
            let live: HashSet<String> = B::fetch_all::<(String,)>(&mut *conn, live)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            owners.retain(|o| !live.contains(o));
        }
        Ok((unowned || !owners.is_empty()).then_some(Orphans {
            dead: owners,
            unowned,
        }))
    }

    /// Locks the runs `ids` by primary key and returns their (id, state).
    ///
    /// The state is not part of the lock's WHERE: InnoDB could then scan the state index,
    /// and under READ COMMITTED a locking scan there misses a row whose state another
    /// transaction is changing. And on MariaDB (seen on 10.11) even a locking read by primary
    /// key that had to wait for another transaction's row locks can come back without those
    /// rows: the result is compared with a plain read of the same rows, and the lock taken
    /// again until both agree.
    async fn lock_runs(conn: &mut Conn<B>, ids: &[i64]) -> Result<Vec<(i64, RunState)>, Error> {
        const TRIES: usize = 10;
        for _ in 0..TRIES {
            let mut lock = Query::new("SELECT id, state FROM tw_runs WHERE id IN ").one_off();
            lock.push_list(ids.iter().copied());
            lock.push(B::KIND.for_update());
            let locked = B::fetch_all::<(i64, String)>(conn, lock)
                .await?
                .into_iter()
                .map(|(id, state)| Ok((id, parse::<RunState>("state", &state)?)))
                .collect::<Result<Vec<_>, Error>>()?;
            if B::KIND != Kind::MySql || locked.len() == ids.len() {
                return Ok(locked);
            }
            let mut plain = Query::new("SELECT id FROM tw_runs WHERE id IN ").one_off();
            plain.push_list(ids.iter().copied());
            // Rows only ever go (deleted with their job), so equal counts mean equal sets.
            if B::fetch_all::<(i64,)>(conn, plain).await?.len() == locked.len() {
                return Ok(locked);
            }
            tracing::debug!(
                locked = locked.len(),
                wanted = ids.len(),
                "a locking read came back short; locking again"
            );
        }
        Err(Error::Conflict(
            "the runs kept changing while being locked; try again".to_owned(),
        ))
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

    /// The WHERE clause of a run listing.
    fn run_filter(filter: &RunFilter) -> Query {
        let mut q = Query::new(" WHERE 1 = 1");
        if let Some(job) = filter.job_id {
            q.push(" AND job_id = ").push_bind(job);
        }
        if let Some(group) = filter.group_id {
            q.push(" AND group_id = ").push_bind(group);
        }
        if let Some(state) = filter.state {
            q.push(" AND state = ").push_bind(state.as_str());
        }
        push_range(&mut q, "scheduled_at", filter.range);
        q
    }

    /// The ids of the jobs whose alarm channels list `name`.
    async fn jobs_using_channel(conn: &mut Conn<B>, name: &str) -> Result<Vec<i64>, Error> {
        // LIKE narrows the scan; the exact match is decided on the split list.
        let q = Query::new(
            "SELECT id, alarm_channels FROM tw_jobs WHERE LOWER(alarm_channels) LIKE ? \
             ESCAPE '!' ORDER BY id",
        )
        .bind(contains_pattern(name));
        Ok(B::fetch_all::<(i64, String)>(conn, q)
            .await?
            .into_iter()
            .filter(|(_, list)| split_list(list).any(|n| n == name))
            .map(|(id, _)| id)
            .collect())
    }

    async fn channel_in(conn: &mut Conn<B>, id: i64) -> Result<AlarmChannel, Error> {
        let q = Query::new(format!(
            "SELECT {ALARM_CHANNEL_COLUMNS} FROM tw_alarm_channels WHERE id = ?"
        ))
        .bind(id);
        match B::fetch_optional::<AlarmChannelRow>(conn, q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("alarm channel", id)),
        }
    }
}

/// Validates a channel's name and config.
fn check_channel(name: &str, config: &str) -> Result<(), Error> {
    check_required("name", name, CHANNEL_NAME_MAX)?;
    if name.contains(',') || name.trim() != name {
        return Err(Error::Invalid(format!(
            "name {name:?} must not contain a comma or surrounding spaces"
        )));
    }
    check_bytes("config", config, TEXT_MAX_BYTES)
}

fn in_use(name: &str, jobs: &[i64]) -> Error {
    let ids: Vec<String> = jobs.iter().map(i64::to_string).collect();
    Error::Conflict(format!(
        "alarm channel {name:?} is used by job(s) {}",
        ids.join(", ")
    ))
}

#[async_trait]
impl<B: Backend> Store for SqlStore<B> {
    fn backend(&self) -> &'static str {
        B::KIND.name()
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl<B: Backend> GroupStore for SqlStore<B> {
    async fn group_create(&self, group: GroupNew) -> Result<Group, Error> {
        let addresses = group_fields(&group.app_name, &group.title, &group.addresses)?;
        let app_name = group.app_name.trim().to_owned();
        let q = Query::new(
            "INSERT INTO tw_groups (app_name, title, address_mode, addresses, created_at, \
             updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&app_name)
        .bind(&group.title)
        .bind(group.address_mode.as_str())
        .bind(&addresses)
        .bind(group.now)
        .bind(group.now);
        let mut conn = self.pool.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                unique_or(e, || {
                    Error::Conflict(format!("app_name {app_name:?} is taken"))
                })
            })?
            .ok_or_else(|| Error::corrupt("the group insert wrote no row".to_owned()))?;
        Ok(Group {
            id,
            app_name,
            title: group.title,
            address_mode: group.address_mode,
            addresses: split_list(&addresses).map(str::to_owned).collect(),
            access_token: None,
            created_at: group.now,
            updated_at: group.now,
        })
    }

    async fn group_update(&self, group: GroupUpdate) -> Result<Group, Error> {
        let addresses = group_fields(&group.app_name, &group.title, &group.addresses)?;
        let app_name = group.app_name.trim().to_owned();
        let q = Query::new(
            "UPDATE tw_groups SET app_name = ?, title = ?, address_mode = ?, addresses = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(&app_name)
        .bind(&group.title)
        .bind(group.address_mode.as_str())
        .bind(addresses)
        .bind(group.now)
        .bind(group.id);
        let changed = self.execute(q).await.map_err(|e| {
            unique_or(e, || {
                Error::Conflict(format!("app_name {app_name:?} is taken"))
            })
        })?;
        if changed == 0 {
            return Err(Error::not_found("group", group.id));
        }
        self.group_get(group.id).await
    }

    async fn group_delete(&self, id: i64) -> Result<(), Error> {
        let q = Query::new("DELETE FROM tw_groups WHERE id = ?").bind(id);
        let deleted = self.execute(q).await.map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::Conflict(format!("group {id} still has jobs"))
            } else {
                Error::Database(e)
            }
        })?;
        if deleted == 0 {
            return Err(Error::not_found("group", id));
        }
        Ok(())
    }

    async fn group_get(&self, id: i64) -> Result<Group, Error> {
        let q = Query::new(format!(
            "SELECT {GROUP_COLUMNS} FROM tw_groups WHERE id = ?"
        ))
        .bind(id);
        match self.fetch_optional::<GroupRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("group", id)),
        }
    }

    async fn group_get_by_app_name(&self, app_name: &str) -> Result<Group, Error> {
        let q = Query::new(format!(
            "SELECT {GROUP_COLUMNS} FROM tw_groups WHERE app_name = ?"
        ))
        .bind(app_name);
        match self.fetch_optional::<GroupRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("group", app_name)),
        }
    }

    async fn groups_list(&self) -> Result<Vec<Group>, Error> {
        let q = Query::new(format!("SELECT {GROUP_COLUMNS} FROM tw_groups ORDER BY id"));
        convert(self.fetch_all::<GroupRow>(q).await?)
    }

    async fn group_set_token(&self, set: GroupTokenSet) -> Result<Group, Error> {
        if let Some(t) = &set.token {
            check_token(t)?;
        }
        let q = Query::new("UPDATE tw_groups SET access_token = ?, updated_at = ? WHERE id = ?")
            .bind(set.token.clone())
            .bind(set.now)
            .bind(set.id);
        // No row changed is either no such group (the read says so) or, on MySQL, the same
        // values again.
        self.execute(q).await?;
        self.group_get(set.id).await
    }

    async fn registry_heartbeat(&self, beat: RegistryBeat) -> Result<(), Error> {
        check_required("app_name", &beat.app_name, APP_NAME_MAX)?;
        check_required("address", &beat.address, ADDRESS_MAX)?;
        let mut q =
            Query::new("INSERT INTO tw_registry (app_name, address, updated_at) VALUES (?, ?, ?)")
                .bind(beat.app_name.trim())
                .bind(beat.address.trim())
                .bind(beat.now);
        q.push(&B::KIND.on_conflict_update("app_name, address", &["updated_at"]));
        self.execute(q).await?;
        Ok(())
    }

    async fn registry_remove(&self, key: RegistryKey) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_registry WHERE app_name = ? AND address = ?")
            .bind(key.app_name.trim())
            .bind(key.address.trim());
        Ok(self.execute(q).await? > 0)
    }

    async fn registry_sweep(&self, older_than: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_registry WHERE updated_at < ?").bind(older_than);
        Ok(self.execute(q).await?)
    }

    async fn registry_live(&self, query: LiveQuery) -> Result<Vec<String>, Error> {
        let q =
            Query::new("SELECT address FROM tw_registry WHERE app_name = ? AND updated_at >= ?")
                .bind(query.app_name.trim())
                .bind(query.alive_since);
        // Sorted here, not in SQL: PostgreSQL orders text by the database's locale, the others
        // by bytes, and routing (first, last, round robin) must see one order everywhere.
        let mut addresses: Vec<String> = self
            .fetch_all::<(String,)>(q)
            .await?
            .into_iter()
            .map(|(a,)| a)
            .collect();
        addresses.sort_unstable();
        Ok(addresses)
    }

    async fn registry_list(&self) -> Result<Vec<RegistryEntry>, Error> {
        let q = Query::new(format!("SELECT {REGISTRY_COLUMNS} FROM tw_registry"));
        let mut entries: Vec<RegistryEntry> = self
            .fetch_all::<RegistryRow>(q)
            .await?
            .into_iter()
            .map(RegistryEntry::from)
            .collect();
        entries.sort_unstable_by(|a, b| (&a.app_name, &a.address).cmp(&(&b.app_name, &b.address)));
        Ok(entries)
    }
}

#[async_trait]
impl<B: Backend> JobStore for SqlStore<B> {
    async fn job_create(&self, job: JobNew) -> Result<Job, Error> {
        let key = job.key.trim().to_owned();
        check_required("job key", &key, JOB_KEY_MAX)?;
        check_spec(&job.spec)?;
        let q = Query::new(format!(
            "INSERT INTO tw_jobs (job_key, {SPEC_COLUMNS}, glue_updated_at, status, \
             next_fire_at, last_fire_at, version, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)"
        ))
        .bind(&key);
        let q = bind_spec(q, &job.spec)
            .bind(job.now)
            .bind(job.status.as_str())
            .bind(job.next_fire_at)
            .bind(None::<i64>)
            .bind(job.now)
            .bind(job.now);
        let mut conn = self.pool.acquire().await?;
        let group_id = job.spec.group_id;
        let id = Self::insert_id(&mut conn, q)
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
            glue_updated_at: job.now,
            version: 1,
            created_at: job.now,
            updated_at: job.now,
        })
    }

    async fn job_update(&self, update: JobUpdate) -> Result<Job, Error> {
        check_spec(&update.spec)?;
        let id = update.id;
        let mut tx = B::begin_write(&self.pool).await?;
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
        let mut tx = B::begin_write(&self.pool).await?;
        B::execute(
            &mut *tx,
            Query::new(
                "DELETE FROM tw_alarm_deliveries WHERE run_id IN \
                 (SELECT id FROM tw_runs WHERE job_id = ?)",
            )
            .bind(id),
        )
        .await?;
        B::execute(
            &mut *tx,
            Query::new("DELETE FROM tw_runs WHERE job_id = ?").bind(id),
        )
        .await?;
        B::execute(
            &mut *tx,
            Query::new("DELETE FROM tw_script_versions WHERE job_id = ?").bind(id),
        )
        .await?;
        let done = B::execute(
            &mut *tx,
            Query::new("DELETE FROM tw_jobs WHERE id = ?").bind(id),
        )
        .await?;
        if done.rows == 0 {
            return Err(Error::not_found("job", id));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn job_get(&self, id: i64) -> Result<Job, Error> {
        let mut conn = self.pool.acquire().await?;
        Self::job_in(&mut conn, id).await
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
        q.push(" ORDER BY id LIMIT ").push_bind(limit);
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

#[async_trait]
impl<B: Backend> RunLedger for SqlStore<B> {
    async fn run_insert(&self, run: RunNew) -> Result<Run, Error> {
        check_run_new(&run)?;
        let job_id = run.job_id;
        let id = {
            let mut conn = self.pool.acquire().await?;
            Self::insert_id(&mut conn, insert_run(run)).await?
        };
        let Some(id) = id else {
            return Err(Error::not_found("job", job_id));
        };
        self.run_get(id).await
    }

    async fn runs_mark_dispatched(&self, batch: &[Dispatched]) -> Result<u64, Error> {
        retry_deadlocks(|| self.runs_mark_dispatched_once(batch)).await
    }

    async fn run_mark_trigger_failed(
        &self,
        failed: TriggerFailed,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        if let Some(address) = &failed.address {
            check_len("executor address", address, ADDRESS_MAX)?;
        }
        retry_deadlocks(|| self.run_mark_trigger_failed_once(&failed, follow)).await
    }

    async fn run_set_shard(&self, shard: RunShard) -> Result<(), Error> {
        if !(0..shard.total.max(0)).contains(&shard.index) {
            return Err(Error::Invalid(format!(
                "shard {}/{} is out of range",
                shard.index, shard.total
            )));
        }
        let q = Query::new("UPDATE tw_runs SET shard_index = ?, shard_total = ? WHERE id = ?")
            .bind(shard.index)
            .bind(shard.total)
            .bind(shard.run_id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("run", shard.run_id));
        }
        Ok(())
    }

    async fn run_skip(&self, skip: RunSkip) -> Result<Option<Run>, Error> {
        let q = Query::new(format!(
            "UPDATE tw_runs SET state = {}, trigger_msg = ?, finished_at = ? \
             WHERE id = ? AND state{}",
            state_literal(RunMove::Skip.to()),
            state_in(RunMove::Skip.from_states())
        ))
        .bind(clip(Some(&skip.reason)))
        .bind(skip.at)
        .bind(skip.run_id);
        if self.execute(q).await? == 0 {
            return Ok(None);
        }
        self.run_find(skip.run_id).await
    }

    async fn run_complete(
        &self,
        complete: RunComplete,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        if !complete.state.is_result() {
            return Err(Error::Invalid(format!(
                "{} is not a result state",
                complete.state
            )));
        }
        retry_deadlocks(|| self.run_complete_once(&complete, follow)).await
    }

    async fn runs_complete(
        &self,
        batch: &[RunComplete],
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        retry_deadlocks(|| self.runs_complete_once(batch, follow)).await
    }

    async fn run_kill_intent(&self, intent: RunKillIntent) -> Result<bool, Error> {
        let q = Query::new(format!(
            "UPDATE tw_runs SET kill_requested_at = ? WHERE id = ? AND state{}",
            state_in(RunMove::KillIntent.from_states())
        ))
        .bind(intent.at)
        .bind(intent.run_id);
        Ok(self.execute(q).await? > 0)
    }

    async fn run_get(&self, id: i64) -> Result<Run, Error> {
        self.run_find(id)
            .await?
            .ok_or_else(|| Error::not_found("run", id))
    }

    async fn runs_list(&self, filter: RunFilter) -> Result<Paged<Run>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let clause = Self::run_filter(&filter);
        let total = self.count("tw_runs", &clause).await?;
        let mut q = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs"));
        q.append(&clause);
        q.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        q.push(" OFFSET ").push_bind(offset);
        let items = convert(self.fetch_all::<RunRow>(q).await?)?;
        Ok(Paged { items, total })
    }

    async fn runs_planned_owned_by(&self, node: &str) -> Result<Vec<Run>, Error> {
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE state = 'planned' AND owner_node = ? \
             ORDER BY scheduled_at, id"
        ))
        .bind(node);
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn runs_state_counts(&self, range: TimeRange) -> Result<Vec<(RunState, u64)>, Error> {
        let mut q = Query::new("SELECT state, COUNT(*) FROM tw_runs WHERE 1 = 1");
        push_range(&mut q, "scheduled_at", range);
        q.push(" GROUP BY state");
        let mut counts = Vec::new();
        for (state, n) in self.fetch_all::<(String, i64)>(q).await? {
            let state: RunState = state
                .parse()
                .map_err(|_| Error::corrupt(format!("state holds the unknown value {state:?}")))?;
            counts.push((state, n.max(0) as u64));
        }
        counts.sort_unstable();
        Ok(counts)
    }

    async fn runs_adopt_orphaned(&self, params: AdoptParams) -> Result<Vec<Run>, Error> {
        check_required("node id", &params.node_id, NODE_ID_MAX)?;
        if params.limit == 0 {
            return Ok(Vec::new());
        }
        let Some(orphans) = self.orphan_owners(&params).await? else {
            return Ok(Vec::new());
        };
        let mut tx = B::begin_write(&self.pool).await?;
        // Lock first, then move: a run another adopter holds is skipped, and one it already
        // moved has a live owner by the time this scan reaches it. The scan visits only the
        // runs of the owners found dead above; liveness is checked again here, under the lock.
        let adoptable = state_in(RunMove::Adopt.from_states());
        let mut select = Query::new(format!(
            "SELECT id FROM tw_runs WHERE state{adoptable} AND ("
        ));
        if orphans.unowned {
            select.push("owner_node IS NULL");
        }
        if !orphans.dead.is_empty() {
            if orphans.unowned {
                select.push(" OR ");
            }
            select.push("(owner_node IN ");
            select.push_list(orphans.dead.iter().map(String::as_str));
            select.push(
                " AND NOT EXISTS (SELECT 1 FROM tw_nodes \
                 WHERE tw_nodes.id = tw_runs.owner_node AND tw_nodes.heartbeat_at >= ",
            );
            select.push_bind(params.dead_before);
            select.push("))");
        }
        select.push(") ORDER BY scheduled_at, id LIMIT ");
        select.push_bind(i64::from(params.limit));
        select.push(B::KIND.skip_locked());
        let select = select.one_off();
        let ids: Vec<i64> = B::fetch_all::<(i64,)>(&mut *tx, select)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let mut runs = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("UPDATE tw_runs SET owner_node = ").one_off();
            q.push_bind(params.node_id.as_str());
            q.push(" WHERE ").push(B::KIND.state_beside_ids());
            q.push(&adoptable).push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(chunk.iter().copied());
            read.push(" AND ")
                .push(B::KIND.state_beside_ids())
                .push(&adoptable)
                .push(" AND owner_node = ")
                .push_bind(params.node_id.as_str());
            for row in B::fetch_all::<RunRow>(&mut *tx, read).await? {
                runs.push(Run::try_from(row)?);
            }
        }
        tx.commit().await?;
        runs.sort_by_key(|r| (r.scheduled_at, r.id));
        Ok(runs)
    }

    async fn runs_still_owned(&self, query: OwnedRuns) -> Result<Vec<i64>, Error> {
        let mut owned = Vec::with_capacity(query.run_ids.len());
        for chunk in query.run_ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("SELECT id FROM tw_runs WHERE ").one_off();
            q.push(B::KIND.state_beside_ids());
            q.push(" = 'planned' AND owner_node = ");
            q.push_bind(query.node_id.as_str());
            q.push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            owned.extend(
                self.fetch_all::<(i64,)>(q)
                    .await?
                    .into_iter()
                    .map(|(id,)| id),
            );
        }
        owned.sort_unstable();
        Ok(owned)
    }

    async fn runs_groups(&self, run_ids: &[i64]) -> Result<Vec<RunGroup>, Error> {
        let mut out = Vec::with_capacity(run_ids.len());
        for chunk in run_ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("SELECT id, group_id FROM tw_runs WHERE id IN ").one_off();
            q.push_list(chunk.iter().copied());
            out.extend(
                self.fetch_all::<(i64, i64)>(q)
                    .await?
                    .into_iter()
                    .map(|(run_id, group_id)| RunGroup { run_id, group_id }),
            );
        }
        Ok(out)
    }

    async fn runs_mark_misfired(
        &self,
        misfired: MarkMisfired,
        follow: &FollowUps<'_>,
    ) -> Result<Ended, Error> {
        retry_deadlocks(|| self.runs_mark_misfired_once(&misfired, follow)).await
    }

    async fn run_catch_up(&self, catch_up: CatchUp) -> Result<Option<Run>, Error> {
        let mut tx = B::begin_write(&self.pool).await?;
        // The job's row lock orders this against a claim of the same job, which may write a
        // catch-up of its own (see `skip_second_catch_ups`).
        let lock = Query::new(format!(
            "SELECT id FROM tw_jobs WHERE id = (SELECT job_id FROM tw_runs WHERE id = ?){}",
            B::KIND.for_update()
        ))
        .bind(catch_up.run_id);
        B::fetch_all::<(i64,)>(&mut *tx, lock).await?;
        let find = Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id = ?"))
            .bind(catch_up.run_id);
        let Some(run) = B::fetch_all::<RunRow>(&mut *tx, find).await?.pop() else {
            tx.commit().await?;
            return Ok(None);
        };
        let run = Run::try_from(run)?;
        if !RunMove::CatchUp.applies_to(run.state)
            || run.owner_node.as_deref() != Some(catch_up.node_id.as_str())
        {
            tx.commit().await?;
            return Ok(None);
        }
        if run.trigger_type != TriggerType::Misfire {
            let exists = Query::new(
                "SELECT id FROM tw_runs WHERE job_id = ? AND trigger_type = ? \
                 AND scheduled_at >= ? LIMIT 1",
            )
            .bind(run.job_id)
            .bind(TriggerType::Misfire.as_str())
            .bind(catch_up.late_since);
            if !B::fetch_all::<(i64,)>(&mut *tx, exists).await?.is_empty() {
                // The job has its catch-up already: this run stays as it is, to be misfired.
                tx.commit().await?;
                return Ok(Some(run));
            }
        }
        let q = Query::new(format!(
            "UPDATE tw_runs SET scheduled_at = ?, trigger_type = ? \
             WHERE id = ? AND state{} AND owner_node = ?",
            state_in(RunMove::CatchUp.from_states())
        ))
        .bind(catch_up.at)
        .bind(TriggerType::Misfire.as_str())
        .bind(catch_up.run_id)
        .bind(catch_up.node_id.as_str());
        B::execute(&mut *tx, q).await?;
        tx.commit().await?;
        Ok(Some(Run {
            scheduled_at: catch_up.at,
            trigger_type: TriggerType::Misfire,
            ..run
        }))
    }

    async fn runs_find_lost(&self, query: LostQuery) -> Result<Vec<Run>, Error> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        // As XXL-JOB: the executor counts as gone when no registry row under its address has
        // beaten lately, whatever app it registered for.
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE state{} AND dispatched_at < ? \
             AND NOT EXISTS (SELECT 1 FROM tw_registry \
             WHERE tw_registry.address = tw_runs.executor_address \
             AND tw_registry.updated_at >= ?) ORDER BY dispatched_at, id LIMIT ?",
            state_in(RunMove::Complete(RunState::Lost).from_states())
        ))
        .bind(query.dispatched_before)
        .bind(query.alive_since)
        .bind(i64::from(query.limit));
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn runs_purge(&self, purge: RunPurge) -> Result<u64, Error> {
        if purge.limit == 0 {
            return Ok(0);
        }
        // Select, then delete by id: portable (MySQL refuses LIMIT in an IN subquery, SQLite
        // has no DELETE ... LIMIT) and each batch stays one short statement.
        let select = Query::new(format!(
            "SELECT id FROM tw_runs WHERE scheduled_at < ? AND state{} \
             ORDER BY scheduled_at, id LIMIT ?",
            *FINAL_STATES
        ))
        .bind(purge.before)
        .bind(i64::from(purge.limit));
        let ids: Vec<i64> = self
            .fetch_all::<(i64,)>(select)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let mut deleted = 0;
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("DELETE FROM tw_alarm_deliveries WHERE run_id IN ").one_off();
            q.push_list(chunk.iter().copied());
            self.execute(q).await?;
            let mut q = Query::new("DELETE FROM tw_runs WHERE id IN ").one_off();
            q.push_list(chunk.iter().copied());
            deleted += self.execute(q).await?;
        }
        Ok(deleted)
    }

    async fn reports_purge(&self, before: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_run_reports WHERE day < ?").bind(before);
        Ok(self.execute(q).await?)
    }

    async fn report_upsert(&self, report: RunReport) -> Result<(), Error> {
        let mut q = Query::new(format!(
            "INSERT INTO tw_run_reports ({REPORT_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        ))
        .bind(report.day)
        .bind(report.running)
        .bind(report.succeeded)
        .bind(report.failed)
        .bind(report.updated_at);
        q.push(&B::KIND.on_conflict_update(
            "day",
            &[
                "running_count",
                "succeeded_count",
                "failed_count",
                "updated_at",
            ],
        ));
        self.execute(q).await?;
        Ok(())
    }

    async fn reports_list(&self, range: TimeRange) -> Result<Vec<RunReport>, Error> {
        let mut q = Query::new(format!(
            "SELECT {REPORT_COLUMNS} FROM tw_run_reports WHERE 1 = 1"
        ));
        push_range(&mut q, "day", range);
        q.push(" ORDER BY day");
        Ok(self
            .fetch_all::<ReportRow>(q)
            .await?
            .into_iter()
            .map(RunReport::from)
            .collect())
    }

    async fn runs_clear(&self, clear: RunClear) -> Result<u64, Error> {
        let mut deleted = 0;
        loop {
            // In batches, as retention does: each statement stays short on a big ledger.
            let mut select = Query::new(format!(
                "SELECT id FROM tw_runs WHERE scheduled_at < ? AND state{}",
                *FINAL_STATES
            ))
            .bind(clear.before);
            if let Some(job) = clear.job_id {
                select.push(" AND job_id = ").push_bind(job);
            }
            if let Some(group) = clear.group_id {
                select.push(" AND group_id = ").push_bind(group);
            }
            select
                .push(" ORDER BY id LIMIT ")
                .push_bind(ROWS_PER_STATEMENT as i64);
            let ids: Vec<i64> = self
                .fetch_all::<(i64,)>(select)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            if ids.is_empty() {
                return Ok(deleted);
            }
            let mut q = Query::new("DELETE FROM tw_runs WHERE id IN ").one_off();
            q.push_list(ids.iter().copied());
            deleted += self.execute(q).await?;
            if ids.len() < ROWS_PER_STATEMENT {
                return Ok(deleted);
            }
        }
    }
}

#[async_trait]
impl<B: Backend> ClusterStore for SqlStore<B> {
    async fn node_heartbeat(&self, beat: NodeBeat) -> Result<(), Error> {
        check_required("node id", &beat.id, NODE_ID_MAX)?;
        check_len("node address", &beat.address, ADDRESS_MAX)?;
        let mut q = Query::new(format!(
            "INSERT INTO tw_nodes ({NODE_COLUMNS}) VALUES (?, ?, ?, ?)"
        ))
        .bind(&beat.id)
        .bind(&beat.address)
        .bind(beat.now)
        .bind(beat.now);
        q.push(&B::KIND.on_conflict_update("id", &["address", "heartbeat_at"]));
        self.execute(q).await?;
        Ok(())
    }

    async fn nodes_list(&self) -> Result<Vec<Node>, Error> {
        let q = Query::new(format!("SELECT {NODE_COLUMNS} FROM tw_nodes"));
        let mut nodes: Vec<Node> = self
            .fetch_all::<NodeRow>(q)
            .await?
            .into_iter()
            .map(Node::from)
            .collect();
        nodes.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        Ok(nodes)
    }

    async fn node_leave(&self, node_id: &str) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_nodes WHERE id = ?").bind(node_id);
        Ok(self.execute(q).await? > 0)
    }

    async fn nodes_sweep(&self, older_than: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_nodes WHERE heartbeat_at < ?").bind(older_than);
        Ok(self.execute(q).await?)
    }

    async fn lease_acquire(&self, request: LeaseRequest) -> Result<bool, Error> {
        check_required("lease name", &request.name, LEASE_NAME_MAX)?;
        check_required("node id", &request.node, NODE_ID_MAX)?;
        if request.ttl_ms <= 0 {
            return Err(Error::Invalid("lease ttl must be positive".to_owned()));
        }
        let expires_at = request.now.saturating_add(request.ttl_ms);
        // Two atomic statements, no transaction: the insert wins a free lease; otherwise the
        // conditional update renews our own or steals an expired one. Each database re-checks
        // the update's condition on the row's newest version, so two nodes cannot both win.
        let mut insert = Query::new(B::KIND.insert_or_skip());
        insert
            .push("tw_leases (name, holder, expires_at) VALUES (")
            .push_bind(request.name.as_str())
            .push(", ")
            .push_bind(request.node.as_str())
            .push(", ")
            .push_bind(expires_at)
            .push(")")
            .push(&B::KIND.on_conflict_skip("name"));
        if self.execute(insert).await? > 0 {
            return Ok(true);
        }
        let renew = Query::new(
            "UPDATE tw_leases SET holder = ?, expires_at = ? \
             WHERE name = ? AND (holder = ? OR expires_at <= ?)",
        )
        .bind(request.node.as_str())
        .bind(expires_at)
        .bind(request.name.as_str())
        .bind(request.node.as_str())
        .bind(request.now);
        Ok(self.execute(renew).await? > 0)
    }

    async fn lease_release(&self, key: LeaseKey) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_leases WHERE name = ? AND holder = ?")
            .bind(key.name)
            .bind(key.node);
        Ok(self.execute(q).await? > 0)
    }
}

#[async_trait]
impl<B: Backend> AlarmStore for SqlStore<B> {
    async fn runs_queue_alarms(&self, limit: u32) -> Result<Vec<Run>, Error> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut tx = B::begin_write(&self.pool).await?;
        let select = Query::new(format!(
            "SELECT id FROM tw_runs WHERE alarm_status{} AND state{} ORDER BY id LIMIT ?{}",
            alarm_in(AlarmStatus::sources_of(AlarmStatus::Queued)),
            *ALARM_STATES,
            B::KIND.skip_locked()
        ))
        .bind(i64::from(limit));
        let ids: Vec<i64> = B::fetch_all::<(i64,)>(&mut *tx, select)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let mut runs = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("UPDATE tw_runs SET alarm_status = ").one_off();
            q.push_bind(AlarmStatus::Queued.code());
            // `+ 0`: every new run is undecided, so an index on the column is no help next
            // to the ids (see `Kind::state_beside_ids`).
            q.push(" WHERE alarm_status + 0")
                .push(&alarm_in(AlarmStatus::sources_of(AlarmStatus::Queued)));
            q.push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read =
                Query::new(format!("SELECT {RUN_COLUMNS} FROM tw_runs WHERE id IN ")).one_off();
            read.push_list(chunk.iter().copied());
            for row in B::fetch_all::<RunRow>(&mut *tx, read).await? {
                runs.push(Run::try_from(row)?);
            }
        }
        tx.commit().await?;
        runs.sort_by_key(|r| r.id);
        Ok(runs)
    }

    async fn runs_awaiting_alarm(&self, limit: u32) -> Result<Vec<Run>, Error> {
        let q = Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM tw_runs WHERE alarm_status{} AND state{} \
             ORDER BY id LIMIT ?",
            alarm_in(&[AlarmStatus::Queued]),
            *ALARM_STATES
        ))
        .bind(i64::from(limit));
        convert(self.fetch_all::<RunRow>(q).await?)
    }

    async fn alarm_channel_create(&self, channel: AlarmChannelNew) -> Result<AlarmChannel, Error> {
        check_channel(&channel.name, &channel.config)?;
        let q = Query::new(
            "INSERT INTO tw_alarm_channels (name, kind, config, enabled, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&channel.name)
        .bind(channel.kind.as_str())
        .bind(&channel.config)
        .bind(i32::from(channel.enabled))
        .bind(channel.now)
        .bind(channel.now);
        let mut conn = self.pool.acquire().await?;
        let name = &channel.name;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                unique_or(e, || {
                    Error::Conflict(format!("alarm channel name {name:?} is taken"))
                })
            })?
            .ok_or_else(|| Error::corrupt("the channel insert wrote no row".to_owned()))?;
        Ok(AlarmChannel {
            id,
            name: channel.name,
            kind: channel.kind,
            config: channel.config,
            enabled: channel.enabled,
            created_at: channel.now,
            updated_at: channel.now,
        })
    }

    async fn alarm_channel_update(
        &self,
        channel: AlarmChannelUpdate,
    ) -> Result<AlarmChannel, Error> {
        check_channel(&channel.name, &channel.config)?;
        let mut tx = B::begin_write(&self.pool).await?;
        let old = Self::channel_in(&mut tx, channel.id).await?;
        if old.name != channel.name {
            let jobs = Self::jobs_using_channel(&mut tx, &old.name).await?;
            if !jobs.is_empty() {
                return Err(in_use(&old.name, &jobs));
            }
        }
        let name = &channel.name;
        let q = Query::new(
            "UPDATE tw_alarm_channels SET name = ?, kind = ?, config = ?, enabled = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(name)
        .bind(channel.kind.as_str())
        .bind(&channel.config)
        .bind(i32::from(channel.enabled))
        .bind(channel.now)
        .bind(channel.id);
        B::execute(&mut *tx, q).await.map_err(|e| {
            unique_or(e, || {
                Error::Conflict(format!("alarm channel name {name:?} is taken"))
            })
        })?;
        let updated = Self::channel_in(&mut tx, channel.id).await?;
        tx.commit().await?;
        Ok(updated)
    }

    async fn alarm_channel_delete(&self, id: i64, now: i64) -> Result<(), Error> {
        let mut tx = B::begin_write(&self.pool).await?;
        let channel = Self::channel_in(&mut tx, id).await?;
        let jobs = Self::jobs_using_channel(&mut tx, &channel.name).await?;
        if !jobs.is_empty() {
            return Err(in_use(&channel.name, &jobs));
        }
        let q = Query::new(
            "UPDATE tw_alarm_deliveries SET state = 'failed', last_error = ?, \
             claimed_by = NULL, claimed_until = NULL, updated_at = ? \
             WHERE channel_id = ? AND state = 'pending'",
        )
        .bind("the alarm channel was deleted")
        .bind(now)
        .bind(id);
        B::execute(&mut *tx, q).await?;
        B::execute(
            &mut *tx,
            Query::new("DELETE FROM tw_alarm_channels WHERE id = ?").bind(id),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn alarm_channel_get(&self, id: i64) -> Result<AlarmChannel, Error> {
        let mut conn = self.pool.acquire().await?;
        Self::channel_in(&mut conn, id).await
    }

    async fn alarm_channels_list(&self) -> Result<Vec<AlarmChannel>, Error> {
        let q = Query::new(format!(
            "SELECT {ALARM_CHANNEL_COLUMNS} FROM tw_alarm_channels ORDER BY id"
        ));
        convert(self.fetch_all::<AlarmChannelRow>(q).await?)
    }

    async fn alarm_deliveries_queue(&self, queue: AlarmDeliveriesQueue) -> Result<u64, Error> {
        if queue.runs.is_empty() {
            return Ok(0);
        }
        retry_deadlocks(|| async {
            let mut written = 0;
            let mut tx = B::begin_write(&self.pool).await?;
            for run in &queue.runs {
                let mut wanted = run.channel_ids.clone();
                wanted.sort_unstable();
                wanted.dedup();
                for &channel in &wanted {
                    // The channel's name and kind are copied, so the row still reads well
                    // after the channel is renamed or deleted.
                    let mut q = Query::new(B::KIND.insert_or_skip());
                    q.push(
                        "tw_alarm_deliveries (run_id, channel_id, channel_name, kind, state, \
                         attempts, next_attempt_at, created_at, updated_at) \
                         SELECT ?, id, name, kind, 'pending', 0, ?, ?, ? \
                         FROM tw_alarm_channels WHERE id = ?",
                    );
                    q = q
                        .bind(run.run_id)
                        .bind(queue.now)
                        .bind(queue.now)
                        .bind(queue.now)
                        .bind(channel);
                    q.push(&B::KIND.on_conflict_skip("run_id, channel_id"));
                    written += B::execute(&mut *tx, q).await?.rows;
                }
                let status = if wanted.is_empty() {
                    AlarmStatus::NotNeeded
                } else {
                    AlarmStatus::Delivering
                };
                let q = Query::new(format!(
                    "UPDATE tw_runs SET alarm_status = ? WHERE id = ? AND alarm_status{}",
                    alarm_in(AlarmStatus::sources_of(status))
                ))
                .bind(status.code())
                .bind(run.run_id);
                B::execute(&mut *tx, q).await?;
            }
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    async fn alarm_deliveries_claim_due(
        &self,
        claim: DeliveryClaim,
    ) -> Result<Vec<AlarmDelivery>, Error> {
        check_required("node id", &claim.node_id, NODE_ID_MAX)?;
        if claim.limit == 0 {
            return Ok(Vec::new());
        }
        if claim.hold_ms <= 0 {
            return Err(Error::Invalid("claim hold must be positive".to_owned()));
        }
        retry_deadlocks(|| async {
            let mut tx = B::begin_write(&self.pool).await?;
            let select = Query::new(format!(
                "SELECT id FROM tw_alarm_deliveries WHERE state = 'pending' \
                 AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?) \
                 ORDER BY next_attempt_at, id LIMIT ?{}",
                B::KIND.skip_locked()
            ))
            .bind(claim.now)
            .bind(claim.now)
            .bind(i64::from(claim.limit));
            let ids: Vec<i64> = B::fetch_all::<(i64,)>(&mut *tx, select)
                .await?
                .into_iter()
                .map(|(id,)| id)
                .collect();
            if ids.is_empty() {
                // Ended here, not by the drop: a dropped transaction is rolled back only when
                // its connection is next used, and until then InnoDB keeps the locks of the
                // rows this SELECT looked at, which the next claim would skip.
                tx.commit().await?;
                return Ok(Vec::new());
            }
            let mut q = Query::new("UPDATE tw_alarm_deliveries SET claimed_by = ").one_off();
            q.push_bind(claim.node_id.as_str());
            q.push(", claimed_until = ")
                .push_bind(claim.now.saturating_add(claim.hold_ms));
            q.push(" WHERE state = 'pending' AND id IN ");
            q.push_list(ids.iter().copied());
            B::execute(&mut *tx, q).await?;
            let mut read = Query::new(format!(
                "SELECT {DELIVERY_COLUMNS} FROM tw_alarm_deliveries WHERE claimed_by = "
            ))
            .one_off();
            read.push_bind(claim.node_id.as_str());
            read.push(" AND id IN ");
            read.push_list(ids.iter().copied());
            read.push(" ORDER BY next_attempt_at, id");
            let rows = convert(B::fetch_all::<DeliveryRow>(&mut *tx, read).await?)?;
            tx.commit().await?;
            Ok(rows)
        })
        .await
    }

    async fn alarm_delivery_finish(&self, finish: DeliveryFinish) -> Result<bool, Error> {
        let (state, next, error, sent_at) = match &finish.outcome {
            DeliveryOutcome::Sent => (DeliveryState::Sent, None, None, Some(finish.now)),
            DeliveryOutcome::Retry {
                error,
                next_attempt_at,
            } => (
                DeliveryState::Pending,
                Some(*next_attempt_at),
                clip(Some(error)),
                None,
            ),
            DeliveryOutcome::Failed { error } => {
                (DeliveryState::Failed, None, clip(Some(error)), None)
            }
        };
        retry_deadlocks(|| async {
            let mut tx = B::begin_write(&self.pool).await?;
            let mut q = Query::new(
                "UPDATE tw_alarm_deliveries SET state = ?, attempts = attempts + 1, \
                 claimed_by = NULL, claimed_until = NULL, updated_at = ?",
            )
            .bind(state.as_str())
            .bind(finish.now);
            if let Some(next) = next {
                q.push(", next_attempt_at = ").push_bind(next);
            }
            if error.is_some() {
                q.push(", last_error = ").push_bind(error.clone());
            }
            if let Some(at) = sent_at {
                q.push(", sent_at = ").push_bind(at);
            }
            q.push(" WHERE id = ").push_bind(finish.id);
            q.push(" AND state = 'pending' AND claimed_by = ")
                .push_bind(finish.node_id.as_str());
            if B::execute(&mut *tx, q).await?.rows == 0 {
                // Ended here for the same reason as in the claim: no locks left behind.
                tx.commit().await?;
                return Ok(false);
            }
            let run_status = match state {
                DeliveryState::Pending => None,
                DeliveryState::Sent => Some(AlarmStatus::Sent),
                DeliveryState::Failed => Some(AlarmStatus::SendFailed),
            };
            if let Some(status) = run_status {
                // A failure on one channel is what the run shows, whatever the others did.
                let q = Query::new(format!(
                    "UPDATE tw_runs SET alarm_status = ? WHERE id = \
                     (SELECT run_id FROM tw_alarm_deliveries WHERE id = ?) AND alarm_status{}",
                    alarm_in(AlarmStatus::sources_of(status))
                ))
                .bind(status.code())
                .bind(finish.id);
                B::execute(&mut *tx, q).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn alarm_delivery_get(&self, id: i64) -> Result<AlarmDelivery, Error> {
        let q = Query::new(format!(
            "SELECT {DELIVERY_COLUMNS} FROM tw_alarm_deliveries WHERE id = ?"
        ))
        .bind(id);
        match self.fetch_optional::<DeliveryRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("alarm delivery", id)),
        }
    }

    async fn alarm_deliveries_list(
        &self,
        filter: DeliveryFilter,
    ) -> Result<Paged<AlarmDelivery>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let mut clause = Query::new(" WHERE 1 = 1");
        if let Some(run) = filter.run_id {
            clause.push(" AND run_id = ").push_bind(run);
        }
        if let Some(state) = filter.state {
            clause.push(" AND state = ").push_bind(state.as_str());
        }
        let total = self.count("tw_alarm_deliveries", &clause).await?;
        let mut q = Query::new(format!(
            "SELECT {DELIVERY_COLUMNS} FROM tw_alarm_deliveries"
        ));
        q.append(&clause);
        q.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        q.push(" OFFSET ").push_bind(offset);
        let items = convert(self.fetch_all::<DeliveryRow>(q).await?)?;
        Ok(Paged { items, total })
    }
}

#[async_trait]
impl<B: Backend> AccountStore for SqlStore<B> {
    async fn user_create(&self, user: UserNew) -> Result<User, Error> {
        let username = user.username.trim().to_owned();
        check_required("username", &username, USERNAME_MAX)?;
        check_required("password hash", &user.password_hash, PASSWORD_HASH_MAX)?;
        let groups = group_ids_text(&user.group_ids)?;
        if let Some(l) = &user.locale {
            check_len("locale", l, LOCALE_MAX)?;
        }
        let q = Query::new(format!(
            "INSERT INTO tw_users ({}) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
            &USER_COLUMNS["id, ".len()..]
        ))
        .bind(&username)
        .bind(&user.password_hash)
        .bind(user.role.as_str())
        .bind(&groups)
        .bind(user.locale.clone())
        .bind(user.now)
        .bind(user.now);
        let mut conn = self.pool.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                unique_or(e, || {
                    Error::Conflict(format!("username {username:?} is taken"))
                })
            })?
            .ok_or_else(|| Error::corrupt("the user insert wrote no row".to_owned()))?;
        Ok(User {
            id,
            username,
            password_hash: user.password_hash,
            role: user.role,
            group_ids: user.group_ids,
            locale: user.locale,
            disabled: false,
            created_at: user.now,
            updated_at: user.now,
        })
    }

    async fn user_update(&self, update: UserUpdate) -> Result<User, Error> {
        let groups = group_ids_text(&update.group_ids)?;
        if let Some(l) = &update.locale {
            check_len("locale", l, LOCALE_MAX)?;
        }
        let q = Query::new(
            "UPDATE tw_users SET role = ?, group_ids = ?, locale = ?, disabled = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(update.role.as_str())
        .bind(groups)
        .bind(update.locale)
        .bind(i64::from(update.disabled))
        .bind(update.now)
        .bind(update.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("user", update.id));
        }
        self.user_get(update.id).await
    }

    async fn user_set_password(&self, password: UserPassword) -> Result<(), Error> {
        check_required("password hash", &password.password_hash, PASSWORD_HASH_MAX)?;
        let q = Query::new("UPDATE tw_users SET password_hash = ?, updated_at = ? WHERE id = ?")
            .bind(password.password_hash)
            .bind(password.now)
            .bind(password.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("user", password.id));
        }
        Ok(())
    }

    async fn user_get(&self, id: i64) -> Result<User, Error> {
        let q = Query::new(format!("SELECT {USER_COLUMNS} FROM tw_users WHERE id = ?")).bind(id);
        match self.fetch_optional::<UserRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("user", id)),
        }
    }

    async fn user_get_by_username(&self, username: &str) -> Result<User, Error> {
        let q = Query::new(format!(
            "SELECT {USER_COLUMNS} FROM tw_users WHERE username = ?"
        ))
        .bind(username);
        match self.fetch_optional::<UserRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found("user", username)),
        }
    }

    async fn users_list(&self) -> Result<Vec<User>, Error> {
        let q = Query::new(format!("SELECT {USER_COLUMNS} FROM tw_users ORDER BY id"));
        convert(self.fetch_all::<UserRow>(q).await?)
    }

    async fn users_count(&self) -> Result<u64, Error> {
        self.count("tw_users", &Query::new("")).await
    }

    async fn session_create(&self, session: Session) -> Result<(), Error> {
        check_required("session digest", &session.id_hash, DIGEST_MAX)?;
        check_required("csrf token", &session.csrf_token, DIGEST_MAX)?;
        let q = Query::new(format!(
            "INSERT INTO tw_sessions ({SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        ))
        .bind(&session.id_hash)
        .bind(session.user_id)
        .bind(&session.csrf_token)
        .bind(session.created_at)
        .bind(session.expires_at)
        .bind(session.last_seen_at);
        self.execute(q).await.map_err(|e| {
            if is_foreign_key_violation(&e) {
                Error::Invalid(format!("user {} does not exist", session.user_id))
            } else {
                unique_or(e, || Error::Conflict("the session exists".to_owned()))
            }
        })?;
        Ok(())
    }

    async fn session_get(&self, id_hash: &str) -> Result<Option<Session>, Error> {
        let q = Query::new(format!(
            "SELECT {SESSION_COLUMNS} FROM tw_sessions WHERE id_hash = ?"
        ))
        .bind(id_hash);
        Ok(self
            .fetch_optional::<SessionRow>(q)
            .await?
            .map(Session::from))
    }

    async fn session_touch(&self, touch: SessionTouch) -> Result<bool, Error> {
        // Never moves backwards: two requests of one page may finish out of order.
        let q = Query::new(
            "UPDATE tw_sessions SET last_seen_at = CASE WHEN last_seen_at < ? THEN ? \
             ELSE last_seen_at END WHERE id_hash = ?",
        )
        .bind(touch.now)
        .bind(touch.now)
        .bind(touch.id_hash);
        Ok(self.execute(q).await? > 0)
    }

    async fn session_delete(&self, id_hash: &str) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_sessions WHERE id_hash = ?").bind(id_hash);
        Ok(self.execute(q).await? > 0)
    }

    async fn sessions_delete_for_user(&self, user_id: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_sessions WHERE user_id = ?").bind(user_id);
        Ok(self.execute(q).await?)
    }

    async fn sessions_purge_expired(&self, purge: SessionPurge) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_sessions WHERE expires_at <= ? OR last_seen_at < ?")
            .bind(purge.now)
            .bind(purge.idle_before);
        Ok(self.execute(q).await?)
    }

    async fn api_token_create(&self, token: ApiTokenNew) -> Result<ApiToken, Error> {
        let name = token.name.trim().to_owned();
        check_required("token name", &name, TOKEN_NAME_MAX)?;
        check_required("token digest", &token.token_hash, DIGEST_MAX)?;
        let q = Query::new(
            "INSERT INTO tw_api_tokens (name, token_hash, user_id, created_at) \
             VALUES (?, ?, ?, ?)",
        )
        .bind(&name)
        .bind(&token.token_hash)
        .bind(token.user_id)
        .bind(token.now);
        let mut conn = self.pool.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await
            .map_err(|e| {
                if is_foreign_key_violation(&e) {
                    Error::Invalid(format!("user {} does not exist", token.user_id))
                } else {
                    unique_or(e, || Error::Conflict("the token exists".to_owned()))
                }
            })?
            .ok_or_else(|| Error::corrupt("the token insert wrote no row".to_owned()))?;
        Ok(ApiToken {
            id,
            name,
            token_hash: token.token_hash,
            user_id: token.user_id,
            created_at: token.now,
            last_used_at: None,
            revoked_at: None,
        })
    }

    async fn api_token_get(&self, id: i64) -> Result<ApiToken, Error> {
        let q = Query::new(format!(
            "SELECT {API_TOKEN_COLUMNS} FROM tw_api_tokens WHERE id = ?"
        ))
        .bind(id);
        self.fetch_optional::<ApiTokenRow>(q)
            .await?
            .map(ApiToken::from)
            .ok_or_else(|| Error::not_found("api token", id))
    }

    async fn api_token_find(&self, token_hash: &str) -> Result<Option<ApiToken>, Error> {
        let q = Query::new(format!(
            "SELECT {API_TOKEN_COLUMNS} FROM tw_api_tokens WHERE token_hash = ?"
        ))
        .bind(token_hash);
        Ok(self
            .fetch_optional::<ApiTokenRow>(q)
            .await?
            .map(ApiToken::from))
    }

    async fn api_token_touch(&self, touch: ApiTokenTouch) -> Result<(), Error> {
        let q = Query::new("UPDATE tw_api_tokens SET last_used_at = ? WHERE id = ?")
            .bind(touch.now)
            .bind(touch.id);
        self.execute(q).await?;
        Ok(())
    }

    async fn api_token_revoke(&self, revoke: ApiTokenRevoke) -> Result<ApiToken, Error> {
        let q = Query::new(
            "UPDATE tw_api_tokens SET revoked_at = CASE WHEN revoked_at IS NULL THEN ? \
             ELSE revoked_at END WHERE id = ?",
        )
        .bind(revoke.now)
        .bind(revoke.id);
        if self.execute(q).await? == 0 {
            return Err(Error::not_found("api token", revoke.id));
        }
        self.api_token_get(revoke.id).await
    }

    async fn api_tokens_list(&self, user_id: Option<i64>) -> Result<Vec<ApiToken>, Error> {
        let mut q = Query::new(format!(
            "SELECT {API_TOKEN_COLUMNS} FROM tw_api_tokens WHERE 1 = 1"
        ));
        if let Some(user) = user_id {
            q.push(" AND user_id = ").push_bind(user);
        }
        q.push(" ORDER BY id");
        Ok(self
            .fetch_all::<ApiTokenRow>(q)
            .await?
            .into_iter()
            .map(ApiToken::from)
            .collect())
    }
}

#[async_trait]
impl<B: Backend> AuditStore for SqlStore<B> {
    async fn audit_append(&self, entry: AuditNew) -> Result<i64, Error> {
        check_required("actor", &entry.actor, USERNAME_MAX)?;
        check_required("action", &entry.action, ACTION_MAX)?;
        check_required("target type", &entry.target_type, TARGET_TYPE_MAX)?;
        check_len("target id", &entry.target_id, TARGET_ID_MAX)?;
        for (field, text) in [("before", &entry.before), ("after", &entry.after)] {
            if let Some(t) = text {
                check_bytes(field, t, GLUE_MAX_BYTES)?;
            }
        }
        let q = Query::new(format!(
            "INSERT INTO tw_audit ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            &AUDIT_COLUMNS["id, ".len()..]
        ))
        .bind(entry.at)
        .bind(entry.actor_id)
        .bind(entry.actor)
        .bind(entry.action)
        .bind(entry.target_type)
        .bind(entry.target_id)
        .bind(entry.before)
        .bind(entry.after);
        let mut conn = self.pool.acquire().await?;
        Self::insert_id(&mut conn, q)
            .await?
            .ok_or_else(|| Error::corrupt("the audit insert wrote no row".to_owned()))
    }

    async fn audit_list(&self, filter: AuditFilter) -> Result<Paged<AuditEntry>, Error> {
        let (offset, limit) = check_page(filter.page)?;
        let mut w = Query::new(" WHERE 1 = 1");
        if let Some(actor) = &filter.actor {
            w.push(" AND actor = ").push_bind(actor.as_str());
        }
        if let Some(t) = &filter.target_type {
            w.push(" AND target_type = ").push_bind(t.as_str());
        }
        if let Some(t) = &filter.target_id {
            w.push(" AND target_id = ").push_bind(t.as_str());
        }
        push_range(&mut w, "at", filter.range);
        let total = self.count("tw_audit", &w).await?;
        let mut q = Query::new(format!("SELECT {AUDIT_COLUMNS} FROM tw_audit"));
        q.append(&w);
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(limit)
            .push(" OFFSET ")
            .push_bind(offset);
        let items = self
            .fetch_all::<AuditRow>(q.one_off())
            .await?
            .into_iter()
            .map(AuditEntry::from)
            .collect();
        Ok(Paged { items, total })
    }
}

#[async_trait]
impl<B: Backend> ScriptStore for SqlStore<B> {
    async fn script_version_append(
        &self,
        version: ScriptVersionNew,
    ) -> Result<ScriptVersion, Error> {
        check_bytes("source", &version.source, GLUE_MAX_BYTES)?;
        check_len("comment", &version.comment, COMMENT_MAX)?;
        check_required("author", &version.author, USERNAME_MAX)?;
        let mut tx = B::begin_write(&self.pool).await?;
        // Locking the job serialises appends to one job, so numbers never collide.
        let lock = Query::new(format!(
            "SELECT id FROM tw_jobs WHERE id = ?{}",
            B::KIND.for_update()
        ))
        .bind(version.job_id);
        if B::fetch_optional::<(i64,)>(&mut *tx, lock).await?.is_none() {
            return Err(Error::not_found("job", version.job_id));
        }
        let max =
            Query::new("SELECT COALESCE(MAX(version), 0) FROM tw_script_versions WHERE job_id = ?")
                .bind(version.job_id);
        let (newest,): (i64,) = B::fetch_optional(&mut *tx, max)
            .await?
            .ok_or_else(|| Error::corrupt("MAX returned no row".to_owned()))?;
        let number = newest + 1;
        let q = Query::new(format!(
            "INSERT INTO tw_script_versions ({}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            &SCRIPT_VERSION_COLUMNS["id, ".len()..]
        ))
        .bind(version.job_id)
        .bind(number)
        .bind(version.glue_type.as_str())
        .bind(&version.source)
        .bind(&version.comment)
        .bind(&version.author)
        .bind(version.now);
        let id = Self::insert_id(&mut tx, q)
            .await?
            .ok_or_else(|| Error::corrupt("the version insert wrote no row".to_owned()))?;
        tx.commit().await?;
        Ok(ScriptVersion {
            id,
            job_id: version.job_id,
            version: number,
            glue_type: version.glue_type,
            source: version.source,
            comment: version.comment,
            author: version.author,
            created_at: version.now,
        })
    }

    async fn script_versions_list(&self, job_id: i64) -> Result<Vec<ScriptVersion>, Error> {
        let q = Query::new(format!(
            "SELECT {SCRIPT_VERSION_COLUMNS} FROM tw_script_versions WHERE job_id = ? \
             ORDER BY version DESC"
        ))
        .bind(job_id);
        convert(self.fetch_all::<ScriptVersionRow>(q).await?)
    }

    async fn script_version_get(&self, key: ScriptVersionKey) -> Result<ScriptVersion, Error> {
        let q = Query::new(format!(
            "SELECT {SCRIPT_VERSION_COLUMNS} FROM tw_script_versions \
             WHERE job_id = ? AND version = ?"
        ))
        .bind(key.job_id)
        .bind(key.version);
        match self.fetch_optional::<ScriptVersionRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found(
                "script version",
                format!("{}/{}", key.job_id, key.version),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn spec_assignments_follow_the_column_list() {
        assert!(SPEC_ASSIGNMENTS.starts_with("group_id = ?, description = ?"));
        assert_eq!(SPEC_ASSIGNMENTS.matches('?').count(), 19);
    }
}
