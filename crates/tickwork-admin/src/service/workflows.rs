//! Workflows: definitions checked whole before anything is saved (the DAG's rules, every
//! node's job known and in a group the author may change), and fires that write an instance
//! with its first nodes' runs in one transaction. What follows a node's end is the pipeline's
//! (`pipeline::workflows`).

use std::collections::HashMap;

use tickwork_core::job::Limits;
use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::workflow::context;
use tickwork_core::workflow::step::{self, InstanceState, NodeState};
use tickwork_core::workflow::{Dag, Graph, Snapshot};
use tickwork_core::{ScheduleType, TriggerType, job};
use tickwork_protocol::workflows::{
    InstanceNode, InstanceSummary, InstanceView, WorkflowInput, WorkflowView,
};
use tickwork_store::{
    Group, InstanceStep, InstanceWithRuns, JobStatus, Run, Workflow, WorkflowDef, WorkflowNew,
    WorkflowStatusChange, WorkflowUpdate,
};
use tracing::warn;

use super::Inner;
use super::audit::Target;
use crate::Error;
use crate::auth::Principal;
use crate::pipeline::workflows::{apply, node_runs, prepare, skip_planned};

/// Workflows, borrowed from a [`crate::Service`].
#[derive(Clone, Copy)]
pub struct Workflows<'a> {
    pub(super) inner: &'a Inner,
}

impl Workflows<'_> {
    /// Creates a workflow in the group named `input.group`, which `by` must be allowed to
    /// change, as must every node's job's group.
    pub async fn create(self, by: &Principal, input: WorkflowInput) -> Result<WorkflowView, Error> {
        let enabled = input.enabled;
        let (def, group) = self.checked(by, input).await?;
        let now = self.inner.clock.now_ms();
        let (status, next_fire_at) = schedule_state(&def, enabled, now)?;
        let created = self
            .inner
            .store
            .workflow_create(WorkflowNew {
                def,
                status,
                next_fire_at,
                now,
            })
            .await?;
        let view = view(created, &group)?;
        self.inner
            .audit(
                by,
                "workflow.create",
                Target::Workflow(view.id),
                None::<&()>,
                Some(&view),
            )
            .await?;
        Ok(view)
    }

    /// Rewrites the workflow `key`; running instances keep the DAG they started with.
    pub async fn update(
        self,
        by: &Principal,
        key: &str,
        input: WorkflowInput,
    ) -> Result<WorkflowView, Error> {
        let there = self.get_by_key(key).await?;
        by.require_group(there.def.group_id)?;
        if input.key != key {
            return Err(Error::invalid_field(
                "key",
                "a workflow's key cannot change",
            ));
        }
        let before = self.view_of(there.clone()).await?;
        let enabled = input.enabled;
        let (def, group) = self.checked(by, input).await?;
        let now = self.inner.clock.now_ms();
        let schedule_changed = def.schedule_type != there.def.schedule_type
            || def.schedule_conf != there.def.schedule_conf
            || def.time_zone != there.def.time_zone
            || (enabled != (there.status == JobStatus::Running)
                && def.schedule_type != ScheduleType::None);
        let (status, next_fire_at) = if schedule_changed {
            schedule_state(&def, enabled, now)?
        } else {
            (there.status, there.next_fire_at)
        };
        let updated = self
            .inner
            .store
            .workflow_update(WorkflowUpdate {
                id: there.id,
                expected_version: Some(there.version),
                def,
                next_fire_at,
                now,
            })
            .await?;
        let updated = if updated.status == status {
            updated
        } else {
            self.inner
                .store
                .workflow_set_status(WorkflowStatusChange {
                    id: updated.id,
                    status,
                    next_fire_at,
                    now,
                })
                .await?
        };
        let view = view(updated, &group)?;
        self.inner
            .audit(
                by,
                "workflow.update",
                Target::Workflow(view.id),
                Some(&before),
                Some(&view),
            )
            .await?;
        Ok(view)
    }

    /// Deletes the workflow `key` with its ended instances; refused while one is live.
    pub async fn delete(self, by: &Principal, key: &str) -> Result<WorkflowView, Error> {
        let there = self.get_by_key(key).await?;
        by.require_group(there.def.group_id)?;
        let deleted = self.inner.store.workflow_delete(there.id).await?;
        let view = self.view_of(deleted).await?;
        self.inner
            .audit(
                by,
                "workflow.delete",
                Target::Workflow(view.id),
                Some(&view),
                None::<&()>,
            )
            .await?;
        Ok(view)
    }

    /// The workflow `key`.
    pub async fn get(self, key: &str) -> Result<WorkflowView, Error> {
        let wf = self.get_by_key(key).await?;
        self.view_of(wf).await
    }

    /// The workflow with id `id` (an instance's).
    pub async fn get_by_id(self, id: i64) -> Result<WorkflowView, Error> {
        let wf = match self.inner.store.workflow_get(id).await {
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(Error::NotFound(format!("workflow {id} not found")));
            }
            other => other?,
        };
        self.view_of(wf).await
    }

    /// Every workflow, by key.
    pub async fn list(self) -> Result<Vec<WorkflowView>, Error> {
        let groups: HashMap<i64, Group> = self
            .inner
            .store
            .groups_list()
            .await?
            .into_iter()
            .map(|g| (g.id, g))
            .collect();
        let mut out = Vec::new();
        for wf in self.inner.store.workflows_list().await? {
            let group = groups
                .get(&wf.def.group_id)
                .ok_or_else(|| Error::Internal(format!("workflow {} has no group", wf.def.key)))?;
            out.push(view(wf, group)?);
        }
        Ok(out)
    }

    /// Fires the workflow `key` now with `params` (the context's `params`): an instance
    /// with its first nodes' runs, or queued or skipped past the workflow's cap. The nodes'
    /// jobs are resolved now, into the instance's snapshot.
    pub async fn run(
        self,
        by: &Principal,
        key: &str,
        params: &str,
        trigger_type: TriggerType,
    ) -> Result<InstanceView, Error> {
        job::validate_params(params, &Limits::STANDARD)?;
        let wf = self.get_by_key(key).await?;
        by.require_group(wf.def.group_id)?;
        let now = self.inner.clock.now_ms();
        let node_id = &self.inner.config.node_id;
        let store = &*self.inner.store;
        let (start, jobs) = prepare(store, &wf, params, trigger_type, None, node_id, now).await?;
        for job in &jobs {
            by.require_group(job.spec.group_id)?;
        }
        let started = store.workflow_instance_start(start).await?;
        for run in started.runs.iter().cloned() {
            self.inner.pipeline.arm(run);
        }
        let admitted = match started.admitted {
            step::Admit::Start => "started",
            step::Admit::Queue => "queued",
            step::Admit::Skip => "skipped",
        };
        let Some(instance) = started.instance else {
            return Err(Error::Conflict(format!(
                "workflow {key:?} has {} instance(s) running: this fire is skipped",
                wf.def.max_instances
            )));
        };
        let mut view = self.instance(instance.id).await?;
        view.admitted = Some(admitted.to_owned());
        self.inner
            .audit(
                by,
                "workflow.run",
                Target::WorkflowInstance(view.id),
                None::<&()>,
                Some(&view),
            )
            .await?;
        Ok(view)
    }

    /// The workflow `key`'s newest instances, at most `limit` (1 to 1000, 50 by default).
    pub async fn instances(
        self,
        key: &str,
        limit: Option<u64>,
    ) -> Result<Vec<InstanceSummary>, Error> {
        let wf = self.get_by_key(key).await?;
        let limit = limit.unwrap_or(50);
        if !(1..=1000).contains(&limit) {
            return Err(Error::invalid_field("limit", "must be 1 to 1000"));
        }
        let list = self
            .inner
            .store
            .workflow_instances_list(tickwork_store::InstancesQuery {
                workflow_id: Some(wf.id),
                states: Vec::new(),
                limit,
            })
            .await?;
        Ok(list
            .into_iter()
            .map(|i| InstanceSummary {
                id: i.id,
                workflow_id: i.workflow_id,
                state: i.state,
                trigger_type: i.trigger_type.as_str().to_owned(),
                fire_key: i.fire_key,
                created_at: i.created_at,
                ended_at: i.ended_at,
            })
            .collect())
    }

    /// One instance, node by node.
    pub async fn instance(self, id: i64) -> Result<InstanceView, Error> {
        let read = match self.inner.store.workflow_instance_get(id).await {
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(Error::NotFound(format!("workflow instance {id} not found")));
            }
            other => other?,
        };
        instance_view(read)
    }

    /// Stops instance `id`: its running nodes' runs are killed (a planned one skipped), the
    /// nodes not started stopped, the instance `STOPPED`.
    pub async fn stop(self, by: &Principal, id: i64) -> Result<InstanceView, Error> {
        until_written(id, || self.stop_once(by, id)).await
    }

    async fn stop_once(self, by: &Principal, id: i64) -> Result<Option<InstanceView>, Error> {
        let (read, _) = self.for_change(by, id).await?;
        let i = &read.instance;
        if i.state.is_final() {
            return Err(Error::Conflict(format!(
                "workflow instance {id} is {}, not running",
                i.state
            )));
        }
        let halt = step::stop(&i.nodes);
        let mut nodes = i.nodes.clone();
        apply(&mut nodes, &halt);
        let current = current_runs(&read);
        let before = instance_view(read.clone())?;
        let written = self
            .write(&read, InstanceState::Stopped, nodes, None, Vec::new())
            .await?;
        if written.is_none() {
            return Ok(None);
        }
        for n in halt.kill {
            if let Some(run) = current.get(&n) {
                self.end_run(by, run).await;
            }
        }
        let view = self.instance(id).await?;
        self.inner
            .audit(
                by,
                "workflow.stop",
                Target::WorkflowInstance(id),
                Some(&before),
                Some(&view),
            )
            .await?;
        Ok(Some(view))
    }

    /// Resumes a failed or stopped instance: its succeeded nodes (runs and context) are kept,
    /// the others decided anew, the ones whose parents are done started now.
    pub async fn resume(self, by: &Principal, id: i64) -> Result<InstanceView, Error> {
        until_written(id, || self.resume_once(by, id)).await
    }

    async fn resume_once(self, by: &Principal, id: i64) -> Result<Option<InstanceView>, Error> {
        let (read, snapshot) = self.for_change(by, id).await?;
        let nodes = step::resume(read.instance.state, &read.instance.nodes)
            .map_err(|e| Error::Conflict(e.to_string()))?;
        self.go_on(by, "workflow.resume", read, snapshot, nodes)
            .await
    }

    /// Marks node `node` of instance `id` succeeded (a failed, skipped or stopped one); in a
    /// running instance the nodes after it go on at once, in an ended one when resumed.
    pub async fn mark_succeeded(
        self,
        by: &Principal,
        id: i64,
        node: &str,
    ) -> Result<InstanceView, Error> {
        until_written(id, || self.mark_succeeded_once(by, id, node)).await
    }

    async fn mark_succeeded_once(
        self,
        by: &Principal,
        id: i64,
        node: &str,
    ) -> Result<Option<InstanceView>, Error> {
        let (read, snapshot) = self.for_change(by, id).await?;
        let i = node_index(&snapshot, node)?;
        let nodes = step::mark_succeeded(read.instance.state, &read.instance.nodes, i)
            .map_err(|e| Error::Conflict(e.to_string()))?;
        if read.instance.state.is_final() {
            let before = instance_view(read.clone())?;
            let state = read.instance.state;
            let Some(view) = self
                .write(&read, state, nodes, read.instance.ended_at, Vec::new())
                .await?
            else {
                return Ok(None);
            };
            self.inner
                .audit(
                    by,
                    "workflow.mark",
                    Target::WorkflowInstance(id),
                    Some(&before),
                    Some(&view),
                )
                .await?;
            return Ok(Some(view));
        }
        self.go_on(by, "workflow.mark", read, snapshot, nodes).await
    }

    /// Runs node `node` of an ended instance again; the nodes after it that did not succeed
    /// wait for it again, and the instance runs until they are done.
    pub async fn rerun(self, by: &Principal, id: i64, node: &str) -> Result<InstanceView, Error> {
        until_written(id, || self.rerun_once(by, id, node)).await
    }

    async fn rerun_once(
        self,
        by: &Principal,
        id: i64,
        node: &str,
    ) -> Result<Option<InstanceView>, Error> {
        let (read, snapshot) = self.for_change(by, id).await?;
        let graph = Graph::new(&snapshot.dag, &Limits::STANDARD)?;
        let i = node_index(&snapshot, node)?;
        let nodes = step::rerun(&graph, read.instance.state, &read.instance.nodes, i)
            .map_err(|e| Error::Conflict(e.to_string()))?;
        let ctx = context::from_json(&read.instance.context);
        let now = self.inner.clock.now_ms();
        let start = step::Step {
            start: vec![i],
            ..step::Step::default()
        };
        let runs = node_runs(&snapshot, &start, &ctx, &self.inner.config.node_id, now);
        let before = instance_view(read.clone())?;
        let Some(view) = self
            .write(&read, InstanceState::Running, nodes, None, runs)
            .await?
        else {
            return Ok(None);
        };
        self.inner
            .audit(
                by,
                "workflow.rerun",
                Target::WorkflowInstance(id),
                Some(&before),
                Some(&view),
            )
            .await?;
        Ok(Some(view))
    }

    /// Writes `nodes` into the instance, running, and starts what follows from them; `None`
    /// when the instance changed since `read`.
    async fn go_on(
        self,
        by: &Principal,
        action: &str,
        read: InstanceWithRuns,
        snapshot: Snapshot,
        mut nodes: Vec<NodeState>,
    ) -> Result<Option<InstanceView>, Error> {
        let graph = Graph::new(&snapshot.dag, &Limits::STANDARD)?;
        let next = step::advance(&snapshot.dag, &graph, &nodes, snapshot.failure_policy);
        apply(&mut nodes, &next);
        let ctx = context::from_json(&read.instance.context);
        let now = self.inner.clock.now_ms();
        let runs = node_runs(&snapshot, &next, &ctx, &self.inner.config.node_id, now);
        let state = next.end.unwrap_or(InstanceState::Running);
        let before = instance_view(read.clone())?;
        let Some(view) = self
            .write(&read, state, nodes, next.end.map(|_| now), runs)
            .await?
        else {
            return Ok(None);
        };
        let id = view.id;
        self.inner
            .audit(
                by,
                action,
                Target::WorkflowInstance(id),
                Some(&before),
                Some(&view),
            )
            .await?;
        Ok(Some(view))
    }

    /// Writes an operator's step at the version read and arms its runs; the instance now, or
    /// `None` when it changed since `read` (nothing written).
    async fn write(
        self,
        read: &InstanceWithRuns,
        state: InstanceState,
        nodes: Vec<NodeState>,
        ended_at: Option<i64>,
        runs: Vec<tickwork_store::NodeRunNew>,
    ) -> Result<Option<InstanceView>, Error> {
        let i = &read.instance;
        let ended_at = if state.is_final() {
            ended_at.or(Some(self.inner.clock.now_ms()))
        } else {
            None
        };
        let stepped = match self
            .inner
            .store
            .workflow_instance_step(InstanceStep {
                id: i.id,
                expected_version: i.version,
                state,
                nodes,
                context: i.context.clone(),
                ended_at,
                runs,
            })
            .await
        {
            Err(tickwork_store::Error::Conflict(_)) => return Ok(None),
            other => other?,
        };
        for run in stepped.runs {
            self.inner.pipeline.arm(run);
        }
        self.instance(i.id).await.map(Some)
    }

    /// Ends a node's run that its instance no longer waits for: kills a dispatched one, skips
    /// one not sent yet. A run that ended meanwhile is left as it is.
    async fn end_run(self, by: &Principal, run: &Run) {
        let outcome = match run.state {
            RunState::Dispatched => self.inner.runs().kill(by, run.id).await.map(|_| ()),
            RunState::Planned => {
                let at = self.inner.clock.now_ms();
                skip_planned(
                    &*self.inner.store,
                    run,
                    "its workflow instance was stopped",
                    at,
                )
                .await
                .map_err(Error::from)
            }
            _ => Ok(()),
        };
        if let Err(e) = outcome {
            warn!(run_id = run.id, error = %e, "a stopped instance's run was not ended");
        }
    }

    /// Instance `id` with its snapshot, its workflow's group one `by` may change.
    async fn for_change(
        self,
        by: &Principal,
        id: i64,
    ) -> Result<(InstanceWithRuns, Snapshot), Error> {
        let read = match self.inner.store.workflow_instance_get(id).await {
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(Error::NotFound(format!("workflow instance {id} not found")));
            }
            other => other?,
        };
        let wf = self
            .inner
            .store
            .workflow_get(read.instance.workflow_id)
            .await?;
        by.require_group(wf.def.group_id)?;
        let snapshot = snapshot_of(&read.instance)?;
        Ok((read, snapshot))
    }

    /// The id of `job_key`'s job for node `node` (its group one `by` may change).
    async fn node_job(self, by: &Principal, node: &str, job_key: &str) -> Result<i64, Error> {
        match self.inner.store.job_get_by_key(job_key).await {
            Ok(job) => {
                by.require_group(job.spec.group_id)?;
                Ok(job.id)
            }
            Err(tickwork_store::Error::NotFound { .. }) => Err(Error::invalid_field(
                "dag",
                format!("node {node:?}: no job has the key {job_key:?}"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// `input` checked whole: the DAG's rules, the group, every node's job.
    async fn checked(
        self,
        by: &Principal,
        input: WorkflowInput,
    ) -> Result<(WorkflowDef, Group), Error> {
        tickwork_core::workflow::check_key(&input.key).map_err(|e| {
            Error::invalid_field(
                "key",
                e.to_string().replacen("nodes: node key", "workflow key", 1),
            )
        })?;
        if input.name.trim().is_empty() || input.name.chars().count() > 255 {
            return Err(Error::invalid_field("name", "must be 1 to 255 characters"));
        }
        if !(1..=1000).contains(&input.max_instances) {
            return Err(Error::invalid_field(
                "max_instances",
                format!("{} must be 1 to 1000", input.max_instances),
            ));
        }
        let group = match self.inner.store.group_get_by_app_name(&input.group).await {
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(Error::invalid_field(
                    "group",
                    format!("no executor group is named {:?}", input.group),
                ));
            }
            other => other?,
        };
        by.require_group(group.id)?;
        Graph::new(&input.dag, &Limits::STANDARD).map_err(dag_error)?;
        for node in &input.dag.nodes {
            self.node_job(by, &node.key, &node.job).await?;
        }
        let dag = serde_json::to_string(&input.dag)
            .map_err(|e| Error::Internal(format!("a DAG did not serialize: {e}")))?;
        let time_zone = input
            .time_zone
            .map(|z| z.trim().to_owned())
            .filter(|z| !z.is_empty())
            .unwrap_or_else(|| self.inner.config.default_time_zone.clone());
        if matches!(
            input.schedule_type,
            ScheduleType::FixDelay | ScheduleType::CronAfterEnd
        ) {
            return Err(Error::invalid_field(
                "schedule_type",
                "a workflow is scheduled by NONE, CRON, FIX_RATE or ONCE",
            ));
        }
        Schedule::parse(input.schedule_type, &input.schedule_conf, &time_zone).map_err(
            |e| match e {
                tickwork_core::Error::TimeZone(_) => Error::invalid_field("time_zone", e),
                e => Error::invalid_field("schedule_conf", e),
            },
        )?;
        Ok((
            WorkflowDef {
                key: input.key,
                name: input.name.trim().to_owned(),
                group_id: group.id,
                dag,
                failure_policy: input.failure_policy,
                max_instances: input.max_instances,
                overflow: input.overflow,
                schedule_type: input.schedule_type,
                schedule_conf: input.schedule_conf.trim().to_owned(),
                time_zone,
                misfire_strategy: input.misfire_strategy,
            },
            group,
        ))
    }

    async fn get_by_key(self, key: &str) -> Result<Workflow, Error> {
        match self.inner.store.workflow_get_by_key(key).await {
            Err(tickwork_store::Error::NotFound { .. }) => {
                Err(Error::NotFound(format!("workflow {key:?} not found")))
            }
            other => Ok(other?),
        }
    }

    async fn view_of(self, wf: Workflow) -> Result<WorkflowView, Error> {
        let group = self.inner.store.group_get(wf.def.group_id).await?;
        view(wf, &group)
    }
}

/// A workflow's status and next fire at `now`: running from its schedule's first fire after
/// `now` when enabled and scheduled, stopped otherwise.
fn schedule_state(
    def: &WorkflowDef,
    enabled: bool,
    now: i64,
) -> Result<(JobStatus, Option<i64>), Error> {
    if !enabled || def.schedule_type == ScheduleType::None {
        return Ok((JobStatus::Stopped, None));
    }
    let schedule = Schedule::parse(def.schedule_type, &def.schedule_conf, &def.time_zone)
        .map_err(|e| Error::invalid_field("schedule_conf", e))?;
    match schedule.next_after(now) {
        Some(next) => Ok((JobStatus::Running, Some(next))),
        None => Err(Error::invalid_field(
            "schedule_conf",
            "the schedule has no fire in the future",
        )),
    }
}

/// A DAG's error named by its field under `dag`.
fn dag_error(e: tickwork_core::Error) -> Error {
    match e {
        tickwork_core::Error::Invalid { field, message } => {
            Error::invalid_field(format!("dag.{field}"), message)
        }
        e => Error::invalid_field("dag", e),
    }
}

fn dag_of(wf: &Workflow) -> Result<Dag, Error> {
    serde_json::from_str(&wf.def.dag).map_err(|e| {
        Error::Internal(format!(
            "workflow {} holds an unreadable DAG: {e}",
            wf.def.key
        ))
    })
}

fn view(wf: Workflow, group: &Group) -> Result<WorkflowView, Error> {
    let dag = dag_of(&wf)?;
    Ok(WorkflowView {
        id: wf.id,
        key: wf.def.key,
        name: wf.def.name,
        group: group.app_name.clone(),
        dag,
        failure_policy: wf.def.failure_policy,
        max_instances: wf.def.max_instances,
        overflow: wf.def.overflow,
        schedule_type: wf.def.schedule_type,
        schedule_conf: wf.def.schedule_conf,
        time_zone: wf.def.time_zone,
        misfire_strategy: wf.def.misfire_strategy,
        // A workflow with no schedule has nothing to pause: it reads as enabled.
        enabled: wf.status == JobStatus::Running || wf.def.schedule_type == ScheduleType::None,
        next_fire_at: wf.next_fire_at,
        version: wf.version,
        created_at: wf.created_at,
        updated_at: wf.updated_at,
    })
}

fn snapshot_of(i: &tickwork_store::Instance) -> Result<Snapshot, Error> {
    serde_json::from_str(&i.snapshot).map_err(|e| {
        Error::Internal(format!(
            "workflow instance {} has an unreadable snapshot: {e}",
            i.id
        ))
    })
}

/// Each node's current run: its newest.
fn current_runs(read: &InstanceWithRuns) -> HashMap<usize, Run> {
    read.runs.iter().map(|r| (r.node, r.run.clone())).collect()
}

/// The index of the node keyed `key` in the instance's snapshot.
fn node_index(snapshot: &Snapshot, key: &str) -> Result<usize, Error> {
    snapshot
        .dag
        .nodes
        .iter()
        .position(|n| n.key == key)
        .ok_or_else(|| Error::NotFound(format!("no node {key:?} in this instance")))
}

fn instance_view(read: InstanceWithRuns) -> Result<InstanceView, Error> {
    let snapshot = snapshot_of(&read.instance)?;
    let i = read.instance;
    let mut run_ids: Vec<Vec<i64>> = vec![Vec::new(); snapshot.dag.nodes.len()];
    for r in &read.runs {
        if let Some(ids) = run_ids.get_mut(r.node) {
            ids.push(r.run.id);
        }
    }
    let nodes = snapshot
        .dag
        .nodes
        .iter()
        .zip(run_ids)
        .enumerate()
        .map(|(n, (node, run_ids))| InstanceNode {
            key: node.key.clone(),
            job: node.job.clone(),
            job_id: snapshot.job_ids.get(n).copied().unwrap_or_default(),
            state: i.nodes.get(n).copied().unwrap_or(NodeState::Waiting),
            run_ids,
        })
        .collect();
    Ok(InstanceView {
        id: i.id,
        workflow_id: i.workflow_id,
        state: i.state,
        admitted: None,
        nodes,
        edges: snapshot.dag.edges,
        context: context::from_json(&i.context),
        trigger_type: i.trigger_type.as_str().to_owned(),
        fire_key: i.fire_key,
        created_at: i.created_at,
        ended_at: i.ended_at,
    })
}

/// How many times an operator's change is decided again when the instance changed between
/// its read and its write.
const RACES: usize = 5;

/// Runs `attempt` (read the instance, decide, write at the version read) until it writes. The
/// pipeline steps an instance whenever one of its nodes' runs moves, so a change read a
/// moment before can find it at a newer version; the operator gave no version, so the change
/// is decided again from what is there now (and refused if it no longer applies).
async fn until_written<T, F, Fut>(id: i64, mut attempt: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, Error>>,
{
    for _ in 0..RACES {
        if let Some(view) = attempt().await? {
            return Ok(view);
        }
    }
    Err(Error::Conflict(format!(
        "workflow instance {id} keeps changing; read it and try again"
    )))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// An instance's stop failed with "changed meanwhile" when one of its nodes ended between
    /// the stop's read and its write (a node without parents that ran at once).
    #[tokio::test]
    async fn an_operators_change_racing_a_node_end_is_decided_again() {
        let attempts = Cell::new(0);
        // Raced twice, then written.
        let written = until_written(7, || async {
            attempts.set(attempts.get() + 1);
            Ok((attempts.get() == 3).then_some("stopped"))
        })
        .await;
        assert_eq!((written.unwrap(), attempts.get()), ("stopped", 3));

        // A refusal is the answer at once.
        attempts.set(0);
        let refused: Result<(), Error> = until_written(7, || async {
            attempts.set(attempts.get() + 1);
            Err(Error::Conflict(
                "workflow instance 7 is failed, not running".into(),
            ))
        })
        .await;
        assert!(matches!(refused, Err(Error::Conflict(m)) if m.contains("not running")));
        assert_eq!(attempts.get(), 1);

        // Raced every time: a conflict, after a bounded number of tries.
        attempts.set(0);
        let raced: Result<(), Error> = until_written(7, || async {
            attempts.set(attempts.get() + 1);
            Ok(None)
        })
        .await;
        assert!(
            matches!(raced, Err(Error::Conflict(m)) if m.contains("instance 7 keeps changing"))
        );
        assert_eq!(attempts.get(), RACES);
    }
}
