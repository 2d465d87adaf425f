//! The job list, made for hundreds or thousands of jobs: filters, a page size, sorting by
//! column (done by the store), each job's last run (found for the page at once), links to run a
//! job once and to its runs, and start/stop/run once/delete of the ticked jobs in one POST.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use tickwork_protocol::api::{
    JobAction, JobListItem, JobQuery, JobView, JobsActionInput, JobsActionResult,
};

use super::jobs::group_names;
use super::runs::state_class;
use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Opt};
use crate::{ErrorCode, Service};

/// The page sizes offered.
const SIZES: [u64; 4] = [20, 50, 100, 200];
const DEFAULT_SIZE: u64 = 50;
/// Refused jobs named one by one in the banner; the rest are counted.
const REFUSALS_NAMED: usize = 10;

/// The last run of a row's job.
pub(super) struct LastRun {
    pub id: i64,
    pub state: &'static str,
    pub class: &'static str,
    pub at: String,
}

/// One row of the job list.
pub(super) struct JobRow {
    pub job: JobView,
    pub group: String,
    pub next: String,
    pub running: bool,
    pub can_change: bool,
    pub last: Option<LastRun>,
}

/// A sortable column's header: the link that sorts by it (or turns its order round), and an
/// arrow on the column the list is sorted by.
pub(super) struct Head {
    pub key: &'static str,
    pub href: String,
    pub arrow: &'static str,
}

#[derive(Template)]
#[template(path = "jobs.html")]
struct JobsPage {
    c: Ctx,
    rows: Vec<JobRow>,
    groups: Vec<Opt>,
    statuses: Vec<Opt>,
    sizes: Vec<Opt>,
    text: String,
    sort: String,
    order: String,
    heads: Vec<Head>,
    total: u64,
    page: u64,
    pages: u64,
    prev: Option<String>,
    next: Option<String>,
    /// The outcome of the last action on ticked jobs, when all of them were done.
    done: Option<String>,
    zone: String,
}

impl JobsPage {
    /// The header of sortable column `key`.
    fn head(&self, key: &str) -> Option<&Head> {
        self.heads.iter().find(|h| h.key == key)
    }
}

/// The list's query string. Everything is read as text so that a hand-edited address gets
/// a page with the service's error, not a bare 400.
#[derive(Deserialize, Default, Clone)]
pub(super) struct ListQuery {
    #[serde(default)]
    group_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    sort: String,
    #[serde(default)]
    order: String,
    #[serde(default)]
    size: String,
    #[serde(default)]
    page: String,
    /// After an action on ticked jobs: which, and on how many.
    #[serde(default)]
    done: String,
    #[serde(default)]
    n: String,
}

impl ListQuery {
    fn size(&self) -> u64 {
        self.size.trim().parse().unwrap_or(DEFAULT_SIZE)
    }

    fn page(&self) -> u64 {
        self.page.trim().parse().unwrap_or(1).max(1)
    }

    /// `/jobs?...` with these filters, this order and size, on `page`; empty values left out.
    fn link(&self, sort: &str, order: &str, page: u64) -> String {
        let size = self.size().to_string();
        let page = page.to_string();
        let pairs: Vec<(&str, &str)> = [
            ("group_id", self.group_id.as_str()),
            ("status", self.status.as_str()),
            ("text", self.text.as_str()),
            ("sort", sort),
            ("order", order),
            ("size", size.as_str()),
            ("page", page.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
        format!(
            "/jobs?{}",
            serde_urlencoded::to_string(pairs).unwrap_or_default()
        )
    }

    /// The header of column `key`: sorts by it ascending, or the other way round when the
    /// list is already sorted by it; back to page 1 either way.
    fn head(&self, key: &'static str) -> Head {
        let current = match self.sort.as_str() {
            "" => "id",
            s => s,
        };
        let descending = self.order == "desc";
        let (order, arrow) = match (current == key, descending) {
            (true, false) => ("desc", "▲"),
            (true, true) => ("asc", "▼"),
            (false, _) => ("asc", ""),
        };
        Head {
            key,
            href: self.link(key, order, 1),
            arrow,
        }
    }
}

pub(super) async fn list(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<ListQuery>,
) -> Response {
    let groups = match a.groups().list().await {
        Ok(g) => g,
        Err(e) => return v.error_page(e),
    };
    let names = group_names(&groups);
    let size = q.size();
    let page_no = q.page();
    let query = JobQuery {
        group_id: q.group_id.parse().ok(),
        status: Some(q.status.clone()).filter(|s| !s.is_empty()),
        text: Some(q.text.clone()).filter(|s| !s.trim().is_empty()),
        sort: Some(q.sort.clone()).filter(|s| !s.is_empty()),
        order: Some(q.order.clone()).filter(|s| !s.is_empty()),
        offset: Some((page_no - 1).saturating_mul(size)),
        limit: Some(size),
    };
    let page = match a.jobs().list_with_last_runs(query).await {
        Ok(p) => p,
        Err(e) => return v.error_page(e),
    };
    let pages = page.total.div_ceil(size).max(1);
    // Past the end (the last jobs of the last page were deleted): the last page.
    if page_no > pages {
        return ui::see_other(&q.link(&q.sort, &q.order, pages));
    }
    let c = v.ctx("jobs");
    let rows = page
        .items
        .into_iter()
        .map(|JobListItem { job, last_run }| JobRow {
            group: names.get(&job.spec.group_id).cloned().unwrap_or_default(),
            next: c.time(job.next_fire_at),
            running: job.status == "running",
            can_change: v.can_change(job.spec.group_id),
            last: last_run.map(|r| LastRun {
                id: r.id,
                state: r.state.as_str(),
                class: state_class(r.state),
                at: c.time(r.scheduled_at),
            }),
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
    let mut sizes: Vec<u64> = SIZES.to_vec();
    if !sizes.contains(&size) {
        sizes.push(size);
        sizes.sort_unstable();
    }
    let sizes = Opt::list(
        sizes.iter().map(|s| (s.to_string(), s.to_string())),
        &size.to_string(),
    );
    let heads = ["id", "description", "group", "next_fire", "last_run"]
        .into_iter()
        .map(|k| q.head(k))
        .collect();
    ui::render(&JobsPage {
        prev: (page_no > 1).then(|| q.link(&q.sort, &q.order, page_no - 1)),
        next: (page_no < pages).then(|| q.link(&q.sort, &q.order, page_no + 1)),
        done: done_text(&v, &q),
        zone: c.zone().to_owned(),
        c,
        rows,
        groups: Opt::list(group_opts, &q.group_id),
        statuses,
        sizes,
        text: q.text,
        sort: q.sort,
        order: q.order,
        heads,
        total: page.total,
        page: page_no,
        pages,
    })
}

/// "12 stopped", from the list's `done` and `n` after an action on ticked jobs.
fn done_text(v: &Visitor, q: &ListQuery) -> Option<String> {
    let action = action_of(&q.done)?;
    let n: u64 = q.n.parse().ok()?;
    Some(counted(v, action, n))
}

fn action_of(name: &str) -> Option<JobAction> {
    JobAction::ALL.into_iter().find(|a| a.as_str() == name)
}

/// "12 stopped" in the visitor's language.
fn counted(v: &Visitor, action: JobAction, n: u64) -> String {
    let key = match action {
        JobAction::Start => "bulk_started",
        JobAction::Stop => "bulk_stopped",
        JobAction::Trigger => "bulk_triggered",
        JobAction::Delete => "bulk_deleted",
    };
    v.t(key).replace("{n}", &n.to_string())
}

/// The ticked jobs' action: `action` on every `ids` of the form, each job by the service as
/// its own action (permission, audit record), then back to the list with the outcome.
pub(super) async fn bulk(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let back = match ui::safe_path(form.get("_back")) {
        "/" => "/jobs",
        b => b,
    };
    let back = without_outcome(back);
    let ids: Result<Vec<i64>, _> = form
        .0
        .iter()
        .filter(|(k, _)| k == "ids")
        .map(|(_, id)| id.trim().parse::<i64>())
        .collect();
    let ids = match ids {
        Ok(ids) if !ids.is_empty() => ids,
        Ok(_) => return ui::see_other(&ui::with_err(&back, v.t("bulk_none"))),
        Err(_) => return ui::see_other(&ui::with_err(&back, "ids: not a job id")),
    };
    let Some(action) = action_of(form.get("action")) else {
        let wrong = format!(
            "action: {:?} is not start, stop, trigger or delete",
            form.get("action")
        );
        return ui::see_other(&ui::with_err(&back, &wrong));
    };
    match v.ops(&a).jobs_act(JobsActionInput { action, ids }).await {
        Ok(r) if r.refused.is_empty() => {
            let n = r.done.len().to_string();
            ui::see_other(&with_pairs(&back, &[("done", action.as_str()), ("n", &n)]))
        }
        Ok(r) => ui::see_other(&ui::with_err(&back, &refusals_text(&v, &r))),
        Err(e) => v.fail(&back, e),
    }
}

/// "12 stopped, 1 refused: job 7 (You are not allowed to do this)".
fn refusals_text(v: &Visitor, r: &JobsActionResult) -> String {
    let mut text = format!(
        "{}, {}: ",
        counted(v, r.action, r.done.len() as u64),
        v.t("bulk_refused")
            .replace("{n}", &r.refused.len().to_string())
    );
    let named: Vec<String> = r
        .refused
        .iter()
        .take(REFUSALS_NAMED)
        .map(|j| {
            let why = if j.code == ErrorCode::Forbidden.as_str() {
                v.t("forbidden").to_owned()
            } else {
                j.message.clone()
            };
            format!("{} {} ({why})", v.t("job"), j.id)
        })
        .collect();
    text.push_str(&named.join("; "));
    if r.refused.len() > REFUSALS_NAMED {
        text.push_str(&format!("; … +{}", r.refused.len() - REFUSALS_NAMED));
    }
    text
}

/// `path` without the banners of an earlier action.
fn without_outcome(path: &str) -> String {
    with_pairs(path, &[])
}

/// `path` with the banners of an earlier action replaced by `pairs`.
fn with_pairs(path: &str, pairs: &[(&str, &str)]) -> String {
    let (base, query) = path.split_once('?').unwrap_or((path, ""));
    let mut all: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    all.retain(|(k, _)| !matches!(k.as_str(), "ok" | "err" | "done" | "n"));
    all.extend(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    if all.is_empty() {
        return base.to_owned();
    }
    format!(
        "{base}?{}",
        serde_urlencoded::to_string(&all).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_sort_by_their_column_and_turn_the_order_round() {
        let q = ListQuery {
            status: "running".into(),
            sort: "next_fire".into(),
            size: "100".into(),
            page: "3".into(),
            ..ListQuery::default()
        };
        let next = q.head("next_fire");
        assert_eq!(next.arrow, "▲");
        assert_eq!(
            next.href,
            "/jobs?status=running&sort=next_fire&order=desc&size=100&page=1"
        );
        let id = q.head("id");
        assert_eq!(
            (id.arrow, id.href.contains("sort=id&order=asc")),
            ("", true)
        );
        let plain = ListQuery::default();
        assert_eq!(plain.head("id").arrow, "▲");
        assert_eq!(plain.link("", "", 2), "/jobs?size=50&page=2");
    }

    #[test]
    fn an_outcome_replaces_the_last_one_and_keeps_the_list_where_it_was() {
        assert_eq!(
            with_pairs(
                "/jobs?page=2&done=stop&n=3&err=x",
                &[("done", "start"), ("n", "1")]
            ),
            "/jobs?page=2&done=start&n=1"
        );
        assert_eq!(without_outcome("/jobs?ok=saved"), "/jobs");
    }
}
