//! The dashboard: counts of jobs and executors, today's runs by state, and two charts drawn on
//! the server (runs per day by state, lateness per day) over the last two weeks.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use jiff::{Timestamp, ToSpan};
use tickwork_core::run::RunState;
use tickwork_protocol::api::{JobQuery, RunQuery};
use tickwork_store::TimeRange;

use super::charts::{self, Series};
use super::runs::state_class;
use super::session::Visitor;
use super::ui::{self, Ctx};
use crate::{Error, Service};

/// Days shown by the charts.
const DAYS: usize = 14;
/// Runs read to draw the lateness chart (the newest of the period).
const LATENESS_SAMPLE: u64 = 1000;

pub(super) struct StateCount {
    pub state: &'static str,
    pub class: &'static str,
    pub count: u64,
}

#[derive(Template)]
#[template(path = "dashboard.html")]
struct DashboardPage {
    c: Ctx,
    jobs: u64,
    jobs_running: u64,
    groups: usize,
    executors: usize,
    today: Vec<StateCount>,
    today_total: u64,
    runs_chart: String,
    lateness_chart: String,
}

/// Midnight (in `tz`) of the day `days_back` days before today, as epoch ms.
fn day_start(now: Timestamp, tz: &jiff::tz::TimeZone, days_back: i64) -> Option<i64> {
    let z = now.to_zoned(tz.clone()).start_of_day().ok()?;
    let z = z.checked_sub(days_back.days()).ok()?.start_of_day().ok()?;
    Some(z.timestamp().as_millisecond())
}

pub(super) async fn page(State(a): State<Service>, v: Visitor) -> Response {
    match build(&a, &v).await {
        Ok(p) => ui::render(&p),
        Err(e) => v.error_page(e),
    }
}

async fn build(a: &Service, v: &Visitor) -> Result<DashboardPage, Error> {
    let c = v.ctx("dashboard");
    let tz = v.tz().clone();
    let now = Timestamp::now();
    let count = |status: Option<&str>| {
        a.jobs().list(JobQuery {
            status: status.map(str::to_owned),
            limit: Some(1),
            ..JobQuery::default()
        })
    };
    let (all, running, groups, registry) = tokio::try_join!(
        count(None),
        count(Some("running")),
        a.groups().list(),
        async { a.dashboard().registry_entries().await },
    )?;

    // Day boundaries, oldest first; the last one is tomorrow's midnight.
    let mut bounds = Vec::with_capacity(DAYS + 1);
    for back in (-1..DAYS as i64).rev() {
        bounds.push(day_start(now, &tz, back).unwrap_or(0));
    }
    let labels: Vec<String> = bounds[..DAYS]
        .iter()
        .map(|&ms| {
            ui::fmt_ms(Some(ms), &tz)
                .get(5..10)
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let mut per_day = Vec::with_capacity(DAYS);
    for w in bounds.windows(2) {
        let counts = a
            .dashboard()
            .run_state_counts(TimeRange {
                from: Some(w[0]),
                to: Some(w[1]),
            })
            .await?;
        per_day.push(counts);
    }
    let group_of = |s: RunState| match state_class(s) {
        "s-ok" => 0,
        "s-fail" => 1,
        "s-run" => 2,
        _ => 3,
    };
    let mut values = vec![vec![0u64; DAYS]; 4];
    for (day, counts) in per_day.iter().enumerate() {
        for &(s, n) in counts {
            values[group_of(s)][day] += n;
        }
    }
    let names = [
        ("succeeded", "s-ok"),
        ("failed", "s-fail"),
        ("dispatched", "s-run"),
        ("skipped", "s-off"),
    ];
    let series: Vec<Series> = names
        .iter()
        .zip(values)
        .map(|((label, class), values)| Series {
            label: (*label).to_owned(),
            class,
            values,
        })
        .collect();
    let runs_chart = charts::stacked_bars(c.t("chart_runs"), &labels, &series);

    // Today: the last window.
    let mut today: Vec<StateCount> = per_day
        .last()
        .map(|counts| {
            counts
                .iter()
                .map(|&(s, n)| StateCount {
                    state: s.as_str(),
                    class: state_class(s),
                    count: n,
                })
                .collect()
        })
        .unwrap_or_default();
    today.sort_by_key(|s| RunState::ALL.iter().position(|x| x.as_str() == s.state));
    let today_total = today.iter().map(|s| s.count).sum();

    // Lateness: dispatch time minus the planned instant, from the newest runs of the period.
    let sample = a
        .runs()
        .list(RunQuery {
            from: Some(bounds[0]),
            limit: Some(LATENESS_SAMPLE),
            ..RunQuery::default()
        })
        .await?;
    let mut sum = [0f64; DAYS];
    let mut n = [0u32; DAYS];
    let mut max = [0f64; DAYS];
    for r in &sample.items {
        let Some(d) = r.dispatched_at else { continue };
        let Some(day) = bounds
            .windows(2)
            .position(|w| (w[0]..w[1]).contains(&r.scheduled_at))
        else {
            continue;
        };
        let late = (d - r.scheduled_at).max(0) as f64;
        sum[day] += late;
        n[day] += 1;
        max[day] = max[day].max(late);
    }
    let avg: Vec<Option<f64>> = (0..DAYS)
        .map(|i| (n[i] > 0).then(|| sum[i] / f64::from(n[i])))
        .collect();
    let maxes: Vec<Option<f64>> = (0..DAYS).map(|i| (n[i] > 0).then_some(max[i])).collect();
    let lateness_chart = charts::lateness_lines(
        c.t("chart_lateness"),
        &labels,
        &avg,
        &maxes,
        (c.t("avg"), c.t("max")),
    );

    let live_after = a.now_ms() - a.config().registry.dead_after.as_millis() as i64;
    Ok(DashboardPage {
        jobs: all.total,
        jobs_running: running.total,
        groups: groups.len(),
        executors: registry
            .iter()
            .filter(|r| r.updated_at >= live_after)
            .count(),
        today,
        today_total,
        runs_chart,
        lateness_chart,
        c,
    })
}
