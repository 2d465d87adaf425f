//! What follows a run's end, as tables: retry delays, and retries, children and the next
//! fire of a job waiting for its run (fixed delay, cron after end) for every kind of end.

use tickwork_core::follow_up::{
    EndedRun, FollowUps, JobRules, can_follow, follow_ups, retry_delay_ms,
};
use tickwork_core::run::RunState::{self, *};
use tickwork_core::{ScheduleType, TriggerType};

#[test]
fn retry_delay_doubles_per_attempt_and_is_capped() {
    // (backoff, attempt, delay)
    let table: &[(i64, i32, i64)] = &[
        (0, 0, 0),
        (1000, 0, 1000),
        (1000, 1, 2000),
        (1000, 3, 8000),
        (1000, 40, 3_600_000),
        (i64::MAX, 2, 3_600_000),
        (-5, 2, 0),
        (1000, -1, 1000),
    ];
    for &(backoff, attempt, delay) in table {
        assert_eq!(
            retry_delay_ms(backoff, attempt),
            delay,
            "backoff {backoff} attempt {attempt}"
        );
    }
}

const AT: i64 = 1_000_000;
const JOB: i64 = 7;

fn ended(state: RunState, attempt: i32, trigger_type: TriggerType) -> EndedRun {
    EndedRun {
        job_id: JOB,
        state,
        attempt,
        trigger_type,
        at: AT,
    }
}

fn rules(schedule_type: ScheduleType, waits: bool) -> JobRules<'static> {
    JobRules {
        schedule_type,
        retry_count: 2,
        retry_backoff_ms: 500,
        child_job_ids: &[3, JOB, 4, 3],
        waits_for_a_run: waits,
    }
}

fn expect(retry_at: Option<i64>, children: &[i64], next_fire: bool) -> FollowUps {
    FollowUps {
        retry_at,
        children: children.to_vec(),
        next_fire,
    }
}

#[test]
fn every_end_of_a_cron_run() {
    use TriggerType::{Cron, Manual, Retry};
    let cron = rules(ScheduleType::Cron, false);
    // (state, attempt, trigger, follow-ups)
    let table: &[(RunState, i32, TriggerType, FollowUps)] = &[
        // Children once each, never the job itself.
        (Succeeded, 0, Cron, expect(None, &[3, 4], false)),
        (Succeeded, 2, Retry, expect(None, &[3, 4], false)),
        // Retries while attempts remain, the backoff doubling.
        (Failed, 0, Cron, expect(Some(AT + 500), &[], false)),
        (TimedOut, 1, Retry, expect(Some(AT + 1000), &[], false)),
        (Lost, 0, Manual, expect(Some(AT + 500), &[], false)),
        (Failed, 2, Retry, expect(None, &[], false)),
        // A kill was meant; runs that never ran have nothing to follow.
        (Killed, 0, Cron, expect(None, &[], false)),
        (Misfired, 0, Cron, expect(None, &[], false)),
        (Skipped, 0, Cron, expect(None, &[], false)),
        // Not ended yet.
        (Dispatched, 0, Cron, expect(None, &[], false)),
    ];
    for (state, attempt, trigger, want) in table {
        assert_eq!(
            &follow_ups(&ended(*state, *attempt, *trigger), &cron),
            want,
            "{state} attempt {attempt} {trigger}"
        );
    }
}

#[test]
fn a_fixed_delay_job_moves_on_when_its_own_fire_ends() {
    use TriggerType::{FixDelay, Manual, Misfire, Parent, Retry};
    // (state, trigger, job waits, schedule moves on)
    let table: &[(RunState, TriggerType, bool, bool)] = &[
        (Succeeded, FixDelay, true, true),
        (Failed, FixDelay, true, true),
        (Killed, FixDelay, true, true),
        (Lost, FixDelay, true, true),
        // The stall: a fire misfired at a takeover must move the job on too.
        (Misfired, FixDelay, true, true),
        (Skipped, FixDelay, true, true),
        // The catch-up of late fires is the job's own fire.
        (Succeeded, Misfire, true, true),
        // Runs outside the schedule never move it.
        (Succeeded, Manual, true, false),
        (Failed, Retry, true, false),
        (Succeeded, Parent, true, false),
        // A job that does not wait (stopped, edited, or already moved on) stays as it is.
        (Succeeded, FixDelay, false, false),
        (Misfired, FixDelay, false, false),
        (Dispatched, FixDelay, true, false),
    ];
    for &(state, trigger, waits, moves) in table {
        let got = follow_ups(
            &ended(state, 0, trigger),
            &rules(ScheduleType::FixDelay, waits),
        );
        assert_eq!(got.next_fire, moves, "{state} {trigger} waits {waits}");
    }
    // Only a fixed-delay or cron-after-end job waits for its runs.
    for kind in [
        ScheduleType::Cron,
        ScheduleType::FixRate,
        ScheduleType::Once,
    ] {
        let got = follow_ups(&ended(Succeeded, 0, FixDelay), &rules(kind, true));
        assert!(!got.next_fire, "{kind}");
    }
}

#[test]
fn a_cron_after_end_job_moves_on_when_its_own_fire_ends() {
    use TriggerType::{Api, Cron, FixDelay, Manual, Misfire, Retry};
    // (state, trigger, job waits, schedule moves on)
    let table: &[(RunState, TriggerType, bool, bool)] = &[
        // Its runs carry the cron trigger.
        (Succeeded, Cron, true, true),
        (Failed, Cron, true, true),
        (TimedOut, Cron, true, true),
        (Misfired, Cron, true, true),
        (Succeeded, Misfire, true, true),
        (Succeeded, Manual, true, false),
        (Succeeded, Api, true, false),
        (Failed, Retry, true, false),
        // Another schedule's trigger is not its own fire.
        (Succeeded, FixDelay, true, false),
        (Succeeded, Cron, false, false),
        (Dispatched, Cron, true, false),
    ];
    for &(state, trigger, waits, moves) in table {
        let got = follow_ups(
            &ended(state, 0, trigger),
            &rules(ScheduleType::CronAfterEnd, waits),
        );
        assert_eq!(got.next_fire, moves, "{state} {trigger} waits {waits}");
    }
}

/// A store skips reading the jobs `can_follow` rules out: for those, no end of any run, with
/// the job waiting for it or not, has a follow-up; and each rule it lets through has one.
#[test]
fn a_job_that_cannot_follow_has_no_follow_ups_for_any_run() {
    let children: &[i64] = &[JOB + 1];
    let mut kinds_with_follow_ups = [false; 3];
    for &schedule_type in ScheduleType::ALL {
        for retry_count in [0, 2] {
            for child_job_ids in [&[][..], children] {
                let can = can_follow(schedule_type, retry_count, !child_job_ids.is_empty());
                for waits_for_a_run in [false, true] {
                    let job = JobRules {
                        schedule_type,
                        retry_count,
                        retry_backoff_ms: 1000,
                        child_job_ids,
                        waits_for_a_run,
                    };
                    for &state in RunState::ALL.iter().filter(|s| s.is_final()) {
                        for &trigger_type in TriggerType::ALL {
                            for attempt in [0, 1, 5] {
                                let run = ended(state, attempt, trigger_type);
                                let got = follow_ups(&run, &job);
                                if !can {
                                    assert_eq!(got, FollowUps::default(), "{job:?} {run:?}");
                                }
                                kinds_with_follow_ups[0] |= got.retry_at.is_some();
                                kinds_with_follow_ups[1] |= !got.children.is_empty();
                                kinds_with_follow_ups[2] |= got.next_fire;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(kinds_with_follow_ups, [true; 3]);
    let table = [
        (ScheduleType::Cron, 0, false, false),
        (ScheduleType::FixRate, 0, false, false),
        (ScheduleType::None, 0, false, false),
        (ScheduleType::Cron, 1, false, true),
        (ScheduleType::Cron, 0, true, true),
        (ScheduleType::FixDelay, 0, false, true),
        (ScheduleType::CronAfterEnd, 0, false, true),
    ];
    for (schedule_type, retries, has_children, want) in table {
        assert_eq!(
            can_follow(schedule_type, retries, has_children),
            want,
            "{schedule_type:?} {retries} {has_children}"
        );
    }
}
