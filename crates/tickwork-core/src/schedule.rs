//! Schedules: when a job fires next, in its time zone.
//!
//! A [`Schedule`] is parsed once per job change from the job's schedule type, configuration
//! text and IANA time zone, then evaluated many times. Times are epoch milliseconds.
//!
//! | type | configuration | next fire after `t` |
//! |---|---|---|
//! | `CRON` | a Quartz expression ([`CronExpr`]) | the first match after `t`, in the job's zone |
//! | `FIX_RATE` | an interval ([`parse_interval_ms`]) | `t + interval` (`t` = the previous scheduled fire) |
//! | `FIX_DELAY` | an interval | `t + delay` (`t` = the completion of the previous run) |
//! | `CRON_AFTER_END` | a Quartz expression | the first match after `t` (`t` = the completion of the previous run) |
//! | `ONCE` | RFC 3339, or a civil date-time in the job's zone | the instant, if after `t` |
//! | `NONE` | ignored | never: fires only by hand or by API |
//!
//! Fixed rates and delays count real time: a DST change does not stretch or shrink them.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

use crate::cron::{CronExpr, zone};
use crate::{Error, ScheduleType};

/// The shortest interval of a `FIX_RATE` or `FIX_DELAY` schedule.
pub const MIN_INTERVAL_MS: i64 = 10;
/// The longest interval: 36,500 days (about a century), far enough that sums never overflow.
pub const MAX_INTERVAL_MS: i64 = 36_500 * 86_400_000;

/// When a job fires. Clone it freely; evaluation takes `&self`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    kind: ScheduleType,
    time_zone: TimeZone,
    rule: Rule,
}

#[derive(Debug, Clone, PartialEq)]
enum Rule {
    None,
    Cron(CronExpr),
    FixRate(i64),
    FixDelay(i64),
    Once(i64),
}

impl Schedule {
    /// Parses a schedule whose time zone is an IANA name (`Asia/Shanghai`, `UTC`).
    pub fn parse(kind: ScheduleType, conf: &str, time_zone: &str) -> Result<Schedule, Error> {
        Schedule::parse_in(kind, conf, parse_time_zone(time_zone)?)
    }

    /// Parses a schedule in a time zone the caller already has.
    pub fn parse_in(
        kind: ScheduleType,
        conf: &str,
        time_zone: TimeZone,
    ) -> Result<Schedule, Error> {
        let rule = match kind {
            ScheduleType::None => Rule::None,
            ScheduleType::Cron | ScheduleType::CronAfterEnd => Rule::Cron(CronExpr::parse(conf)?),
            ScheduleType::FixRate => Rule::FixRate(parse_interval_ms(conf)?),
            ScheduleType::FixDelay => Rule::FixDelay(parse_interval_ms(conf)?),
            ScheduleType::Once => Rule::Once(parse_instant_ms(conf, &time_zone)?),
        };
        Ok(Schedule {
            kind,
            time_zone,
            rule,
        })
    }

    /// The schedule type.
    pub fn kind(&self) -> ScheduleType {
        self.kind
    }

    /// The time zone the schedule is evaluated in.
    pub fn time_zone(&self) -> &TimeZone {
        &self.time_zone
    }

    /// The cron expression of a `CRON` or `CRON_AFTER_END` schedule.
    pub fn cron(&self) -> Option<&CronExpr> {
        match &self.rule {
            Rule::Cron(expr) => Some(expr),
            _ => None,
        }
    }

    /// The interval of a `FIX_RATE` or `FIX_DELAY` schedule, in milliseconds.
    pub fn interval_ms(&self) -> Option<i64> {
        match self.rule {
            Rule::FixRate(ms) | Rule::FixDelay(ms) => Some(ms),
            _ => None,
        }
    }

    /// The instant of a `ONCE` schedule.
    pub fn once_at_ms(&self) -> Option<i64> {
        match self.rule {
            Rule::Once(ms) => Some(ms),
            _ => None,
        }
    }

    /// The first fire strictly after `after_ms`.
    ///
    /// - `CRON`: the first match after `after_ms` (whole seconds, in the schedule's zone);
    /// - `CRON_AFTER_END`: the same; pass the completion time of the previous run;
    /// - `FIX_RATE`: `after_ms + interval`; pass the previous scheduled fire;
    /// - `FIX_DELAY`: `after_ms + delay`; pass the completion time of the previous run;
    /// - `ONCE`: the instant, if it is after `after_ms`;
    /// - `NONE`: never.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match &self.rule {
            Rule::None => None,
            Rule::Cron(expr) => expr.next_after(after_ms, &self.time_zone),
            Rule::FixRate(ms) | Rule::FixDelay(ms) => after_ms.checked_add(*ms),
            Rule::Once(at) => (*at > after_ms).then_some(*at),
        }
    }

    /// The next `n` fires after `after_ms`, each computed from the one before: the preview of a
    /// schedule. For `FIX_DELAY` and `CRON_AFTER_END` that assumes runs that take no time.
    pub fn next_fires(&self, after_ms: i64, n: usize) -> Vec<i64> {
        let mut fires = Vec::with_capacity(n.min(1024));
        let mut at = after_ms;
        while fires.len() < n {
            let Some(next) = self.next_after(at) else {
                break;
            };
            fires.push(next);
            at = next;
        }
        fires
    }

    /// Every fire in `(after_ms, until_ms]`, at most `limit` of them, in order: what the admin
    /// claims for a look-ahead window.
    ///
    /// A `FIX_DELAY` or `CRON_AFTER_END` schedule yields at most one fire: the ones after it
    /// depend on when that run completes.
    pub fn fires_between(&self, after_ms: i64, until_ms: i64, limit: usize) -> Vec<i64> {
        let mut fires = Vec::new();
        if self.kind.waits_for_end() {
            if limit > 0 {
                fires.extend(self.next_after(after_ms).filter(|at| *at <= until_ms));
            }
            return fires;
        }
        match self.rule {
            Rule::FixRate(ms) => {
                // Arithmetic rather than repeated calls: a 100 ms job has many fires per window.
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let count = (until_ms.saturating_sub(after_ms) / ms).clamp(0, limit);
                fires.extend((1..=count).map(|k| after_ms + k * ms));
            }
            _ => {
                let mut at = after_ms;
                while fires.len() < limit {
                    match self.next_after(at) {
                        Some(next) if next <= until_ms => {
                            fires.push(next);
                            at = next;
                        }
                        _ => break,
                    }
                }
            }
        }
        fires
    }
}

/// Looks up an IANA time zone by name (`Europe/Berlin`, `UTC`).
pub fn parse_time_zone(name: &str) -> Result<TimeZone, Error> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(Error::TimeZone(name.to_owned()));
    }
    TimeZone::get(trimmed).map_err(|_| Error::TimeZone(name.to_owned()))
}

/// Reads an interval: a whole number with an optional unit `ms`, `s`, `m`, `h` or `d`; a bare
/// number is seconds, as XXL-JOB's `FIX_RATE` (`30`, `500ms`, `2s`, `5m`, `1h`, `1d`). At least
/// [`MIN_INTERVAL_MS`].
pub fn parse_interval_ms(s: &str) -> Result<i64, Error> {
    let text = s.trim();
    let bad = |what: &str| Error::Schedule(format!("interval \"{text}\" {what}"));
    if text.is_empty() {
        return Err(Error::Schedule(
            "interval is empty; write a number of seconds or a number with a unit ms, s, m, h \
             or d (e.g. 30, 500ms, 5m)"
                .to_owned(),
        ));
    }
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let unit = unit.trim_start();
    if digits.is_empty() || !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(bad(
            "is not a whole number with an optional unit ms, s, m, h or d (e.g. 30, 500ms, 5m)",
        ));
    }
    let scale: i64 = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1_000,
        "ms" => 1,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(bad(&format!(
                "has an unknown unit \"{other}\"; use ms, s, m, h or d"
            )));
        }
    };
    let ms = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|ms| *ms <= MAX_INTERVAL_MS)
        .ok_or_else(|| bad("is longer than the maximum of 36500d"))?;
    if ms < MIN_INTERVAL_MS {
        return Err(bad("is shorter than the minimum of 10ms"));
    }
    Ok(ms)
}

/// Reads one instant: RFC 3339 with an offset (`2026-12-01T09:00:00+08:00`, `...Z`), or a civil
/// date-time read in `tz` (`2026-12-01 09:00:00`, `2026-12-01T09:00:00`). A civil time that does
/// not exist in `tz` is the first instant after the gap; one that occurs twice is its first
/// occurrence. Sub-millisecond digits are dropped.
pub fn parse_instant_ms(s: &str, tz: &TimeZone) -> Result<i64, Error> {
    let text = s.trim();
    let instant = match text.parse::<Timestamp>() {
        Ok(ts) => Some(ts),
        // Only text without an offset is a civil time; a bad offset stays an error.
        Err(_) if !has_offset(text) => text
            .parse::<DateTime>()
            .ok()
            .and_then(|dt| zone::resolve(dt, tz)),
        Err(_) => None,
    };
    instant.map(|ts| ts.as_millisecond()).ok_or_else(|| {
        Error::Schedule(format!(
            "\"{text}\" is not a time; write RFC 3339 (2026-12-01T09:00:00+08:00) or a \
             date-time in the job's time zone (2026-12-01 09:00:00)"
        ))
    })
}

/// Whether date-time text ends in a UTC offset or `Z`, after its time of day.
fn has_offset(text: &str) -> bool {
    let Some(time_start) = text.find(['T', 't', ' ']) else {
        return false;
    };
    text[time_start..].contains(['Z', 'z', '+', '-'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_rate_window_is_arithmetic() {
        let s = Schedule::parse(ScheduleType::FixRate, "100ms", "UTC").unwrap();
        assert_eq!(s.fires_between(1_000, 1_350, 10), vec![1_100, 1_200, 1_300]);
        assert_eq!(s.fires_between(1_000, 1_350, 2), vec![1_100, 1_200]);
        assert_eq!(s.fires_between(1_000, 900, 10), Vec::<i64>::new());
    }
}
