//! Completion: a run's result recorded, then what follows it (child jobs on success, a retry
//! on failure, the next fire of a fixed-delay job).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::{ScheduleType, TriggerType};
use tickwork_store::{JobNextFire, Run, RunComplete, RunNew};
use tracing::{debug, warn};

use super::Scheduler;
use super::planner::WAITING_FOR_COMPLETION;
use super::timer::now_ms;
use crate::Error;

impl Scheduler {
    /// Records a run's result (callback, kill, lost-run monitor). `None` when the run was
    /// unknown or already final: a repeated callback changes nothing.
    pub async fn complete(&self, c: RunComplete) -> Result<Option<Run>, Error> {
        let done = self.inner.store.run_complete(c).await?;
        if let Some(run) = &done {
            self.inner.stats.completed.fetch_add(1, Ordering::Relaxed);
            self.after_complete(run).await;
        }
        Ok(done)
    }

    /// Records many results in one transaction; returns how many runs reached their final
    /// state now.
    pub async fn complete_many(&self, batch: &[RunComplete]) -> Result<usize, Error> {
        let done = self.inner.store.runs_complete(batch).await?;
        self.inner
            .stats
            .completed
            .fetch_add(done.len() as u64, Ordering::Relaxed);
        for run in &done {
            self.after_complete(run).await;
        }
        Ok(done.len())
    }

    /// What follows a final state: child jobs on success, a retry on failure, the next fire
    /// of a fixed-delay job.
    pub(super) async fn after_complete(&self, run: &Run) {
        let cached = match self.job(run.job_id).await {
            Ok(c) => c,
            Err(_) => return, // the job was deleted meanwhile: nothing follows
        };
        let spec = &cached.job.spec;
        let now = now_ms();
        match run.state {
            RunState::Succeeded => {
                for &child in &spec.child_job_ids {
                    if child == run.job_id {
                        continue;
                    }
                    let mut new = RunNew::new(child, TriggerType::Parent, now);
                    new.parent_run_id = Some(run.id);
                    new.owner_node = Some(self.inner.config.node_id.clone());
                    match self.insert_with_retries(new).await {
                        Ok(r) => {
                            self.inner.stats.children.fetch_add(1, Ordering::Relaxed);
                            self.arm(r)
                        }
                        Err(e) => warn!(run_id = run.id, child, error = %e, "child job not fired"),
                    }
                }
            }
            RunState::Failed | RunState::TimedOut | RunState::Lost
                if run.attempt < spec.retry_count =>
            {
                let delay = retry_delay_ms(spec.retry_backoff_ms, run.attempt);
                let mut new = RunNew::new(run.job_id, TriggerType::Retry, now + delay);
                new.attempt = run.attempt + 1;
                new.parent_run_id = Some(run.id);
                new.params = Some(run.params.clone());
                new.shard_index = run.shard_index;
                new.shard_total = run.shard_total;
                new.executor_address = run.shard_total.and(run.executor_address.clone());
                new.owner_node = Some(self.inner.config.node_id.clone());
                match self.insert_with_retries(new).await {
                    Ok(r) => {
                        debug!(run_id = run.id, retry = r.id, delay, "retry planned");
                        self.inner.stats.retries.fetch_add(1, Ordering::Relaxed);
                        self.arm(r)
                    }
                    Err(e) => warn!(run_id = run.id, error = %e, "retry not planned"),
                }
            }
            _ => {}
        }
        if spec.schedule_type == ScheduleType::FixDelay && is_scheduled(run.trigger_type) {
            self.advance_fixed_delay(run.job_id, cached.schedule.as_ref(), now)
                .await;
        }
    }

    /// Writes a follow-up run (retry, child), trying a few times over a second or two: the
    /// run that asked for it is already final, so this is the only chance.
    async fn insert_with_retries(&self, new: RunNew) -> Result<Run, Error> {
        let mut tries = 0;
        loop {
            match self.inner.store.run_insert(new.clone()).await {
                Err(tickwork_store::Error::Database(e)) if tries < 3 => {
                    tries += 1;
                    debug!(error = %e, tries, "run insert failed, trying again");
                    tokio::time::sleep(Duration::from_millis(100 << (2 * tries))).await;
                }
                other => return Ok(other?),
            }
        }
    }

    /// Sets the next fire of a fixed-delay job whose run just ended. The cache holds the job
    /// as it was claimed, so the stored row decides whether it still waits for this run.
    async fn advance_fixed_delay(&self, job_id: i64, schedule: Option<&Schedule>, now: i64) {
        let Some(schedule) = schedule else { return };
        match self.inner.store.job_get(job_id).await {
            Ok(job) if job.next_fire_at == Some(WAITING_FOR_COMPLETION) => {}
            Ok(_) => return,
            Err(e) => {
                warn!(job_id, error = %e, "fixed-delay job not advanced");
                return;
            }
        }
        let next = JobNextFire {
            id: job_id,
            next_fire_at: schedule.next_after(now),
        };
        if let Err(e) = self.inner.store.job_set_next_fire(next).await {
            warn!(job_id, error = %e, "fixed-delay job not advanced");
        }
        self.forget_job(job_id);
        self.wake_scheduler();
    }
}

/// Whether a run comes from the job's own schedule (so its completion moves the schedule on).
fn is_scheduled(t: TriggerType) -> bool {
    matches!(t, TriggerType::FixDelay | TriggerType::Misfire)
}

/// The pause before retry `attempt + 1`: the backoff doubled per attempt, at most one hour.
pub fn retry_delay_ms(backoff_ms: i64, attempt: i32) -> i64 {
    let factor = 1i64 << attempt.clamp(0, 20);
    backoff_ms.max(0).saturating_mul(factor).min(3_600_000)
}

#[cfg(test)]
mod tests {
    use super::retry_delay_ms;

    #[test]
    fn retry_backoff_doubles_and_is_capped() {
        assert_eq!(retry_delay_ms(0, 0), 0);
        assert_eq!(retry_delay_ms(1000, 0), 1000);
        assert_eq!(retry_delay_ms(1000, 1), 2000);
        assert_eq!(retry_delay_ms(1000, 3), 8000);
        assert_eq!(retry_delay_ms(1000, 40), 3_600_000);
        assert_eq!(retry_delay_ms(-5, 2), 0);
    }
}
