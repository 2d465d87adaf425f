//! Script jobs: an editor for the source, the version history, and restoring an old version
//! (which becomes a new version, so nothing is ever lost).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tickwork_protocol::api::{JobView, ScriptInput, ScriptVersionView};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx};
use crate::{ErrorCode, Service};

#[derive(Template)]
#[template(path = "script.html")]
struct ScriptPage {
    c: Ctx,
    job: JobView,
    source: String,
    comment: String,
    error: Option<String>,
    versions: Vec<(ScriptVersionView, String)>,
    can_change: bool,
}

async fn show(
    a: &Service,
    v: &Visitor,
    id: i64,
    edited: Option<(StatusCode, String, String, String)>,
) -> Response {
    let (job, versions) = match tokio::try_join!(a.jobs().get(id), a.scripts().versions(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let c = v.ctx("jobs");
    let versions = versions
        .into_iter()
        .map(|s| {
            let at = c.time(s.created_at);
            (s, at)
        })
        .collect();
    let (status, source, comment, error) = match edited {
        Some((status, s, cm, e)) => (status, s, cm, Some(e)),
        None => (
            StatusCode::OK,
            job.spec.glue_source.clone(),
            String::new(),
            None,
        ),
    };
    let page = ScriptPage {
        can_change: v.can_change(job.spec.group_id),
        c,
        job,
        source,
        comment,
        error,
        versions,
    };
    ui::render_status(status, &page)
}

pub(super) async fn page(State(a): State<Service>, v: Visitor, Path(id): Path<i64>) -> Response {
    show(&a, &v, id, None).await
}

pub(super) async fn save(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let input = ScriptInput {
        glue_type: None,
        source: form.get("source").to_owned(),
        comment: form.get("comment").to_owned(),
    };
    match v.ops(&a).script_save(id, input.clone()).await {
        Ok(_) => ui::see_other(&ui::with_ok(&format!("/jobs/{id}/script"), "script_saved")),
        Err(e) if matches!(e.code(), ErrorCode::InvalidInput | ErrorCode::Forbidden) => {
            let edited = (
                e.code().status(),
                input.source,
                input.comment,
                v.error_text(&e),
            );
            show(&a, &v, id, Some(edited)).await
        }
        Err(e) => v.fail(&format!("/jobs/{id}/script"), e),
    }
}

pub(super) async fn restore(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let back = format!("/jobs/{id}/script");
    let Ok(version) = form.get("version").parse::<i64>() else {
        return ui::see_other(&ui::with_err(&back, v.t("bad_number")));
    };
    match v.ops(&a).script_restore(id, version).await {
        Ok(_) => ui::see_other(&ui::with_ok(&back, "restored")),
        Err(e) => v.fail(&back, e),
    }
}
