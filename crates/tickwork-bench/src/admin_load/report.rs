//! What the admin load scenarios print beside their figures: a child's warnings, the
//! window second by second, the run ledger read back from the database, and the health probes.

use std::path::Path;

use super::db::Ledger;
use super::health::{HealthFigures, Probe, SLOW_MS};
use super::stats::{Spread, WindowFigures, ms};

/// Counts a child's WARN and ERROR log lines and shows the most frequent messages.
pub(super) fn print_log_summary(name: &str, log: &Path) {
    let Ok(text) = std::fs::read_to_string(log) else {
        return;
    };
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let (mut warn, mut error) = (0, 0);
    for line in text.lines() {
        let level = if line.contains(" WARN ") {
            warn += 1;
            "WARN"
        } else if line.contains(" ERROR ") {
            error += 1;
            "ERROR"
        } else {
            continue;
        };
        // Group by message: the text after the level, numbers masked, cut short.
        let msg = line.split_once(level).map_or(line, |(_, m)| m).trim();
        let msg: String = msg
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .take(140)
            .collect();
        *counts.entry(format!("{level} {msg}")).or_default() += 1;
    }
    println!(
        "{name} log: {} lines, {warn} WARN, {error} ERROR",
        text.lines().count()
    );
    let mut top: Vec<_> = counts.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (msg, n) in top.into_iter().take(5) {
        println!("  {n:>7} x {msg}");
    }
    // The phases of its graceful stop: the HTTP server's counted from SIGTERM, the pipeline's
    // from the pipeline's own stop, which follows it.
    for line in text.lines().filter(|l| l.contains("stopping: ")) {
        println!(
            "  {}",
            line.split_once(" INFO ").map_or(line, |(_, m)| m).trim()
        );
    }
}

pub(super) fn print_seconds(f: &WindowFigures) {
    println!(
        "per second of the window (arrived = runs reaching the executor in that second; lateness and missed = fires scheduled at that second):"
    );
    for (i, s) in f.per_second.iter().enumerate() {
        let late = match s.lateness {
            Some(l) => format!(
                "first {:>7} ms  p50 {:>7} ms  p99 {:>7} ms  max {:>7} ms",
                ms(l.min),
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            ),
            None => "no arrivals".to_owned(),
        };
        println!(
            "  s{i:<3} arrived {:>6}  {late}  missed {}",
            s.arrived, s.missed
        );
    }
}

pub(super) fn print_ledger(l: &Ledger, expected: usize) {
    let states: Vec<String> = l.states.iter().map(|(s, n)| format!("{s}={n}")).collect();
    println!("ledger: runs of the window by state: {}", states.join(" "));
    if l.owners.len() > 1 {
        let owners: Vec<String> = l.owners.iter().map(|(s, n)| format!("{s}={n}")).collect();
        println!("ledger: runs by admin node: {}", owners.join(" "));
    }
    println!(
        "ledger: {} distinct scheduled (job, second) pairs of {expected} expected \
         ({} absent), {} pairs with more than one run",
        l.distinct_scheduled,
        expected as i64 - l.distinct_scheduled,
        l.duplicated
    );
    let spread = |name: &str, v: Vec<i64>| match Spread::of(v) {
        Some(s) => println!(
            "ledger: {name}: p50 {} ms, p99 {} ms, max {} ms ({} runs)",
            s.p50, s.p99, s.max, s.count
        ),
        None => println!("ledger: {name}: no runs"),
    };
    spread(
        "claimed (created_at - scheduled_at; negative = ahead of the fire)",
        l.rows
            .iter()
            .map(|r| r.created_at - r.scheduled_at)
            .collect(),
    );
    spread(
        "dispatch recorded (dispatched_at - scheduled_at)",
        l.rows
            .iter()
            .filter_map(|r| Some(r.dispatched_at? - r.scheduled_at))
            .collect(),
    );
    spread(
        "result recorded (finished_at - scheduled_at)",
        l.rows
            .iter()
            .filter_map(|r| Some(r.finished_at? - r.scheduled_at))
            .collect(),
    );
}

/// The health endpoints' answer times, in the window and over the whole run.
pub(super) fn print_health(probes: &[Probe], w0: i64, w1: i64) {
    for path in ["/healthz", "/readyz"] {
        for (span, from, to) in [("window", w0, w1), ("whole run", i64::MIN, i64::MAX)] {
            let f = HealthFigures::of(probes, path, from, to);
            let took = f.took.map_or("no answers".to_owned(), |t| {
                format!(
                    "p50 {} ms, p99 {} ms, max {} ms",
                    ms(t.p50),
                    ms(t.p99),
                    ms(t.max)
                )
            });
            println!(
                "health: {path} over the {span}: {} probes, {took}, {} slower than {SLOW_MS} ms, \
                 {} unanswered",
                f.probes, f.slow, f.failed
            );
        }
    }
}
