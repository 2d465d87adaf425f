//! Admin nodes, leases, adoption, misfire and lost-run queries, retention.

/// One admin node's heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBeat {
    pub id: String,
    pub address: String,
    pub now: i64,
}

/// An admin node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub address: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
}

/// Take or renew lease `name` for `node` until `now + ttl_ms`: granted when it is free,
/// expired, or already `node`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    pub name: String,
    pub node: String,
    pub ttl_ms: i64,
    pub now: i64,
}

/// A lease and the node that means to give it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseKey {
    pub name: String,
    pub node: String,
}

/// Take over runs whose owner is gone: `planned` runs owned by no node (handed back at a
/// clean stop), and `planned` or `sending` runs of a node whose row is gone (it left) or
/// whose last heartbeat is older than `dead_before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptParams {
    /// The adopting node: the runs' new `owner_node`. Its own runs are never adopted.
    pub node_id: String,
    /// An owner whose heartbeat is older than this is dead. `None`: take only runs that
    /// have no owner.
    pub dead_before: Option<i64>,
    /// At most this many runs per call, oldest `scheduled_at` first.
    pub limit: u32,
}

/// Which of `run_ids` are still `planned` or `sending` and owned by `node_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRuns {
    pub node_id: String,
    pub run_ids: Vec<i64>,
}

/// Planned runs of `node_id` that the misfire policy decided not to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkMisfired {
    pub node_id: String,
    pub run_ids: Vec<i64>,
    /// Why, for operators (kept in `trigger_msg`).
    pub reason: String,
    pub at: i64,
}

/// A planned run of `node_id` that becomes the catch-up of its job's late fires
/// (`FIRE_ONCE_NOW`): it fires at `at` with trigger type `misfire`, keeping its ledger key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    pub run_id: i64,
    pub node_id: String,
    pub at: i64,
    /// The earliest late fire of the job: a catch-up of the job scheduled at or after it
    /// (written by a claim, or by another node) already covers this run.
    pub late_since: i64,
}

/// Runs that look lost: `dispatched` before `dispatched_before`, and their executor has not
/// beaten since `alive_since` (or is not registered at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostQuery {
    pub dispatched_before: i64,
    pub alive_since: i64,
    /// At most this many, oldest dispatch first.
    pub limit: u32,
}

/// Runs in state `dispatched` at `address`, dispatched before `dispatched_before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchedTo {
    pub address: String,
    pub dispatched_before: i64,
    /// At most this many, oldest dispatch first.
    pub limit: u32,
}

/// One retention batch: at most `limit` final runs scheduled before `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPurge {
    pub before: i64,
    pub limit: u32,
}

/// A call for a pull executor whose connection this admin node does not hold, relayed through
/// the database: the node that wants it made writes it, the node that holds the executor's
/// connection (whichever it is now) takes it, makes it and writes the answer, and the writer
/// collects the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCallNew {
    /// The executor's address (`pull://<instance>`).
    pub address: String,
    /// The app name of the group whose call it is.
    pub app: String,
    /// The call, as push mode names it (`/run`, `/kill`, ...).
    pub path: String,
    /// Its JSON body.
    pub body: String,
    /// A `/run`'s place among the runs waiting for the executor's credits.
    pub rank: i64,
    pub now: i64,
    /// After this instant the holder no longer makes the call; the writer waits for an
    /// answer until then (and a little more for one being made).
    pub deadline_at: i64,
}

/// A relayed call as its holder takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCall {
    pub id: i64,
    pub address: String,
    pub app: String,
    pub path: String,
    pub body: String,
    pub rank: i64,
    pub deadline_at: i64,
}

/// Takes the calls for the executors at `addresses` (those whose connections the taking node
/// holds) that nobody took yet and whose deadline has not passed, marking them taken so they
/// are made once; also deletes calls older than `stale_before` (left by nodes that died
/// waiting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCallsTake {
    pub addresses: Vec<String>,
    pub now: i64,
    pub stale_before: i64,
    pub limit: u32,
}

/// The answer of a relayed call, written by its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCallAnswer {
    pub id: i64,
    pub answer: String,
    pub now: i64,
}

/// Where a relayed call is, as its writer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullCallState {
    /// Not taken yet.
    Waiting,
    /// Taken by the holder, not answered yet: it may be under way.
    Taken,
    /// Answered; the row is deleted with this read.
    Answered(String),
    /// Withdrawn by its writer before anyone took it (or gone): it was never made.
    Withdrawn,
}

/// A relayed pull call's news, from the database's notifications (PostgreSQL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullWake {
    /// A call was written for the executor at this address.
    Call(String),
    /// The call with this id was answered.
    Answer(i64),
}
