//! The claim planner: for one claimed job, every fire of the look-ahead window, the misfire
//! decision for late ones, and where the job continues. Pure: the store calls it inside the
//! claim transaction.

use tickwork_core::schedule::Schedule;
use tickwork_core::{ScheduleType, misfire};
use tickwork_store::{Job, JobDue, JobPlan, PlannedFire};

/// `next_fire_at` of a job that waits for its run's end (fixed delay, cron after end) while
/// the run is under way: the completion sets the real one. The claim query never reaches it.
pub const WAITING_FOR_COMPLETION: i64 = i64::MAX;

/// Planning settings, from the scheduler configuration.
#[derive(Debug, Clone, Copy)]
pub struct PlanLimits {
    pub lookahead_ms: i64,
    pub misfire_threshold_ms: i64,
    pub max_fires_per_job: usize,
}

/// Plans one claimed job at `now`, its due columns being `due` (the definition's own may be
/// older). `schedule` is the job's parsed schedule (`None` when it no longer parses: the job
/// is stopped rather than fired wrongly).
pub fn plan_job(
    job: &Job,
    due: JobDue,
    schedule: Option<&Schedule>,
    now: i64,
    limits: PlanLimits,
) -> JobPlan {
    let (Some(schedule), Some(first)) = (schedule, due.next_fire_at) else {
        return JobPlan::default();
    };
    let kind = schedule.kind();
    let trigger = kind.trigger_type();
    // A job is due when its next fire is a look-ahead away, and its fires are planned for a
    // look-ahead past that fire: a job due every second is claimed, and its row written, once
    // for three or four fires instead of once a fire. A late job plans a look-ahead past now,
    // as its fires before now are the misfire policy's.
    let due_by = now.saturating_add(limits.lookahead_ms);
    let until = now.max(first).saturating_add(limits.lookahead_ms);

    // Every fire in [first, until], capped: the cap keeps a 10 ms job from writing a huge
    // batch; the rest comes next round.
    let mut fires = Vec::new();
    // A job with a number of fires left (a submission's repeat count) plans no more than
    // those, and stops after the last.
    let cap = match due.fires_left {
        Some(left) => usize::try_from(left.max(0))
            .unwrap_or(usize::MAX)
            .min(limits.max_fires_per_job),
        None => limits.max_fires_per_job,
    };
    if first <= due_by && cap > 0 {
        fires.push(first);
        if !kind.waits_for_end() && kind != ScheduleType::Once {
            fires.extend(schedule.fires_between(first, until, cap - 1));
        }
    }
    // Every fire planned counts, misfired ones too: a count is of the schedule's fires.
    let exhausted = due
        .fires_left
        .is_some_and(|left| left <= fires.len() as i64);
    let Some(&last) = fires.last() else {
        return JobPlan {
            fires: Vec::new(),
            next_fire_at: (!exhausted).then_some(first),
        };
    };

    let plan = misfire::plan(
        job.spec.misfire_strategy,
        &fires,
        now,
        limits.misfire_threshold_ms,
    );
    let planned: Vec<PlannedFire> = plan
        .fires
        .iter()
        .map(|f| PlannedFire::from_misfire(f, trigger))
        .collect();

    let next_fire_at = match kind {
        _ if exhausted => None,
        // The next fire counts from the completion of this one, unless it did not run.
        _ if kind.waits_for_end() => {
            if plan.run_count() > 0 {
                Some(WAITING_FOR_COMPLETION)
            } else {
                schedule.next_after(now)
            }
        }
        _ => schedule.next_after(last),
    };
    JobPlan {
        fires: planned,
        next_fire_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork_core::run::RunState;
    use tickwork_core::{MisfireStrategy, TriggerType};
    use tickwork_store::{JobSpec, JobStatus};

    fn job(kind: ScheduleType, conf: &str, next: i64, misfire: MisfireStrategy) -> (Job, Schedule) {
        let mut spec = JobSpec::new(1, "h");
        spec.schedule_type = kind;
        spec.schedule_conf = conf.to_owned();
        spec.misfire_strategy = misfire;
        let schedule = Schedule::parse(kind, conf, "UTC").unwrap();
        let job = Job {
            id: 7,
            key: "k".into(),
            spec,
            status: JobStatus::Running,
            next_fire_at: Some(next),
            last_fire_at: None,
            fires_left: None,
            glue_updated_at: 0,
            version: 1,
            created_at: 0,
            updated_at: 0,
        };
        (job, schedule)
    }

    const LIMITS: PlanLimits = PlanLimits {
        lookahead_ms: 3000,
        misfire_threshold_ms: 5000,
        max_fires_per_job: 1000,
    };

    #[test]
    fn fixed_rate_plans_every_fire_of_the_window() {
        let (j, s) = job(
            ScheduleType::FixRate,
            "500ms",
            10_000,
            MisfireStrategy::DoNothing,
        );
        let plan = plan_job(&j, j.due(), Some(&s), 10_000, LIMITS);
        let keys: Vec<i64> = plan.fires.iter().map(|f| f.fire_key).collect();
        assert_eq!(
            keys,
            [10_000, 10_500, 11_000, 11_500, 12_000, 12_500, 13_000]
        );
        assert!(plan.fires.iter().all(|f| f.state == RunState::Planned));
        assert_eq!(plan.next_fire_at, Some(13_500));
    }

    /// The claim plans a job with the definition its cache holds, whose due columns were
    /// written when it was cached: only the ones the claim read now count.
    #[test]
    fn a_job_is_planned_from_the_due_columns_read_now_not_its_cached_ones() {
        let (mut j, s) = job(
            ScheduleType::FixRate,
            "1s",
            5_000,
            MisfireStrategy::DoNothing,
        );
        let due = JobDue {
            next_fire_at: Some(10_000),
            last_fire_at: Some(9_000),
            fires_left: Some(2),
        };
        j.fires_left = None;
        let plan = plan_job(&j, due, Some(&s), 10_000, LIMITS);
        let keys: Vec<i64> = plan.fires.iter().map(|f| f.fire_key).collect();
        assert_eq!(keys, [10_000, 11_000], "from the due fire, two left");
        assert_eq!(plan.next_fire_at, None, "the last fire stops the job");
        let stale = JobDue {
            next_fire_at: None,
            ..due
        };
        assert_eq!(
            plan_job(&j, stale, Some(&s), 10_000, LIMITS),
            JobPlan::default()
        );
    }

    #[test]
    fn cap_limits_fires_and_continues_after_the_last() {
        let limits = PlanLimits {
            max_fires_per_job: 3,
            ..LIMITS
        };
        let (j, s) = job(
            ScheduleType::FixRate,
            "100ms",
            0,
            MisfireStrategy::DoNothing,
        );
        let plan = plan_job(&j, j.due(), Some(&s), 0, limits);
        assert_eq!(plan.fires.len(), 3);
        assert_eq!(plan.next_fire_at, Some(300));
    }

    #[test]
    fn late_fires_follow_the_misfire_policy() {
        let (j, s) = job(ScheduleType::FixRate, "1s", 0, MisfireStrategy::DoNothing);
        let plan = plan_job(&j, j.due(), Some(&s), 20_000, LIMITS);
        let misfired = plan
            .fires
            .iter()
            .filter(|f| f.state == RunState::Misfired)
            .count();
        // 0..=14_000 are older than now - 5 s; 15_000..=23_000 are on time.
        assert_eq!(misfired, 15);
        assert_eq!(plan.fires.len(), 24);

        let (j, s) = job(ScheduleType::FixRate, "1s", 0, MisfireStrategy::FireOnceNow);
        let plan = plan_job(&j, j.due(), Some(&s), 20_000, LIMITS);
        let catch_up: Vec<_> = plan
            .fires
            .iter()
            .filter(|f| f.trigger_type == TriggerType::Misfire)
            .collect();
        assert_eq!(catch_up.len(), 1);
        assert_eq!(catch_up[0].scheduled_at, 20_000);
        assert_eq!(catch_up[0].state, RunState::Planned);
    }

    #[test]
    fn fixed_delay_waits_for_completion() {
        let (j, s) = job(
            ScheduleType::FixDelay,
            "2s",
            1_000,
            MisfireStrategy::DoNothing,
        );
        let plan = plan_job(&j, j.due(), Some(&s), 1_000, LIMITS);
        assert_eq!(plan.fires.len(), 1);
        assert_eq!(plan.next_fire_at, Some(WAITING_FOR_COMPLETION));
    }

    #[test]
    fn cron_after_end_plans_one_fire_and_waits_for_completion() {
        // Every second: a cron job would plan the window's four fires.
        let (j, s) = job(
            ScheduleType::CronAfterEnd,
            "* * * * * ?",
            1_000,
            MisfireStrategy::DoNothing,
        );
        let plan = plan_job(&j, j.due(), Some(&s), 1_000, LIMITS);
        let keys: Vec<i64> = plan.fires.iter().map(|f| f.fire_key).collect();
        assert_eq!(keys, [1_000]);
        assert_eq!(plan.fires[0].trigger_type, TriggerType::Cron);
        assert_eq!(plan.next_fire_at, Some(WAITING_FOR_COMPLETION));
        // Too late to run: it does not wait, the next match comes after now.
        let plan = plan_job(&j, j.due(), Some(&s), 9_500, LIMITS);
        assert_eq!(plan.fires[0].state, RunState::Misfired);
        assert_eq!(plan.next_fire_at, Some(10_000));
    }

    #[test]
    fn once_fires_once_then_stops() {
        let (j, s) = job(
            ScheduleType::Once,
            "2026-01-01T00:00:00Z",
            1_767_225_600_000,
            MisfireStrategy::DoNothing,
        );
        let plan = plan_job(&j, j.due(), Some(&s), 1_767_225_599_000, LIMITS);
        assert_eq!(plan.fires.len(), 1);
        assert_eq!(plan.next_fire_at, None);
    }

    #[test]
    fn unparsable_schedule_stops_the_job() {
        let (j, _) = job(ScheduleType::FixRate, "1s", 0, MisfireStrategy::DoNothing);
        let plan = plan_job(&j, j.due(), None, 0, LIMITS);
        assert!(plan.fires.is_empty());
        assert_eq!(plan.next_fire_at, None);
    }

    /// A job claimed as its next fire comes into the look-ahead plans a look-ahead past that
    /// fire, so that it is claimed again only after several fires; a late one plans a
    /// look-ahead past now.
    #[test]
    fn a_job_plans_a_look_ahead_past_its_first_fire() {
        // (first fire, fire keys planned at 10,000 with a 3,000 ms look-ahead, next fire)
        let cases: [(i64, &[i64], Option<i64>); 5] = [
            (13_000, &[13_000, 14_000, 15_000, 16_000], Some(17_000)),
            (11_500, &[11_500, 12_500, 13_500, 14_500], Some(15_500)),
            (10_000, &[10_000, 11_000, 12_000, 13_000], Some(14_000)),
            (
                8_000,
                &[8_000, 9_000, 10_000, 11_000, 12_000, 13_000],
                Some(14_000),
            ),
            (13_001, &[], Some(13_001)),
        ];
        for (first, keys, next) in cases {
            let (j, s) = job(
                ScheduleType::FixRate,
                "1s",
                first,
                MisfireStrategy::DoNothing,
            );
            let plan = plan_job(&j, j.due(), Some(&s), 10_000, LIMITS);
            let got: Vec<i64> = plan.fires.iter().map(|f| f.fire_key).collect();
            assert_eq!(got, keys, "first fire {first}");
            assert_eq!(plan.next_fire_at, next, "first fire {first}");
        }
    }

    #[test]
    fn a_job_not_yet_due_is_left_as_is() {
        let (j, s) = job(
            ScheduleType::FixRate,
            "1s",
            100_000,
            MisfireStrategy::DoNothing,
        );
        let plan = plan_job(&j, j.due(), Some(&s), 0, LIMITS);
        assert!(plan.fires.is_empty());
        assert_eq!(plan.next_fire_at, Some(100_000));
    }

    #[test]
    fn a_job_with_fires_left_plans_no_more_and_stops_after_the_last() {
        // (kind, conf, fires left, fire keys planned, next fire)
        type Case<'a> = (ScheduleType, &'a str, i64, &'a [i64], Option<i64>);
        let cases: [Case; 6] = [
            (
                ScheduleType::FixRate,
                "500ms",
                3,
                &[10_000, 10_500, 11_000],
                None,
            ),
            (
                ScheduleType::FixRate,
                "500ms",
                10,
                &[10_000, 10_500, 11_000, 11_500, 12_000, 12_500, 13_000],
                Some(13_500),
            ),
            (ScheduleType::FixRate, "500ms", 0, &[], None),
            (ScheduleType::FixDelay, "500ms", 1, &[10_000], None),
            (
                ScheduleType::FixDelay,
                "500ms",
                2,
                &[10_000],
                Some(WAITING_FOR_COMPLETION),
            ),
            (
                ScheduleType::Once,
                "1970-01-01T00:00:10Z",
                1,
                &[10_000],
                None,
            ),
        ];
        for (kind, conf, left, keys, next) in cases {
            let (mut j, s) = job(kind, conf, 10_000, MisfireStrategy::DoNothing);
            j.fires_left = Some(left);
            let plan = plan_job(&j, j.due(), Some(&s), 10_000, LIMITS);
            let got: Vec<i64> = plan.fires.iter().map(|f| f.fire_key).collect();
            assert_eq!(got, keys, "{kind:?} with {left} left");
            assert_eq!(plan.next_fire_at, next, "{kind:?} with {left} left");
        }
    }
}
