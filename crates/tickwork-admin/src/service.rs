//! The admin's operations, as the executor API, the JSON API, the console and the CLI call them:
//! every input is validated here, once, before anything changes.

use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::{GlueType, ScheduleType, TriggerType};
use tickwork_protocol::api::{
    GroupInput, GroupView, JobInput, JobQuery, JobView, Page, RunQuery, RunView, TriggerInput,
};
use tickwork_protocol::{HandleCallbackParam, LogParam, LogResult, RegistryParam};
use tickwork_store::{
    AddressMode, Group, GroupNew, GroupUpdate, Job, JobFilter, JobNew, JobSpec, JobStatus,
    JobStatusChange, JobUpdate, PageReq, RegistryBeat, RegistryKey, Run, RunComplete, RunFilter,
    RunNew,
};
use tracing::{info, warn};

use crate::timer::now_ms;
use crate::{Admin, Error};

/// Longest accepted job params, script source and similar texts.
const MAX_TEXT: usize = 64 * 1024;
/// Longest accepted script source.
const MAX_SOURCE: usize = 1024 * 1024;

/// The API view of a stored job.
pub(crate) fn job_view(j: Job) -> JobView {
    let s = j.spec;
    JobView {
        id: j.id,
        key: j.key,
        group_id: s.group_id,
        description: s.description,
        owner: s.owner,
        alarm_channels: s.alarm_channels,
        schedule_type: s.schedule_type,
        schedule_conf: s.schedule_conf,
        time_zone: s.time_zone,
        misfire_strategy: s.misfire_strategy,
        route_strategy: s.route_strategy,
        handler: s.handler,
        params: s.params,
        block_strategy: s.block_strategy,
        timeout_s: s.timeout_s,
        retry_count: s.retry_count,
        retry_backoff_ms: s.retry_backoff_ms,
        child_job_ids: s.child_job_ids,
        priority: s.priority,
        glue_type: s.glue_type,
        glue_source: s.glue_source,
        glue_updated_at: j.glue_updated_at,
        status: j.status.as_str().to_owned(),
        next_fire_at: j
            .next_fire_at
            .filter(|&n| n != crate::planner::WAITING_FOR_COMPLETION),
        last_fire_at: j.last_fire_at,
        version: j.version,
        created_at: j.created_at,
        updated_at: j.updated_at,
    }
}

/// The API view of a stored run.
pub(crate) fn run_view(r: Run) -> RunView {
    RunView {
        id: r.id,
        job_id: r.job_id,
        group_id: r.group_id,
        scheduled_at: r.scheduled_at,
        fire_key: r.fire_key,
        trigger_type: r.trigger_type,
        attempt: r.attempt,
        parent_run_id: r.parent_run_id,
        executor_address: r.executor_address,
        handler: r.handler,
        params: r.params,
        shard_index: r.shard_index,
        shard_total: r.shard_total,
        state: r.state,
        trigger_code: r.trigger_code,
        trigger_msg: r.trigger_msg,
        handle_code: r.handle_code,
        handle_msg: r.handle_msg,
        owner_node: r.owner_node,
        created_at: r.created_at,
        dispatched_at: r.dispatched_at,
        finished_at: r.finished_at,
    }
}

fn page(offset: Option<u64>, limit: Option<u64>) -> Result<PageReq, Error> {
    let limit = limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(Error::Invalid(format!(
            "limit: {limit} is out of range 1-1000"
        )));
    }
    Ok(PageReq {
        offset: offset.unwrap_or(0),
        limit,
    })
}

fn invalid(field: &str, msg: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("{field}: {msg}"))
}

impl Admin {
    // ---- executor API ----

    /// `api/registry`: an executor's heartbeat.
    pub async fn registry_beat(&self, p: RegistryParam) -> Result<(), Error> {
        if !p.is_complete() {
            return Err(Error::Invalid(
                tickwork_protocol::msg::ILLEGAL_ARGUMENT.into(),
            ));
        }
        let beat = RegistryBeat {
            app_name: p.registry_key.trim().to_owned(),
            address: p.registry_value.trim().to_owned(),
            now: now_ms(),
        };
        self.inner.store.registry_heartbeat(beat.clone()).await?;
        // A new executor becomes routable at its first beat, not after the cache expires.
        self.executor_seen(&beat.app_name, &beat.address);
        Ok(())
    }

    /// `api/registryRemove`: an executor is shutting down. Its address leaves every group's
    /// list at once, so no run goes to it from now on.
    pub async fn registry_remove(&self, p: RegistryParam) -> Result<(), Error> {
        if !p.is_complete() {
            return Err(Error::Invalid(
                tickwork_protocol::msg::ILLEGAL_ARGUMENT.into(),
            ));
        }
        let key = RegistryKey {
            app_name: p.registry_key.trim().to_owned(),
            address: p.registry_value.trim().to_owned(),
        };
        self.inner.store.registry_remove(key.clone()).await?;
        info!(app = %key.app_name, address = %key.address, "executor deregistered");
        self.executor_gone(&key.app_name, &key.address);
        Ok(())
    }

    /// `api/callback`: run results. Each is recorded before this returns, so an executor
    /// whose callback was answered with success never needs to resend it.
    pub async fn callbacks(&self, items: Vec<HandleCallbackParam>) -> Result<(), Error> {
        let at = now_ms();
        let mut batch = Vec::with_capacity(items.len());
        for item in items {
            let Some(state) = RunState::from_handle_code(item.handle_code) else {
                warn!(
                    log_id = item.log_id,
                    code = item.handle_code,
                    "callback without a final code ignored"
                );
                continue;
            };
            batch.push(RunComplete {
                run_id: item.log_id,
                handle_code: item.handle_code,
                handle_msg: item.handle_msg,
                state,
                at,
            });
        }
        let done = self.complete_many(&batch).await?;
        if done < batch.len() {
            info!(
                ignored = batch.len() - done,
                "repeated or unknown callbacks ignored"
            );
        }
        Ok(())
    }

    // ---- groups ----

    fn group_fields(input: &GroupInput) -> Result<(AddressMode, Vec<String>), Error> {
        let app = input.app_name.trim();
        if app.is_empty() || app.len() > 64 {
            return Err(invalid("app_name", "must be 1 to 64 characters"));
        }
        if input.title.len() > 64 {
            return Err(invalid("title", "must be at most 64 characters"));
        }
        let mode = match input.address_mode.as_deref().unwrap_or("auto") {
            "auto" => AddressMode::Auto,
            "manual" => AddressMode::Manual,
            other => {
                return Err(invalid(
                    "address_mode",
                    format!("{other:?} is not one of auto manual"),
                ));
            }
        };
        let mut addresses = Vec::new();
        for a in &input.addresses {
            let a = a.trim();
            if !(a.starts_with("http://") || a.starts_with("https://")) {
                return Err(invalid(
                    "addresses",
                    format!("{a:?} must start with http:// or https://"),
                ));
            }
            addresses.push(a.to_owned());
        }
        if mode == AddressMode::Manual && addresses.is_empty() {
            return Err(invalid(
                "addresses",
                "a manual group needs at least one address",
            ));
        }
        Ok((mode, addresses))
    }

    pub async fn group_create(&self, input: GroupInput) -> Result<GroupView, Error> {
        let (address_mode, addresses) = Self::group_fields(&input)?;
        let g = self
            .inner
            .store
            .group_create(GroupNew {
                app_name: input.app_name.trim().to_owned(),
                title: input.title,
                address_mode,
                addresses,
                now: now_ms(),
            })
            .await?;
        self.group_view(g).await
    }

    pub async fn group_update(&self, id: i64, input: GroupInput) -> Result<GroupView, Error> {
        let (address_mode, addresses) = Self::group_fields(&input)?;
        let g = self
            .inner
            .store
            .group_update(GroupUpdate {
                id,
                app_name: input.app_name.trim().to_owned(),
                title: input.title,
                address_mode,
                addresses,
                now: now_ms(),
            })
            .await?;
        self.forget_group(id);
        self.group_view(g).await
    }

    pub async fn group_delete(&self, id: i64) -> Result<(), Error> {
        self.inner.store.group_delete(id).await?;
        self.forget_group(id);
        Ok(())
    }

    pub async fn group_get(&self, id: i64) -> Result<GroupView, Error> {
        let g = self.inner.store.group_get(id).await?;
        self.group_view(g).await
    }

    pub async fn groups_list(&self) -> Result<Vec<GroupView>, Error> {
        let mut out = Vec::new();
        for g in self.inner.store.groups_list().await? {
            out.push(self.group_view(g).await?);
        }
        Ok(out)
    }

    async fn group_view(&self, g: Group) -> Result<GroupView, Error> {
        self.forget_group(g.id);
        let live = self.addresses(g.id).await?;
        Ok(GroupView {
            id: g.id,
            app_name: g.app_name,
            title: g.title,
            address_mode: g.address_mode.as_str().to_owned(),
            addresses: g.addresses,
            live_addresses: live.as_ref().clone(),
            updated_at: g.updated_at,
        })
    }

    // ---- jobs ----

    /// Checks a job definition and turns it into the stored spec with its parsed schedule.
    async fn job_spec(
        &self,
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
        if i.glue_type.is_script() && i.glue_source.trim().is_empty() {
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

    pub async fn job_create(&self, input: JobInput) -> Result<JobView, Error> {
        let (spec, schedule) = self.job_spec(&input, None).await?;
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
        self.wake_scheduler();
        Ok(job_view(job))
    }

    pub async fn job_update(&self, id: i64, input: JobInput) -> Result<JobView, Error> {
        let old = self.inner.store.job_get(id).await?;
        let (spec, schedule) = self.job_spec(&input, Some(id)).await?;
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
        self.forget_job(id);
        self.wake_scheduler();
        Ok(job_view(job))
    }

    pub async fn job_delete(&self, id: i64) -> Result<(), Error> {
        self.inner.store.job_delete(id).await?;
        self.forget_job(id);
        Ok(())
    }

    pub async fn job_get(&self, id: i64) -> Result<JobView, Error> {
        Ok(job_view(self.inner.store.job_get(id).await?))
    }

    pub async fn jobs_list(&self, q: JobQuery) -> Result<Page<JobView>, Error> {
        let status = match q.status.as_deref() {
            None | Some("") => None,
            Some(s) => Some(s.parse::<JobStatus>().map_err(|e| invalid("status", e))?),
        };
        let p = self
            .inner
            .store
            .jobs_list(JobFilter {
                group_id: q.group_id,
                status,
                text: q.text.filter(|t| !t.trim().is_empty()),
                page: page(q.offset, q.limit)?,
            })
            .await?;
        Ok(Page {
            items: p.items.into_iter().map(job_view).collect(),
            total: p.total,
        })
    }

    /// Starts a job: its next fire is computed from now.
    pub async fn job_start(&self, id: i64) -> Result<JobView, Error> {
        let job = self.inner.store.job_get(id).await?;
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
        self.forget_job(id);
        self.wake_scheduler();
        Ok(job_view(job))
    }

    /// Stops a job. Fires already claimed into the timer end as `skipped` when they come due.
    pub async fn job_stop(&self, id: i64) -> Result<JobView, Error> {
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
        self.forget_job(id);
        Ok(job_view(job))
    }

    /// Fires a job once now (manual or API trigger), with its own params or `input.params`,
    /// routed or sent to `input.address`.
    pub async fn job_trigger(
        &self,
        id: i64,
        input: TriggerInput,
        trigger_type: TriggerType,
    ) -> Result<RunView, Error> {
        if let Some(p) = &input.params
            && p.len() > MAX_TEXT
        {
            return Err(invalid("params", "must be at most 64 KiB"));
        }
        let address = match input.address.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(a) if a.starts_with("http://") || a.starts_with("https://") => Some(a.to_owned()),
            Some(a) => {
                return Err(invalid(
                    "address",
                    format!("{a:?} must start with http:// or https://"),
                ));
            }
        };
        let now = now_ms();
        let mut new = RunNew::new(id, trigger_type, now);
        new.params = input.params;
        new.executor_address = address;
        new.owner_node = Some(self.inner.config.node_id.clone());
        let run = self.inner.store.run_insert(new).await?;
        self.arm(run.clone());
        Ok(run_view(run))
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

    // ---- runs ----

    pub async fn run_get(&self, id: i64) -> Result<RunView, Error> {
        Ok(run_view(self.inner.store.run_get(id).await?))
    }

    pub async fn runs_list(&self, q: RunQuery) -> Result<Page<RunView>, Error> {
        let state = match q.state.as_deref() {
            None | Some("") => None,
            Some(s) => Some(s.parse::<RunState>().map_err(|e| invalid("state", e))?),
        };
        let p = self
            .inner
            .store
            .runs_list(RunFilter {
                job_id: q.job_id,
                group_id: q.group_id,
                state,
                range: tickwork_store::TimeRange {
                    from: q.from,
                    to: q.to,
                },
                page: page(q.offset, q.limit)?,
            })
            .await?;
        Ok(Page {
            items: p.items.into_iter().map(run_view).collect(),
            total: p.total,
        })
    }

    /// Kills a dispatched run: `/kill` on its executor, then the run ends as `killed`.
    pub async fn run_kill(&self, id: i64) -> Result<RunView, Error> {
        let run = self.inner.store.run_get(id).await?;
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
        let out = self.inner.client.kill(&address, run.job_id as i32).await;
        if !out.is_success() {
            return Err(Error::Executor(format!(
                "executor {address} refused the kill: {}",
                out.msg.unwrap_or_default()
            )));
        }
        let msg = format!("killed by operator: {}", out.msg.unwrap_or_default());
        let done = self
            .complete(RunComplete {
                run_id: id,
                handle_code: tickwork_protocol::CODE_FAIL,
                handle_msg: Some(msg),
                state: RunState::Killed,
                at: now_ms(),
            })
            .await?;
        match done {
            Some(r) => Ok(run_view(r)),
            // The run ended while the kill was on its way.
            None => Ok(run_view(self.inner.store.run_get(id).await?)),
        }
    }

    /// A run's log from line `from_line` on, read from its executor. `is_end` is true once
    /// the run is final and nothing new is left.
    pub async fn run_log(&self, id: i64, from_line: i32) -> Result<LogResult, Error> {
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
            .client
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
        log.is_end = log.is_end || (run.state.is_final() && log.from_line_num > log.to_line_num);
        Ok(log)
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
