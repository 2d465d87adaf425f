//! The alarm status machine: every pair of statuses, the stored integers, and the sources a
//! store's update requires.

use tickwork_core::alarm::AlarmStatus;

use AlarmStatus::*;

/// The complete set of allowed moves; everything else must be refused.
const ALLOWED: &[(AlarmStatus, AlarmStatus)] = &[
    (Undecided, Queued),
    (Queued, NotNeeded),
    (Queued, Delivering),
    (Delivering, Sent),
    (Delivering, SendFailed),
    (Sent, SendFailed),
];

#[test]
fn every_pair_of_statuses() {
    assert_eq!(AlarmStatus::ALL.len(), 6);
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
    ];
    for (status, is_final) in cases {
        let exits = AlarmStatus::ALL
            .iter()
            .filter(|&&to| status.can_move_to(to))
            .count();
        assert_eq!(exits == 0, is_final, "{status}");
    }
}

/// The integers are XXL-JOB's (and 4, ours): the column keeps them, no migration.
#[test]
fn codes_and_names() {
    let cases = [
        (Undecided, 0, "undecided"),
        (Queued, -1, "queued"),
        (NotNeeded, 1, "not_needed"),
        (Sent, 2, "sent"),
        (SendFailed, 3, "send_failed"),
        (Delivering, 4, "delivering"),
    ];
    for (status, code, name) in cases {
        assert_eq!(status.code(), code, "{status}");
        assert_eq!(AlarmStatus::from_code(code), Some(status), "{code}");
        assert_eq!(status.as_str(), name);
        assert_eq!(status.to_string(), name);
    }
    for code in [-2, 5, 99, i32::MIN, i32::MAX] {
        assert_eq!(AlarmStatus::from_code(code), None, "{code}");
    }
}
