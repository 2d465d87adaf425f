//! Script versions and run clearing.

use tickwork_core::GlueType;

/// One saved version of a script job's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptVersion {
    pub id: i64,
    pub job_id: i64,
    /// 1, 2, 3, ... per job.
    pub version: i64,
    pub glue_type: GlueType,
    pub source: String,
    pub comment: String,
    pub author: String,
    pub created_at: i64,
}

/// A version to append: it gets the job's next version number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptVersionNew {
    pub job_id: i64,
    pub glue_type: GlueType,
    pub source: String,
    pub comment: String,
    pub author: String,
    pub now: i64,
}

/// One version of one job's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptVersionKey {
    pub job_id: i64,
    pub version: i64,
}

/// Which final runs an operator clears: scheduled before `before`, optionally of one job or
/// one group. Runs still pending are never cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunClear {
    pub before: i64,
    pub job_id: Option<i64>,
    pub group_id: Option<i64>,
}
