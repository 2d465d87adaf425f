//! Invalid cron expressions and their exact messages: each names the field and says what is
//! wrong, in lowercase, without a final period.

use tickwork_core::cron::CronExpr;
use tickwork_core::schedule::Schedule;
use tickwork_core::{Error, ScheduleType};

const FIELDS: &str = "expected 6 or 7: seconds minutes hours day-of-month month day-of-week [year]";

#[rustfmt::skip]
const CASES: &[(&str, &str)] = &[
    ("", "expression: is empty; expected 6 or 7: seconds minutes hours day-of-month month day-of-week [year]"),
    ("0 0 12 * *", "expression: \"0 0 12 * *\" has 5 fields; expected 6 or 7: seconds minutes hours day-of-month month day-of-week [year]"),
    ("0 0 12 * * ? 2026 1", "expression: \"0 0 12 * * ? 2026 1\" has 8 fields; expected 6 or 7: seconds minutes hours day-of-month month day-of-week [year]"),
    ("0 0 12 32 * ?", "day-of-month: \"32\" is out of range 1-31"),
    ("60 * * * * ?", "seconds: \"60\" is out of range 0-59"),
    ("0 60 * * * ?", "minutes: \"60\" is out of range 0-59"),
    ("0 0 24 * * ?", "hours: \"24\" is out of range 0-23"),
    ("0 0 12 ? 13 MON", "month: \"13\" is out of range 1-12"),
    ("0 0 12 ? * 8", "day-of-week: \"8\" is out of range 1-7"),
    ("0 0 12 ? * 0", "day-of-week: \"0\" is out of range 1-7"),
    ("0 0 12 ? * 2-9", "day-of-week: \"9\" is out of range 1-7"),
    ("0 0 12 15 * MON", "day-of-week: \"MON\" cannot be used together with day-of-month \"15\"; set one of them to \"?\""),
    ("0 0 12 ? * ?", "day-of-week: \"?\" cannot be used when day-of-month is also \"?\"; give the days in one of them"),
    ("0 0 12 * * ? 1969", "year: \"1969\" is out of range 1970-2099"),
    ("0 0 12 * * ? 2100", "year: \"2100\" is out of range 1970-2099"),
    ("0 0 12 ? * MON 2030-2020", "year: \"2030-2020\" is not a valid range: it ends before it starts"),
    ("0 0 12 L-31 * ?", "day-of-month: \"L-31\": the offset \"31\" is out of range 0-30"),
    ("0 0 12 L-x * ?", "day-of-month: \"L-x\": the offset after \"L-\" must be a number 0-30"),
    ("0 0 12 1,L * ?", "day-of-month: \"1,L\" is not valid: L, LW, L-n and nW stand alone (as in L, LW, L-3, 15W)"),
    ("0 0 12 1-5W * ?", "day-of-month: \"1-5W\" is not valid: L, LW, L-n and nW stand alone (as in L, LW, L-3, 15W)"),
    ("0 0 12 32W * ?", "day-of-month: \"32\" is out of range 1-31"),
    ("0 0 12 ? * 6#6", "day-of-week: \"6#6\": the occurrence \"6\" is out of range 1-5"),
    ("0 0 12 ? * MON#1,FRI#1", "day-of-week: \"MON#1,FRI#1\": n#k stands alone (as in 6#3, the third friday)"),
    ("0 0 12 ? * 5L,6", "day-of-week: \"5L,6\": nL stands alone (as in 6L, the last friday)"),
    ("0 0 12 ? * FOOL", "day-of-week: \"FOO\" is neither a number 1-7 nor a name SUN-SAT"),
    ("0 */0 * * * ?", "minutes: \"*/0\": the step \"0\" is out of range 1-59"),
    ("0 0/x * * * ?", "minutes: \"0/x\": the step \"x\" is not a number"),
    ("0 0 12 ? JANUARY *", "month: \"JANUARY\" is neither a number 1-12 nor a name JAN-DEC"),
    ("0 0 ? * * *", "hours: \"?\": \"?\" is only allowed in day-of-month and day-of-week"),
    ("0 L * * * ?", "minutes: \"L\": \"L\" is only allowed in day-of-month and day-of-week"),
    ("0 0 12 ? 5W *", "month: \"5W\": \"W\" is only allowed in day-of-month"),
    ("0 0 12 1#2 * ?", "day-of-month: \"1#2\": \"#\" is only allowed in day-of-week"),
    ("0 5-x * * * ?", "minutes: \"x\" is not a number"),
    ("0 0 12 1,,2 * ?", "day-of-month: \"1,,2\" has an empty list item"),
    ("0 0 12 ?,1 * MON", "day-of-month: \"?,1\": \"?\" must stand alone"),
    ("0 0 12 MON * ?", "day-of-month: \"MON\" is not a number"),
    ("0 0 0 30 2 ?", "expression: \"0 0 0 30 2 ?\" never fires: no date matches it"),
    ("0 0 0 L-29 2 ?", "expression: \"0 0 0 L-29 2 ?\" never fires: no date matches it"),
    ("0 0 0 29 2 ? 2097", "expression: \"0 0 0 29 2 ? 2097\" never fires: no date matches it"),
];

#[test]
fn invalid_expressions_have_exact_messages() {
    assert!(CASES.len() >= 15);
    let mut failures = Vec::new();
    for (expr, message) in CASES {
        match CronExpr::parse(expr) {
            Ok(_) => failures.push(format!("{expr:?} parsed; expected {message:?}")),
            Err(e) => {
                assert!(matches!(e, Error::Cron { .. }), "{expr:?}: {e:?}");
                if e.to_string() != *message {
                    failures.push(format!(
                        "{expr:?}:\n  expected {message:?}\n  got      {:?}",
                        e.to_string()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn messages_are_lowercase_sentences_without_final_period() {
    for (expr, _) in CASES {
        let message = CronExpr::parse(expr).unwrap_err().to_string();
        assert!(!message.ends_with('.'), "{message}");
        assert!(
            message.starts_with(|c: char| c.is_ascii_lowercase()),
            "{message}"
        );
    }
}

#[test]
fn schedule_parse_passes_cron_errors_through() {
    let err = Schedule::parse(ScheduleType::Cron, "0 0 12 32 * ?", "UTC").unwrap_err();
    assert_eq!(err.to_string(), "day-of-month: \"32\" is out of range 1-31");
    let err = Schedule::parse(ScheduleType::Cron, "* * * * *", "UTC").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("expression: \"* * * * *\" has 5 fields; {FIELDS}")
    );
}

/// Valid odd corners that must not be refused.
#[test]
fn accepted_corners() {
    for expr in [
        "0 0 12 * * ?",
        "0 0 12 ? * *",
        "0 0 12 * * *",
        "0 0 12 * * MON",
        "0 0 12 15 * *",
        "0\t0  12 * * ?",
        "/5 * * * * ?",
        "0 0 12 L-0 * ?",
        "0 0 12 l * ?",
        "0 0 12 ? * 7L",
        "0 0 12 ? * sat#5",
        "0 0 12 * * ? *",
        "0 0 12 * * ? */10",
        "0 0 12 * * ? 1970-2099",
        "59 59 23 31 12 ? 2099",
        "0 0 0 29 2 ? 2096",
    ] {
        if let Err(e) = CronExpr::parse(expr) {
            panic!("{expr:?}: {e}");
        }
    }
}
