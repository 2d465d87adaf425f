//! The types of the JSON API under `/openapi/v1`, shared by the admin, `tickwork-client` and
//! the CLI. Inputs refuse unknown fields, so a typo in a request is an error, not a silent
//! default.

use serde::{Deserialize, Serialize};
use tickwork_core::run::RunState;
use tickwork_core::{
    BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType,
};

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
    pub updated_at: i64,
}

/// A job as clients write it. Every field but `group_id` has a default; names are the JSON
/// names of the REST API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobInput {
    /// Stable key for import/export; generated when absent.
    #[serde(default)]
    pub key: Option<String>,
    pub group_id: i64,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub alarm_channels: String,
    #[serde(default = "default_schedule_type")]
    pub schedule_type: ScheduleType,
    #[serde(default)]
    pub schedule_conf: String,
    /// IANA zone; the admin's default when absent.
    #[serde(default)]
    pub time_zone: Option<String>,
    #[serde(default = "default_misfire")]
    pub misfire_strategy: MisfireStrategy,
    #[serde(default = "default_route")]
    pub route_strategy: RouteStrategy,
    #[serde(default)]
    pub handler: String,
    #[serde(default)]
    pub params: String,
    #[serde(default = "default_block")]
    pub block_strategy: BlockStrategy,
    #[serde(default)]
    pub timeout_s: i32,
    #[serde(default)]
    pub retry_count: i32,
    #[serde(default)]
    pub retry_backoff_ms: i64,
    #[serde(default)]
    pub child_job_ids: Vec<i64>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default = "default_glue")]
    pub glue_type: GlueType,
    #[serde(default)]
    pub glue_source: String,
    /// Start the job at once (create only).
    #[serde(default)]
    pub start: bool,
}

fn default_schedule_type() -> ScheduleType {
    ScheduleType::None
}
fn default_misfire() -> MisfireStrategy {
    MisfireStrategy::DoNothing
}
fn default_route() -> RouteStrategy {
    RouteStrategy::First
}
fn default_block() -> BlockStrategy {
    BlockStrategy::SerialExecution
}
fn default_glue() -> GlueType {
    GlueType::Bean
}

impl JobInput {
    /// A job of `group_id` with every other field at its default: never scheduled, a BEAN
    /// job without a handler, XXL-JOB's strategies, stopped.
    pub fn new(group_id: i64) -> Self {
        JobInput {
            key: None,
            group_id,
            description: String::new(),
            owner: String::new(),
            alarm_channels: String::new(),
            schedule_type: default_schedule_type(),
            schedule_conf: String::new(),
            time_zone: None,
            misfire_strategy: default_misfire(),
            route_strategy: default_route(),
            handler: String::new(),
            params: String::new(),
            block_strategy: default_block(),
            timeout_s: 0,
            retry_count: 0,
            retry_backoff_ms: 0,
            child_job_ids: Vec::new(),
            priority: 0,
            glue_type: default_glue(),
            glue_source: String::new(),
            start: false,
        }
    }
}

impl From<&JobView> for JobInput {
    /// The input that writes `job` back as it is (a basis for edits).
    fn from(job: &JobView) -> Self {
        JobInput {
            key: Some(job.key.clone()),
            group_id: job.group_id,
            description: job.description.clone(),
            owner: job.owner.clone(),
            alarm_channels: job.alarm_channels.clone(),
            schedule_type: job.schedule_type,
            schedule_conf: job.schedule_conf.clone(),
            time_zone: Some(job.time_zone.clone()),
            misfire_strategy: job.misfire_strategy,
            route_strategy: job.route_strategy,
            handler: job.handler.clone(),
            params: job.params.clone(),
            block_strategy: job.block_strategy,
            timeout_s: job.timeout_s,
            retry_count: job.retry_count,
            retry_backoff_ms: job.retry_backoff_ms,
            child_job_ids: job.child_job_ids.clone(),
            priority: job.priority,
            glue_type: job.glue_type,
            glue_source: job.glue_source.clone(),
            start: false,
        }
    }
}

/// A job as clients read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: i64,
    pub key: String,
    pub group_id: i64,
    pub description: String,
    pub owner: String,
    pub alarm_channels: String,
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire_strategy: MisfireStrategy,
    pub route_strategy: RouteStrategy,
    pub handler: String,
    pub params: String,
    pub block_strategy: BlockStrategy,
    pub timeout_s: i32,
    pub retry_count: i32,
    pub retry_backoff_ms: i64,
    pub child_job_ids: Vec<i64>,
    pub priority: i32,
    pub glue_type: GlueType,
    pub glue_source: String,
    pub glue_updated_at: i64,
    pub status: String,
    /// `null` when stopped or waiting for a fixed-delay run to end.
    pub next_fire_at: Option<i64>,
    pub last_fire_at: Option<i64>,
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
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

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunQuery {
    pub job_id: Option<i64>,
    pub group_id: Option<i64>,
    pub state: Option<String>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

/// Which jobs to list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    pub group_id: Option<i64>,
    pub status: Option<String>,
    pub text: Option<String>,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
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

/// The error body of every failed JSON API call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// A stable machine-readable `code` (`invalid_input`, `not_found`, `conflict`,
/// `unauthorized`, `executor_error`, `internal`) and a message for people.
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
    pub run_id: i64,
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
    pub state: Option<String>,
    #[serde(default)]
    pub page: Option<u64>,
    #[serde(default)]
    pub limit: Option<u64>,
}
