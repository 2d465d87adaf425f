//! The period the dashboard's charts cover: the last 24 hours (a bar an hour), the last 7, 14
//! or 30 days, or the days from one date to another (a bar a day; one day is drawn by the
//! hour), in the admin's zone. A period that does not read is refused with the reason.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

/// The periods offered: (value, i18n key). `dates` takes `from` and `to`.
pub(in crate::console) const CHOICES: [(&str, &str); 5] = [
    ("24h", "last_24h"),
    ("7d", "last_7d"),
    ("14d", "last_14d"),
    ("30d", "last_30d"),
    ("dates", "range_dates"),
];

/// The period shown when none is asked for.
pub(in crate::console) const DEFAULT: &str = "14d";

/// The longest period of dates, in days.
pub(in crate::console) const MAX_DAYS: i64 = 92;

/// Why a period was refused: the field (an i18n key) and the reason (an i18n key), with the
/// value as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::console) struct Refused {
    pub field: &'static str,
    pub reason: &'static str,
    pub value: String,
}

/// The bars of a period: `bounds[i]..bounds[i + 1]` is bar `i` (epoch ms), oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::console) struct Buckets {
    pub bounds: Vec<i64>,
    /// The label of each bar (`14:00` or `11-21`).
    pub labels: Vec<String>,
    /// Bars of an hour (else of a day).
    pub hourly: bool,
}

impl Buckets {
    pub(in crate::console) fn len(&self) -> usize {
        self.labels.len()
    }
}

fn refused(field: &'static str, reason: &'static str, value: &str) -> Refused {
    Refused {
        field,
        reason,
        value: value.trim().to_owned(),
    }
}

/// The bars of the period `range` (or of the dates `from` to `to`, both included, when either
/// is given), at `now` in `tz`.
pub(in crate::console) fn buckets(
    range: &str,
    from: &str,
    to: &str,
    now: Timestamp,
    tz: &TimeZone,
) -> Result<Buckets, Refused> {
    let today = now.to_zoned(tz.clone()).date();
    let dated = !from.trim().is_empty() || !to.trim().is_empty();
    let range = match range.trim() {
        "" if dated => "dates",
        "" => DEFAULT,
        r => r,
    };
    match range {
        "24h" => last_hours(now, tz, 24),
        "7d" => days(today.checked_sub(6.days()).ok(), today, tz),
        "14d" => days(today.checked_sub(13.days()).ok(), today, tz),
        "30d" => days(today.checked_sub(29.days()).ok(), today, tz),
        "dates" => {
            let read = |field: &'static str, s: &str| {
                s.trim()
                    .parse::<Date>()
                    .map_err(|_| refused(field, "bad_date", s))
            };
            let first = read("from", from)?;
            let last = read("to", to)?;
            if first > last {
                return Err(refused("from", "range_order", from));
            }
            if last > today {
                return Err(refused("to", "range_future", to));
            }
            let span = first
                .until(last)
                .map(|s| i64::from(s.get_days()))
                .unwrap_or(i64::MAX);
            if span >= MAX_DAYS {
                return Err(refused("to", "range_too_long", to));
            }
            if first == last {
                day_by_hours(first, tz)
            } else {
                days(Some(first), last, tz)
            }
        }
        _ => Err(refused("period", "bad_period", range)),
    }
}

fn at_midnight(d: Date, tz: &TimeZone) -> Option<Zoned> {
    d.to_zoned(tz.clone()).ok()?.start_of_day().ok()
}

fn ms(z: &Zoned) -> i64 {
    z.timestamp().as_millisecond()
}

/// A bar a day from `first` to `last`, both included.
fn days(first: Option<Date>, last: Date, tz: &TimeZone) -> Result<Buckets, Refused> {
    let internal = || refused("period", "bad_period", "");
    let first = first.ok_or_else(internal)?;
    let mut bounds = Vec::new();
    let mut labels = Vec::new();
    let mut day = first;
    while day <= last {
        let z = at_midnight(day, tz).ok_or_else(internal)?;
        bounds.push(ms(&z));
        labels.push(z.strftime("%m-%d").to_string());
        day = day.tomorrow().map_err(|_| internal())?;
    }
    let end = at_midnight(day, tz).ok_or_else(internal)?;
    bounds.push(ms(&end));
    Ok(Buckets {
        bounds,
        labels,
        hourly: false,
    })
}

/// The `n` whole hours up to the end of the current one, a bar each.
fn last_hours(now: Timestamp, tz: &TimeZone, n: i64) -> Result<Buckets, Refused> {
    let internal = || refused("period", "bad_period", "");
    // The hour is the zone's: a zone 30 minutes off UTC starts its hours at :30 UTC.
    let z = now.to_zoned(tz.clone());
    let minutes =
        i64::from(z.minute()) * 60_000 + i64::from(z.second()) * 1000 + i64::from(z.millisecond());
    let this_hour = now.as_millisecond() - minutes;
    let start = this_hour - (n - 1) * 3_600_000;
    hours_from(start, n, tz).ok_or_else(internal)
}

/// A bar an hour of one day (23 or 25 bars on a day the clocks change).
fn day_by_hours(day: Date, tz: &TimeZone) -> Result<Buckets, Refused> {
    let internal = || refused("period", "bad_period", "");
    let start = at_midnight(day, tz).ok_or_else(internal)?;
    let end = at_midnight(day.tomorrow().map_err(|_| internal())?, tz).ok_or_else(internal)?;
    let n = (ms(&end) - ms(&start)) / 3_600_000;
    hours_from(ms(&start), n, tz).ok_or_else(internal)
}

fn hours_from(start: i64, n: i64, tz: &TimeZone) -> Option<Buckets> {
    let mut bounds = Vec::new();
    let mut labels = Vec::new();
    for i in 0..=n {
        let at = start + i * 3_600_000;
        bounds.push(at);
        if i < n {
            let z = Timestamp::from_millisecond(at).ok()?.to_zoned(tz.clone());
            labels.push(z.strftime("%H:%M").to_string());
        }
    }
    Some(Buckets {
        bounds,
        labels,
        hourly: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-11-21T14:35:10Z".parse().unwrap()
    }

    fn utc() -> TimeZone {
        TimeZone::UTC
    }

    #[test]
    fn the_last_24_hours_end_with_this_hour() {
        let b = buckets("24h", "", "", now(), &utc()).unwrap();
        assert!(b.hourly);
        assert_eq!(b.len(), 24);
        assert_eq!(b.labels.first().unwrap(), "15:00");
        assert_eq!(b.labels.last().unwrap(), "14:00");
        let end: Timestamp = "2026-11-21T15:00:00Z".parse().unwrap();
        assert_eq!(*b.bounds.last().unwrap(), end.as_millisecond());
        // A zone half an hour off UTC has its hours at :30 UTC.
        let india = TimeZone::get("Asia/Kolkata").unwrap();
        let b = buckets("24h", "", "", now(), &india).unwrap();
        assert_eq!(b.labels.last().unwrap(), "20:00");
        let start: Timestamp = "2026-11-21T14:30:00Z".parse().unwrap();
        assert_eq!(b.bounds[23], start.as_millisecond());
    }

    #[test]
    fn days_end_today_and_the_default_is_two_weeks() {
        let b = buckets("7d", "", "", now(), &utc()).unwrap();
        assert!(!b.hourly);
        assert_eq!(
            b.labels,
            [
                "11-15", "11-16", "11-17", "11-18", "11-19", "11-20", "11-21"
            ]
        );
        assert_eq!(b.bounds.len(), 8);
        assert_eq!(buckets("", "", "", now(), &utc()).unwrap().len(), 14);
        assert_eq!(buckets("30d", "", "", now(), &utc()).unwrap().len(), 30);
    }

    #[test]
    fn dates_are_both_included_and_one_day_is_drawn_by_the_hour() {
        let b = buckets("dates", "2026-10-01", "2026-10-31", now(), &utc()).unwrap();
        assert_eq!(b.len(), 31);
        // Dates alone choose the period of dates.
        let b = buckets("", "2026-11-01", "2026-11-03", now(), &utc()).unwrap();
        assert_eq!(b.labels, ["11-01", "11-02", "11-03"]);
        // Berlin's clocks went back on 2026-10-25: that day has 25 hours.
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let b = buckets("dates", "2026-10-25", "2026-10-25", now(), &berlin).unwrap();
        assert!(b.hourly);
        assert_eq!(b.len(), 25);
        assert_eq!(b.labels[2], "02:00");
        assert_eq!(b.labels[3], "02:00");
    }

    #[test]
    fn a_period_that_does_not_read_is_refused_with_its_reason() {
        let no = |range: &str, from: &str, to: &str| {
            let r = buckets(range, from, to, now(), &utc()).unwrap_err();
            (r.field, r.reason)
        };
        assert_eq!(no("1y", "", ""), ("period", "bad_period"));
        assert_eq!(no("dates", "", "2026-11-02"), ("from", "bad_date"));
        assert_eq!(no("dates", "2026-11-02", "tomorrow"), ("to", "bad_date"));
        assert_eq!(
            no("dates", "2026-11-02", "2026-11-01"),
            ("from", "range_order")
        );
        assert_eq!(
            no("dates", "2026-11-20", "2026-11-22"),
            ("to", "range_future")
        );
        assert_eq!(
            no("dates", "2026-01-01", "2026-11-01"),
            ("to", "range_too_long")
        );
        assert_eq!(
            no("dates", "2026-02-30", "2026-03-01"),
            ("from", "bad_date")
        );
    }
}
