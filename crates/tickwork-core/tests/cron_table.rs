//! Table tests of Quartz cron evaluation: every expected instant below was worked out by hand
//! from the calendar (weekdays, month lengths, leap years) and the zones' 2026 DST rules, never
//! produced by the code under test.
//!
//! DST facts used (2026): America/New_York springs forward on 8 March at 02:00 EST (to 03:00 EDT)
//! and falls back on 1 November at 02:00 EDT (to 01:00 EST); Europe/Berlin on 29 March at 02:00
//! CET (to 03:00 CEST) and on 25 October at 03:00 CEST (to 02:00 CET); Australia/Lord_Howe, whose
//! shift is 30 minutes, falls back on 5 April at 02:00 +11:00 (to 01:30 +10:30) and springs
//! forward on 4 October at 02:00 +10:30 (to 02:30 +11:00); America/Havana springs forward on
//! 8 March at 00:00 (to 01:00 -04:00); America/Santiago falls back at the end of 4 April
//! (24:00 -03:00 to 23:00 -04:00).

use jiff::Timestamp;
use jiff::tz::TimeZone;
use tickwork_core::ScheduleType;
use tickwork_core::cron::CronExpr;
use tickwork_core::schedule::Schedule;

/// One case: the expression, the zone, the instant to search after, the fires expected next,
/// and whether the schedule has no fire after the last one listed.
struct Case {
    expr: &'static str,
    tz: &'static str,
    after: &'static str,
    fires: &'static [&'static str],
    ends: bool,
}

const fn case(
    expr: &'static str,
    tz: &'static str,
    after: &'static str,
    fires: &'static [&'static str],
) -> Case {
    Case {
        expr,
        tz,
        after,
        fires,
        ends: false,
    }
}

const fn finite(
    expr: &'static str,
    tz: &'static str,
    after: &'static str,
    fires: &'static [&'static str],
) -> Case {
    Case {
        expr,
        tz,
        after,
        fires,
        ends: true,
    }
}

const UTC: &str = "UTC";
const NY: &str = "America/New_York";
const BERLIN: &str = "Europe/Berlin";
const LORD_HOWE: &str = "Australia/Lord_Howe";

#[rustfmt::skip]
const CASES: &[Case] = &[
    // `*` in every field.
    case("* * * * * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-01T00:00:01+00:00", "2026-01-01T00:00:02+00:00", "2026-01-01T00:00:03+00:00"]),
    // Plain daily time, `?` in day-of-week.
    case("0 0 12 * * ?", UTC, "2026-01-01T12:00:00Z",
        &["2026-01-02T12:00:00+00:00", "2026-01-03T12:00:00+00:00"]),
    // `*` in both day fields reads as every day; a search from just before the second.
    case("0 0 12 * * *", UTC, "2026-01-01T11:59:59.500Z",
        &["2026-01-01T12:00:00+00:00", "2026-01-02T12:00:00+00:00"]),
    // From the middle of a matching second: the next match, not that one.
    case("0 0 12 * * ?", UTC, "2026-01-01T12:00:00.500Z",
        &["2026-01-02T12:00:00+00:00"]),
    // A range of hours.
    case("0 0 9-11 * * ?", UTC, "2026-01-01T10:30:00Z",
        &["2026-01-01T11:00:00+00:00", "2026-01-02T09:00:00+00:00", "2026-01-02T10:00:00+00:00"]),
    // A list of minutes.
    case("0 10,20,45 * * * ?", UTC, "2026-01-01T00:15:00Z",
        &["2026-01-01T00:20:00+00:00", "2026-01-01T00:45:00+00:00", "2026-01-01T01:10:00+00:00"]),
    // `0/20` seconds.
    case("0/20 * * * * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-01T00:00:20+00:00", "2026-01-01T00:00:40+00:00", "2026-01-01T00:01:00+00:00"]),
    // `*/6` hours.
    case("0 0 */6 * * ?", UTC, "2026-01-01T07:00:00Z",
        &["2026-01-01T12:00:00+00:00", "2026-01-01T18:00:00+00:00", "2026-01-02T00:00:00+00:00"]),
    // A step from an offset start.
    case("0 5/15 * * * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-01T00:05:00+00:00", "2026-01-01T00:20:00+00:00", "2026-01-01T00:35:00+00:00",
          "2026-01-01T00:50:00+00:00", "2026-01-01T01:05:00+00:00"]),
    // A range with a step.
    case("10-40/10 0 0 * * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-01T00:00:10+00:00", "2026-01-01T00:00:20+00:00", "2026-01-01T00:00:30+00:00",
          "2026-01-01T00:00:40+00:00", "2026-01-02T00:00:10+00:00"]),
    // A range of hours that wraps past midnight.
    case("0 0 22-2 * * ?", UTC, "2026-01-01T12:00:00Z",
        &["2026-01-01T22:00:00+00:00", "2026-01-01T23:00:00+00:00", "2026-01-02T00:00:00+00:00",
          "2026-01-02T01:00:00+00:00", "2026-01-02T02:00:00+00:00", "2026-01-02T22:00:00+00:00"]),
    // Month names in mixed case.
    case("0 0 0 1 jan,Jul ?", UTC, "2026-03-01T00:00:00Z",
        &["2026-07-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"]),
    // A range of month names that wraps past December.
    case("0 0 0 1 NOV-FEB ?", UTC, "2026-03-01T00:00:00Z",
        &["2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00",
          "2027-02-01T00:00:00+00:00", "2027-11-01T00:00:00+00:00"]),
    // Weekdays by name; 2 January 2026 is a Friday.
    case("0 15 10 ? * MON-FRI", UTC, "2026-01-02T10:15:00Z",
        &["2026-01-05T10:15:00+00:00", "2026-01-06T10:15:00+00:00", "2026-01-07T10:15:00+00:00"]),
    // Lowercase day names; 1 January 2026 is a Thursday.
    case("0 0 8 ? * sat,sun", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-03T08:00:00+00:00", "2026-01-04T08:00:00+00:00", "2026-01-10T08:00:00+00:00"]),
    // Day-of-week 1 is Sunday.
    case("0 0 8 ? * 1", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-04T08:00:00+00:00", "2026-01-11T08:00:00+00:00"]),
    // Day-of-week 7 is Saturday.
    case("0 0 8 ? * 7", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-03T08:00:00+00:00", "2026-01-10T08:00:00+00:00"]),
    // A day range that wraps past Saturday.
    case("0 0 8 ? * FRI-MON", UTC, "2026-01-01T09:00:00Z",
        &["2026-01-02T08:00:00+00:00", "2026-01-03T08:00:00+00:00", "2026-01-04T08:00:00+00:00",
          "2026-01-05T08:00:00+00:00", "2026-01-09T08:00:00+00:00"]),
    // `*` in day-of-month reads as `?` when day-of-week names days.
    case("0 0 12 * * MON", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-05T12:00:00+00:00", "2026-01-12T12:00:00+00:00"]),
    // Explicit `?` with a numeric day list (Monday, Wednesday, Friday).
    case("0 30 9 ? * 2,4,6", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-02T09:30:00+00:00", "2026-01-05T09:30:00+00:00", "2026-01-07T09:30:00+00:00"]),
    // A day-of-month step: days 1, 11, 21, 31.
    case("0 0 0 */10 * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-11T00:00:00+00:00", "2026-01-21T00:00:00+00:00", "2026-01-31T00:00:00+00:00",
          "2026-02-01T00:00:00+00:00"]),
    // `L`: the last day of each month.
    case("0 0 0 L * ?", UTC, "2026-01-15T00:00:00Z",
        &["2026-01-31T00:00:00+00:00", "2026-02-28T00:00:00+00:00", "2026-03-31T00:00:00+00:00",
          "2026-04-30T00:00:00+00:00"]),
    // `L` in February of a leap year.
    case("0 0 0 L 2 ?", UTC, "2027-03-01T00:00:00Z",
        &["2028-02-29T00:00:00+00:00", "2029-02-28T00:00:00+00:00"]),
    // `L-3`: three days before the last day.
    case("0 0 0 L-3 * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-28T00:00:00+00:00", "2026-02-25T00:00:00+00:00", "2026-03-28T00:00:00+00:00",
          "2026-04-27T00:00:00+00:00"]),
    // `L-1` in February, leap and common.
    case("0 0 0 L-1 2 ?", UTC, "2027-03-01T00:00:00Z",
        &["2028-02-28T00:00:00+00:00", "2029-02-27T00:00:00+00:00"]),
    // `L-30` exists only in 31-day months: their first day.
    case("0 0 0 L-30 * ?", UTC, "2026-01-15T00:00:00Z",
        &["2026-03-01T00:00:00+00:00", "2026-05-01T00:00:00+00:00", "2026-07-01T00:00:00+00:00",
          "2026-08-01T00:00:00+00:00"]),
    // `L-2W`: the weekday nearest the day two before the last (29 March 2026 is a Sunday).
    case("0 0 0 L-2W * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-29T00:00:00+00:00", "2026-02-26T00:00:00+00:00", "2026-03-30T00:00:00+00:00",
          "2026-04-28T00:00:00+00:00", "2026-05-29T00:00:00+00:00"]),
    // `15W`: 15 February and 15 March 2026 are Sundays, so Monday the 16th.
    case("0 0 9 15W * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-15T09:00:00+00:00", "2026-02-16T09:00:00+00:00", "2026-03-16T09:00:00+00:00",
          "2026-04-15T09:00:00+00:00"]),
    // `1W` on a Saturday moves on to Monday the 3rd, not back into the previous month; on a
    // Sunday (1 November) to Monday the 2nd.
    case("0 0 9 1W * ?", UTC, "2026-07-02T00:00:00Z",
        &["2026-08-03T09:00:00+00:00", "2026-09-01T09:00:00+00:00", "2026-10-01T09:00:00+00:00",
          "2026-11-02T09:00:00+00:00"]),
    // `31W`: 31 May 2026 is a Sunday, so Friday the 29th; 31 October a Saturday, so the 30th;
    // months without a 31st are skipped.
    case("0 0 9 31W * ?", UTC, "2026-05-01T00:00:00Z",
        &["2026-05-29T09:00:00+00:00", "2026-07-31T09:00:00+00:00", "2026-08-31T09:00:00+00:00",
          "2026-10-30T09:00:00+00:00"]),
    // `LW`: the last weekday of the month.
    case("0 0 18 LW * ?", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-30T18:00:00+00:00", "2026-02-27T18:00:00+00:00", "2026-03-31T18:00:00+00:00",
          "2026-04-30T18:00:00+00:00", "2026-05-29T18:00:00+00:00"]),
    // `6L`: the last Friday of the month.
    case("0 0 10 ? * 6L", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-30T10:00:00+00:00", "2026-02-27T10:00:00+00:00", "2026-03-27T10:00:00+00:00",
          "2026-04-24T10:00:00+00:00"]),
    // `monL`: the last Monday, by a lowercase name.
    case("0 0 10 ? * monL", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-26T10:00:00+00:00", "2026-02-23T10:00:00+00:00", "2026-03-30T10:00:00+00:00"]),
    // `6#3`: the third Friday.
    case("0 0 10 ? * 6#3", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-16T10:00:00+00:00", "2026-02-20T10:00:00+00:00", "2026-03-20T10:00:00+00:00"]),
    // `1#5`: the fifth Sunday, only in months that have one.
    case("0 0 10 ? * 1#5", UTC, "2026-01-01T00:00:00Z",
        &["2026-03-29T10:00:00+00:00", "2026-05-31T10:00:00+00:00", "2026-08-30T10:00:00+00:00",
          "2026-11-29T10:00:00+00:00"]),
    // `mon#1`: the first Monday, by a lowercase name.
    case("0 0 9 ? * mon#1", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-05T09:00:00+00:00", "2026-02-02T09:00:00+00:00", "2026-03-02T09:00:00+00:00"]),
    // `L` alone in day-of-week: Saturday.
    case("0 0 9 ? * L", UTC, "2026-01-01T00:00:00Z",
        &["2026-01-03T09:00:00+00:00", "2026-01-10T09:00:00+00:00"]),
    // A year list: two fires, then none.
    finite("0 0 0 1 1 ? 2027,2029", UTC, "2026-01-01T00:00:00Z",
        &["2027-01-01T00:00:00+00:00", "2029-01-01T00:00:00+00:00"]),
    // A year range with a step.
    finite("0 0 0 1 1 ? 2030-2040/5", UTC, "2026-01-01T00:00:00Z",
        &["2030-01-01T00:00:00+00:00", "2035-01-01T00:00:00+00:00", "2040-01-01T00:00:00+00:00"]),
    // A year in the past: nothing.
    finite("0 0 0 1 1 ? 2020", UTC, "2026-01-01T00:00:00Z", &[]),
    // 29 February only in leap years.
    case("0 0 12 29 2 ?", UTC, "2026-01-01T00:00:00Z",
        &["2028-02-29T12:00:00+00:00", "2032-02-29T12:00:00+00:00"]),
    // The 31st skips the months without one.
    case("0 0 0 31 * ?", UTC, "2026-01-31T00:00:00Z",
        &["2026-03-31T00:00:00+00:00", "2026-05-31T00:00:00+00:00", "2026-07-31T00:00:00+00:00",
          "2026-08-31T00:00:00+00:00", "2026-10-31T00:00:00+00:00"]),
    // A zone without DST.
    case("0 0 9 * * ?", "Asia/Shanghai", "2026-01-01T00:00:00Z",
        &["2026-01-01T09:00:00+08:00", "2026-01-02T09:00:00+08:00"]),

    // New York, spring forward: 02:30 does not exist on 8 March; it fires at 03:00 EDT.
    case("0 30 2 * * ?", NY, "2026-03-07T12:00:00Z",
        &["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
    // Three times in the gap collapse into one fire.
    case("0 0/20 2 * * ?", NY, "2026-03-07T12:00:00Z",
        &["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:20:00-04:00"]),
    // A weekly job whose Sunday time falls in the gap.
    case("0 0 2 ? * SUN", NY, "2026-03-01T12:00:00Z",
        &["2026-03-08T03:00:00-04:00", "2026-03-15T02:00:00-04:00"]),
    // Every hour at :30: the missing 02:30 fires at 03:00.
    case("0 30 * * * ?", NY, "2026-03-08T00:45:00-05:00",
        &["2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"]),
    // Every 15 minutes: the gap's four times and the real 03:00 are one fire.
    case("0 */15 * * * ?", NY, "2026-03-08T01:40:00-05:00",
        &["2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"]),
    // New York, fall back: 01:30 occurs twice on 1 November and fires once, in EDT.
    case("0 30 1 * * ?", NY, "2026-10-31T12:00:00Z",
        &["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
    // From inside the second 01:00 hour, before its 01:30: that repeat does not fire.
    case("0 30 1 * * ?", NY, "2026-11-01T01:10:00-05:00",
        &["2026-11-02T01:30:00-05:00"]),
    // Every hour keeps its real interval through the repeated hour.
    case("0 30 * * * ?", NY, "2026-11-01T00:45:00-04:00",
        &["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:30:00-05:00"]),
    // Every 20 minutes of hour 1 only: the hour field does not cover every hour, so once.
    case("0 0/20 1 * * ?", NY, "2026-11-01T00:50:00-04:00",
        &["2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00",
          "2026-11-02T01:00:00-05:00"]),

    // Berlin, spring forward: 02:30 on 29 March fires at 03:00 CEST.
    case("0 30 2 * * ?", BERLIN, "2026-03-28T12:00:00Z",
        &["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
    // Berlin, fall back: 02:30 on 25 October fires once, in CEST.
    case("0 30 2 * * ?", BERLIN, "2026-10-24T12:00:00Z",
        &["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
    // `*/2` hours covers the day evenly: 02:00 fires in both occurrences.
    case("0 0 */2 * * ?", BERLIN, "2026-10-25T00:30:00+02:00",
        &["2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T04:00:00+01:00"]),
    // From late in the first 02:00 hour, every half hour goes on into the second one.
    case("0 0/30 * * * ?", BERLIN, "2026-10-25T02:45:00+02:00",
        &["2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:00:00+01:00"]),

    // Lord Howe, spring forward by 30 minutes: 02:15 on 4 October fires at 02:30 +11:00.
    case("0 15 2 * * ?", LORD_HOWE, "2026-10-03T12:00:00+10:30",
        &["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]),
    // 02:00, 02:10 and 02:20 are missing and 02:30 matches too: one fire at 02:30.
    case("0 0/10 2 * * ?", LORD_HOWE, "2026-10-04T01:55:00+10:30",
        &["2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00", "2026-10-04T02:50:00+11:00",
          "2026-10-05T02:00:00+11:00"]),
    // Lord Howe, fall back by 30 minutes: 01:45 on 5 April occurs twice and fires once.
    case("0 45 1 * * ?", LORD_HOWE, "2026-04-04T12:00:00+11:00",
        &["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"]),
    // Every hour at :45 fires in both occurrences of the repeated half hour.
    case("0 45 * * * ?", LORD_HOWE, "2026-04-05T01:00:00+11:00",
        &["2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-05T02:45:00+10:30"]),
    // Every ten minutes from 01:55 +11:00: the clock goes back to 01:30 at what would be 02:00.
    case("0 */10 * * * ?", LORD_HOWE, "2026-04-05T01:55:00+11:00",
        &["2026-04-05T01:30:00+10:30", "2026-04-05T01:40:00+10:30", "2026-04-05T01:50:00+10:30",
          "2026-04-05T02:00:00+10:30"]),
    // The same from inside the repeated half hour.
    case("0 */10 * * * ?", LORD_HOWE, "2026-04-05T01:35:00+10:30",
        &["2026-04-05T01:40:00+10:30", "2026-04-05T01:50:00+10:30", "2026-04-05T02:00:00+10:30"]),

    // Havana springs forward at midnight (00:00 to 01:00) on Sunday 8 March: a Sunday 00:30
    // fires at 01:00.
    case("0 30 0 ? * SUN", "America/Havana", "2026-03-01T12:00:00Z",
        &["2026-03-08T01:00:00-04:00", "2026-03-15T00:30:00-04:00"]),
    // Santiago falls back at midnight (24:00 to 23:00) on 4 April: 23:30 that Saturday occurs
    // twice and fires once.
    case("0 30 23 * * ?", "America/Santiago", "2026-04-04T12:00:00Z",
        &["2026-04-04T23:30:00-03:00", "2026-04-05T23:30:00-04:00"]),
];

fn ms(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<Timestamp>()
        .unwrap_or_else(|e| panic!("bad literal {rfc3339}: {e}"))
        .as_millisecond()
}

fn show(ms: i64, tz: &TimeZone) -> String {
    Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(tz.clone())
        .strftime("%Y-%m-%dT%H:%M:%S%:z")
        .to_string()
}

#[test]
fn cron_cases() {
    assert!(CASES.len() >= 40, "{} cases", CASES.len());
    let mut failures = Vec::new();
    for c in CASES {
        let schedule = Schedule::parse(ScheduleType::Cron, c.expr, c.tz)
            .unwrap_or_else(|e| panic!("{:?} does not parse: {e}", c.expr));
        let tz = schedule.time_zone().clone();
        let wanted = c.fires.len() + usize::from(c.ends);
        let got: Vec<String> = schedule
            .next_fires(ms(c.after), wanted)
            .into_iter()
            .map(|at| show(at, &tz))
            .collect();
        let expected: Vec<String> = c.fires.iter().map(|s| show(ms(s), &tz)).collect();
        if got != expected {
            failures.push(format!(
                "{:?} in {} after {}:\n  expected {expected:?}\n  got      {got:?}",
                c.expr, c.tz, c.after
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The expected literals are in the zone's own offset, so comparing formatted strings above
/// also checks the offset of each fire; this checks that the literals are real instants.
#[test]
fn literals_are_exact_instants() {
    for c in CASES {
        for fire in c.fires {
            assert_eq!(ms(fire) % 1000, 0, "{fire}");
        }
    }
}

#[test]
fn next_after_is_strict_and_accepts_timestamps() {
    let expr = CronExpr::parse("0 0 12 * * ?").unwrap();
    let tz = TimeZone::UTC;
    let noon = ms("2026-01-01T12:00:00Z");
    assert_eq!(expr.next_after(noon - 1, &tz), Some(noon));
    assert_eq!(expr.next_after(noon, &tz), Some(noon + 86_400_000));
    assert_eq!(expr.next_after(noon + 999, &tz), Some(noon + 86_400_000));
    let at = "2026-01-01T12:00:00Z".parse::<Timestamp>().unwrap();
    assert_eq!(
        expr.next_after_timestamp(at, &tz),
        Some("2026-01-02T12:00:00Z".parse().unwrap())
    );
    // Before 1970 works too: Euclidean division of negative milliseconds.
    assert_eq!(
        expr.next_after(ms("1969-12-31T11:59:59.999Z"), &tz),
        Some(ms("1969-12-31T12:00:00Z"))
    );
}

#[test]
fn as_str_and_display_keep_the_text() {
    let expr: CronExpr = "  0 15 10 ? * mon-fri ".parse().unwrap();
    assert_eq!(expr.as_str(), "0 15 10 ? * mon-fri");
    assert_eq!(expr.to_string(), "0 15 10 ? * mon-fri");
    assert!(!expr.repeats_in_overlap());
}
