//! The alarm status machine: every pair of statuses, the stored integers, and the sources a
//! store's update requires.

use tickwork_core::alarm::{AlarmStatus, Grouping, LatestAlarm, group};

use AlarmStatus::*;

/// The complete set of allowed moves; everything else must be refused.
const ALLOWED: &[(AlarmStatus, AlarmStatus)] = &[
    (Undecided, Queued),
    (Queued, NotNeeded),
    (Queued, Delivering),
    (Queued, Grouped),
    (Delivering, Sent),
    (Delivering, SendFailed),
    (Sent, SendFailed),
];

#[test]
fn every_pair_of_statuses() {
    assert_eq!(AlarmStatus::ALL.len(), 7);
    for &from in AlarmStatus::ALL {
        for &to in AlarmStatus::ALL {
            let allowed = ALLOWED.contains(&(from, to));
            assert_eq!(from.can_move_to(to), allowed, "{from} -> {to}");
            assert_eq!(
                AlarmStatus::sources_of(to).contains(&from),
                allowed,
                "sources of {to} and {from}"
            );
        }
    }
}

#[test]
fn final_statuses_have_no_exit() {
    let cases = [
        (Undecided, false),
        (Queued, false),
        (NotNeeded, true),
        (Sent, false),
        (SendFailed, true),
        (Delivering, false),
        (Grouped, true),
    ];
    for (status, is_final) in cases {
        let exits = AlarmStatus::ALL
            .iter()
            .filter(|&&to| status.can_move_to(to))
            .count();
        assert_eq!(exits == 0, is_final, "{status}");
    }
}

/// The integers are XXL-JOB's (and 4 and 5, ours): the column keeps them, no migration.
#[test]
fn codes_and_names() {
    let cases = [
        (Undecided, 0, "undecided"),
        (Queued, -1, "queued"),
        (NotNeeded, 1, "not_needed"),
        (Sent, 2, "sent"),
        (SendFailed, 3, "send_failed"),
        (Delivering, 4, "delivering"),
        (Grouped, 5, "grouped"),
    ];
    for (status, code, name) in cases {
        assert_eq!(status.code(), code, "{status}");
        assert_eq!(AlarmStatus::from_code(code), Some(status), "{code}");
        assert_eq!(status.as_str(), name);
        assert_eq!(status.to_string(), name);
    }
    for code in [-2, 6, 99, i32::MIN, i32::MAX] {
        assert_eq!(AlarmStatus::from_code(code), None, "{code}");
    }
}

#[test]
fn alarms_of_a_job_are_grouped_a_window_apart() {
    const NOW: i64 = 1_000_000;
    const MIN: i64 = 60_000;
    let open = |due_at| Some(LatestAlarm { due_at, open: true });
    let taken = |due_at| {
        Some(LatestAlarm {
            due_at,
            open: false,
        })
    };
    let cases = [
        // (newest alarm of the job on the channel, window, what the run's alarm becomes)
        (None, MIN, Grouping::New { due_at: NOW }),
        (None, 0, Grouping::New { due_at: NOW }),
        // Not sent yet: the run joins it, whether it is due already or later.
        (open(NOW - 5), MIN, Grouping::Join),
        (open(NOW + 30_000), MIN, Grouping::Join),
        // Sent (or being sent) within the window: the next one waits for the window's end.
        (
            taken(NOW - 1_000),
            MIN,
            Grouping::New {
                due_at: NOW - 1_000 + MIN,
            },
        ),
        (taken(NOW), MIN, Grouping::New { due_at: NOW + MIN }),
        // The window has passed: at once.
        (taken(NOW - MIN), MIN, Grouping::New { due_at: NOW }),
        (taken(NOW - 10 * MIN), MIN, Grouping::New { due_at: NOW }),
        // No window: every run its own alarm at once, as if nothing were there.
        (open(NOW - 5), 0, Grouping::New { due_at: NOW }),
        (taken(NOW - 1_000), 0, Grouping::New { due_at: NOW }),
        (
            taken(i64::MAX - 10),
            MIN,
            Grouping::New { due_at: i64::MAX },
        ),
    ];
    for (latest, window, want) in cases {
        assert_eq!(
            group(latest, NOW, window),
            want,
            "{latest:?} window {window}"
        );
    }
}
