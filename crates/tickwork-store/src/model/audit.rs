//! The audit log.

use super::{PageReq, TimeRange};

/// One recorded change: who, when, what, and the target before and after (JSON texts that
/// never hold password hashes or token secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    /// The acting user's id; `None` for the built-in API token and the system itself.
    pub actor_id: Option<i64>,
    /// The acting user's name as it was then.
    pub actor: String,
    /// What was done, e.g. `job.update`.
    pub action: String,
    /// What it was done to: `job`, `group`, `run`, `user`, `api_token`, ...
    pub target_type: String,
    pub target_id: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// An audit record to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditNew {
    pub at: i64,
    pub actor_id: Option<i64>,
    pub actor: String,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// Which audit records to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub target_type: Option<String>,
    pub target_id: Option<String>,
    pub range: TimeRange,
    pub page: PageReq,
}
