//! The misfire decision over on-time, late, mixed and empty sets of fires.

use tickwork_core::misfire::{
    DEFAULT_THRESHOLD_MS, FireDecision, MisfirePlan, PlannedFire, is_late, plan,
};
use tickwork_core::run::RunState;
use tickwork_core::{MisfireStrategy, TriggerType};

const NOW: i64 = 1_700_000_100_000;
const TH: i64 = DEFAULT_THRESHOLD_MS;

/// A compact spelling of a decision for tables: 'o' on time, 'm' misfired, 'c' catch-up.
fn code(d: FireDecision) -> char {
    match d {
        FireDecision::OnTime => 'o',
        FireDecision::Misfired => 'm',
        FireDecision::CatchUp { fire_at } => {
            assert_eq!(fire_at, NOW, "a catch-up fires now");
            'c'
        }
    }
}

#[test]
fn lateness_boundary() {
    // (scheduled_at, threshold, late?)
    let cases = [
        (NOW, TH, false),
        (NOW + 1_000, TH, false),
        (NOW - TH, TH, false), // exactly at the threshold: still on time
        (NOW - TH - 1, TH, true),
        (NOW - 1, 0, true),
        (NOW, 0, false),
        (NOW - 1, -50, true), // a negative threshold counts as zero
        (i64::MIN, TH, true),
        (NOW, i64::MAX, false),
    ];
    for (at, threshold, late) in cases {
        assert_eq!(is_late(at, NOW, threshold), late, "{at} / {threshold}");
    }
    assert!(
        !is_late(i64::MIN, i64::MIN, TH),
        "no overflow at the bottom"
    );
}

#[test]
fn plans_by_policy() {
    let late1 = NOW - 60_000;
    let late2 = NOW - 30_000;
    let late3 = NOW - TH - 1;
    let due = NOW - 100;
    let ahead = NOW + 2_000;
    // (policy, input, expected decision codes in input order)
    let cases: &[(MisfireStrategy, &[i64], &str)] = &[
        (MisfireStrategy::DoNothing, &[], ""),
        (MisfireStrategy::FireOnceNow, &[], ""),
        (MisfireStrategy::DoNothing, &[due, ahead], "oo"),
        (MisfireStrategy::FireOnceNow, &[due, ahead], "oo"),
        (MisfireStrategy::DoNothing, &[late1], "m"),
        (MisfireStrategy::FireOnceNow, &[late1], "c"),
        (MisfireStrategy::DoNothing, &[late1, late2, late3], "mmm"),
        // The latest late fire stands for the group.
        (MisfireStrategy::FireOnceNow, &[late1, late2, late3], "mmc"),
        (MisfireStrategy::FireOnceNow, &[late3, late1, late2], "cmm"),
        (
            MisfireStrategy::DoNothing,
            &[late1, late2, due, ahead],
            "mmoo",
        ),
        (
            MisfireStrategy::FireOnceNow,
            &[late1, late2, due, ahead],
            "mcoo",
        ),
        (
            MisfireStrategy::FireOnceNow,
            &[ahead, late2, due, late1],
            "ocom",
        ),
        // Duplicated instants still give exactly one catch-up.
        (MisfireStrategy::FireOnceNow, &[late2, late2], "cm"),
    ];
    for &(policy, input, expected) in cases {
        let got = plan(policy, input, NOW, TH);
        let codes: String = got.fires.iter().map(|f| code(f.decision)).collect();
        assert_eq!(codes, expected, "{policy} {input:?}");
        // Every input instant appears exactly once, in order.
        let instants: Vec<i64> = got.fires.iter().map(|f| f.scheduled_at).collect();
        assert_eq!(instants, input, "{policy}");
        assert!(got.fires.iter().filter(|f| code(f.decision) == 'c').count() <= 1);
    }
}

#[test]
fn plan_accessors() {
    let late = NOW - 60_000;
    let due = NOW - 10;
    let got = plan(
        MisfireStrategy::FireOnceNow,
        &[late - 1, late, due],
        NOW,
        TH,
    );
    assert_eq!(
        got,
        MisfirePlan {
            fires: vec![
                PlannedFire {
                    scheduled_at: late - 1,
                    decision: FireDecision::Misfired
                },
                PlannedFire {
                    scheduled_at: late,
                    decision: FireDecision::CatchUp { fire_at: NOW }
                },
                PlannedFire {
                    scheduled_at: due,
                    decision: FireDecision::OnTime
                },
            ]
        }
    );
    assert_eq!(got.run_count(), 2);
    assert_eq!(got.misfired_count(), 1);
    assert_eq!(got.catch_up().map(|f| f.scheduled_at), Some(late));

    // (fire, fire_at, trigger type for a cron job, run row state)
    let expected = [
        (None, None, RunState::Misfired),
        (Some(NOW), Some(TriggerType::Misfire), RunState::Planned),
        (Some(due), Some(TriggerType::Cron), RunState::Planned),
    ];
    for (fire, (at, trigger, state)) in got.fires.iter().zip(expected) {
        assert_eq!(fire.fire_at(), at);
        assert_eq!(fire.trigger_type(TriggerType::Cron), trigger);
        assert_eq!(fire.state(), state);
    }
}

#[test]
fn do_nothing_never_runs_a_late_fire() {
    let input: Vec<i64> = (0..100).map(|i| NOW - 100_000 + i * 1_000).collect();
    let got = plan(MisfireStrategy::DoNothing, &input, NOW, TH);
    // Fires at NOW-5000 .. NOW-1000 are within the threshold: 5 of them; 95 are late.
    assert_eq!(got.misfired_count(), 95);
    assert_eq!(got.run_count(), 5);
    assert!(got.catch_up().is_none());
}

#[test]
fn fire_once_now_runs_one_catch_up_for_any_backlog() {
    let input: Vec<i64> = (0..10_000).map(|i| NOW - 20_000_000 + i * 1_000).collect();
    let got = plan(MisfireStrategy::FireOnceNow, &input, NOW, TH);
    assert_eq!(got.fires.len(), input.len());
    assert_eq!(got.run_count(), 1);
    assert_eq!(got.misfired_count(), 9_999);
    assert_eq!(
        got.catch_up().unwrap().scheduled_at,
        NOW - 20_000_000 + 9_999 * 1_000
    );
}
