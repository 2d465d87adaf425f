//! Fuzzes schedule parsing (Quartz cron, intervals, instants, zones) and the next-fire search:
//! any text either parses or is refused with an error; nothing panics or loops.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwork_core::ScheduleType;
use tickwork_core::cron::CronExpr;
use tickwork_core::schedule::{Schedule, parse_time_zone};

/// Zones with DST gaps and overlaps of different sizes, and one without DST.
const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
];

fuzz_target!(|data: &[u8]| {
    // The first byte picks the zone and the start instant; the rest is the expression.
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let zone = ZONES[usize::from(pick) % ZONES.len()];
    let tz = parse_time_zone(zone).expect("a known zone");
    if let Ok(expr) = CronExpr::parse(text) {
        // From a few instants: 1970, 2026 and just before the last supported year.
        let starts = [0_i64, 1_795_000_000_000, 4_070_000_000_000];
        let mut at = starts[usize::from(pick >> 4) % starts.len()];
        for _ in 0..4 {
            match expr.next_after(at, &tz) {
                Some(next) => {
                    assert!(next > at, "next fire {next} is not after {at} for {text:?}");
                    at = next;
                }
                None => break,
            }
        }
    }
    for kind in [
        ScheduleType::Cron,
        ScheduleType::FixRate,
        ScheduleType::FixDelay,
        ScheduleType::Once,
    ] {
        let _ = Schedule::parse(kind, text, zone);
    }
    let _ = parse_time_zone(text);
});
