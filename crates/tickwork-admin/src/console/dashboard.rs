//! The dashboard: counts of jobs and executors, today's runs by state, two charts drawn on
//! the server (runs per day by state, lateness per day) over the last two weeks, and the
//! ledger's alerts of missed, late and doubled fires of the last 24 hours.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use jiff::{Timestamp, ToSpan};
use tickwork_core::fire_check::FireAlertKind;
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
    fire_totals: Vec<FireTotal>,
    fire_recent: Vec<FireAlertRow>,
}

/// The ledger's alerts of one kind over the last 24 hours.
struct FireTotal {
    kind: &'static str,
    /// The i18n key of the kind.
    label: &'static str,
    alerts: u64,
    fires: u64,
}

/// One recent ledger alert.
struct FireAlertRow {
    created_at: i64,
    job_id: i64,
    /// The job's description (or key), `#id` when it is gone.
    job: String,
    kind: &'static str,
    label: &'static str,
    fires: i64,
    first_at: i64,
    last_at: i64,
    worst_late_ms: i64,
}

/// Ledger alerts listed on the dashboard.
const FIRE_ALERTS_SHOWN: u32 = 10;

/// The i18n key of an alert kind.
fn fire_label(kind: FireAlertKind) -> &'static str {
    match kind {
        FireAlertKind::Missed => "fire_missed",
        FireAlertKind::Late => "fire_late",
        FireAlertKind::Doubled => "fire_doubled",
    }
}

/// The last 24 hours' ledger alerts: totals per kind and the newest ones, with job names.
async fn fire_alerts(a: &Service, now: i64) -> Result<(Vec<FireTotal>, Vec<FireAlertRow>), Error> {
    let range = TimeRange {
        from: Some(now - 86_400_000),
        to: None,
    };
    let totals = a
        .dashboard()
        .fire_alert_totals(range)
        .await?
        .into_iter()
        .map(|t| FireTotal {
            kind: t.kind.as_str(),
            label: fire_label(t.kind),
            alerts: t.alerts,
            fires: t.fires,
        })
        .collect();
    let mut rows = Vec::new();
    for r in a
        .dashboard()
        .fire_alerts_recent(range, FIRE_ALERTS_SHOWN)
        .await?
    {
        let job = match a.jobs().get(r.alert.job_id).await {
            Ok(j) if !j.spec.description.is_empty() => j.spec.description,
            Ok(j) => j.key,
            Err(_) => format!("#{}", r.alert.job_id),
        };
        rows.push(FireAlertRow {
            created_at: r.created_at,
            job_id: r.alert.job_id,
            job,
            kind: r.alert.kind.as_str(),
            label: fire_label(r.alert.kind),
            fires: r.alert.fires,
            first_at: r.alert.first_at,
            last_at: r.alert.last_at,
            worst_late_ms: r.alert.worst_late_ms,
        });
    }
    Ok((totals, rows))
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

    let (fire_totals, fire_recent) = fire_alerts(a, a.now_ms()).await?;
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
        fire_totals,
        fire_recent,
        c,
    })
}
