//! `tickwork schedule heatmap`: the schedule ahead of every running job, from the admin's
//! `GET /schedule/heatmap`, as a compact table (an hour a row, a character a minute) with the
//! groups and the peaks, or as the API's JSON.

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use tickwork_core::schedule::{parse_instant_ms, parse_time_zone};
use tickwork_protocol::api::{HeatmapQuery, HeatmapView};

use crate::InputError;
use crate::remote::Remote;

#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleCommand {
    /// Fires per minute of every running job ahead (24 hours by default, at most 7 days), by
    /// executor group, with the peaks and the jobs colliding in them.
    Heatmap(HeatmapArgs),
}

#[derive(Debug, Args)]
pub(crate) struct HeatmapArgs {
    /// Start: RFC 3339, or a date-time read in --tz [default: this minute].
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// End, excluded: RFC 3339, or a date-time read in --tz [default: 24 hours after the
    /// start].
    #[arg(long, value_name = "TIME", conflicts_with = "hours")]
    to: Option<String>,
    /// How many hours from the start, instead of --to.
    #[arg(long, value_name = "N")]
    hours: Option<u32>,
    /// Bucket size in whole minutes with a unit: 1m, 5m, 15m, 1h, 1d [default: 1m].
    #[arg(long, value_name = "SIZE")]
    bucket: Option<String>,
    /// Only the jobs of this executor group (app name).
    #[arg(long, value_name = "APP")]
    group: Option<String>,
    /// The time zone times are read and shown in [default: the system's].
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Print the admin's JSON answer as it is.
    #[arg(long)]
    json: bool,
}

/// Runs one `tickwork schedule` command.
pub(crate) async fn run(remote: &Remote, command: ScheduleCommand) -> anyhow::Result<()> {
    let ScheduleCommand::Heatmap(args) = command;
    let tz = match &args.tz {
        Some(name) => parse_time_zone(name).map_err(|e| InputError(e.to_string()))?,
        None => TimeZone::system(),
    };
    let time = |flag: &str, text: &Option<String>| -> anyhow::Result<Option<i64>> {
        text.as_deref()
            .map(|t| {
                parse_instant_ms(t, &tz).map_err(|_| {
                    InputError(format!(
                        "--{flag}: \"{t}\" is not a time; write RFC 3339 \
                         (2027-03-28T00:00:00+01:00) or a date-time in the time zone \
                         (2027-03-28 00:00)"
                    ))
                    .into()
                })
            })
            .transpose()
    };
    let mut from = time("from", &args.from)?;
    let mut to = time("to", &args.to)?;
    if let Some(hours) = args.hours {
        let start = *from.get_or_insert_with(|| {
            let now = Timestamp::now().as_millisecond();
            now - now.rem_euclid(60_000)
        });
        to = Some(start.saturating_add(i64::from(hours) * 3_600_000));
    }
    let query = HeatmapQuery {
        from,
        to,
        bucket: args.bucket,
        group: args.group,
    };
    let view = remote
        .client()?
        .schedule_heatmap(&query)
        .await
        .map_err(|e| match e {
            tickwork_client::Error::Api { status: 400, .. } => InputError(e.to_string()).into(),
            e => anyhow::Error::new(e),
        })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        print!("{}", render(&view, &tz));
    }
    Ok(())
}

/// Intensity of a bucket against the busiest: none, then nine steps.
const LEVELS: [char; 10] = [' ', '.', ':', '-', '=', '+', '*', '#', '%', '@'];
const HOUR_MS: i64 = 3_600_000;

fn level(n: u64, max: u64) -> char {
    LEVELS[usize::from(tickwork_core::heatmap::intensity(n, max))]
}

fn at(ms: i64, tz: &TimeZone, format: &str) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(t) => t.to_zoned(tz.clone()).strftime(format).to_string(),
        Err(_) => ms.to_string(),
    }
}

/// `2h`, `15m`, `1d`: a bucket size as people write it.
fn size(ms: i64) -> String {
    match ms {
        _ if ms % 86_400_000 == 0 => format!("{}d", ms / 86_400_000),
        _ if ms % HOUR_MS == 0 => format!("{}h", ms / HOUR_MS),
        _ => format!("{}m", ms / 60_000),
    }
}

/// The heatmap as text: a header, the table (an hour a row and a character a bucket when
/// buckets divide an hour, else a bucket a row with a bar), the groups, the peaks, and the
/// jobs whose counts stop short.
pub(crate) fn render(v: &HeatmapView, tz: &TimeZone) -> String {
    let mut out = String::new();
    let zone = tz.iana_name().unwrap_or("local time");
    let _ = writeln!(
        out,
        "{} fires of {} running jobs from {} to {} ({zone}), buckets of {}",
        v.fires,
        v.jobs,
        at(v.from, tz, "%Y-%m-%d %H:%M"),
        at(v.to, tz, "%Y-%m-%d %H:%M"),
        size(v.bucket_ms),
    );
    let max = v.totals.iter().copied().max().unwrap_or(0);
    let per_row = if v.bucket_ms < HOUR_MS && HOUR_MS % v.bucket_ms == 0 {
        (HOUR_MS / v.bucket_ms) as usize
    } else {
        1
    };
    out.push('\n');
    if per_row > 1 {
        let _ = writeln!(
            out,
            "{:<16}  {:>8}  {:>7}  ONE CHARACTER PER {} (\" {}\" up to {max})",
            "FROM",
            "FIRES",
            "BUSIEST",
            size(v.bucket_ms),
            LEVELS[1..].iter().collect::<String>(),
        );
    } else {
        let _ = writeln!(out, "{:<16}  {:>8}  BAR (# up to {max})", "FROM", "FIRES");
    }
    for (row, counts) in v.totals.chunks(per_row).enumerate() {
        let start = v.from + (row * per_row) as i64 * v.bucket_ms;
        let fires: u64 = counts.iter().sum();
        let label = at(start, tz, "%Y-%m-%d %H:%M");
        if per_row > 1 {
            let busiest = counts.iter().copied().max().unwrap_or(0);
            let strip: String = counts.iter().map(|&n| level(n, max)).collect();
            let _ = writeln!(out, "{label:<16}  {fires:>8}  {busiest:>7}  {strip}");
        } else {
            let width = if max == 0 {
                0
            } else {
                (fires.saturating_mul(40)).div_ceil(max) as usize
            };
            let _ = writeln!(out, "{label:<16}  {fires:>8}  {}", "#".repeat(width));
        }
    }

    if !v.groups.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "{:<24}  {:>8}  BUSIEST BUCKET", "GROUP", "FIRES");
        for g in &v.groups {
            let busiest = v
                .busiest(g)
                .map(|(start, n)| format!("{} ({n})", at(start, tz, "%Y-%m-%d %H:%M")))
                .unwrap_or_else(|| "-".to_owned());
            let _ = writeln!(out, "{:<24}  {:>8}  {busiest}", g.app_name, g.fires);
        }
    }

    if !v.peaks.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "PEAKS");
        for p in &v.peaks {
            let _ = writeln!(
                out,
                "{}  {} fires",
                at(p.start, tz, "%Y-%m-%d %H:%M"),
                p.fires
            );
            for j in &p.jobs {
                let first = if j.first_fire.rem_euclid(1000) == 0 {
                    at(j.first_fire, tz, "%H:%M:%S")
                } else {
                    at(j.first_fire, tz, "%H:%M:%S%.3f")
                };
                let _ = writeln!(
                    out,
                    "    {:<32} {:>7}  first {first}  {}",
                    j.key,
                    j.fires,
                    crate::remote::cell(&j.description, 40)
                );
            }
            if p.more_jobs > 0 {
                let _ = writeln!(out, "    and {} more jobs", p.more_jobs);
            }
        }
    }

    if !v.capped.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "COUNTED IN PART (too many cron fires to count them all: the counts above are \
             lower bounds)"
        );
        for c in &v.capped {
            let _ = writeln!(
                out,
                "    {:<32} {} fires counted, none from {}",
                c.key,
                c.counted,
                at(c.until, tz, "%Y-%m-%d %H:%M:%S")
            );
        }
    }
    // Empty buckets at the end of a strip and empty descriptions leave trailing blanks.
    out.lines()
        .map(|l| l.trim_end().to_owned() + "\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use tickwork_protocol::api::{HeatmapCapped, HeatmapGroup, HeatmapPeak, HeatmapPeakJob};

    use super::*;

    fn view(bucket_ms: i64, totals: Vec<u64>) -> HeatmapView {
        let from = "2027-03-28T00:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .as_millisecond();
        HeatmapView {
            from,
            to: from + bucket_ms * totals.len() as i64,
            bucket_ms,
            buckets: totals.len() as u64,
            jobs: 2,
            fires: totals.iter().sum(),
            groups: vec![HeatmapGroup {
                group_id: 1,
                app_name: "demo".into(),
                title: "Demo".into(),
                fires: totals.iter().sum(),
                counts: totals.clone(),
            }],
            totals,
            peaks: Vec::new(),
            capped: Vec::new(),
        }
    }

    #[test]
    fn levels_scale_to_the_busiest() {
        for (n, max, c) in [
            (0, 10, ' '),
            (1, 10, '.'),
            (1, 1000, '.'),
            (5, 10, '+'),
            (8, 10, '%'),
            (9, 10, '@'),
            (10, 10, '@'),
            (3, 0, ' '),
        ] {
            assert_eq!(level(n, max), c, "{n} of {max}");
        }
        for (ms, text) in [
            (60_000, "1m"),
            (900_000, "15m"),
            (HOUR_MS, "1h"),
            (86_400_000, "1d"),
        ] {
            assert_eq!(size(ms), text);
        }
    }

    #[test]
    fn minutes_print_an_hour_a_row_with_the_groups_peaks_and_capped_jobs() {
        let mut totals = vec![0u64; 90];
        totals[0] = 10;
        totals[1] = 1;
        totals[61] = 5;
        let mut v = view(60_000, totals);
        v.peaks = vec![HeatmapPeak {
            start: v.from,
            end: v.from + 60_000,
            fires: 10,
            jobs: vec![
                HeatmapPeakJob {
                    job_id: 1,
                    key: "nightly-report".into(),
                    description: "the report".into(),
                    group_id: 1,
                    fires: 9,
                    first_fire: v.from,
                },
                HeatmapPeakJob {
                    job_id: 2,
                    key: "fast".into(),
                    description: String::new(),
                    group_id: 1,
                    fires: 1,
                    first_fire: v.from + 250,
                },
            ],
            more_jobs: 3,
        }];
        v.capped = vec![HeatmapCapped {
            job_id: 3,
            key: "every-second".into(),
            counted: 100,
            until: v.from + 100_000,
        }];
        let text = render(&v, &TimeZone::get("Europe/Berlin").unwrap());
        let expected = "16 fires of 2 running jobs from 2027-03-28 01:00 to 2027-03-28 03:30 \
             (Europe/Berlin), buckets of 1m

FROM                 FIRES  BUSIEST  ONE CHARACTER PER 1m (\" .:-=+*#%@\" up to 10)
2027-03-28 01:00        11       10  @.
2027-03-28 03:00         5        5   +

GROUP                        FIRES  BUSIEST BUCKET
demo                            16  2027-03-28 01:00 (10)

PEAKS
2027-03-28 01:00  10 fires
    nightly-report                         9  first 01:00:00  the report
    fast                                   1  first 01:00:00.250
    and 3 more jobs

COUNTED IN PART (too many cron fires to count them all: the counts above are lower bounds)
    every-second                     100 fires counted, none from 2027-03-28 01:01:40
";
        assert_eq!(text, expected);
    }

    #[test]
    fn hours_print_a_bucket_a_row_with_a_bar() {
        let text = render(&view(HOUR_MS, vec![4, 0, 2]), &TimeZone::UTC);
        let table: Vec<&str> = text.lines().skip(2).take(4).collect();
        assert_eq!(
            table,
            [
                "FROM                 FIRES  BAR (# up to 4)",
                &format!("2027-03-28 00:00         4  {}", "#".repeat(40)),
                "2027-03-28 01:00         0",
                &format!("2027-03-28 02:00         2  {}", "#".repeat(20)),
            ]
        );
    }
}
