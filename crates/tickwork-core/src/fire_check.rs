//! The ledger's check of scheduled fires: each fire judged once as on time, late, missed or
//! doubled, and the judgements of a window summed into alerts, one per job and kind.
//!
//! A fire is a run with a ledger key (`fire_key`): manual, API, retry and parent runs are not
//! fires of a schedule and are never judged. The check walks the ledger in order of the
//! instant (`scheduled_at`) behind a cursor, so each fire is judged once whoever judges it:
//!
//! - **missed**: it did not reach an executor by its instant plus the tolerance: still
//!   `planned` then, `misfired`, refused at the trigger (`failed` with a trigger code that is
//!   neither 0 nor 200), or `lost` before any executor accepted it. A `sending` run is in
//!   flight (its dispatch record may lag under load): it is judged only once it settles, or as
//!   missed after the tolerance plus [`Tolerance::sending_grace_ms`].
//! - **late**: it reached an executor later than its job's lateness budget after its instant
//!   (a budget of 0 turns the check off for the job).
//! - **doubled**: two runs share one fire key. The database's unique key on (job, fire key)
//!   makes this impossible by design; the check is there for what design cannot rule out (a
//!   restored or hand-edited database).
//!
//! `skipped` runs were not run on purpose (a stop, a block policy) and are not alerts.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::Error;
use crate::run::RunState;

named_enum! {
    /// What went wrong with a scheduled fire.
    FireAlertKind, "fire alert kind" {
        /// It did not reach an executor by its instant plus the tolerance.
        Missed = "missed",
        /// It reached an executor later than its job's lateness budget.
        Late = "late",
        /// Two runs of one fire.
        Doubled = "doubled",
    }
}

/// The default lateness budget of a job: a fire sent more than a second after its instant is
/// late.
pub const DEFAULT_LATENESS_BUDGET_MS: i64 = 1_000;
/// The largest lateness budget a job may have: a day.
pub const MAX_LATENESS_BUDGET_MS: i64 = 86_400_000;

/// How long the check waits on a fire before judging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tolerance {
    /// A fire not at an executor this long after its instant is missed.
    pub missed_after_ms: i64,
    /// A `sending` run gets this much longer to settle: its call may have succeeded, with its
    /// record still on the way.
    pub sending_grace_ms: i64,
}

/// One fire as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireRecord {
    pub run_id: i64,
    pub job_id: i64,
    pub fire_key: i64,
    /// The fire's instant.
    pub scheduled_at: i64,
    pub state: RunState,
    pub trigger_code: i32,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// The job's lateness budget; 0 when the job has none (or is gone).
    pub lateness_budget_ms: i64,
}

/// Two or more runs holding one fire key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoubledFire {
    pub job_id: i64,
    pub fire_key: i64,
    pub scheduled_at: i64,
    /// How many runs hold it (2 or more).
    pub runs: i64,
    /// The newest of them.
    pub run_id: i64,
}

/// What the check says of one fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not settled yet: judged in a later round.
    Pending,
    /// On time, or not run on purpose.
    Fine,
    /// Reached an executor `late_ms` after its instant, past the job's budget.
    Late { late_ms: i64 },
    /// Never reached an executor in time.
    Missed,
}

/// Judges one fire at `now`.
pub fn judge(fire: &FireRecord, now: i64, tolerance: Tolerance) -> Verdict {
    let waited = now.saturating_sub(fire.scheduled_at);
    let never_accepted = fire.dispatched_at.is_none();
    match fire.state {
        RunState::Planned if waited >= tolerance.missed_after_ms => Verdict::Missed,
        RunState::Planned => Verdict::Pending,
        RunState::Sending
            if waited
                >= tolerance
                    .missed_after_ms
                    .saturating_add(tolerance.sending_grace_ms) =>
        {
            Verdict::Missed
        }
        RunState::Sending => Verdict::Pending,
        RunState::Misfired => Verdict::Missed,
        RunState::Skipped => Verdict::Fine,
        // Refused at the trigger: no executor accepted it (0 is a result that beat its
        // dispatch record, 200 an accepted call).
        RunState::Failed if never_accepted && !matches!(fire.trigger_code, 0 | 200) => {
            Verdict::Missed
        }
        // Lost while sending: nobody could say it was accepted.
        RunState::Lost if never_accepted => Verdict::Missed,
        _ => {
            // An early result lands before the dispatch record: the result's instant bounds
            // when the executor had the run.
            let reached = fire.dispatched_at.or(fire.finished_at);
            match reached {
                Some(at) if fire.lateness_budget_ms > 0 => {
                    let late_ms = at.saturating_sub(fire.scheduled_at);
                    if late_ms > fire.lateness_budget_ms {
                        Verdict::Late { late_ms }
                    } else {
                        Verdict::Fine
                    }
                }
                _ => Verdict::Fine,
            }
        }
    }
}

/// The alert of one job and kind over one checked window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireAlert {
    pub job_id: i64,
    pub kind: FireAlertKind,
    /// How many fires.
    pub fires: i64,
    /// The first and last of their instants.
    pub first_at: i64,
    pub last_at: i64,
    /// The latest of the late fires; 0 for the other kinds.
    pub worst_late_ms: i64,
    /// The run of the first fire (for doubled fires: the newest run of the first one).
    pub run_id: i64,
}

/// The outcome of checking a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Every fire at or before this instant is judged; the next window starts after it.
    pub until: i64,
    /// One alert per job and kind, by job then kind.
    pub alerts: Vec<FireAlert>,
}

/// Checks the fires of the window `(after, until]` at `now`. `fires` are the window's runs that
/// may be anything but on time (a superset is fine: on-time fires are judged fine), in order
/// of (`scheduled_at`, `run_id`); `doubled` the window's doubled fire keys. The window ends
/// before the first pending fire, so that it is judged, once, in a later round.
pub fn check(
    fires: &[FireRecord],
    doubled: &[DoubledFire],
    after: i64,
    until: i64,
    now: i64,
    tolerance: Tolerance,
) -> Checked {
    let mut end = until;
    let mut judged = Vec::new();
    for fire in fires {
        if fire.scheduled_at <= after || fire.scheduled_at > end {
            continue;
        }
        match judge(fire, now, tolerance) {
            Verdict::Pending => {
                end = end.min(fire.scheduled_at - 1);
                break;
            }
            Verdict::Fine => {}
            Verdict::Late { late_ms } => judged.push((fire, FireAlertKind::Late, late_ms)),
            Verdict::Missed => judged.push((fire, FireAlertKind::Missed, 0)),
        }
    }
    let end = end.max(after);
    let mut alerts: BTreeMap<(i64, FireAlertKind), FireAlert> = BTreeMap::new();
    let mut add = |job_id: i64, kind, at: i64, late_ms: i64, run_id: i64| {
        let alert = alerts.entry((job_id, kind)).or_insert(FireAlert {
            job_id,
            kind,
            fires: 0,
            first_at: at,
            last_at: at,
            worst_late_ms: 0,
            run_id,
        });
        alert.fires += 1;
        if at < alert.first_at {
            alert.first_at = at;
            alert.run_id = run_id;
        }
        alert.last_at = alert.last_at.max(at);
        alert.worst_late_ms = alert.worst_late_ms.max(late_ms);
    };
    for (fire, kind, late_ms) in judged {
        if fire.scheduled_at <= end {
            add(fire.job_id, kind, fire.scheduled_at, late_ms, fire.run_id);
        }
    }
    for d in doubled {
        if d.runs > 1 && d.scheduled_at > after && d.scheduled_at <= end {
            add(
                d.job_id,
                FireAlertKind::Doubled,
                d.scheduled_at,
                0,
                d.run_id,
            );
        }
    }
    Checked {
        until: end,
        alerts: alerts.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance {
        missed_after_ms: 10_000,
        sending_grace_ms: 60_000,
    };

    fn fire(run_id: i64, at: i64, state: RunState) -> FireRecord {
        FireRecord {
            run_id,
            job_id: 1,
            fire_key: at,
            scheduled_at: at,
            state,
            trigger_code: 0,
            dispatched_at: None,
            finished_at: None,
            lateness_budget_ms: 1_000,
        }
    }

    fn sent(mut f: FireRecord, at: i64) -> FireRecord {
        f.trigger_code = 200;
        f.dispatched_at = Some(at);
        f
    }

    #[test]
    fn verdicts_by_state_and_time() {
        use RunState::*;
        let at = 100_000;
        let failed_trigger = FireRecord {
            trigger_code: 500,
            finished_at: Some(at),
            ..fire(1, at, Failed)
        };
        let early_result = FireRecord {
            finished_at: Some(at + 5),
            ..fire(1, at, Succeeded)
        };
        let no_budget = FireRecord {
            lateness_budget_ms: 0,
            ..sent(fire(1, at, Succeeded), at + 50_000)
        };
        let cases: Vec<(&str, FireRecord, i64, Verdict)> = vec![
            (
                "planned, in tolerance",
                fire(1, at, Planned),
                at + 9_999,
                Verdict::Pending,
            ),
            (
                "planned past tolerance",
                fire(1, at, Planned),
                at + 10_000,
                Verdict::Missed,
            ),
            (
                "sending, in grace",
                fire(1, at, Sending),
                at + 69_999,
                Verdict::Pending,
            ),
            (
                "sending past grace",
                fire(1, at, Sending),
                at + 70_000,
                Verdict::Missed,
            ),
            (
                "misfired",
                fire(1, at, Misfired),
                at + 10_000,
                Verdict::Missed,
            ),
            (
                "skipped on purpose",
                fire(1, at, Skipped),
                at + 10_000,
                Verdict::Fine,
            ),
            (
                "refused at the trigger",
                failed_trigger,
                at + 10_000,
                Verdict::Missed,
            ),
            (
                "lost while sending",
                fire(1, at, Lost),
                at + 10_000,
                Verdict::Missed,
            ),
            (
                "lost after dispatch",
                sent(fire(1, at, Lost), at + 3),
                at + 10_000,
                Verdict::Fine,
            ),
            (
                "failed by its handler, on time",
                sent(fire(1, at, Failed), at + 3),
                at + 10_000,
                Verdict::Fine,
            ),
            (
                "on time, at the budget",
                sent(fire(1, at, Succeeded), at + 1_000),
                at + 10_000,
                Verdict::Fine,
            ),
            (
                "past the budget",
                sent(fire(1, at, Dispatched), at + 1_001),
                at + 10_000,
                Verdict::Late { late_ms: 1_001 },
            ),
            (
                "early result, on time",
                early_result,
                at + 10_000,
                Verdict::Fine,
            ),
            (
                "no budget: never late",
                no_budget,
                at + 90_000,
                Verdict::Fine,
            ),
        ];
        for (name, f, now, want) in cases {
            assert_eq!(judge(&f, now, TOL), want, "{name}");
        }
    }

    #[test]
    fn a_window_sums_per_job_and_kind_and_stops_before_a_pending_fire() {
        use RunState::*;
        let now = 1_000_000;
        let mut other = fire(9, 500_000, Misfired);
        other.job_id = 2;
        let fires = vec![
            fire(1, 400_000, Misfired),
            fire(2, 401_000, Planned),
            sent(fire(3, 402_000, Succeeded), 404_500),
            other,
            sent(fire(4, 600_000, Succeeded), 603_000),
            fire(5, 950_000, Sending), // pending: the window ends before it
            fire(6, 960_000, Misfired),
        ];
        let doubled = vec![DoubledFire {
            job_id: 1,
            fire_key: 700_000,
            scheduled_at: 700_000,
            runs: 2,
            run_id: 77,
        }];
        let checked = check(&fires, &doubled, 300_000, 990_000, now, TOL);
        assert_eq!(checked.until, 949_999);
        let summary: Vec<(i64, FireAlertKind, i64, i64, i64, i64, i64)> = checked
            .alerts
            .iter()
            .map(|a| {
                (
                    a.job_id,
                    a.kind,
                    a.fires,
                    a.first_at,
                    a.last_at,
                    a.worst_late_ms,
                    a.run_id,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (1, FireAlertKind::Missed, 2, 400_000, 401_000, 0, 1),
                (1, FireAlertKind::Late, 2, 402_000, 600_000, 3_000, 3),
                (1, FireAlertKind::Doubled, 1, 700_000, 700_000, 0, 77),
                (2, FireAlertKind::Missed, 1, 500_000, 500_000, 0, 9),
            ]
        );
        // The next window starts at the pending fire and judges it once it settled.
        let mut fires = fires;
        fires[5] = sent(fire(5, 950_000, Succeeded), 950_002);
        let next = check(&fires, &[], checked.until, 990_000, now, TOL);
        assert_eq!(next.until, 990_000);
        assert_eq!(next.alerts.len(), 1);
        assert_eq!((next.alerts[0].fires, next.alerts[0].run_id), (1, 6));
    }

    #[test]
    fn fires_outside_the_window_are_not_judged_again() {
        let fires = vec![
            fire(1, 100, RunState::Misfired),
            fire(2, 200, RunState::Misfired),
        ];
        let checked = check(&fires, &[], 100, 150_000, 200_000, TOL);
        assert_eq!(checked.alerts.len(), 1);
        assert_eq!(checked.alerts[0].run_id, 2);
        // An empty window stays where it is.
        let empty = check(&[], &[], 500, 400, 200_000, TOL);
        assert_eq!((empty.until, empty.alerts.len()), (500, 0));
    }
}
