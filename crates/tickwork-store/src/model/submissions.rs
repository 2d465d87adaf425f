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
