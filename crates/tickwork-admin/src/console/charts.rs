//! SVG charts drawn on the server from numbers: stacked bars of runs by state, lateness
//! lines (both with their axes named: what is counted in which unit, and the time axis with
//! its zone), and the schedule's heatmap grid. Plain strings, so the console needs no chart
//! library and no script.

use std::fmt::Write;

/// One series of a stacked bar chart: a legend label, a CSS class for its colour, one value
/// per bar.
pub(super) struct Series {
    pub label: String,
    pub class: &'static str,
    pub values: Vec<u64>,
}

/// What the axes of a chart measure: the values' unit (`runs per hour`) and the time axis
/// (`hour (UTC)`).
pub(super) struct Axes<'a> {
    pub y: &'a str,
    pub x: &'a str,
}

const W: f64 = 640.0;
const H: f64 = 240.0;
/// Room for the value labels and, left of them, the value axis's name (turned upright).
const LEFT: f64 = 62.0;
/// Room for the time labels and, below them, the time axis's name.
const BOTTOM: f64 = 44.0;
const TOP: f64 = 24.0;
/// Where the time labels sit, and the time axis's name below them.
const TICK_Y: f64 = H - BOTTOM + 14.0;
const X_NAME_Y: f64 = H - 6.0;

/// Escapes text for SVG/XML content and attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at least `max`.
fn nice_max(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= max {
            return m * p;
        }
    }
    10.0 * p
}

fn frame(out: &mut String, title: &str, axes: &Axes<'_>, top: f64) {
    let _ = write!(
        out,
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = esc(title)
    );
    let mid = TOP + (H - BOTTOM - TOP) / 2.0;
    let _ = write!(
        out,
        r#"<text class="axis-name y-name" x="14" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 14 {mid:.1})">{y}</text><text class="axis-name x-name" x="{cx:.1}" y="{X_NAME_Y}" text-anchor="middle">{x}</text>"#,
        cx = LEFT + (W - 8.0 - LEFT) / 2.0,
        y = esc(axes.y),
        x = esc(axes.x),
    );
    // Five bands: a top of 1, 2, 5 or 10 times a power of ten gives round steps.
    for i in 0..=5 {
        let v = top * f64::from(i) / 5.0;
        let y = H - BOTTOM - (H - BOTTOM - TOP) * f64::from(i) / 5.0;
        let _ = write!(
            out,
            r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}"/><text class="axis" x="{tx}" y="{ty:.1}" text-anchor="end">{v}</text>"#,
            x2 = W - 8.0,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            v = fmt_num(v),
        );
    }
}

fn fmt_num(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Every how many slots a time label is written so that labels of `labels`' width do not
/// overlap: 1 when they fit.
fn label_step(labels: &[String], slot: f64) -> usize {
    let widest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    let need = widest * 6.5 + 6.0;
    ((need / slot).ceil() as usize).max(1)
}

/// The time labels under the slots, every `label_step` one (the last one always).
fn time_labels(out: &mut String, labels: &[String], slot: f64) {
    let step = label_step(labels, slot);
    let last = labels.len().saturating_sub(1);
    for (i, label) in labels.iter().enumerate() {
        // The last one is written instead of a neighbour that would touch it.
        let shown = if i == last {
            true
        } else {
            i % step == 0 && last - i >= step
        };
        if !shown {
            continue;
        }
        let _ = write!(
            out,
            r#"<text class="axis" x="{cx:.1}" y="{TICK_Y}" text-anchor="middle">{l}</text>"#,
            cx = LEFT + slot * i as f64 + slot / 2.0,
            l = esc(label),
        );
    }
}

/// Stacked bars: one bar per label, one segment per series.
pub(super) fn stacked_bars(
    title: &str,
    axes: &Axes<'_>,
    labels: &[String],
    series: &[Series],
) -> String {
    let n = labels.len().max(1);
    let totals: Vec<u64> = (0..labels.len())
        .map(|i| {
            series
                .iter()
                .map(|s| s.values.get(i).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    // Counts: at least 5 at the top, so that the five steps are whole runs.
    let top = nice_max(totals.iter().copied().max().unwrap_or(0) as f64).max(5.0);
    let mut out = String::new();
    frame(&mut out, title, axes, top);
    let slot = (W - LEFT - 8.0) / n as f64;
    let bar = (slot * 0.7).max(2.0);
    let plot_h = H - BOTTOM - TOP;
    for (i, label) in labels.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
        let mut y = H - BOTTOM;
        for s in series {
            let v = s.values.get(i).copied().unwrap_or(0);
            if v == 0 {
                continue;
            }
            let h = plot_h * v as f64 / top;
            y -= h;
            let _ = write!(
                out,
                r#"<rect class="{c}" x="{x:.1}" y="{y:.1}" width="{bar:.1}" height="{h:.1}"><title>{l} {day}: {v}</title></rect>"#,
                c = s.class,
                l = esc(&s.label),
                day = esc(label),
            );
        }
    }
    time_labels(&mut out, labels, slot);
    legend(&mut out, series.iter().map(|s| (s.label.as_str(), s.class)));
    out.push_str("</svg>");
    out
}

/// Two lines (average and maximum) over the labels; `None` is a slot without data.
pub(super) fn lateness_lines(
    title: &str,
    axes: &Axes<'_>,
    labels: &[String],
    avg: &[Option<f64>],
    max: &[Option<f64>],
    names: (&str, &str),
) -> String {
    let n = labels.len().max(1);
    let peak = max.iter().chain(avg).flatten().copied().fold(0.0, f64::max);
    let top = nice_max(peak);
    let mut out = String::new();
    frame(&mut out, title, axes, top);
    let slot = (W - LEFT - 8.0) / n as f64;
    let plot_h = H - BOTTOM - TOP;
    let point = |i: usize, v: f64| {
        (
            LEFT + slot * i as f64 + slot / 2.0,
            H - BOTTOM - plot_h * v / top,
        )
    };
    for (values, class) in [(max, "late-max"), (avg, "late-avg")] {
        let mut path = String::new();
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            let (x, y) = point(i, *v);
            let _ = write!(
                path,
                "{}{x:.1},{y:.1} ",
                if path.is_empty() { "M" } else { "L" }
            );
            let _ = write!(
                out,
                r#"<circle class="{class}" cx="{x:.1}" cy="{y:.1}" r="3"><title>{l}: {v:.0} ms</title></circle>"#,
                l = esc(&labels[i]),
            );
        }
        if !path.is_empty() {
            let _ = write!(
                out,
                r#"<path class="{class} line" d="{}"/>"#,
                path.trim_end()
            );
        }
    }
    time_labels(&mut out, labels, slot);
    legend(&mut out, [(names.0, "late-avg"), (names.1, "late-max")]);
    out.push_str("</svg>");
    out
}

/// One row of a heatmap grid: its label and one cell per column, each a count with its
/// tooltip.
pub(super) struct HeatRow {
    pub label: String,
    pub cells: Vec<(u64, String)>,
}

/// The grid's width: it spans the page, so it is drawn wider than the other charts (whose
/// text would be twice as large there).
const HEAT_W: f64 = 1000.0;
/// Left margin of the grid, for its row labels.
const HEAT_LEFT: f64 = 96.0;
const HEAT_TOP: f64 = 30.0;

/// A heatmap: a row per label, a cell per count shaded by its share of the busiest (classes
/// `hm1` to `hm9`, from `tickwork_core::heatmap::intensity`; empty cells show the row's
/// background), column labels above, and a legend from `fewer` to `more` below.
pub(super) fn heat_grid(
    title: &str,
    columns: &[(usize, String)],
    rows: &[HeatRow],
    legend: (&str, &str),
) -> String {
    let max = rows
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| c.0))
        .max()
        .unwrap_or(0);
    let ncols = rows.iter().map(|r| r.cells.len()).max().unwrap_or(1).max(1);
    // A day of hours reads row by row; a week of hours is drawn thinner, with fewer labels.
    let row_h = if rows.len() <= 48 { 14.0 } else { 6.0 };
    let label_every = if rows.len() <= 48 { 1 } else { 6 };
    let cell_w = (HEAT_W - HEAT_LEFT - 8.0) / ncols as f64;
    let grid_h = row_h * rows.len() as f64;
    let height = HEAT_TOP + grid_h + 34.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart heat" viewBox="0 0 {HEAT_W} {height:.0}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = esc(title)
    );
    for (col, label) in columns {
        let _ = write!(
            out,
            r#"<text class="axis" x="{x:.1}" y="{y}" text-anchor="middle">{l}</text>"#,
            x = HEAT_LEFT + cell_w * (*col as f64 + 0.5),
            y = HEAT_TOP - 8.0,
            l = esc(label),
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let y = HEAT_TOP + row_h * i as f64;
        if i % label_every == 0 {
            let _ = write!(
                out,
                r#"<text class="axis" x="{x}" y="{ty:.1}" text-anchor="end">{l}</text>"#,
                x = HEAT_LEFT - 6.0,
                ty = y + row_h.min(12.0) - 2.0,
                l = esc(&row.label),
            );
        }
        let _ = write!(
            out,
            r#"<rect class="hm0" x="{HEAT_LEFT}" y="{y:.1}" width="{w:.1}" height="{h:.1}"/>"#,
            w = cell_w * row.cells.len() as f64,
            h = row_h - 1.0,
        );
        for (col, (count, tip)) in row.cells.iter().enumerate() {
            let level = tickwork_core::heatmap::intensity(*count, max);
            if level == 0 {
                continue;
            }
            let _ = write!(
                out,
                r#"<rect class="hm{level}" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}"><title>{t}</title></rect>"#,
                x = HEAT_LEFT + cell_w * col as f64,
                w = (cell_w - 0.5).max(0.5),
                h = row_h - 1.0,
                t = esc(tip),
            );
        }
    }
    let ly = HEAT_TOP + grid_h + 14.0;
    let _ = write!(
        out,
        r#"<text class="legend" x="{x}" y="{ty:.1}" text-anchor="end">{l}</text>"#,
        x = HEAT_LEFT - 6.0,
        ty = ly + 9.0,
        l = esc(legend.0),
    );
    for level in 1..=9u8 {
        let _ = write!(
            out,
            r#"<rect class="hm{level}" x="{x:.1}" y="{ly:.1}" width="12" height="12"/>"#,
            x = HEAT_LEFT + 14.0 * f64::from(level - 1),
        );
    }
    let _ = write!(
        out,
        r#"<text class="legend" x="{x:.1}" y="{ty:.1}">{l} ({max})</text>"#,
        x = HEAT_LEFT + 14.0 * 9.0 + 4.0,
        ty = ly + 9.0,
        l = esc(legend.1),
    );
    out.push_str("</svg>");
    out
}

fn legend<'a>(out: &mut String, items: impl IntoIterator<Item = (&'a str, &'static str)>) {
    let mut x = LEFT;
    for (label, class) in items {
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{x:.1}" y="6" width="10" height="10"/><text class="legend" x="{tx:.1}" y="15">{l}</text>"#,
            tx = x + 14.0,
            l = esc(label),
        );
        // Chinese characters are about twice as wide as Latin letters.
        let width: f64 = label
            .chars()
            .map(|c| if c.is_ascii() { 7.0 } else { 12.0 })
            .sum();
        x += 24.0 + width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.0), 5.0);
        assert_eq!(nice_max(10.0), 10.0);
        assert_eq!(nice_max(11.0), 20.0);
        assert_eq!(nice_max(4200.0), 5000.0);
    }

    #[test]
    fn bars_are_scaled_and_escaped() {
        let axes = Axes {
            y: "runs per day",
            x: "day (UTC)",
        };
        let svg = stacked_bars(
            "runs <a>",
            &axes,
            &["11-20".into(), "11-21".into()],
            &[
                Series {
                    label: "ok".into(),
                    class: "s-ok",
                    values: vec![5, 10],
                },
                Series {
                    label: "failed".into(),
                    class: "s-fail",
                    values: vec![0, 0],
                },
            ],
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.ends_with("</svg>"));
        assert!(svg.contains("runs &lt;a&gt;"));
        // The tallest bar fills the plot: 10 of a top of 10.
        assert!(svg.contains(r#"height="172.0""#), "{svg}");
        // Steps of whole runs, even for one run.
        let one = stacked_bars(
            "one",
            &axes,
            &["11-21".into()],
            &[Series {
                label: "ok".into(),
                class: "s-ok",
                values: vec![1],
            }],
        );
        assert!(
            one.contains(">5</text>") && !one.contains(">0.2</text>"),
            "{one}"
        );
        // Both axes are named.
        assert!(svg.contains(">runs per day</text>"), "{svg}");
        assert!(svg.contains(">day (UTC)</text>"), "{svg}");
        assert_eq!(svg.matches("<rect class=\"s-ok\" x").count(), 3); // 2 bars + legend
    }

    #[test]
    fn time_labels_are_thinned_so_that_they_do_not_overlap() {
        let axes = Axes { y: "runs", x: "t" };
        let many: Vec<String> = (0..30).map(|d| format!("11-{d:02}")).collect();
        let svg = stacked_bars("t", &axes, &many, &[]);
        let written = many
            .iter()
            .filter(|l| svg.contains(&format!(">{l}</text>")))
            .count();
        assert!((8..30).contains(&written), "{written} of 30");
        assert!(svg.contains(">11-29</text>"), "the last one is written");
        let few: Vec<String> = (0..7).map(|d| format!("11-{d:02}")).collect();
        let svg = stacked_bars("t", &axes, &few, &[]);
        assert!(few.iter().all(|l| svg.contains(&format!(">{l}</text>"))));
    }

    #[test]
    fn heat_cells_are_shaded_by_their_share_and_empty_ones_left_out() {
        let rows = vec![
            HeatRow {
                label: "00:00".into(),
                cells: vec![(0, "a".into()), (10, "b <10>".into()), (1, "c".into())],
            },
            HeatRow {
                label: "01:00".into(),
                cells: vec![(5, "d".into())],
            },
        ];
        let svg = heat_grid("fires", &[(0, ":00".into())], &rows, ("fewer", "more"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(
            svg.matches("<rect class=\"hm0\"").count(),
            2,
            "a background a row"
        );
        assert!(svg.contains(r#"<rect class="hm9" x="394.7""#), "{svg}");
        assert!(svg.contains("<title>b &lt;10&gt;</title>"));
        assert!(svg.contains("<title>c</title></rect>"));
        assert!(
            !svg.contains("<title>a</title>"),
            "empty cells are not drawn"
        );
        assert!(svg.contains(r#"class="hm5""#));
        assert!(svg.contains(">more (10)</text>"));
    }

    #[test]
    fn lateness_skips_days_without_data() {
        let axes = Axes { y: "ms", x: "day" };
        let svg = lateness_lines(
            "late",
            &axes,
            &["a".into(), "b".into(), "c".into()],
            &[Some(10.0), None, Some(30.0)],
            &[Some(20.0), None, Some(90.0)],
            ("avg", "max"),
        );
        assert_eq!(svg.matches("<circle").count(), 4);
    }
}
