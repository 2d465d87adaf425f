//! Jobs: create/edit/copy forms with inline errors and a live preview of the next fire
//! times, the job's page with "run once", and start/stop/delete (the list is `job_list`).

use std::collections::HashMap;
use std::time::Duration;

use askama::Template;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};
use tickwork_core::job::JobSpec;
use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::{
    BlockStrategy, Delivery, GlueType, MisfireStrategy, RouteStrategy, ScheduleType,
};
use tickwork_protocol::api::{GroupView, JobInput, JobView, RunQuery, RunView, TriggerInput};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field, Form, Opt};
use crate::{ErrorCode, Service};

/// `group id -> "title (app)"`, for lists and selects.
pub(super) fn group_names(groups: &[GroupView]) -> HashMap<i64, String> {
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
type Values = HashMap<String, String>;

/// Every field of the job form, filled from `values`. `create` adds the key (it cannot change
/// later), the script and "start".
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
    let mut f = Vec::new();
    if create {
        f.push(
            Field::new("key", "key", "text")
                .value(get("key"))
                .hint("key_hint"),
        );
    }
    f.extend([
        Field::new("group_id", "group", "select").options(group_opts),
        Field::new("description", "description", "text").value(get("description")),
        Field::new("owner", "owner", "text").value(get("owner")),
        Field::new("schedule_type", "schedule_type", "select")
            .options(Opt::coded::<ScheduleType>(v.lang, &get("schedule_type"))),
        Field::new("schedule_conf", "schedule_conf", "text").value(get("schedule_conf")),
        Field::new("time_zone", "time_zone", "text").value(get("time_zone")),
        Field::new("glue_type", "glue_type", "select")
            .options(Opt::coded::<GlueType>(v.lang, &get("glue_type"))),
        Field::new("handler", "handler", "text").value(get("handler")),
        Field::new("route_strategy", "route_strategy", "select")
            .options(Opt::coded::<RouteStrategy>(v.lang, &get("route_strategy"))),
        Field::new("misfire_strategy", "misfire_strategy", "select").options(Opt::coded::<
            MisfireStrategy,
        >(
            v.lang,
            &get("misfire_strategy"),
        )),
        Field::new("block_strategy", "block_strategy", "select")
            .options(Opt::coded::<BlockStrategy>(v.lang, &get("block_strategy"))),
        Field::new("delivery", "delivery", "select")
            .options(Opt::coded::<Delivery>(v.lang, &get("delivery"))),
        Field::new("lateness_budget_ms", "lateness_budget_ms", "number")
            .value(get("lateness_budget_ms"))
            .hint("lateness_budget_hint"),
        Field::new("timeout_s", "timeout_s", "number").value(get("timeout_s")),
        Field::new("retry_count", "retry_count", "number").value(get("retry_count")),
        Field::new("retry_backoff_ms", "retry_backoff_ms", "number").value(get("retry_backoff_ms")),
        Field::new("priority", "priority", "number").value(get("priority")),
        Field::new("child_job_ids", "child_job_ids", "text")
            .value(get("child_job_ids"))
            .hint("child_job_ids_hint"),
        Field::new("alarm_channels", "alarm_channels", "text").value(get("alarm_channels")),
        Field::new("params", "params", "textarea").value(get("params")),
    ]);
    if create {
        f.push(Field::new("glue_source", "glue_source", "code").value(get("glue_source")));
        f.push(Field::new("start", "start", "checkbox").value(get("start")));
    }
    f
}

/// A definition's fields as the form shows them: numbers in decimal, child ids joined by
/// commas, no zone as empty.
fn values_of_spec(spec: &JobSpec) -> Values {
    fn text(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
    match serde_json::to_value(spec) {
        Ok(Value::Object(fields)) => fields.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        _ => Values::new(),
    }
}

fn values_of_job(j: &JobView) -> Values {
    values_of_spec(&j.spec)
}

fn values_of_form(form: &Form) -> Values {
    JobSpec::field_names()
        .iter()
        .chain(&["key", "start"])
        .map(|n| ((*n).to_owned(), form.get(n).to_owned()))
        .collect()
}

/// Turns submitted values into a job input; every field that does not read gets its error
/// (`bad_number` for numbers). A field is read as the JSON type of its blank value (a number,
/// a list of ids, text) and checked alone by the definition's own decoding, so that its error
/// lands on it.
fn parse_input(values: &Values, bad_number: &str) -> Result<JobInput, HashMap<String, String>> {
    let blank = match serde_json::to_value(JobSpec::blank(0)) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    let mut errors = HashMap::new();
    let mut fields = blank.clone();
    let number = |s: &str| s.parse::<i64>().ok().map(Value::from);
    for (name, default) in &blank {
        let raw = values.get(name).map(String::as_str).unwrap_or("");
        // Params and scripts keep their whitespace.
        let text = match name.as_str() {
            "params" | "glue_source" => raw,
            _ => raw.trim(),
        };
        let read = match default {
            Value::Number(_) if text.is_empty() => Some(default.clone()),
            Value::Number(_) => number(text),
            Value::Array(_) => text
                .split([',', ' '])
                .filter(|p| !p.is_empty())
                .map(number)
                .collect::<Option<_>>()
                .map(Value::Array),
            _ => Some(Value::from(text)),
        }
        .unwrap_or_default();
        let mut alone = blank.clone();
        alone.insert(name.clone(), read.clone());
        match serde_json::from_value::<JobSpec>(Value::Object(alone)) {
            Ok(_) => {
                fields.insert(name.clone(), read);
            }
            // Text that is no number (read as null), or a number out of the field's range.
            Err(_) if default.is_number() || default.is_array() => {
                errors.insert(name.clone(), bad_number.to_owned());
            }
            Err(e) => {
                errors.insert(name.clone(), e.to_string());
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let spec = serde_json::from_value(Value::Object(fields))
        .map_err(|e| HashMap::from([(String::new(), e.to_string())]))?;
    let start = values.get("start").map(|s| s.trim());
    // An empty key asks for a generated one; the service checks a given one.
    let key = values
        .get("key")
        .map(|k| k.trim())
        .filter(|k| !k.is_empty());
    Ok(JobInput {
        key: key.map(str::to_owned),
        spec,
        start: matches!(start, Some("on" | "true" | "1")),
    })
}

/// The next fires of the submitted schedule, or why it is not valid (shown on first paint).
fn preview_of(a: &Service, values: &Values) -> Result<Vec<String>, String> {
    let get = |k: &str| values.get(k).map(|s| s.trim()).unwrap_or("");
    let kind: ScheduleType = get("schedule_type").parse().map_err(|e| format!("{e}"))?;
    let zone = Some(get("time_zone"))
        .filter(|z| !z.is_empty())
        .unwrap_or(&a.config().default_time_zone);
    preview_times(kind, get("schedule_conf"), zone, a.now_ms())
}

/// The next five fires of a schedule, written in the schedule's own zone.
fn preview_times(
    kind: ScheduleType,
    conf: &str,
    zone: &str,
    now: i64,
) -> Result<Vec<String>, String> {
    if kind == ScheduleType::None {
        return Ok(Vec::new());
    }
    let s = Schedule::parse(kind, conf, zone).map_err(|e| e.to_string())?;
    let tz = s.time_zone().clone();
    Ok(s.next_fires(now, 5)
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
        preview: preview_of(a, values),
        c,
        title,
        action,
        fields,
        cancel,
    };
    ui::render_status(status, &page)
}

/// A new job's form: a cron job every minute in the admin's zone, the rest blank.
fn defaults(a: &Service) -> Values {
    values_of_spec(&JobSpec {
        schedule_type: ScheduleType::Cron,
        schedule_conf: "0 * * * * ?".to_owned(),
        time_zone: a.config().default_time_zone.clone(),
        ..JobSpec::blank(0)
    })
}

pub(super) async fn new_form(State(a): State<Service>, v: Visitor) -> Response {
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

pub(super) async fn copy_form(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
) -> Response {
    let (groups, job) = match tokio::try_join!(a.groups().list(), a.jobs().get(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let mut values = values_of_job(&job);
    values.insert(
        "description".to_owned(),
        format!("{} {}", v.t("copy_of"), job.spec.description),
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

pub(super) async fn create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let groups = match a.groups().list().await {
        Ok(g) => g,
        Err(e) => return v.error_page(e),
    };
    let values = values_of_form(&form);
    let result = match parse_input(&values, v.t("bad_number")) {
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

pub(super) async fn edit_form(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
) -> Response {
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

pub(super) async fn update(
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
    values.insert("glue_source".to_owned(), job.spec.glue_source.clone());
    let result = match parse_input(&values, v.t("bad_number")) {
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

pub(super) async fn detail(State(a): State<Service>, v: Visitor, Path(id): Path<i64>) -> Response {
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
        job.spec.schedule_type,
        &job.spec.schedule_conf,
        &job.spec.time_zone,
        a.now_ms(),
    );
    let runs: Vec<super::runs::RunRow> = runs
        .into_iter()
        .map(|r: RunView| super::runs::RunRow::new(&c, r, &HashMap::new(), false))
        .collect();
    ui::render(&JobPage {
        group: names.get(&job.spec.group_id).cloned().unwrap_or_default(),
        running: job.status == "running",
        can_change: v.can_change(job.spec.group_id),
        is_script: crate::service::has_source(job.spec.glue_type),
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

pub(super) async fn start(
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

pub(super) async fn stop(
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

pub(super) async fn delete(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    match v.ops(&a).job_delete(id).await {
        Ok(()) => ui::see_other(&ui::with_ok("/jobs", "deleted")),
        Err(e) => v.fail(&back(&form, id), e),
    }
}

pub(super) async fn trigger(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let input = TriggerInput {
        params: Some(form.get("params").to_owned()).filter(|p| !p.is_empty()),
        address: Some(form.get("address").trim().to_owned()).filter(|p| !p.is_empty()),
    };
    let run = match v.ops(&a).job_trigger(id, input).await {
        Ok(run) => run,
        Err(e) => return v.fail(&back(&form, id), e),
    };
    // Say "started" only once an executor took it: the dispatch takes at most one executor
    // call (and a probe or two for some routes), so wait a little longer than that.
    let within = a.config().dispatch.executor_timeout * 2 + Duration::from_secs(1);
    let page = format!("/runs/{}", run.id);
    match a.runs().settled(run.id, within).await {
        Ok(r) => ui::see_other(&trigger_outcome(&v, &page, &r)),
        Err(e) => v.fail(&page, e),
    }
}

/// Where a manual trigger lands: the run's page with what became of it.
fn trigger_outcome(v: &Visitor, page: &str, r: &RunView) -> String {
    match r.state {
        RunState::Planned | RunState::Sending => ui::with_ok(page, "run_queued"),
        RunState::Misfired | RunState::Skipped => {
            let why = r.trigger_msg.as_deref().unwrap_or(v.lang.label(r.state));
            ui::with_err(page, &format!("{}: {why}", v.t("run_not_sent")))
        }
        RunState::Failed if r.trigger_code != tickwork_protocol::CODE_SUCCESS => {
            let why = r.trigger_msg.as_deref().unwrap_or("");
            ui::with_err(page, &format!("{}: {why}", v.t("dispatch_failed")))
        }
        _ => ui::with_ok(page, "run_started"),
    }
}

// ---- the preview endpoint of the form's script ----

#[derive(Deserialize)]
pub(super) struct PreviewQuery {
    #[serde(default)]
    schedule_type: String,
    #[serde(default)]
    schedule_conf: String,
    #[serde(default)]
    time_zone: String,
}

/// `{"fires": [...]}` or `{"error": "..."}` for the schedule being typed.
pub(super) async fn preview(
    State(a): State<Service>,
    // Only a signed-in visitor may ask.
    _visitor: Visitor,
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
    match preview_times(kind, &q.schedule_conf, zone, a.now_ms()) {
        Ok(fires) => Json(serde_json::json!({ "fires": fires })).into_response(),
        Err(e) => Json(serde_json::json!({ "error": e })).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> JobSpec {
        JobSpec {
            description: "nightly – größer".into(),
            owner: "ops".into(),
            alarm_channels: "ops-hook".into(),
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0 30 2 * * ?".into(),
            time_zone: "Europe/Berlin".into(),
            misfire_strategy: MisfireStrategy::FireOnceNow,
            route_strategy: RouteStrategy::Round,
            handler: "echo".into(),
            params: " two\nlines ".into(),
            block_strategy: BlockStrategy::DiscardLater,
            timeout_s: 600,
            retry_count: 2,
            retry_backoff_ms: 1000,
            child_job_ids: vec![4, 5],
            priority: -5,
            glue_type: GlueType::Shell,
            glue_source: "echo hi\r\n".into(),
            ..JobSpec::blank(3)
        }
    }

    #[test]
    fn a_job_shown_in_the_form_reads_back_the_same() {
        let mut values = values_of_spec(&full());
        assert_eq!(values["child_job_ids"], "4,5");
        assert_eq!(values["timeout_s"], "600");
        values.insert("start".into(), "on".into());
        let input = parse_input(&values, "bad").unwrap();
        assert_eq!(input.spec, full());
        assert!(input.start);
        assert_eq!(input.key, None);
    }

    #[test]
    fn empty_fields_are_blank_and_text_is_trimmed_but_params_and_scripts() {
        let mut values = values_of_spec(&JobSpec::blank(0));
        values.retain(|_, v| !v.is_empty());
        let names: Vec<&str> = values.keys().map(String::as_str).collect();
        assert!(!names.contains(&"time_zone"), "{names:?}");
        assert_eq!(parse_input(&values, "bad").unwrap().spec, JobSpec::blank(0));
        values.extend([
            ("group_id".to_owned(), " 7 ".to_owned()),
            ("description".to_owned(), " d ".to_owned()),
            ("time_zone".to_owned(), "  ".to_owned()),
            ("child_job_ids".to_owned(), " 1, 2 3,".to_owned()),
            ("params".to_owned(), " p ".to_owned()),
            ("glue_source".to_owned(), " s ".to_owned()),
        ]);
        let spec = parse_input(&values, "bad").unwrap().spec;
        assert_eq!(
            (
                spec.group_id,
                spec.description.as_str(),
                spec.time_zone.as_str()
            ),
            (7, "d", "")
        );
        assert_eq!(spec.child_job_ids, [1, 2, 3]);
        assert_eq!(
            (spec.params.as_str(), spec.glue_source.as_str()),
            (" p ", " s ")
        );
    }

    #[test]
    fn every_field_that_does_not_read_gets_its_error() {
        let mut values = values_of_spec(&JobSpec::blank(0));
        values.extend([
            ("group_id".to_owned(), "one".to_owned()),
            ("timeout_s".to_owned(), "3000000000".to_owned()),
            ("retry_backoff_ms".to_owned(), "1.5".to_owned()),
            ("child_job_ids".to_owned(), "1, x".to_owned()),
            ("route_strategy".to_owned(), "NEAREST".to_owned()),
            ("priority".to_owned(), "-3".to_owned()),
            ("glue_type".to_owned(), String::new()),
        ]);
        let errors = parse_input(&values, "bad number").unwrap_err();
        let mut fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "child_job_ids",
                "glue_type",
                "group_id",
                "retry_backoff_ms",
                "route_strategy",
                "timeout_s"
            ]
        );
        assert_eq!(errors["timeout_s"], "bad number");
        assert!(
            errors["route_strategy"].contains("\"NEAREST\""),
            "{errors:?}"
        );
    }
}
