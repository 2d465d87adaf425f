//! Jobs: create, change, copy, delete, start, stop, trigger, list, and schedule previews.

use std::collections::HashMap;
use tickwork_core::job::{self, Limits};
use tickwork_core::schedule::Schedule;
use tickwork_core::{ScheduleType, TriggerType};
use tickwork_protocol::api::{
    CopyInput, JOB_SORT_KEYS, JobInput, JobListItem, JobQuery, JobView, LastRunView, Page, RunView,
    TriggerInput,
};

use tickwork_store::{
    FirstScript, Job, JobCreate, JobFilter, JobNew, JobSort, JobSortKey, JobSpec, JobStatus,
    JobUpdate, RunNew, ScriptVersion, ScriptVersionNew,
};

use super::audit::Target;
use super::job_writer::StatusChange;
use super::{Jobs, has_source, invalid, job_view, page, paged, run_view};
use crate::Error;
use crate::auth::Principal;

/// What checking job definitions reads from the store, each read once per request: the jobs
/// of a batch name the same groups, child jobs and alarm channels again and again.
#[derive(Default)]
pub(super) struct Lookups {
    /// Group id -> whether it exists.
    groups: HashMap<i64, bool>,
    /// Job id -> its group, `None` when there is no such job.
    jobs: HashMap<i64, Option<i64>>,
    /// An `alarm_channels` list -> the same list checked and normalised.
    channels: HashMap<String, String>,
}

impl Jobs<'_> {
    /// Checks a job definition and turns it into the stored spec with its parsed schedule;
    /// `by` must be allowed to change the group of every child job it lists. The rules on
    /// the definition itself are core's ([`JobSpec::validate`]); here is only what needs the
    /// store: the group, the child jobs and the alarm channels exist.
    pub(super) async fn job_spec(
        self,
        by: &Principal,
        input: &JobInput,
        own_id: Option<i64>,
        seen: &mut Lookups,
    ) -> Result<(JobSpec, Schedule), Error> {
        let mut spec = input.to_spec(&self.inner.config.default_time_zone);
        let schedule = spec.validate(&Limits::STANDARD)?;
        if !self.group_exists(spec.group_id, seen).await? {
            return Err(no_group(spec.group_id));
        }
        for &child in &spec.child_job_ids {
            if Some(child) == own_id {
                return Err(invalid("child_job_ids", "a job cannot be its own child"));
            }
            let group = match seen.jobs.get(&child) {
                Some(&g) => g,
                None => {
                    let g = match self.inner.store.job_get(child).await {
                        Ok(c) => Some(c.spec.group_id),
                        Err(tickwork_store::Error::NotFound { .. }) => None,
                        Err(e) => return Err(e.into()),
                    };
                    seen.jobs.insert(child, g);
                    g
                }
            };
            match group {
                // A child fires when its parent succeeds: listing it is changing what its
                // group runs.
                Some(g) if !by.can_change_group(g) => {
                    return Err(Error::Forbidden(format!(
                        "child_job_ids: job {child} is in executor group {g}, which {} ({}) \
                         may not change",
                        by.username, by.role
                    )));
                }
                Some(_) => {}
                None => {
                    return Err(invalid(
                        "child_job_ids",
                        format!("job {child} does not exist"),
                    ));
                }
            }
        }
        spec.alarm_channels = match seen.channels.get(&spec.alarm_channels) {
            Some(checked) => checked.clone(),
            None => {
                let checked = self
                    .inner
                    .alarms()
                    .check_alarm_channels(&spec.alarm_channels)
                    .await?;
                seen.channels
                    .insert(spec.alarm_channels.clone(), checked.clone());
                checked
            }
        };
        Ok((spec, schedule))
    }

    /// Whether group `id` exists. A group once seen is remembered: jobs are created in the
    /// same few groups over and over, and the database's foreign key still refuses a job of
    /// a group deleted since (see [`Jobs::refused_by_store`]).
    async fn group_exists(self, id: i64, seen: &mut Lookups) -> Result<bool, Error> {
        if let Some(&known) = seen.groups.get(&id) {
            return Ok(known);
        }
        let remembered = self
            .inner
            .known_groups
            .lock()
            .is_ok_and(|g| g.contains(&id));
        let exists = remembered
            || match self.inner.store.group_get(id).await {
                Ok(_) => true,
                Err(tickwork_store::Error::NotFound { .. }) => false,
                Err(e) => return Err(e.into()),
            };
        if exists
            && !remembered
            && let Ok(mut known) = self.inner.known_groups.lock()
        {
            known.insert(id);
        }
        seen.groups.insert(id, exists);
        Ok(exists)
    }

    /// The error of a write the store refused as invalid: when the job's group is gone (the
    /// remembered group was deleted meanwhile), the same field error as before the write.
    async fn refused_by_store(self, group_id: i64, e: Error) -> Error {
        if !matches!(e, Error::Invalid { .. }) {
            return e;
        }
        if let Ok(mut known) = self.inner.known_groups.lock() {
            known.remove(&group_id);
        }
        match self.group_exists(group_id, &mut Lookups::default()).await {
            Ok(false) => no_group(group_id),
            _ => e,
        }
    }

    pub(super) fn first_fire(schedule: &Schedule, now: i64) -> Result<i64, Error> {
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

    /// The first fire of a stored job started at `now`: refused when its schedule does not
    /// parse or cannot start.
    pub(super) fn start_fire(job: &Job, now: i64) -> Result<i64, Error> {
        let schedule = Schedule::parse(
            job.spec.schedule_type,
            &job.spec.schedule_conf,
            &job.spec.time_zone,
        )
        .map_err(|e| invalid("schedule_conf", e))?;
        Self::first_fire(&schedule, now)
    }

    /// The key a new job gets: its own (checked), or a generated one.
    pub(super) fn new_key(input: &JobInput) -> Result<String, Error> {
        Ok(match input.key.as_deref().map(str::trim) {
            Some(k) if !k.is_empty() => {
                job::validate_key(k, &Limits::STANDARD)?;
                k.to_owned()
            }
            _ => format!("job-{:016x}", fastrand::u64(..)),
        })
    }

    /// What the store writes for a new job checked by [`Jobs::job_spec`]: stopped, or
    /// running from its first fire after `now`, with version 1 of its script by `by`.
    pub(super) fn job_create(
        by: &Principal,
        input: &JobInput,
        key: String,
        (spec, schedule): (JobSpec, Schedule),
        now: i64,
    ) -> Result<JobCreate, Error> {
        let (status, next) = if input.start {
            (JobStatus::Running, Some(Self::first_fire(&schedule, now)?))
        } else {
            (JobStatus::Stopped, None)
        };
        let first_script = has_source(spec.glue_type).then(|| FirstScript {
            author: by.username.clone(),
            comment: "created".to_owned(),
        });
        Ok(JobCreate {
            job: JobNew {
                key,
                spec,
                status,
                next_fire_at: next,
                now,
            },
            first_script,
        })
    }

    /// Creates a job in a group the caller may change. A script job's source becomes its
    /// script version 1. The job, its first version and its audit record are written in one
    /// transaction, shared with the creates that arrive meanwhile (group commit).
    pub async fn create(self, by: &Principal, input: JobInput) -> Result<JobView, Error> {
        by.require_group(input.spec.group_id)?;
        let checked = self
            .job_spec(by, &input, None, &mut Lookups::default())
            .await?;
        let key = Self::new_key(&input)?;
        let now = self.inner.clock.now_ms();
        let group_id = checked.0.group_id;
        let create = Self::job_create(by, &input, key, checked, now)?;
        let job = match self
            .inner
            .job_writer
            .create(&self.inner.store, by, create)
            .await
        {
            Ok(job) => job,
            Err(e) => return Err(self.refused_by_store(group_id, e).await),
        };
        // A stopped job has nothing to claim: a claim round for it would be a transaction
        // for nothing, one per request while jobs are created one by one.
        if job.status == JobStatus::Running {
            self.inner.pipeline.wake();
        }
        Ok(job_view(job))
    }

    /// Rewrites a job's definition; both its old and its new group must be the caller's. A
    /// changed script becomes a new script version.
    pub async fn update(self, by: &Principal, id: i64, input: JobInput) -> Result<JobView, Error> {
        let old = self.inner.store.job_get(id).await?;
        by.require_group(old.spec.group_id)?;
        by.require_group(input.spec.group_id)?;
        let (old, new) = self
            .job_write(old, input, by, "edited with the job")
            .await?;
        self.inner
            .audit(by, "job.update", Target::Job(id), Some(&old), Some(&new))
            .await?;
        Ok(new)
    }

    /// Writes a job's new definition (checked) and records a changed script as a version.
    pub(super) async fn job_write(
        self,
        old: Job,
        input: JobInput,
        by: &Principal,
        script_comment: &str,
    ) -> Result<(JobView, JobView), Error> {
        let id = old.id;
        let (spec, schedule) = self
            .job_spec(by, &input, Some(id), &mut Lookups::default())
            .await?;
        if let Some(k) = input.key.as_deref().map(str::trim)
            && !k.is_empty()
            && k != old.key
        {
            return Err(invalid("key", "a job's key cannot change"));
        }
        let now = self.inner.clock.now_ms();
        let schedule_changed = old.spec.schedule_type != spec.schedule_type
            || old.spec.schedule_conf != spec.schedule_conf
            || old.spec.time_zone != spec.time_zone;
        let next = if old.status == JobStatus::Running && schedule_changed {
            Some(Self::first_fire(&schedule, now)?)
        } else {
            old.next_fire_at
        };
        let group_id = spec.group_id;
        let job = match self
            .inner
            .store
            .job_update(JobUpdate {
                id,
                expected_version: None,
                spec,
                next_fire_at: next,
                now,
            })
            .await
        {
            Ok(job) => job,
            Err(e) => return Err(self.refused_by_store(group_id, e.into()).await),
        };
        self.inner.pipeline.forget_job(id);
        if job.status == JobStatus::Running {
            self.inner.pipeline.wake();
        }
        let script_changed = old.spec.glue_type != job.spec.glue_type
            || old.spec.glue_source != job.spec.glue_source;
        if script_changed && has_source(job.spec.glue_type) {
            self.script_version_record(by, &job, script_comment).await?;
        }
        Ok((job_view(old), job_view(job)))
    }

    /// Appends the job's current script as a new version.
    pub(super) async fn script_version_record(
        self,
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
                now: self.inner.clock.now_ms(),
            })
            .await?)
    }

    /// The job, when the caller may change it.
    pub(super) async fn job_for_change(self, by: &Principal, id: i64) -> Result<Job, Error> {
        let job = self.inner.store.job_get(id).await?;
        by.require_group(job.spec.group_id)?;
        Ok(job)
    }

    pub async fn delete(self, by: &Principal, id: i64) -> Result<(), Error> {
        let old = self.job_for_change(by, id).await?;
        self.inner.store.job_delete(id).await?;
        self.inner.pipeline.forget_job(id);
        self.inner
            .audit(
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
    pub async fn copy(self, by: &Principal, id: i64, input: CopyInput) -> Result<JobView, Error> {
        let old = self.job_for_change(by, id).await?;
        let view = job_view(old);
        let mut copy = JobInput::from(&view);
        copy.key = None;
        copy.start = false;
        copy.spec.description = match input.description {
            Some(d) => d,
            None => format!("copy of {}", view.spec.description)
                .chars()
                .take(255)
                .collect(),
        };
        let created = self.create(by, copy).await?;
        self.inner
            .audit(
                by,
                "job.copy",
                Target::Job(created.id),
                Some(&serde_json::json!({ "copied_from": id })),
                Some(&created),
            )
            .await?;
        Ok(created)
    }

    pub async fn get(self, id: i64) -> Result<JobView, Error> {
        Ok(job_view(self.inner.store.job_get(id).await?))
    }

    /// One job by its stable key.
    pub async fn get_by_key(self, key: &str) -> Result<JobView, Error> {
        Ok(job_view(self.inner.store.job_get_by_key(key).await?))
    }

    /// One page of jobs: by group, status and text, in the query's order; `offset`/`limit`
    /// or the HTTP layer's `page`/`size`.
    pub async fn list(self, q: JobQuery) -> Result<Page<JobView>, Error> {
        let filter = job_filter(q)?;
        let req = filter.page;
        let p = self.inner.store.jobs_list(filter).await?;
        Ok(paged(p, req, job_view))
    }

    /// [`Jobs::list`] with each job's last run, found for the whole page at once (not job by job).
    pub async fn list_with_last_runs(self, q: JobQuery) -> Result<Page<JobListItem>, Error> {
        let page = self.list(q).await?;
        let ids: Vec<i64> = page.items.iter().map(|j| j.id).collect();
        let mut last: HashMap<i64, LastRunView> = self
            .inner
            .store
            .runs_last_of_jobs(&ids)
            .await?
            .into_iter()
            .map(|r| {
                let view = LastRunView {
                    id: r.id,
                    state: r.state,
                    scheduled_at: r.scheduled_at,
                    finished_at: r.finished_at,
                };
                (r.job_id, view)
            })
            .collect();
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|job| JobListItem {
                    last_run: last.remove(&job.id),
                    job,
                })
                .collect(),
            total: page.total,
            page: page.page,
            size: page.size,
        })
    }

    /// Starts a job: its next fire is computed from now.
    pub async fn start(self, by: &Principal, id: i64) -> Result<JobView, Error> {
        let job = self.job_for_change(by, id).await?;
        let now = self.inner.clock.now_ms();
        let change = StatusChange {
            id,
            status: JobStatus::Running,
            next_fire_at: Some(Self::start_fire(&job, now)?),
            now,
            before: job_view(job),
        };
        let job = self.set_status(by, change).await?;
        self.inner.pipeline.wake();
        Ok(job_view(job))
    }

    /// Stops a job. Fires already claimed into the timer end as `skipped` when they come due.
    pub async fn stop(self, by: &Principal, id: i64) -> Result<JobView, Error> {
        let change = StatusChange {
            id,
            status: JobStatus::Stopped,
            next_fire_at: None,
            // The pipeline skips fires claimed before this instant, on its clock.
            now: self.inner.clock.now_ms(),
            before: job_view(self.job_for_change(by, id).await?),
        };
        Ok(job_view(self.set_status(by, change).await?))
    }

    /// Writes a start or stop with its audit record, in one transaction with the others
    /// waiting (group commit), and drops the pipeline's copy of the job.
    async fn set_status(self, by: &Principal, change: StatusChange) -> Result<Job, Error> {
        let id = change.id;
        let job = self
            .inner
            .job_writer
            .set_status(&self.inner.store, by, change)
            .await?;
        self.inner.pipeline.forget_job(id);
        Ok(job)
    }

    /// Fires a job once now (manual or API trigger), with its own params or `input.params`,
    /// routed or sent to `input.address`.
    pub async fn trigger(
        self,
        by: &Principal,
        id: i64,
        input: TriggerInput,
        trigger_type: TriggerType,
    ) -> Result<RunView, Error> {
        let job = self.job_for_change(by, id).await?;
        if let Some(p) = &input.params {
            job::validate_params(p, &Limits::STANDARD)?;
        }
        let address = match input.address.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(a) => Some(self.group_address(job.spec.group_id, a).await?),
        };
        let now = self.inner.clock.now_ms();
        let mut new = RunNew::new(id, trigger_type, now);
        new.params = input.params;
        new.executor_address = address;
        new.owner_node = Some(self.inner.config.node_id.clone());
        let run = self.inner.store.run_insert(new).await?;
        self.inner.pipeline.arm(run.clone());
        let view = run_view(run);
        self.inner
            .audit(
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
    async fn group_address(self, group_id: i64, address: &str) -> Result<String, Error> {
        let g = self.inner.store.group_get(group_id).await?;
        let dead_after = self.inner.config.registry.dead_after.as_millis() as i64;
        let live = self
            .inner
            .store
            .registry_live_entries(tickwork_store::LiveQuery {
                app_name: g.app_name.clone(),
                alive_since: self.inner.clock.now_ms() - dead_after,
            })
            .await?
            .into_iter()
            .map(|e| e.address);
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
        self,
        kind: ScheduleType,
        conf: &str,
        zone: Option<&str>,
        n: usize,
    ) -> Result<Vec<i64>, Error> {
        let zone = zone
            .filter(|z| !z.is_empty())
            .unwrap_or(&self.inner.config.default_time_zone);
        let s = Schedule::parse(kind, conf, zone).map_err(|e| invalid("schedule_conf", e))?;
        Ok(s.next_fires(self.inner.clock.now_ms(), n.clamp(1, 100)))
    }
}

/// What the store lists for a job query, every part checked.
fn job_filter(q: JobQuery) -> Result<JobFilter, Error> {
    let status = match q.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(s.parse::<JobStatus>().map_err(|e| invalid("status", e))?),
    };
    let key = match q.sort.as_deref().map(str::trim) {
        None | Some("") => JobSortKey::Id,
        Some(s) => s.parse::<JobSortKey>().map_err(|_| {
            invalid(
                "sort",
                format!("{s:?} is not one of {}", JOB_SORT_KEYS.join(", ")),
            )
        })?,
    };
    let descending = match q.order.as_deref().map(str::trim) {
        None | Some("" | "asc") => false,
        Some("desc") => true,
        Some(o) => return Err(invalid("order", format!("{o:?} is not asc or desc"))),
    };
    Ok(JobFilter {
        group_id: q.group_id,
        status,
        text: q.text.filter(|t| !t.trim().is_empty()),
        sort: JobSort { key, descending },
        page: page(q.offset, q.limit)?,
    })
}

/// The answer to a job of a group that does not exist.
fn no_group(id: i64) -> Error {
    invalid("group_id", format!("executor group {id} does not exist"))
}
