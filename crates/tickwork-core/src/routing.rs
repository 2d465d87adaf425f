//! Route strategies: which executor gets a run.
//!
//! [`Router::route`] turns a strategy and the group's candidate addresses into a [`Route`]:
//! one index, a list of executors to probe (failover, busy-over) whose answers
//! [`pick_probed`] then judges, or a broadcast to all. The per-job state of round robin, LFU
//! and LRU lives in the [`Router`]; time comes in as an argument, so nothing here reads a clock.

use std::collections::{HashMap, HashSet};
use std::fmt;

use md5::{Digest, Md5};

use crate::{Error, RouteStrategy};

/// How long per-job routing state lives: it is reset this long after it was created, and a job
/// not routed for this long is forgotten (as XXL-JOB clears its maps every 24 h).
pub const STATE_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// Virtual nodes per address on the consistent-hash ring (XXL-JOB's value).
pub const VIRTUAL_NODES: usize = 100;

/// Counters above this start over, so they never overflow and a long-lived job does not keep an
/// ever-growing bias (XXL-JOB's bound for round robin and LFU).
const COUNTER_RESET_ABOVE: u64 = 1_000_000;

/// How often forgotten jobs are swept out; sweeping scans every job, so not on every route.
const SWEEP_EVERY_MS: i64 = 60 * 60 * 1000;

/// Cached rings kept at most; past this the cache starts over. Rings depend only on the
/// address list, so a handful of groups need a handful of rings.
const RING_CACHE_MAX: usize = 64;

/// The code a probe answers when the executor is alive (`/beat`) or idle (`/idleBeat`).
const PROBE_OK: i32 = 200;

/// A check the admin makes on an executor before choosing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    /// `POST /beat`: is the executor alive? (failover)
    Beat,
    /// `POST /idleBeat {"jobId": ..}`: is the executor alive and not running the job? (busy-over)
    IdleBeat,
}

impl Probe {
    /// The executor endpoint to call.
    pub const fn path(self) -> &'static str {
        match self {
            Probe::Beat => "/beat",
            Probe::IdleBeat => "/idleBeat",
        }
    }

    /// A short lowercase name for messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Probe::Beat => "beat",
            Probe::IdleBeat => "idle beat",
        }
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a run goes, as indices into the candidate list that was routed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Send the run to this candidate.
    One(usize),
    /// Probe these candidates in this order, stopping at the first that answers ok, then call
    /// [`pick_probed`] with the answers.
    Probe {
        /// Which check to make.
        probe: Probe,
        /// Candidate indices in probing order.
        order: Vec<usize>,
    },
    /// One run per candidate: candidate `i` gets shard `(i, total)`.
    Broadcast {
        /// The number of candidates, hence of shards.
        total: usize,
    },
}

/// One probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The candidate index probed.
    pub index: usize,
    /// The answer's code (200 is ok); a transport error is reported as a failure code (500).
    pub code: i32,
    /// The answer's message, or the transport error.
    pub msg: String,
}

impl ProbeOutcome {
    /// An answer from candidate `index`.
    pub fn new(index: usize, code: i32, msg: impl Into<String>) -> Self {
        ProbeOutcome {
            index,
            code,
            msg: msg.into(),
        }
    }

    /// Whether the executor passed the check.
    pub const fn is_ok(&self) -> bool {
        self.code == PROBE_OK
    }
}

/// The executor chosen from probe answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePick {
    /// The candidate index that passed.
    pub index: usize,
    /// Every probe up to and including the winning one, for the run's trigger message.
    pub report: String,
}

/// Chooses from the answers of a [`Route::Probe`]: the first outcome (in the order given) that
/// answered ok wins. When none did, the error lists every probe with its address, code and
/// message, so the run's trigger message shows why no executor was used.
pub fn pick_probed(
    probe: Probe,
    candidates: &[String],
    outcomes: &[ProbeOutcome],
) -> Result<ProbePick, Error> {
    let mut report = String::new();
    for outcome in outcomes {
        let address = candidates.get(outcome.index);
        if !report.is_empty() {
            report.push_str("; ");
        }
        match address {
            Some(address) => report.push_str(&format!(
                "{probe} {address}: code {}, msg {}",
                outcome.code, outcome.msg
            )),
            // A caller bug, reported rather than panicking inside the scheduler.
            None => report.push_str(&format!(
                "{probe} candidate #{} (out of range): code {}, msg {}",
                outcome.index, outcome.code, outcome.msg
            )),
        }
        if address.is_some() && outcome.is_ok() {
            return Ok(ProbePick {
                index: outcome.index,
                report,
            });
        }
    }
    if report.is_empty() {
        report.push_str("no executor was probed");
    }
    Err(Error::ProbeFailed { probe, report })
}

/// Where a run waits for a slot at a busy executor (a pull executor out of credits), higher
/// first: a run someone triggered by hand (the console's or the API's trigger) before every
/// scheduled one, then by its job's priority. Runs of equal rank keep their arrival order.
pub fn slot_rank(trigger: crate::TriggerType, priority: i32) -> i64 {
    let by_hand = matches!(
        trigger,
        crate::TriggerType::Manual | crate::TriggerType::Api
    );
    (i64::from(by_hand) << 32) + i64::from(priority)
}

/// XXL-JOB's consistent-hash function: the first four bytes of the MD5 digest of `s` (UTF-8)
/// read as an unsigned little-endian integer.
pub fn xxl_hash(s: &str) -> u32 {
    let digest = Md5::digest(s.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// A consistent-hash ring over a candidate list, identical to XXL-JOB's so that a job lands on
/// the same executor whichever admin routes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashRing {
    /// (key, candidate index), sorted by key, keys unique.
    nodes: Vec<(u32, usize)>,
}

impl HashRing {
    /// Builds the ring: [`VIRTUAL_NODES`] keys per address, `hash("SHARD-<address>-NODE-<i>")`;
    /// when two virtual nodes share a key, the later one (in list order) owns it.
    pub fn new(candidates: &[String]) -> Self {
        let mut nodes: Vec<(u32, usize)> = Vec::with_capacity(candidates.len() * VIRTUAL_NODES);
        for (index, address) in candidates.iter().enumerate() {
            for i in 0..VIRTUAL_NODES {
                nodes.push((xxl_hash(&format!("SHARD-{address}-NODE-{i}")), index));
            }
        }
        // A stable sort keeps insertion order within equal keys, so keeping the last of each
        // run of equal keys is "later duplicates overwrite".
        nodes.sort_by_key(|&(key, _)| key);
        let mut unique: Vec<(u32, usize)> = Vec::with_capacity(nodes.len());
        for node in nodes {
            match unique.last_mut() {
                Some(last) if last.0 == node.0 => *last = node,
                _ => unique.push(node),
            }
        }
        HashRing { nodes: unique }
    }

    /// The candidate index that owns `job_id`: the first ring entry whose key is at least
    /// `hash(decimal job id)`, wrapping to the lowest key. `None` for an empty ring.
    pub fn pick(&self, job_id: i64) -> Option<usize> {
        let key = xxl_hash(&job_id.to_string());
        let at = self.nodes.partition_point(|&(k, _)| k < key);
        self.nodes
            .get(at)
            .or_else(|| self.nodes.first())
            .map(|&(_, index)| index)
    }
}

/// The per-job state of the stateful strategies.
#[derive(Debug)]
struct JobState {
    /// When this state was created; it starts over [`STATE_TTL_MS`] later.
    born_at: i64,
    /// When the job was last routed; [`Router::sweep`] forgets it [`STATE_TTL_MS`] later.
    touched_at: i64,
    /// Round robin: the last counter value used.
    round: Option<u64>,
    /// LFU: picks per address.
    lfu: HashMap<String, u64>,
    /// LRU: addresses, least recently picked first.
    lru: Vec<String>,
}

impl JobState {
    fn new(now_ms: i64) -> Self {
        JobState {
            born_at: now_ms,
            touched_at: now_ms,
            round: None,
            lfu: HashMap::new(),
            lru: Vec::new(),
        }
    }
}

/// The job's state, started over when it is older than [`STATE_TTL_MS`], marked as touched.
fn job_state(jobs: &mut HashMap<i64, JobState>, job_id: i64, now_ms: i64) -> &mut JobState {
    let state = jobs.entry(job_id).or_insert_with(|| JobState::new(now_ms));
    if now_ms.saturating_sub(state.born_at) >= STATE_TTL_MS {
        *state = JobState::new(now_ms);
    }
    // Never move back in time, so a clock step backwards cannot make a job look stale.
    state.touched_at = state.touched_at.max(now_ms);
    state
}

/// Routes runs to executors and holds the per-job state that some strategies need.
///
/// Memory stays bounded: each job's state is reset [`STATE_TTL_MS`] after it was created, jobs
/// not routed for [`STATE_TTL_MS`] are forgotten (checked at most hourly), and the ring cache
/// is capped.
#[derive(Debug)]
pub struct Router {
    rng: fastrand::Rng,
    jobs: HashMap<i64, JobState>,
    rings: HashMap<Vec<String>, HashRing>,
    next_sweep_at: i64,
}

impl Default for Router {
    fn default() -> Self {
        Router::new()
    }
}

impl Router {
    /// A router with fresh randomness.
    pub fn new() -> Self {
        Router::from_rng(fastrand::Rng::new())
    }

    /// A router whose random choices are fixed by `seed`, for reproducible tests.
    pub fn with_seed(seed: u64) -> Self {
        Router::from_rng(fastrand::Rng::with_seed(seed))
    }

    fn from_rng(rng: fastrand::Rng) -> Self {
        Router {
            rng,
            jobs: HashMap::new(),
            rings: HashMap::new(),
            next_sweep_at: i64::MIN,
        }
    }

    /// Decides where a run of `job_id` goes among `candidates` (the group's live addresses, in
    /// the group's order) at `now_ms`. Fails with [`Error::NoExecutor`] when the list is empty.
    pub fn route(
        &mut self,
        strategy: RouteStrategy,
        job_id: i64,
        candidates: &[String],
        now_ms: i64,
    ) -> Result<Route, Error> {
        if candidates.is_empty() {
            return Err(Error::NoExecutor);
        }
        if now_ms >= self.next_sweep_at {
            self.sweep(now_ms);
        }
        let n = candidates.len();
        let route = match strategy {
            RouteStrategy::First => Route::One(0),
            RouteStrategy::Last => Route::One(n - 1),
            RouteStrategy::Random => Route::One(self.rng.usize(0..n)),
            RouteStrategy::Round => Route::One(self.round(job_id, n, now_ms)),
            RouteStrategy::LeastFrequentlyUsed => {
                Route::One(self.least_frequently_used(job_id, candidates, now_ms))
            }
            RouteStrategy::LeastRecentlyUsed => {
                Route::One(self.least_recently_used(job_id, candidates, now_ms))
            }
            RouteStrategy::ConsistentHash => Route::One(self.consistent_hash(job_id, candidates)),
            RouteStrategy::Failover => Route::Probe {
                probe: Probe::Beat,
                order: (0..n).collect(),
            },
            RouteStrategy::Busyover => Route::Probe {
                probe: Probe::IdleBeat,
                order: (0..n).collect(),
            },
            RouteStrategy::ShardingBroadcast => Route::Broadcast { total: n },
        };
        Ok(route)
    }

    /// Drops the state of `job_id` (for example when the job is deleted).
    pub fn forget_job(&mut self, job_id: i64) {
        self.jobs.remove(&job_id);
    }

    /// Forgets every job not routed for [`STATE_TTL_MS`] and empties the ring cache. [`route`]
    /// calls this at most hourly; callers may call it from their own maintenance too.
    ///
    /// [`route`]: Router::route
    pub fn sweep(&mut self, now_ms: i64) {
        self.jobs
            .retain(|_, state| now_ms.saturating_sub(state.touched_at) < STATE_TTL_MS);
        self.rings.clear();
        self.next_sweep_at = now_ms.saturating_add(SWEEP_EVERY_MS);
    }

    /// How many jobs have routing state right now.
    pub fn tracked_jobs(&self) -> usize {
        self.jobs.len()
    }

    fn round(&mut self, job_id: i64, n: usize, now_ms: i64) -> usize {
        let state = job_state(&mut self.jobs, job_id, now_ms);
        let count = match state.round {
            Some(c) if c <= COUNTER_RESET_ABOVE => c + 1,
            // A random start spreads jobs that begin together over different executors.
            _ => self.rng.u64(0..100),
        };
        state.round = Some(count);
        (count % n as u64) as usize
    }

    fn least_frequently_used(&mut self, job_id: i64, candidates: &[String], now_ms: i64) -> usize {
        let n = candidates.len() as u64;
        let state = job_state(&mut self.jobs, job_id, now_ms);
        let rng = &mut self.rng;
        let live: HashSet<&str> = candidates.iter().map(String::as_str).collect();
        state
            .lfu
            .retain(|address, _| live.contains(address.as_str()));
        let mut best: Option<(usize, u64)> = None;
        for (index, address) in candidates.iter().enumerate() {
            // New addresses start at a random count so they do not all take the next picks.
            let count = match state.lfu.get(address) {
                Some(&c) if c <= COUNTER_RESET_ABOVE => c,
                _ => {
                    let c = rng.u64(0..n);
                    state.lfu.insert(address.clone(), c);
                    c
                }
            };
            // Strictly smaller: ties go to the earliest candidate, which keeps tests exact.
            if best.is_none_or(|(_, b)| count < b) {
                best = Some((index, count));
            }
        }
        let (index, _) = best.expect("candidates is not empty");
        if let Some(count) = state.lfu.get_mut(&candidates[index]) {
            *count += 1;
        }
        index
    }

    fn least_recently_used(&mut self, job_id: i64, candidates: &[String], now_ms: i64) -> usize {
        let state = job_state(&mut self.jobs, job_id, now_ms);
        let positions: HashMap<&str, usize> = candidates
            .iter()
            .enumerate()
            .rev() // so that a duplicated address maps to its first position
            .map(|(i, a)| (a.as_str(), i))
            .collect();
        state
            .lru
            .retain(|address| positions.contains_key(address.as_str()));
        let mut known: HashSet<String> = state.lru.iter().cloned().collect();
        for address in candidates {
            if known.insert(address.clone()) {
                state.lru.push(address.clone());
            }
        }
        // The head is the least recently picked; picking moves it to the tail.
        let head = state.lru.remove(0);
        let index = positions[head.as_str()];
        state.lru.push(head);
        index
    }

    fn consistent_hash(&mut self, job_id: i64, candidates: &[String]) -> usize {
        if !self.rings.contains_key(candidates) {
            if self.rings.len() >= RING_CACHE_MAX {
                self.rings.clear();
            }
            self.rings
                .insert(candidates.to_vec(), HashRing::new(candidates));
        }
        self.rings[candidates]
            .pick(job_id)
            .expect("a ring over a non-empty list is not empty")
    }
}
