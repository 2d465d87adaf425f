//! Table tests of the non-cron schedule types (`FIX_RATE`, `FIX_DELAY`, `ONCE`, `NONE`): parsing,
//! errors and evaluation, with expected values worked out by hand.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use tickwork_core::schedule::{
    MAX_INTERVAL_MS, MIN_INTERVAL_MS, Schedule, parse_instant_ms, parse_interval_ms,
    parse_time_zone,
};
use tickwork_core::{Error, ScheduleType};

fn ms(rfc3339: &str) -> i64 {
    rfc3339.parse::<Timestamp>().unwrap().as_millisecond()
}

#[test]
fn intervals() {
    #[rustfmt::skip]
    let ok: &[(&str, i64)] = &[
        ("30", 30_000),
        ("1", 1_000),
        (" 15 ", 15_000),
        ("500ms", 500),
        ("10ms", 10),
        ("100MS", 100),
        ("250 ms", 250),
        ("2s", 2_000),
        ("5m", 300_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("90m", 5_400_000),
        ("36500d", 3_153_600_000_000),
    ];
    for (text, expected) in ok {
        assert_eq!(parse_interval_ms(text), Ok(*expected), "{text:?}");
    }
    assert_eq!(MIN_INTERVAL_MS, 10);
    assert_eq!(MAX_INTERVAL_MS, 3_153_600_000_000);
}

#[test]
fn interval_errors() {
    const FORMAT: &str =
        "is not a whole number with an optional unit ms, s, m, h or d (e.g. 30, 500ms, 5m)";
    #[rustfmt::skip]
    let cases: &[(&str, String)] = &[
        ("", "schedule: interval is empty; write a number of seconds or a number with a unit ms, s, m, h or d (e.g. 30, 500ms, 5m)".to_owned()),
        ("   ", "schedule: interval is empty; write a number of seconds or a number with a unit ms, s, m, h or d (e.g. 30, 500ms, 5m)".to_owned()),
        ("0", "schedule: interval \"0\" is shorter than the minimum of 10ms".to_owned()),
        ("9ms", "schedule: interval \"9ms\" is shorter than the minimum of 10ms".to_owned()),
        ("0s", "schedule: interval \"0s\" is shorter than the minimum of 10ms".to_owned()),
        ("abc", format!("schedule: interval \"abc\" {FORMAT}")),
        ("-5", format!("schedule: interval \"-5\" {FORMAT}")),
        ("1.5s", format!("schedule: interval \"1.5s\" {FORMAT}")),
        ("ms", format!("schedule: interval \"ms\" {FORMAT}")),
        ("5w", "schedule: interval \"5w\" has an unknown unit \"w\"; use ms, s, m, h or d".to_owned()),
        ("5 minutes", "schedule: interval \"5 minutes\" has an unknown unit \"minutes\"; use ms, s, m, h or d".to_owned()),
        ("36501d", "schedule: interval \"36501d\" is longer than the maximum of 36500d".to_owned()),
        ("99999999999999999999", "schedule: interval \"99999999999999999999\" is longer than the maximum of 36500d".to_owned()),
    ];
    for (text, message) in cases {
        let err = parse_interval_ms(text).unwrap_err();
        assert!(matches!(err, Error::Schedule(_)), "{text:?}");
        assert_eq!(&err.to_string(), message, "{text:?}");
    }
}

#[test]
fn fix_rate() {
    let s = Schedule::parse(ScheduleType::FixRate, "500ms", "UTC").unwrap();
    assert_eq!(s.kind(), ScheduleType::FixRate);
    assert_eq!(s.interval_ms(), Some(500));
    assert_eq!(s.next_after(1_000), Some(1_500));
    assert_eq!(s.next_fires(1_000, 3), vec![1_500, 2_000, 2_500]);
    // The window is (after, until]: the end is included, the start is not.
    assert_eq!(
        s.fires_between(0, 2_000, 100),
        vec![500, 1_000, 1_500, 2_000]
    );
    assert_eq!(s.fires_between(0, 1_999, 100), vec![500, 1_000, 1_500]);
    assert_eq!(s.fires_between(0, 2_000, 2), vec![500, 1_000]);
    assert_eq!(
        s.fires_between(0, 2_000, usize::MAX),
        vec![500, 1_000, 1_500, 2_000]
    );
    assert_eq!(s.fires_between(0, 2_000, 0), Vec::<i64>::new());
    assert_eq!(s.fires_between(0, 499, 100), Vec::<i64>::new());
    // A 100 ms job in a 5 s look-ahead window: every fire.
    let fast = Schedule::parse(ScheduleType::FixRate, "100ms", "UTC").unwrap();
    assert_eq!(fast.fires_between(10_050, 15_050, 1_000).len(), 50);
    // XXL-JOB's plain seconds.
    let xxl = Schedule::parse(ScheduleType::FixRate, "30", "UTC").unwrap();
    assert_eq!(xxl.next_after(0), Some(30_000));
    // No overflow near the end of time.
    assert_eq!(s.next_after(i64::MAX - 100), None);
    assert_eq!(s.fires_between(i64::MAX - 1_000, i64::MAX, 10).len(), 2);
}

#[test]
fn fix_rate_counts_real_time_through_dst() {
    // New York springs forward at 07:00Z on 8 March 2026 (01:59:59 EST, then 03:00 EDT).
    let s = Schedule::parse(ScheduleType::FixRate, "1h", "America/New_York").unwrap();
    assert_eq!(
        s.next_fires(ms("2026-03-08T01:30:00-05:00"), 2),
        vec![
            ms("2026-03-08T03:30:00-04:00"),
            ms("2026-03-08T04:30:00-04:00")
        ]
    );
    // And falls back at 06:00Z on 1 November: 01:30 EDT, an hour later is 01:30 EST.
    assert_eq!(
        s.next_after(ms("2026-11-01T01:30:00-04:00")),
        Some(ms("2026-11-01T01:30:00-05:00"))
    );
}

#[test]
fn fix_delay() {
    let s = Schedule::parse(ScheduleType::FixDelay, "2s", "UTC").unwrap();
    assert_eq!(s.kind(), ScheduleType::FixDelay);
    assert_eq!(s.interval_ms(), Some(2_000));
    // From the completion time of the previous run.
    assert_eq!(s.next_after(10_123), Some(12_123));
    // The preview assumes runs that take no time.
    assert_eq!(s.next_fires(0, 3), vec![2_000, 4_000, 6_000]);
    // A window holds one fire at most: the next depends on when that run completes.
    assert_eq!(s.fires_between(0, 10_000, 100), vec![2_000]);
    assert_eq!(s.fires_between(0, 1_999, 100), Vec::<i64>::new());
    assert_eq!(s.fires_between(0, 10_000, 0), Vec::<i64>::new());
    let sub_second = Schedule::parse(ScheduleType::FixDelay, "250ms", "UTC").unwrap();
    assert_eq!(sub_second.next_after(1_000), Some(1_250));
    let err = Schedule::parse(ScheduleType::FixDelay, "5ms", "UTC").unwrap_err();
    assert_eq!(
        err.to_string(),
        "schedule: interval \"5ms\" is shorter than the minimum of 10ms"
    );
}

#[test]
fn cron_after_end() {
    let s = Schedule::parse(ScheduleType::CronAfterEnd, "*/5 * * * * ?", "UTC").unwrap();
    assert_eq!(s.kind(), ScheduleType::CronAfterEnd);
    assert!(ScheduleType::CronAfterEnd.waits_for_end());
    assert_eq!(s.cron().map(|c| c.as_str()), Some("*/5 * * * * ?"));
    let base = ms("2026-01-01T00:00:00Z");
    // From the completion time of the previous run: the matches it ran over are passed.
    assert_eq!(s.next_after(base + 12_345), Some(base + 15_000));
    // A window holds one fire at most, as for a fixed delay.
    assert_eq!(
        s.fires_between(base, base + 60_000, 100),
        vec![base + 5_000]
    );
    assert_eq!(s.fires_between(base, base + 4_999, 100), Vec::<i64>::new());
    assert_eq!(s.fires_between(base, base + 60_000, 0), Vec::<i64>::new());
    // The preview assumes runs that take no time.
    assert_eq!(s.next_fires(base, 2), vec![base + 5_000, base + 10_000]);
    let err = Schedule::parse(ScheduleType::CronAfterEnd, "0 0 25 * * ?", "UTC").unwrap_err();
    assert!(err.to_string().starts_with("hours"), "{err}");
    assert_eq!(
        ScheduleType::CronAfterEnd.trigger_type(),
        tickwork_core::TriggerType::Cron
    );
}

#[test]
fn once_instants() {
    let shanghai = TimeZone::get("Asia/Shanghai").unwrap();
    let ny = TimeZone::get("America/New_York").unwrap();
    #[rustfmt::skip]
    let cases: &[(&str, &TimeZone, &str)] = &[
        ("2026-12-01T09:00:00+08:00", &shanghai, "2026-12-01T01:00:00Z"),
        ("2026-12-01T01:00:00Z", &shanghai, "2026-12-01T01:00:00Z"),
        // An offset wins over the zone.
        ("2026-12-01T09:00:00+08:00", &ny, "2026-12-01T01:00:00Z"),
        // Civil date-times are read in the zone.
        ("2026-12-01 09:00:00", &shanghai, "2026-12-01T01:00:00Z"),
        ("2026-12-01T09:00:00", &shanghai, "2026-12-01T01:00:00Z"),
        ("2026-12-01 09:00:00", &ny, "2026-12-01T14:00:00Z"),
        // Milliseconds are kept.
        ("2026-12-01T09:00:00.250+08:00", &shanghai, "2026-12-01T01:00:00.250Z"),
        // 02:30 does not exist in New York on 8 March 2026: the first instant after the gap.
        ("2026-03-08 02:30:00", &ny, "2026-03-08T07:00:00Z"),
        // 01:30 occurs twice on 1 November 2026: the first occurrence (EDT).
        ("2026-11-01 01:30:00", &ny, "2026-11-01T05:30:00Z"),
    ];
    for (text, tz, expected) in cases {
        assert_eq!(parse_instant_ms(text, tz), Ok(ms(expected)), "{text:?}");
    }
}

#[test]
fn once_schedule() {
    let s = Schedule::parse(ScheduleType::Once, "2026-12-01 09:00:00", "Asia/Shanghai").unwrap();
    let at = ms("2026-12-01T01:00:00Z");
    assert_eq!(s.kind(), ScheduleType::Once);
    assert_eq!(s.once_at_ms(), Some(at));
    assert_eq!(s.next_after(at - 1), Some(at));
    assert_eq!(s.next_after(at), None);
    assert_eq!(s.next_fires(0, 5), vec![at]);
    assert_eq!(s.fires_between(at - 5_000, at, 10), vec![at]);
    assert_eq!(s.fires_between(at - 5_000, at - 1, 10), Vec::<i64>::new());
    assert_eq!(s.fires_between(at - 5_000, at, 0), Vec::<i64>::new());
}

#[test]
fn once_errors() {
    for text in [
        "",
        "tomorrow",
        "2026-13-01 09:00:00",
        "2026-02-30T09:00:00",
        "2026-12-01T25:00:00Z",
        "2026-12-01 09:00:00 +0800 CST",
        "1764550800000",
    ] {
        let err = Schedule::parse(ScheduleType::Once, text, "UTC").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "schedule: \"{text}\" is not a time; write RFC 3339 (2026-12-01T09:00:00+08:00) \
                 or a date-time in the job's time zone (2026-12-01 09:00:00)"
            )
        );
    }
}

#[test]
fn none_never_fires() {
    let s = Schedule::parse(ScheduleType::None, "", "UTC").unwrap();
    assert_eq!(s.kind(), ScheduleType::None);
    assert_eq!(s.next_after(0), None);
    assert_eq!(s.next_fires(0, 5), Vec::<i64>::new());
    assert_eq!(s.fires_between(0, i64::MAX, 100), Vec::<i64>::new());
    // Whatever the configuration says.
    assert!(Schedule::parse(ScheduleType::None, "0 0 12 * * ?", "UTC").is_ok());
    assert_eq!(s.cron(), None);
    assert_eq!(s.interval_ms(), None);
    assert_eq!(s.once_at_ms(), None);
}

#[test]
fn time_zones() {
    assert_eq!(parse_time_zone("UTC").unwrap(), TimeZone::UTC);
    assert_eq!(
        parse_time_zone(" Asia/Shanghai ").unwrap().iana_name(),
        Some("Asia/Shanghai")
    );
    for name in ["", "Mars/Olympus_Mons", "+08:00"] {
        let err = Schedule::parse(ScheduleType::Cron, "0 0 12 * * ?", name).unwrap_err();
        assert_eq!(err, Error::TimeZone(name.to_owned()));
        assert_eq!(
            err.to_string(),
            format!("time zone: {name:?} is not a known IANA time zone")
        );
    }
    let tz = TimeZone::get("Europe/Berlin").unwrap();
    let s = Schedule::parse_in(ScheduleType::Cron, "0 0 12 * * ?", tz.clone()).unwrap();
    assert_eq!(s.time_zone(), &tz);
    assert_eq!(s.cron().map(|c| c.as_str()), Some("0 0 12 * * ?"));
}

#[test]
fn cron_schedule_windows() {
    let s = Schedule::parse(ScheduleType::Cron, "*/2 * * * * ?", "UTC").unwrap();
    let base = ms("2026-01-01T00:00:00Z");
    // (after, until]: 00:00:02, :04, :06, :08, :10.
    assert_eq!(
        s.fires_between(base, base + 10_000, 100),
        vec![
            base + 2_000,
            base + 4_000,
            base + 6_000,
            base + 8_000,
            base + 10_000
        ]
    );
    assert_eq!(s.fires_between(base, base + 10_000, 3).len(), 3);
    assert_eq!(
        s.fires_between(base + 500, base + 1_999, 100),
        Vec::<i64>::new()
    );
    // No panic at the ends of time.
    assert_eq!(s.next_after(i64::MAX), None);
    assert_eq!(
        s.fires_between(i64::MAX - 10, i64::MAX, 10),
        Vec::<i64>::new()
    );
    let _ = s.next_after(i64::MIN);
}
