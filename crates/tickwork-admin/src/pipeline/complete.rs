//! Completion: a run's result and what follows it (child jobs on success, a retry on failure,
//! the next fire of a fixed-delay job) are written in one transaction by the store, which asks
//! this node's follow-up planner; the follow-up runs are then armed here. A crash after the
//! commit loses nothing: the follow-ups are `planned` runs of this node, re-armed at restart
//! or adopted by another node.

use std::sync::atomic::Ordering;

use tickwork_core::TriggerType;
use tickwork_core::follow_up::{self, EndedRun, JobRules};
use tickwork_core::schedule::Schedule;
use tickwork_store::{
    CompleteDispatched, Dispatched, Ended, FollowUpPlan, Job, JobStatus, MarkDispatched, Run,
    RunComplete, RunNew,
};
use tracing::{debug, warn};

use super::Scheduler;
use super::clock::Clock;
use super::planner::WAITING_FOR_COMPLETION;
use crate::Error;

impl Scheduler {
    /// Records a run's result (callback, kill, lost-run monitor) with what follows it. `None`
    /// when the run was unknown or already final: a repeated callback changes nothing.
    pub(crate) async fn complete(&self, c: RunComplete) -> Result<Option<Run>, Error> {
        let ended = self
            .inner
            .store
            .run_complete(c, &self.follow_up_planner())
            .await?;
        let run = ended.runs.first().cloned();
        self.completed(ended);
        Ok(run)
    }

    /// Records many results, and what follows them, in one transaction; returns the ids of the
    /// runs that reached their final state now.
    ///
    /// The dispatch records of these runs go in the same write: `taken`, those their callbacks
    /// took when they came, and those still held (see `dispatch_records`). A failed write puts
    /// them all back.
    pub(crate) async fn complete_many(
        &self,
        batch: &[RunComplete],
        taken: Vec<Dispatched>,
    ) -> Result<Vec<i64>, Error> {
        let records = &self.inner.dispatch_records;
        let mut runs = taken;
        runs.extend(records.take_for(batch.iter().map(|c| c.run_id)));
        let dispatched = MarkDispatched {
            node_id: self.inner.config.node_id.clone(),
            runs,
        };
        let both = CompleteDispatched {
            results: batch,
            dispatched: &dispatched,
        };
        let ended = match self
            .inner
            .store
            .runs_complete_dispatched(both, &self.follow_up_planner())
            .await
        {
            Ok(ended) => ended,
            Err(e) => {
                records.put_back(dispatched.runs, std::time::Instant::now());
                return Err(e.into());
            }
        };
        // Ended without an executor: the result came before the record (see
        // `dispatch_records`), which is written as soon as it comes. Without a hold every
        // record is.
        if !self.inner.config.dispatch.record_hold.is_zero() {
            let node = self.inner.config.node_id.as_str();
            let ended_first = ended
                .runs
                .iter()
                .filter(|r| r.executor_address.is_none() && r.owner_node.as_deref() == Some(node));
            let came = records.ended_first(ended_first.map(|r| r.id), std::time::Instant::now());
            self.write_dispatch_records_now(came).await;
        }
        let with_result = dispatched.runs.len() as u64;
        let stats = &self.inner.stats;
        stats.dispatched.fetch_add(with_result, Ordering::Relaxed);
        stats
            .dispatched_with_result
            .fetch_add(with_result, Ordering::Relaxed);
        let ids = ended.runs.iter().map(|r| r.id).collect();
        self.completed(ended);
        Ok(ids)
    }

    /// Writes at once the records of runs whose result came first; a failed write leaves them
    /// held, for the ledger to write when their hold ends.
    async fn write_dispatch_records_now(&self, runs: Vec<Dispatched>) {
        if runs.is_empty() {
            return;
        }
        let n = runs.len() as u64;
        let batch = MarkDispatched {
            node_id: self.inner.config.node_id.clone(),
            runs,
        };
        match self.inner.store.runs_mark_dispatched(batch.clone()).await {
            Ok(_) => {
                self.inner.stats.dispatched.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                warn!(runs = n, error = %e, "dispatch records not written; held");
                self.inner
                    .dispatch_records
                    .put_back(batch.runs, std::time::Instant::now());
            }
        }
    }

    fn completed(&self, ended: Ended) {
        if ended.runs.is_empty() {
            return;
        }
        crash_point_after_complete();
        self.inner
            .stats
            .completed
            .fetch_add(ended.runs.len() as u64, Ordering::Relaxed);
        self.follow(ended);
    }

    /// This node's follow-up planner, for the store operations that end runs.
    pub(super) fn follow_up_planner(&self) -> impl Fn(&Run, &Job) -> FollowUpPlan + Send + Sync {
        move |run: &Run, job: &Job| {
            // The cache only lends its parsed schedule: the row given is the one to decide on.
            let cached = self.cache_job(job);
            plan_follow_ups(
                run,
                job,
                cached.schedule.as_ref(),
                &self.inner.config.node_id,
                &self.inner.clock,
            )
        }
    }

    /// Arms the follow-up runs written with the runs' end, and lets the claim loop see the
    /// jobs whose next fire moved.
    pub(super) fn follow(&self, ended: Ended) {
        for run in &ended.follow_ups {
            let counter = match run.trigger_type {
                TriggerType::Retry => &self.inner.stats.retries,
                _ => &self.inner.stats.children,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            debug!(
                run_id = run.id,
                job_id = run.job_id,
                parent = run.parent_run_id,
                trigger = run.trigger_type.as_str(),
                scheduled_at = run.scheduled_at,
                "follow-up run planned"
            );
        }
        self.arm_all(ended.follow_ups, 0);
        let node_runs = super::workflows::node_run_ids(&ended.runs);
        if !node_runs.is_empty() {
            // The loop stops with the pipeline; a step lost then is the sweep's.
            let _ = self.inner.workflow_ends.send(node_runs);
        }
        for &job_id in &ended.advanced_jobs {
            self.forget_job(job_id);
        }
        if !ended.advanced_jobs.is_empty() {
            self.wake_scheduler();
        }
    }
}

/// The follow-ups of `run`, which just ended, as runs of `node` to write: a retry after its
/// backoff, the children's runs now, a waiting fixed-delay job's next fire a delay after the
/// end (none when its schedule no longer parses). A run without its end instant ended now, on
/// `clock`.
pub(crate) fn plan_follow_ups(
    run: &Run,
    job: &Job,
    schedule: Option<&Schedule>,
    node: &str,
    clock: &Clock,
) -> FollowUpPlan {
    let at = run.finished_at.unwrap_or_else(|| clock.now_ms());
    let spec = &job.spec;
    let decided = follow_up::follow_ups(
        &EndedRun {
            job_id: run.job_id,
            state: run.state,
            attempt: run.attempt,
            trigger_type: run.trigger_type,
            at,
        },
        &JobRules {
            schedule_type: spec.schedule_type,
            retry_count: spec.retry_count,
            retry_backoff_ms: spec.retry_backoff_ms,
            child_job_ids: &spec.child_job_ids,
            waits_for_a_run: job.status == JobStatus::Running
                && job.next_fire_at == Some(WAITING_FOR_COMPLETION),
        },
    );
    let mut runs = Vec::with_capacity(decided.children.len() + 1);
    if let Some(retry_at) = decided.retry_at {
        runs.push(RunNew {
            scheduled_at: retry_at,
            attempt: run.attempt + 1,
            parent_run_id: Some(run.id),
            params: Some(run.params.clone()),
            // A broadcast shard is retried on its own executor.
            executor_address: run.shard_total.and(run.executor_address.clone()),
            // A workflow node's timeout holds for its retries.
            timeout_s: run.timeout_s,
            shard_index: run.shard_index,
            shard_total: run.shard_total,
            owner_node: Some(node.to_owned()),
            ..RunNew::new(run.job_id, TriggerType::Retry, at)
        });
    }
    for child in decided.children {
        runs.push(RunNew {
            parent_run_id: Some(run.id),
            owner_node: Some(node.to_owned()),
            ..RunNew::new(child, TriggerType::Parent, at)
        });
    }
    let next_fire_at = if decided.next_fire {
        schedule.and_then(|s| s.next_after(at))
    } else {
        None
    };
    FollowUpPlan { runs, next_fire_at }
}

/// A test-only crash point (debug builds): with `TICKWORK_TEST_CRASH_AFTER_COMPLETE` set, the
/// process aborts right after results are committed, before their follow-ups are armed.
fn crash_point_after_complete() {
    #[cfg(debug_assertions)]
    if std::env::var_os("TICKWORK_TEST_CRASH_AFTER_COMPLETE").is_some() {
        tracing::error!("test crash point: aborting right after a completion commit");
        std::process::abort();
    }
}

/// Ends `lost` (built with [`RunComplete::lost`]) as [`Scheduler::complete_many`] does and
/// counts them in `runs_lost`; how many ended now. A function rather than a method: the
/// scheduler keeps to 40 methods.
pub(crate) async fn end_lost(scheduler: &Scheduler, lost: &[RunComplete]) -> Result<usize, Error> {
    if lost.is_empty() {
        return Ok(0);
    }
    let n = scheduler.complete_many(lost, Vec::new()).await?.len();
    scheduler
        .inner
        .stats
        .runs_lost
        .fetch_add(n as u64, Ordering::Relaxed);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork_core::ScheduleType;
    use tickwork_core::run::RunState;
    use tickwork_store::JobSpec;

    fn job(kind: ScheduleType, next: Option<i64>) -> Job {
        let mut spec = JobSpec::new(1, "h");
        spec.schedule_type = kind;
        spec.schedule_conf = "2s".to_owned();
        spec.retry_count = 1;
        spec.retry_backoff_ms = 500;
        spec.child_job_ids = vec![8];
        Job {
            id: 7,
            key: "k".into(),
            spec,
            status: JobStatus::Running,
            next_fire_at: next,
            last_fire_at: None,
            fires_left: None,
            glue_updated_at: 0,
            version: 1,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn run(state: RunState, trigger_type: TriggerType) -> Run {
        Run {
            id: 40,
            job_id: 7,
            group_id: 1,
            scheduled_at: 900,
            fire_key: None,
            trigger_type,
            attempt: 0,
            parent_run_id: None,
            executor_address: Some("http://e:1".into()),
            handler: "h".into(),
            params: "p".into(),
            shard_index: Some(1),
            shard_total: Some(3),
            state,
            trigger_code: 200,
            trigger_msg: None,
            handle_code: 500,
            handle_msg: None,
            alarm_status: tickwork_store::AlarmStatus::Undecided,
            owner_node: Some("a".into()),
            priority: 0,
            created_at: 900,
            dispatched_at: Some(900),
            finished_at: Some(1_000),
            timeout_s: None,
        }
    }

    #[test]
    fn a_failed_shard_is_retried_on_its_executor_after_the_backoff() {
        let plan = plan_follow_ups(
            &run(RunState::Failed, TriggerType::Cron),
            &job(ScheduleType::Cron, Some(5_000)),
            None,
            "node-b",
            &Clock::system(),
        );
        let [retry] = &plan.runs[..] else {
            panic!("{plan:?}")
        };
        assert_eq!(
            (retry.trigger_type, retry.scheduled_at, retry.attempt),
            (TriggerType::Retry, 1_500, 1)
        );
        assert_eq!(
            (retry.parent_run_id, retry.owner_node.as_deref()),
            (Some(40), Some("node-b"))
        );
        assert_eq!(
            (
                retry.executor_address.as_deref(),
                retry.shard_index,
                retry.shard_total,
                retry.params.as_deref()
            ),
            (Some("http://e:1"), Some(1), Some(3), Some("p"))
        );
        assert_eq!(plan.next_fire_at, None);
    }

    #[test]
    fn a_waiting_fixed_delay_job_fires_a_delay_after_the_end() {
        let kind = ScheduleType::FixDelay;
        let schedule = Schedule::parse(kind, "2s", "UTC").unwrap();
        let waiting = job(kind, Some(WAITING_FOR_COMPLETION));
        let plan = plan_follow_ups(
            &run(RunState::Misfired, TriggerType::FixDelay),
            &waiting,
            Some(&schedule),
            "n",
            &Clock::system(),
        );
        assert!(plan.runs.is_empty());
        assert_eq!(plan.next_fire_at, Some(3_000));
        let plan = plan_follow_ups(
            &run(RunState::Succeeded, TriggerType::FixDelay),
            &waiting,
            Some(&schedule),
            "n",
            &Clock::system(),
        );
        assert_eq!(plan.runs.len(), 1, "its child");
        assert_eq!(plan.runs[0].trigger_type, TriggerType::Parent);
        assert_eq!(plan.next_fire_at, Some(3_000));
        // Moved on already, or a schedule that no longer parses: left alone.
        let moved = job(kind, Some(9_000));
        let plan = plan_follow_ups(
            &run(RunState::Succeeded, TriggerType::FixDelay),
            &moved,
            Some(&schedule),
            "n",
            &Clock::system(),
        );
        assert_eq!(plan.next_fire_at, None);
        let plan = plan_follow_ups(
            &run(RunState::Succeeded, TriggerType::FixDelay),
            &waiting,
            None,
            "n",
            &Clock::system(),
        );
        assert_eq!(plan.next_fire_at, None);
    }
}
