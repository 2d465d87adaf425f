//! The console: server-rendered pages for people (dashboard, jobs, runs, the schedule ahead,
//! executor groups, scripts, users and passwords, API tokens, alarm channels, audit log) in
//! English and Chinese, with its own CSS and a small script embedded in the binary.
//!
//! Every page needs a session (else a redirect to `/login`); every form that changes
//! something carries the session's CSRF token. Changes go through the service layer with the
//! session's principal, which checks permissions and writes the audit log: the console only
//! hides what a role cannot use.

mod alarms;
mod charts;
mod dag_svg;
mod dashboard;
mod groups;
mod heatmap;
mod i18n;
mod job_list;
mod jobs;
mod ops;
mod passwords;
mod people;
mod runs;
mod scripts;
mod session;
mod ui;
mod workflows;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};

use crate::Service;
// The sessions, roles and CSRF checks the console relies on.
use crate::auth;

/// Every console route; merged into the admin's router.
pub(crate) fn router() -> Router<Service> {
    Router::new()
        .route("/", get(dashboard::page))
        .route(
            "/login",
            get(session::login_form).post(session::login_submit),
        )
        .route("/logout", post(session::logout))
        .route("/lang", get(session::switch_lang))
        .route("/assets/{file}", get(ui::asset))
        .route("/jobs", get(job_list::list))
        .route("/jobs/bulk", post(job_list::bulk))
        .route("/jobs/new", get(jobs::new_form).post(jobs::create))
        .route("/jobs/{id}", get(jobs::detail))
        .route("/jobs/{id}/edit", get(jobs::edit_form).post(jobs::update))
        .route("/jobs/{id}/copy", get(jobs::copy_form))
        .route("/jobs/{id}/delete", post(jobs::delete))
        .route("/jobs/{id}/start", post(jobs::start))
        .route("/jobs/{id}/stop", post(jobs::stop))
        .route("/jobs/{id}/trigger", post(jobs::trigger))
        .route("/ui/preview", get(jobs::preview))
        .route("/runs", get(runs::list))
        .route("/schedule", get(heatmap::page))
        .route("/runs/clear", post(runs::clear))
        .route("/runs/{id}", get(runs::detail))
        .route("/runs/{id}/kill", post(runs::kill))
        .route("/ui/runs/{id}/log", get(runs::log))
        .route("/workflows", get(workflows::list).post(workflows::create))
        .route("/workflows/{key}", get(workflows::detail))
        .route("/workflows/{key}/edit", post(workflows::update))
        .route("/workflows/{key}/delete", post(workflows::delete))
        .route("/workflows/{key}/run", post(workflows::run))
        .route("/workflow-instances/{id}", get(workflows::instance))
        .route("/workflow-instances/{id}/{action}", post(workflows::act))
        .route("/groups", get(groups::list).post(groups::create))
        .route(
            "/groups/{id}/edit",
            get(groups::edit_form).post(groups::update),
        )
        .route("/groups/{id}/delete", post(groups::delete))
        .route("/groups/{id}/token", post(groups::rotate_token))
        .route("/jobs/{id}/script", get(scripts::page).post(scripts::save))
        .route("/jobs/{id}/script/restore", post(scripts::restore))
        .route("/jobs/{id}/script/diff", get(scripts::diff))
        .route("/users", get(people::users).post(people::user_create))
        .route("/users/{id}", post(people::user_update))
        .route(
            "/users/{id}/password",
            get(passwords::user_form).post(passwords::user_submit),
        )
        .route("/users/{id}/delete", post(passwords::user_delete))
        .route(
            "/password",
            get(passwords::own_form).post(passwords::own_submit),
        )
        .route("/tokens", get(people::tokens).post(people::token_create))
        .route("/tokens/{id}/revoke", post(people::token_revoke))
        .route("/alarms", get(alarms::list).post(alarms::create))
        .route(
            "/alarms/{id}/edit",
            get(alarms::edit_form).post(alarms::update),
        )
        .route("/alarms/{id}/delete", post(alarms::delete))
        .route("/alarms/{id}/test", post(alarms::test))
        .route("/audit", get(people::audit))
        .layer(axum::middleware::map_response(security_headers))
}

/// Pages come only from us: no frames, no foreign scripts, styles or images.
async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    res
}
