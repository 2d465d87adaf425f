//! Jobs: the filtered list, create/edit/copy forms with inline errors and a live preview of
//! the next fire times, the job's page with "run once", and start/stop/delete.

use std::collections::HashMap;

use askama::Template;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tickwork_core::schedule::Schedule;
use tickwork_core::{BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType};
use tickwork_protocol::api::{
    GroupView, JobInput, JobQuery, JobView, RunQuery, RunView, TriggerInput,
};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field, Form, Opt};
use crate::{ErrorCode, Service};

const PAGE: u64 = 50;

/// `group id -> "title (app)"`, for lists and selects.
fn group_names(groups: &[GroupView]) -> HashMap<i64, String> {
    groups
        .iter()
        .map(|g| {
            let name = if g.title.is_empty() {
                g.app_name.clone()
            } else {
                format!("{} ({})", g.title, g.app_name)
            };
            (g.id, name)
        })
        .collect()
}

/// One row of the job list.
pub struct JobRow {
    pub job: JobView,
    pub group: String,
    pub next: String,
    pub running: bool,
    pub can_change: bool,
}

#[derive(Template)]
#[template(path = "jobs.html")]
struct JobsPage {
    c: Ctx,
    rows: Vec<JobRow>,
    groups: Vec<Opt>,
    statuses: Vec<Opt>,
    text: String,
    total: u64,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    group_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    offset: u64,
}

pub async fn list(State(a): State<Service>, v: Visitor, Query(q): Query<ListQuery>) -> Response {
    let groups = match a.groups().list().await {
        Ok(g) => g,
        Err(e) => return v.error_page(e),
    };
    let names = group_names(&groups);
    let query = JobQuery {
        group_id: q.group_id.parse().ok(),
        status: Some(q.status.clone()).filter(|s| !s.is_empty()),
        text: Some(q.text.clone()).filter(|s| !s.trim().is_empty()),
        offset: Some(q.offset),
        limit: Some(PAGE),
    };
    let page = match a.jobs().list(query).await {
        Ok(p) => p,
        Err(e) => return v.error_page(e),
    };
    let c = v.ctx("jobs");
    let rows = page
        .items
        .into_iter()
        .map(|job| JobRow {
            group: names.get(&job.group_id).cloned().unwrap_or_default(),
            next: c.time(job.next_fire_at),
            running: job.status == "running",
            can_change: v.can_change(job.group_id),
            job,
        })
        .collect();
    let mut group_opts = vec![(String::new(), v.t("all").to_owned())];
    group_opts.extend(
        groups
            .iter()
            .map(|g| (g.id.to_string(), names[&g.id].clone())),
    );
    let statuses = Opt::list(
        [
            (String::new(), v.t("all").to_owned()),
            ("running".into(), v.t("started").to_owned()),
            ("stopped".into(), v.t("stopped").to_owned()),
        ],
        &q.status,
    );
    let link = |offset: u64| {
        let qs = serde_urlencoded::to_string([
            ("group_id", q.group_id.as_str()),
            ("status", q.status.as_str()),
            ("text", q.text.as_str()),
            ("offset", &offset.to_string()),
        ])
        .unwrap_or_default();
        format!("/jobs?{qs}")
    };
    ui::render(&JobsPage {
        prev: (q.offset > 0).then(|| link(q.offset.saturating_sub(PAGE))),
        next: (q.offset + PAGE < page.total).then(|| link(q.offset + PAGE)),
        c,
        rows,
        groups: Opt::list(group_opts, &q.group_id),
        statuses,
        text: q.text,
        total: page.total,
    })
}

// ---- the form ----

#[derive(Template)]
#[template(path = "job_form.html")]
struct JobFormPage {
    c: Ctx,
    title: &'static str,
    action: String,
    fields: Vec<Field>,
    /// Preview of the schedule as saved or submitted, shown before any script runs.
    preview: Result<Vec<String>, String>,
    cancel: String,
}

/// The form's values by field name.
type Values = HashMap<&'static str, String>;

/// Every field of the job form, filled from `values`. `create` adds the script and "start".
fn job_fields(v: &Visitor, groups: &[GroupView], values: &Values, create: bool) -> Vec<Field> {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    let names = group_names(groups);
    let group_opts = Opt::list(
        groups
            .iter()
            .filter(|g| v.can_change(g.id))
            .map(|g| (g.id.to_string(), names[&g.id].clone())),
        &get("group_id"),
    );
    fn named<T: Copy + std::fmt::Display>(all: &[T], current: &str) -> Vec<Opt> {
        Opt::list(all.iter().map(|x| (x.to_string(), x.to_string())), current)
    }
    let mut f = vec![
        Field::new("group_id", "group", "select").options(group_opts),
        Field::new("description", "description", "text").value(get("description")),
        Field::new("owner", "owner", "text").value(get("owner")),
        Field::new("schedule_type", "schedule_type", "select")
            .options(named(ScheduleType::ALL, &get("schedule_type"))),
        Field::new("schedule_conf", "schedule_conf", "text").value(get("schedule_conf")),
        Field::new("time_zone", "time_zone", "text").value(get("time_zone")),
        Field::new("glue_type", "glue_type", "select")
            .options(named(GlueType::ALL, &get("glue_type"))),
        Field::new("handler", "handler", "text").value(get("handler")),
        Field::new("route_strategy", "route_strategy", "select")
            .options(named(RouteStrategy::ALL, &get("route_strategy"))),
        Field::new("misfire_strategy", "misfire_strategy", "select")
            .options(named(MisfireStrategy::ALL, &get("misfire_strategy"))),
        Field::new("block_strategy", "block_strategy", "select")
            .options(named(BlockStrategy::ALL, &get("block_strategy"))),
        Field::new("timeout_s", "timeout_s", "number").value(get("timeout_s")),
        Field::new("retry_count", "retry_count", "number").value(get("retry_count")),
        Field::new("retry_backoff_ms", "retry_backoff_ms", "number").value(get("retry_backoff_ms")),
        Field::new("priority", "priority", "number").value(get("priority")),
        Field::new("child_job_ids", "child_job_ids", "text")
            .value(get("child_job_ids"))
            .hint("child_job_ids_hint"),
        Field::new("alarm_channels", "alarm_channels", "text").value(get("alarm_channels")),
        Field::new("params", "params", "textarea").value(get("params")),
    ];
    if create {
        f.push(Field::new("glue_source", "glue_source", "code").value(get("glue_source")));
        f.push(Field::new("start", "start", "checkbox").value(get("start")));
    }
    f
}

fn values_of_job(j: &JobView) -> Values {
    let ids: Vec<String> = j.child_job_ids.iter().map(i64::to_string).collect();
    HashMap::from([
        ("group_id", j.group_id.to_string()),
        ("description", j.description.clone()),
        ("owner", j.owner.clone()),
        ("schedule_type", j.schedule_type.to_string()),
        ("schedule_conf", j.schedule_conf.clone()),
        ("time_zone", j.time_zone.clone()),
        ("glue_type", j.glue_type.to_string()),
        ("handler", j.handler.clone()),
        ("route_strategy", j.route_strategy.to_string()),
        ("misfire_strategy", j.misfire_strategy.to_string()),
        ("block_strategy", j.block_strategy.to_string()),
        ("timeout_s", j.timeout_s.to_string()),
        ("retry_count", j.retry_count.to_string()),
        ("retry_backoff_ms", j.retry_backoff_ms.to_string()),
        ("priority", j.priority.to_string()),
        ("child_job_ids", ids.join(",")),
        ("alarm_channels", j.alarm_channels.clone()),
        ("params", j.params.clone()),
        ("glue_source", j.glue_source.clone()),
    ])
}

fn values_of_form(form: &Form) -> Values {
    const NAMES: &[&str] = &[
        "group_id",
        "description",
        "owner",
        "schedule_type",
        "schedule_conf",
        "time_zone",
        "glue_type",
        "handler",
        "route_strategy",
        "misfire_strategy",
        "block_strategy",
        "timeout_s",
        "retry_count",
        "retry_backoff_ms",
        "priority",
        "child_job_ids",
        "alarm_channels",
        "params",
        "glue_source",
        "start",
    ];
    NAMES.iter().map(|n| (*n, form.get(n).to_owned())).collect()
}

/// Turns submitted values into a job input; every field that does not parse gets its error.
fn parse_input(v: &Visitor, values: &Values) -> Result<JobInput, HashMap<String, String>> {
    let mut errors = HashMap::new();
    let get = |k: &str| values.get(k).map(|s| s.trim()).unwrap_or("");
    let mut num = |k: &'static str| -> i64 {
        let s = get(k);
        if s.is_empty() {
            return 0;
        }
        s.parse::<i64>().unwrap_or_else(|_| {
            errors.insert(k.to_owned(), v.t("bad_number").to_owned());
            0
        })
    };
    let group_id = num("group_id");
    let timeout_s = num("timeout_s");
    let retry_count = num("retry_count");
    let retry_backoff_ms = num("retry_backoff_ms");
    let priority = num("priority");
    let mut child_job_ids = Vec::new();
    for part in get("child_job_ids")
        .split([',', ' '])
        .filter(|p| !p.is_empty())
    {
        match part.parse() {
            Ok(id) => child_job_ids.push(id),
            Err(_) => {
                errors.insert("child_job_ids".into(), v.t("bad_number").to_owned());
            }
        }
    }
    macro_rules! named {
        ($k:literal, $t:ty) => {
            match get($k).parse::<$t>() {
                Ok(x) => Some(x),
                Err(e) => {
                    errors.insert($k.to_owned(), e.to_string());
                    None
                }
            }
        };
    }
    let schedule_type = named!("schedule_type", ScheduleType);
    let glue_type = named!("glue_type", GlueType);
    let route_strategy = named!("route_strategy", RouteStrategy);
    let misfire_strategy = named!("misfire_strategy", MisfireStrategy);
    let block_strategy = named!("block_strategy", BlockStrategy);
    let int32 = |x: i64, k: &str, errors: &mut HashMap<String, String>| -> i32 {
        i32::try_from(x).unwrap_or_else(|_| {
            errors.insert(k.to_owned(), v.t("bad_number").to_owned());
            0
        })
    };
    let timeout_s = int32(timeout_s, "timeout_s", &mut errors);
    let retry_count = int32(retry_count, "retry_count", &mut errors);
    let priority = int32(priority, "priority", &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let (
        Some(schedule_type),
        Some(glue_type),
        Some(route_strategy),
        Some(misfire_strategy),
        Some(block_strategy),
    ) = (
        schedule_type,
        glue_type,
        route_strategy,
        misfire_strategy,
        block_strategy,
    )
    else {
        return Err(errors);
    };
    let mut input = JobInput::new(group_id);
    input.description = get("description").to_owned();
    input.owner = get("owner").to_owned();
    input.schedule_type = schedule_type;
    input.schedule_conf = get("schedule_conf").to_owned();
    input.time_zone = Some(get("time_zone").to_owned()).filter(|z| !z.is_empty());
    input.glue_type = glue_type;
    input.handler = get("handler").to_owned();
    input.route_strategy = route_strategy;
    input.misfire_strategy = misfire_strategy;
    input.block_strategy = block_strategy;
    input.timeout_s = timeout_s;
    input.retry_count = retry_count;
    input.retry_backoff_ms = retry_backoff_ms;
    input.priority = priority;
    input.child_job_ids = child_job_ids;
    input.alarm_channels = get("alarm_channels").to_owned();
    // Params and scripts keep their whitespace.
    input.params = values.get("params").cloned().unwrap_or_default();
    input.glue_source = values.get("glue_source").cloned().unwrap_or_default();
    input.start = matches!(get("start"), "on" | "true" | "1");
    Ok(input)
}

/// The next fires of the submitted schedule, or why it is not valid (shown on first paint).
fn preview_of(a: &Service, v: &Visitor, values: &Values) -> Result<Vec<String>, String> {
    let get = |k: &str| values.get(k).map(|s| s.trim()).unwrap_or("");
    let kind: ScheduleType = get("schedule_type").parse().map_err(|e| format!("{e}"))?;
    let zone = Some(get("time_zone"))
        .filter(|z| !z.is_empty())
        .unwrap_or(&a.config().default_time_zone);
    preview_times(kind, get("schedule_conf"), zone, v.tz())
}

/// The next five fires of a schedule, written in the schedule's own zone.
fn preview_times(
    kind: ScheduleType,
    conf: &str,
    zone: &str,
    _tz: &jiff::tz::TimeZone,
) -> Result<Vec<String>, String> {
    if kind == ScheduleType::None {
        return Ok(Vec::new());
    }
    let s = Schedule::parse(kind, conf, zone).map_err(|e| e.to_string())?;
    let tz = s.time_zone().clone();
    Ok(s.next_fires(crate::timer::now_ms(), 5)
        .into_iter()
        .map(|ms| ui::fmt_ms(Some(ms), &tz))
        .collect())
}

#[allow(clippy::too_many_arguments)]
fn form_page(
    a: &Service,
    v: &Visitor,
    groups: &[GroupView],
    title: &'static str,
    action: String,
    cancel: String,
    values: &Values,
    create: bool,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let mut c = v.ctx("jobs");
    let mut fields = job_fields(v, groups, values, create);
    if let Some(rest) = ui::place_errors(&mut fields, errors) {
        c.err = Some(rest);
    }
    let page = JobFormPage {
        preview: preview_of(a, v, values),
        c,
        title,
        action,
        fields,
        cancel,
    };
    ui::render_status(status, &page)
}

fn defaults(a: &Service) -> Values {
    let blank = JobInput::new(0);
    HashMap::from([
        ("schedule_type", ScheduleType::Cron.to_string()),
        ("schedule_conf", "0 * * * * ?".to_owned()),
        ("time_zone", a.config().default_time_zone.clone()),
        ("glue_type", blank.glue_type.to_string()),
        ("route_strategy", blank.route_strategy.to_string()),
        ("misfire_strategy", blank.misfire_strategy.to_string()),
        ("block_strategy", blank.block_strategy.to_string()),
        ("timeout_s", "0".into()),
        ("retry_count", "0".into()),
        ("retry_backoff_ms", "0".into()),
        ("priority", "0".into()),
    ])
}

pub async fn new_form(State(a): State<Service>, v: Visitor) -> Response {
    let groups = match a.groups().list().await {
        Ok(g) => g,
        Err(e) => return v.error_page(e),
    };
    form_page(
        &a,
        &v,
        &groups,
        "new_job",
        "/jobs/new".into(),
        "/jobs".into(),
        &defaults(&a),
        true,
        HashMap::new(),
        StatusCode::OK,
    )
}

pub async fn copy_form(State(a): State<Service>, v: Visitor, Path(id): Path<i64>) -> Response {
    let (groups, job) = match tokio::try_join!(a.groups().list(), a.jobs().get(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let mut values = values_of_job(&job);
    values.insert(
        "description",
        format!("{} {}", v.t("copy_of"), job.description),
    );
    form_page(
        &a,
        &v,
        &groups,
        "new_job",
        "/jobs/new".into(),
        format!("/jobs/{id}"),
        &values,
        true,
        HashMap::new(),
        StatusCode::OK,
    )
}

pub async fn create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let groups = match a.groups().list().await {
        Ok(g) => g,
        Err(e) => return v.error_page(e),
    };
    let values = values_of_form(&form);
    let result = match parse_input(&v, &values) {
        Ok(input) => v
            .ops(&a)
            .job_create(input)
            .await
            .map_err(|e| v.form_errors(&e)),
        Err(errors) => Err((ErrorCode::InvalidInput.status(), errors)),
    };
    match result {
        Ok(job) => ui::see_other(&ui::with_ok(&format!("/jobs/{}", job.id), "created")),
        Err((status, errors)) => form_page(
            &a,
            &v,
            &groups,
            "new_job",
            "/jobs/new".into(),
            "/jobs".into(),
            &values,
            true,
            errors,
            status,
        ),
    }
}

pub async fn edit_form(State(a): State<Service>, v: Visitor, Path(id): Path<i64>) -> Response {
    let (groups, job) = match tokio::try_join!(a.groups().list(), a.jobs().get(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    form_page(
        &a,
        &v,
        &groups,
        "edit_job",
        format!("/jobs/{id}/edit"),
        format!("/jobs/{id}"),
        &values_of_job(&job),
        false,
        HashMap::new(),
        StatusCode::OK,
    )
}

pub async fn update(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let (groups, job) = match tokio::try_join!(a.groups().list(), a.jobs().get(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let mut values = values_of_form(&form);
    // The script is edited on its own page, with versions; an edit keeps it.
    values.insert("glue_source", job.glue_source.clone());
    let result = match parse_input(&v, &values) {
        Ok(mut input) => {
            input.key = Some(job.key.clone());
            v.ops(&a)
                .job_update(id, input)
                .await
                .map_err(|e| v.form_errors(&e))
        }
        Err(errors) => Err((ErrorCode::InvalidInput.status(), errors)),
    };
    match result {
        Ok(_) => ui::see_other(&ui::with_ok(&format!("/jobs/{id}"), "saved")),
        Err((status, errors)) => form_page(
            &a,
            &v,
            &groups,
            "edit_job",
            format!("/jobs/{id}/edit"),
            format!("/jobs/{id}"),
            &values,
            false,
            errors,
            status,
        ),
    }
}

// ---- the job's page ----

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    c: Ctx,
    job: JobView,
    group: String,
    running: bool,
    can_change: bool,
    is_script: bool,
    fires: Result<Vec<String>, String>,
    runs: Vec<super::runs::RunRow>,
}

pub async fn detail(State(a): State<Service>, v: Visitor, Path(id): Path<i64>) -> Response {
    let (groups, job) = match tokio::try_join!(a.groups().list(), a.jobs().get(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let runs = a
        .runs()
        .list(RunQuery {
            job_id: Some(id),
            limit: Some(20),
            ..RunQuery::default()
        })
        .await
        .map(|p| p.items)
        .unwrap_or_default();
    let c = v.ctx("jobs");
    let names = group_names(&groups);
    let fires = preview_times(
        job.schedule_type,
        &job.schedule_conf,
        &job.time_zone,
        v.tz(),
    );
    let runs: Vec<super::runs::RunRow> = runs
        .into_iter()
        .map(|r: RunView| super::runs::RunRow::new(&c, r, &HashMap::new(), false))
        .collect();
    ui::render(&JobPage {
        group: names.get(&job.group_id).cloned().unwrap_or_default(),
        running: job.status == "running",
        can_change: v.can_change(job.group_id),
        is_script: crate::service::has_source(job.glue_type),
        fires,
        runs,
        c,
        job,
    })
}

/// Where an action on job `id` returns: the page the form names, else the job's page.
fn back(form: &Form, id: i64) -> String {
    match form.get("_back") {
        "" => format!("/jobs/{id}"),
        b => ui::safe_path(b).to_owned(),
    }
}

pub async fn start(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let back = back(&form, id);
    match v.ops(&a).job_start(id).await {
        Ok(_) => ui::see_other(&ui::with_ok(&back, "started")),
        Err(e) => v.fail(&back, e),
    }
}

pub async fn stop(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let back = back(&form, id);
    match v.ops(&a).job_stop(id).await {
        Ok(_) => ui::see_other(&ui::with_ok(&back, "stopped")),
        Err(e) => v.fail(&back, e),
    }
}

pub async fn delete(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    match v.ops(&a).job_delete(id).await {
        Ok(()) => ui::see_other(&ui::with_ok("/jobs", "deleted")),
        Err(e) => v.fail(&back(&form, id), e),
    }
}

pub async fn trigger(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let input = TriggerInput {
        params: Some(form.get("params").to_owned()).filter(|p| !p.is_empty()),
        address: Some(form.get("address").trim().to_owned()).filter(|p| !p.is_empty()),
    };
    match v.ops(&a).job_trigger(id, input).await {
        Ok(run) => ui::see_other(&ui::with_ok(&format!("/runs/{}", run.id), "run_started")),
        Err(e) => v.fail(&back(&form, id), e),
    }
}

// ---- the preview endpoint of the form's script ----

#[derive(Deserialize)]
pub struct PreviewQuery {
    #[serde(default)]
    schedule_type: String,
    #[serde(default)]
    schedule_conf: String,
    #[serde(default)]
    time_zone: String,
}

/// `{"fires": [...]}` or `{"error": "..."}` for the schedule being typed.
pub async fn preview(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<PreviewQuery>,
) -> Response {
    let kind = match q.schedule_type.parse::<ScheduleType>() {
        Ok(k) => k,
        Err(e) => {
            return Json(serde_json::json!({ "error": e.to_string() })).into_response();
        }
    };
    let zone = Some(q.time_zone.trim())
        .filter(|z| !z.is_empty())
        .unwrap_or(&a.config().default_time_zone);
    match preview_times(kind, &q.schedule_conf, zone, v.tz()) {
        Ok(fires) => Json(serde_json::json!({ "fires": fires })).into_response(),
        Err(e) => Json(serde_json::json!({ "error": e })).into_response(),
    }
}
