//! Property tests of cron evaluation against an independent brute-force matcher.
//!
//! Expressions are generated from a subset of the dialect (numbers, ranges including wrapping
//! ones, lists, steps, `*`, `?`) as a structure that this file both renders to text and matches
//! itself. The matcher scans every second of a short window, in UTC and in DST zones, and
//! applies the DST policy from its definition: a matching wall time fires at its first
//! occurrence (or at every occurrence when the hours are 0, n, 2n, ...), and matching wall
//! times inside a gap fire once, at the first instant after it. The schedule must produce
//! exactly those fires: strictly increasing, each one a match, none skipped.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use proptest::prelude::*;
use tickwork_core::ScheduleType;
use tickwork_core::schedule::Schedule;

#[derive(Debug, Clone)]
enum Item {
    Num(u32),
    /// `a-b`; wraps past the end of the field when `a > b`.
    Range(u32, u32),
    /// `*/s` (no start), `a/s` (no end) or `a-b/s`.
    Step(Option<(u32, Option<u32>)>, u32),
}

#[derive(Debug, Clone)]
enum Field {
    Star,
    /// `?` in day-of-month or day-of-week.
    Any,
    List(Vec<Item>),
}

#[derive(Debug, Clone, Copy)]
struct Bounds {
    min: u32,
    max: u32,
}

const SECONDS: Bounds = Bounds { min: 0, max: 59 };
const MINUTES: Bounds = Bounds { min: 0, max: 59 };
const HOURS: Bounds = Bounds { min: 0, max: 23 };
const DAYS: Bounds = Bounds { min: 1, max: 31 };
const MONTHS: Bounds = Bounds { min: 1, max: 12 };
const WEEKDAYS: Bounds = Bounds { min: 1, max: 7 };

impl Field {
    fn render(&self) -> String {
        match self {
            Field::Star => "*".to_owned(),
            Field::Any => "?".to_owned(),
            Field::List(items) => items
                .iter()
                .map(|item| match item {
                    Item::Num(n) => n.to_string(),
                    Item::Range(a, b) => format!("{a}-{b}"),
                    Item::Step(None, s) => format!("*/{s}"),
                    Item::Step(Some((a, None)), s) => format!("{a}/{s}"),
                    Item::Step(Some((a, Some(b))), s) => format!("{a}-{b}/{s}"),
                })
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Whether `v` is one of the field's values, straight from the definitions.
    fn has(&self, v: u32, bounds: Bounds) -> bool {
        match self {
            Field::Star | Field::Any => true,
            Field::List(items) => items.iter().any(|item| match *item {
                Item::Num(n) => v == n,
                Item::Range(a, b) if a <= b => a <= v && v <= b,
                Item::Range(a, b) => v >= a || v <= b,
                Item::Step(start, s) => {
                    let (lo, hi) = match start {
                        None => (bounds.min, bounds.max),
                        Some((a, None)) => (a, bounds.max),
                        Some((a, Some(b))) => (a, b),
                    };
                    lo <= v && v <= hi && (v - lo).is_multiple_of(s)
                }
            }),
        }
    }
}

#[derive(Debug, Clone)]
struct Expr {
    fields: [Field; 6],
}

impl Expr {
    fn render(&self) -> String {
        self.fields
            .iter()
            .map(Field::render)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn matches(&self, dt: DateTime) -> bool {
        let [s, m, h, dom, mon, dow] = &self.fields;
        s.has(dt.second() as u32, SECONDS)
            && m.has(dt.minute() as u32, MINUTES)
            && h.has(dt.hour() as u32, HOURS)
            && dom.has(dt.day() as u32, DAYS)
            && mon.has(dt.month() as u32, MONTHS)
            && dow.has(dt.weekday().to_sunday_one_offset() as u32, WEEKDAYS)
    }

    /// Whether the hours are 0, n, 2n, ... through the day, at least two of them.
    fn every_n_hours(&self) -> bool {
        let hours: Vec<u32> = (0..24).filter(|h| self.fields[2].has(*h, HOURS)).collect();
        match hours[..] {
            [0, n, ..] => hours == (0..24).step_by(n as usize).collect::<Vec<_>>(),
            _ => false,
        }
    }
}

fn item(b: Bounds) -> impl Strategy<Value = Item> {
    let (min, max) = (b.min, b.max);
    prop_oneof![
        (min..=max).prop_map(Item::Num),
        (min..=max, min..=max).prop_map(|(a, b)| Item::Range(a, b)),
        (1..=max.min(30)).prop_map(|s| Item::Step(None, s)),
        (min..=max, 1..=max.min(30)).prop_map(|(a, s)| Item::Step(Some((a, None)), s)),
        (min..=max, min..=max, 1..=max.min(30))
            .prop_map(|(a, b, s)| { Item::Step(Some((a.min(b), Some(a.max(b)))), s) }),
    ]
}

fn field(b: Bounds) -> impl Strategy<Value = Field> {
    prop_oneof![
        2 => Just(Field::Star),
        3 => prop::collection::vec(item(b), 1..4).prop_map(Field::List),
    ]
}

/// Seconds: mostly few values, so that windows hold a readable number of fires.
fn seconds() -> impl Strategy<Value = Field> {
    prop_oneof![
        3 => Just(Field::List(vec![Item::Num(0)])),
        2 => prop::collection::vec(item(SECONDS), 1..3).prop_map(Field::List),
        1 => Just(Field::Star),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    (
        seconds(),
        field(MINUTES),
        field(HOURS),
        field(DAYS),
        field(MONTHS),
        field(WEEKDAYS),
        any::<bool>(),
    )
        .prop_map(|(s, m, h, dom, mon, dow, by_weekday)| {
            // Exactly one of the day fields is `?`.
            let (dom, dow) = if by_weekday {
                (Field::Any, dow)
            } else {
                (dom, Field::Any)
            };
            Expr {
                fields: [s, m, h, dom, mon, dow],
            }
        })
}

/// Zones and instants near which windows start: DST transitions of 2026, and the start of a
/// year to which a random offset is added.
const WINDOWS: &[(&str, &str)] = &[
    ("America/New_York", "2026-03-08T05:00:00Z"),
    ("America/New_York", "2026-11-01T04:00:00Z"),
    ("Australia/Lord_Howe", "2026-04-04T13:30:00Z"),
    ("Australia/Lord_Howe", "2026-10-03T14:00:00Z"),
    ("Europe/Berlin", "2026-03-29T00:00:00Z"),
    ("Europe/Berlin", "2026-10-25T00:00:00Z"),
    // Transitions at midnight, where the skipped or repeated wall times change the date.
    ("America/Havana", "2026-03-08T05:00:00Z"),
    ("America/Havana", "2026-11-01T05:00:00Z"),
    ("America/Santiago", "2026-04-05T03:00:00Z"),
    ("America/Santiago", "2026-09-06T04:00:00Z"),
];

/// Every fire in `(after_ms, until_ms]`, found second by second.
fn brute_force(expr: &Expr, tz: &TimeZone, after_ms: i64, until_ms: i64) -> Vec<i64> {
    let every_hour = expr.every_n_hours();
    let mut fires = Vec::new();
    let first = after_ms.div_euclid(1000) + 1;
    let last = until_ms.div_euclid(1000);
    let mut previous_wall = tz.to_datetime(Timestamp::from_second(first - 1).unwrap());
    for second in first..=last {
        let instant = Timestamp::from_second(second).unwrap();
        let wall = tz.to_datetime(instant);
        let expected_wall = previous_wall + 1.second();
        previous_wall = wall;
        if expr.matches(wall) {
            // The first occurrence of this wall time, or a later one for every-hour schedules.
            let first_occurrence = tz.to_ambiguous_timestamp(wall).earlier().unwrap() == instant;
            if first_occurrence || every_hour {
                fires.push(second * 1000);
                continue;
            }
        }
        // The wall clock jumped forward: the skipped wall times fire now, together.
        if wall > expected_wall {
            let mut skipped = expected_wall;
            while skipped < wall {
                if expr.matches(skipped) {
                    fires.push(second * 1000);
                    break;
                }
                skipped += 1.second();
            }
        }
    }
    fires
}

fn check(expr: &Expr, tz_name: &str, after_ms: i64, window_s: i64) -> Result<(), TestCaseError> {
    let text = expr.render();
    let schedule = match Schedule::parse(ScheduleType::Cron, &text, tz_name) {
        Ok(schedule) => schedule,
        // A generated expression that no date matches (`0 0 0 31 2 ?`) is refused; the
        // matcher must agree that it matches no date of a leap year.
        Err(e) => {
            let never = (0..366).all(|d| {
                let day = DateTime::constant(2028, 1, 1, 0, 0, 0, 0) + d.days();
                !(0..24 * 3600)
                    .step_by(1)
                    .any(|s| expr.matches(day + s.seconds()))
            });
            prop_assert!(never, "{text:?} refused ({e}) but it matches some date");
            return Ok(());
        }
    };
    let tz = schedule.time_zone().clone();
    let until_ms = after_ms + window_s * 1000;
    let got = schedule.fires_between(after_ms, until_ms, usize::MAX);
    prop_assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "{text:?}: not strictly increasing"
    );
    let expected = brute_force(expr, &tz, after_ms, until_ms);
    prop_assert_eq!(
        &got,
        &expected,
        "{:?} in {} after {}",
        text,
        tz_name,
        after_ms
    );
    // The first fire alone agrees too.
    prop_assert_eq!(
        schedule.next_after(after_ms).filter(|at| *at <= until_ms),
        expected.first().copied()
    );
    Ok(())
}

/// The number of cases: `PROPTEST_CASES` when set (for long runs), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(192), ..ProptestConfig::default() })]

    /// Windows around DST transitions of five zones (one with a 30-minute shift, two that
    /// change at midnight).
    #[test]
    fn matches_brute_force_across_dst(
        expr in expr(),
        window in 0..WINDOWS.len(),
        // From several hours before the transition, at any millisecond.
        offset_ms in 0i64..4 * 3_600_000,
        window_s in 3_600i64..6 * 3_600,
    ) {
        let (tz, around) = WINDOWS[window];
        let after = around.parse::<Timestamp>().unwrap().as_millisecond() - offset_ms;
        check(&expr, tz, after, window_s)?;
    }

    /// Windows anywhere in 2026 and 2027, in UTC and in a DST zone.
    #[test]
    fn matches_brute_force_anywhere(
        expr in expr(),
        dst in any::<bool>(),
        offset_ms in 0i64..2 * 365 * 86_400_000,
        window_s in 3_600i64..8 * 3_600,
    ) {
        let tz = if dst { "America/New_York" } else { "UTC" };
        let after = "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap().as_millisecond() + offset_ms;
        check(&expr, tz, after, window_s)?;
    }
}

/// The matcher itself must be able to see a difference: a schedule checked against the wrong
/// expression disagrees.
#[test]
fn brute_force_detects_a_wrong_schedule() {
    let expr = Expr {
        fields: [
            Field::List(vec![Item::Num(0)]),
            Field::List(vec![Item::Num(30)]),
            Field::Star,
            Field::Star,
            Field::Star,
            Field::Any,
        ],
    };
    let tz = TimeZone::get("America/New_York").unwrap();
    let after = "2026-03-08T05:00:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .as_millisecond();
    let fires = brute_force(&expr, &tz, after, after + 4 * 3_600_000);
    // 00:30 and 01:30 EST, 03:00 EDT for the missing 02:30, 03:30 and 04:30 EDT.
    let expected: Vec<i64> = [
        "2026-03-08T05:30:00Z",
        "2026-03-08T06:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-08T07:30:00Z",
        "2026-03-08T08:30:00Z",
    ]
    .iter()
    .map(|s| s.parse::<Timestamp>().unwrap().as_millisecond())
    .collect();
    assert_eq!(fires, expected);
    let other = Schedule::parse(ScheduleType::Cron, "0 31 * * * ?", "America/New_York").unwrap();
    assert_ne!(
        other.fires_between(after, after + 4 * 3_600_000, 100),
        fires
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2_000), ..ProptestConfig::default() })]

    /// Any text made of cron characters either parses or is refused with a cron error; it never
    /// panics, and neither does evaluating what parses.
    #[test]
    fn arbitrary_text_never_panics(
        fields in prop::collection::vec("[0-9*/,?LlWw#-]{1,6}|[A-Za-z]{3}|[0-9]{1,3}", 5..9),
        after in any::<i64>(),
    ) {
        let text = fields.join(" ");
        match Schedule::parse(ScheduleType::Cron, &text, "America/New_York") {
            Ok(schedule) => {
                let _ = schedule.next_after(after);
                let _ = schedule.fires_between(after, after.saturating_add(3_600_000), 100);
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(!message.is_empty() && !message.ends_with('.'), "{message}");
            }
        }
    }
}
