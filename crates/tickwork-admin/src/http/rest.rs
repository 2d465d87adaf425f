//! The REST API under `/openapi/v1`: bearer-token authentication, then handlers that only
//! translate between HTTP and the [`Service`].

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use serde::Deserialize;
use tickwork_core::{ScheduleType, TriggerType};
use tickwork_protocol::api::{
    AlarmChannelInput, AlarmChannelView, AlarmDeliveryQuery, AlarmTestResult, AuditQuery,
    CopyInput, GroupInput, HeatmapQuery, HeatmapView, JobInput, JobListItem, JobQuery,
    JobsActionInput, JobsActionResult, JobsBulkCreated, JobsBulkInput, PasswordInput, RunQuery,
    ScriptInput, TokenInput, TriggerInput, UserInput, UserUpdateInput,
};

use super::ApiError;
use super::extract::{ApiJson, ApiJsonOr, ApiQuery, BULK_BODY_LIMIT, Caller, Id, Ids, Names};
use super::rest_workflows::*;
use crate::{Error, Service};
use tickwork_protocol::submissions::{
    Completions, CompletionsAck, CompletionsAcked, SubmissionInput, SubmissionPutView,
    SubmissionView, SubmissionsBatchInput, SubmissionsBatchResult,
};

/// The routes and [`API_ROUTES`] (which the OpenAPI document and its conformance tests
/// describe, exactly) come from the same table, so they cannot drift apart.
macro_rules! rest_api {
    ($( $path:literal => { $( $method:ident : $handler:ident ),+ $(,)? } )+) => {
        fn rest_routes() -> Router<Service> {
            Router::new()
                $( .route($path, MethodRouter::new() $( .$method($handler) )+ ) )+
        }

        /// Every REST route as (lowercase method, path under `/openapi/v1`).
        pub const API_ROUTES: &[(&str, &str)] = &[
            $( $( (stringify!($method), $path) ),+ ),+
        ];
    };
}

rest_api! {
    "/me" => { get: me }
    "/groups" => { get: groups_list, post: group_create }
    "/groups/{id}" => { get: group_get, put: group_update, delete: group_delete }
    "/groups/{id}/instances" => { get: group_instances }
    "/groups/{id}/token" => { post: group_token_rotate }
    "/jobs" => { get: jobs_list, post: job_create }
    "/jobs/bulk" => { post: jobs_bulk_create }
    "/jobs/actions" => { post: jobs_act }
    "/jobs/{id}" => { get: job_get, put: job_update, delete: job_delete }
    "/jobs/{id}/start" => { post: job_start }
    "/jobs/{id}/stop" => { post: job_stop }
    "/jobs/{id}/trigger" => { post: job_trigger }
    "/jobs/{id}/copy" => { post: job_copy }
    "/jobs/{id}/script" => { put: script_save }
    "/jobs/{id}/script/versions" => { get: script_versions }
    "/jobs/{id}/script/diff" => { get: script_diff }
    "/jobs/{id}/script/versions/{version}/restore" => { post: script_restore }
    "/runs" => { get: runs_list, delete: runs_clear }
    "/runs/{id}" => { get: run_get }
    "/runs/{id}/kill" => { post: run_kill }
    "/runs/{id}/log" => { get: run_log }
    "/schedule/preview" => { get: schedule_preview_get, post: schedule_preview }
    "/schedule/heatmap" => { get: schedule_heatmap }
    "/users" => { get: users_list, post: user_create }
    "/users/{id}" => { get: user_get, put: user_update, delete: user_delete }
    "/users/{id}/password" => { put: user_password }
    "/tokens" => { get: tokens_list, post: token_create }
    "/tokens/{id}" => { delete: token_revoke }
    "/audit" => { get: audit_list }
    "/stats" => { get: stats }
    "/alarm-channels" => { get: alarm_channels_list, post: alarm_channel_create }
    "/alarm-channels/{id}" => {
        get: alarm_channel_get, put: alarm_channel_update, delete: alarm_channel_delete
    }
    "/alarm-channels/{id}/test" => { post: alarm_channel_test }
    "/alarm-deliveries" => { get: alarm_deliveries_list }
    "/submissions/{app}" => { post: submissions_put_many }
    "/completions/{app}" => { get: completions_list }
    "/completions/{app}/ack" => { post: completions_ack }
    "/submissions/{app}/{key}" => {
        get: submission_get, put: submission_put, delete: submission_cancel
    }
    "/workflows" => { get: workflows_list, post: workflow_create }
    "/workflows/{workflow}" => {
        get: workflow_get, put: workflow_update, delete: workflow_delete
    }
    "/workflows/{workflow}/run" => { post: workflow_run }
    "/workflows/{workflow}/instances" => { get: workflow_instances }
    "/workflow-instances/{id}" => { get: workflow_instance_get }
    "/workflow-instances/{id}/stop" => { post: workflow_instance_stop }
    "/workflow-instances/{id}/resume" => { post: workflow_instance_resume }
    "/workflow-instances/{id}/nodes/{node}/mark-succeeded" => {
        post: workflow_node_mark_succeeded
    }
    "/workflow-instances/{id}/nodes/{node}/rerun" => { post: workflow_node_rerun }
}

/// The REST routes, behind the API token check.
pub(super) fn router(service: Service) -> Router<Service> {
    rest_routes()
        .route_layer(axum::middleware::from_fn_with_state(
            service,
            require_api_token,
        ))
        .fallback(api_not_found)
        .method_not_allowed_fallback(api_method_not_allowed)
}

/// The token of an `Authorization: Bearer <token>` header; the scheme's case does not matter
/// (RFC 7235).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Authenticates a REST call by its bearer token and hands its [`Principal`] to the handler.
async fn require_api_token(
    State(admin): State<Service>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match admin.auth().api_principal(bearer).await {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => ApiError(e).into_response(),
    }
}

async fn api_not_found() -> ApiError {
    ApiError(Error::NotFound("no such endpoint".into()))
}

async fn api_method_not_allowed(method: Method) -> Response {
    let mut resp = ApiError(Error::invalid(format!(
        "method {method} is not allowed on this endpoint"
    )))
    .into_response();
    *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    resp
}

/// The OpenAPI 3.1 document of the REST API.
pub(super) async fn openapi_document() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document().to_string(),
    )
        .into_response()
}

// ---- REST API ----

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

fn ok<T>(v: T) -> ApiResult<T> {
    Ok(axum::Json(v))
}

/// A created secret: shown in this answer only, which no cache may keep.
fn created_secret<T: serde::Serialize>(v: T) -> Response {
    (
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(v),
    )
        .into_response()
}

/// `page` (from 1) and `size` of the REST API, or the older `offset` and `limit`.
fn page_to_offset(
    page: Option<u64>,
    size: Option<u64>,
    offset: Option<u64>,
    limit: Option<u64>,
) -> Result<(Option<u64>, Option<u64>), Error> {
    if page.is_none() && size.is_none() {
        return Ok((offset, limit));
    }
    if offset.is_some() || limit.is_some() {
        return Err(Error::invalid_field(
            "page",
            "use page and size, or offset and limit, not both",
        ));
    }
    let size = size.unwrap_or(50);
    let page = page.unwrap_or(1);
    if page == 0 {
        return Err(Error::invalid_field("page", "pages count from 1"));
    }
    Ok((Some((page - 1).saturating_mul(size)), Some(size)))
}

async fn me(State(a): State<Service>, Caller(p): Caller) -> ApiResult<serde_json::Value> {
    ok(serde_json::json!({
        "user_id": p.user_id,
        "username": p.username,
        "role": p.role,
        "group_ids": p.groups,
        "locale": p.locale,
        "default_time_zone": a.config().default_time_zone,
    }))
}

async fn groups_list(State(a): State<Service>) -> ApiResult<Vec<crate::GroupView>> {
    ok(a.groups().list().await?)
}

async fn group_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<GroupInput>,
) -> ApiResult<crate::GroupView> {
    ok(a.groups().create(&p, input).await?)
}

async fn group_get(State(a): State<Service>, Id(g): Id) -> ApiResult<crate::GroupView> {
    ok(a.groups().get(g).await?)
}

async fn group_update(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(g): Id,
    ApiJson(input): ApiJson<GroupInput>,
) -> ApiResult<crate::GroupView> {
    ok(a.groups().update(&p, g, input).await?)
}

async fn group_delete(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(g): Id,
) -> ApiResult<serde_json::Value> {
    a.groups().delete(&p, g).await?;
    ok(serde_json::json!({ "deleted": g }))
}

async fn group_instances(
    State(a): State<Service>,
    Id(g): Id,
) -> ApiResult<Vec<tickwork_protocol::api::InstanceView>> {
    ok(a.groups().instances(g).await?)
}

/// Sets a new executor token for the group and shows it this once.
async fn group_token_rotate(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(g): Id,
) -> Result<Response, ApiError> {
    Ok(created_secret(a.groups().rotate_token(&p, g).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobListParams {
    group_id: Option<i64>,
    status: Option<String>,
    text: Option<String>,
    sort: Option<String>,
    order: Option<String>,
    offset: Option<u64>,
    limit: Option<u64>,
    page: Option<u64>,
    size: Option<u64>,
}

async fn jobs_list(
    State(a): State<Service>,
    ApiQuery(q): ApiQuery<JobListParams>,
) -> ApiResult<tickwork_protocol::api::Page<JobListItem>> {
    let (offset, limit) = page_to_offset(q.page, q.size, q.offset, q.limit)?;
    ok(a.jobs()
        .list_with_last_runs(JobQuery {
            group_id: q.group_id,
            status: q.status,
            text: q.text,
            sort: q.sort,
            order: q.order,
            offset,
            limit,
        })
        .await?)
}

/// Starts, stops, triggers or deletes many jobs, each as its own call would.
async fn jobs_act(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<JobsActionInput>,
) -> ApiResult<JobsActionResult> {
    ok(a.jobs().act_many(&p, input, TriggerType::Api).await?)
}

async fn job_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<JobInput>,
) -> ApiResult<crate::JobView> {
    ok(a.jobs().create(&p, input).await?)
}

/// Creates up to 10,000 jobs in one transaction, all or none.
async fn jobs_bulk_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<JobsBulkInput, BULK_BODY_LIMIT>,
) -> ApiResult<JobsBulkCreated> {
    ok(a.jobs().create_many(&p, input.jobs).await?)
}

async fn job_get(State(a): State<Service>, Id(j): Id) -> ApiResult<crate::JobView> {
    ok(a.jobs().get(j).await?)
}

async fn job_update(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
    ApiJson(input): ApiJson<JobInput>,
) -> ApiResult<crate::JobView> {
    ok(a.jobs().update(&p, j, input).await?)
}

async fn job_delete(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
) -> ApiResult<serde_json::Value> {
    a.jobs().delete(&p, j).await?;
    ok(serde_json::json!({ "deleted": j }))
}

async fn job_start(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
) -> ApiResult<crate::JobView> {
    ok(a.jobs().start(&p, j).await?)
}

async fn job_stop(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
) -> ApiResult<crate::JobView> {
    ok(a.jobs().stop(&p, j).await?)
}

async fn job_trigger(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
    ApiJsonOr(input): ApiJsonOr<TriggerInput>,
) -> ApiResult<crate::RunView> {
    ok(a.jobs().trigger(&p, j, input, TriggerType::Api).await?)
}

async fn job_copy(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
    ApiJsonOr(input): ApiJsonOr<CopyInput>,
) -> ApiResult<crate::JobView> {
    ok(a.jobs().copy(&p, j, input).await?)
}

async fn script_versions(
    State(a): State<Service>,
    Id(j): Id,
) -> ApiResult<Vec<tickwork_protocol::api::ScriptVersionView>> {
    ok(a.scripts().versions(j).await?)
}

async fn script_diff(
    State(a): State<Service>,
    Id(j): Id,
    ApiQuery(q): ApiQuery<tickwork_protocol::api::ScriptDiffQuery>,
) -> ApiResult<tickwork_protocol::api::ScriptDiffView> {
    ok(a.scripts().diff_view(j, q.from, q.to).await?)
}

async fn script_save(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(j): Id,
    ApiJson(input): ApiJson<ScriptInput>,
) -> ApiResult<tickwork_protocol::api::ScriptVersionView> {
    ok(a.scripts().save(&p, j, input).await?)
}

async fn script_restore(
    State(a): State<Service>,
    Caller(p): Caller,
    Ids(j, v): Ids,
) -> ApiResult<tickwork_protocol::api::ScriptVersionView> {
    ok(a.scripts().restore(&p, j, v).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunListParams {
    job_id: Option<i64>,
    group_id: Option<i64>,
    state: Option<String>,
    from: Option<i64>,
    to: Option<i64>,
    offset: Option<u64>,
    limit: Option<u64>,
    page: Option<u64>,
    size: Option<u64>,
}

async fn runs_list(
    State(a): State<Service>,
    ApiQuery(q): ApiQuery<RunListParams>,
) -> ApiResult<tickwork_protocol::api::Page<crate::RunView>> {
    let (offset, limit) = page_to_offset(q.page, q.size, q.offset, q.limit)?;
    ok(a.runs()
        .list(RunQuery {
            job_id: q.job_id,
            group_id: q.group_id,
            state: q.state,
            from: q.from,
            to: q.to,
            offset,
            limit,
        })
        .await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClearParams {
    before: Option<i64>,
    before_days: Option<i64>,
    job_id: Option<i64>,
    group_id: Option<i64>,
}

async fn runs_clear(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiQuery(q): ApiQuery<ClearParams>,
) -> ApiResult<serde_json::Value> {
    let before = match (q.before, q.before_days) {
        (Some(before), None) => before,
        (None, Some(days)) => a.runs().clear_before_days(days)?,
        (Some(_), Some(_)) => {
            return Err(Error::invalid_field(
                "before_days",
                "give before or before_days, not both",
            )
            .into());
        }
        (None, None) => {
            return Err(Error::invalid_field(
                "before",
                "is required (epoch milliseconds), or before_days",
            )
            .into());
        }
    };
    let deleted = a.runs().clear(&p, before, q.job_id, q.group_id).await?;
    ok(serde_json::json!({ "deleted": deleted }))
}

async fn run_get(State(a): State<Service>, Id(r): Id) -> ApiResult<crate::RunView> {
    ok(a.runs().get(r).await?)
}

async fn run_kill(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(r): Id,
) -> ApiResult<crate::RunView> {
    ok(a.runs().kill(&p, r).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    from_line: Option<i32>,
}

async fn run_log(
    State(a): State<Service>,
    Id(r): Id,
    ApiQuery(q): ApiQuery<LogQuery>,
) -> ApiResult<tickwork_protocol::api::RunLog> {
    let log = a.runs().log(r, q.from_line.unwrap_or(1)).await?;
    ok(tickwork_protocol::api::RunLog {
        from_line: log.from_line_num,
        to_line: log.to_line_num,
        content: log.log_content,
        end: log.is_end,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewInput {
    schedule_type: ScheduleType,
    schedule_conf: String,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    n: Option<usize>,
}

async fn schedule_preview(
    State(a): State<Service>,
    ApiJson(p): ApiJson<PreviewInput>,
) -> ApiResult<serde_json::Value> {
    let fires = a.jobs().schedule_preview(
        p.schedule_type,
        &p.schedule_conf,
        p.time_zone.as_deref(),
        p.n.unwrap_or(5),
    )?;
    ok(serde_json::json!({ "fires": fires }))
}

/// `GET /schedule/preview?type=CRON&conf=…&tz=…&n=5`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewQuery {
    #[serde(rename = "type")]
    kind: Option<String>,
    conf: Option<String>,
    tz: Option<String>,
    n: Option<usize>,
}

async fn schedule_preview_get(
    State(a): State<Service>,
    ApiQuery(q): ApiQuery<PreviewQuery>,
) -> ApiResult<serde_json::Value> {
    let kind: ScheduleType = q
        .kind
        .as_deref()
        .unwrap_or("CRON")
        .parse()
        .map_err(|e| Error::invalid_field("type", e))?;
    let fires = a.jobs().schedule_preview(
        kind,
        q.conf.as_deref().unwrap_or(""),
        q.tz.as_deref(),
        q.n.unwrap_or(5),
    )?;
    ok(serde_json::json!({ "fires": fires }))
}

/// `GET /schedule/heatmap?from=&to=&bucket=&group=`.
async fn schedule_heatmap(
    State(a): State<Service>,
    ApiQuery(q): ApiQuery<HeatmapQuery>,
) -> ApiResult<HeatmapView> {
    ok(a.jobs().heatmap(q).await?)
}

async fn users_list(
    State(a): State<Service>,
    Caller(p): Caller,
) -> ApiResult<Vec<tickwork_protocol::api::UserView>> {
    ok(a.users().list(&p).await?)
}

async fn user_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<UserInput>,
) -> ApiResult<tickwork_protocol::api::UserView> {
    ok(a.users().create(&p, input).await?)
}

async fn user_get(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(u): Id,
) -> ApiResult<tickwork_protocol::api::UserView> {
    ok(a.users().get(&p, u).await?)
}

async fn user_update(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(u): Id,
    ApiJson(input): ApiJson<UserUpdateInput>,
) -> ApiResult<tickwork_protocol::api::UserView> {
    ok(a.users().update(&p, u, input).await?)
}

async fn user_delete(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(u): Id,
) -> ApiResult<serde_json::Value> {
    a.users().delete(&p, u).await?;
    ok(serde_json::json!({ "deleted": u }))
}

async fn user_password(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(u): Id,
    ApiJson(input): ApiJson<PasswordInput>,
) -> ApiResult<serde_json::Value> {
    a.users().set_password(&p, u, input).await?;
    ok(serde_json::json!({ "changed": u }))
}

async fn tokens_list(
    State(a): State<Service>,
    Caller(p): Caller,
) -> ApiResult<Vec<tickwork_protocol::api::TokenView>> {
    ok(a.tokens().list(&p).await?)
}

async fn token_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<TokenInput>,
) -> Result<Response, ApiError> {
    Ok(created_secret(a.tokens().create(&p, input).await?))
}

async fn token_revoke(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(t): Id,
) -> ApiResult<tickwork_protocol::api::TokenView> {
    ok(a.tokens().revoke(&p, t).await?)
}

async fn audit_list(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<tickwork_protocol::api::Page<tickwork_protocol::api::AuditView>> {
    ok(a.audit_log().list(&p, q).await?)
}

async fn stats(State(a): State<Service>) -> ApiResult<tickwork_protocol::api::StatsView> {
    ok(a.dashboard().stats().await?)
}

// ---- alarms ----

async fn alarm_channels_list(
    State(a): State<Service>,
    Caller(p): Caller,
) -> ApiResult<Vec<AlarmChannelView>> {
    ok(a.alarms().channels_list(&p).await?)
}

async fn alarm_channel_create(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiJson(input): ApiJson<AlarmChannelInput>,
) -> ApiResult<AlarmChannelView> {
    ok(a.alarms().channel_create(&p, input).await?)
}

async fn alarm_channel_get(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(c): Id,
) -> ApiResult<AlarmChannelView> {
    ok(a.alarms().channel_get(&p, c).await?)
}

async fn alarm_channel_update(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(c): Id,
    ApiJson(input): ApiJson<AlarmChannelInput>,
) -> ApiResult<AlarmChannelView> {
    ok(a.alarms().channel_update(&p, c, input).await?)
}

async fn alarm_channel_delete(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(c): Id,
) -> ApiResult<serde_json::Value> {
    a.alarms().channel_delete(&p, c).await?;
    ok(serde_json::json!({ "deleted": c }))
}

async fn alarm_channel_test(
    State(a): State<Service>,
    Caller(p): Caller,
    Id(c): Id,
) -> ApiResult<AlarmTestResult> {
    ok(a.alarms().channel_test(&p, c).await?)
}

async fn alarm_deliveries_list(
    State(a): State<Service>,
    Caller(p): Caller,
    ApiQuery(q): ApiQuery<AlarmDeliveryQuery>,
) -> ApiResult<tickwork_protocol::api::Page<tickwork_protocol::api::AlarmDeliveryView>> {
    ok(a.alarms().deliveries_list(&p, q).await?)
}

// ---- submissions ----

/// The app name and key of `/submissions/{app}/{key}`.
fn app_and_key(Names(names): Names) -> Result<(String, String), ApiError> {
    match <[String; 2]>::try_from(names) {
        Ok([app, key]) => Ok((app, key)),
        Err(_) => Err(Error::Internal("the route does not have an app and a key".into()).into()),
    }
}

async fn submission_put(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
    ApiJson(input): ApiJson<SubmissionInput>,
) -> ApiResult<SubmissionPutView> {
    let (app, key) = app_and_key(names)?;
    ok(a.submissions().put(&p, &app, &key, input).await?)
}

/// Up to 1,000 submissions of one group, each written on its own.
async fn submissions_put_many(
    State(a): State<Service>,
    Caller(p): Caller,
    Names(names): Names,
    ApiJson(input): ApiJson<SubmissionsBatchInput, BULK_BODY_LIMIT>,
) -> ApiResult<SubmissionsBatchResult> {
    let app = names.into_iter().next().unwrap_or_default();
    ok(a.submissions().put_many(&p, &app, input.items).await?)
}

async fn submission_get(
    State(a): State<Service>,
    Caller(_): Caller,
    names: Names,
) -> ApiResult<SubmissionView> {
    let (app, key) = app_and_key(names)?;
    ok(a.submissions().get(&app, &key).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelParams {
    /// Kill its running runs rather than refuse.
    #[serde(default)]
    kill: bool,
}

async fn submission_cancel(
    State(a): State<Service>,
    Caller(p): Caller,
    names: Names,
    ApiQuery(q): ApiQuery<CancelParams>,
) -> ApiResult<SubmissionView> {
    let (app, key) = app_and_key(names)?;
    ok(a.submissions().cancel(&p, &app, &key, q.kill).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompletionsParams {
    after: Option<i64>,
    limit: Option<u64>,
}

async fn completions_list(
    State(a): State<Service>,
    Caller(_): Caller,
    Names(names): Names,
    ApiQuery(q): ApiQuery<CompletionsParams>,
) -> ApiResult<Completions> {
    let app = names.into_iter().next().unwrap_or_default();
    ok(a.submissions().completions(&app, q.after, q.limit).await?)
}

async fn completions_ack(
    State(a): State<Service>,
    Caller(p): Caller,
    Names(names): Names,
    ApiJson(ack): ApiJson<CompletionsAck>,
) -> ApiResult<CompletionsAcked> {
    let app = names.into_iter().next().unwrap_or_default();
    ok(a.submissions().acknowledge(&p, &app, ack).await?)
}
