//! Submissions from code: a client's key in a group, written with its job in one transaction.

use super::jobs::{delete_job_rows, insert_job, rewrite_job};
use super::*;
use crate::store::SubmissionStore;

/// The longest client key (core's `submission::KEY_CHARS`).
const SUBMISSION_KEY_MAX: usize = tickwork_core::submission::KEY_CHARS;
/// The longest schedule text, in bytes.
const SUBMISSION_SCHEDULE_MAX: usize = 4096;

const SUBMISSION_COLUMNS: &str =
    "id, group_id, submission_key, job_id, schedule, created_at, updated_at";

type SubmissionRow = (i64, i64, String, i64, String, i64, i64);

fn submission(r: SubmissionRow) -> Submission {
    Submission {
        id: r.0,
        group_id: r.1,
        key: r.2,
        job_id: r.3,
        schedule: r.4,
        created_at: r.5,
        updated_at: r.6,
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
                    "UPDATE tw_submissions SET schedule = ?, updated_at = ? WHERE id = ?",
                )
                .bind(&put.schedule)
                .bind(now)
                .bind(there.id);
                B::execute(&mut *tx, q).await?;
                SubmissionPutResult {
                    submission: Submission {
                        schedule: put.schedule,
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
                    "INSERT INTO tw_submissions ({}) VALUES (?, ?, ?, ?, ?, ?)",
                    &SUBMISSION_COLUMNS["id, ".len()..]
                ))
                .bind(key.group_id)
                .bind(&key.key)
                .bind(job.id)
                .bind(&put.schedule)
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
}
