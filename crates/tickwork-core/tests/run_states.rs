//! The run state machine: every pair of states, names, and the XXL-JOB code views.

use tickwork_core::run::{RunState, transition};
use tickwork_core::{Error, HANDLE_CODE_FAIL, HANDLE_CODE_SUCCESS, HANDLE_CODE_TIMEOUT};

use RunState::*;

/// The complete set of allowed moves (design §2); everything else must be refused.
const ALLOWED: &[(RunState, RunState)] = &[
    (Planned, Dispatched),
    (Planned, Misfired),
    (Planned, Skipped),
    (Planned, Failed),
    (Dispatched, Succeeded),
    (Dispatched, Failed),
    (Dispatched, TimedOut),
    (Dispatched, Killed),
    (Dispatched, Lost),
];

#[test]
fn every_pair_of_states() {
    assert_eq!(RunState::ALL.len(), 9);
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
        transition(Planned, Succeeded).unwrap_err().to_string(),
        "run: cannot move from planned to succeeded"
    );
}

#[test]
fn names_are_lowercase_and_round_trip() {
    let cases = [
        (Planned, "planned"),
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
        "run state: \"running\" is not one of planned dispatched succeeded failed timed_out \
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
