//! Quartz cron expressions (the XXL-JOB dialect) over `croner`, evaluated in an IANA time zone.
//!
//! The work is split three ways:
//! - `parse` checks the Quartz syntax and rewrites it for croner;
//! - croner finds the next matching wall-clock time on the civil calendar, where it gets `L`,
//!   `W`, `LW`, `nL`, `n#k`, leap years and month lengths right;
//! - `zone` turns wall-clock times into instants in the job's time zone under Tickwork's DST
//!   policy, which differs from croner's own (see below).
//!
//! # DST policy
//!
//! - A wall time that does not exist (in a spring-forward gap) fires at the first instant after
//!   the gap. Several such times collapse into that one fire.
//! - A wall time that occurs twice (in a fall-back overlap) fires once, at its first occurrence,
//!   unless the hour field covers every hour (`*`, `*/n`, `0/n`: the hours are 0, n, 2n, ...);
//!   then the schedule keeps its real interval and fires in both occurrences, as cron does.
//!
//! croner decides between those two behaviours by whether seconds, minutes and hours are each
//! one fixed value, so `0 */5 1 * * ?` would fire twice through a repeated 01:00 hour and skip
//! the wall times of a gap; hence the mapping here rather than croner's zoned search.

mod parse;
pub(crate) mod zone;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::civil::{DateTime, Time};
use jiff::tz::TimeZone;

use crate::Error;
use parse::DayRule;

pub use parse::{MAX_YEAR as YEAR_MAX, MIN_YEAR as YEAR_MIN};

/// A parsed Quartz cron expression. Parse once per job change, evaluate many times.
///
/// Fires are whole seconds. [`CronExpr::next_after`] is strictly after its argument, and an
/// argument in the middle of a matching second returns the next match, as Quartz does.
///
/// Cloning is cheap (the parsed form is shared). A parsed expression holds about 5 KB, most of
/// it croner's bitmap of years, so a holder of many jobs should share one per distinct text.
#[derive(Clone, PartialEq, Eq)]
pub struct CronExpr(Arc<Parsed>);

#[derive(PartialEq, Eq)]
struct Parsed {
    text: String,
    cron: Cron,
    day_rule: Option<DayRule>,
    max_year: Option<i16>,
    every_hour: bool,
}

impl CronExpr {
    /// Parses a Quartz expression: 6 or 7 fields (seconds required, optional year 1970-2099),
    /// day-of-week 1 = Sunday, exactly one of day-of-month and day-of-week `?` (a `*` in one of
    /// them counts as `?`). An expression that no date can match (`0 0 0 30 2 ?`) is an error.
    pub fn parse(expr: &str) -> Result<CronExpr, Error> {
        let rewritten = parse::rewrite(expr)?;
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Optional)
            // Day-of-week 1 = Sunday, as Quartz.
            .alternative_weekdays(true)
            // Quartz's `a/n`. The rewrite writes `a-b/n` with both ends anyway: croner's own
            // `a/n` would run a year field up to 5000.
            .sloppy_ranges(true)
            .build()
            .parse(&rewritten.pattern)
            // The rewrite has checked every field; a refusal here is a bug, not bad input, but
            // it still must not panic.
            .map_err(|e| Error::Cron {
                field: "expression",
                message: format!("\"{}\" is not supported: {e}", expr.trim()),
            })?;
        let hours = cron.pattern.hours.values();
        // With a year field, the search ends after its last year instead of running on.
        let max_year = match rewritten.pattern.rsplit(' ').next() {
            Some("*") | None => None,
            Some(_) => cron.pattern.years.values().last().map(|y| *y as i16),
        };
        let parsed = CronExpr(Arc::new(Parsed {
            text: expr.trim().to_owned(),
            cron,
            day_rule: rewritten.day_rule,
            max_year,
            every_hour: is_every_n_hours(&hours),
        }));
        let epoch = DateTime::constant(1970, 1, 1, 0, 0, 0, 0);
        if parsed.next_civil(epoch).is_none() {
            return Err(Error::Cron {
                field: "expression",
                message: format!("\"{}\" never fires: no date matches it", parsed.0.text),
            });
        }
        Ok(parsed)
    }

    /// The expression as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// Whether the hour field covers every hour (`*`, `*/n`, `0/n`), so that the schedule fires
    /// in both occurrences of a repeated wall time.
    pub fn repeats_in_overlap(&self) -> bool {
        self.0.every_hour
    }

    /// The first fire strictly after `after_ms` (epoch milliseconds) in `tz`, or `None` when
    /// there is none (a year field in the past, or beyond the supported time range).
    pub fn next_after(&self, after_ms: i64, tz: &TimeZone) -> Option<i64> {
        // Whole seconds: the search starts at the second after the one `after_ms` lies in.
        let from = after_ms.div_euclid(1000).checked_add(1)?;
        zone::first_fire_from(self, from, tz).map(|second| second * 1000)
    }

    /// [`CronExpr::next_after`] over `jiff` timestamps.
    pub fn next_after_timestamp(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let ms = self.next_after(after.as_millisecond(), tz)?;
        Timestamp::from_millisecond(ms).ok()
    }

    /// The first wall-clock time at or after `from` that the expression matches.
    pub(crate) fn next_civil(&self, from: DateTime) -> Option<DateTime> {
        let mut from = from;
        // The Gregorian calendar repeats every 400 years, so a search that has gone further
        // than that without a match will never find one.
        let give_up = from.year().saturating_add(401);
        loop {
            if from.year() > give_up || self.0.max_year.is_some_and(|max| from.year() > max) {
                return None;
            }
            let found = self.0.cron.find_next_occurrence(&from, true).ok()?;
            let Some(rule) = self.0.day_rule else {
                return Some(found);
            };
            // `L-n`: croner matched every day; keep the one day of the month the rule names.
            let date = found.date();
            let next_date = match rule.day_in(date.year(), date.month()) {
                Some(day) if day == date.day() => return Some(found),
                Some(day) if day > date.day() => date.with().day(day).build().ok()?,
                // Past the day, or the month has none: on to the next month.
                _ => date.last_of_month().tomorrow().ok()?,
            };
            from = next_date.to_datetime(Time::midnight());
        }
    }
}

/// Whether a set of hours is 0, n, 2n, ... through the day (at least two of them), which is
/// what `*`, `*/n` and `0/n` denote.
fn is_every_n_hours(hours: &[u16]) -> bool {
    let [0, step, ..] = *hours else {
        return false;
    };
    hours.iter().copied().eq((0..24).step_by(usize::from(step)))
}

impl FromStr for CronExpr {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        CronExpr::parse(s)
    }
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronExpr").field(&self.0.text).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hour_detection() {
        let every = |e: &str| CronExpr::parse(e).unwrap().repeats_in_overlap();
        assert!(every("0 0 * * * ?"));
        assert!(every("0 0 */2 * * ?"));
        assert!(every("0 0 0/3 * * ?"));
        assert!(every("0 0 0-23 * * ?"));
        assert!(!every("0 0 1/2 * * ?"));
        assert!(!every("0 0 0 * * ?"));
        assert!(!every("0 */5 1 * * ?"));
        assert!(!every("0 0 0,1,3 * * ?"));
    }
}
