//! Jobs: create, change, copy, delete, start, stop, trigger, list, and schedule previews.

use tickwork_core::schedule::Schedule;
use tickwork_core::{GlueType, ScheduleType, TriggerType};
use tickwork_protocol::api::{CopyInput, JobInput, JobQuery, JobView, Page, RunView, TriggerInput};
use tickwork_store::{
    Job, JobFilter, JobNew, JobSpec, JobStatus, JobStatusChange, JobUpdate, RunNew, ScriptVersion,
    ScriptVersionNew,
};

use super::audit::Target;
use super::{MAX_SOURCE, MAX_TEXT, Service, has_source, invalid, job_view, page, paged, run_view};
use crate::Error;
use crate::auth::Principal;
use crate::timer::now_ms;

impl Service {
    /// Checks a job definition and turns it into the stored spec with its parsed schedule;
    /// `by` must be allowed to change the group of every child job it lists.
    async fn job_spec(
        &self,
        by: &Principal,
        input: &JobInput,
        own_id: Option<i64>,
    ) -> Result<(JobSpec, Schedule), Error> {
        let i = input;
        if i.description.chars().count() > 255 {
            return Err(invalid("description", "must be at most 255 characters"));
        }
        if i.owner.chars().count() > 64 {
            return Err(invalid("owner", "must be at most 64 characters"));
        }
        match self.inner.store.group_get(i.group_id).await {
            Ok(_) => {}
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(invalid(
                    "group_id",
                    format!("executor group {} does not exist", i.group_id),
                ));
            }
            Err(e) => return Err(e.into()),
        }
        let zone = i
            .time_zone
            .clone()
            .filter(|z| !z.trim().is_empty())
            .unwrap_or_else(|| self.inner.config.default_time_zone.clone());
        let schedule = Schedule::parse(i.schedule_type, &i.schedule_conf, &zone)
            .map_err(|e| invalid("schedule_conf", e))?;
        let handler = i.handler.trim();
        if i.glue_type == GlueType::Bean && handler.is_empty() {
            return Err(invalid("handler", "a BEAN job needs a handler name"));
        }
        if handler.len() > 255 {
            return Err(invalid("handler", "must be at most 255 characters"));
        }
        if has_source(i.glue_type) && i.glue_source.trim().is_empty() {
            return Err(invalid(
                "glue_source",
                format!("a {} job needs a script", i.glue_type),
            ));
        }
        if i.glue_source.len() > MAX_SOURCE {
            return Err(invalid("glue_source", "must be at most 1 MiB"));
        }
        if i.params.len() > MAX_TEXT {
            return Err(invalid("params", "must be at most 64 KiB"));
        }
        if i.timeout_s < 0 {
            return Err(invalid(
                "timeout_s",
                format!("{} is negative; use 0 for no timeout", i.timeout_s),
            ));
        }
        if !(0..=100).contains(&i.retry_count) {
            return Err(invalid(
                "retry_count",
                format!("{} is out of range 0-100", i.retry_count),
            ));
        }
        if !(0..=86_400_000).contains(&i.retry_backoff_ms) {
            return Err(invalid(
                "retry_backoff_ms",
                format!("{} is out of range 0-86400000", i.retry_backoff_ms),
            ));
        }
        for &child in &i.child_job_ids {
            if Some(child) == own_id {
                return Err(invalid("child_job_ids", "a job cannot be its own child"));
            }
            match self.inner.store.job_get(child).await {
                // A child fires when its parent succeeds: listing it is changing what its
                // group runs.
                Ok(c) if !by.can_change_group(c.spec.group_id) => {
                    return Err(Error::Forbidden(format!(
                        "child_job_ids: job {child} is in executor group {}, which {} ({}) \
                         may not change",
                        c.spec.group_id, by.username, by.role
                    )));
                }
                Ok(_) => {}
                Err(tickwork_store::Error::NotFound { .. }) => {
                    return Err(invalid(
                        "child_job_ids",
                        format!("job {child} does not exist"),
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let alarm_channels = self.check_alarm_channels(&i.alarm_channels).await?;
        let spec = JobSpec {
            group_id: i.group_id,
            description: i.description.clone(),
            owner: i.owner.clone(),
            alarm_channels,
            schedule_type: i.schedule_type,
            schedule_conf: i.schedule_conf.trim().to_owned(),
            time_zone: zone,
            misfire_strategy: i.misfire_strategy,
            route_strategy: i.route_strategy,
            handler: handler.to_owned(),
            params: i.params.clone(),
            block_strategy: i.block_strategy,
            timeout_s: i.timeout_s,
            retry_count: i.retry_count,
            retry_backoff_ms: i.retry_backoff_ms,
            child_job_ids: i.child_job_ids.clone(),
            priority: i.priority,
            glue_type: i.glue_type,
            // Shell scripts written on Windows would fail on `\r`; XXL-JOB strips it too.
            glue_source: if i.glue_type == GlueType::Shell {
                i.glue_source.replace('\r', "")
            } else {
                i.glue_source.clone()
            },
        };
        Ok((spec, schedule))
    }

    fn first_fire(schedule: &Schedule, now: i64) -> Result<i64, Error> {
        if schedule.kind() == ScheduleType::None {
            return Err(invalid(
                "schedule_type",
                "a job with schedule NONE cannot be started; trigger it instead",
            ));
        }
        schedule
            .next_after(now)
            .ok_or_else(|| invalid("schedule_conf", "the schedule has no fire in the future"))
    }

    /// Creates a job in a group the caller may change. A script job's source becomes its
    /// script version 1.
    pub async fn job_create(&self, by: &Principal, input: JobInput) -> Result<JobView, Error> {
        by.require_group(input.group_id)?;
        let (spec, schedule) = self.job_spec(by, &input, None).await?;
        let key = match input.key.as_deref().map(str::trim) {
            Some(k) if !k.is_empty() => {
                validate_key(k)?;
                k.to_owned()
            }
            _ => format!("job-{:016x}", fastrand::u64(..)),
        };
        let now = now_ms();
        let (status, next) = if input.start {
            (JobStatus::Running, Some(Self::first_fire(&schedule, now)?))
        } else {
            (JobStatus::Stopped, None)
        };
        let job = self
            .inner
            .store
            .job_create(JobNew {
                key,
                spec,
                status,
                next_fire_at: next,
                now,
            })
            .await?;
        self.inner.pipeline.wake();
        if has_source(job.spec.glue_type) {
            self.script_version_record(by, &job, "created").await?;
        }
        let view = job_view(job);
        self.audit(
            by,
            "job.create",
            Target::Job(view.id),
            None::<&()>,
            Some(&view),
        )
        .await?;
        Ok(view)
    }

    /// Rewrites a job's definition; both its old and its new group must be the caller's. A
    /// changed script becomes a new script version.
    pub async fn job_update(
        &self,
        by: &Principal,
        id: i64,
        input: JobInput,
    ) -> Result<JobView, Error> {
        let old = self.inner.store.job_get(id).await?;
        by.require_group(old.spec.group_id)?;
        by.require_group(input.group_id)?;
        let (old, new) = self
            .job_write(old, input, by, "edited with the job")
            .await?;
        self.audit(by, "job.update", Target::Job(id), Some(&old), Some(&new))
            .await?;
        Ok(new)
    }

    /// Writes a job's new definition (checked) and records a changed script as a version.
    pub(super) async fn job_write(
        &self,
        old: Job,
        input: JobInput,
        by: &Principal,
        script_comment: &str,
    ) -> Result<(JobView, JobView), Error> {
        let id = old.id;
        let (spec, schedule) = self.job_spec(by, &input, Some(id)).await?;
        if let Some(k) = input.key.as_deref().map(str::trim)
            && !k.is_empty()
            && k != old.key
        {
            return Err(invalid("key", "a job's key cannot change"));
        }
        let now = now_ms();
        let schedule_changed = old.spec.schedule_type != spec.schedule_type
            || old.spec.schedule_conf != spec.schedule_conf
            || old.spec.time_zone != spec.time_zone;
        let next = if old.status == JobStatus::Running && schedule_changed {
            Some(Self::first_fire(&schedule, now)?)
        } else {
            old.next_fire_at
        };
        let job = self
            .inner
            .store
            .job_update(JobUpdate {
                id,
                expected_version: None,
                spec,
                next_fire_at: next,
                now,
            })
            .await?;
        self.inner.pipeline.forget_job(id);
        self.inner.pipeline.wake();
        let script_changed = old.spec.glue_type != job.spec.glue_type
            || old.spec.glue_source != job.spec.glue_source;
        if script_changed && has_source(job.spec.glue_type) {
            self.script_version_record(by, &job, script_comment).await?;
        }
        Ok((job_view(old), job_view(job)))
    }

    /// Appends the job's current script as a new version.
    pub(super) async fn script_version_record(
        &self,
        by: &Principal,
        job: &Job,
        comment: &str,
    ) -> Result<ScriptVersion, Error> {
        Ok(self
            .inner
            .store
            .script_version_append(ScriptVersionNew {
                job_id: job.id,
                glue_type: job.spec.glue_type,
                source: job.spec.glue_source.clone(),
                comment: comment.chars().take(255).collect(),
                author: by.username.clone(),
                now: now_ms(),
            })
            .await?)
    }

    /// The job, when the caller may change it.
    pub(super) async fn job_for_change(&self, by: &Principal, id: i64) -> Result<Job, Error> {
        let job = self.inner.store.job_get(id).await?;
        by.require_group(job.spec.group_id)?;
        Ok(job)
    }

    pub async fn job_delete(&self, by: &Principal, id: i64) -> Result<(), Error> {
        let old = self.job_for_change(by, id).await?;
        self.inner.store.job_delete(id).await?;
        self.inner.pipeline.forget_job(id);
        self.audit(
            by,
            "job.delete",
            Target::Job(id),
            Some(&job_view(old)),
            None::<&()>,
        )
        .await
    }

    /// Copies a job: a new, stopped job with the same definition and a new key, in the same
    /// group (its script history starts again at version 1).
    pub async fn job_copy(
        &self,
        by: &Principal,
        id: i64,
        input: CopyInput,
    ) -> Result<JobView, Error> {
        let old = self.job_for_change(by, id).await?;
        let view = job_view(old);
        let mut copy = JobInput::from(&view);
        copy.key = None;
        copy.start = false;
        copy.description = match input.description {
            Some(d) => d,
            None => format!("copy of {}", view.description)
                .chars()
                .take(255)
                .collect(),
        };
        let created = self.job_create(by, copy).await?;
        self.audit(
            by,
            "job.copy",
            Target::Job(created.id),
            Some(&serde_json::json!({ "copied_from": id })),
            Some(&created),
        )
        .await?;
        Ok(created)
    }

    pub async fn job_get(&self, id: i64) -> Result<JobView, Error> {
        Ok(job_view(self.inner.store.job_get(id).await?))
    }

    /// One job by its stable key.
    pub async fn job_get_by_key(&self, key: &str) -> Result<JobView, Error> {
        Ok(job_view(self.inner.store.job_get_by_key(key).await?))
    }

    /// One page of jobs: by group, status and text; `offset`/`limit` or the HTTP layer's
    /// `page`/`size`.
    pub async fn jobs_list(&self, q: JobQuery) -> Result<Page<JobView>, Error> {
        let status = match q.status.as_deref() {
            None | Some("") => None,
            Some(s) => Some(s.parse::<JobStatus>().map_err(|e| invalid("status", e))?),
        };
        let req = page(q.offset, q.limit)?;
        let p = self
            .inner
            .store
            .jobs_list(JobFilter {
                group_id: q.group_id,
                status,
                text: q.text.filter(|t| !t.trim().is_empty()),
                page: req,
            })
            .await?;
        Ok(paged(p, req, job_view))
    }

    /// Starts a job: its next fire is computed from now.
    pub async fn job_start(&self, by: &Principal, id: i64) -> Result<JobView, Error> {
        let job = self.job_for_change(by, id).await?;
        let before = job_view(job.clone());
        let schedule = Schedule::parse(
            job.spec.schedule_type,
            &job.spec.schedule_conf,
            &job.spec.time_zone,
        )
        .map_err(|e| invalid("schedule_conf", e))?;
        let now = now_ms();
        let next = Self::first_fire(&schedule, now)?;
        let job = self
            .inner
            .store
            .job_set_status(JobStatusChange {
                id,
                status: JobStatus::Running,
                next_fire_at: Some(next),
                now,
            })
            .await?;
        self.inner.pipeline.forget_job(id);
        self.inner.pipeline.wake();
        let view = job_view(job);
        self.audit(by, "job.start", Target::Job(id), Some(&before), Some(&view))
            .await?;
        Ok(view)
    }

    /// Stops a job. Fires already claimed into the timer end as `skipped` when they come due.
    pub async fn job_stop(&self, by: &Principal, id: i64) -> Result<JobView, Error> {
        let before = job_view(self.job_for_change(by, id).await?);
        let job = self
            .inner
            .store
            .job_set_status(JobStatusChange {
                id,
                status: JobStatus::Stopped,
                next_fire_at: None,
                now: now_ms(),
            })
            .await?;
        self.inner.pipeline.forget_job(id);
        let view = job_view(job);
        self.audit(by, "job.stop", Target::Job(id), Some(&before), Some(&view))
            .await?;
        Ok(view)
    }

    /// Fires a job once now (manual or API trigger), with its own params or `input.params`,
    /// routed or sent to `input.address`.
    pub async fn job_trigger(
        &self,
        by: &Principal,
        id: i64,
        input: TriggerInput,
        trigger_type: TriggerType,
    ) -> Result<RunView, Error> {
        let job = self.job_for_change(by, id).await?;
        if let Some(p) = &input.params
            && p.len() > MAX_TEXT
        {
            return Err(invalid("params", "must be at most 64 KiB"));
        }
        let address = match input.address.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(a) => Some(self.group_address(job.spec.group_id, a).await?),
        };
        let now = now_ms();
        let mut new = RunNew::new(id, trigger_type, now);
        new.params = input.params;
        new.executor_address = address;
        new.owner_node = Some(self.inner.config.node_id.clone());
        let run = self.inner.store.run_insert(new).await?;
        self.inner.pipeline.arm(run.clone());
        let view = run_view(run);
        self.audit(
            by,
            "job.trigger",
            Target::Run(view.id),
            None::<&()>,
            Some(&view),
        )
        .await?;
        Ok(view)
    }

    /// `address` as the group knows it, when it is one of the group's executors: a registered
    /// live instance or an address of its manual list. The run, its script and the access
    /// token go there, so no other address is accepted.
    async fn group_address(&self, group_id: i64, address: &str) -> Result<String, Error> {
        let g = self.inner.store.group_get(group_id).await?;
        let dead_after = self.inner.config.registry.dead_after.as_millis() as i64;
        let live = self
            .inner
            .store
            .registry_live(tickwork_store::LiveQuery {
                app_name: g.app_name.clone(),
                alive_since: now_ms() - dead_after,
            })
            .await?;
        // The same executor, written with or without its trailing slash.
        let bare = |a: &str| a.trim().trim_end_matches('/').to_owned();
        let wanted = bare(address);
        live.into_iter()
            .chain(g.addresses)
            .find(|a| bare(a) == wanted)
            .ok_or_else(|| {
                invalid(
                    "address",
                    format!(
                        "{address:?} is not an executor of group {:?}; choose one of its \
                         live instances or listed addresses",
                        g.app_name
                    ),
                )
            })
    }

    /// The next `n` fires of a schedule, before it is saved.
    pub fn schedule_preview(
        &self,
        kind: ScheduleType,
        conf: &str,
        zone: Option<&str>,
        n: usize,
    ) -> Result<Vec<i64>, Error> {
        let zone = zone
            .filter(|z| !z.is_empty())
            .unwrap_or(&self.inner.config.default_time_zone);
        let s = Schedule::parse(kind, conf, zone).map_err(|e| invalid("schedule_conf", e))?;
        Ok(s.next_fires(now_ms(), n.clamp(1, 100)))
    }
}

/// A job key: 1 to 128 characters of letters, digits, `.`, `_` and `-`.
fn validate_key(k: &str) -> Result<(), Error> {
    if k.len() > 128
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(invalid(
            "key",
            format!("{k:?} must be 1 to 128 letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(())
}
