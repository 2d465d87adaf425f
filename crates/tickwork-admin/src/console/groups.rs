//! Executor groups (automatic or manual addresses) with their live instances and each
//! instance's last heartbeat; create, edit and delete; a new executor token for a group
//! (shown once).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tickwork_protocol::api::{GroupInput, GroupTokenView, GroupView};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field, Form, Opt};
use crate::Service;

/// One live executor of a group.
pub(super) struct Instance {
    pub address: String,
    pub heartbeat: String,
    /// Seconds since the last heartbeat.
    pub age_s: i64,
}

pub(super) struct GroupRow {
    pub g: GroupView,
    pub instances: Vec<Instance>,
    pub can_change: bool,
    /// May give the group a new executor token (admins, operators of the group).
    pub can_rotate: bool,
}

#[derive(Template)]
#[template(path = "groups.html")]
struct GroupsPage {
    c: Ctx,
    rows: Vec<GroupRow>,
    fields: Vec<Field>,
    /// A group's new executor token, on the answer to its rotation only.
    new_token: Option<GroupTokenView>,
}

#[derive(Template)]
#[template(path = "group_form.html")]
struct GroupFormPage {
    c: Ctx,
    id: i64,
    fields: Vec<Field>,
}

fn fields(values: &HashMap<&str, String>) -> Vec<Field> {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    let mode = get("address_mode");
    vec![
        Field::new("app_name", "app_name", "text").value(get("app_name")),
        Field::new("title", "title", "text").value(get("title")),
        Field::new("address_mode", "address_mode", "select").options(Opt::list(
            [
                ("auto".to_owned(), "auto".to_owned()),
                ("manual".to_owned(), "manual".to_owned()),
            ],
            if mode.is_empty() { "auto" } else { &mode },
        )),
        Field::new("addresses", "addresses", "textarea")
            .value(get("addresses"))
            .hint("addresses_hint"),
    ]
}

/// Option labels are i18n keys; the template shows them translated.
fn translate_options(v: &Visitor, fields: &mut [Field]) {
    for f in fields {
        for o in &mut f.options {
            if f.name == "address_mode" {
                o.label = v.t(&o.label).to_owned();
            }
        }
    }
}

fn values_of_form(form: &Form) -> HashMap<&'static str, String> {
    ["app_name", "title", "address_mode", "addresses"]
        .into_iter()
        .map(|k| (k, form.get(k).to_owned()))
        .collect()
}

fn input_of(values: &HashMap<&str, String>) -> GroupInput {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    GroupInput {
        app_name: get("app_name").trim().to_owned(),
        title: get("title").trim().to_owned(),
        address_mode: Some(get("address_mode")).filter(|m| !m.is_empty()),
        addresses: get("addresses")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

async fn page(
    a: &Service,
    v: &Visitor,
    values: &HashMap<&str, String>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    page_with_token(a, v, values, errors, status, None).await
}

async fn page_with_token(
    a: &Service,
    v: &Visitor,
    values: &HashMap<&str, String>,
    errors: HashMap<String, String>,
    status: StatusCode,
    new_token: Option<GroupTokenView>,
) -> Response {
    let (groups, registry) = match tokio::try_join!(a.groups().list(), async {
        a.dashboard().registry_entries().await
    }) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let mut c = v.ctx("groups");
    let now = a.now_ms();
    let rows = groups
        .into_iter()
        .map(|g| {
            let mut instances: Vec<Instance> = registry
                .iter()
                .filter(|r| r.app_name == g.app_name)
                .map(|r| Instance {
                    address: r.address.clone(),
                    heartbeat: c.time(r.updated_at),
                    age_s: (now - r.updated_at).max(0) / 1000,
                })
                .collect();
            instances.sort_by(|a, b| a.address.cmp(&b.address));
            GroupRow {
                can_change: v.principal.is_admin(),
                can_rotate: v.principal.can_change_group(g.id),
                instances,
                g,
            }
        })
        .collect();
    let mut f = fields(values);
    translate_options(v, &mut f);
    if let Some(rest) = ui::place_errors(&mut f, errors) {
        c.err = Some(rest);
    }
    ui::render_status(
        status,
        &GroupsPage {
            c,
            rows,
            fields: f,
            new_token,
        },
    )
}

pub(super) async fn list(State(a): State<Service>, v: Visitor) -> Response {
    page(&a, &v, &HashMap::new(), HashMap::new(), StatusCode::OK).await
}

pub(super) async fn create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let values = values_of_form(&form);
    match v.ops(&a).group_create(input_of(&values)).await {
        Ok(_) => ui::see_other(&ui::with_ok("/groups", "created")),
        Err(e) => {
            let (status, errors) = v.form_errors(&e);
            page(&a, &v, &values, errors, status).await
        }
    }
}

fn form_page(
    v: &Visitor,
    id: i64,
    values: &HashMap<&str, String>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let mut c = v.ctx("groups");
    let mut f = fields(values);
    translate_options(v, &mut f);
    if let Some(rest) = ui::place_errors(&mut f, errors) {
        c.err = Some(rest);
    }
    ui::render_status(status, &GroupFormPage { c, id, fields: f })
}

pub(super) async fn edit_form(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
) -> Response {
    let g = match a.groups().get(id).await {
        Ok(g) => g,
        Err(e) => return v.error_page(e),
    };
    let values = HashMap::from([
        ("app_name", g.app_name),
        ("title", g.title),
        ("address_mode", g.address_mode),
        ("addresses", g.addresses.join("\n")),
    ]);
    form_page(&v, id, &values, HashMap::new(), StatusCode::OK)
}

pub(super) async fn update(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let values = values_of_form(&form);
    match v.ops(&a).group_update(id, input_of(&values)).await {
        Ok(_) => ui::see_other(&ui::with_ok("/groups", "saved")),
        Err(e) => {
            let (status, errors) = v.form_errors(&e);
            form_page(&v, id, &values, errors, status)
        }
    }
}

pub(super) async fn delete(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, _): Posted,
) -> Response {
    match v.ops(&a).group_delete(id).await {
        Ok(()) => ui::see_other(&ui::with_ok("/groups", "deleted")),
        Err(e) => v.fail("/groups", e),
    }
}

/// Gives a group a new executor token and shows it on this answer only, which no cache keeps.
pub(super) async fn rotate_token(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, _): Posted,
) -> Response {
    match v.ops(&a).group_rotate_token(id).await {
        Ok(created) => {
            let mut res = page_with_token(
                &a,
                &v,
                &HashMap::new(),
                HashMap::new(),
                StatusCode::OK,
                Some(created),
            )
            .await;
            res.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("no-store"),
            );
            res
        }
        Err(e) => v.fail("/groups", e),
    }
}
