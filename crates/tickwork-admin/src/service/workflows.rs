//! Workflows: definitions checked whole before anything is saved (the DAG's rules, every
//! node's job known and in a group the author may change), and fires that write an instance
//! with its first nodes' runs in one transaction. What follows a node's end is the pipeline's
//! (`pipeline::workflows`).

use std::collections::HashMap;

use tickwork_core::job::Limits;
use tickwork_core::workflow::context;
use tickwork_core::workflow::step::{self, NodeState};
use tickwork_core::workflow::{Dag, Graph, Snapshot};
use tickwork_core::{TriggerType, job};
use tickwork_protocol::workflows::{InstanceNode, InstanceView, WorkflowInput, WorkflowView};
use tickwork_store::{
    Group, InstanceStart, InstanceWithRuns, Workflow, WorkflowDef, WorkflowNew, WorkflowUpdate,
};

use super::Inner;
use super::audit::Target;
use crate::Error;
use crate::auth::Principal;
use crate::pipeline::workflows::{apply, node_runs};

/// Workflows, borrowed from a [`crate::Service`].
#[derive(Clone, Copy)]
pub struct Workflows<'a> {
    pub(super) inner: &'a Inner,
}

impl Workflows<'_> {
    /// Creates a workflow in the group named `input.group`, which `by` must be allowed to
    /// change, as must every node's job's group.
    pub async fn create(self, by: &Principal, input: WorkflowInput) -> Result<WorkflowView, Error> {
        let (def, group) = self.checked(by, input).await?;
        let now = self.inner.clock.now_ms();
        let created = self
            .inner
            .store
            .workflow_create(WorkflowNew { def, now })
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
        let (def, group) = self.checked(by, input).await?;
        let now = self.inner.clock.now_ms();
        let updated = self
            .inner
            .store
            .workflow_update(WorkflowUpdate {
                id: there.id,
                expected_version: Some(there.version),
                def,
                now,
            })
            .await?;
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
        let dag = dag_of(&wf)?;
        let graph = Graph::new(&dag, &Limits::STANDARD)?;
        let mut job_ids = Vec::with_capacity(dag.nodes.len());
        for node in &dag.nodes {
            job_ids.push(self.node_job(by, &node.key, &node.job).await?);
        }
        let snapshot = Snapshot {
            dag,
            job_ids,
            failure_policy: wf.def.failure_policy,
        };
        let ctx = context::initial(params);
        let mut nodes = vec![NodeState::Waiting; graph.len()];
        let first = step::advance(&snapshot.dag, &graph, &nodes, snapshot.failure_policy);
        apply(&mut nodes, &first);
        let now = self.inner.clock.now_ms();
        let runs = node_runs(&snapshot, &first, &ctx, &self.inner.config.node_id, now);
        let snapshot_json = serde_json::to_string(&snapshot)
            .map_err(|e| Error::Internal(format!("a snapshot did not serialize: {e}")))?;
        let started = self
            .inner
            .store
            .workflow_instance_start(InstanceStart {
                workflow_id: wf.id,
                snapshot: snapshot_json,
                // A queued instance starts from scratch when it is let in.
                nodes: nodes.clone(),
                context: context::to_json(&ctx),
                trigger_type,
                runs,
                now,
            })
            .await?;
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
        Ok((
            WorkflowDef {
                key: input.key,
                name: input.name.trim().to_owned(),
                group_id: group.id,
                dag,
                failure_policy: input.failure_policy,
                max_instances: input.max_instances,
                overflow: input.overflow,
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
        version: wf.version,
        created_at: wf.created_at,
        updated_at: wf.updated_at,
    })
}

fn instance_view(read: InstanceWithRuns) -> Result<InstanceView, Error> {
    let i = read.instance;
    let snapshot: Snapshot = serde_json::from_str(&i.snapshot).map_err(|e| {
        Error::Internal(format!(
            "workflow instance {} has an unreadable snapshot: {e}",
            i.id
        ))
    })?;
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
        created_at: i.created_at,
        ended_at: i.ended_at,
    })
}
