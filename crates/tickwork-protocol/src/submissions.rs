//! The JSON of submissions from code (`/openapi/v1/submissions/{app}/{key}`): what a client
//! sends under its own key and what it reads back.

use serde::{Deserialize, Serialize};
use tickwork_core::RouteStrategy;
pub use tickwork_core::submission::{OnConflict, When};

/// Most submissions in one batch request.
pub const SUBMISSIONS_BATCH_MAX: usize = 1000;

/// A submission as a client writes it. Every field but `handler` and `schedule` has a
/// default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionInput {
    /// The executor handler that runs it.
    pub handler: String,
    #[serde(default)]
    pub params: String,
    /// When it fires.
    pub schedule: When,
    /// IANA zone of a cron and of a civil `at`; the admin's default zone when absent.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// One live run at a time, the next fire counted from the end of the last (a repeat
    /// becomes a fixed delay); false: fires are independent.
    #[serde(default)]
    pub rely_on_prev_cycle: bool,
    /// What to do when the key is taken: keep what is there (`ignore`, the default) or write
    /// this over it (`replace`).
    #[serde(default)]
    pub on_conflict: OnConflict,
    /// Higher first when several runs are due at the same millisecond.
    #[serde(default)]
    pub priority: i32,
    /// Retries after a failed run, each after `retry_backoff_ms` doubled per attempt.
    #[serde(default)]
    pub retry_count: i32,
    #[serde(default)]
    pub retry_backoff_ms: i64,
    /// Run timeout in seconds; 0: none.
    #[serde(default)]
    pub timeout_s: i32,
    /// Which of the group's executors runs it; `FIRST` when absent.
    #[serde(default)]
    pub route_strategy: Option<RouteStrategy>,
    /// Shown with its job; `submission <key>` when empty.
    #[serde(default)]
    pub description: String,
    /// A webhook alarm channel (by name) each completion is posted to, signed, until it
    /// answers 2xx; without one, completions are only read (`GET /completions/{app}`).
    #[serde(default)]
    pub feedback_channel: Option<String>,
}

/// One item of a batch: a submission with its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionItem {
    pub key: String,
    pub submission: SubmissionInput,
}

/// Many submissions of one group in one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionsBatchInput {
    /// 1 to [`SUBMISSIONS_BATCH_MAX`] submissions, each written on its own.
    pub items: Vec<SubmissionItem>,
}

/// What a put did: `created`, `kept` (the key was taken and `on_conflict` was `ignore`) or
/// `replaced`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmissionOutcome {
    Created,
    Kept,
    Replaced,
}

/// A submission as clients read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmissionView {
    pub app_name: String,
    pub key: String,
    /// The job that carries it out (its runs are the submission's runs).
    pub job_id: i64,
    pub schedule: When,
    pub time_zone: String,
    pub rely_on_prev_cycle: bool,
    /// `active` while it has fires to come, `finished` after its last.
    pub state: String,
    pub next_fire_at: Option<i64>,
    /// Fires still to come of a repeat with a count.
    pub fires_left: Option<i64>,
    /// The webhook channel its completions are posted to.
    pub feedback_channel: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The answer to a put: the submission and what the put did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmissionPutView {
    pub outcome: SubmissionOutcome,
    pub submission: SubmissionView,
}

/// What became of one item of a batch: its put's answer, or its error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionItemResult {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SubmissionOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<SubmissionView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::api::ErrorDetail>,
}

/// The answer to a batch, one result per item in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionsBatchResult {
    pub results: Vec<SubmissionItemResult>,
}

/// How a run of a submission ended (`GET /completions/{app}`): kept until acknowledged, so a
/// reader that stops between reading and acknowledging reads it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// Ascending in the order the ends were written: the cursor of `after`.
    pub id: i64,
    pub key: String,
    pub run_id: i64,
    /// 0 for a first run, n for the n-th retry.
    pub attempt: i32,
    pub state: tickwork_core::run::RunState,
    pub handle_code: i32,
    pub handle_msg: Option<String>,
    pub scheduled_at: i64,
    pub ended_at: i64,
}

/// The completions not yet acknowledged, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completions {
    pub items: Vec<Completion>,
}

/// Completions acknowledged by their ids (1 to 1,000): they are not read again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionsAck {
    pub ids: Vec<i64>,
}

/// How many of the acknowledged completions were still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionsAcked {
    pub acked: u64,
}
