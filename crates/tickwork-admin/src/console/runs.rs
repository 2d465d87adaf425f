//! Runs: the list filtered by job, state and time, a run's page with its live log (read from
//! the executor through the admin), kill, and clearing old runs.

use std::collections::HashMap;

use askama::Template;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tickwork_core::run::RunState;
use tickwork_protocol::api::{JobQuery, RunQuery, RunView};

use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Opt};
use crate::{Error, Service};

const PAGE: u64 = 50;

/// The CSS class of a run state's badge.
pub(super) fn state_class(s: RunState) -> &'static str {
    match s {
        RunState::Succeeded => "s-ok",
        RunState::Failed | RunState::TimedOut | RunState::Lost | RunState::Killed => "s-fail",
        RunState::Planned | RunState::Sending | RunState::Dispatched => "s-run",
        RunState::Misfired | RunState::Skipped => "s-off",
    }
}

/// One row of a run table.
pub(super) struct RunRow {
    pub run: RunView,
    pub job: String,
    pub class: &'static str,
    pub scheduled: String,
    pub dispatched: String,
    pub finished: String,
    pub lateness: String,
    pub killable: bool,
}

impl RunRow {
    pub(super) fn new(
        c: &Ctx,
        run: RunView,
        jobs: &HashMap<i64, String>,
        can_kill: bool,
    ) -> RunRow {
        RunRow {
            job: jobs
                .get(&run.job_id)
                .cloned()
                .unwrap_or_else(|| format!("#{}", run.job_id)),
            class: state_class(run.state),
            scheduled: c.time(run.scheduled_at),
            dispatched: c.time(run.dispatched_at),
            finished: c.time(run.finished_at),
            lateness: run
                .dispatched_at
                .map(|d| format!("{} ms", d - run.scheduled_at))
                .unwrap_or_default(),
            killable: can_kill && run.state == RunState::Dispatched,
            run,
        }
    }
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    c: Ctx,
    runs: Vec<RunRow>,
    jobs: Vec<Opt>,
    states: Vec<Opt>,
    from: String,
    to: String,
    total: u64,
    prev: Option<String>,
    next: Option<String>,
    can_clear: bool,
}

#[derive(Deserialize, Default)]
pub(super) struct ListQuery {
    #[serde(default)]
    job_id: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    offset: u64,
}

/// `job id -> "#id description"` of (up to) the first thousand jobs, for names and the filter.
async fn job_names(a: &Service) -> Result<Vec<(i64, String)>, Error> {
    let page = a
        .jobs()
        .list(JobQuery {
            limit: Some(1000),
            ..JobQuery::default()
        })
        .await?;
    Ok(page
        .items
        .into_iter()
        .map(|j| (j.id, format!("#{} {}", j.id, j.spec.description)))
        .collect())
}

pub(super) async fn list(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<ListQuery>,
) -> Response {
    let mut jobs = match job_names(&a).await {
        Ok(j) => j,
        Err(e) => return v.error_page(e),
    };
    // The job the list is filtered by (a job list's "runs" link) is named in the filter even
    // when it is not among the first thousand.
    if let Ok(id) = q.job_id.parse::<i64>()
        && !jobs.iter().any(|(j, _)| *j == id)
        && let Ok(j) = a.jobs().get(id).await
    {
        jobs.push((j.id, format!("#{} {}", j.id, j.spec.description)));
    }
    let names: HashMap<i64, String> = jobs.iter().cloned().collect();
    let state = Some(q.state.clone()).filter(|s| !s.is_empty());
    let page = a
        .runs()
        .list(RunQuery {
            job_id: q.job_id.parse().ok(),
            group_id: None,
            state,
            from: ui::parse_local(&q.from, v.tz()),
            to: ui::parse_local(&q.to, v.tz()),
            offset: Some(q.offset),
            limit: Some(PAGE),
        })
        .await;
    let page = match page {
        Ok(p) => p,
        Err(e) => return v.error_page(e),
    };
    let c = v.ctx("runs");
    let runs = page
        .items
        .into_iter()
        .map(|r| {
            let can = c.can_write && v.can_change(r.group_id);
            RunRow::new(&c, r, &names, can)
        })
        .collect();
    let mut job_opts = vec![(String::new(), v.t("all").to_owned())];
    job_opts.extend(jobs.into_iter().map(|(id, n)| (id.to_string(), n)));
    let mut states = Opt::list([(String::new(), v.t("all").to_owned())], &q.state);
    states.extend(Opt::coded::<RunState>(v.lang, &q.state));
    let link = |offset: u64| {
        let qs = serde_urlencoded::to_string([
            ("job_id", q.job_id.as_str()),
            ("state", q.state.as_str()),
            ("from", q.from.as_str()),
            ("to", q.to.as_str()),
            ("offset", &offset.to_string()),
        ])
        .unwrap_or_default();
        format!("/runs?{qs}")
    };
    ui::render(&RunsPage {
        prev: (q.offset > 0).then(|| link(q.offset.saturating_sub(PAGE))),
        next: (q.offset + PAGE < page.total).then(|| link(q.offset + PAGE)),
        can_clear: c.can_write,
        c,
        runs,
        jobs: Opt::list(job_opts, &q.job_id),
        states,
        from: q.from,
        to: q.to,
        total: page.total,
    })
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    c: Ctx,
    r: RunRow,
    /// Who killed it, and when.
    killed_by: Option<String>,
}

pub(super) async fn detail(State(a): State<Service>, v: Visitor, Path(id): Path<i64>) -> Response {
    let run = match a.runs().get(id).await {
        Ok(r) => r,
        Err(e) => return v.error_page(e),
    };
    let job = a
        .jobs()
        .get(run.job_id)
        .await
        .map(|j| format!("#{} {}", j.id, j.spec.description))
        .unwrap_or_else(|_| format!("#{}", run.job_id));
    let killed_by = if run.state == RunState::Killed {
        match a.runs().killed_by(id).await {
            Ok(k) => k,
            Err(e) => return v.error_page(e),
        }
    } else {
        None
    };
    let c = v.ctx("runs");
    let killed_by = killed_by.map(|(who, at)| format!("{who} · {}", c.time(at)));
    let can = c.can_write && v.can_change(run.group_id);
    let r = RunRow::new(&c, run, &HashMap::new(), can);
    let r = RunRow { job, ..r };
    ui::render(&RunPage { c, r, killed_by })
}

pub(super) async fn kill(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let back = match form.get("_back") {
        "" => format!("/runs/{id}"),
        b => ui::safe_path(b).to_owned(),
    };
    match v.ops(&a).run_kill(id).await {
        Ok(_) => ui::see_other(&ui::with_ok(&back, "killed_ok")),
        Err(e) => v.fail(&back, e),
    }
}

#[derive(Deserialize)]
pub(super) struct LogQuery {
    #[serde(default = "one")]
    from: i32,
}

fn one() -> i32 {
    1
}

/// The log from line `from` on, for the run page's script:
/// `{"content", "next", "end", "state", "state_label"}` or `{"error", "state", "state_label"}`.
pub(super) async fn log(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
    Query(q): Query<LogQuery>,
) -> Response {
    let state = a.runs().get(id).await.map(|r| r.state);
    let label = state.as_ref().map(|s| v.lang.label(s)).unwrap_or("");
    let state = state.map(|s| s.as_str());
    match a.runs().log(id, q.from.max(1)).await {
        Ok(log) => {
            // The executor answers the last line it sent; the next request starts after it.
            let next = if log.to_line_num >= log.from_line_num {
                log.to_line_num + 1
            } else {
                q.from.max(1)
            };
            Json(serde_json::json!({
                "content": log.log_content,
                "next": next,
                "end": log.is_end,
                "state": state.unwrap_or(""),
                "state_label": label,
            }))
            .into_response()
        }
        Err(e) => Json(serde_json::json!({
            "error": v.error_text(&e),
            "state": state.unwrap_or(""),
            "state_label": label,
        }))
        .into_response(),
    }
}

pub(super) async fn clear(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let Ok(days) = form.get("before_days").trim().parse::<i64>() else {
        return ui::see_other(&ui::with_err(
            "/runs",
            &format!("{}: {}", v.t("before_days"), v.t("bad_number")),
        ));
    };
    let before = match a.runs().clear_before_days(days) {
        Ok(b) => b,
        Err(e) => return v.fail("/runs", e),
    };
    let job_id = form.get("job_id").trim().parse::<i64>().ok();
    match v.ops(&a).runs_clear(before, job_id).await {
        Ok(_) => ui::see_other(&ui::with_ok("/runs", "runs_cleared")),
        Err(e) => v.fail("/runs", e),
    }
}
