//! The JSON of workflows: a definition as its author writes it, and an instance as it is
//! read, node by node.

use serde::{Deserialize, Serialize};
pub use tickwork_core::workflow::step::{InstanceState, NodeState};
pub use tickwork_core::workflow::{Dag, Edge, EdgeOn, FailurePolicy, Node, Overflow};
pub use tickwork_core::{MisfireStrategy, ScheduleType};

/// A workflow as its author writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowInput {
    /// Unique; never changes.
    pub key: String,
    pub name: String,
    /// The app name of the executor group whose owners change and run it.
    pub group: String,
    pub dag: Dag,
    #[serde(default = "end")]
    pub failure_policy: FailurePolicy,
    /// Instances running at once.
    #[serde(default = "one")]
    pub max_instances: i64,
    /// What a fire past the cap does.
    #[serde(default = "skip")]
    pub overflow: Overflow,
    /// Its own schedule: `NONE` (the default: run by hand or API only), `CRON`, `FIX_RATE` or
    /// `ONCE`, with its configuration as a job's.
    #[serde(default = "no_schedule")]
    pub schedule_type: ScheduleType,
    #[serde(default)]
    pub schedule_conf: String,
    /// IANA zone of the schedule; the admin's default zone when absent.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// What a fire later than the misfire threshold does.
    #[serde(default = "do_nothing")]
    pub misfire_strategy: MisfireStrategy,
    /// Whether the schedule fires it (a workflow of schedule `NONE` has no fires either way).
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn no_schedule() -> ScheduleType {
    ScheduleType::None
}

fn do_nothing() -> MisfireStrategy {
    MisfireStrategy::DoNothing
}

fn yes() -> bool {
    true
}

fn end() -> FailurePolicy {
    FailurePolicy::End
}

fn one() -> i64 {
    1
}

fn skip() -> Overflow {
    Overflow::Skip
}

/// A stored workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowView {
    pub id: i64,
    pub key: String,
    pub name: String,
    pub group: String,
    pub dag: Dag,
    pub failure_policy: FailurePolicy,
    pub max_instances: i64,
    pub overflow: Overflow,
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire_strategy: MisfireStrategy,
    pub enabled: bool,
    /// Its next scheduled fire, if any.
    pub next_fire_at: Option<i64>,
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One node of an instance: what it runs and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceNode {
    pub key: String,
    pub job: String,
    pub job_id: i64,
    pub state: NodeState,
    /// Its runs, oldest first (retries and reruns after the first).
    pub run_ids: Vec<i64>,
}

/// One fire of a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceView {
    pub id: i64,
    pub workflow_id: i64,
    pub state: InstanceState,
    /// What a fire past the cap did: `started`, `queued` or `skipped` (then no instance).
    pub admitted: Option<String>,
    pub nodes: Vec<InstanceNode>,
    pub edges: Vec<Edge>,
    /// The context: the trigger's params under `params`, and what the nodes added.
    pub context: std::collections::BTreeMap<String, String>,
    pub trigger_type: String,
    /// The scheduled instant it fired for; none when run by hand or API.
    pub fire_key: Option<i64>,
    pub created_at: i64,
    pub ended_at: Option<i64>,
}

/// What `POST /workflows/{workflow}/run` takes: the trigger's params (the context's `params`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowRunInput {
    #[serde(default)]
    pub params: String,
}

/// An instance in a list: where it stands, without its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceSummary {
    pub id: i64,
    pub workflow_id: i64,
    pub state: InstanceState,
    pub trigger_type: String,
    pub fire_key: Option<i64>,
    pub created_at: i64,
    pub ended_at: Option<i64>,
}
