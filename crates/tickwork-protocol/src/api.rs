//! The types of the JSON API under `/openapi/v1`, shared by the admin, `tickwork-client` and
//! the CLI. Inputs refuse unknown fields, so a typo in a request is an error, not a silent
//! default.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::de::{Error as _, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize};
use tickwork_core::job::JobSpec;
use tickwork_core::run::RunState;
use tickwork_core::{GlueType, TriggerType};

/// An executor group as clients write it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupInput {
    pub app_name: String,
    #[serde(default)]
    pub title: String,
    /// `auto` (addresses from the registry, the default) or `manual`.
    #[serde(default)]
    pub address_mode: Option<String>,
    /// The manual address list.
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// A group with its current live addresses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupView {
    pub id: i64,
    pub app_name: String,
    pub title: String,
    pub address_mode: String,
    pub addresses: Vec<String>,
    pub live_addresses: Vec<String>,
    /// Whether the group has its own executor access token (never the token itself); without
    /// one its executors use the admin's global token.
    #[serde(default)]
    pub has_token: bool,
    pub updated_at: i64,
}

/// A group's new executor access token, shown once when it is set or rotated.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupTokenView {
    pub group_id: i64,
    pub token: String,
}

impl std::fmt::Debug for GroupTokenView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTokenView")
            .field("group_id", &self.group_id)
            .field("token", &"***")
            .finish()
    }
}

/// A job as clients write it: its definition ([`JobSpec`], whose fields sit at the top level
/// with their defaults: every field but `group_id` has one) between `key` and `start`.
/// Unknown fields are refused by name (see the `Deserialize` impl).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobInput {
    /// Stable key for import/export; generated when absent.
    pub key: Option<String>,
    #[serde(flatten)]
    pub spec: JobSpec,
    /// Start the job at once (create only).
    pub start: bool,
}

/// What a [`JobInput`] reads: its fields and, apart, every other key of the object. Serde's
/// `deny_unknown_fields` does not work with `flatten`, so the input checks `other` itself.
#[derive(Deserialize)]
struct JobInputWire {
    #[serde(default)]
    key: Option<String>,
    #[serde(flatten)]
    spec: JobSpec,
    #[serde(default)]
    start: bool,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

/// The fields of a [`JobInput`], for serde's "expected one of" message.
fn job_input_fields() -> &'static [&'static str] {
    static FIELDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut f = vec!["key"];
        f.extend(JobSpec::field_names());
        f.push("start");
        f
    })
}

impl<'de> Deserialize<'de> for JobInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = JobInputWire::deserialize(d)?;
        if let Some(name) = w.other.keys().next() {
            return Err(D::Error::unknown_field(name, job_input_fields()));
        }
        Ok(JobInput {
            key: w.key,
            spec: w.spec,
            start: w.start,
        })
    }
}

impl JobInput {
    /// A job of `group_id` with every other field at its default ([`JobSpec::blank`]):
    /// never scheduled, a BEAN job without a handler, XXL-JOB's strategies, stopped.
    pub fn new(group_id: i64) -> Self {
        JobInput {
            key: None,
            spec: JobSpec::blank(group_id),
            start: false,
        }
    }

    /// The definition this input writes, normalized as stored ([`JobSpec::normalized`]), in
    /// `default_time_zone` when it names none. Not validated: [`JobSpec::validate`] is the
    /// admin's.
    pub fn to_spec(&self, default_time_zone: &str) -> JobSpec {
        let mut spec = self.spec.clone();
        if spec.time_zone.trim().is_empty() {
            default_time_zone.clone_into(&mut spec.time_zone);
        }
        spec.normalized()
    }
}

impl From<&JobView> for JobInput {
    /// The input that writes `job` back as it is (a basis for edits).
    fn from(job: &JobView) -> Self {
        JobInput {
            key: Some(job.key.clone()),
            spec: job.spec.clone(),
            start: false,
        }
    }
}

/// A job as clients read it: its definition ([`JobSpec`], fields at the top level) with its
/// id, key and state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: i64,
    pub key: String,
    #[serde(flatten)]
    pub spec: JobSpec,
    pub glue_updated_at: i64,
    pub status: String,
    /// `null` when stopped or waiting for a fixed-delay run to end.
    pub next_fire_at: Option<i64>,
    pub last_fire_at: Option<i64>,
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Most jobs one [`JobsBulkInput`] may hold.
pub const JOBS_BULK_MAX: usize = 10_000;

/// Jobs to create at once (`POST /jobs/bulk`): all of them, or none when any is wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsBulkInput {
    /// 1 to [`JOBS_BULK_MAX`] jobs, each as `POST /jobs` takes it.
    pub jobs: Vec<JobInput>,
}

/// The jobs a [`JobsBulkInput`] created, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsBulkCreated {
    pub created: u64,
    pub jobs: Vec<JobCreated>,
}

/// A job just created: its id and key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCreated {
    pub id: i64,
    pub key: String,
}

/// A run as clients read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub id: i64,
    pub job_id: i64,
    pub group_id: i64,
    pub scheduled_at: i64,
    pub fire_key: Option<i64>,
    pub trigger_type: TriggerType,
    pub attempt: i32,
    pub parent_run_id: Option<i64>,
    pub executor_address: Option<String>,
    pub handler: String,
    pub params: String,
    pub shard_index: Option<i32>,
    pub shard_total: Option<i32>,
    pub state: RunState,
    pub trigger_code: i32,
    pub trigger_msg: Option<String>,
    pub handle_code: i32,
    pub handle_msg: Option<String>,
    pub owner_node: Option<String>,
    pub created_at: i64,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// A manual or API trigger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerInput {
    /// Params of this run; the job's own when absent.
    #[serde(default)]
    pub params: Option<String>,
    /// Run on this executor instead of routing.
    #[serde(default)]
    pub address: Option<String>,
}

/// Which runs to list (the REST API also takes `page`, from 1, and `size` for a page).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunQuery {
    pub job_id: Option<i64>,
    pub group_id: Option<i64>,
    pub state: Option<String>,
    /// Scheduled at or after (epoch ms).
    pub from: Option<i64>,
    /// Scheduled before (epoch ms).
    pub to: Option<i64>,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

/// Which jobs to list: by group, status, and `text` found in the description, handler, key
/// or owner, ordered by `sort` ([`JOB_SORT_KEYS`], `id` when absent) in `order` (`asc`, the
/// default, or `desc`); the REST API also takes `page` and `size`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    pub group_id: Option<i64>,
    pub status: Option<String>,
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

/// What a job list can be sorted by: the job's id, its description, its executor group's
/// title, its next fire, its last run's time. Jobs without a next fire or a run come last.
pub const JOB_SORT_KEYS: &[&str] = &["id", "description", "group", "next_fire", "last_run"];

/// A job of a list, with its last run: its newest run that left `planned` (fires claimed
/// ahead of their time are not yet runs that happened); `null` when it has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobListItem {
    #[serde(flatten)]
    pub job: JobView,
    pub last_run: Option<LastRunView>,
}

/// The last run of a job, as a job list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRunView {
    pub id: i64,
    pub state: RunState,
    /// When it fired (epoch ms): the time the list sorts by.
    pub scheduled_at: i64,
    pub finished_at: Option<i64>,
}

/// An action on many jobs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobAction {
    Start,
    Stop,
    /// Run once now, with the job's own params, routed as scheduled fires are.
    Trigger,
    Delete,
}

impl JobAction {
    pub const ALL: [JobAction; 4] = [
        JobAction::Start,
        JobAction::Stop,
        JobAction::Trigger,
        JobAction::Delete,
    ];

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            JobAction::Start => "start",
            JobAction::Stop => "stop",
            JobAction::Trigger => "trigger",
            JobAction::Delete => "delete",
        }
    }
}

/// Most jobs one [`JobsActionInput`] may name: the largest page of a job list.
pub const JOBS_ACTION_MAX: usize = 1000;

/// `action` on each of `ids` (`POST /jobs/actions`), each as its own call would do it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsActionInput {
    pub action: JobAction,
    /// 1 to [`JOBS_ACTION_MAX`] job ids; a repeated id counts once.
    pub ids: Vec<i64>,
}

/// What became of each job of a [`JobsActionInput`]: the ids done, in the order given, and
/// each refused one with the error its own call would have answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsActionResult {
    pub action: JobAction,
    pub done: Vec<i64>,
    pub refused: Vec<JobRefused>,
}

/// A job an action was refused on: the error's stable `code` and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRefused {
    pub id: i64,
    pub code: String,
    pub message: String,
}

/// One page of a list: `total` items match, this is page `page` (from 1) of `size`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    #[serde(default)]
    pub page: u64,
    #[serde(default)]
    pub size: u64,
}

/// A page of a list as asked for: `page` from 1 and `size` up to 1000.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    pub page: Option<u64>,
    pub size: Option<u64>,
}

/// A live executor instance of a group and its last heartbeat (epoch ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceView {
    pub address: String,
    pub last_heartbeat: i64,
    /// Whether the heartbeat is recent enough for the instance to get runs.
    pub alive: bool,
}

// ---- users, tokens, audit ----

/// A console user or API token holder as clients read it (never its password hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserView {
    pub id: i64,
    pub username: String,
    /// `admin`, `operator` or `viewer`.
    pub role: String,
    /// The executor groups an operator may change.
    pub group_ids: Vec<i64>,
    pub locale: Option<String>,
    pub disabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A user to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserInput {
    pub username: String,
    pub password: String,
    pub role: String,
    #[serde(default)]
    pub group_ids: Vec<i64>,
    #[serde(default)]
    pub locale: Option<String>,
}

/// A user's editable settings (all of them are written).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserUpdateInput {
    pub role: String,
    #[serde(default)]
    pub group_ids: Vec<i64>,
    #[serde(default)]
    pub locale: Option<String>,
    #[serde(default)]
    pub disabled: bool,
}

/// A password change. Users changing their own password give the current one; an admin
/// resetting someone else's does not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordInput {
    #[serde(default)]
    pub current_password: Option<String>,
    pub password: String,
}

/// An API token to create, for the caller (or, by an admin, for `user_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenInput {
    pub name: String,
    #[serde(default)]
    pub user_id: Option<i64>,
}

/// An API token as clients read it (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenView {
    pub id: i64,
    pub name: String,
    pub user_id: i64,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A token just created: `secret` is shown this once and never again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenCreated {
    pub token: TokenView,
    pub secret: String,
}

/// One audit record: who did what to which target, and the target before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditView {
    pub id: i64,
    pub at: i64,
    pub actor_id: Option<i64>,
    pub actor: String,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// Which audit records to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    pub actor: Option<String>,
    pub target_type: Option<String>,
    pub target_id: Option<String>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub page: Option<u64>,
    pub size: Option<u64>,
}

// ---- scripts ----

/// One saved version of a script job's source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptVersionView {
    pub version: i64,
    pub glue_type: GlueType,
    pub source: String,
    pub comment: String,
    pub author: String,
    pub created_at: i64,
}

/// What `GET /jobs/{id}/script/diff` takes: the two versions to compare, `from` the old side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptDiffQuery {
    pub from: i64,
    pub to: i64,
}

/// The changes from one version of a script to another, line by line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptDiffView {
    pub from: ScriptVersionView,
    pub to: ScriptVersionView,
    pub added: u64,
    pub removed: u64,
    pub lines: Vec<ScriptDiffLine>,
}

/// One line of a diff: `same`, `removed` (only in `from`) or `added` (only in `to`), with its
/// number on each side it is on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptDiffLine {
    pub change: String,
    pub old_no: Option<u64>,
    pub new_no: Option<u64>,
    pub text: String,
}

/// A new version of a script job's source; the glue type stays when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptInput {
    #[serde(default)]
    pub glue_type: Option<GlueType>,
    pub source: String,
    #[serde(default)]
    pub comment: String,
}

/// A job copy: a new stopped job with the same definition; the description when given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyInput {
    #[serde(default)]
    pub description: Option<String>,
}

// ---- dashboard ----

/// Runs of one day (the day's first instant in the admin's zone) by state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayRuns {
    pub day: i64,
    pub by_state: std::collections::BTreeMap<String, u64>,
}

/// Dispatch lateness on this admin node since it started (from the metrics histogram:
/// quantiles are bucket upper bounds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatenessView {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
}

/// The dashboard's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsView {
    pub jobs: u64,
    pub jobs_running: u64,
    pub groups: u64,
    /// Executor instances with a recent heartbeat.
    pub executors: u64,
    /// Runs scheduled today (admin's zone) by state.
    pub runs_today: std::collections::BTreeMap<String, u64>,
    /// The last 7 days, oldest first, today last.
    pub runs_per_day: Vec<DayRuns>,
    pub lateness: Option<LatenessView>,
    /// The ledger's alerts of the last 24 hours per kind (`missed`, `late`, `doubled`; every
    /// kind, zero when none): how many alerts, over how many fires.
    #[serde(default)]
    pub fire_alerts: Vec<FireAlertTotalView>,
}

/// The ledger's alerts of one kind over a period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FireAlertTotalView {
    pub kind: String,
    pub alerts: u64,
    pub fires: u64,
}

// ---- the schedule ahead ----

/// What `GET /schedule/heatmap` takes: the range `[from, to)` in epoch ms (default: from the
/// current minute, 24 hours), the bucket size (`1m`, `15m`, `1h`, `1d`; default `1m`) and an
/// executor group by app name (default: every group).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeatmapQuery {
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub bucket: Option<String>,
    pub group: Option<String>,
}

/// The fires of every running job over a range, per bucket and executor group, with the
/// busiest buckets and the jobs in them. Bucket `i` covers `[from + i * bucket_ms, ...)`, the
/// last one ending at `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatmapView {
    pub from: i64,
    pub to: i64,
    pub bucket_ms: i64,
    pub buckets: u64,
    /// Running jobs counted.
    pub jobs: u64,
    /// All fires in the range.
    pub fires: u64,
    /// Fires per bucket, all groups together.
    pub totals: Vec<u64>,
    /// Groups with running jobs.
    pub groups: Vec<HeatmapGroup>,
    /// The busiest buckets, busiest first.
    pub peaks: Vec<HeatmapPeak>,
    /// Jobs counted only up to an instant (too many cron fires to enumerate): the counts are
    /// lower bounds then.
    pub capped: Vec<HeatmapCapped>,
}

impl HeatmapView {
    /// `group`'s busiest bucket, the earliest of equals: its start and its fires; `None` when
    /// the group has no fire in the range.
    pub fn busiest(&self, group: &HeatmapGroup) -> Option<(i64, u64)> {
        group
            .counts
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (self.from + i as i64 * self.bucket_ms, *n))
    }
}

/// Fires per bucket of one executor group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatmapGroup {
    pub group_id: i64,
    pub app_name: String,
    pub title: String,
    pub fires: u64,
    pub counts: Vec<u64>,
}

/// One of the busiest buckets, `[start, end)`, and the jobs that fire in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatmapPeak {
    pub start: i64,
    pub end: i64,
    pub fires: u64,
    /// The busiest first, then by first fire: jobs with the same `first_fire` collide.
    pub jobs: Vec<HeatmapPeakJob>,
    /// Jobs firing in it beyond those named.
    pub more_jobs: u64,
}

/// A job in a peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatmapPeakJob {
    pub job_id: i64,
    pub key: String,
    pub description: String,
    pub group_id: i64,
    pub fires: u64,
    pub first_fire: i64,
}

/// A job whose fires were counted up to `until` only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatmapCapped {
    pub job_id: i64,
    pub key: String,
    pub counted: u64,
    pub until: i64,
}

/// A run's log, from `from_line` to `to_line`; `end` once the run is final and nothing new
/// is left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLog {
    pub from_line: i32,
    pub to_line: i32,
    pub content: String,
    pub end: bool,
}

/// The error body of every failed JSON API call: `code` and `message` at the top, the same
/// again under `error` (the form of the first releases, kept for their clients), and the
/// offending `field` of an `invalid_input` when there is one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub field: Option<String>,
    /// Each wrong item of a list input (`POST /jobs/bulk`), when there are some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ItemError>,
    pub error: ErrorDetail,
}

/// One wrong item of a list input: its index in the list, the field (when one is wrong)
/// and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemError {
    pub index: u64,
    #[serde(default)]
    pub field: Option<String>,
    pub message: String,
}

/// A stable machine-readable `code` (`invalid_input`, `not_found`, `conflict`,
/// `unauthorized`, `forbidden`, `rate_limited`, `executor_error`, `unavailable`, `internal`)
/// and a message for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// An alarm channel as clients write it. `config` depends on `kind`:
///
/// - `email`: `host`, `port` (default by `tls`: 25, 587, 465), `tls` (`none`, `starttls`
///   (default), `tls`), `user` and `password` (both or neither), `from`, `to` (a list);
/// - `webhook`: `url`, `secret` (requests carry `X-Tickwork-Signature`);
/// - `dingtalk`, `feishu`: `url`, optional `secret` (the robot's signing secret);
/// - `wecom`, `slack`: `url`.
///
/// On an update, a `secret`, `password` or `url` left out keeps its stored value (responses
/// never show them); an empty `secret` or `password` removes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmChannelInput {
    pub name: String,
    pub kind: String,
    #[serde(default)]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// Default: true.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// A stored alarm channel. Its config never shows secrets: `secret_set` and `password_set`
/// tell whether one is stored, and URLs are shown with their tokens masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlarmChannelView {
    pub id: i64,
    pub name: String,
    pub kind: String,
    pub config: serde_json::Value,
    pub enabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The outcome of `POST /alarm-channels/{id}/test`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlarmTestResult {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    pub elapsed_ms: u64,
}

/// One alarm of one run on one channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlarmDeliveryView {
    pub id: i64,
    /// The failed run; for a ledger alert, the run of its first fire.
    pub run_id: i64,
    /// The run's job.
    pub job_id: i64,
    /// Runs of the job that failed after `run_id` and joined this alarm instead of sending
    /// their own (`alarm.group_window_ms`), and the last of them.
    #[serde(default)]
    pub grouped_runs: i32,
    #[serde(default)]
    pub last_run_id: Option<i64>,
    /// When it was first due; the job's next alarm on the channel waits a window from here.
    pub due_at: i64,
    /// The ledger's alert (missed, late or doubled fires) this delivery sends; `None` for a
    /// failed run.
    #[serde(default)]
    pub fire_alert_id: Option<i64>,
    pub channel_id: i64,
    pub channel_name: String,
    pub kind: String,
    /// `pending`, `sent` or `failed`.
    pub state: String,
    /// Attempts made so far.
    pub attempts: i32,
    /// When a pending delivery is tried next.
    #[serde(default)]
    pub next_attempt_at: Option<i64>,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub sent_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Filters of `GET /alarm-deliveries`: `page` counts from 1, `limit` rows per page (50).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmDeliveryQuery {
    #[serde(default)]
    pub run_id: Option<i64>,
    #[serde(default)]
    pub job_id: Option<i64>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub page: Option<u64>,
    #[serde(default)]
    pub limit: Option<u64>,
}
