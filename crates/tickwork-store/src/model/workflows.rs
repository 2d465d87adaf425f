//! Workflows and their instances as stored: the definition (its DAG as JSON text), and each
//! instance's snapshot, node states and context, changed one version at a time.

use tickwork_core::workflow::step::{Admit, InstanceState, NodeState};
use tickwork_core::workflow::{FailurePolicy, Overflow};
use tickwork_core::{MisfireStrategy, ScheduleType, TriggerType};

use super::{JobStatus, Run, RunNew};

/// What an author writes of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowDef {
    /// Unique; never changes.
    pub key: String,
    pub name: String,
    /// The executor group whose owners may change and run it.
    pub group_id: i64,
    /// The DAG as JSON (`tickwork_core::workflow::Dag`), checked by the caller.
    pub dag: String,
    pub failure_policy: FailurePolicy,
    /// Instances running at once, at least 1.
    pub max_instances: i64,
    pub overflow: Overflow,
    /// Its own schedule (`NONE`: run by hand or API only), in `time_zone`.
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire_strategy: MisfireStrategy,
}

/// A stored workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    pub id: i64,
    pub def: WorkflowDef,
    /// Whether its schedule fires it.
    pub status: JobStatus,
    /// Its next scheduled fire; `None` when it has none.
    pub next_fire_at: Option<i64>,
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Creates a workflow; a taken key is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowNew {
    pub def: WorkflowDef,
    pub status: JobStatus,
    pub next_fire_at: Option<i64>,
    pub now: i64,
}

/// Rewrites a workflow (its key stays); running instances keep their snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowUpdate {
    pub id: i64,
    /// When given, a workflow at another version is a `Conflict`.
    pub expected_version: Option<i64>,
    pub def: WorkflowDef,
    /// Written as given (the caller works it out from the new schedule and the status).
    pub next_fire_at: Option<i64>,
    pub now: i64,
}

/// Starts (with its first fire) or stops a workflow's schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowStatusChange {
    pub id: i64,
    pub status: JobStatus,
    pub next_fire_at: Option<i64>,
    pub now: i64,
}

/// Running workflows whose next fire is at or before `now`, the earliest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkflowsDue {
    pub now: i64,
    pub limit: u64,
}

/// Claims one scheduled fire of a workflow: its `next_fire_at` moves from `seen` to
/// `next_fire_at` only if it is still `seen` and the workflow still running (so of two admins
/// the first claims it, the second gets `None`), and in the same transaction `start` is fired
/// as [`InstanceStart`] (none for a fire the misfire policy skips). A workflow with no next
/// fire stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowFire {
    pub workflow_id: i64,
    pub seen: i64,
    pub next_fire_at: Option<i64>,
    pub start: Option<InstanceStart>,
    pub now: i64,
}

/// One fire of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub id: i64,
    pub workflow_id: i64,
    pub state: InstanceState,
    /// The DAG and its nodes' job ids when it was fired (JSON), what the instance follows.
    pub snapshot: String,
    /// Each node's state, by node index.
    pub nodes: Vec<NodeState>,
    /// The context (a JSON object of text values).
    pub context: String,
    pub trigger_type: TriggerType,
    /// The scheduled instant it fired for; `None`: run by hand or API.
    pub fire_key: Option<i64>,
    pub version: i64,
    pub created_at: i64,
    pub ended_at: Option<i64>,
}

/// A run to write for node `node` of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRunNew {
    pub node: usize,
    pub run: RunNew,
}

/// A run of node `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRun {
    pub node: usize,
    pub run: Run,
}

/// Fires a workflow: with the workflow's row locked, its live instances are counted against
/// its cap (`tickwork_core::workflow::step::admit`); a started instance is written `running`
/// with `nodes` and `runs` (its first nodes' runs), a queued one `queued` with every node
/// waiting and no run, a skipped fire writes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceStart {
    pub workflow_id: i64,
    pub snapshot: String,
    pub nodes: Vec<NodeState>,
    pub context: String,
    pub trigger_type: TriggerType,
    /// The scheduled instant, for a scheduled fire: one instance per fire.
    pub fire_key: Option<i64>,
    pub runs: Vec<NodeRunNew>,
    pub now: i64,
}

/// What a fire did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceStarted {
    pub admitted: Admit,
    /// The instance written (started or queued).
    pub instance: Option<Instance>,
    /// Its runs, to arm.
    pub runs: Vec<Run>,
}

/// One step of an instance: its new state, node states and context, and the runs of the nodes
/// that start now, written together if the instance is still at `expected_version` (else a
/// `Conflict`: another writer stepped it first; read it again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceStep {
    pub id: i64,
    pub expected_version: i64,
    pub state: InstanceState,
    pub nodes: Vec<NodeState>,
    pub context: String,
    pub ended_at: Option<i64>,
    pub runs: Vec<NodeRunNew>,
}

/// An instance after a step, with the runs the step wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stepped {
    pub instance: Instance,
    pub runs: Vec<Run>,
}

/// An instance with its nodes' runs, oldest first (a node's current run is its last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceWithRuns {
    pub instance: Instance,
    pub runs: Vec<NodeRun>,
}

/// Instances, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstancesQuery {
    pub workflow_id: Option<i64>,
    /// Only these states; all when empty.
    pub states: Vec<InstanceState>,
    pub limit: u64,
}
