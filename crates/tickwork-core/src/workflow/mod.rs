//! Workflows: a DAG of job nodes, checked once when it is saved ([`Graph::new`]), and the pure
//! rules an instance of it follows ([`step`]: which nodes start, which are skipped, when the
//! instance ends) and the context its nodes share ([`context`]).
//!
//! A node references a job by key and may override its params, timeout and retries. An edge
//! runs its child after its parent, on the parent's success (the default), failure, or any end.
//! A node with several parents runs once, after all of them have ended, when every incoming
//! edge's condition holds; otherwise it is skipped, and the skip flows on the same way.

pub mod context;
pub mod step;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::job::Limits;

/// The most nodes a workflow has.
pub const MAX_NODES: usize = 200;
/// The most edges a workflow has.
pub const MAX_EDGES: usize = 2_000;
/// The longest node key, in characters.
pub const NODE_KEY_CHARS: usize = 64;

named_enum! {
    /// When an edge runs its child.
    EdgeOn, "edge condition" {
        /// After the parent succeeded (or failed with `skip_when_failed`, or is disabled).
        Success = "SUCCESS",
        /// After the parent failed: an error branch, which also keeps the failure from failing
        /// the instance.
        Failure = "FAILURE",
        /// After the parent ended, however.
        Always = "ALWAYS",
    }
}

named_enum! {
    /// What an instance does when a node fails.
    FailurePolicy, "failure policy" {
        /// Ends the instance failed at the first failed node: running nodes are killed, the
        /// ones not started are stopped.
        End = "END",
        /// Goes on with the branches that do not depend on the failed node; the instance ends
        /// failed when nothing is left to run.
        Continue = "CONTINUE",
    }
}

named_enum! {
    /// What a fire does when the workflow already has its cap of live instances.
    Overflow, "workflow overflow" {
        /// The fire is recorded skipped.
        Skip = "SKIP",
        /// The instance waits and starts when a live one ends, oldest first.
        Queue = "QUEUE",
    }
}

/// A workflow's graph, as its author writes it (JSON in the API, TOML in job files).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dag {
    #[serde(default)]
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// One node: a job, with what this workflow changes of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Unique in the workflow: 1 to [`NODE_KEY_CHARS`] letters, digits, `.`, `_`, `-`.
    pub key: String,
    /// The key of the job the node runs.
    pub job: String,
    /// Params instead of the job's own; `${ctx.NAME}` reads the instance's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff_ms: Option<i64>,
    /// A failure of this node counts as a success: its children run and the instance does
    /// not fail for it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub skip_when_failed: bool,
    /// A disabled node is passed over as if it had succeeded.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
}

/// `from` before `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub from: String,
    pub to: String,
    #[serde(default = "on_success")]
    pub on: EdgeOn,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn on_success() -> EdgeOn {
    EdgeOn::Success
}

impl Node {
    /// A node running `job` with the job's own settings.
    pub fn new(key: impl Into<String>, job: impl Into<String>) -> Node {
        Node {
            key: key.into(),
            job: job.into(),
            params: None,
            timeout_s: None,
            retry_count: None,
            retry_backoff_ms: None,
            skip_when_failed: false,
            enabled: true,
        }
    }
}

impl Edge {
    pub fn new(from: impl Into<String>, to: impl Into<String>, on: EdgeOn) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
            on,
        }
    }
}

/// What an instance follows: the DAG as it was when the workflow fired, each node's job id
/// (resolved from its key then) and the failure policy. Editing the workflow later changes
/// none of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub dag: Dag,
    /// By node index.
    pub job_ids: Vec<i64>,
    pub failure_policy: FailurePolicy,
}

/// A checked DAG by node index (the nodes' order in the [`Dag`]): each node's incoming edges,
/// its children, and an order in which every parent comes before its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    parents: Vec<Vec<(usize, EdgeOn)>>,
    children: Vec<Vec<(usize, EdgeOn)>>,
    order: Vec<usize>,
}

impl Graph {
    /// Checks `dag` against the workflow rules and `limits` (for a node's overrides): at least
    /// one node, unique well-formed keys, edges between known nodes, no edge twice, no cycle.
    /// The first problem is the error, naming the node or edge.
    pub fn new(dag: &Dag, limits: &Limits) -> Result<Graph, Error> {
        if dag.nodes.is_empty() {
            return Err(invalid("nodes", "a workflow needs at least one node"));
        }
        if dag.nodes.len() > MAX_NODES {
            return Err(invalid(
                "nodes",
                format!("{} nodes; at most {MAX_NODES}", dag.nodes.len()),
            ));
        }
        if dag.edges.len() > MAX_EDGES {
            return Err(invalid(
                "edges",
                format!("{} edges; at most {MAX_EDGES}", dag.edges.len()),
            ));
        }
        let mut index = HashMap::with_capacity(dag.nodes.len());
        for (i, node) in dag.nodes.iter().enumerate() {
            check_node(node, limits)?;
            if index.insert(node.key.as_str(), i).is_some() {
                return Err(invalid(
                    "nodes",
                    format!("node key {:?} is used twice", node.key),
                ));
            }
        }
        let n = dag.nodes.len();
        let mut parents = vec![Vec::new(); n];
        let mut children = vec![Vec::new(); n];
        for e in &dag.edges {
            let end = |key: &str| {
                index.get(key).copied().ok_or_else(|| {
                    invalid(
                        "edges",
                        format!("edge {:?} -> {:?}: no node {key:?}", e.from, e.to),
                    )
                })
            };
            let (from, to) = (end(&e.from)?, end(&e.to)?);
            if from == to {
                return Err(invalid(
                    "edges",
                    format!("edge {:?} -> {:?} joins a node to itself", e.from, e.to),
                ));
            }
            if children[from].iter().any(|&(c, _)| c == to) {
                return Err(invalid(
                    "edges",
                    format!("edge {:?} -> {:?} is given twice", e.from, e.to),
                ));
            }
            children[from].push((to, e.on));
            parents[to].push((from, e.on));
        }
        let order = topological_order(&parents, &children).map_err(|on_cycle| {
            invalid(
                "edges",
                format!(
                    "the edges make a cycle through node {:?}",
                    dag.nodes[on_cycle].key
                ),
            )
        })?;
        Ok(Graph {
            parents,
            children,
            order,
        })
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Never: a checked graph has a node.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Node `i`'s incoming edges: its parents with each edge's condition.
    pub fn parents(&self, i: usize) -> &[(usize, EdgeOn)] {
        &self.parents[i]
    }

    /// Node `i`'s outgoing edges.
    pub fn children(&self, i: usize) -> &[(usize, EdgeOn)] {
        &self.children[i]
    }

    /// Every node, each after all its parents.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Every node reachable from `i` through its children, `i` left out.
    pub fn descendants(&self, i: usize) -> Vec<usize> {
        let mut seen = vec![false; self.len()];
        let mut stack: Vec<usize> = self.children[i].iter().map(|&(c, _)| c).collect();
        let mut out = Vec::new();
        while let Some(c) = stack.pop() {
            if !std::mem::replace(&mut seen[c], true) {
                out.push(c);
                stack.extend(self.children[c].iter().map(|&(g, _)| g));
            }
        }
        out.sort_unstable();
        out
    }
}

/// Kahn's order; on a cycle, a node on it.
fn topological_order(
    parents: &[Vec<(usize, EdgeOn)>],
    children: &[Vec<(usize, EdgeOn)>],
) -> Result<Vec<usize>, usize> {
    let mut waiting: Vec<usize> = parents.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..parents.len()).filter(|&i| waiting[i] == 0).collect();
    ready.reverse();
    let mut order = Vec::with_capacity(parents.len());
    while let Some(i) = ready.pop() {
        order.push(i);
        for &(c, _) in children[i].iter().rev() {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.push(c);
            }
        }
    }
    if order.len() == parents.len() {
        return Ok(order);
    }
    // Every node left has a parent left; walking parents from any of them meets a node twice,
    // and that node is on a cycle.
    let mut seen = vec![false; parents.len()];
    let mut at = (0..parents.len())
        .find(|&i| waiting[i] > 0)
        .expect("a node is left");
    while !std::mem::replace(&mut seen[at], true) {
        at = parents[at]
            .iter()
            .map(|&(p, _)| p)
            .find(|&p| waiting[p] > 0)
            .expect("a node left has a parent left");
    }
    Err(at)
}

fn check_node(node: &Node, limits: &Limits) -> Result<(), Error> {
    check_key(&node.key)?;
    let name = &node.key;
    if node.job.trim().is_empty() {
        return Err(invalid("nodes", format!("node {name:?} names no job")));
    }
    if let Some(p) = &node.params
        && p.len() > limits.params_bytes
    {
        return Err(invalid(
            "nodes",
            format!(
                "node {name:?}: params must be at most {} bytes",
                limits.params_bytes
            ),
        ));
    }
    if let Some(t) = node.timeout_s
        && t < 0
    {
        return Err(invalid(
            "nodes",
            format!("node {name:?}: timeout_s {t} is negative; use 0 for no timeout"),
        ));
    }
    if let Some(r) = node.retry_count
        && !(0..=limits.retry_count_max).contains(&r)
    {
        return Err(invalid(
            "nodes",
            format!(
                "node {name:?}: retry_count {r} must be 0 to {}",
                limits.retry_count_max
            ),
        ));
    }
    if let Some(b) = node.retry_backoff_ms
        && !(0..=limits.retry_backoff_ms_max).contains(&b)
    {
        return Err(invalid(
            "nodes",
            format!(
                "node {name:?}: retry_backoff_ms {b} must be 0 to {}",
                limits.retry_backoff_ms_max
            ),
        ));
    }
    Ok(())
}

/// Checks a node key: 1 to [`NODE_KEY_CHARS`] letters, digits, `.`, `_` or `-`.
pub fn check_key(key: &str) -> Result<(), Error> {
    if key.is_empty()
        || key.len() > NODE_KEY_CHARS
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(invalid(
            "nodes",
            format!(
                "node key {key:?} must be 1 to {NODE_KEY_CHARS} letters, digits, '.', '_' or '-'"
            ),
        ));
    }
    Ok(())
}

fn invalid(field: &'static str, message: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        message: message.into(),
    }
}

/// What a workflow's due fire does, decided at `now` by [`due_fire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueFire {
    /// The instance to start: its fire key (the scheduled instant) and trigger, or `None` when
    /// the fire is too late and the misfire policy skips it.
    pub fire: Option<(i64, crate::TriggerType)>,
    /// The workflow's next fire after this one; `None`: no more (a `ONCE`).
    pub next_fire_at: Option<i64>,
}

/// Decides the fire of a workflow due at `due_at` on `schedule`: on time, it starts an
/// instance keyed by `due_at` and the next fire follows it; later than `threshold_ms` (see
/// `misfire::is_late`) it is skipped (`DO_NOTHING`) or fires once now (`FIRE_ONCE_NOW`), and
/// the next fire is the schedule's first after `now`, the fires missed meanwhile left out.
pub fn due_fire(
    schedule: &crate::schedule::Schedule,
    due_at: i64,
    now: i64,
    misfire: crate::MisfireStrategy,
    threshold_ms: i64,
) -> DueFire {
    if !crate::misfire::is_late(due_at, now, threshold_ms) {
        return DueFire {
            fire: Some((due_at, schedule.kind().trigger_type())),
            next_fire_at: schedule.next_after(due_at),
        };
    }
    DueFire {
        fire: match misfire {
            crate::MisfireStrategy::DoNothing => None,
            crate::MisfireStrategy::FireOnceNow => Some((due_at, crate::TriggerType::Misfire)),
        },
        next_fire_at: schedule.next_after(now),
    }
}
