//! Submissions from code: what a client asks for under its own key (now, at an instant, every
//! so often a number of times, or on a cron), turned into the schedule of the job that carries
//! it out.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::cron::CronExpr;
use crate::schedule::{MAX_INTERVAL_MS, MIN_INTERVAL_MS, parse_instant_ms, parse_time_zone};
use crate::{Error, MisfireStrategy, ScheduleType};

/// The longest client key of a submission, in characters.
pub const KEY_CHARS: usize = 100;

/// When a submission fires, as the client writes it (`{"kind": "repeat", "every_ms": 500,
/// "count": 3}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum When {
    /// Once, as soon as it is claimed.
    Now,
    /// Once, at an instant: RFC 3339, or a civil date-time in the submission's time zone.
    At { at: String },
    /// First now, then every `every_ms`; `count` fires in all, or until cancelled when absent.
    Repeat {
        every_ms: i64,
        #[serde(default)]
        count: Option<i64>,
    },
    /// On a Quartz cron expression, in the submission's time zone.
    Cron { cron: String },
}

/// What a submission under a key that is taken does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnConflict {
    /// Keeps the submission there and changes nothing.
    #[default]
    Ignore,
    /// Rewrites its job with the new definition and schedule.
    Replace,
}

/// The job schedule that carries a submission out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    /// The job's first fire.
    pub first_fire: i64,
    /// Fires the job has left, `None` for no bound: a repeat's count.
    pub fires_left: Option<i64>,
    /// A one-shot fire claimed late still runs; a late fire of a repeat or a cron is skipped
    /// (and recorded misfired), as the next one comes anyway.
    pub misfire: MisfireStrategy,
}

/// Turns `when` into a job schedule at `now`, read in `time_zone` (an IANA name).
///
/// `rely_on_prev_cycle` asks for one live run at a time, the next fire counted from the end of
/// the last: a repeat becomes a fixed delay (`FIX_DELAY`) instead of a fixed rate, a cron a
/// `CRON_AFTER_END` (its first match after the end; the matches passed while it ran skipped).
pub fn plan(
    when: &When,
    rely_on_prev_cycle: bool,
    time_zone: &str,
    now: i64,
) -> Result<Plan, Error> {
    let tz = parse_time_zone(time_zone)?;
    let once = |at: i64| Plan {
        schedule_type: ScheduleType::Once,
        schedule_conf: Timestamp::from_millisecond(at)
            .map(|t| t.to_string())
            .unwrap_or_default(),
        first_fire: at,
        fires_left: None,
        misfire: MisfireStrategy::FireOnceNow,
    };
    match when {
        When::Now => Ok(once(now)),
        When::At { at } => {
            let at = parse_instant_ms(at, &tz)?;
            if Timestamp::from_millisecond(at).is_err() {
                return Err(invalid("at", "is out of range"));
            }
            Ok(once(at))
        }
        When::Repeat { every_ms, count } => {
            if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(every_ms) {
                return Err(invalid(
                    "every_ms",
                    format!("must be {MIN_INTERVAL_MS} to {MAX_INTERVAL_MS} milliseconds"),
                ));
            }
            if let Some(n) = count
                && *n < 1
            {
                return Err(invalid(
                    "count",
                    "must be at least 1 (leave it out to repeat until cancelled)",
                ));
            }
            Ok(Plan {
                schedule_type: if rely_on_prev_cycle {
                    ScheduleType::FixDelay
                } else {
                    ScheduleType::FixRate
                },
                schedule_conf: format!("{every_ms}ms"),
                first_fire: now,
                fires_left: *count,
                misfire: MisfireStrategy::DoNothing,
            })
        }
        When::Cron { cron } => {
            let expr = CronExpr::parse(cron)?;
            let first_fire = expr
                .next_after(now, &tz)
                .ok_or_else(|| invalid("cron", "has no fire in the future"))?;
            Ok(Plan {
                schedule_type: if rely_on_prev_cycle {
                    ScheduleType::CronAfterEnd
                } else {
                    ScheduleType::Cron
                },
                schedule_conf: cron.trim().to_owned(),
                first_fire,
                fires_left: None,
                misfire: MisfireStrategy::DoNothing,
            })
        }
    }
}

/// Checks a client key: 1 to [`KEY_CHARS`] letters, digits, `.`, `_`, `-` or `:`.
pub fn validate_key(key: &str) -> Result<(), Error> {
    if key.is_empty()
        || key.len() > KEY_CHARS
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))
    {
        return Err(invalid(
            "key",
            format!("{key:?} must be 1 to {KEY_CHARS} letters, digits, '.', '_', '-' or ':'"),
        ));
    }
    Ok(())
}

fn invalid(field: &'static str, message: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_000_000_000;

    #[test]
    fn each_kind_becomes_its_job_schedule() {
        let repeat = |count| When::Repeat {
            every_ms: 500,
            count,
        };
        let cases = [
            (When::Now, false, ScheduleType::Once, NOW, None),
            (
                When::At {
                    at: "2026-12-01T09:00:00+08:00".into(),
                },
                false,
                ScheduleType::Once,
                1_796_086_800_000,
                None,
            ),
            (repeat(Some(3)), false, ScheduleType::FixRate, NOW, Some(3)),
            (repeat(Some(3)), true, ScheduleType::FixDelay, NOW, Some(3)),
            (repeat(None), false, ScheduleType::FixRate, NOW, None),
            (
                When::Cron {
                    cron: "0 0 * * * ?".into(),
                },
                false,
                ScheduleType::Cron,
                // 01:00 UTC, the next whole hour after NOW (2026-11-30T00:53:20Z).
                1_796_000_000_000 + 400_000,
                None,
            ),
            (
                When::Cron {
                    cron: "0 0 * * * ?".into(),
                },
                true,
                ScheduleType::CronAfterEnd,
                1_796_000_000_000 + 400_000,
                None,
            ),
        ];
        for (when, rely, kind, first, left) in cases {
            let plan = plan(&when, rely, "UTC", NOW).unwrap();
            assert_eq!(plan.schedule_type, kind, "{when:?}");
            assert_eq!(plan.first_fire, first, "{when:?}");
            assert_eq!(plan.fires_left, left, "{when:?}");
            // What the job stores parses back to the same schedule.
            let schedule =
                crate::schedule::Schedule::parse(kind, &plan.schedule_conf, "UTC").unwrap();
            if kind == ScheduleType::Once {
                assert_eq!(schedule.once_at_ms(), Some(first), "{when:?}");
            }
        }
    }

    #[test]
    fn bad_submissions_name_their_field() {
        let cases = [
            (
                When::Repeat {
                    every_ms: 5,
                    count: None,
                },
                false,
                "UTC",
                "every_ms",
            ),
            (
                When::Repeat {
                    every_ms: 1000,
                    count: Some(-1),
                },
                false,
                "UTC",
                "count",
            ),
            (
                When::Repeat {
                    every_ms: 1000,
                    count: Some(0),
                },
                false,
                "UTC",
                "count",
            ),
            (
                When::Cron {
                    cron: "0 0 25 * * ?".into(),
                },
                false,
                "UTC",
                "hours",
            ),
            (
                When::At {
                    at: "tomorrow".into(),
                },
                false,
                "UTC",
                "schedule",
            ),
            (When::Now, false, "Mars/Olympus", "time zone"),
        ];
        for (when, rely, tz, field) in cases {
            let e = plan(&when, rely, tz, NOW).unwrap_err().to_string();
            assert!(e.starts_with(field), "{when:?}: {e}");
        }
    }

    #[test]
    fn keys_are_short_plain_text() {
        for good in [
            "a",
            "order-42",
            "tenant:7.report_2026",
            &"k".repeat(KEY_CHARS),
        ] {
            assert_eq!(validate_key(good), Ok(()), "{good}");
        }
        for bad in ["", "a b", "ü", "a/b", &"k".repeat(KEY_CHARS + 1)] {
            assert!(validate_key(bad).is_err(), "{bad}");
        }
    }
}
