//! Submissions from code: a client's key in a group, written with its job in one transaction.

use super::jobs::{delete_job_rows, insert_job, rewrite_job};
use super::*;
use crate::store::SubmissionStore;

/// The longest client key (core's `submission::KEY_CHARS`).
const SUBMISSION_KEY_MAX: usize = tickwork_core::submission::KEY_CHARS;
/// The longest schedule text, in bytes.
const SUBMISSION_SCHEDULE_MAX: usize = 4096;

const SUBMISSION_COLUMNS: &str =
    "id, group_id, submission_key, job_id, schedule, feedback_channel_id, created_at, updated_at";

type SubmissionRow = (i64, i64, String, i64, String, Option<i64>, i64, i64);

fn submission(r: SubmissionRow) -> Submission {
    Submission {
        id: r.0,
        group_id: r.1,
        key: r.2,
        job_id: r.3,
        schedule: r.4,
        feedback_channel_id: r.5,
        created_at: r.6,
        updated_at: r.7,
    }
}

/// The submission under `key`, locked for the rest of the transaction when `lock`.
async fn find<B: Backend>(
    conn: &mut Conn<B>,
    key: &SubmissionKey,
    lock: bool,
) -> Result<Option<Submission>, Error> {
    let q = Query::new(format!(
        "SELECT {SUBMISSION_COLUMNS} FROM tw_submissions \
         WHERE group_id = ? AND submission_key = ?{}",
        if lock { B::KIND.for_update() } else { "" }
    ))
    .bind(key.group_id)
    .bind(&key.key);
    Ok(B::fetch_optional::<SubmissionRow>(conn, q)
        .await?
        .map(submission))
}

/// Writes the end of each run of `ended` whose job carries a submission, in the caller's
/// transaction (the one that ends the runs). `job_ids` are the runs' jobs, each once.
pub(super) async fn record_ends<B: Backend>(
    conn: &mut Conn<B>,
    ended: &[Run],
    job_ids: &[i64],
) -> Result<(), Error> {
    let carried = carried_by::<B>(conn, job_ids).await?;
    insert_ends::<B>(conn, &carried, ended).await
}

/// The submission each of `job_ids` carries, if any: job id -> (group, key, feedback channel).
pub(super) async fn carried_by<B: Backend>(
    conn: &mut Conn<B>,
    job_ids: &[i64],
) -> Result<HashMap<i64, Carried>, Error> {
    let mut carried = HashMap::new();
    let select = "SELECT job_id, group_id, submission_key, feedback_channel_id FROM tw_submissions \
                  WHERE job_id IN ";
    for q in in_ids::<B>(select, job_ids) {
        type Row = (i64, i64, String, Option<i64>);
        for (job_id, group_id, key, channel) in B::fetch_all::<Row>(&mut *conn, q).await? {
            carried.insert(job_id, (group_id, key, channel));
        }
    }
    Ok(carried)
}

/// A job's submission: its group, key and feedback channel.
pub(super) type Carried = (i64, String, Option<i64>);

/// Writes the end of each run of `ended` whose job is in `carried`.
pub(super) async fn insert_ends<B: Backend>(
    conn: &mut Conn<B>,
    carried: &HashMap<i64, Carried>,
    ended: &[Run],
) -> Result<(), Error> {
    for run in ended {
        let Some((group_id, key, channel)) = carried.get(&run.job_id) else {
            continue;
        };
        let ended_at = run.finished_at.unwrap_or(run.scheduled_at);
        let q = Query::new(
            "INSERT INTO tw_submission_ends (group_id, submission_key, run_id, attempt, state, \
             handle_code, handle_msg, scheduled_at, ended_at, channel_id, next_attempt_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(*group_id)
        .bind(key.as_str())
        .bind(run.id)
        .bind(i64::from(run.attempt))
        .bind(run.state.as_str())
        .bind(i64::from(run.handle_code))
        .bind(run.handle_msg.as_deref())
        .bind(run.scheduled_at)
        .bind(ended_at)
        .bind(*channel)
        // Posted at once when there is a channel to post to.
        .bind(channel.map(|_| ended_at));
        B::execute(&mut *conn, q).await?;
    }
    Ok(())
}

const END_COLUMNS: &str = "id, group_id, submission_key, run_id, attempt, state, handle_code, \
     handle_msg, scheduled_at, ended_at, channel_id, attempts";

/// A row of [`END_COLUMNS`].
type EndRow = (
    i64,
    i64,
    String,
    i64,
    i64,
    String,
    i64,
    Option<String>,
    i64,
    i64,
    Option<i64>,
    i64,
);

fn end(r: EndRow) -> Result<SubmissionEnd, Error> {
    let small = |what: &str, v: i64| {
        i32::try_from(v).map_err(|_| Error::corrupt(format!("submission end {}: {what} {v}", r.0)))
    };
    Ok(SubmissionEnd {
        id: r.0,
        group_id: r.1,
        key: r.2,
        run_id: r.3,
        attempt: small("attempt", r.4)?,
        state: r
            .5
            .parse()
            .map_err(|_| Error::corrupt(format!("submission end {}: state {:?}", r.0, r.5)))?,
        handle_code: small("handle code", r.6)?,
        handle_msg: r.7,
        scheduled_at: r.8,
        ended_at: r.9,
        channel_id: r.10,
        attempts: small("attempts", r.11)?,
    })
}

/// The ends `q` (a select of [`END_COLUMNS`]) reads.
async fn read_ends<B: Backend>(pool: &Pool<B::Db>, q: Query) -> Result<Vec<SubmissionEnd>, Error> {
    let mut conn = pool.acquire().await?;
    B::fetch_all::<EndRow>(&mut conn, q)
        .await?
        .into_iter()
        .map(end)
        .collect()
}

fn not_found(key: &SubmissionKey) -> Error {
    Error::not_found(
        "submission",
        format!("{:?} of group {}", key.key, key.group_id),
    )
}

#[async_trait]
impl<B: Backend> SubmissionStore for SqlStore<B> {
    async fn submission_put(&self, put: SubmissionPut) -> Result<SubmissionPutResult, Error> {
        check_required("submission key", &put.key, SUBMISSION_KEY_MAX)?;
        check_bytes("schedule", &put.schedule, SUBMISSION_SCHEDULE_MAX)?;
        if put.job.spec.group_id != put.group_id {
            return Err(Error::Invalid(format!(
                "the submission's job is of group {}, not of its group {}",
                put.job.spec.group_id, put.group_id
            )));
        }
        let key = SubmissionKey {
            group_id: put.group_id,
            key: put.key.clone(),
        };
        let now = put.job.now;
        let mut tx = B::begin_write(&self.writes).await?;
        let result = match (find::<B>(&mut tx, &key, true).await?, put.on_conflict) {
            (Some(there), OnConflict::Ignore) => {
                let job = Self::job_in(&mut tx, there.job_id).await?;
                SubmissionPutResult {
                    submission: there,
                    job,
                    written: SubmissionWritten::Kept,
                    before: None,
                }
            }
            (Some(there), OnConflict::Replace) => {
                let before = Self::job_in(&mut tx, there.job_id).await?;
                let job = rewrite_job::<B>(&mut tx, there.job_id, &put.job, put.fires_left).await?;
                let q = Query::new(
                    "UPDATE tw_submissions SET schedule = ?, feedback_channel_id = ?, \
                     updated_at = ? WHERE id = ?",
                )
                .bind(&put.schedule)
                .bind(put.feedback_channel_id)
                .bind(now)
                .bind(there.id);
                B::execute(&mut *tx, q).await?;
                SubmissionPutResult {
                    submission: Submission {
                        schedule: put.schedule,
                        feedback_channel_id: put.feedback_channel_id,
                        updated_at: now,
                        ..there
                    },
                    job,
                    written: SubmissionWritten::Replaced,
                    before: Some(before),
                }
            }
            (None, _) => {
                let job = insert_job::<B>(&mut tx, put.job, put.fires_left).await?;
                let q = Query::new(format!(
                    "INSERT INTO tw_submissions ({}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    &SUBMISSION_COLUMNS["id, ".len()..]
                ))
                .bind(key.group_id)
                .bind(&key.key)
                .bind(job.id)
                .bind(&put.schedule)
                .bind(put.feedback_channel_id)
                .bind(now)
                .bind(now);
                // Two puts of one new key at once: the second finds the key taken here.
                let id = Self::insert_id(&mut tx, q)
                    .await
                    .map_err(|e| {
                        unique_or(e, || {
                            Error::Conflict(format!("submission key {:?} is taken", key.key))
                        })
                    })?
                    .ok_or_else(|| {
                        Error::corrupt("the submission insert wrote no row".to_owned())
                    })?;
                SubmissionPutResult {
                    submission: Submission {
                        id,
                        group_id: key.group_id,
                        key: key.key,
                        job_id: job.id,
                        schedule: put.schedule,
                        feedback_channel_id: put.feedback_channel_id,
                        created_at: now,
                        updated_at: now,
                    },
                    job,
                    written: SubmissionWritten::Created,
                    before: None,
                }
            }
        };
        tx.commit().await?;
        Ok(result)
    }

    async fn submission_get(&self, key: SubmissionKey) -> Result<SubmissionWithJob, Error> {
        let mut conn = self.pool.acquire().await?;
        let submission = find::<B>(&mut conn, &key, false)
            .await?
            .ok_or_else(|| not_found(&key))?;
        let job = Self::job_in(&mut conn, submission.job_id).await?;
        Ok(SubmissionWithJob { submission, job })
    }

    async fn submission_cancel(
        &self,
        cancel: SubmissionCancel,
    ) -> Result<SubmissionWithJob, Error> {
        let mut tx = B::begin_write(&self.writes).await?;
        let submission = find::<B>(&mut tx, &cancel.key, true)
            .await?
            .ok_or_else(|| not_found(&cancel.key))?;
        let job = Self::job_in(&mut tx, submission.job_id).await?;
        if !cancel.with_live_runs {
            let q = Query::new(format!(
                "SELECT COUNT(*) FROM tw_runs WHERE job_id = ? AND state {}",
                state_in(&[RunState::Planned, RunState::Sending, RunState::Dispatched])
            ))
            .bind(job.id);
            let (live,): (i64,) = B::fetch_optional(&mut *tx, q)
                .await?
                .ok_or_else(|| Error::corrupt("COUNT returned no row".to_owned()))?;
            if live > 0 {
                return Err(Error::Conflict(format!(
                    "submission {:?} has {live} run(s) planned or running; cancel it with kill",
                    submission.key
                )));
            }
        }
        delete_job_rows::<B>(&mut tx, &[job.id]).await?;
        tx.commit().await?;
        Ok(SubmissionWithJob { submission, job })
    }

    async fn submission_ends(
        &self,
        query: SubmissionEndsQuery,
    ) -> Result<Vec<SubmissionEnd>, Error> {
        let limit = query.limit.clamp(1, PageReq::MAX_LIMIT);
        let q = Query::new(format!(
            "SELECT {END_COLUMNS} FROM tw_submission_ends \
             WHERE group_id = ? AND id > ? ORDER BY id LIMIT ?"
        ))
        .bind(query.group_id)
        .bind(query.after.unwrap_or(0))
        .bind(i64::try_from(limit).unwrap_or(1000));
        read_ends::<B>(&self.pool, q).await
    }

    async fn submission_ends_ack(&self, ack: SubmissionEndsAck) -> Result<u64, Error> {
        if ack.ids.is_empty() {
            return Ok(0);
        }
        let mut conn = self.writes.acquire().await?;
        let mut acked = 0;
        for chunk in ack.ids.chunks(ROWS_PER_STATEMENT) {
            let mut q = Query::new("DELETE FROM tw_submission_ends WHERE group_id = ").one_off();
            q.push_bind(ack.group_id).push(" AND id IN ");
            q.push_list(chunk.iter().copied());
            acked += B::execute(&mut *conn, q).await?.rows;
        }
        Ok(acked)
    }

    async fn submission_ends_due(
        &self,
        due: SubmissionEndsDue,
    ) -> Result<Vec<SubmissionEnd>, Error> {
        let q = Query::new(format!(
            "SELECT {END_COLUMNS} FROM tw_submission_ends \
             WHERE next_attempt_at <= ? AND channel_id IS NOT NULL \
             ORDER BY next_attempt_at, id LIMIT ?"
        ))
        .bind(due.now)
        .bind(i64::try_from(due.limit.clamp(1, PageReq::MAX_LIMIT)).unwrap_or(1000));
        read_ends::<B>(&self.pool, q).await
    }

    async fn submission_end_retry(&self, retry: SubmissionEndRetry) -> Result<(), Error> {
        let q = Query::new(
            "UPDATE tw_submission_ends SET attempts = attempts + 1, next_attempt_at = ?, \
             last_error = ? WHERE id = ?",
        )
        .bind(retry.next_attempt_at)
        .bind(clip(Some(&retry.error)))
        .bind(retry.id);
        let mut conn = self.writes.acquire().await?;
        B::execute(&mut *conn, q).await?;
        Ok(())
    }
}
