//! Runs: read, list, clear, kill, and read a run's log from its executor.

use std::time::Duration;

use tickwork_core::run::RunState;
use tickwork_protocol::api::{Page, RunQuery, RunView};
use tickwork_protocol::{LogParam, LogResult};
use tickwork_store::{AuditFilter, PageReq, RunClear, RunComplete, RunFilter, RunKillIntent};
use tracing::warn;

use super::audit::Target;
use super::{MAX_CLEAR_DAYS, Runs, invalid, page, paged, run_view};
use crate::Error;
use crate::auth::Principal;
use tickwork_store::TimeRange;

/// How often [`Runs::settled`] reads a run again.
const SETTLE_POLL: Duration = Duration::from_millis(50);

impl Runs<'_> {
    pub async fn get(self, id: i64) -> Result<RunView, Error> {
        Ok(run_view(self.inner.store.run_get(id).await?))
    }

    pub async fn list(self, q: RunQuery) -> Result<Page<RunView>, Error> {
        let state = match q.state.as_deref() {
            None | Some("") => None,
            Some(s) => Some(s.parse::<RunState>().map_err(|e| invalid("state", e))?),
        };
        let req = page(q.offset, q.limit)?;
        let p = self
            .inner
            .store
            .runs_list(RunFilter {
                job_id: q.job_id,
                group_id: q.group_id,
                state,
                range: TimeRange {
                    from: q.from,
                    to: q.to,
                },
                page: req,
            })
            .await?;
        Ok(paged(p, req, run_view))
    }

    /// The instant `days` days ago, for "clear runs older than N days": 1 to
    /// [`MAX_CLEAR_DAYS`], computed without overflow.
    pub fn clear_before_days(self, days: i64) -> Result<i64, Error> {
        let out_of_range = || {
            invalid(
                "before_days",
                format!("{days} is out of range 1-{MAX_CLEAR_DAYS}"),
            )
        };
        if !(1..=MAX_CLEAR_DAYS).contains(&days) {
            return Err(out_of_range());
        }
        days.checked_mul(86_400_000)
            .and_then(|back| self.inner.clock.now_ms().checked_sub(back))
            // Further back than 1970: nothing is that old, and nothing is cleared.
            .map(|before| before.max(1))
            .ok_or_else(out_of_range)
    }

    /// Run `id` once it has left `planned` and `sending` (an executor accepted it, or no
    /// executor did), or as it is after `within`: what a manual trigger reports. Read again
    /// every 50 ms; dispatch writes no signal the service could wait on.
    pub async fn settled(self, id: i64, within: Duration) -> Result<RunView, Error> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let run = self.inner.store.run_get(id).await?;
            let pending = matches!(run.state, RunState::Planned | RunState::Sending);
            if !pending || tokio::time::Instant::now() >= deadline {
                return Ok(run_view(run));
            }
            tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + SETTLE_POLL)).await;
        }
    }

    /// Deletes final runs scheduled before `before`: of one job or group the caller may
    /// change, or (admins only) of every job. Pending runs are never cleared. How many went.
    pub async fn clear(
        self,
        by: &Principal,
        before: i64,
        job_id: Option<i64>,
        group_id: Option<i64>,
    ) -> Result<u64, Error> {
        if before <= 0 {
            return Err(invalid("before", "must be an instant (epoch milliseconds)"));
        }
        if let Some(job) = job_id {
            let job = self.inner.store.job_get(job).await?;
            by.require_group(job.spec.group_id)?;
            if group_id.is_some_and(|g| g != job.spec.group_id) {
                return Err(invalid("group_id", "is not the job's group"));
            }
        } else if let Some(group) = group_id {
            self.inner.store.group_get(group).await?;
            by.require_group(group)?;
        } else {
            by.require_admin()?;
        }
        let deleted = self
            .inner
            .store
            .runs_clear(RunClear {
                before,
                job_id,
                group_id,
            })
            .await?;
        let what = serde_json::json!({
            "before": before, "job_id": job_id, "group_id": group_id, "deleted": deleted,
        });
        self.inner
            .audit(by, "runs.clear", Target::Runs, None::<&()>, Some(&what))
            .await?;
        Ok(deleted)
    }

    /// Kills a dispatched run: the kill is recorded, `/kill` goes to its executor, then the
    /// run ends as `killed` (whether the executor's failure report or the kill's answer comes
    /// first), with no retry and no alarm.
    pub async fn kill(self, by: &Principal, id: i64) -> Result<RunView, Error> {
        let run = self.inner.store.run_get(id).await?;
        by.require_group(run.group_id)?;
        let before = run_view(run.clone());
        if run.state != RunState::Dispatched {
            return Err(Error::Conflict(format!(
                "run {id} is {}, only a dispatched run can be killed",
                run.state
            )));
        }
        let address = run
            .executor_address
            .clone()
            .ok_or_else(|| Error::Conflict(format!("run {id} has no executor address")))?;
        let client = self.inner.groups().group_client(run.group_id).await?;
        // Recorded before `/kill`: the executor reports the killed run as failed, and that
        // callback may reach this or another admin before the kill's answer does.
        let intent = |at| RunKillIntent { run_id: id, at };
        if !self
            .inner
            .store
            .run_kill_intent(intent(Some(self.inner.clock.now_ms())))
            .await?
        {
            let now = self.inner.store.run_get(id).await?;
            return Err(Error::Conflict(format!(
                "run {id} is {}, only a dispatched run can be killed",
                now.state
            )));
        }
        let out = client.kill(&address, run.job_id as i32).await;
        if !out.is_success() {
            // The run goes on: a failure it reports later is its own, not the kill.
            if let Err(e) = self.inner.store.run_kill_intent(intent(None)).await {
                warn!(run_id = id, error = %e, "kill intent not withdrawn");
            }
            return Err(Error::Executor(format!(
                "executor {address} refused the kill: {}",
                out.msg.unwrap_or_default()
            )));
        }
        let msg = format!("killed by {}: {}", by.username, out.msg.unwrap_or_default());
        let done = self
            .inner
            .pipeline
            .complete(RunComplete {
                run_id: id,
                handle_code: tickwork_protocol::CODE_FAIL,
                handle_msg: Some(msg),
                state: RunState::Killed,
                // What follows the end (a fixed-delay job's next fire) counts from it.
                at: self.inner.clock.now_ms(),
            })
            .await?;
        let after = match done {
            Some(r) => run_view(r),
            // The run ended while the kill was on its way.
            None => run_view(self.inner.store.run_get(id).await?),
        };
        self.inner
            .audit(by, "run.kill", Target::Run(id), Some(&before), Some(&after))
            .await?;
        Ok(after)
    }

    /// Who killed run `id` and when (`None` when nobody did), from the kill's audit record: the
    /// executor's own report of a killed run may end it before the kill's answer is written.
    pub async fn killed_by(self, id: i64) -> Result<Option<(String, i64)>, Error> {
        let (target_type, target_id) = Target::Run(id).parts();
        let records = self
            .inner
            .store
            .audit_list(AuditFilter {
                target_type: Some(target_type.to_owned()),
                target_id: Some(target_id),
                page: PageReq::first(PageReq::MAX_LIMIT),
                ..AuditFilter::default()
            })
            .await?;
        Ok(records
            .items
            .into_iter()
            .find(|e| e.action == "run.kill")
            .map(|e| (e.actor, e.at)))
    }

    /// A run's log from line `from_line` on, read from its executor, as plain text (line
    /// breaks, not `<br>`). `is_end` is true once the run is final and nothing new is left.
    pub async fn log(self, id: i64, from_line: i32) -> Result<LogResult, Error> {
        if from_line < 1 {
            return Err(invalid("from_line", "lines count from 1"));
        }
        let run = self.inner.store.run_get(id).await?;
        let Some(address) = run.executor_address.clone() else {
            return Ok(LogResult {
                from_line_num: from_line,
                to_line_num: 0,
                log_content: run.trigger_msg.unwrap_or_default(),
                is_end: true,
            });
        };
        let out = self
            .inner
            .groups()
            .group_client(run.group_id)
            .await?
            .log(
                &address,
                &LogParam {
                    log_date_time: run.scheduled_at,
                    log_id: id,
                    from_line_num: from_line.max(1),
                },
            )
            .await;
        if !out.is_success() {
            return Err(Error::Executor(format!(
                "executor {address} did not return the log: {}",
                out.msg.unwrap_or_default()
            )));
        }
        let mut log = out.payload.unwrap_or_default();
        // Executors write `<br>` for XXL-JOB's HTML console; our readers show text.
        log.log_content = tickwork_protocol::log_text(&log.log_content);
        log.is_end = log.is_end || (run.state.is_final() && log.from_line_num > log.to_line_num);
        Ok(log)
    }
}
