//! Submissions from code: a client puts a schedule under its own key in an executor group
//! (now, at an instant, a repeat with or without a count, a cron), idempotent under that key,
//! and the admin keeps the job that carries it out. Cancelled by key.

use tickwork_core::RouteStrategy;
use tickwork_core::job::Limits;
use tickwork_core::submission::{self, When};
use tickwork_protocol::api::ErrorDetail;
use tickwork_protocol::submissions::{
    Completion, Completions, CompletionsAck, CompletionsAcked, SUBMISSIONS_BATCH_MAX,
    SubmissionInput, SubmissionItem, SubmissionItemResult, SubmissionOutcome, SubmissionPutView,
    SubmissionView, SubmissionsBatchResult,
};
use tickwork_store::{
    AlarmKind, Group, Job, JobNew, JobSpec, JobStatus, PageReq, RunFilter, RunState,
    SubmissionCancel, SubmissionEndsAck, SubmissionEndsQuery, SubmissionKey, SubmissionPut,
    SubmissionWritten, TimeRange,
};

use super::audit::Target;
use super::{Inner, job_view};
use crate::Error;
use crate::auth::Principal;

/// Submissions, borrowed from a [`crate::Service`].
#[derive(Clone, Copy)]
pub struct Submissions<'a> {
    pub(super) inner: &'a Inner,
}

impl Submissions<'_> {
    /// Writes a submission under `key` in the group named `app`: a new key gets its job, a
    /// taken one is kept or replaced as `on_conflict` says. The caller must be allowed to
    /// change the group.
    pub async fn put(
        self,
        by: &Principal,
        app: &str,
        key: &str,
        input: SubmissionInput,
    ) -> Result<SubmissionPutView, Error> {
        let group = self.group(by, app).await?;
        self.put_in(by, &group, key, input).await
    }

    /// Writes each submission of a batch on its own, in order: one that is refused (its
    /// error's code and message in its result) leaves the others as they are.
    pub async fn put_many(
        self,
        by: &Principal,
        app: &str,
        items: Vec<SubmissionItem>,
    ) -> Result<SubmissionsBatchResult, Error> {
        if items.is_empty() || items.len() > SUBMISSIONS_BATCH_MAX {
            return Err(Error::invalid_field(
                "items",
                format!(
                    "must hold 1 to {SUBMISSIONS_BATCH_MAX} submissions, not {}",
                    items.len()
                ),
            ));
        }
        let group = self.group(by, app).await?;
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            let result = match self.put_in(by, &group, &item.key, item.submission).await {
                Ok(put) => SubmissionItemResult {
                    key: item.key,
                    outcome: Some(put.outcome),
                    submission: Some(put.submission),
                    error: None,
                },
                Err(e) => {
                    let (code, message) = super::item_error(&e, "submissions batch");
                    SubmissionItemResult {
                        key: item.key,
                        outcome: None,
                        submission: None,
                        error: Some(ErrorDetail { code, message }),
                    }
                }
            };
            results.push(result);
        }
        Ok(SubmissionsBatchResult { results })
    }

    /// One submission by its group's app name and its key.
    pub async fn get(self, app: &str, key: &str) -> Result<SubmissionView, Error> {
        let group = self.group_named(app).await?;
        let found = self
            .inner
            .store
            .submission_get(SubmissionKey {
                group_id: group.id,
                key: key.to_owned(),
            })
            .await?;
        self.view(&group, found.submission, found.job).await
    }

    /// The ends of the group's submissions' runs not yet acknowledged, oldest first, after the
    /// completion `after`; 1 to 1,000 (100 when absent). Every role may read them.
    pub async fn completions(
        self,
        app: &str,
        after: Option<i64>,
        limit: Option<u64>,
    ) -> Result<Completions, Error> {
        let limit = limit.unwrap_or(100);
        if !(1..=PageReq::MAX_LIMIT).contains(&limit) {
            return Err(Error::invalid_field("limit", "must be 1 to 1000"));
        }
        let group = self.group_named(app).await?;
        let ends = self
            .inner
            .store
            .submission_ends(SubmissionEndsQuery {
                group_id: group.id,
                after,
                limit,
            })
            .await?;
        Ok(Completions {
            items: ends.into_iter().map(completion).collect(),
        })
    }

    /// Acknowledges completions of the group: they are not read again. The caller must be
    /// allowed to change the group. Not audited: it is the submitter reading its feedback,
    /// many times a minute, not a change anyone reviews.
    pub async fn acknowledge(
        self,
        by: &Principal,
        app: &str,
        ack: CompletionsAck,
    ) -> Result<CompletionsAcked, Error> {
        if ack.ids.is_empty() || ack.ids.len() > SUBMISSIONS_BATCH_MAX {
            return Err(Error::invalid_field(
                "ids",
                format!("must hold 1 to {SUBMISSIONS_BATCH_MAX} completion ids"),
            ));
        }
        let group = self.group(by, app).await?;
        let acked = self
            .inner
            .store
            .submission_ends_ack(SubmissionEndsAck {
                group_id: group.id,
                ids: ack.ids,
            })
            .await?;
        Ok(CompletionsAcked { acked })
    }

    /// Cancels a submission: deletes it with its job and runs. Refused while a run of it is
    /// planned or running, unless `kill`: then the job is stopped first (no new fire), its
    /// dispatched runs are killed at their executors, and the rest is deleted.
    pub async fn cancel(
        self,
        by: &Principal,
        app: &str,
        key: &str,
        kill: bool,
    ) -> Result<SubmissionView, Error> {
        let group = self.group(by, app).await?;
        let key = SubmissionKey {
            group_id: group.id,
            key: key.to_owned(),
        };
        if kill {
            let found = self.inner.store.submission_get(key.clone()).await?;
            let job_id = found.job.id;
            if found.job.status == JobStatus::Running {
                self.inner.jobs().stop(by, job_id).await?;
            }
            let running = self
                .inner
                .store
                .runs_list(RunFilter {
                    job_id: Some(job_id),
                    group_id: None,
                    state: Some(RunState::Dispatched),
                    range: TimeRange::default(),
                    page: PageReq::first(PageReq::MAX_LIMIT),
                })
                .await?;
            for run in running.items {
                match self.inner.runs().kill(by, run.id).await {
                    // Ended on its own meanwhile: nothing to kill.
                    Ok(_) | Err(Error::Conflict(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let done = self
            .inner
            .store
            .submission_cancel(SubmissionCancel {
                key,
                with_live_runs: kill,
            })
            .await?;
        self.inner.pipeline.forget_job(done.job.id);
        let before = job_view(done.job.clone());
        self.inner
            .audit(
                by,
                "submission.cancel",
                Target::Job(done.job.id),
                Some(&before),
                None::<&()>,
            )
            .await?;
        self.view(&group, done.submission, done.job).await
    }

    async fn put_in(
        self,
        by: &Principal,
        group: &Group,
        key: &str,
        input: SubmissionInput,
    ) -> Result<SubmissionPutView, Error> {
        submission::validate_key(key)?;
        let time_zone = match input.time_zone.as_deref().map(str::trim) {
            Some(tz) if !tz.is_empty() => tz.to_owned(),
            _ => self.inner.config.default_time_zone.clone(),
        };
        let now = self.inner.clock.now_ms();
        let plan = submission::plan(&input.schedule, input.rely_on_prev_cycle, &time_zone, now)
            .map_err(schedule_error)?;
        let mut spec = JobSpec::new(group.id, input.handler.trim());
        spec.description = match input.description.trim() {
            "" => format!("submission {key}"),
            d => d.to_owned(),
        };
        spec.params = input.params;
        spec.schedule_type = plan.schedule_type;
        spec.schedule_conf = plan.schedule_conf;
        spec.time_zone = time_zone;
        spec.misfire_strategy = plan.misfire;
        spec.route_strategy = input.route_strategy.unwrap_or(RouteStrategy::First);
        spec.priority = input.priority;
        spec.retry_count = input.retry_count;
        spec.retry_backoff_ms = input.retry_backoff_ms;
        spec.timeout_s = input.timeout_s;
        spec.validate(&Limits::STANDARD)?;
        let feedback_channel_id = match input.feedback_channel.as_deref().map(str::trim) {
            Some(name) if !name.is_empty() => Some(self.feedback_channel(name).await?),
            _ => None,
        };
        let schedule = serde_json::to_string(&input.schedule)
            .map_err(|e| Error::Internal(format!("submission schedule json: {e}")))?;
        let put = SubmissionPut {
            group_id: group.id,
            key: key.to_owned(),
            schedule,
            job: JobNew {
                key: format!("sub-{:016x}", fastrand::u64(..)),
                spec,
                status: JobStatus::Running,
                next_fire_at: Some(plan.first_fire),
                now,
            },
            fires_left: plan.fires_left,
            feedback_channel_id,
            on_conflict: input.on_conflict,
        };
        let written = match self.inner.store.submission_put(put.clone()).await {
            // Another put took the new key meanwhile: now it is there, put again.
            Err(tickwork_store::Error::Conflict(_)) => self.inner.store.submission_put(put).await?,
            other => other?,
        };
        let job_id = written.job.id;
        let outcome = match written.written {
            SubmissionWritten::Created => SubmissionOutcome::Created,
            SubmissionWritten::Kept => SubmissionOutcome::Kept,
            SubmissionWritten::Replaced => SubmissionOutcome::Replaced,
        };
        if outcome != SubmissionOutcome::Kept {
            // A replaced job's claimed fires of its old schedule are dropped.
            self.inner.pipeline.forget_job(job_id);
            self.inner.pipeline.wake();
            let action = match outcome {
                SubmissionOutcome::Replaced => "submission.replace",
                _ => "submission.create",
            };
            let before = written.before.map(job_view);
            let after = job_view(written.job.clone());
            self.inner
                .audit(
                    by,
                    action,
                    Target::Job(job_id),
                    before.as_ref(),
                    Some(&after),
                )
                .await?;
        }
        Ok(SubmissionPutView {
            outcome,
            submission: self.view(group, written.submission, written.job).await?,
        })
    }

    /// The id of the webhook channel `name`, which must be enabled.
    async fn feedback_channel(self, name: &str) -> Result<i64, Error> {
        let channels = self.inner.store.alarm_channels_list().await?;
        let Some(channel) = channels.into_iter().find(|c| c.name == name) else {
            return Err(Error::invalid_field(
                "feedback_channel",
                format!("there is no alarm channel {name:?}"),
            ));
        };
        if channel.kind != AlarmKind::Webhook || !channel.enabled {
            return Err(Error::invalid_field(
                "feedback_channel",
                format!("alarm channel {name:?} is not an enabled webhook channel"),
            ));
        }
        Ok(channel.id)
    }

    /// The name of channel `id` for a view (`None` for a channel deleted since).
    async fn channel_name(self, id: Option<i64>) -> Result<Option<String>, Error> {
        let Some(id) = id else {
            return Ok(None);
        };
        match self.inner.store.alarm_channel_get(id).await {
            Ok(c) => Ok(Some(c.name)),
            Err(tickwork_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A submission as clients read it.
    async fn view(
        self,
        group: &Group,
        s: tickwork_store::Submission,
        job: Job,
    ) -> Result<SubmissionView, Error> {
        let feedback_channel = self.channel_name(s.feedback_channel_id).await?;
        let schedule: When = serde_json::from_str(&s.schedule).map_err(|e| {
            Error::Internal(format!(
                "submission {} holds an unreadable schedule: {e}",
                s.id
            ))
        })?;
        Ok(SubmissionView {
            app_name: group.app_name.clone(),
            key: s.key,
            job_id: job.id,
            schedule,
            time_zone: job.spec.time_zone,
            rely_on_prev_cycle: job.spec.schedule_type.waits_for_end(),
            state: match job.status {
                JobStatus::Running => "active",
                JobStatus::Stopped => "finished",
            }
            .to_owned(),
            next_fire_at: job.next_fire_at.filter(|&at| at != i64::MAX),
            fires_left: job.fires_left,
            feedback_channel,
            created_at: s.created_at,
            updated_at: s.updated_at,
        })
    }

    /// The group named `app`, which `by` must be allowed to change.
    async fn group(self, by: &Principal, app: &str) -> Result<Group, Error> {
        let group = self.group_named(app).await?;
        by.require_group(group.id)?;
        Ok(group)
    }

    async fn group_named(self, app: &str) -> Result<Group, Error> {
        match self.inner.store.group_get_by_app_name(app).await {
            Err(tickwork_store::Error::NotFound { .. }) => {
                Err(Error::NotFound(format!("executor group {app:?} not found")))
            }
            other => Ok(other?),
        }
    }
}

/// A schedule's error named by the input field it is about.
fn schedule_error(e: tickwork_core::Error) -> Error {
    use tickwork_core::Error as Core;
    match e {
        Core::Invalid { field, message } => {
            Error::invalid_field(format!("schedule.{field}"), message)
        }
        e @ Core::Cron { .. } => Error::invalid_field("schedule.cron", e),
        e @ Core::Schedule(_) => Error::invalid_field("schedule.at", e),
        e @ Core::TimeZone(_) => Error::invalid_field("time_zone", e),
        e => Error::invalid_field("schedule", e),
    }
}

/// A completion as the API and the webhook show it.
pub(crate) fn completion(e: tickwork_store::SubmissionEnd) -> Completion {
    Completion {
        id: e.id,
        key: e.key,
        run_id: e.run_id,
        attempt: e.attempt,
        state: e.state,
        handle_code: e.handle_code,
        handle_msg: e.handle_msg,
        scheduled_at: e.scheduled_at,
        ended_at: e.ended_at,
    }
}
