//! Rows as the database holds them, and their conversion to the typed model.
//!
//! Each row struct lists its columns once, in `*_COLUMNS`, in the order of its fields; the
//! `FromRow` derive reads them by name on every backend.

use std::str::FromStr;

use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::RunState;
use tickwork_core::{
    BlockStrategy, Delivery, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType,
};

use crate::Error;
use crate::model::*;

/// Reads a stored name; a value the code does not know means the row is corrupt.
pub(crate) fn parse<T: FromStr>(column: &str, value: &str) -> Result<T, Error> {
    value
        .parse()
        .map_err(|_| Error::corrupt(format!("{column} holds the unknown value {value:?}")))
}

/// Splits a comma-separated list, dropping empty items.
pub(crate) fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty())
}

pub(crate) const GROUP_COLUMNS: &str =
    "id, app_name, title, address_mode, addresses, access_token, created_at, updated_at";

#[derive(sqlx::FromRow)]
pub(crate) struct GroupRow {
    id: i64,
    app_name: String,
    title: String,
    address_mode: String,
    addresses: String,
    access_token: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<GroupRow> for Group {
    type Error = Error;

    fn try_from(r: GroupRow) -> Result<Self, Error> {
        Ok(Group {
            id: r.id,
            address_mode: parse("address_mode", &r.address_mode)?,
            addresses: split_list(&r.addresses).map(str::to_owned).collect(),
            app_name: r.app_name,
            title: r.title,
            access_token: r.access_token,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub(crate) const REGISTRY_COLUMNS: &str = "app_name, address, updated_at";

#[derive(sqlx::FromRow)]
pub(crate) struct RegistryRow {
    app_name: String,
    address: String,
    updated_at: i64,
}

impl From<RegistryRow> for RegistryEntry {
    fn from(r: RegistryRow) -> Self {
        RegistryEntry {
            app_name: r.app_name,
            address: r.address,
            updated_at: r.updated_at,
        }
    }
}

pub(crate) const JOB_COLUMNS: &str = "id, job_key, group_id, description, owner, alarm_channels, \
     schedule_type, schedule_conf, time_zone, misfire_strategy, route_strategy, handler, params, \
     block_strategy, timeout_s, retry_count, retry_backoff_ms, child_job_ids, priority, \
     glue_type, glue_source, delivery, lateness_budget_ms, glue_updated_at, status, next_fire_at, \
     last_fire_at, version, created_at, updated_at, fires_left";

#[derive(sqlx::FromRow)]
pub(crate) struct JobRow {
    id: i64,
    job_key: String,
    group_id: i64,
    description: String,
    owner: String,
    alarm_channels: String,
    schedule_type: String,
    schedule_conf: String,
    time_zone: String,
    misfire_strategy: String,
    route_strategy: String,
    handler: String,
    params: String,
    block_strategy: String,
    timeout_s: i32,
    retry_count: i32,
    retry_backoff_ms: i64,
    child_job_ids: String,
    priority: i32,
    glue_type: String,
    glue_source: String,
    delivery: String,
    lateness_budget_ms: i64,
    glue_updated_at: i64,
    status: String,
    next_fire_at: Option<i64>,
    last_fire_at: Option<i64>,
    version: i64,
    created_at: i64,
    updated_at: i64,
    fires_left: Option<i64>,
}

impl TryFrom<JobRow> for Job {
    type Error = Error;

    fn try_from(r: JobRow) -> Result<Self, Error> {
        let child_job_ids = split_list(&r.child_job_ids)
            .map(|id| parse::<i64>("child_job_ids", id))
            .collect::<Result<_, _>>()?;
        Ok(Job {
            id: r.id,
            key: r.job_key,
            spec: JobSpec {
                group_id: r.group_id,
                description: r.description,
                owner: r.owner,
                alarm_channels: r.alarm_channels,
                schedule_type: parse::<ScheduleType>("schedule_type", &r.schedule_type)?,
                schedule_conf: r.schedule_conf,
                time_zone: r.time_zone,
                misfire_strategy: parse::<MisfireStrategy>(
                    "misfire_strategy",
                    &r.misfire_strategy,
                )?,
                route_strategy: parse::<RouteStrategy>("route_strategy", &r.route_strategy)?,
                handler: r.handler,
                params: r.params,
                block_strategy: parse::<BlockStrategy>("block_strategy", &r.block_strategy)?,
                timeout_s: r.timeout_s,
                retry_count: r.retry_count,
                retry_backoff_ms: r.retry_backoff_ms,
                child_job_ids,
                priority: r.priority,
                glue_type: parse::<GlueType>("glue_type", &r.glue_type)?,
                glue_source: r.glue_source,
                delivery: parse::<Delivery>("delivery", &r.delivery)?,
                lateness_budget_ms: r.lateness_budget_ms,
            },
            status: parse("status", &r.status)?,
            next_fire_at: r.next_fire_at,
            last_fire_at: r.last_fire_at,
            fires_left: r.fires_left,
            glue_updated_at: r.glue_updated_at,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub(crate) const RUN_COLUMNS: &str = "id, job_id, group_id, scheduled_at, fire_key, trigger_type, \
     attempt, parent_run_id, executor_address, handler, params, shard_index, shard_total, state, \
     trigger_code, trigger_msg, handle_code, handle_msg, alarm_status, owner_node, priority, \
     created_at, dispatched_at, finished_at, timeout_s";

#[derive(sqlx::FromRow)]
pub(crate) struct RunRow {
    id: i64,
    job_id: i64,
    group_id: i64,
    scheduled_at: i64,
    fire_key: Option<i64>,
    trigger_type: String,
    attempt: i32,
    parent_run_id: Option<i64>,
    executor_address: Option<String>,
    handler: String,
    params: String,
    shard_index: Option<i32>,
    shard_total: Option<i32>,
    state: String,
    trigger_code: i32,
    trigger_msg: Option<String>,
    handle_code: i32,
    handle_msg: Option<String>,
    alarm_status: i32,
    owner_node: Option<String>,
    priority: i32,
    created_at: i64,
    dispatched_at: Option<i64>,
    finished_at: Option<i64>,
    timeout_s: Option<i64>,
}

impl TryFrom<RunRow> for Run {
    type Error = Error;

    fn try_from(r: RunRow) -> Result<Self, Error> {
        Ok(Run {
            id: r.id,
            job_id: r.job_id,
            group_id: r.group_id,
            scheduled_at: r.scheduled_at,
            fire_key: r.fire_key,
            trigger_type: parse::<TriggerType>("trigger_type", &r.trigger_type)?,
            attempt: r.attempt,
            parent_run_id: r.parent_run_id,
            executor_address: r.executor_address,
            handler: r.handler,
            params: r.params,
            shard_index: r.shard_index,
            shard_total: r.shard_total,
            state: parse::<RunState>("state", &r.state)?,
            trigger_code: r.trigger_code,
            trigger_msg: r.trigger_msg,
            handle_code: r.handle_code,
            handle_msg: r.handle_msg,
            alarm_status: AlarmStatus::from_code(r.alarm_status).ok_or_else(|| {
                Error::corrupt(format!(
                    "alarm_status holds the unknown value {}",
                    r.alarm_status
                ))
            })?,
            owner_node: r.owner_node,
            priority: r.priority,
            created_at: r.created_at,
            dispatched_at: r.dispatched_at,
            finished_at: r.finished_at,
            timeout_s: r.timeout_s.map(|t| i32::try_from(t).unwrap_or(i32::MAX)),
        })
    }
}

pub(crate) const ALARM_CHANNEL_COLUMNS: &str =
    "id, name, kind, config, enabled, created_at, updated_at";

#[derive(sqlx::FromRow)]
pub(crate) struct AlarmChannelRow {
    id: i64,
    name: String,
    kind: String,
    config: String,
    enabled: i32,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<AlarmChannelRow> for AlarmChannel {
    type Error = Error;

    fn try_from(r: AlarmChannelRow) -> Result<Self, Error> {
        Ok(AlarmChannel {
            id: r.id,
            kind: parse("kind", &r.kind)?,
            name: r.name,
            config: r.config,
            enabled: r.enabled != 0,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub(crate) const DELIVERY_COLUMNS: &str = "id, run_id, channel_id, channel_name, kind, state, \
     attempts, next_attempt_at, last_error, claimed_by, claimed_until, sent_at, created_at, \
     updated_at, alert_id, job_id, due_at, grouped_runs, last_run_id";

#[derive(sqlx::FromRow)]
pub(crate) struct DeliveryRow {
    id: i64,
    run_id: i64,
    channel_id: i64,
    channel_name: String,
    kind: String,
    state: String,
    attempts: i32,
    next_attempt_at: i64,
    last_error: Option<String>,
    claimed_by: Option<String>,
    claimed_until: Option<i64>,
    sent_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    alert_id: i64,
    job_id: i64,
    due_at: i64,
    grouped_runs: i32,
    last_run_id: Option<i64>,
}

impl TryFrom<DeliveryRow> for AlarmDelivery {
    type Error = Error;

    fn try_from(r: DeliveryRow) -> Result<Self, Error> {
        Ok(AlarmDelivery {
            id: r.id,
            run_id: r.run_id,
            job_id: r.job_id,
            channel_id: r.channel_id,
            channel_name: r.channel_name,
            kind: parse("kind", &r.kind)?,
            state: parse("state", &r.state)?,
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            due_at: r.due_at,
            grouped_runs: r.grouped_runs,
            last_run_id: r.last_run_id,
            last_error: r.last_error,
            claimed_by: r.claimed_by,
            claimed_until: r.claimed_until,
            sent_at: r.sent_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
            alert_id: (r.alert_id != 0).then_some(r.alert_id),
        })
    }
}

pub(crate) const REPORT_COLUMNS: &str =
    "day, running_count, succeeded_count, failed_count, updated_at";

#[derive(sqlx::FromRow)]
pub(crate) struct ReportRow {
    day: i64,
    running_count: i64,
    succeeded_count: i64,
    failed_count: i64,
    updated_at: i64,
}

impl From<ReportRow> for RunReport {
    fn from(r: ReportRow) -> Self {
        RunReport {
            day: r.day,
            running: r.running_count,
            succeeded: r.succeeded_count,
            failed: r.failed_count,
            updated_at: r.updated_at,
        }
    }
}

pub(crate) const NODE_COLUMNS: &str = "id, address, started_at, heartbeat_at";

#[derive(sqlx::FromRow)]
pub(crate) struct NodeRow {
    id: String,
    address: String,
    started_at: i64,
    heartbeat_at: i64,
}

impl From<NodeRow> for Node {
    fn from(r: NodeRow) -> Self {
        Node {
            id: r.id,
            address: r.address,
            started_at: r.started_at,
            heartbeat_at: r.heartbeat_at,
        }
    }
}

pub(crate) const USER_COLUMNS: &str =
    "id, username, password_hash, role, group_ids, locale, disabled, created_at, updated_at";

#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    id: i64,
    username: String,
    password_hash: String,
    role: String,
    group_ids: String,
    locale: Option<String>,
    disabled: i64,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<UserRow> for User {
    type Error = Error;

    fn try_from(r: UserRow) -> Result<Self, Error> {
        Ok(User {
            id: r.id,
            role: parse("role", &r.role)?,
            group_ids: split_list(&r.group_ids)
                .map(|id| parse::<i64>("group_ids", id))
                .collect::<Result<_, _>>()?,
            username: r.username,
            password_hash: r.password_hash,
            locale: r.locale,
            disabled: r.disabled != 0,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub(crate) const SESSION_COLUMNS: &str =
    "id_hash, user_id, csrf_token, created_at, expires_at, last_seen_at";

#[derive(sqlx::FromRow)]
pub(crate) struct SessionRow {
    id_hash: String,
    user_id: i64,
    csrf_token: String,
    created_at: i64,
    expires_at: i64,
    last_seen_at: i64,
}

impl From<SessionRow> for Session {
    fn from(r: SessionRow) -> Self {
        Session {
            id_hash: r.id_hash,
            user_id: r.user_id,
            csrf_token: r.csrf_token,
            created_at: r.created_at,
            expires_at: r.expires_at,
            last_seen_at: r.last_seen_at,
        }
    }
}

pub(crate) const API_TOKEN_COLUMNS: &str =
    "id, name, token_hash, user_id, created_at, last_used_at, revoked_at";

#[derive(sqlx::FromRow)]
pub(crate) struct ApiTokenRow {
    id: i64,
    name: String,
    token_hash: String,
    user_id: i64,
    created_at: i64,
    last_used_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl From<ApiTokenRow> for ApiToken {
    fn from(r: ApiTokenRow) -> Self {
        ApiToken {
            id: r.id,
            name: r.name,
            token_hash: r.token_hash,
            user_id: r.user_id,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
        }
    }
}

pub(crate) const AUDIT_COLUMNS: &str =
    "id, at, actor_id, actor, action, target_type, target_id, before_json, after_json";

#[derive(sqlx::FromRow)]
pub(crate) struct AuditRow {
    id: i64,
    at: i64,
    actor_id: Option<i64>,
    actor: String,
    action: String,
    target_type: String,
    target_id: String,
    before_json: Option<String>,
    after_json: Option<String>,
}

impl From<AuditRow> for AuditEntry {
    fn from(r: AuditRow) -> Self {
        AuditEntry {
            id: r.id,
            at: r.at,
            actor_id: r.actor_id,
            actor: r.actor,
            action: r.action,
            target_type: r.target_type,
            target_id: r.target_id,
            before: r.before_json,
            after: r.after_json,
        }
    }
}

pub(crate) const SCRIPT_VERSION_COLUMNS: &str =
    "id, job_id, version, glue_type, source, comment, author, created_at";

#[derive(sqlx::FromRow)]
pub(crate) struct ScriptVersionRow {
    id: i64,
    job_id: i64,
    version: i64,
    glue_type: String,
    source: String,
    comment: String,
    author: String,
    created_at: i64,
}

impl TryFrom<ScriptVersionRow> for ScriptVersion {
    type Error = Error;

    fn try_from(r: ScriptVersionRow) -> Result<Self, Error> {
        Ok(ScriptVersion {
            id: r.id,
            job_id: r.job_id,
            version: r.version,
            glue_type: parse::<GlueType>("glue_type", &r.glue_type)?,
            source: r.source,
            comment: r.comment,
            author: r.author,
            created_at: r.created_at,
        })
    }
}

/// Converts every row, failing on the first unreadable one.
pub(crate) fn convert<R, T>(rows: Vec<R>) -> Result<Vec<T>, Error>
where
    T: TryFrom<R, Error = Error>,
{
    rows.into_iter().map(T::try_from).collect()
}
