//! The admin's operations, as the executor API, the JSON API, the console and the CLI call them:
//! every input is validated here, once, before anything changes. Every change takes the acting
//! [`Principal`], checks its role here (not in the HTTP handlers or the console), and writes
//! an audit record with the target before and after.

use std::collections::HashMap;

use subtle::ConstantTimeEq;
use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::{GlueType, ScheduleType, TriggerType};
use tickwork_protocol::api::{
    CopyInput, DayRuns, GroupInput, GroupTokenView, GroupView, InstanceView, JobInput, JobQuery,
    JobView, LatenessView, Page, RunQuery, RunView, ScriptInput, ScriptVersionView, StatsView,
    TriggerInput,
};
use tickwork_protocol::{HandleCallbackParam, LogParam, LogResult, RegistryParam};
use tickwork_store::{
    AddressMode, Group, GroupNew, GroupTokenSet, GroupUpdate, Job, JobFilter, JobNew, JobSpec,
    JobStatus, JobStatusChange, JobUpdate, PageReq, RegistryBeat, RegistryKey, Run, RunClear,
    RunComplete, RunFilter, RunKillIntent, RunNew, ScriptVersion, ScriptVersionKey,
    ScriptVersionNew, TimeRange,
};
use tracing::{info, warn};

use crate::audit::Target;
use crate::auth::Principal;
use crate::executor_client::ExecutorClient;
use crate::timer::now_ms;
use crate::{Admin, Error};

/// Who an executor call comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorCaller {
    /// The admin's global token: acts for the groups without a token of their own (and for
    /// app names no group has yet).
    Global,
    /// A group's own token: acts for that group only.
    Group(i64),
}

/// An executor call's caller, with the groups as they were when its token was checked.
pub struct ExecutorAuth {
    caller: ExecutorCaller,
    groups: Vec<Group>,
}

impl ExecutorAuth {
    pub fn caller(&self) -> ExecutorCaller {
        self.caller
    }

    /// The caller a group's executors must be: the group itself when it has a token.
    fn expected(group: Option<&Group>) -> ExecutorCaller {
        match group {
            Some(g) if g.access_token.is_some() => ExecutorCaller::Group(g.id),
            _ => ExecutorCaller::Global,
        }
    }

    /// Whether the caller stands for every group: the global token while no group has a token
    /// of its own. Then no result needs its run's group looked up.
    fn acts_for_every_group(&self) -> bool {
        self.caller == ExecutorCaller::Global
            && self.groups.iter().all(|g| g.access_token.is_none())
    }

    /// Whether the caller may report results of runs of `group_id`.
    fn may_act_for(&self, group_id: i64) -> bool {
        self.caller == Self::expected(self.groups.iter().find(|g| g.id == group_id))
    }

    /// `Forbidden` unless the caller may register or remove executors of `app_name`.
    fn check_app(&self, app_name: &str) -> Result<(), Error> {
        let group = self.groups.iter().find(|g| g.app_name == app_name);
        if self.caller == Self::expected(group) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "registryKey: this access token may not register executors of {app_name:?}"
            )))
        }
    }
}

/// Longest accepted job params, script source and similar texts.
const MAX_TEXT: usize = 64 * 1024;
/// Longest accepted script source.
const MAX_SOURCE: usize = 1024 * 1024;
/// The furthest back "clear runs older than N days" reaches: a hundred years.
pub const MAX_CLEAR_DAYS: i64 = 36_500;

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

pub(crate) fn page(offset: Option<u64>, limit: Option<u64>) -> Result<PageReq, Error> {
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

/// A page of a listing with its `page` number (from 1) and `size`.
pub(crate) fn paged<T, U>(
    p: tickwork_store::Paged<T>,
    req: PageReq,
    f: impl FnMut(T) -> U,
) -> Page<U> {
    Page {
        items: p.items.into_iter().map(f).collect(),
        total: p.total,
        page: req.offset / req.limit + 1,
        size: req.limit,
    }
}

/// The API view of a script version.
fn script_view(v: ScriptVersion) -> ScriptVersionView {
    ScriptVersionView {
        version: v.version,
        glue_type: v.glue_type,
        source: v.source,
        comment: v.comment,
        author: v.author,
        created_at: v.created_at,
    }
}

/// What the audit log keeps of a script version (the source, not the whole job).
fn script_audit(v: &ScriptVersionView) -> serde_json::Value {
    serde_json::json!({
        "version": v.version,
        "glue_type": v.glue_type,
        "source": v.source,
        "comment": v.comment,
    })
}

/// Whether jobs of this glue type carry their source (every glue type, Groovy included:
/// the editor and its versions serve them all; only where they run differs).
pub(crate) fn has_source(t: GlueType) -> bool {
    t != GlueType::Bean
}

pub(crate) fn invalid(field: &str, msg: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("{field}: {msg}"))
}

impl Admin {
    // ---- executor API ----

    /// Who an executor call comes from, by its access token (compared in constant time):
    /// a group's own token, or the global one. `None`: no such token.
    pub async fn executor_auth(&self, token: &str) -> Result<Option<ExecutorAuth>, Error> {
        let groups = self.inner.store.groups_list().await?;
        let presented = token.as_bytes();
        let mut caller = None;
        // Every group's token is compared, so the time taken does not say which matched.
        for g in &groups {
            if let Some(t) = &g.access_token
                && bool::from(t.as_bytes().ct_eq(presented))
            {
                caller = Some(ExecutorCaller::Group(g.id));
            }
        }
        let global = self.inner.config.access_token.as_bytes();
        if caller.is_none() && !presented.is_empty() && bool::from(global.ct_eq(presented)) {
            caller = Some(ExecutorCaller::Global);
        }
        Ok(caller.map(|caller| ExecutorAuth { caller, groups }))
    }

    /// `api/registry`: an executor's heartbeat.
    pub async fn registry_beat(&self, auth: &ExecutorAuth, p: RegistryParam) -> Result<(), Error> {
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
        auth.check_app(&beat.app_name)?;
        self.inner.store.registry_heartbeat(beat.clone()).await?;
        // A new executor becomes routable at its first beat, not after the cache expires.
        self.executor_seen(&beat.app_name, &beat.address);
        Ok(())
    }

    /// `api/registryRemove`: an executor is shutting down. Its address leaves every group's
    /// list at once, so no run goes to it from now on.
    pub async fn registry_remove(
        &self,
        auth: &ExecutorAuth,
        p: RegistryParam,
    ) -> Result<(), Error> {
        if !p.is_complete() {
            return Err(Error::Invalid(
                tickwork_protocol::msg::ILLEGAL_ARGUMENT.into(),
            ));
        }
        let key = RegistryKey {
            app_name: p.registry_key.trim().to_owned(),
            address: p.registry_value.trim().to_owned(),
        };
        auth.check_app(&key.app_name)?;
        self.inner.store.registry_remove(key.clone()).await?;
        info!(app = %key.app_name, address = %key.address, "executor deregistered");
        self.executor_gone(&key.app_name, &key.address);
        Ok(())
    }

    /// `api/callback`: run results. Each is recorded before this returns, so an executor
    /// whose callback was answered with success never needs to resend it. A result for a run
    /// of a group the caller's token does not stand for is refused; the others are recorded,
    /// and the answer names the refused ones.
    pub async fn callbacks(
        &self,
        auth: &ExecutorAuth,
        items: Vec<HandleCallbackParam>,
    ) -> Result<(), Error> {
        let at = now_ms();
        // Callbacks are the hot path of a busy admin: the runs' groups are read only when
        // the token could be refused for some of them.
        let owners: HashMap<i64, i64> = if auth.acts_for_every_group() {
            HashMap::new()
        } else {
            let ids: Vec<i64> = items.iter().map(|i| i.log_id).collect();
            self.inner
                .store
                .runs_groups(&ids)
                .await?
                .into_iter()
                .map(|r| (r.run_id, r.group_id))
                .collect()
        };
        let mut batch = Vec::with_capacity(items.len());
        let mut refused = Vec::new();
        for item in items {
            // Unknown runs go on: the store ignores them, as it does repeated results.
            if let Some(&group_id) = owners.get(&item.log_id)
                && !auth.may_act_for(group_id)
            {
                warn!(
                    log_id = item.log_id,
                    group_id, "callback refused: the run belongs to another executor group"
                );
                refused.push(item.log_id);
                continue;
            }
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
        if !refused.is_empty() {
            return Err(Error::Forbidden(format!(
                "logId: {refused:?} are runs of another executor group; this access token may \
                 not report them (the other results were recorded)"
            )));
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

    /// Creates a group (admins only: groups are what operators' permissions name).
    pub async fn group_create(
        &self,
        by: &Principal,
        input: GroupInput,
    ) -> Result<GroupView, Error> {
        by.require_admin()?;
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
        let view = self.group_view(g).await?;
        self.audit(
            by,
            "group.create",
            Target::Group(view.id),
            None::<&()>,
            Some(&view),
        )
        .await?;
        Ok(view)
    }

    pub async fn group_update(
        &self,
        by: &Principal,
        id: i64,
        input: GroupInput,
    ) -> Result<GroupView, Error> {
        by.require_admin()?;
        let (address_mode, addresses) = Self::group_fields(&input)?;
        let before = self.group_get(id).await?;
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
        let view = self.group_view(g).await?;
        self.audit(
            by,
            "group.update",
            Target::Group(id),
            Some(&before),
            Some(&view),
        )
        .await?;
        Ok(view)
    }

    pub async fn group_delete(&self, by: &Principal, id: i64) -> Result<(), Error> {
        by.require_admin()?;
        let before = self.group_get(id).await?;
        self.inner.store.group_delete(id).await?;
        self.forget_group(id);
        self.audit(
            by,
            "group.delete",
            Target::Group(id),
            Some(&before),
            None::<&()>,
        )
        .await
    }

    /// Gives a group a new executor access token, generated by the operating system's random
    /// generator; the one it had (or, for a group that had none, the global token) stops
    /// working for its executors at once. The token is in this answer only: audit records
    /// and views say just `has_token`. Admins, and operators of the group (they deploy its
    /// executors).
    pub async fn group_rotate_token(
        &self,
        by: &Principal,
        id: i64,
    ) -> Result<GroupTokenView, Error> {
        by.require_group(id)?;
        let before = self.group_get(id).await?;
        // 192 bits; the prefix lets secret scanners recognise a leaked one.
        let token = format!("twg_{}", crate::auth::random_hex(24)?);
        let g = self
            .inner
            .store
            .group_set_token(GroupTokenSet {
                id,
                token: Some(token.clone()),
                now: now_ms(),
            })
            .await?;
        self.forget_group(id);
        let view = self.group_view(g).await?;
        self.audit(
            by,
            "group.token_rotate",
            Target::Group(id),
            Some(&before),
            Some(&view),
        )
        .await?;
        info!(group_id = id, "executor group access token rotated");
        Ok(GroupTokenView {
            group_id: id,
            token,
        })
    }

    /// The client that calls a group's executors, with the group's token as stored now.
    pub(crate) async fn group_client(&self, group_id: i64) -> Result<ExecutorClient, Error> {
        match self.inner.store.group_get(group_id).await {
            Ok(g) => Ok(self.client_for(&g)),
            Err(tickwork_store::Error::NotFound { .. }) => Ok(self.inner.client.clone()),
            Err(e) => Err(e.into()),
        }
    }

    /// The registered instances of a group's app, alive or not yet swept, with their last
    /// heartbeat.
    pub async fn group_instances(&self, id: i64) -> Result<Vec<InstanceView>, Error> {
        let g = self.inner.store.group_get(id).await?;
        let alive_since = now_ms() - self.inner.config.registry.dead_after.as_millis() as i64;
        Ok(self
            .inner
            .store
            .registry_list()
            .await?
            .into_iter()
            .filter(|r| r.app_name == g.app_name)
            .map(|r| InstanceView {
                alive: r.updated_at >= alive_since,
                address: r.address,
                last_heartbeat: r.updated_at,
            })
            .collect())
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
            has_token: g.access_token.is_some(),
            updated_at: g.updated_at,
        })
    }

    // ---- jobs ----

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
        self.wake_scheduler();
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
    async fn job_write(
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
        self.forget_job(id);
        self.wake_scheduler();
        let script_changed = old.spec.glue_type != job.spec.glue_type
            || old.spec.glue_source != job.spec.glue_source;
        if script_changed && has_source(job.spec.glue_type) {
            self.script_version_record(by, &job, script_comment).await?;
        }
        Ok((job_view(old), job_view(job)))
    }

    /// Appends the job's current script as a new version.
    async fn script_version_record(
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
    async fn job_for_change(&self, by: &Principal, id: i64) -> Result<Job, Error> {
        let job = self.inner.store.job_get(id).await?;
        by.require_group(job.spec.group_id)?;
        Ok(job)
    }

    pub async fn job_delete(&self, by: &Principal, id: i64) -> Result<(), Error> {
        let old = self.job_for_change(by, id).await?;
        self.inner.store.job_delete(id).await?;
        self.forget_job(id);
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

    // ---- scripts ----

    /// Every saved version of a job's script, newest first.
    pub async fn script_versions(&self, job_id: i64) -> Result<Vec<ScriptVersionView>, Error> {
        self.inner.store.job_get(job_id).await?;
        Ok(self
            .inner
            .store
            .script_versions_list(job_id)
            .await?
            .into_iter()
            .map(script_view)
            .collect())
    }

    /// Saves a new version of a script job's source (the job runs it from its next run on).
    pub async fn script_save(
        &self,
        by: &Principal,
        job_id: i64,
        input: ScriptInput,
    ) -> Result<ScriptVersionView, Error> {
        let comment = input.comment.trim();
        if comment.chars().count() > 255 {
            return Err(invalid("comment", "must be at most 255 characters"));
        }
        let comment = if comment.is_empty() { "saved" } else { comment };
        self.script_write(
            by,
            job_id,
            input.glue_type,
            input.source,
            comment,
            "script.save",
        )
        .await
    }

    /// Makes an old version of a job's script the current one, as a new version.
    pub async fn script_restore(
        &self,
        by: &Principal,
        job_id: i64,
        version: i64,
    ) -> Result<ScriptVersionView, Error> {
        self.job_for_change(by, job_id).await?;
        let old = self
            .inner
            .store
            .script_version_get(ScriptVersionKey { job_id, version })
            .await?;
        let comment = format!("restored version {version}");
        self.script_write(
            by,
            job_id,
            Some(old.glue_type),
            old.source,
            &comment,
            "script.restore",
        )
        .await
    }

    async fn script_write(
        &self,
        by: &Principal,
        job_id: i64,
        glue_type: Option<GlueType>,
        source: String,
        comment: &str,
        action: &str,
    ) -> Result<ScriptVersionView, Error> {
        let job = self.job_for_change(by, job_id).await?;
        let glue_type = glue_type.unwrap_or(job.spec.glue_type);
        if !has_source(glue_type) {
            return Err(invalid(
                "glue_type",
                format!("{glue_type} has no source to edit; its code is the executor's handler"),
            ));
        }
        let before = self
            .inner
            .store
            .script_versions_list(job_id)
            .await?
            .into_iter()
            .next()
            .map(script_view);
        let mut input = JobInput::from(&job_view(job.clone()));
        input.glue_type = glue_type;
        input.glue_source = source;
        let (_, new) = self.job_write(job, input, by, comment).await?;
        let mut versions = self.inner.store.script_versions_list(job_id).await?;
        let current = match versions.first() {
            // job_write recorded a version unless the script did not change: record it anyway,
            // so that every save shows in the history.
            Some(v) if before.as_ref().is_none_or(|b| b.version != v.version) => versions.remove(0),
            _ => {
                let job = self.inner.store.job_get(new.id).await?;
                self.script_version_record(by, &job, comment).await?
            }
        };
        let after = script_view(current);
        self.audit(
            by,
            action,
            Target::Job(job_id),
            before.as_ref().map(script_audit).as_ref(),
            Some(&script_audit(&after)),
        )
        .await?;
        Ok(after)
    }

    pub async fn job_get(&self, id: i64) -> Result<JobView, Error> {
        Ok(job_view(self.inner.store.job_get(id).await?))
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
        self.forget_job(id);
        self.wake_scheduler();
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
        self.forget_job(id);
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
        self.arm(run.clone());
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

    // ---- runs ----

    pub async fn run_get(&self, id: i64) -> Result<RunView, Error> {
        Ok(run_view(self.inner.store.run_get(id).await?))
    }

    pub async fn runs_list(&self, q: RunQuery) -> Result<Page<RunView>, Error> {
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
    pub fn clear_before_days(&self, days: i64) -> Result<i64, Error> {
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
            .and_then(|back| now_ms().checked_sub(back))
            // Further back than 1970: nothing is that old, and nothing is cleared.
            .map(|before| before.max(1))
            .ok_or_else(out_of_range)
    }

    /// Deletes final runs scheduled before `before`: of one job or group the caller may
    /// change, or (admins only) of every job. Pending runs are never cleared. How many went.
    pub async fn runs_clear(
        &self,
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
        self.audit(by, "runs.clear", Target::Runs, None::<&()>, Some(&what))
            .await?;
        Ok(deleted)
    }

    /// Kills a dispatched run: the kill is recorded, `/kill` goes to its executor, then the
    /// run ends as `killed` (whether the executor's failure report or the kill's answer comes
    /// first), with no retry and no alarm.
    pub async fn run_kill(&self, by: &Principal, id: i64) -> Result<RunView, Error> {
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
        let client = self.group_client(run.group_id).await?;
        // Recorded before `/kill`: the executor reports the killed run as failed, and that
        // callback may reach this or another admin before the kill's answer does.
        let intent = |at| RunKillIntent { run_id: id, at };
        if !self
            .inner
            .store
            .run_kill_intent(intent(Some(now_ms())))
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
        let after = match done {
            Some(r) => run_view(r),
            // The run ended while the kill was on its way.
            None => run_view(self.inner.store.run_get(id).await?),
        };
        self.audit(by, "run.kill", Target::Run(id), Some(&before), Some(&after))
            .await?;
        Ok(after)
    }

    /// A run's log from line `from_line` on, read from its executor. `is_end` is true once
    /// the run is final and nothing new is left.
    pub async fn run_log(&self, id: i64, from_line: i32) -> Result<LogResult, Error> {
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
        log.is_end = log.is_end || (run.state.is_final() && log.from_line_num > log.to_line_num);
        Ok(log)
    }
}

impl Admin {
    // ---- dashboard ----

    /// The dashboard's figures: counts of jobs, groups and live executors, today's runs by
    /// state, runs per day over the last 7 days (admin's zone), and dispatch lateness.
    pub async fn dashboard_stats(&self) -> Result<StatsView, Error> {
        let store = &self.inner.store;
        let count_jobs = |status: Option<JobStatus>| async move {
            Ok::<u64, Error>(
                store
                    .jobs_list(JobFilter {
                        status,
                        page: PageReq::first(1),
                        ..JobFilter::default()
                    })
                    .await?
                    .total,
            )
        };
        let jobs = count_jobs(None).await?;
        let jobs_running = count_jobs(Some(JobStatus::Running)).await?;
        let groups = store.groups_list().await?.len() as u64;
        let now = now_ms();
        let alive_since = now - self.inner.config.registry.dead_after.as_millis() as i64;
        let executors = store
            .registry_list()
            .await?
            .iter()
            .filter(|r| r.updated_at >= alive_since)
            .count() as u64;
        let zone = tickwork_core::schedule::parse_time_zone(&self.inner.config.default_time_zone)?;
        let today = jiff::Timestamp::from_millisecond(now)
            .map_err(|e| Error::Internal(e.to_string()))?
            .to_zoned(zone)
            .start_of_day()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let mut runs_per_day = Vec::with_capacity(7);
        for back in (0..7).rev() {
            let start = today
                .checked_sub(jiff::Span::new().days(back))
                .map_err(|e| Error::Internal(e.to_string()))?;
            let end = start
                .checked_add(jiff::Span::new().days(1))
                .map_err(|e| Error::Internal(e.to_string()))?;
            let counts = store
                .runs_state_counts(TimeRange {
                    from: Some(start.timestamp().as_millisecond()),
                    to: Some(end.timestamp().as_millisecond()),
                })
                .await?;
            runs_per_day.push(DayRuns {
                day: start.timestamp().as_millisecond(),
                by_state: counts
                    .into_iter()
                    .map(|(state, n)| (state.as_str().to_owned(), n))
                    .collect(),
            });
        }
        let runs_today = runs_per_day
            .last()
            .map(|d| d.by_state.clone())
            .unwrap_or_default();
        let lateness = self.inner.metrics.lateness.summary().map(|s| LatenessView {
            count: s.count,
            mean_ms: s.mean_ms,
            p50_ms: s.p50_ms,
            p99_ms: s.p99_ms,
        });
        Ok(StatsView {
            jobs,
            jobs_running,
            groups,
            executors,
            runs_today,
            runs_per_day,
            lateness,
        })
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
