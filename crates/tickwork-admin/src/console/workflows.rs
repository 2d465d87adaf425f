//! Workflows in the console: the list with a form for a new one (its DAG written as TOML), a
//! workflow's page (its DAG drawn, its instances, run now, edit, delete), and an instance's
//! page: the DAG with each node's state, linked to its run, refreshed while it runs, with
//! stop, resume, mark succeeded and rerun.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tickwork_core::job::Limits;
use tickwork_core::workflow::{Dag, Graph};
use tickwork_core::{MisfireStrategy, ScheduleType, TriggerType};
use tickwork_protocol::workflows::{
    FailurePolicy, InstanceSummary, InstanceView, Overflow, WorkflowInput, WorkflowView,
};

use super::dag_svg::{self, NodeLook};
use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field, Form, Opt};
use crate::{Error, Service};

/// The DAG a new workflow's form starts with: the format by example (nodes with a key and a
/// job's key, edges from and to, `on` SUCCESS by default).
const DAG_EXAMPLE: &str = "[[nodes]]\nkey = \"first\"\njob = \"\"\n\n[[nodes]]\nkey = \"second\"\njob = \"\"\n\n[[edges]]\nfrom = \"first\"\nto = \"second\"\n";

/// The form's field names, in order.
const FIELDS: [&str; 12] = [
    "key",
    "name",
    "group",
    "schedule_type",
    "schedule_conf",
    "time_zone",
    "misfire_strategy",
    "failure_policy",
    "max_instances",
    "overflow",
    "enabled",
    "dag",
];

#[derive(Template)]
#[template(path = "workflows.html")]
struct WorkflowsPage {
    c: Ctx,
    rows: Vec<WorkflowView>,
    fields: Vec<Field>,
}

#[derive(Template)]
#[template(path = "workflow.html")]
struct WorkflowPage {
    c: Ctx,
    w: WorkflowView,
    svg: String,
    instances: Vec<InstanceSummary>,
    can_change: bool,
    fields: Vec<Field>,
}

/// A node of an instance as its page lists it.
struct NodeRow {
    key: String,
    job: String,
    state: String,
    run_ids: Vec<i64>,
    /// May be marked succeeded / rerun now.
    markable: bool,
    rerunnable: bool,
}

#[derive(Template)]
#[template(path = "workflow_instance.html")]
struct InstancePage {
    c: Ctx,
    inst: InstanceView,
    /// The i18n key of its state.
    state_key: String,
    workflow_key: String,
    svg: String,
    nodes: Vec<NodeRow>,
    context: String,
    live: bool,
    can_change: bool,
    stoppable: bool,
    resumable: bool,
}

fn fields(v: &Visitor, values: &HashMap<&str, String>, groups: &[String]) -> Vec<Field> {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    let or = |k: &str, d: &str| {
        Some(get(k))
            .filter(|s| !s.is_empty())
            .unwrap_or(d.to_owned())
    };
    let lang = v.lang;
    let kinds = ["NONE", "CRON", "FIX_RATE", "ONCE"].iter().map(|k| {
        let label = lang.label_of("schedule", k).to_owned();
        ((*k).to_owned(), label)
    });
    let names = |all: &[&str]| {
        all.iter()
            .map(|s| ((*s).to_owned(), (*s).to_owned()))
            .collect::<Vec<_>>()
    };
    vec![
        Field::new("key", "key", "text").value(get("key")),
        Field::new("name", "name", "text").value(get("name")),
        Field::new("group", "group", "select").options(Opt::list(
            groups.iter().map(|g| (g.clone(), g.clone())),
            &get("group"),
        )),
        Field::new("schedule_type", "schedule_type", "select")
            .options(Opt::list(kinds, &or("schedule_type", "NONE"))),
        Field::new("schedule_conf", "schedule_conf", "text").value(get("schedule_conf")),
        Field::new("time_zone", "time_zone", "text").value(get("time_zone")),
        Field::new("misfire_strategy", "misfire_strategy", "select").options(Opt::coded::<
            MisfireStrategy,
        >(
            lang,
            &or("misfire_strategy", "DO_NOTHING"),
        )),
        Field::new("failure_policy", "failure_policy", "select").options(Opt::list(
            names(&["END", "CONTINUE"]),
            &or("failure_policy", "END"),
        )),
        Field::new("max_instances", "max_instances", "number").value(or("max_instances", "1")),
        Field::new("overflow", "overflow", "select").options(Opt::list(
            names(&["SKIP", "QUEUE"]),
            &or("overflow", "SKIP"),
        )),
        Field::new("enabled", "enabled", "checkbox").value(or("enabled", "on")),
        Field::new("dag", "dag", "code").value(or("dag", DAG_EXAMPLE)),
    ]
}

fn values_of_form(form: &Form) -> HashMap<&'static str, String> {
    FIELDS
        .into_iter()
        .map(|k| (k, form.get(k).to_owned()))
        .collect()
}

fn values_of(w: &WorkflowView) -> HashMap<&'static str, String> {
    HashMap::from([
        ("key", w.key.clone()),
        ("name", w.name.clone()),
        ("group", w.group.clone()),
        ("schedule_type", w.schedule_type.as_str().to_owned()),
        ("schedule_conf", w.schedule_conf.clone()),
        ("time_zone", w.time_zone.clone()),
        ("misfire_strategy", w.misfire_strategy.as_str().to_owned()),
        ("failure_policy", w.failure_policy.as_str().to_owned()),
        ("max_instances", w.max_instances.to_string()),
        ("overflow", w.overflow.as_str().to_owned()),
        ("enabled", if w.enabled { "on" } else { "" }.to_owned()),
        ("dag", toml::to_string_pretty(&w.dag).unwrap_or_default()),
    ])
}

/// The input a form posts; a field that does not read is an error naming it.
fn input_of(values: &HashMap<&str, String>) -> Result<WorkflowInput, Error> {
    let get = |k: &str| values.get(k).map(|s| s.trim()).unwrap_or("");
    let named = |k: &'static str| -> Result<String, Error> { Ok(get(k).to_owned()) };
    let dag: Dag = toml::from_str(get("dag"))
        .map_err(|e| Error::invalid_field("dag", format!("not a DAG in TOML: {e}")))?;
    let parse = |k: &'static str, e: tickwork_core::Error| Error::invalid_field(k, e);
    Ok(WorkflowInput {
        key: named("key")?,
        name: named("name")?,
        group: named("group")?,
        dag,
        failure_policy: get("failure_policy")
            .parse::<FailurePolicy>()
            .map_err(|e| parse("failure_policy", e))?,
        max_instances: get("max_instances")
            .parse()
            .map_err(|_| Error::invalid_field("max_instances", "must be a whole number"))?,
        overflow: get("overflow")
            .parse::<Overflow>()
            .map_err(|e| parse("overflow", e))?,
        schedule_type: get("schedule_type")
            .parse::<ScheduleType>()
            .map_err(|e| parse("schedule_type", e))?,
        schedule_conf: get("schedule_conf").to_owned(),
        time_zone: Some(get("time_zone").to_owned()).filter(|z| !z.is_empty()),
        misfire_strategy: get("misfire_strategy")
            .parse::<MisfireStrategy>()
            .map_err(|e| parse("misfire_strategy", e))?,
        enabled: !get("enabled").is_empty(),
    })
}

async fn group_names(a: &Service) -> Result<Vec<String>, Error> {
    Ok(a.groups()
        .list()
        .await?
        .into_iter()
        .map(|g| g.app_name)
        .collect())
}

fn svg_of(dag: &Dag, looks: &[NodeLook]) -> String {
    match Graph::new(dag, &Limits::STANDARD) {
        Ok(g) => dag_svg::draw(dag, &g, looks),
        Err(_) => String::new(),
    }
}

async fn list_page(
    a: &Service,
    v: &Visitor,
    values: &HashMap<&str, String>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let (rows, groups) = match tokio::try_join!(a.workflows().list(), group_names(a)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let mut c = v.ctx("workflows");
    let mut f = fields(v, values, &groups);
    if let Some(rest) = ui::place_errors(&mut f, errors) {
        c.err = Some(rest);
    }
    ui::render_status(status, &WorkflowsPage { c, rows, fields: f })
}

pub(super) async fn list(State(a): State<Service>, v: Visitor) -> Response {
    list_page(&a, &v, &HashMap::new(), HashMap::new(), StatusCode::OK).await
}

pub(super) async fn create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let values = values_of_form(&form);
    let made = match input_of(&values) {
        Ok(input) => a.workflows().create(&v.principal, input).await,
        Err(e) => Err(e),
    };
    match made {
        Ok(w) => ui::see_other(&ui::with_ok(&format!("/workflows/{}", w.key), "created")),
        Err(e) => {
            let (status, errors) = v.form_errors(&e);
            list_page(&a, &v, &values, errors, status).await
        }
    }
}

async fn detail_page(
    a: &Service,
    v: &Visitor,
    key: &str,
    values: Option<HashMap<&str, String>>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let w = match a.workflows().get(key).await {
        Ok(w) => w,
        Err(e) => return v.error_page(e),
    };
    let (instances, groups) =
        match tokio::try_join!(a.workflows().instances(key, Some(50)), a.groups().list()) {
            Ok(x) => x,
            Err(e) => return v.error_page(e),
        };
    let can_change = groups
        .iter()
        .find(|g| g.app_name == w.group)
        .is_some_and(|g| v.can_change(g.id));
    let names: Vec<String> = groups.into_iter().map(|g| g.app_name).collect();
    let mut c = v.ctx("workflows");
    let values = values.unwrap_or_else(|| values_of(&w));
    let mut f = fields(v, &values, &names);
    if let Some(rest) = ui::place_errors(&mut f, errors) {
        c.err = Some(rest);
    }
    let svg = svg_of(&w.dag, &[]);
    ui::render_status(
        status,
        &WorkflowPage {
            c,
            svg,
            instances,
            can_change,
            fields: f,
            w,
        },
    )
}

pub(super) async fn detail(
    State(a): State<Service>,
    v: Visitor,
    Path(key): Path<String>,
) -> Response {
    detail_page(&a, &v, &key, None, HashMap::new(), StatusCode::OK).await
}

pub(super) async fn update(
    State(a): State<Service>,
    Path(key): Path<String>,
    Posted(v, form): Posted,
) -> Response {
    let values = values_of_form(&form);
    let done = match input_of(&values) {
        Ok(input) => a.workflows().update(&v.principal, &key, input).await,
        Err(e) => Err(e),
    };
    match done {
        Ok(w) => ui::see_other(&ui::with_ok(&format!("/workflows/{}", w.key), "saved")),
        Err(e) => {
            let (status, errors) = v.form_errors(&e);
            detail_page(&a, &v, &key, Some(values), errors, status).await
        }
    }
}

pub(super) async fn delete(
    State(a): State<Service>,
    Path(key): Path<String>,
    Posted(v, _): Posted,
) -> Response {
    match a.workflows().delete(&v.principal, &key).await {
        Ok(_) => ui::see_other(&ui::with_ok("/workflows", "deleted")),
        Err(e) => v.fail(&format!("/workflows/{key}"), e),
    }
}

pub(super) async fn run(
    State(a): State<Service>,
    Path(key): Path<String>,
    Posted(v, form): Posted,
) -> Response {
    let params = form.get("params");
    match a
        .workflows()
        .run(&v.principal, &key, params, TriggerType::Manual)
        .await
    {
        Ok(i) => ui::see_other(&ui::with_ok(
            &format!("/workflow-instances/{}", i.id),
            "started",
        )),
        Err(e) => v.fail(&format!("/workflows/{key}"), e),
    }
}

pub(super) async fn instance(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
) -> Response {
    let i = match a.workflows().instance(id).await {
        Ok(i) => i,
        Err(e) => return v.error_page(e),
    };
    let w = a.workflows().get_by_id(i.workflow_id).await.ok();
    let workflow_key = w.as_ref().map(|w| w.key.clone()).unwrap_or_default();
    let group = w.as_ref().map(|w| w.group.clone()).unwrap_or_default();
    let can_change = a
        .groups()
        .list()
        .await
        .ok()
        .and_then(|gs| gs.into_iter().find(|g| g.app_name == group))
        .is_some_and(|g| v.can_change(g.id));
    let c = v.ctx("workflows");
    let dag = Dag {
        nodes: i
            .nodes
            .iter()
            .map(|n| tickwork_core::workflow::Node::new(n.key.clone(), n.job.clone()))
            .collect(),
        edges: i.edges.clone(),
    };
    let looks: Vec<NodeLook> = i
        .nodes
        .iter()
        .map(|n| NodeLook {
            state: Some(n.state),
            state_label: c
                .t(format!("node_{}", n.state.as_str().to_lowercase()))
                .to_owned(),
            href: n.run_ids.last().map(|r| format!("/runs/{r}")),
        })
        .collect();
    let svg = svg_of(&dag, &looks);
    let ended = i.state.is_final();
    let nodes = i
        .nodes
        .iter()
        .map(|n| {
            use tickwork_core::workflow::step::NodeState as S;
            NodeRow {
                key: n.key.clone(),
                job: n.job.clone(),
                state: n.state.as_str().to_owned(),
                run_ids: n.run_ids.clone(),
                markable: matches!(n.state, S::Failed | S::Skipped | S::Stopped),
                rerunnable: ended && n.state != S::Running,
            }
        })
        .collect();
    let context = serde_json::to_string_pretty(&i.context).unwrap_or_default();
    ui::render(&InstancePage {
        live: !ended,
        stoppable: !ended,
        resumable: matches!(
            i.state,
            tickwork_core::workflow::step::InstanceState::Failed
                | tickwork_core::workflow::step::InstanceState::Stopped
        ),
        can_change,
        workflow_key,
        svg,
        nodes,
        context,
        c,
        state_key: format!("instance_{}", i.state.as_str().to_lowercase()),
        inst: i,
    })
}

/// An operator's action on an instance, back to its page with what came of it.
pub(super) async fn act(
    State(a): State<Service>,
    Path((id, action)): Path<(i64, String)>,
    Posted(v, form): Posted,
) -> Response {
    let page = format!("/workflow-instances/{id}");
    let node = form.get("node");
    let flows = a.workflows();
    let done = match action.as_str() {
        "stop" => flows.stop(&v.principal, id).await,
        "resume" => flows.resume(&v.principal, id).await,
        "mark" => flows.mark_succeeded(&v.principal, id, node).await,
        "rerun" => flows.rerun(&v.principal, id, node).await,
        other => Err(Error::NotFound(format!("no action {other:?}"))),
    };
    match done {
        Ok(_) => ui::see_other(&ui::with_ok(&page, "saved")),
        Err(e) => v.fail(&page, e),
    }
}
