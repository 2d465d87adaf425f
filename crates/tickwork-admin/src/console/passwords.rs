//! Passwords in the console: everyone changes their own (giving the current one), admins set
//! another user's; deleting a user (admins). The service checks roles, validates and audits.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tickwork_protocol::api::{PasswordInput, UserView};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field};
use crate::{ErrorCode, Service};

#[derive(Template)]
#[template(path = "password.html")]
struct PasswordPage {
    c: Ctx,
    /// Whose password: the visitor's own (the form asks the current one) or another user's.
    user: UserView,
    own: bool,
    action: String,
    fields: Vec<Field>,
}

/// The form for `user`'s password, with `errors` at their fields. Password fields are never
/// filled in again.
fn password_page(
    v: &Visitor,
    user: UserView,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let own = user.id == v.principal.user_id;
    let mut fields = Vec::new();
    if own {
        fields.push(Field::new(
            "current_password",
            "current_password",
            "password",
        ));
    }
    fields.push(Field::new("password", "new_password", "password").hint("password_hint"));
    fields.push(Field::new("password2", "repeat_password", "password"));
    // The admin's reset lives under the users page; one's own change under no menu item.
    let mut c = v.ctx(if own { "" } else { "users" });
    // Setting one's own password is open to every role: no read-only banner here.
    c.read_only_note = false;
    if let Some(rest) = ui::place_errors(&mut fields, errors) {
        c.err = Some(rest);
    }
    let action = if own {
        "/password".to_owned()
    } else {
        format!("/users/{}/password", user.id)
    };
    ui::render_status(
        status,
        &PasswordPage {
            c,
            user,
            own,
            action,
            fields,
        },
    )
}

/// The user whose password page `id` is (`None`: the visitor's own).
async fn target(a: &Service, v: &Visitor, id: Option<i64>) -> Result<UserView, Response> {
    let id = id.unwrap_or(v.principal.user_id);
    a.users()
        .get(&v.principal, id)
        .await
        .map_err(|e| v.error_page(e))
}

async fn form(a: &Service, v: &Visitor, id: Option<i64>) -> Response {
    match target(a, v, id).await {
        Ok(user) => password_page(v, user, HashMap::new(), StatusCode::OK),
        Err(res) => res,
    }
}

async fn submit(a: &Service, v: &Visitor, id: Option<i64>, form: &ui::Form) -> Response {
    let user = match target(a, v, id).await {
        Ok(u) => u,
        Err(res) => return res,
    };
    let own = user.id == v.principal.user_id;
    let password = form.get("password");
    // Asking twice only guards against a typo in the form; the API takes the password once.
    if password != form.get("password2") {
        let errors = HashMap::from([("password2".to_owned(), v.t("passwords_differ").to_owned())]);
        return password_page(v, user, errors, ErrorCode::InvalidInput.status());
    }
    let input = PasswordInput {
        current_password: own.then(|| form.get("current_password").to_owned()),
        password: password.to_owned(),
    };
    match v.ops(a).user_set_password(user.id, input).await {
        // Every session of the user ended, this one too: sign in with the new password.
        Ok(()) if own => ui::see_other("/login?ok=password_changed"),
        Ok(()) => ui::see_other(&ui::with_ok("/users", "password_set")),
        Err(e) => {
            let (status, errors) = v.form_errors(&e);
            password_page(v, user, errors, status)
        }
    }
}

pub(super) async fn own_form(State(a): State<Service>, v: Visitor) -> Response {
    form(&a, &v, None).await
}

pub(super) async fn own_submit(State(a): State<Service>, Posted(v, f): Posted) -> Response {
    submit(&a, &v, None, &f).await
}

pub(super) async fn user_form(
    State(a): State<Service>,
    Path(id): Path<i64>,
    v: Visitor,
) -> Response {
    form(&a, &v, Some(id)).await
}

pub(super) async fn user_submit(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, f): Posted,
) -> Response {
    submit(&a, &v, Some(id), &f).await
}

pub(super) async fn user_delete(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, _): Posted,
) -> Response {
    match v.ops(&a).user_delete(id).await {
        Ok(()) => ui::see_other(&ui::with_ok("/users", "deleted")),
        Err(e) => v.fail("/users", e),
    }
}
