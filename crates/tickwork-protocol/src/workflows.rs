//! The JSON of workflows: a definition as its author writes it, and an instance as it is
//! read, node by node.

use serde::{Deserialize, Serialize};
pub use tickwork_core::workflow::step::{InstanceState, NodeState};
pub use tickwork_core::workflow::{Dag, Edge, EdgeOn, FailurePolicy, Node, Overflow};

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
    pub created_at: i64,
    pub ended_at: Option<i64>,
}
