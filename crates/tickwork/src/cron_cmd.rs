//! `tickwork cron ...`: previews of schedules, computed locally by `tickwork-core` (no admin
//! needed), so that an expression can be checked before a job is saved.

use std::io::Write;

use anyhow::Context;
use clap::{Args, Subcommand};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use tickwork_core::ScheduleType;
use tickwork_core::schedule::{Schedule, parse_instant_ms, parse_time_zone};

use crate::InputError;

#[derive(Debug, Subcommand)]
pub(crate) enum CronCommand {
    /// Print the next fire times of a schedule, one per line, in RFC 3339 with the zone's
    /// offset.
    Next(NextArgs),
}

#[derive(Debug, Args)]
pub(crate) struct NextArgs {
    /// The schedule: a Quartz cron expression such as '0 0/5 * * * ?' (quote it), or the
    /// configuration of another --type (500ms, 2026-12-01 09:00:00, ...).
    expr: String,
    /// The IANA time zone the schedule runs in [default: the system's].
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Start after this instant: RFC 3339, or a date-time read in the zone [default: now].
    #[arg(long, value_name = "TIME")]
    after: Option<String>,
    /// How many fire times to print.
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 5)]
    n: usize,
    /// The schedule type: CRON, CRON_AFTER_END, FIX_RATE, FIX_DELAY, ONCE or NONE.
    #[arg(long = "type", value_name = "TYPE", default_value = "CRON", value_parser = parse_kind)]
    kind: ScheduleType,
}

fn parse_kind(s: &str) -> Result<ScheduleType, String> {
    s.to_ascii_uppercase().parse().map_err(|e| format!("{e}"))
}

pub(crate) fn run(command: CronCommand) -> anyhow::Result<()> {
    match command {
        CronCommand::Next(args) => next(args),
    }
}

fn next(args: NextArgs) -> anyhow::Result<()> {
    let tz = match &args.tz {
        Some(name) => parse_time_zone(name).map_err(|e| InputError(e.to_string()))?,
        None => TimeZone::system(),
    };
    let after_ms = match &args.after {
        Some(text) => parse_instant_ms(text, &tz).map_err(|_| {
            InputError(format!(
                "--after: \"{text}\" is not a time; write RFC 3339 (2026-03-08T01:00:00-05:00) \
                 or a date-time in the time zone (2026-03-08 01:00:00)"
            ))
        })?,
        None => Timestamp::now().as_millisecond(),
    };
    let schedule = Schedule::parse_in(args.kind, &args.expr, tz.clone())
        .map_err(|e| InputError(e.to_string()))?;
    if args.kind == ScheduleType::None {
        eprintln!("a NONE schedule never fires by itself: only by hand or by API");
    }
    let mut out = std::io::stdout().lock();
    for at in schedule.next_fires(after_ms, args.n) {
        writeln!(out, "{}", format_instant(at, &tz)?).context("writing to stdout")?;
    }
    Ok(())
}

/// RFC 3339 with the zone's offset at that instant, with milliseconds only when there are any.
fn format_instant(ms: i64, tz: &TimeZone) -> anyhow::Result<String> {
    let zoned = Timestamp::from_millisecond(ms)?.to_zoned(tz.clone());
    let format = if ms.rem_euclid(1000) == 0 {
        "%Y-%m-%dT%H:%M:%S%:z"
    } else {
        "%Y-%m-%dT%H:%M:%S%.3f%:z"
    };
    Ok(zoned.strftime(format).to_string())
}
