//! Script jobs: an editor for the source (a textarea the editor bundle enhances), the version
//! history, the changes between any two versions, loading an old version into the editor to
//! read or edit before saving it, and restoring an old version (which becomes a new version,
//! so nothing is ever lost).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tickwork_protocol::api::{JobView, ScriptInput, ScriptVersionView};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, EDITOR_JS};
use crate::diff::{DiffLine, added_and_removed};
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
    /// The version loaded into the editor, when one was asked for.
    loaded: Option<i64>,
    /// The versions the comparison form starts with: the one before the newest, the newest.
    compare: (i64, i64),
    editor_js: &'static str,
}

impl ScriptPage {
    /// Whether `version` is the one loaded into the editor.
    fn is_loaded(&self, version: impl std::borrow::Borrow<i64>) -> bool {
        self.loaded == Some(*version.borrow())
    }
}

/// What the editor holds instead of the current source.
enum Draft {
    /// A form sent back with its error: status, source, comment, message.
    Edited(StatusCode, String, String, String),
    /// An old version, loaded to be read or edited before it is saved.
    Loaded(ScriptVersionView),
}

#[derive(Deserialize, Default)]
pub(super) struct PageQuery {
    #[serde(default)]
    load: Option<String>,
}

#[derive(Deserialize, Default)]
pub(super) struct DiffQuery {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

#[derive(Template)]
#[template(path = "script_diff.html")]
struct DiffPage {
    c: Ctx,
    job: JobView,
    old: (ScriptVersionView, String),
    new: (ScriptVersionView, String),
    lines: Vec<DiffLine>,
    added: usize,
    removed: usize,
}

/// A version number from a query or form field; `None` when it is no whole number.
fn version_number(s: &str) -> Option<i64> {
    s.trim().parse().ok()
}

async fn show(a: &Service, v: &Visitor, id: i64, draft: Option<Draft>) -> Response {
    let (job, versions) = match tokio::try_join!(a.jobs().get(id), a.scripts().versions(id)) {
        Ok(x) => x,
        Err(e) => return v.error_page(e),
    };
    let c = v.ctx("jobs");
    let compare = match versions.as_slice() {
        [newest, before, ..] => (before.version, newest.version),
        [only] => (only.version, only.version),
        [] => (0, 0),
    };
    let versions = versions
        .into_iter()
        .map(|s| {
            let at = c.time(s.created_at);
            (s, at)
        })
        .collect();
    let mut loaded = None;
    let (status, source, comment, error) = match draft {
        Some(Draft::Edited(status, s, cm, e)) => (status, s, cm, Some(e)),
        Some(Draft::Loaded(old)) => {
            loaded = Some(old.version);
            let comment = format!("{} {}", c.t("from_version"), old.version);
            (StatusCode::OK, old.source, comment, None)
        }
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
        loaded,
        compare,
        editor_js: EDITOR_JS,
    };
    ui::render_status(status, &page)
}

/// The script page; `?load=N` puts version N into the editor (nothing is saved until the
/// form is). An unknown or malformed version is said on the page, with the current source.
pub(super) async fn page(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
    Query(q): Query<PageQuery>,
) -> Response {
    let Some(load) = q.load else {
        return show(&a, &v, id, None).await;
    };
    let back = format!("/jobs/{id}/script");
    let Some(version) = version_number(&load) else {
        let text = format!("{}: {}", v.t("version"), v.t("bad_number"));
        return v.message(StatusCode::BAD_REQUEST, &text, &back);
    };
    match a.scripts().version(id, version).await {
        Ok(old) => show(&a, &v, id, Some(Draft::Loaded(old))).await,
        Err(e) => v.message(e.code().status(), &v.error_text(&e), &back),
    }
}

/// The changes from version `from` to version `to` of a job's script.
pub(super) async fn diff(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
    Query(q): Query<DiffQuery>,
) -> Response {
    let back = format!("/jobs/{id}/script");
    let (Some(from), Some(to)) = (version_number(&q.from), version_number(&q.to)) else {
        let text = format!("{}: {}", v.t("version"), v.t("bad_number"));
        return v.message(StatusCode::BAD_REQUEST, &text, &back);
    };
    let (job, (old, new, lines)) =
        match tokio::try_join!(a.jobs().get(id), a.scripts().diff(id, from, to)) {
            Ok(x) => x,
            Err(e) => return v.message(e.code().status(), &v.error_text(&e), &back),
        };
    let c = v.ctx("jobs");
    let (added, removed) = added_and_removed(&lines);
    let (old_at, new_at) = (c.time(old.created_at), c.time(new.created_at));
    let page = DiffPage {
        added,
        removed,
        old: (old, old_at),
        new: (new, new_at),
        c,
        job,
        lines,
    };
    ui::render_status(StatusCode::OK, &page)
}

pub(super) async fn save(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let input = ScriptInput {
        glue_type: None,
        // Browsers post a textarea's line breaks as CRLF; the script has the LF the editor
        // shows (and versions saved elsewhere have), so that versions compare line by line.
        source: form.get("source").replace("\r\n", "\n"),
        comment: form.get("comment").to_owned(),
    };
    match v.ops(&a).script_save(id, input.clone()).await {
        Ok(_) => ui::see_other(&ui::with_ok(&format!("/jobs/{id}/script"), "script_saved")),
        Err(e) if matches!(e.code(), ErrorCode::InvalidInput | ErrorCode::Forbidden) => {
            let edited = Draft::Edited(
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
    let Some(version) = version_number(form.get("version")) else {
        return ui::see_other(&ui::with_err(&back, v.t("bad_number")));
    };
    match v.ops(&a).script_restore(id, version).await {
        Ok(_) => ui::see_other(&ui::with_ok(&back, "restored")),
        Err(e) => v.fail(&back, e),
    }
}
