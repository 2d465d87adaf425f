//! The schedule ahead: a heatmap of the running jobs' fires (an hour a row, a minute a cell by
//! default) over a range from a start, by executor group, with the peaks and the jobs
//! colliding in them. Reads only: every role sees it.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Deserialize;
use tickwork_protocol::api::{HeatmapQuery, HeatmapView};

use super::charts::{self, HeatRow};
use super::session::Visitor;
use super::ui::{self, Ctx, Opt};
use crate::Service;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;
/// The ranges offered, in hours (the API takes up to 7 days).
const RANGES: [u32; 6] = [6, 12, 24, 48, 72, 168];
const BUCKETS: [&str; 5] = ["1m", "5m", "15m", "1h", "1d"];

#[derive(Deserialize, Default)]
pub(super) struct PageQuery {
    #[serde(default)]
    group: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    hours: String,
    #[serde(default)]
    bucket: String,
}

/// A peak as the page lists it.
struct PeakRow {
    start: String,
    fires: u64,
    /// (job id, key, fires, first fire, description)
    jobs: Vec<(i64, String, u64, String, String)>,
    more_jobs: u64,
}

/// A group as the page lists it.
struct GroupRow {
    app_name: String,
    title: String,
    fires: u64,
    busiest: String,
}

#[derive(Template)]
#[template(path = "heatmap.html")]
struct HeatmapPage {
    c: Ctx,
    groups: Vec<Opt>,
    ranges: Vec<Opt>,
    buckets: Vec<Opt>,
    from: String,
    error: Option<String>,
    map: Option<Drawn>,
}

/// What a heatmap that was counted shows.
struct Drawn {
    fires: u64,
    jobs: u64,
    range: String,
    chart: String,
    groups: Vec<GroupRow>,
    peaks: Vec<PeakRow>,
    /// (key, counted, until)
    capped: Vec<(String, u64, String)>,
}

pub(super) async fn page(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<PageQuery>,
) -> Response {
    let c = v.ctx("heatmap");
    let tz = v.tz().clone();
    let hours = if q.hours.trim().is_empty() {
        Ok(24)
    } else {
        q.hours
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|h| (1..=168).contains(h))
            .ok_or_else(|| format!("{}: {}", v.t("range_hours"), v.t("bad_hours")))
    };
    // By default from the start of this hour, so that the rows are whole hours.
    let from = if q.from.trim().is_empty() {
        let now = a.now_ms();
        Ok(now - now.rem_euclid(HOUR_MS))
    } else {
        ui::parse_local(&q.from, &tz)
            .ok_or_else(|| format!("{}: {:?} {}", v.t("from"), q.from.trim(), v.t("bad_time")))
    };
    let counted = match (from, hours) {
        (Ok(from), Ok(hours)) => {
            let query = HeatmapQuery {
                from: Some(from),
                to: Some(from.saturating_add(i64::from(hours) * HOUR_MS)),
                bucket: Some(q.bucket.clone()).filter(|b| !b.trim().is_empty()),
                group: Some(q.group.clone()).filter(|g| !g.trim().is_empty()),
            };
            a.jobs().heatmap(query).await.map_err(|e| v.error_text(&e))
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let groups = a.groups().list().await.unwrap_or_default();
    let mut group_opts = vec![(String::new(), v.t("all").to_owned())];
    group_opts.extend(groups.into_iter().map(|g| {
        let label = format!("{} ({})", g.app_name, g.title);
        (g.app_name, label)
    }));
    let hours_text = if q.hours.trim().is_empty() {
        "24".to_owned()
    } else {
        q.hours.trim().to_owned()
    };
    let bucket_text = if q.bucket.trim().is_empty() {
        "1m"
    } else {
        q.bucket.trim()
    };
    let (status, error, map) = match counted {
        Ok(view) => (StatusCode::OK, None, Some(drawn(&c, &view, &tz))),
        Err(e) => (StatusCode::BAD_REQUEST, Some(e), None),
    };
    ui::render_status(
        status,
        &HeatmapPage {
            groups: Opt::list(group_opts, q.group.trim()),
            ranges: Opt::list(
                RANGES.map(|h| (h.to_string(), format!("{h} h"))),
                &hours_text,
            ),
            buckets: Opt::list(BUCKETS.map(|b| (b.to_owned(), b.to_owned())), bucket_text),
            from: q.from.trim().to_owned(),
            error,
            map,
            c,
        },
    )
}

fn at(ms: i64, tz: &TimeZone, format: &str) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(t) => t.to_zoned(tz.clone()).strftime(format).to_string(),
        Err(_) => ms.to_string(),
    }
}

fn drawn(c: &Ctx, v: &HeatmapView, tz: &TimeZone) -> Drawn {
    let (columns, rows) = grid(v, tz, c.t("fires"));
    let title = format!("{} ({})", c.t("fires_per_bucket"), size(v.bucket_ms));
    let chart = charts::heat_grid(&title, &columns, &rows, (c.t("fewer"), c.t("more")));
    let minute = "%Y-%m-%d %H:%M";
    Drawn {
        fires: v.fires,
        jobs: v.jobs,
        range: format!(
            "{} – {} ({})",
            at(v.from, tz, minute),
            at(v.to, tz, minute),
            tz.iana_name().unwrap_or("local")
        ),
        chart,
        groups: v
            .groups
            .iter()
            .map(|g| {
                let busiest = v
                    .busiest(g)
                    .map(|(start, n)| format!("{} ({n})", at(start, tz, minute)))
                    .unwrap_or_else(|| "-".to_owned());
                GroupRow {
                    app_name: g.app_name.clone(),
                    title: g.title.clone(),
                    fires: g.fires,
                    busiest,
                }
            })
            .collect(),
        peaks: v
            .peaks
            .iter()
            .map(|p| PeakRow {
                start: at(p.start, tz, minute),
                fires: p.fires,
                jobs: p
                    .jobs
                    .iter()
                    .map(|j| {
                        let format = if j.first_fire.rem_euclid(1000) == 0 {
                            "%H:%M:%S"
                        } else {
                            "%H:%M:%S%.3f"
                        };
                        (
                            j.job_id,
                            j.key.clone(),
                            j.fires,
                            at(j.first_fire, tz, format),
                            j.description.clone(),
                        )
                    })
                    .collect(),
                more_jobs: p.more_jobs,
            })
            .collect(),
        capped: v
            .capped
            .iter()
            .map(|x| {
                (
                    x.key.clone(),
                    x.counted,
                    at(x.until, tz, "%Y-%m-%d %H:%M:%S"),
                )
            })
            .collect(),
    }
}

/// `15m`, `1h`, `1d`.
fn size(ms: i64) -> String {
    match ms {
        _ if ms % DAY_MS == 0 => format!("{}d", ms / DAY_MS),
        _ if ms % HOUR_MS == 0 => format!("{}h", ms / HOUR_MS),
        _ => format!("{}m", ms / 60_000),
    }
}

/// The grid of a heatmap: an hour a row when buckets divide an hour, a day a row when they
/// divide a day, else a bucket a row; the columns labelled with the wall time of the first
/// row's cells (every quarter hour, or every six hours); each cell's tooltip its time and
/// count.
fn grid(v: &HeatmapView, tz: &TimeZone, fires: &str) -> (Vec<(usize, String)>, Vec<HeatRow>) {
    let b = v.bucket_ms.max(1);
    let (per_row, row_format) = if b < HOUR_MS && HOUR_MS % b == 0 {
        ((HOUR_MS / b) as usize, "%m-%d %H:%M")
    } else if b < DAY_MS && DAY_MS % b == 0 {
        ((DAY_MS / b) as usize, "%Y-%m-%d")
    } else {
        (1, "%m-%d %H:%M")
    };
    let start = |i: usize| v.from + i as i64 * b;
    let columns = if per_row > 1 {
        (0..per_row.min(v.totals.len()))
            .filter_map(|col| {
                let t = Timestamp::from_millisecond(start(col))
                    .ok()?
                    .to_zoned(tz.clone());
                let label = if b < HOUR_MS {
                    (t.minute() % 15 == 0).then(|| format!(":{:02}", t.minute()))
                } else {
                    (t.minute() == 0 && t.hour() % 6 == 0).then(|| format!("{:02}:00", t.hour()))
                };
                label.map(|l| (col, l))
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows = v
        .totals
        .chunks(per_row)
        .enumerate()
        .map(|(r, counts)| HeatRow {
            label: at(start(r * per_row), tz, row_format),
            cells: counts
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let when = at(start(r * per_row + i), tz, "%Y-%m-%d %H:%M");
                    (n, format!("{when}: {n} {fires}"))
                })
                .collect(),
        })
        .collect();
    (columns, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(from: &str, bucket_ms: i64, totals: Vec<u64>) -> HeatmapView {
        let from = from.parse::<Timestamp>().unwrap().as_millisecond();
        HeatmapView {
            from,
            to: from + bucket_ms * totals.len() as i64,
            bucket_ms,
            buckets: totals.len() as u64,
            jobs: 1,
            fires: totals.iter().sum(),
            totals,
            groups: Vec::new(),
            peaks: Vec::new(),
            capped: Vec::new(),
        }
    }

    #[test]
    fn minutes_make_an_hour_a_row_labelled_by_quarter_hours() {
        let mut totals = vec![0; 150];
        totals[61] = 3;
        let v = view("2027-03-28T00:00:00Z", 60_000, totals);
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let (columns, rows) = grid(&v, &tz, "fires");
        assert_eq!(
            columns,
            vec![
                (0, ":00".to_owned()),
                (15, ":15".to_owned()),
                (30, ":30".to_owned()),
                (45, ":45".to_owned())
            ]
        );
        // Berlin springs forward at 01:00Z: the second row starts at 03:00.
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["03-28 01:00", "03-28 03:00", "03-28 04:00"]);
        assert_eq!(rows[2].cells.len(), 30, "the last row ends with the range");
        assert_eq!(
            rows[1].cells[1],
            (3, "2027-03-28 03:01: 3 fires".to_owned())
        );
    }

    #[test]
    fn hours_make_a_day_a_row_and_odd_buckets_a_bucket_a_row() {
        let v = view("2027-06-01T00:00:00Z", HOUR_MS, vec![1; 48]);
        let (columns, rows) = grid(&v, &TimeZone::UTC, "fires");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].label, "2027-06-01");
        assert_eq!(
            columns.iter().map(|c| c.0).collect::<Vec<_>>(),
            [0, 6, 12, 18]
        );
        let v = view("2027-06-01T00:00:00Z", 7 * 60_000, vec![1; 5]);
        let (columns, rows) = grid(&v, &TimeZone::UTC, "fires");
        assert!(columns.is_empty());
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[1].label, "06-01 00:07");
        assert_eq!(size(DAY_MS), "1d");
        assert_eq!(size(15 * 60_000), "15m");
    }
}
