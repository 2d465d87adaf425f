//! The `next-fire` scenario: how many next-fire computations one core does per second, for the
//! schedules jobs typically have, in a time zone with DST.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tickwork_core::ScheduleType;
use tickwork_core::schedule::Schedule;

/// The schedules measured: every five minutes, daily, weekdays, month ends, a fast fixed rate.
const CASES: &[(ScheduleType, &str)] = &[
    (ScheduleType::Cron, "0 0/5 * * * ?"),
    (ScheduleType::Cron, "0 0 12 * * ?"),
    (ScheduleType::Cron, "0 15 10 ? * MON-FRI"),
    (ScheduleType::Cron, "0 0 0 L * ?"),
    (ScheduleType::FixRate, "500ms"),
];

/// A zone with DST, so that the measured searches cross transitions as real ones do.
const TIME_ZONE: &str = "Europe/Berlin";

/// How long each schedule is measured.
const MEASURE_FOR: Duration = Duration::from_secs(1);

/// 2026-01-01T00:00:00Z.
const BASE_MS: i64 = 1_767_225_600_000;
const YEAR_MS: u64 = 365 * 86_400_000;

pub(crate) fn run() -> anyhow::Result<()> {
    let mut slowest = f64::INFINITY;
    for (kind, conf) in CASES {
        let schedule = Schedule::parse(*kind, conf, TIME_ZONE)?;
        let per_s = measure(&schedule);
        println!("next-fire type={kind} conf=\"{conf}\" tz={TIME_ZONE} per_s={per_s:.0}");
        slowest = slowest.min(per_s);
    }
    println!("RESULT scenario=next-fire per_s={slowest:.0}");
    Ok(())
}

/// Calls per second of `next_after` from instants spread over a year (a fixed sequence, so
/// runs compare), on this thread only.
fn measure(schedule: &Schedule) -> f64 {
    const BATCH: u64 = 1_000;
    let mut i: u64 = 0;
    // A short warm-up, so caches and branch predictors do not count against the first case.
    let warm_up = Instant::now();
    while warm_up.elapsed() < MEASURE_FOR / 10 {
        for _ in 0..BATCH {
            black_box(schedule.next_after(black_box(spread(i))));
            i += 1;
        }
    }
    let start = Instant::now();
    let mut calls: u64 = 0;
    while start.elapsed() < MEASURE_FOR {
        for _ in 0..BATCH {
            black_box(schedule.next_after(black_box(spread(i))));
            i += 1;
        }
        calls += BATCH;
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

/// The i-th instant of a sequence that covers the year 2026 evenly at millisecond precision.
fn spread(i: u64) -> i64 {
    // Multiplying by a large odd constant scatters consecutive indices over the year.
    BASE_MS + (i.wrapping_mul(2_654_435_761) % YEAR_MS) as i64
}
