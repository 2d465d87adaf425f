//! Table tests of the schedule heatmap: known jobs give known counts per bucket and group,
//! across DST changes in the jobs' own zones; the peaks name the jobs that collide; bounded
//! work (fixed rates counted arithmetically, cron enumeration capped and said so); bad windows
//! and bucket sizes refused. Expected values are worked out by hand in the comments.

use jiff::Timestamp;
use tickwork_core::Error;
use tickwork_core::ScheduleType;
use tickwork_core::heatmap::{
    Capped, HeatJob, Limits, MAX_RANGE_MS, Window, heatmap, intensity, parse_bucket,
};
use tickwork_core::schedule::Schedule;

const MIN: i64 = 60_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 86_400_000;

fn ms(rfc3339: &str) -> i64 {
    rfc3339.parse::<Timestamp>().unwrap().as_millisecond()
}

fn job(id: i64, group_id: i64, kind: ScheduleType, conf: &str, tz: &str) -> HeatJob {
    HeatJob {
        id,
        key: format!("job-{id}"),
        name: format!("job number {id}"),
        group_id,
        schedule: Schedule::parse(kind, conf, tz).unwrap(),
        anchor_ms: None,
    }
}

fn cron(id: i64, group_id: i64, expr: &str, tz: &str) -> HeatJob {
    job(id, group_id, ScheduleType::Cron, expr, tz)
}

/// The buckets with fires, as (offset from `from` in minutes, count).
fn nonzero(counts: &[u64], bucket_ms: i64) -> Vec<(i64, u64)> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (i as i64 * bucket_ms / MIN, *n))
        .collect()
}

#[test]
fn a_known_day_of_jobs_gives_known_counts_by_group_and_names_the_midnight_peak() {
    let from = ms("2026-06-01T00:00:00Z");
    let mut rate = job(4, 2, ScheduleType::FixRate, "1s", "UTC");
    // Its next fire is a quarter second past a whole second: so are all its fires.
    rate.anchor_ms = Some(from + 3_250);
    let jobs = vec![
        // Midnight UTC: 00:00Z.
        cron(1, 1, "0 0 0 * * ?", "UTC"),
        // Midnight in Shanghai (UTC+8): 16:00Z.
        cron(2, 1, "0 0 0 * * ?", "Asia/Shanghai"),
        // Midnight in London, on summer time (UTC+1): 23:00Z.
        cron(3, 2, "0 0 0 * * ?", "Europe/London"),
        rate,
        // Every quarter hour: 96 a day.
        cron(5, 1, "0 */15 * * * ?", "UTC"),
        job(6, 2, ScheduleType::Once, "2026-06-01T00:00:00Z", "UTC"),
        // Stopped at the window: a once in the past, a NONE.
        job(7, 2, ScheduleType::Once, "2026-05-31T23:59:59Z", "UTC"),
        job(8, 1, ScheduleType::None, "", "UTC"),
    ];
    let window = Window::new(from, from + DAY, MIN).unwrap();
    assert_eq!(window.buckets(), 1440);
    let h = heatmap(&jobs, window, Limits::STANDARD);

    // 1 + 1 + 1 + 86,400 + 96 + 1.
    assert_eq!(h.fires, 86_500);
    assert!(h.capped.is_empty());
    let groups: Vec<(i64, u64)> = h.groups.iter().map(|g| (g.group_id, g.fires)).collect();
    assert_eq!(groups, vec![(1, 98), (2, 86_402)]);
    let g1 = &h.groups[0];
    let mut expected: Vec<(i64, u64)> = (0..96).map(|q| (q * 15, 1)).collect();
    expected[0].1 += 1; // job 1 at 00:00
    expected[64].1 += 1; // job 2 at 16:00 (minute 960 = quarter 64)
    assert_eq!(nonzero(&g1.counts, MIN), expected);
    // Group 2: sixty a minute, and two more in 00:00 (the once) and 23:00 (London).
    let g2 = &h.groups[1];
    assert!(g2.counts.iter().all(|&n| n >= 60));
    assert_eq!(g2.counts[0], 61);
    assert_eq!(g2.counts[23 * 60], 61);
    assert_eq!(g2.counts.iter().filter(|&&n| n == 61).count(), 2);
    assert_eq!(
        h.totals,
        (0..1440)
            .map(|i| g1.counts[i] + g2.counts[i])
            .collect::<Vec<_>>()
    );

    // The peak is midnight: 60 + 1 (job 1) + 1 (job 5) + 1 (the once) = 63; then 16:00 and
    // 23:00 with 62 each, the earlier first.
    let peaks: Vec<(i64, u64)> = h
        .peaks
        .iter()
        .map(|p| ((p.start_ms - from) / MIN, p.fires))
        .collect();
    assert_eq!(peaks[..3], [(0, 63), (960, 62), (1380, 62)]);
    assert_eq!(h.peaks.len(), Limits::STANDARD.peaks);
    let midnight = &h.peaks[0];
    assert_eq!(midnight.end_ms, from + MIN);
    let named: Vec<(&str, u64, i64)> = midnight
        .jobs
        .iter()
        .map(|j| (j.key.as_str(), j.fires, j.first_ms - from))
        .collect();
    // The busiest first, then by first fire: jobs 1, 5 and 6 collide at 00:00:00.
    assert_eq!(
        named,
        vec![
            ("job-4", 60, 250),
            ("job-1", 1, 0),
            ("job-5", 1, 0),
            ("job-6", 1, 0)
        ]
    );
    assert_eq!(midnight.jobs[1].name, "job number 1");
    assert_eq!(midnight.jobs[1].group_id, 1);
    assert_eq!(midnight.more_jobs, 0);
}

#[test]
fn hourly_buckets_sum_the_minutes() {
    let from = ms("2026-06-01T00:00:00Z");
    let jobs = vec![
        cron(1, 1, "0 */15 * * * ?", "UTC"),
        cron(2, 1, "0 0 0 * * ?", "Asia/Shanghai"),
    ];
    let h = heatmap(
        &jobs,
        Window::new(from, from + DAY, HOUR).unwrap(),
        Limits::STANDARD,
    );
    let mut expected = vec![4u64; 24];
    expected[16] += 1;
    assert_eq!(h.totals, expected);
    // Twenty-three hours of 4 and one of 5: the peak is 16:00, job 2 with job 1's first.
    assert_eq!(h.peaks[0].start_ms, from + 16 * HOUR);
    assert_eq!(h.peaks[0].fires, 5);
    assert_eq!(h.peaks[1].start_ms, from, "ties: the earlier first");
}

#[test]
fn dst_days_count_in_each_jobs_own_zone() {
    // Berlin springs forward on 29 March 2026 at 01:00Z (02:00 CET becomes 03:00 CEST): its
    // day runs from 28 March 23:00Z to 29 March 22:00Z, 23 hours.
    let from = ms("2026-03-29T00:00:00+01:00");
    let to = ms("2026-03-30T00:00:00+02:00");
    assert_eq!(to - from, 23 * HOUR);
    let berlin = "Europe/Berlin";
    let jobs = vec![
        // 02:30 does not exist that day: it fires at the end of the gap, 03:00 CEST = 01:00Z.
        cron(1, 1, "0 30 2 * * ?", berlin),
        // Every hour: the gap's 02:00 collapses into 03:00, so 23 fires, one per real hour.
        cron(2, 2, "0 0 * * * ?", berlin),
        // Every half hour: 02:00 and 02:30 collapse into 03:00, so 46.
        cron(3, 3, "0 */30 * * * ?", berlin),
    ];
    let h = heatmap(
        &jobs,
        Window::new(from, to, HOUR).unwrap(),
        Limits::STANDARD,
    );
    assert_eq!(h.totals.len(), 23);
    let by_group: Vec<(i64, u64)> = h.groups.iter().map(|g| (g.group_id, g.fires)).collect();
    assert_eq!(by_group, vec![(1, 1), (2, 23), (3, 46)]);
    // Buckets start at 23:00Z: the 02:30 job is in the third, 01:00Z.
    assert_eq!(nonzero(&h.groups[0].counts, HOUR), vec![(120, 1)]);
    assert_eq!(h.groups[1].counts, vec![1; 23]);
    assert_eq!(h.groups[2].counts, vec![2; 23]);
    assert_eq!(h.peaks[0].start_ms, ms("2026-03-29T01:00:00Z"));
    assert_eq!(h.peaks[0].fires, 4);
    let at_gap: Vec<(i64, i64)> = h.peaks[0].jobs.iter().map(|j| (j.id, j.first_ms)).collect();
    // Job 3 twice in that hour (03:00, 03:30 CEST), jobs 1 and 2 at 03:00 CEST with it.
    let three = ms("2026-03-29T03:00:00+02:00");
    assert_eq!(at_gap, vec![(3, three), (1, three), (2, three)]);

    // New York falls back on 1 November 2026 at 06:00Z (02:00 EDT becomes 01:00 EST): its day
    // runs from 04:00Z to 05:00Z the next day, 25 hours.
    let from = ms("2026-11-01T00:00:00-04:00");
    let to = ms("2026-11-02T00:00:00-05:00");
    assert_eq!(to - from, 25 * HOUR);
    let ny = "America/New_York";
    let jobs = vec![
        // Daily at 01:30: once, at its first occurrence (01:30 EDT = 05:30Z), not at 06:30Z.
        cron(1, 1, "0 30 1 * * ?", ny),
        // Every hour keeps its real interval: 25 fires.
        cron(2, 2, "0 0 * * * ?", ny),
        // Every 15 minutes within the 01 hour: four, in the first 01 hour only.
        cron(3, 3, "0 */15 1 * * ?", ny),
    ];
    let h = heatmap(&jobs, Window::new(from, to, MIN).unwrap(), Limits::STANDARD);
    let by_group: Vec<(i64, u64)> = h.groups.iter().map(|g| (g.group_id, g.fires)).collect();
    assert_eq!(by_group, vec![(1, 1), (2, 25), (3, 4)]);
    // Minutes from 04:00Z: 05:30Z is minute 90.
    assert_eq!(nonzero(&h.groups[0].counts, MIN), vec![(90, 1)]);
    assert_eq!(
        nonzero(&h.groups[2].counts, MIN),
        vec![(60, 1), (75, 1), (90, 1), (105, 1)]
    );
    assert_eq!(
        nonzero(&h.groups[1].counts, MIN),
        (0..25).map(|hour| (hour * 60, 1)).collect::<Vec<_>>()
    );
    // 05:00Z (01:00 EDT): the hourly job and the first quarter; 05:30Z: the daily job and a
    // quarter. Two each, the earlier first.
    let peaks: Vec<(i64, u64)> = h.peaks.iter().map(|p| (p.start_ms, p.fires)).collect();
    assert_eq!(
        peaks[..2],
        [
            (ms("2026-11-01T05:00:00Z"), 2),
            (ms("2026-11-01T05:30:00Z"), 2)
        ]
    );
    let keys: Vec<&str> = h.peaks[1].jobs.iter().map(|j| j.key.as_str()).collect();
    assert_eq!(keys, vec!["job-1", "job-3"]);
}

#[test]
fn fixed_rates_are_counted_arithmetically_and_delays_forward_from_their_next_fire() {
    let from = ms("2026-06-01T00:00:00Z");
    // Every 10 ms for 7 days: 60,480,000 fires, counted without enumerating them.
    let fast = job(1, 1, ScheduleType::FixRate, "10ms", "UTC");
    let window = Window::new(from, from + MAX_RANGE_MS, MIN).unwrap();
    let h = heatmap(&[fast], window, Limits::STANDARD);
    assert_eq!(h.fires, 60_480_000);
    assert!(h.totals.iter().all(|&n| n == 6_000));
    assert!(h.capped.is_empty());

    // A 25-minute rate anchored before the window keeps its phase: fires at 5, 30 and 55
    // minutes past `from`; a delay of the same length whose next fire is at 30 past counts
    // from there on only (30 and 55), not back to 5.
    let mut rate = job(2, 1, ScheduleType::FixRate, "25m", "UTC");
    rate.anchor_ms = Some(from - 20 * MIN);
    let mut delay = job(3, 2, ScheduleType::FixDelay, "25m", "UTC");
    delay.anchor_ms = Some(from + 30 * MIN);
    let h = heatmap(
        &[rate, delay],
        Window::new(from, from + HOUR, MIN).unwrap(),
        Limits::STANDARD,
    );
    assert_eq!(
        nonzero(&h.groups[0].counts, MIN),
        vec![(5, 1), (30, 1), (55, 1)]
    );
    assert_eq!(nonzero(&h.groups[1].counts, MIN), vec![(30, 1), (55, 1)]);
    assert_eq!(h.peaks[0].start_ms, from + 30 * MIN);
    assert_eq!(h.peaks[0].fires, 2);
}

#[test]
fn cron_enumeration_is_capped_per_job_and_in_total_and_says_where() {
    let from = ms("2026-06-01T00:00:00Z");
    let every_second = |id| cron(id, 1, "* * * * * ?", "UTC");
    let limits = Limits {
        fires_per_job: 1_000,
        fires_total: 1_500,
        ..Limits::STANDARD
    };
    let h = heatmap(
        &[every_second(1), every_second(2), every_second(3)],
        Window::new(from, from + HOUR, MIN).unwrap(),
        limits,
    );
    // Job 1: its first 1,000 seconds; job 2: the 500 left of the budget; job 3: none.
    assert_eq!(
        h.capped,
        vec![
            Capped {
                id: 1,
                key: "job-1".into(),
                counted: 1_000,
                until_ms: from + 1_000_000
            },
            Capped {
                id: 2,
                key: "job-2".into(),
                counted: 500,
                until_ms: from + 500_000
            },
            Capped {
                id: 3,
                key: "job-3".into(),
                counted: 0,
                until_ms: from
            },
        ]
    );
    assert_eq!(h.fires, 1_500);
    assert_eq!(h.totals[0], 120);
    assert_eq!(h.totals[7], 120);
    // Minute 8 holds seconds 480-539: job 2's last 20 and job 1's 60.
    assert_eq!(h.totals[8], 80);
    assert_eq!(h.totals[9], 60);
    assert_eq!(h.totals[16], 40);
    assert_eq!(h.totals[17], 0);
    // The peaks count only what was counted.
    let first = &h.peaks[0];
    assert_eq!(first.start_ms, from);
    let fires: Vec<(i64, u64)> = first.jobs.iter().map(|j| (j.id, j.fires)).collect();
    assert_eq!(fires, vec![(1, 60), (2, 60)]);

    // Under the standard limits a cron every second is counted over a whole day.
    let h = heatmap(
        &[every_second(1)],
        Window::new(from, from + DAY, HOUR).unwrap(),
        Limits::STANDARD,
    );
    assert_eq!(h.fires, 86_400);
    assert!(h.capped.is_empty());
}

#[test]
fn peaks_name_at_most_so_many_jobs_and_count_the_rest() {
    let from = ms("2026-06-01T00:00:00Z");
    let jobs: Vec<HeatJob> = (1..=25)
        .map(|id| cron(id, 1, "0 0 0 * * ?", "UTC"))
        .collect();
    let h = heatmap(
        &jobs,
        Window::new(from, from + HOUR, MIN).unwrap(),
        Limits::STANDARD,
    );
    assert_eq!(h.peaks.len(), 1, "empty buckets are no peaks");
    let p = &h.peaks[0];
    assert_eq!(p.fires, 25);
    assert_eq!(p.jobs.len(), 20);
    assert_eq!(p.more_jobs, 5);
    // Same count, same instant: by id.
    assert_eq!(p.jobs.first().map(|j| j.id), Some(1));
    assert_eq!(p.jobs.last().map(|j| j.id), Some(20));
}

#[test]
fn a_last_bucket_cut_short_by_the_range() {
    let from = ms("2026-06-01T00:00:00Z");
    let window = Window::new(from, from + 90 * MIN, HOUR).unwrap();
    assert_eq!(window.buckets(), 2);
    assert_eq!(window.bucket(1), (from + HOUR, from + 90 * MIN));
    let h = heatmap(
        &[cron(1, 1, "0 */10 * * * ?", "UTC")],
        window,
        Limits::STANDARD,
    );
    assert_eq!(h.totals, vec![6, 3]);
    // A range that is not whole minutes from a whole minute is fine too.
    let odd = Window::new(from + 500, from + MIN + 500, MIN).unwrap();
    let h = heatmap(&[cron(1, 1, "0 * * * * ?", "UTC")], odd, Limits::STANDARD);
    assert_eq!(
        h.totals,
        vec![1],
        "01:00:00 is inside, 00:00:00 before from"
    );
}

#[test]
fn windows_at_the_ends_of_time_count_without_overflow() {
    let jobs = |anchor| {
        let mut rate = job(1, 1, ScheduleType::FixRate, "1m", "UTC");
        rate.anchor_ms = anchor;
        vec![
            rate,
            job(2, 1, ScheduleType::FixDelay, "1d", "UTC"),
            cron(3, 1, "0 0 0 * * ?", "UTC"),
            job(4, 1, ScheduleType::Once, "2026-06-01T00:00:00Z", "UTC"),
        ]
    };
    for (from, to) in [
        (i64::MIN, i64::MIN + DAY),
        (i64::MAX - DAY, i64::MAX),
        (i64::MAX - 90_000, i64::MAX),
    ] {
        for anchor in [None, Some(i64::MIN), Some(i64::MAX)] {
            let h = heatmap(
                &jobs(anchor),
                Window::new(from, to, HOUR).unwrap(),
                Limits::STANDARD,
            );
            assert_eq!(
                h.totals.len(),
                Window::new(from, to, HOUR).unwrap().buckets()
            );
            assert!(h.fires <= 1_441, "{from} {to} {anchor:?}: {}", h.fires);
        }
    }
}

#[test]
fn bad_windows_are_refused_with_their_field() {
    let from = ms("2026-06-01T00:00:00Z");
    #[rustfmt::skip]
    let cases: &[(i64, i64, i64, &str)] = &[
        (from, from, MIN, "to: 1780272000000 is not after from (1780272000000); the range is [from, to)"),
        (from, from - 1, MIN, "to: 1780271999999 is not after from (1780272000000); the range is [from, to)"),
        (from, from + MAX_RANGE_MS + 1, MIN, "to: the range is longer than the maximum of 7 days"),
        (i64::MIN, i64::MAX, MIN, "to: the range is longer than the maximum of 7 days"),
        (from, from + DAY, 0, "bucket: 0 ms is not a positive whole number of minutes"),
        (from, from + DAY, -MIN, "bucket: -60000 ms is not a positive whole number of minutes"),
        (from, from + DAY, 90_000, "bucket: 90000 ms is not a positive whole number of minutes"),
        (from, from + DAY, MAX_RANGE_MS + MIN, "bucket: is longer than the maximum of 7 days"),
    ];
    for &(f, t, b, message) in cases {
        let err = Window::new(f, t, b).unwrap_err();
        assert!(matches!(err, Error::Invalid { .. }), "{f} {t} {b}");
        assert_eq!(err.to_string(), message, "{f} {t} {b}");
    }
    assert!(Window::new(from, from + MAX_RANGE_MS, MAX_RANGE_MS).is_ok());
}

#[test]
fn bucket_sizes() {
    #[rustfmt::skip]
    let ok: &[(&str, i64)] = &[
        ("1m", MIN), ("15m", 15 * MIN), (" 1h ", HOUR), ("1d", DAY), ("120s", 2 * MIN),
        ("60000ms", MIN),
    ];
    for (text, expected) in ok {
        assert_eq!(parse_bucket(text), Ok(*expected), "{text:?}");
    }
    const WHOLE: &str = "is not a whole number of minutes such as 1m, 15m, 1h or 1d";
    #[rustfmt::skip]
    let bad: &[(&str, String)] = &[
        ("", "bucket: \"\" needs a unit: a whole number of minutes such as 1m, 15m, 1h or 1d".into()),
        ("60", "bucket: \"60\" needs a unit: a whole number of minutes such as 1m, 15m, 1h or 1d".into()),
        ("90s", format!("bucket: \"90s\" {WHOLE}")),
        ("0m", format!("bucket: \"0m\" {WHOLE}")),
        ("-5m", format!("bucket: \"-5m\" {WHOLE}")),
        ("1w", format!("bucket: \"1w\" {WHOLE}")),
        ("1.5h", format!("bucket: \"1.5h\" {WHOLE}")),
    ];
    for (text, message) in bad {
        let err = parse_bucket(text).unwrap_err();
        assert_eq!(&err.to_string(), message, "{text:?}");
    }
}

#[test]
fn intensities_scale_to_the_busiest_bucket() {
    #[rustfmt::skip]
    let cases: &[(u64, u64, u8)] = &[
        (0, 10, 0), (3, 0, 0), (1, 10, 1), (1, 1_000_000, 1), (5, 10, 5), (8, 10, 8),
        (9, 10, 9), (10, 10, 9), (11, 10, 9), (u64::MAX, u64::MAX, 9), (1, u64::MAX, 1),
    ];
    for &(count, max, level) in cases {
        assert_eq!(intensity(count, max), level, "{count} of {max}");
    }
}
