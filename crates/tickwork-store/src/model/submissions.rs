//! Submissions from code: a client's key in an executor group and the job that carries it out.

pub use tickwork_core::submission::OnConflict;

use super::{Job, JobNew};

/// A stored submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    pub id: i64,
    pub group_id: i64,
    /// The client's key, unique in its group.
    pub key: String,
    /// The job that carries it out (deleted with it).
    pub job_id: i64,
    /// When it fires, as the client wrote it (JSON).
    pub schedule: String,
    /// The webhook alarm channel its runs' ends are posted to, if any.
    pub feedback_channel_id: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A submission to write under `(group_id, key)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionPut {
    pub group_id: i64,
    pub key: String,
    pub schedule: String,
    /// The job that carries it out: created, or under [`OnConflict::Replace`] written over
    /// the one there (which keeps its id, key and runs; its version moves on).
    pub job: JobNew,
    /// Fires the job has left (`None`: no bound).
    pub fires_left: Option<i64>,
    pub feedback_channel_id: Option<i64>,
    pub on_conflict: OnConflict,
}

/// What [`SubmissionPut`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmissionWritten {
    Created,
    /// The key was taken and the submission left as it was.
    Kept,
    Replaced,
}

/// A submission, its job as it is now, and what the write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionPutResult {
    pub submission: Submission,
    pub job: Job,
    pub written: SubmissionWritten,
    /// The job before a replace.
    pub before: Option<Job>,
}

/// A submission named by its group and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionKey {
    pub group_id: i64,
    pub key: String,
}

/// Cancels a submission: deletes it with its job and the job's runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionCancel {
    pub key: SubmissionKey,
    /// Cancel even while runs of it are planned, being sent or dispatched; otherwise such a
    /// run is a `Conflict` and nothing changes.
    pub with_live_runs: bool,
}

/// A submission with its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionWithJob {
    pub submission: Submission,
    pub job: Job,
}

/// How a run of a submission ended: its submitter's feedback, kept until acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionEnd {
    /// Ascending in the order the ends were written; a reader's cursor.
    pub id: i64,
    pub group_id: i64,
    pub key: String,
    pub run_id: i64,
    pub attempt: i32,
    pub state: tickwork_core::run::RunState,
    pub handle_code: i32,
    pub handle_msg: Option<String>,
    pub scheduled_at: i64,
    pub ended_at: i64,
    /// The webhook channel it is posted to, if any, and the posts tried so far.
    pub channel_id: Option<i64>,
    pub attempts: i32,
}

/// Ends due to be posted to their webhook channel at `now`, earliest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmissionEndsDue {
    pub now: i64,
    pub limit: u64,
}

/// A post of an end that failed: tried again at `next_attempt_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionEndRetry {
    pub id: i64,
    pub next_attempt_at: i64,
    pub error: String,
}

/// The unacknowledged ends of a group's submissions, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmissionEndsQuery {
    pub group_id: i64,
    /// Only ends after this id (a reader paging forward without acknowledging).
    pub after: Option<i64>,
    /// 1 to [`super::PageReq::MAX_LIMIT`].
    pub limit: u64,
}

/// Ends of a group's submissions acknowledged by their ids: deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionEndsAck {
    pub group_id: i64,
    pub ids: Vec<i64>,
}
