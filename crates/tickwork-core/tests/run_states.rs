//! The run state machine: every pair of states, the operations that make the moves, names,
//! and the XXL-JOB code views.

use std::collections::BTreeSet;

use tickwork_core::run::{RunMove, RunState, transition};
use tickwork_core::{Error, HANDLE_CODE_FAIL, HANDLE_CODE_SUCCESS, HANDLE_CODE_TIMEOUT};

use RunState::*;

/// The complete set of allowed moves (design §2); everything else must be refused.
const ALLOWED: &[(RunState, RunState)] = &[
    (Planned, Sending),
    (Planned, Misfired),
    (Planned, Skipped),
    // Its owner never called `/run` after all.
    (Sending, Planned),
    (Sending, Dispatched),
    (Sending, Failed),
    // An early callback: the result beat the dispatch record.
    (Sending, Succeeded),
    (Sending, TimedOut),
    // Maybe sent, and nobody could say.
    (Sending, Lost),
    (Sending, Skipped),
    (Sending, Misfired),
    (Dispatched, Succeeded),
    (Dispatched, Failed),
    (Dispatched, TimedOut),
    (Dispatched, Killed),
    (Dispatched, Lost),
];

#[test]
fn every_pair_of_states() {
    assert_eq!(RunState::ALL.len(), 10);
    let mut allowed_seen = 0;
    for &from in RunState::ALL {
        for &to in RunState::ALL {
            let allowed = ALLOWED.contains(&(from, to));
            assert_eq!(from.can_move_to(to), allowed, "{from} -> {to}");
            match transition(from, to) {
                Ok(state) => {
                    assert!(allowed, "{from} -> {to} should be refused");
                    assert_eq!(state, to);
                    allowed_seen += 1;
                }
                Err(err) => {
                    assert!(!allowed, "{from} -> {to} should be allowed");
                    assert_eq!(err, Error::RunTransition { from, to });
                    assert_eq!(
                        err.to_string(),
                        format!("run: cannot move from {from} to {to}")
                    );
                }
            }
            assert_eq!(from.transition(to), transition(from, to));
        }
    }
    assert_eq!(allowed_seen, ALLOWED.len());
}

#[test]
fn final_states_have_no_exit() {
    let cases = [
        (Planned, false),
        (Sending, false),
        (Dispatched, false),
        (Succeeded, true),
        (Failed, true),
        (TimedOut, true),
        (Killed, true),
        (Lost, true),
        (Misfired, true),
        (Skipped, true),
    ];
    for (state, is_final) in cases {
        assert_eq!(state.is_final(), is_final, "{state}");
        let exits = RunState::ALL
            .iter()
            .filter(|&&to| state.can_move_to(to))
            .count();
        assert_eq!(exits == 0, is_final, "{state}");
    }
}

#[test]
fn error_message_names_both_states() {
    assert_eq!(
        transition(Planned, Lost).unwrap_err().to_string(),
        "run: cannot move from planned to lost"
    );
}

/// Each operation: the states it applies to, where it leaves the run, and where it leaves a
/// run whose kill was asked for.
#[test]
fn every_operation_and_its_states() {
    let cases: &[(RunMove, &[RunState], RunState, RunState)] = &[
        (RunMove::Send, &[Planned], Sending, Sending),
        (RunMove::Unsend, &[Sending], Planned, Planned),
        (RunMove::Dispatch, &[Sending], Dispatched, Dispatched),
        (RunMove::TriggerFail, &[Sending, Dispatched], Failed, Failed),
        (
            RunMove::Complete(Succeeded),
            &[Sending, Dispatched],
            Succeeded,
            Succeeded,
        ),
        (
            RunMove::Complete(Failed),
            &[Sending, Dispatched],
            Failed,
            Killed,
        ),
        (
            RunMove::Complete(TimedOut),
            &[Sending, Dispatched],
            TimedOut,
            Killed,
        ),
        (RunMove::Complete(Killed), &[Dispatched], Killed, Killed),
        (RunMove::Complete(Lost), &[Sending, Dispatched], Lost, Lost),
        (RunMove::Misfire, &[Planned, Sending], Misfired, Misfired),
        (RunMove::Skip, &[Planned, Sending], Skipped, Skipped),
        (RunMove::CatchUp, &[Planned], Planned, Planned),
        (RunMove::Adopt, &[Planned], Planned, Planned),
        (RunMove::AdoptSending, &[Sending], Sending, Sending),
        (RunMove::KillIntent, &[Dispatched], Dispatched, Dispatched),
    ];
    assert_eq!(
        cases.iter().map(|c| c.0).collect::<Vec<_>>(),
        RunMove::ALL,
        "one case per operation, in order"
    );
    for &(op, from, to, to_after_kill) in cases {
        assert_eq!(op.from_states(), from, "{op}");
        assert_eq!(op.to(), to, "{op}");
        assert_eq!(op.to_with_kill_intent(), to_after_kill, "{op}");
        assert_eq!(op.keeps_state(), from == [to], "{op}");
        for &state in RunState::ALL {
            assert_eq!(
                op.applies_to(state),
                from.contains(&state),
                "{op} on {state}"
            );
        }
    }
    // Only results complete a run.
    for state in [Planned, Sending, Dispatched, Misfired, Skipped] {
        assert!(RunMove::Complete(state).from_states().is_empty(), "{state}");
    }
}

/// The operations make exactly the moves `can_move_to` allows: none it refuses, and every
/// one it allows is made by some operation (the machine has no move nobody makes).
#[test]
fn operations_make_exactly_the_allowed_moves() {
    let mut made = BTreeSet::new();
    for &op in RunMove::ALL {
        for &from in op.from_states() {
            // Only a dispatched run can have a kill intent.
            let mut ends = vec![op.to()];
            if from == Dispatched {
                ends.push(op.to_with_kill_intent());
            }
            for to in ends {
                if op.keeps_state() {
                    assert_eq!(from, to, "{op} keeps the state");
                    continue;
                }
                assert!(from.can_move_to(to), "{op}: {from} -> {to} is refused");
                made.insert((from, to));
            }
        }
    }
    let allowed: BTreeSet<_> = ALLOWED.iter().copied().collect();
    assert_eq!(made, allowed);
}

#[test]
fn state_groups() {
    let cases = [
        // state, initial, result, early result, calls for an alarm, with a kill intent
        (Planned, true, false, false, false, Planned),
        (Sending, false, false, false, false, Sending),
        (Dispatched, false, false, false, false, Dispatched),
        (Succeeded, false, true, true, false, Succeeded),
        (Failed, false, true, true, true, Killed),
        (TimedOut, false, true, true, true, Killed),
        (Killed, false, true, false, false, Killed),
        (Lost, false, true, false, true, Lost),
        (Misfired, true, false, false, false, Misfired),
        (Skipped, false, false, false, false, Skipped),
    ];
    for (state, initial, result, early, alarm, killed) in cases {
        assert_eq!(state.is_initial(), initial, "{state}");
        assert_eq!(RunState::INITIAL.contains(&state), initial, "{state}");
        assert_eq!(state.is_result(), result, "{state}");
        assert_eq!(RunState::RESULTS.contains(&state), result, "{state}");
        assert_eq!(RunState::EARLY_RESULTS.contains(&state), early, "{state}");
        // An early result is one a callback's handle code means, and one that leaves
        // `sending`; `lost` leaves it too, for a maybe-sent run nobody could answer for.
        assert_eq!(
            early || state == Lost,
            RunMove::Complete(state).applies_to(Sending),
            "{state}"
        );
        assert_eq!(
            early,
            RunState::from_handle_code(state.handle_code()) == Some(state),
            "{state}"
        );
        assert_eq!(state.calls_for_alarm(), alarm, "{state}");
        assert!(!alarm || state.is_final(), "{state}");
        assert_eq!(state.with_kill_intent(), killed, "{state}");
    }
}

#[test]
fn operation_names() {
    let names: Vec<String> = RunMove::ALL.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "send",
            "unsend",
            "dispatch",
            "trigger fail",
            "complete succeeded",
            "complete failed",
            "complete timed_out",
            "complete killed",
            "complete lost",
            "misfire",
            "skip",
            "catch up",
            "adopt",
            "adopt sending",
            "kill intent",
        ]
    );
}

#[test]
fn names_are_lowercase_and_round_trip() {
    let cases = [
        (Planned, "planned"),
        (Sending, "sending"),
        (Dispatched, "dispatched"),
        (Succeeded, "succeeded"),
        (Failed, "failed"),
        (TimedOut, "timed_out"),
        (Killed, "killed"),
        (Lost, "lost"),
        (Misfired, "misfired"),
        (Skipped, "skipped"),
    ];
    for (state, name) in cases {
        assert_eq!(state.as_str(), name);
        assert_eq!(state.to_string(), name);
        assert_eq!(name.parse::<RunState>().unwrap(), state);
        assert_eq!(
            serde_json::to_string(&state).unwrap(),
            format!("\"{name}\"")
        );
        assert_eq!(
            serde_json::from_str::<RunState>(&format!("\"{name}\"")).unwrap(),
            state
        );
    }
    let err = "running".parse::<RunState>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "run state: \"running\" is not one of planned sending dispatched succeeded failed timed_out \
         killed lost misfired skipped"
    );
}

#[test]
fn from_handle_code() {
    let cases = [
        (200, Some(Succeeded)),
        (502, Some(TimedOut)),
        (500, Some(Failed)),
        (1, Some(Failed)),
        (404, Some(Failed)),
        (i32::MAX, Some(Failed)),
        (0, None),
        (-1, None),
        (i32::MIN, None),
    ];
    for (code, state) in cases {
        assert_eq!(RunState::from_handle_code(code), state, "{code}");
    }
}

#[test]
fn handle_code_view() {
    let cases = [
        (Planned, 0),
        (Dispatched, 0),
        (Succeeded, HANDLE_CODE_SUCCESS),
        (Failed, HANDLE_CODE_FAIL),
        (TimedOut, HANDLE_CODE_TIMEOUT),
        (Killed, HANDLE_CODE_FAIL),
        (Lost, HANDLE_CODE_FAIL),
        (Misfired, 0),
        (Skipped, 0),
    ];
    for (state, code) in cases {
        assert_eq!(state.handle_code(), code, "{state}");
    }
    // The view and the callback reading agree for states that come from a handle code.
    for state in [Succeeded, Failed, TimedOut] {
        assert_eq!(RunState::from_handle_code(state.handle_code()), Some(state));
    }
}
