//! An instance's rules: given its nodes' states, what happens next ([`advance`]), and the
//! operator's actions on it ([`stop`], [`resume`], [`mark_succeeded`], [`rerun`]), each a
//! plain function the store applies in the transaction that records what caused it.
//!
//! What "after all parents" means: a node is decided once every parent has ended. It runs when
//! every incoming edge's condition holds for its parent's outcome, and is skipped otherwise. A
//! parent's outcome for its edges is success when it succeeded, failed with
//! `skip_when_failed`, or is disabled; failure when it failed; skipped when it was skipped or
//! stopped. A `SUCCESS` edge holds on success, a `FAILURE` edge on failure, an `ALWAYS` edge on
//! any of the three: so a skipped parent skips its `SUCCESS` and `FAILURE` children.
//!
//! A failed node fails the instance unless `skip_when_failed` or a `FAILURE` edge leaves it
//! (its failure was planned for).

use std::fmt;
use std::str::FromStr;

use super::{Dag, EdgeOn, FailurePolicy, Graph};
use crate::Error;

named_enum! {
    /// Where a node of an instance stands.
    NodeState, "node state" {
        /// Not decided: a parent has not ended.
        Waiting = "WAITING",
        /// Its run is planned or under way (retries included).
        Running = "RUNNING",
        Succeeded = "SUCCEEDED",
        /// Its run ended badly, retries spent (failed, timed out, lost, killed).
        Failed = "FAILED",
        /// Not run: an incoming edge's condition did not hold, or the node is disabled.
        Skipped = "SKIPPED",
        /// Not run: the instance ended first.
        Stopped = "STOPPED",
    }
}

named_enum! {
    /// Where an instance stands.
    InstanceState, "instance state" {
        /// Waiting for a free place under the workflow's cap.
        Queued = "QUEUED",
        Running = "RUNNING",
        Succeeded = "SUCCEEDED",
        Failed = "FAILED",
        /// Stopped by an operator.
        Stopped = "STOPPED",
    }
}

impl NodeState {
    /// Whether the node has ended.
    pub const fn is_final(self) -> bool {
        !matches!(self, NodeState::Waiting | NodeState::Running)
    }
}

impl InstanceState {
    /// Whether the instance has ended (an operator may still resume a failed or stopped one).
    pub const fn is_final(self) -> bool {
        matches!(
            self,
            InstanceState::Succeeded | InstanceState::Failed | InstanceState::Stopped
        )
    }
}

/// What to do to an instance now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    /// Nodes whose runs to create, in the graph's order.
    pub start: Vec<usize>,
    /// Nodes not run: a condition did not hold, or disabled.
    pub skip: Vec<usize>,
    /// Waiting nodes the instance's end leaves unrun.
    pub stop: Vec<usize>,
    /// Running nodes whose runs to kill: the instance ended without them.
    pub kill: Vec<usize>,
    /// The instance's end, once nothing is left to run.
    pub end: Option<InstanceState>,
}

/// A parent's outcome as its edges see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Failure,
    Skipped,
}

fn outcome(dag: &Dag, i: usize, state: NodeState) -> Option<Outcome> {
    let node = &dag.nodes[i];
    match state {
        NodeState::Waiting | NodeState::Running => None,
        NodeState::Succeeded => Some(Outcome::Success),
        NodeState::Failed if node.skip_when_failed => Some(Outcome::Success),
        NodeState::Failed => Some(Outcome::Failure),
        NodeState::Skipped if !node.enabled => Some(Outcome::Success),
        NodeState::Skipped | NodeState::Stopped => Some(Outcome::Skipped),
    }
}

fn holds(on: EdgeOn, parent: Outcome) -> bool {
    match on {
        EdgeOn::Success => parent == Outcome::Success,
        EdgeOn::Failure => parent == Outcome::Failure,
        EdgeOn::Always => true,
    }
}

/// Whether node `i`, failed, fails the instance.
pub fn fails_instance(dag: &Dag, graph: &Graph, i: usize) -> bool {
    !dag.nodes[i].skip_when_failed
        && !graph
            .children(i)
            .iter()
            .any(|&(_, on)| on == EdgeOn::Failure)
}

/// What happens next to a running instance whose nodes are in `states` (by node index).
///
/// Under [`FailurePolicy::End`] a node that fails the instance ends it: nothing starts, the
/// running nodes are killed and the waiting ones stopped. Otherwise every waiting node whose
/// parents have all ended is decided, in the graph's order (so a skip flows down in one step),
/// and the instance ends when no node is waiting or running: failed if a node failed it,
/// succeeded otherwise.
pub fn advance(dag: &Dag, graph: &Graph, states: &[NodeState], policy: FailurePolicy) -> Step {
    let failed = |s: &[NodeState]| {
        (0..s.len()).any(|i| s[i] == NodeState::Failed && fails_instance(dag, graph, i))
    };
    if policy == FailurePolicy::End && failed(states) {
        return end_now(states, InstanceState::Failed);
    }
    let mut now = states.to_vec();
    let mut step = Step::default();
    for &i in graph.order() {
        if now[i] != NodeState::Waiting {
            continue;
        }
        let parents = graph.parents(i);
        if !parents.iter().all(|&(p, _)| now[p].is_final()) {
            continue;
        }
        let all_hold = parents
            .iter()
            .all(|&(p, on)| outcome(dag, p, now[p]).is_some_and(|o| holds(on, o)));
        if all_hold && dag.nodes[i].enabled {
            now[i] = NodeState::Running;
            step.start.push(i);
        } else {
            now[i] = NodeState::Skipped;
            step.skip.push(i);
        }
    }
    if now.iter().all(|s| s.is_final()) {
        step.end = Some(if failed(&now) {
            InstanceState::Failed
        } else {
            InstanceState::Succeeded
        });
    }
    step
}

/// An operator's stop: running nodes killed, waiting ones stopped, the instance stopped.
pub fn stop(states: &[NodeState]) -> Step {
    end_now(states, InstanceState::Stopped)
}

fn end_now(states: &[NodeState], end: InstanceState) -> Step {
    let pick = |want: NodeState| {
        (0..states.len())
            .filter(|&i| states[i] == want)
            .collect::<Vec<_>>()
    };
    Step {
        start: Vec::new(),
        skip: Vec::new(),
        stop: pick(NodeState::Waiting),
        kill: pick(NodeState::Running),
        end: Some(end),
    }
}

/// Resume from failed: the states a failed or stopped instance continues from. Succeeded
/// nodes are kept (with their runs and what they added to the context); failed, skipped and
/// stopped nodes wait again, to be decided anew by [`advance`].
pub fn resume(instance: InstanceState, states: &[NodeState]) -> Result<Vec<NodeState>, Error> {
    if !matches!(instance, InstanceState::Failed | InstanceState::Stopped) {
        return Err(refused(format!(
            "only a failed or stopped instance resumes; this one is {instance}"
        )));
    }
    Ok(states
        .iter()
        .map(|&s| {
            if s == NodeState::Succeeded {
                s
            } else {
                NodeState::Waiting
            }
        })
        .collect())
}

/// Marks node `i` succeeded: a failed, skipped or stopped node, or one waiting in an instance
/// that has ended. Its children are then decided by [`advance`] (on a resumed or running
/// instance).
pub fn mark_succeeded(
    instance: InstanceState,
    states: &[NodeState],
    i: usize,
) -> Result<Vec<NodeState>, Error> {
    let s = node_state(states, i)?;
    let allowed = match s {
        NodeState::Failed | NodeState::Skipped | NodeState::Stopped => true,
        NodeState::Waiting => instance.is_final(),
        NodeState::Running | NodeState::Succeeded => false,
    };
    if !allowed {
        return Err(refused(format!(
            "a {s} node of a {instance} instance cannot be marked succeeded"
        )));
    }
    let mut out = states.to_vec();
    out[i] = NodeState::Succeeded;
    Ok(out)
}

/// Reruns node `i` of an instance that is not running: the node runs again (its parents as
/// they are) and the nodes after it that did not succeed wait for it again. The instance runs
/// again; [`advance`] decides the rest when the node ends.
pub fn rerun(
    graph: &Graph,
    instance: InstanceState,
    states: &[NodeState],
    i: usize,
) -> Result<Vec<NodeState>, Error> {
    let s = node_state(states, i)?;
    if !instance.is_final() {
        return Err(refused(format!(
            "a node is rerun only in an ended instance; this one is {instance}"
        )));
    }
    if !s.is_final() && s != NodeState::Waiting {
        return Err(refused(format!("a {s} node cannot be rerun")));
    }
    let mut out = states.to_vec();
    out[i] = NodeState::Running;
    for d in graph.descendants(i) {
        if out[d] != NodeState::Succeeded {
            out[d] = NodeState::Waiting;
        }
    }
    Ok(out)
}

fn node_state(states: &[NodeState], i: usize) -> Result<NodeState, Error> {
    states
        .get(i)
        .copied()
        .ok_or_else(|| refused(format!("no node {i} in this instance")))
}

fn refused(message: String) -> Error {
    Error::Invalid {
        field: "node",
        message,
    }
}

/// Whether a fire may start an instance now, given the instances of the workflow that are
/// running or queued and its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Start,
    Queue,
    Skip,
}

/// Admits a fire: started while fewer than `cap` instances run (a cap of 0 counts as 1),
/// queued or skipped past it as `overflow` says. A queued instance goes first: a fire does not
/// overtake the queue.
pub fn admit(running: usize, queued: usize, cap: u32, overflow: super::Overflow) -> Admit {
    let cap = usize::try_from(cap.max(1)).unwrap_or(usize::MAX);
    if running < cap && queued == 0 {
        Admit::Start
    } else if overflow == super::Overflow::Queue {
        Admit::Queue
    } else {
        Admit::Skip
    }
}
