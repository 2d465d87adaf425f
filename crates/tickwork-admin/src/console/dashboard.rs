//! The dashboard: counts of jobs and executors, today's runs by state, and two charts drawn on
//! the server (runs by state, dispatch lateness) over a period the visitor picks (the last 24
//! hours by the hour, the last 7, 14 or 30 days or the days between two dates by the day;
//! two weeks when none is picked), each with its title, its unit and its time axis's zone;
//! and the ledger's alerts of missed, late and doubled fires of the last 24 hours.

mod range;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use jiff::{Timestamp, ToSpan};
use serde::Deserialize;
use tickwork_core::fire_check::FireAlertKind;
use tickwork_core::run::RunState;
use tickwork_protocol::api::{JobQuery, RunQuery};
use tickwork_store::TimeRange;

use super::charts::{self, Axes, Series};
use super::runs::state_class;
use super::session::Visitor;
use super::ui::{self, Ctx, Opt};
use crate::{Error, Service};

/// Runs read to draw the lateness chart (the newest of the period).
const LATENESS_SAMPLE: u64 = 1000;

pub(super) struct StateCount {
    pub state: RunState,
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
    period: Period,
    charts: Vec<Chart>,
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

/// The period the charts cover, as the query names it.
#[derive(Deserialize, Default)]
pub(super) struct PeriodQuery {
    #[serde(default)]
    range: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

/// The period's form and what it chose: its span in words, or why it was refused.
pub(super) struct Period {
    pub choices: Vec<Opt>,
    pub from: String,
    pub to: String,
    /// `2026-11-08 00:00 – 2026-11-22 00:00 (UTC)`.
    pub shown: String,
    pub error: Option<String>,
}

/// One chart of the page: its title above it and the SVG.
pub(super) struct Chart {
    pub id: &'static str,
    pub title: &'static str,
    pub svg: String,
}

/// Midnight (in `tz`) of the day `days_back` days before today, as epoch ms.
fn day_start(now: Timestamp, tz: &jiff::tz::TimeZone, days_back: i64) -> Option<i64> {
    let z = now.to_zoned(tz.clone()).start_of_day().ok()?;
    let z = z.checked_sub(days_back.days()).ok()?.start_of_day().ok()?;
    Some(z.timestamp().as_millisecond())
}

pub(super) async fn page(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<PeriodQuery>,
) -> Response {
    match build(&a, &v, &q).await {
        // A period that does not read: said above the charts, none drawn.
        Ok(p) if p.period.error.is_some() => ui::render_status(StatusCode::BAD_REQUEST, &p),
        Ok(p) => ui::render(&p),
        Err(e) => v.error_page(e),
    }
}

async fn build(a: &Service, v: &Visitor, q: &PeriodQuery) -> Result<DashboardPage, Error> {
    let c = v.ctx("dashboard");
    let tz = v.tz().clone();
    let now = Timestamp::from_millisecond(a.now_ms()).unwrap_or_else(|_| Timestamp::now());
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

    // Today: since midnight.
    let today_counts = a
        .dashboard()
        .run_state_counts(TimeRange {
            from: day_start(now, &tz, 0),
            to: day_start(now, &tz, -1),
        })
        .await?;
    let mut today: Vec<StateCount> = today_counts
        .iter()
        .map(|&(s, n)| StateCount {
            state: s,
            class: state_class(s),
            count: n,
        })
        .collect();
    today.sort_by_key(|s| s.state);
    let today_total = today.iter().map(|s| s.count).sum();

    let mut period = Period {
        choices: Opt::list(
            range::CHOICES.map(|(value, key)| (value.to_owned(), v.t(key).to_owned())),
            match (
                q.range.trim(),
                q.from.trim().is_empty() && q.to.trim().is_empty(),
            ) {
                ("", true) => range::DEFAULT,
                ("", false) => "dates",
                (r, _) => r,
            },
        ),
        from: q.from.trim().to_owned(),
        to: q.to.trim().to_owned(),
        shown: String::new(),
        error: None,
    };
    let charts = match range::buckets(&q.range, &q.from, &q.to, now, &tz) {
        Ok(b) => {
            let zone = tz.iana_name().unwrap_or("UTC");
            period.shown = format!(
                "{} – {} ({zone})",
                ui::fmt_ms(b.bounds.first().copied(), &tz)
                    .get(..16)
                    .unwrap_or_default(),
                ui::fmt_ms(b.bounds.last().copied(), &tz)
                    .get(..16)
                    .unwrap_or_default(),
            );
            draw(a, &c, &b, zone).await?
        }
        Err(r) => {
            let max = range::MAX_DAYS.to_string();
            let reason = v.t(r.reason).replace("{max}", &max);
            period.error = Some(format!("{}: {:?} {reason}", v.t(r.field), r.value));
            Vec::new()
        }
    };

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
        period,
        charts,
        fire_totals,
        fire_recent,
        c,
    })
}

/// The two charts over the bars `b` (times in `zone`).
async fn draw(a: &Service, c: &Ctx, b: &range::Buckets, zone: &str) -> Result<Vec<Chart>, Error> {
    let n = b.len();
    let mut per_bar = Vec::with_capacity(n);
    for w in b.bounds.windows(2) {
        let counts = a
            .dashboard()
            .run_state_counts(TimeRange {
                from: Some(w[0]),
                to: Some(w[1]),
            })
            .await?;
        per_bar.push(counts);
    }
    let group_of = |s: RunState| match state_class(s) {
        "s-ok" => 0,
        "s-fail" => 1,
        "s-run" => 2,
        _ => 3,
    };
    let mut values = vec![vec![0u64; n]; 4];
    for (bar, counts) in per_bar.iter().enumerate() {
        for &(s, n) in counts {
            values[group_of(s)][bar] += n;
        }
    }
    let names = [
        (c.label(RunState::Succeeded), "s-ok"),
        (c.label(RunState::Failed), "s-fail"),
        (c.t("in_progress"), "s-run"),
        (c.t("not_run"), "s-off"),
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
    let (unit, axis) = if b.hourly {
        ("runs_per_hour", "axis_hour")
    } else {
        ("runs_per_day", "axis_day")
    };
    let x = format!("{} ({zone})", c.t(axis));
    let runs = charts::stacked_bars(
        c.t("chart_runs"),
        &Axes {
            y: c.t(unit),
            x: &x,
        },
        &b.labels,
        &series,
    );

    // Lateness: dispatch time minus the planned instant, from the newest runs of the period.
    let sample = a
        .runs()
        .list(RunQuery {
            from: b.bounds.first().copied(),
            to: b.bounds.last().copied(),
            limit: Some(LATENESS_SAMPLE),
            ..RunQuery::default()
        })
        .await?;
    let mut sum = vec![0f64; n];
    let mut count = vec![0u32; n];
    let mut max = vec![0f64; n];
    for r in &sample.items {
        let Some(d) = r.dispatched_at else { continue };
        let Some(bar) = b
            .bounds
            .windows(2)
            .position(|w| (w[0]..w[1]).contains(&r.scheduled_at))
        else {
            continue;
        };
        let late = (d - r.scheduled_at).max(0) as f64;
        sum[bar] += late;
        count[bar] += 1;
        max[bar] = max[bar].max(late);
    }
    let avg: Vec<Option<f64>> = (0..n)
        .map(|i| (count[i] > 0).then(|| sum[i] / f64::from(count[i])))
        .collect();
    let maxes: Vec<Option<f64>> = (0..n).map(|i| (count[i] > 0).then_some(max[i])).collect();
    let lateness = charts::lateness_lines(
        c.t("chart_lateness"),
        &Axes {
            y: c.t("lateness_ms"),
            x: &x,
        },
        &b.labels,
        &avg,
        &maxes,
        (c.t("avg"), c.t("max")),
    );
    Ok(vec![
        Chart {
            id: "runs",
            title: c.t("chart_runs"),
            svg: runs,
        },
        Chart {
            id: "lateness",
            title: c.t("chart_lateness"),
            svg: lateness,
        },
    ])
}
