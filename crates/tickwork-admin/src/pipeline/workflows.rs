//! Workflow instances move on as their nodes' runs end. A step reads the instance and its
//! nodes' runs, asks `tickwork_core::workflow::step` what follows, and writes it at the
//! version it read (another admin that stepped first wins; this one reads again), so a node
//! never starts twice. The loop steps the instances of the node runs that just ended, and
//! sweeps every running instance now and then: a step lost to a crash is taken up by any
//! admin's sweep. The same loop fires workflows whose schedule is due.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt as _;
use tickwork_core::TriggerType;
use tickwork_core::job::Limits;
use tickwork_core::run::RunState;
use tickwork_core::schedule::Schedule;
use tickwork_core::workflow::context::{self, Context};
use tickwork_core::workflow::step::{self, InstanceState, NodeState, Step};
use tickwork_core::workflow::{Dag, Graph, Snapshot, due_fire};
use tickwork_store::{
    Instance, InstanceStart, InstanceStep, InstancesQuery, Job, NodeRunNew, Run, RunKillIntent,
    RunNew, Store, Workflow, WorkflowFire, WorkflowsDue,
};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::Scheduler;
use super::clock::Clock;
use crate::Error;

/// How often every running instance is looked at, whatever ended.
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// How often due workflows are looked for: a scheduled workflow fires up to this late.
const FIRE_EVERY: Duration = Duration::from_millis(200);
/// Due workflows fired per round.
const FIRE_LIMIT: u64 = 100;
/// Steps tried on one instance before giving up until the next sweep (each lost to another
/// writer).
const STEP_TRIES: usize = 10;
/// Instances looked at per sweep.
const SWEEP_LIMIT: u64 = 1000;
/// Instances stepped at once.
const STEPS_AT_ONCE: usize = 8;

/// What one step wrote: runs to arm, runs to kill, and the workflow whose instance ended.
#[derive(Debug, Default)]
pub(crate) struct Stepped {
    /// Whether anything was written.
    pub wrote: bool,
    pub runs: Vec<Run>,
    pub kill: Vec<Run>,
    pub ended: Option<i64>,
}

/// The instance's snapshot and graph, read back; an unreadable one is an internal error (the
/// service checked it when the instance was written).
fn graph_of(instance: &Instance) -> Result<(Snapshot, Graph), Error> {
    let snapshot: Snapshot = serde_json::from_str(&instance.snapshot).map_err(|e| {
        Error::Internal(format!(
            "workflow instance {} has an unreadable snapshot: {e}",
            instance.id
        ))
    })?;
    let graph = Graph::new(&snapshot.dag, &Limits::STANDARD)
        .map_err(|e| Error::Internal(format!("workflow instance {}: {e}", instance.id)))?;
    if graph.len() != instance.nodes.len() || graph.len() != snapshot.job_ids.len() {
        return Err(Error::Internal(format!(
            "workflow instance {} has {} node states for {} nodes",
            instance.id,
            instance.nodes.len(),
            graph.len()
        )));
    }
    Ok((snapshot, graph))
}

/// The runs to write for the nodes `step` starts, owned by `node_id`, their params read
/// from the context.
pub(crate) fn node_runs(
    snapshot: &Snapshot,
    step: &Step,
    ctx: &Context,
    node_id: &str,
    now: i64,
) -> Vec<NodeRunNew> {
    step.start
        .iter()
        .map(|&i| NodeRunNew {
            node: i,
            run: RunNew {
                params: snapshot.dag.nodes[i]
                    .params
                    .as_deref()
                    .map(|p| context::render(p, ctx)),
                owner_node: Some(node_id.to_owned()),
                timeout_s: snapshot.dag.nodes[i].timeout_s,
                ..RunNew::new(snapshot.job_ids[i], TriggerType::Workflow, now)
            },
        })
        .collect()
}

/// `nodes` with `step` applied: started nodes running, skipped skipped, the ones the end
/// leaves (waiting or killed) stopped.
pub(crate) fn apply(nodes: &mut [NodeState], step: &Step) {
    for &i in &step.start {
        nodes[i] = NodeState::Running;
    }
    for &i in &step.skip {
        nodes[i] = NodeState::Skipped;
    }
    for &i in step.stop.iter().chain(&step.kill) {
        nodes[i] = NodeState::Stopped;
    }
}

/// An instance of `wf` to start at `now`: its nodes' jobs resolved by key into the
/// snapshot (each job returned, so that a caller can check who may run it), the context
/// started from `params`, the first nodes' runs owned by `node_id`.
pub(crate) async fn prepare(
    store: &dyn Store,
    wf: &Workflow,
    params: &str,
    trigger_type: TriggerType,
    fire_key: Option<i64>,
    node_id: &str,
    now: i64,
) -> Result<(InstanceStart, Vec<Job>), Error> {
    let dag: Dag = serde_json::from_str(&wf.def.dag).map_err(|e| {
        Error::Internal(format!(
            "workflow {} holds an unreadable DAG: {e}",
            wf.def.key
        ))
    })?;
    let graph = Graph::new(&dag, &Limits::STANDARD)?;
    let mut jobs = Vec::with_capacity(dag.nodes.len());
    for node in &dag.nodes {
        match store.job_get_by_key(&node.job).await {
            Ok(job) => jobs.push(job),
            Err(tickwork_store::Error::NotFound { .. }) => {
                return Err(Error::invalid_field(
                    "dag",
                    format!("node {:?}: no job has the key {:?}", node.key, node.job),
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let snapshot = Snapshot {
        job_ids: jobs.iter().map(|j| j.id).collect(),
        dag,
        failure_policy: wf.def.failure_policy,
    };
    let ctx = context::initial(params);
    let mut nodes = vec![NodeState::Waiting; graph.len()];
    let first = step::advance(&snapshot.dag, &graph, &nodes, snapshot.failure_policy);
    apply(&mut nodes, &first);
    let runs = node_runs(&snapshot, &first, &ctx, node_id, now);
    let snapshot = serde_json::to_string(&snapshot)
        .map_err(|e| Error::Internal(format!("a snapshot did not serialize: {e}")))?;
    let start = InstanceStart {
        workflow_id: wf.id,
        snapshot,
        nodes,
        context: context::to_json(&ctx),
        trigger_type,
        fire_key,
        runs,
        now,
    };
    Ok((start, jobs))
}

/// Fires the workflows due now, each fire claimed once whichever admins look (see
/// `WorkflowFire`); how many instances started.
pub(crate) async fn fire_due(scheduler: &Scheduler) -> Result<usize, Error> {
    let inner = &scheduler.inner;
    let now = inner.clock.now_ms();
    let due = inner
        .store
        .workflows_due(WorkflowsDue {
            now,
            limit: FIRE_LIMIT,
        })
        .await?;
    let threshold = inner.config.scheduler.misfire_threshold.as_millis() as i64;
    let mut started = 0;
    for wf in due {
        let Some(seen) = wf.next_fire_at else {
            continue;
        };
        let decided = match Schedule::parse(
            wf.def.schedule_type,
            &wf.def.schedule_conf,
            &wf.def.time_zone,
        ) {
            Ok(schedule) => due_fire(&schedule, seen, now, wf.def.misfire_strategy, threshold),
            Err(e) => {
                warn!(workflow = wf.def.key, error = %e, "a workflow's schedule no longer parses; stopped");
                tickwork_core::workflow::DueFire {
                    fire: None,
                    next_fire_at: None,
                }
            }
        };
        let start = match decided.fire {
            Some((fire_key, trigger)) => {
                match prepare(
                    &*inner.store,
                    &wf,
                    "",
                    trigger,
                    Some(fire_key),
                    &inner.config.node_id,
                    now,
                )
                .await
                {
                    Ok((start, _)) => Some(start),
                    Err(e) => {
                        warn!(workflow = wf.def.key, fire_key, error = %e, "a workflow's fire was skipped");
                        None
                    }
                }
            }
            None => {
                debug!(
                    workflow = wf.def.key,
                    due = seen,
                    "a late workflow fire skipped"
                );
                None
            }
        };
        let fire = WorkflowFire {
            workflow_id: wf.id,
            seen,
            next_fire_at: decided.next_fire_at,
            start,
            now,
        };
        match inner.store.workflow_fire(fire).await {
            Ok(Some(fired)) => {
                inner.stats.workflow_fires.fetch_add(1, Ordering::Relaxed);
                if fired.instance.is_some() {
                    started += 1;
                }
                scheduler.arm_all(fired.runs, 0);
            }
            // Another admin claimed it first.
            Ok(None) => {}
            Err(e) => warn!(workflow = wf.def.key, error = %e, "a workflow fire was not written"),
        }
    }
    Ok(started)
}

/// Steps instance `id` once it reads what its runs say; nothing when it is not running or
/// nothing changed.
pub(crate) async fn step_instance(
    store: &dyn Store,
    node_id: &str,
    clock: &Clock,
    id: i64,
) -> Result<Stepped, Error> {
    for _ in 0..STEP_TRIES {
        let read = store.workflow_instance_get(id).await?;
        // Read after the runs: an instant taken before could precede the end of a parent
        // another admin wrote meanwhile, and a join would start "before" its parent ended.
        let now = clock.now_ms();
        let instance = read.instance;
        match instance.state {
            InstanceState::Running => {}
            InstanceState::Queued => return promote(store, node_id, now, instance).await,
            _ => return Ok(Stepped::default()),
        }
        let (snapshot, graph) = graph_of(&instance)?;
        // A node's current run is its newest: a retry is linked after the run it retries.
        let mut current: HashMap<usize, &Run> = HashMap::new();
        for r in &read.runs {
            current.insert(r.node, &r.run);
        }
        let mut nodes = instance.nodes.clone();
        let mut ctx = context::from_json(&instance.context);
        for (i, state) in nodes.iter_mut().enumerate() {
            if *state != NodeState::Running {
                continue;
            }
            let Some(run) = current.get(&i) else {
                // Its run went with its job.
                *state = NodeState::Failed;
                continue;
            };
            match run.state {
                RunState::Planned | RunState::Sending | RunState::Dispatched => {}
                RunState::Succeeded => {
                    *state = NodeState::Succeeded;
                    ctx = added(ctx, run);
                }
                _ => *state = NodeState::Failed,
            }
        }
        let step = step::advance(&snapshot.dag, &graph, &nodes, snapshot.failure_policy);
        apply(&mut nodes, &step);
        let state = step.end.unwrap_or(InstanceState::Running);
        let ctx_json = context::to_json(&ctx);
        if nodes == instance.nodes && state == instance.state && ctx_json == instance.context {
            return Ok(Stepped::default());
        }
        let kill: Vec<Run> = step
            .kill
            .iter()
            .filter_map(|i| current.get(i).map(|r| (*r).clone()))
            .collect();
        let runs = node_runs(&snapshot, &step, &ctx, node_id, now);
        let write = InstanceStep {
            id,
            expected_version: instance.version,
            state,
            nodes,
            context: ctx_json,
            ended_at: step.end.map(|_| now),
            runs,
        };
        match store.workflow_instance_step(write).await {
            Ok(stepped) => {
                debug!(
                    instance = id,
                    started = stepped.runs.len(),
                    state = state.as_str(),
                    "workflow instance stepped"
                );
                return Ok(Stepped {
                    wrote: true,
                    runs: stepped.runs,
                    kill,
                    ended: step.end.map(|_| instance.workflow_id),
                });
            }
            Err(tickwork_store::Error::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Stepped::default())
}

/// The context with what `run`'s result message adds; a bad addition is logged and left out
/// (the run succeeded; its children still run).
fn added(ctx: Context, run: &Run) -> Context {
    let Some(message) = run.handle_msg.as_deref() else {
        return ctx;
    };
    match context::from_message(message).and_then(|add| match add {
        Some(add) => context::merge(&ctx, add).map(Some),
        None => Ok(None),
    }) {
        Ok(Some(merged)) => merged,
        Ok(None) => ctx,
        Err(e) => {
            warn!(run_id = run.id, error = %e, "a node's context was not added");
            ctx
        }
    }
}

/// Starts a queued instance if its workflow is under its cap and it is the oldest queued.
async fn promote(
    store: &dyn Store,
    node_id: &str,
    now: i64,
    instance: Instance,
) -> Result<Stepped, Error> {
    let workflow = store.workflow_get(instance.workflow_id).await?;
    let live = store
        .workflow_instances_list(InstancesQuery {
            workflow_id: Some(workflow.id),
            states: vec![InstanceState::Running, InstanceState::Queued],
            limit: SWEEP_LIMIT,
        })
        .await?;
    let running = live
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .count();
    let oldest = live
        .iter()
        .filter(|i| i.state == InstanceState::Queued)
        .map(|i| i.id)
        .min();
    if running >= usize::try_from(workflow.def.max_instances).unwrap_or(1)
        || oldest != Some(instance.id)
    {
        return Ok(Stepped::default());
    }
    let (snapshot, graph) = graph_of(&instance)?;
    // Let in now: it starts from its first nodes.
    let mut nodes = vec![NodeState::Waiting; graph.len()];
    let step = step::advance(&snapshot.dag, &graph, &nodes, snapshot.failure_policy);
    apply(&mut nodes, &step);
    let ctx = context::from_json(&instance.context);
    let runs = node_runs(&snapshot, &step, &ctx, node_id, now);
    let write = InstanceStep {
        id: instance.id,
        expected_version: instance.version,
        state: step.end.unwrap_or(InstanceState::Running),
        nodes,
        context: instance.context.clone(),
        ended_at: step.end.map(|_| now),
        runs,
    };
    match store.workflow_instance_step(write).await {
        Ok(stepped) => Ok(Stepped {
            wrote: true,
            runs: stepped.runs,
            kill: Vec::new(),
            ended: step.end.map(|_| instance.workflow_id),
        }),
        // Another admin started it (or stepped it) first.
        Err(tickwork_store::Error::Conflict(_)) => Ok(Stepped::default()),
        Err(e) => Err(e.into()),
    }
}

impl Stepped {
    /// Counts the step if one was written and arms its runs.
    fn arm_written(&mut self, scheduler: &Scheduler) {
        if self.wrote {
            let steps = &scheduler.inner.stats.workflow_steps;
            steps.fetch_add(1, Ordering::Relaxed);
        }
        scheduler.arm_all(std::mem::take(&mut self.runs), 0);
    }

    /// Arms the runs written, kills the ones left running, and starts the oldest queued
    /// instance of a workflow whose instance ended.
    pub(crate) async fn settle(mut self, scheduler: &Scheduler) {
        let inner = &scheduler.inner;
        self.arm_written(scheduler);
        for run in self.kill {
            kill(scheduler, &run).await;
        }
        let Some(workflow_id) = self.ended else {
            return;
        };
        let queued = inner
            .store
            .workflow_instances_list(InstancesQuery {
                workflow_id: Some(workflow_id),
                states: vec![InstanceState::Queued],
                limit: SWEEP_LIMIT,
            })
            .await;
        match queued {
            Ok(q) => {
                if let Some(oldest) = q.iter().map(|i| i.id).min() {
                    let clock = &inner.clock;
                    match step_instance(&*inner.store, &inner.config.node_id, clock, oldest).await {
                        Ok(mut s) => s.arm_written(scheduler),
                        Err(e) => {
                            warn!(instance = oldest, error = %e, "a queued instance did not start")
                        }
                    }
                }
            }
            Err(e) => warn!(workflow_id, error = %e, "queued instances unread"),
        }
    }
}

/// Ends a node's run the instance's end left running: a dispatched one killed (its kill
/// intent, then `/kill`), a planned one skipped.
async fn kill(scheduler: &Scheduler, run: &Run) {
    let inner = &scheduler.inner;
    if run.state == RunState::Planned {
        let at = inner.clock.now_ms();
        if let Err(e) = skip_planned(&*inner.store, run, "its workflow instance ended", at).await {
            warn!(run_id = run.id, error = %e, "a node's planned run was not skipped");
        }
        return;
    }
    if run.state != RunState::Dispatched {
        return;
    }
    let Some(address) = run.executor_address.as_deref() else {
        return;
    };
    let intent = RunKillIntent {
        run_id: run.id,
        at: Some(inner.clock.now_ms()),
    };
    match inner.store.run_kill_intent(intent).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            warn!(run_id = run.id, error = %e, "kill intent not recorded");
            return;
        }
    }
    let client = match inner.store.group_get(run.group_id).await {
        Ok(g) => inner.client.for_group(&g),
        Err(_) => inner.client.clone(),
    };
    let out = client.kill(address, run.job_id as i32).await;
    if !out.is_success() {
        warn!(
            run_id = run.id,
            msg = out.msg.as_deref().unwrap_or(""),
            "a node's run was not killed"
        );
        return;
    }
    let killed = tickwork_store::RunComplete {
        run_id: run.id,
        handle_code: tickwork_protocol::CODE_FAIL,
        handle_msg: Some("killed: its workflow instance ended".to_owned()),
        state: RunState::Killed,
        at: inner.clock.now_ms(),
    };
    if let Err(e) = scheduler.complete(killed).await {
        warn!(run_id = run.id, error = %e, "a killed node's run not recorded");
    }
}

/// Skips a node's run not sent yet (a retry waiting for its backoff) under its owner's name,
/// so that it is never sent: its owner's send finds it ended.
pub(crate) async fn skip_planned(
    store: &dyn Store,
    run: &Run,
    reason: &str,
    at: i64,
) -> Result<(), tickwork_store::Error> {
    let skip = tickwork_store::RunSkip {
        run_id: run.id,
        node_id: run.owner_node.clone().unwrap_or_default(),
        reason: reason.to_owned(),
        at,
    };
    store.run_skip(skip).await.map(|_| ())
}

/// Steps the instances of node runs that ended (sent by the completion path) and sweeps
/// every running or queued instance each [`SWEEP_EVERY`]; stops with the pipeline.
pub(crate) async fn workflow_loop(
    scheduler: Scheduler,
    mut ended: mpsc::UnboundedReceiver<Vec<i64>>,
) {
    let inner = scheduler.inner.clone();
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut fire = tokio::time::interval(FIRE_EVERY);
    fire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ids = tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = fire.tick() => {
                if let Err(e) = fire_due(&scheduler).await {
                    warn!(error = %e, "due workflows unread");
                }
                continue;
            }
            got = ended.recv() => match got {
                Some(mut ids) => {
                    // Whatever else ended meanwhile goes in the same round.
                    while let Ok(more) = ended.try_recv() {
                        ids.extend(more);
                    }
                    inner.store.workflow_instances_of_runs(&ids).await
                }
                None => return,
            },
            // Queued ones too: an admin that died between ending an instance and letting the
            // next one in leaves it to the sweep.
            _ = sweep.tick() => inner
                .store
                .workflow_instances_list(InstancesQuery {
                    workflow_id: None,
                    states: vec![InstanceState::Running, InstanceState::Queued],
                    limit: SWEEP_LIMIT,
                })
                .await
                .map(|list| list.into_iter().map(|i| i.id).collect()),
        };
        let ids = match ids {
            Ok(ids) => ids,
            Err(e) => {
                warn!(error = %e, "workflow instances unread");
                continue;
            }
        };
        // Instances step side by side: each step is written at the version it read, so two
        // of them never start a node twice, and a burst of ends is not stepped one by one.
        futures::stream::iter(ids)
            .for_each_concurrent(STEPS_AT_ONCE, |id| {
                let scheduler = &scheduler;
                async move {
                    let inner = &scheduler.inner;
                    let clock = &inner.clock;
                    match step_instance(&*inner.store, &inner.config.node_id, clock, id).await {
                        Ok(stepped) => stepped.settle(scheduler).await,
                        Err(e) => warn!(instance = id, error = %e, "workflow instance not stepped"),
                    }
                }
            })
            .await;
    }
}

/// The ended runs that may be a workflow node's: node runs and retries.
pub(crate) fn node_run_ids(runs: &[Run]) -> Vec<i64> {
    runs.iter()
        .filter(|r| matches!(r.trigger_type, TriggerType::Workflow | TriggerType::Retry))
        .map(|r| r.id)
        .collect()
}
