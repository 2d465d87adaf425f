//! `tickwork cron next`, run as the real binary: output lines and exit codes.

use std::process::{Command, Output};

use jiff::Timestamp;

fn tickwork(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(args)
        .output()
        .expect("the tickwork binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn prints_fires_in_the_zone_with_its_offset() {
    // 02:30 does not exist in New York on 8 March 2026: it fires at 03:00 EDT.
    let out = tickwork(&[
        "cron",
        "next",
        "0 30 2 * * ?",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
        "-n",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00\n2026-03-10T02:30:00-04:00\n"
    );
}

#[test]
fn default_count_is_five() {
    let out = tickwork(&[
        "cron",
        "next",
        "0 15 10 ? * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--after",
        "2026-01-01T00:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 1 January 2026 is a Thursday.
    assert_eq!(
        stdout(&out),
        "2026-01-01T10:15:00+01:00\n2026-01-02T10:15:00+01:00\n2026-01-05T10:15:00+01:00\n\
         2026-01-06T10:15:00+01:00\n2026-01-07T10:15:00+01:00\n"
    );
}

#[test]
fn after_defaults_to_now_and_tz_to_the_system_zone() {
    let before = Timestamp::now();
    let out = tickwork(&["cron", "next", "* * * * * ?", "-n", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fires: Vec<Timestamp> = stdout(&out)
        .lines()
        .map(|line| line.parse().expect(line))
        .collect();
    assert_eq!(fires.len(), 3);
    assert!(fires[0] > before);
    assert!(
        fires
            .windows(2)
            .all(|w| w[1].as_second() - w[0].as_second() == 1)
    );
}

#[test]
fn invalid_expression_exits_2_with_the_message() {
    let out = tickwork(&["cron", "next", "0 0 12 32 * ?", "--tz", "UTC"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "error: day-of-month: \"32\" is out of range 1-31\n"
    );

    let out = tickwork(&["cron", "next", "0 0 12 15 * MON", "--tz", "UTC"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: day-of-week: \"MON\" cannot be used together with day-of-month \"15\"; set one \
         of them to \"?\"\n"
    );
}

#[test]
fn invalid_zone_exits_2() {
    let out = tickwork(&["cron", "next", "0 0 12 * * ?", "--tz", "Mars/Olympus_Mons"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: time zone: \"Mars/Olympus_Mons\" is not a known IANA time zone\n"
    );
}

#[test]
fn invalid_after_exits_2() {
    let out = tickwork(&[
        "cron",
        "next",
        "0 0 12 * * ?",
        "--tz",
        "UTC",
        "--after",
        "soon",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: --after: \"soon\" is not a time"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unknown_type_is_a_usage_error() {
    let out = tickwork(&["cron", "next", "5", "--type", "SOMETIMES"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("SOMETIMES"), "{}", stderr(&out));
}

#[test]
fn previews_other_schedule_types() {
    let out = tickwork(&[
        "cron",
        "next",
        "500ms",
        "--type",
        "FIX_RATE",
        "--tz",
        "UTC",
        "--after",
        "2026-01-01T00:00:00Z",
        "-n",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-01-01T00:00:00.500+00:00\n2026-01-01T00:00:01+00:00\n2026-01-01T00:00:01.500+00:00\n"
    );

    // A civil ONCE time read in the zone; one fire only.
    let out = tickwork(&[
        "cron",
        "next",
        "2026-12-01 09:00:00",
        "--type",
        "once",
        "--tz",
        "Asia/Shanghai",
        "--after",
        "2026-01-01T00:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "2026-12-01T09:00:00+08:00\n");

    let out = tickwork(&["cron", "next", "", "--type", "NONE", "--tz", "UTC"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");

    let out = tickwork(&["cron", "next", "5ms", "--type", "FIX_DELAY", "--tz", "UTC"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: schedule: interval \"5ms\" is shorter than the minimum of 10ms\n"
    );
}

#[test]
fn a_schedule_that_ends_prints_fewer_lines() {
    let out = tickwork(&[
        "cron",
        "next",
        "0 0 0 1 1 ? 2027",
        "--tz",
        "UTC",
        "--after",
        "2026-01-01T00:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "2027-01-01T00:00:00+00:00\n");
}
