//! Users and their roles (admins only), API tokens (one's own; admins see all) and the audit
//! log.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use tickwork_protocol::api::{
    AuditQuery, AuditView, GroupView, TokenInput, TokenView, UserInput, UserUpdateInput, UserView,
};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field, Form, Opt};
use crate::{ErrorCode, Service};

const ROLES: [&str; 3] = ["admin", "operator", "viewer"];

fn role_opts(v: &Visitor, current: &str) -> Vec<Opt> {
    Opt::list(ROLES.map(|r| (r.to_owned(), v.t(r).to_owned())), current)
}

fn locale_opts(current: &str) -> Vec<Opt> {
    Opt::list(
        [
            (String::new(), "-".to_owned()),
            ("en".to_owned(), "English".to_owned()),
            ("zh-CN".to_owned(), "中文".to_owned()),
        ],
        current,
    )
}

/// The ticked group ids of a form (one `group_ids` value per box; `1, 2 3` read too);
/// `None` when something is not a number.
fn parse_ids(form: &Form) -> Option<Vec<i64>> {
    form.all("group_ids")
        .flat_map(|s| s.split([',', ' ']))
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().ok())
        .collect()
}

/// Every executor group as a box to tick, by name, ticked when `ids` has it.
fn group_boxes(groups: &[GroupView], ids: &[i64]) -> Vec<Opt> {
    groups
        .iter()
        .map(|g| Opt {
            value: g.id.to_string(),
            label: if g.title.is_empty() {
                g.app_name.clone()
            } else {
                g.title.clone()
            },
            selected: ids.contains(&g.id),
            title: g.app_name.clone(),
        })
        .collect()
}

pub(super) struct UserRow {
    pub u: UserView,
    /// The visitor's own row: no reset or delete (one's own password asks the current one).
    pub me: bool,
    pub roles: Vec<Opt>,
    /// Every group, ticked when the user may change its jobs.
    pub groups: Vec<Opt>,
}

#[derive(Template)]
#[template(path = "users.html")]
struct UsersPage {
    c: Ctx,
    rows: Vec<UserRow>,
    fields: Vec<Field>,
}

async fn users_page(
    a: &Service,
    v: &Visitor,
    form: Option<&Form>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let (users, groups) = match tokio::try_join!(a.users().list(&v.principal), a.groups().list()) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let get = |k: &str| form.map(|f| f.get(k).to_owned()).unwrap_or_default();
    let role = get("role");
    let ticked = form.and_then(parse_ids).unwrap_or_default();
    let mut fields = vec![
        Field::new("username", "username", "text").value(get("username")),
        Field::new("password", "password", "password"),
        Field::new("role", "role", "select")
            .options(role_opts(v, if role.is_empty() { "viewer" } else { &role })),
        Field::new("group_ids", "groups", "checks")
            .options(group_boxes(&groups, &ticked))
            .hint("group_ids_hint"),
        Field::new("locale", "locale", "select").options(locale_opts(&get("locale"))),
    ];
    let mut c = v.ctx("users");
    if let Some(rest) = ui::place_errors(&mut fields, errors) {
        c.err = Some(rest);
    }
    let rows = users
        .into_iter()
        .map(|u| UserRow {
            me: u.id == v.principal.user_id,
            roles: role_opts(v, &u.role),
            groups: group_boxes(&groups, &u.group_ids),
            u,
        })
        .collect();
    ui::render_status(status, &UsersPage { c, rows, fields })
}

pub(super) async fn users(State(a): State<Service>, v: Visitor) -> Response {
    users_page(&a, &v, None, HashMap::new(), StatusCode::OK).await
}

pub(super) async fn user_create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let Some(group_ids) = parse_ids(&form) else {
        let errors = HashMap::from([("group_ids".to_owned(), v.t("bad_number").to_owned())]);
        let status = ErrorCode::InvalidInput.status();
        return users_page(&a, &v, Some(&form), errors, status).await;
    };
    let input = UserInput {
        username: form.get("username").trim().to_owned(),
        password: form.get("password").to_owned(),
        role: form.get("role").to_owned(),
        group_ids,
        locale: Some(form.get("locale").to_owned()).filter(|l| !l.is_empty()),
    };
    match v.ops(&a).user_create(input).await {
        Ok(_) => ui::see_other(&ui::with_ok("/users", "created")),
        Err(e) => {
            let (status, errors) = v.form_errors(&e);
            users_page(&a, &v, Some(&form), errors, status).await
        }
    }
}

pub(super) async fn user_update(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let Some(group_ids) = parse_ids(&form) else {
        return ui::see_other(&ui::with_err("/users", v.t("bad_number")));
    };
    let input = UserUpdateInput {
        role: form.get("role").to_owned(),
        group_ids,
        locale: Some(form.get("locale").to_owned()).filter(|l| !l.is_empty()),
        disabled: matches!(form.get("disabled"), "on" | "true" | "1"),
    };
    match v.ops(&a).user_update(id, input).await {
        Ok(_) => ui::see_other(&ui::with_ok("/users", "saved")),
        Err(e) => v.fail("/users", e),
    }
}

// ---- API tokens ----

pub(super) struct TokenRow {
    pub t: TokenView,
    pub created: String,
    pub used: String,
    pub revoked: bool,
}

#[derive(Template)]
#[template(path = "tokens.html")]
struct TokensPage {
    c: Ctx,
    rows: Vec<TokenRow>,
    secret: Option<String>,
    name: String,
}

async fn tokens_page(
    a: &Service,
    v: &Visitor,
    secret: Option<String>,
    name: String,
    status: StatusCode,
) -> Response {
    let tokens = match a.tokens().list(&v.principal).await {
        Ok(t) => t,
        Err(e) => return v.error_page(e),
    };
    let mut c = v.ctx("tokens");
    // Every role manages its own tokens.
    c.read_only_note = false;
    let rows = tokens
        .into_iter()
        .map(|t| TokenRow {
            created: c.time(t.created_at),
            used: c.time(t.last_used_at),
            revoked: t.revoked_at.is_some(),
            t,
        })
        .collect();
    ui::render_status(
        status,
        &TokensPage {
            c,
            rows,
            secret,
            name,
        },
    )
}

pub(super) async fn tokens(State(a): State<Service>, v: Visitor) -> Response {
    tokens_page(&a, &v, None, String::new(), StatusCode::OK).await
}

pub(super) async fn token_create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let input = TokenInput {
        name: form.get("name").trim().to_owned(),
        user_id: None,
    };
    match v.ops(&a).token_create(input).await {
        // Shown on this answer only: the secret is never stored, nor kept by any cache.
        Ok(created) => {
            let mut res =
                tokens_page(&a, &v, Some(created.secret), String::new(), StatusCode::OK).await;
            res.headers_mut().insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-store"),
            );
            res
        }
        // The page has no field for this; say it in the banner instead.
        Err(e) if e.code() != ErrorCode::Internal => {
            ui::see_other(&ui::with_err("/tokens", &v.error_text(&e)))
        }
        Err(e) => {
            // An internal failure: logged, and the form shown again to retry.
            v.error_text(&e);
            let name = form.get("name").to_owned();
            tokens_page(&a, &v, None, name, e.code().status()).await
        }
    }
}

pub(super) async fn token_revoke(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, _): Posted,
) -> Response {
    match v.ops(&a).token_revoke(id).await {
        Ok(_) => ui::see_other(&ui::with_ok("/tokens", "revoked")),
        Err(e) => v.fail("/tokens", e),
    }
}

// ---- audit log ----

pub(super) struct AuditRow {
    pub e: AuditView,
    pub at: String,
    pub before: String,
    pub after: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    c: Ctx,
    rows: Vec<AuditRow>,
    actor: String,
    target_type: String,
    total: u64,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Deserialize, Default)]
pub(super) struct AuditParams {
    #[serde(default)]
    actor: String,
    #[serde(default)]
    target_type: String,
    #[serde(default = "first_page")]
    page: u64,
}

/// Audit pages count from 1.
fn first_page() -> u64 {
    1
}

const AUDIT_PAGE: u64 = 50;

pub(super) async fn audit(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<AuditParams>,
) -> Response {
    let query = AuditQuery {
        actor: Some(q.actor.trim().to_owned()).filter(|s| !s.is_empty()),
        target_type: Some(q.target_type.trim().to_owned()).filter(|s| !s.is_empty()),
        page: Some(q.page.max(1)),
        size: Some(AUDIT_PAGE),
        ..AuditQuery::default()
    };
    let page = match a.audit_log().list(&v.principal, query).await {
        Ok(p) => p,
        Err(e) => return v.error_page(e),
    };
    let c = v.ctx("audit");
    let json = |j: &Option<serde_json::Value>| {
        j.as_ref()
            .map(|j| serde_json::to_string_pretty(j).unwrap_or_default())
            .unwrap_or_default()
    };
    let rows = page
        .items
        .into_iter()
        .map(|e| AuditRow {
            at: c.time(e.at),
            before: json(&e.before),
            after: json(&e.after),
            e,
        })
        .collect();
    let link = |p: u64| {
        let qs = serde_urlencoded::to_string([
            ("actor", q.actor.as_str()),
            ("target_type", q.target_type.as_str()),
            ("page", &p.to_string()),
        ])
        .unwrap_or_default();
        format!("/audit?{qs}")
    };
    ui::render(&AuditPage {
        prev: (q.page > 1).then(|| link(q.page - 1)),
        next: (q.page.max(1) * AUDIT_PAGE < page.total).then(|| link(q.page.max(1) + 1)),
        c,
        rows,
        actor: q.actor,
        target_type: q.target_type,
        total: page.total,
    })
}
