//! The pull executors connected to this admin: a call the executor client makes to a
//! `pull://` address goes down that executor's own connection as a frame, and its answer
//! comes back up the same way. A `/run` first takes one of the credits the executor granted,
//! so the executor never has more runs from this admin than it said it can take. A call for a
//! pull executor that another admin node holds is relayed through the database ([`Relay`]):
//! written here, taken and made by the holder, its answer collected here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tickwork_protocol::pull::Frame;
use tickwork_store::{PullCallNew, PullCallState, Store};
use tokio::sync::{mpsc, oneshot};

/// Why a call over a pull connection got no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LinkFailure {
    /// No connection of this address is held here (it closed, or another admin holds it).
    NotHere,
    /// The executor drains: it takes no new runs.
    Draining,
    /// No credit came within the call's timeout: the executor is busy with as many runs as it
    /// can take.
    NoCredit,
    /// The connection closed before the answer came.
    Closed,
    /// No answer within the call's timeout.
    Timeout,
    /// The call went through the database to the admin that holds the connection, and could
    /// not be written or read there.
    Relay,
}

impl std::fmt::Display for LinkFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkFailure::NotHere => "no pull connection of this executor is held by this admin",
            LinkFailure::Draining => "the executor is shutting down",
            LinkFailure::NoCredit => "the executor had no free slot within the call's timeout",
            LinkFailure::Closed => "the pull connection closed before the answer",
            LinkFailure::Timeout => "no answer within the call's timeout",
            LinkFailure::Relay => {
                "the call could not be relayed to the admin holding the connection"
            }
        })
    }
}

/// A pull executor's credits, and the `/run`s waiting for one, highest rank first (see
/// [`tickwork_core::routing::slot_rank`]), in arrival order within a rank.
#[derive(Default)]
struct Credits {
    state: Mutex<CreditState>,
}

#[derive(Default)]
struct CreditState {
    free: usize,
    waiting: std::collections::BinaryHeap<Waiter>,
    /// Arrival counter: earlier waiters of a rank go first.
    seq: u64,
    closed: bool,
}

struct Waiter {
    rank: i64,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        (self.rank, self.seq) == (other.rank, other.seq)
    }
}

impl Eq for Waiter {}

impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiter {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // A max-heap: higher rank, then lower sequence number, on top.
        (self.rank, std::cmp::Reverse(self.seq)).cmp(&(other.rank, std::cmp::Reverse(other.seq)))
    }
}

impl CreditState {
    /// Hands free credits to the waiters in rank order (skipping those that stopped waiting).
    fn hand_out(&mut self) {
        while self.free > 0 {
            let Some(waiter) = self.waiting.pop() else {
                return;
            };
            if waiter.wake.send(()).is_ok() {
                self.free -= 1;
            }
        }
    }
}

impl Credits {
    fn new(free: usize) -> Self {
        Credits {
            state: Mutex::new(CreditState {
                free,
                ..CreditState::default()
            }),
        }
    }

    async fn take(&self, rank: i64, timeout: Duration) -> Result<(), LinkFailure> {
        let mut rx = {
            let mut state = self.state.lock().expect("credits lock");
            if state.closed {
                return Err(LinkFailure::Closed);
            }
            if state.free > 0 && state.waiting.is_empty() {
                state.free -= 1;
                return Ok(());
            }
            let (wake, rx) = oneshot::channel();
            state.seq += 1;
            let seq = state.seq;
            state.waiting.push(Waiter { rank, seq, wake });
            state.hand_out();
            rx
        };
        match tokio::time::timeout(timeout, &mut rx).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(LinkFailure::Closed),
            Err(_) => {
                // A credit handed out as the wait ended is taken, not lost.
                rx.close();
                match rx.try_recv() {
                    Ok(()) => Ok(()),
                    Err(_) => Err(LinkFailure::NoCredit),
                }
            }
        }
    }

    fn grant(&self, n: usize) {
        let mut state = self.state.lock().expect("credits lock");
        state.free = state.free.saturating_add(n);
        state.hand_out();
    }

    fn free(&self) -> usize {
        self.state.lock().expect("credits lock").free
    }

    fn close(&self) {
        let mut state = self.state.lock().expect("credits lock");
        state.closed = true;
        state.waiting.clear();
    }
}

/// One executor's connection, as the callers of its address see it.
pub(crate) struct Link {
    pub(crate) app: String,
    pub(crate) address: String,
    outbox: mpsc::Sender<Frame>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    credits: Credits,
    draining: AtomicBool,
}

impl Link {
    /// A link whose frames go to `outbox` (the connection's writer), with the credits of the
    /// executor's hello.
    pub(crate) fn new(app: &str, address: &str, credits: u32, outbox: mpsc::Sender<Frame>) -> Self {
        Link {
            app: app.to_owned(),
            address: address.to_owned(),
            outbox,
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            credits: Credits::new(credits as usize),
            draining: AtomicBool::new(false),
        }
    }

    /// Calls `path` with `body` and waits at most `timeout` for the answer's envelope.
    pub(crate) async fn call(
        &self,
        path: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<Value, LinkFailure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        let frame = Frame::Call {
            id,
            path: path.to_owned(),
            body,
        };
        let outcome = tokio::time::timeout(timeout, async {
            self.outbox
                .send(frame)
                .await
                .map_err(|_| LinkFailure::Closed)?;
            rx.await.map_err(|_| LinkFailure::Closed)
        })
        .await
        .unwrap_or(Err(LinkFailure::Timeout));
        if outcome.is_err() {
            self.pending.lock().expect("pending lock").remove(&id);
        }
        outcome
    }

    /// Takes one credit for a `/run` of `rank`, waiting at most `timeout` for one (behind
    /// the waiting runs of a higher rank). The executor gives it back (a credit frame).
    pub(crate) async fn take_credit(
        &self,
        rank: i64,
        timeout: Duration,
    ) -> Result<(), LinkFailure> {
        if self.is_draining() {
            return Err(LinkFailure::Draining);
        }
        self.credits.take(rank, timeout).await
    }

    /// Gives back a credit taken for a `/run` that never left.
    pub(crate) fn return_credit(&self) {
        self.credits.grant(1);
    }

    /// The executor granted `n` more runs.
    pub(crate) fn grant(&self, n: u32) {
        self.credits.grant(n as usize);
    }

    /// Credits left now.
    pub(crate) fn credits(&self) -> usize {
        self.credits.free()
    }

    /// The answer to call `id` came; an answer nobody waits for (late, or unknown) is dropped.
    pub(crate) fn answered(&self, id: u64, body: Value) {
        let waiter = self.pending.lock().expect("pending lock").remove(&id);
        if let Some(tx) = waiter {
            let _ = tx.send(body);
        }
    }

    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The connection is gone: every waiting call fails at once, and so does every call still
    /// waiting for a credit.
    pub(crate) fn close(&self) {
        self.pending.lock().expect("pending lock").clear();
        self.credits.close();
    }
}

/// A relayed call's answer as its holder writes it in the database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RelayAnswer {
    /// The executor's envelope.
    Answer(Value),
    /// Why it got none.
    Failure(LinkFailure),
}

/// How often a relayed call's writer looks for the answer, and its holder for calls, where
/// the database has no notifications.
pub(crate) const RELAY_POLL: Duration = Duration::from_millis(100);

/// The same where the database notifies (PostgreSQL): only for a notification missed while
/// the listening connection was lost.
pub(crate) const RELAY_POLL_NOTIFIED: Duration = Duration::from_secs(1);

/// How long after its deadline a call the holder took may still be answered: the holder makes
/// no call after the deadline, but one under way finishes.
const RELAY_GRACE: Duration = Duration::from_secs(2);

/// Calls for pull executors another node holds, through the database.
pub(crate) struct Relay {
    store: Arc<dyn Store>,
    /// The database notifies answers (see [`PullLinks::wake`]): poll slowly.
    notified: AtomicBool,
    /// The writers waiting for an answer, by call id.
    answers: Mutex<HashMap<i64, Arc<tokio::sync::Notify>>>,
    /// The most a relayed `/run` may wait for its holder: this node's fence is open when the
    /// call is written, and no other node adopts the run before this node's heartbeat is
    /// older than `node_dead_after`, so a deadline within half of it (less a margin) is never
    /// met by a holder sending a run that was adopted meanwhile.
    run_horizon: Duration,
}

impl Relay {
    pub(crate) fn new(store: Arc<dyn Store>, node_dead_after: Duration) -> Self {
        let run_horizon = (node_dead_after / 2)
            .saturating_sub(Duration::from_millis(500))
            .max(Duration::from_millis(200));
        Relay {
            store,
            notified: AtomicBool::new(false),
            answers: Mutex::default(),
            run_horizon,
        }
    }

    fn poll(&self) -> Duration {
        if self.notified.load(Ordering::Relaxed) {
            RELAY_POLL_NOTIFIED
        } else {
            RELAY_POLL
        }
    }

    /// Makes `path` at `address` through the node that holds it, waiting at most `timeout`
    /// (less for a `/run`, see `run_horizon`) plus the grace for a call under way.
    async fn call(
        &self,
        address: &str,
        app: &str,
        path: &str,
        body: Value,
        (timeout, rank): (Duration, i64),
    ) -> Result<Value, LinkFailure> {
        let wait = if path == "/run" {
            timeout.min(self.run_horizon)
        } else {
            timeout
        };
        let now = wall_ms();
        let call = PullCallNew {
            address: address.to_owned(),
            app: app.to_owned(),
            path: path.to_owned(),
            body: body.to_string(),
            rank,
            now,
            deadline_at: now + wait.as_millis() as i64,
        };
        let id = self.store.pull_call_put(call).await.map_err(|e| {
            tracing::warn!(error = %e, "pull call not written for relay");
            LinkFailure::Relay
        })?;
        let answered = Arc::new(tokio::sync::Notify::new());
        self.answers
            .lock()
            .expect("answers lock")
            .insert(id, answered.clone());
        let outcome = self.collect(id, wait, &answered).await;
        self.answers.lock().expect("answers lock").remove(&id);
        outcome
    }

    /// Waits for the answer of call `id` (woken by its notification, or polling).
    async fn collect(
        &self,
        id: i64,
        wait: Duration,
        answered: &tokio::sync::Notify,
    ) -> Result<Value, LinkFailure> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut withdrawn = false;
        loop {
            // Up to the deadline, then (withdrawn, or taken and under way) each poll interval.
            let now = tokio::time::Instant::now();
            let next_look = if withdrawn {
                now + self.poll()
            } else {
                (now + self.poll()).min(deadline)
            };
            tokio::select! {
                _ = answered.notified() => {}
                _ = tokio::time::sleep_until(next_look) => {}
            }
            let late = tokio::time::Instant::now() >= deadline;
            let state = if late && !withdrawn {
                withdrawn = true;
                self.store.pull_call_withdraw(id).await
            } else {
                self.store.pull_call_collect(id).await
            };
            match state {
                Ok(PullCallState::Answered(text)) => {
                    return match serde_json::from_str::<RelayAnswer>(&text) {
                        Ok(RelayAnswer::Answer(body)) => Ok(body),
                        Ok(RelayAnswer::Failure(e)) => Err(e),
                        Err(_) => Err(LinkFailure::Relay),
                    };
                }
                // Nobody took it: never made.
                Ok(PullCallState::Withdrawn) if withdrawn => return Err(LinkFailure::NotHere),
                Ok(PullCallState::Withdrawn) => return Err(LinkFailure::Relay),
                Ok(PullCallState::Waiting | PullCallState::Taken) => {}
                Err(e) => tracing::debug!(error = %e, "relayed pull call not read"),
            }
            if tokio::time::Instant::now() >= deadline + RELAY_GRACE {
                return Err(LinkFailure::Timeout);
            }
        }
    }
}

/// Epoch milliseconds of the wall clock: relayed calls' deadlines are compared by two nodes.
pub(crate) fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The links of this admin, by address, and the relay to the others'.
#[derive(Default)]
pub(crate) struct PullLinks {
    links: Mutex<HashMap<String, Arc<Link>>>,
    relay: OnceLock<Relay>,
    /// Results the executors sent over their connections, recorded.
    results: AtomicU64,
    /// Wakes the holder's loop: a call for an executor here was written.
    calls_written: tokio::sync::Notify,
}

impl PullLinks {
    /// Holds `link` under its address; a link the same address had (the executor's earlier
    /// connection, not yet seen closed) is closed and replaced.
    pub(crate) fn insert(&self, link: Arc<Link>) {
        let old = self
            .links
            .lock()
            .expect("links lock")
            .insert(link.address.clone(), link);
        if let Some(old) = old {
            old.close();
        }
    }

    /// Lets go of `link` if its address still has it (not a newer connection of the
    /// executor); whether it had.
    pub(crate) fn remove(&self, link: &Arc<Link>) -> bool {
        let mut links = self.links.lock().expect("links lock");
        let current = links
            .get(&link.address)
            .is_some_and(|l| Arc::ptr_eq(l, link));
        if current {
            links.remove(&link.address);
        }
        drop(links);
        link.close();
        current
    }

    /// The link of `address`, when this admin holds it and it serves `app` (a group's calls
    /// never reach another group's executor, whatever address was registered).
    pub(crate) fn get(&self, address: &str, app: Option<&str>) -> Option<Arc<Link>> {
        let links = self.links.lock().expect("links lock");
        let link = links.get(address)?;
        match app {
            Some(app) if app != link.app => None,
            _ => Some(link.clone()),
        }
    }

    /// Sets the relay to other nodes' links (once, when the pipeline starts).
    pub(crate) fn set_relay(&self, relay: Relay) {
        let _ = self.relay.set(relay);
    }

    /// A notification of the database: a call for one of the executors here was written
    /// (the holder's loop takes it now), or a call was answered (its writer collects it).
    pub(crate) fn wake(&self, wake: tickwork_store::PullWake) {
        let Some(relay) = self.relay.get() else {
            return;
        };
        relay.notified.store(true, Ordering::Relaxed);
        match wake {
            tickwork_store::PullWake::Call(address) => {
                if self
                    .links
                    .lock()
                    .expect("links lock")
                    .contains_key(&address)
                {
                    self.calls_written.notify_one();
                }
            }
            tickwork_store::PullWake::Answer(id) => {
                let waiter = relay
                    .answers
                    .lock()
                    .expect("answers lock")
                    .get(&id)
                    .cloned();
                if let Some(waiter) = waiter {
                    waiter.notify_one();
                }
            }
        }
    }

    /// Waits until a call for an executor here is notified, or the poll interval passed.
    pub(crate) async fn calls_or_poll(&self) {
        let poll = self.relay.get().map_or(RELAY_POLL, Relay::poll);
        tokio::select! {
            _ = self.calls_written.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }

    /// Makes `path` at `address` through the node that holds it (this one does not).
    /// `(timeout, rank)`: how long the caller waits, and a `/run`'s rank for a credit.
    pub(crate) async fn relay(
        &self,
        address: &str,
        app: Option<&str>,
        path: &str,
        body: Value,
        (timeout, rank): (Duration, i64),
    ) -> Result<Value, LinkFailure> {
        let Some(relay) = self.relay.get() else {
            return Err(LinkFailure::NotHere);
        };
        relay
            .call(address, app.unwrap_or(""), path, body, (timeout, rank))
            .await
    }

    /// The addresses of the executors connected here.
    pub(crate) fn addresses(&self) -> Vec<String> {
        let links = self.links.lock().expect("links lock");
        links.keys().cloned().collect()
    }

    /// Counts results recorded from a connection.
    pub(crate) fn count_results(&self, n: usize) {
        self.results.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Results recorded from connections since the start.
    pub(crate) fn results(&self) -> u64 {
        self.results.load(Ordering::Relaxed)
    }

    /// How many executors are connected here.
    pub(crate) fn len(&self) -> usize {
        self.links.lock().expect("links lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(credits: u32) -> (Arc<Link>, mpsc::Receiver<Frame>) {
        let (tx, rx) = mpsc::channel(8);
        (Arc::new(Link::new("app", "pull://i", credits, tx)), rx)
    }

    #[tokio::test]
    async fn a_call_gets_the_answer_with_its_id() {
        let (link, mut rx) = link(0);
        let caller = {
            let link = link.clone();
            tokio::spawn(async move {
                link.call("/beat", Value::Null, Duration::from_secs(30))
                    .await
            })
        };
        let Some(Frame::Call { id, path, .. }) = rx.recv().await else {
            panic!("no call frame");
        };
        assert_eq!(path, "/beat");
        link.answered(id + 100, serde_json::json!({"code": 500}));
        link.answered(id, serde_json::json!({"code": 200}));
        assert_eq!(caller.await.unwrap(), Ok(serde_json::json!({"code": 200})));
    }

    #[tokio::test]
    async fn runs_wait_for_credits_and_a_closed_link_fails_its_callers() {
        let (link, _rx) = link(1);
        let short = Duration::from_millis(1);
        assert_eq!(link.take_credit(0, short).await, Ok(()));
        assert_eq!(link.take_credit(0, short).await, Err(LinkFailure::NoCredit));
        link.grant(1);
        assert_eq!(link.take_credit(0, short).await, Ok(()));
        let waiting = {
            let link = link.clone();
            tokio::spawn(async move { link.take_credit(0, Duration::from_secs(30)).await })
        };
        let call = {
            let link = link.clone();
            tokio::spawn(async move {
                link.call("/log", Value::Null, Duration::from_secs(30))
                    .await
            })
        };
        // The call is pending once its frame is queued; close only then.
        while link.pending.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        link.close();
        assert_eq!(waiting.await.unwrap(), Err(LinkFailure::Closed));
        assert_eq!(call.await.unwrap(), Err(LinkFailure::Closed));
    }

    #[tokio::test]
    async fn a_draining_executor_gets_no_run() {
        let (link, _rx) = link(5);
        link.set_draining();
        assert_eq!(
            link.take_credit(0, Duration::from_secs(1)).await,
            Err(LinkFailure::Draining)
        );
    }

    #[tokio::test]
    async fn freed_credits_go_to_the_highest_rank_first_then_in_arrival_order() {
        let (link, _rx) = link(0);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (name, rank) in [("low", 1), ("high-a", 5), ("mid", 3), ("high-b", 5)] {
            let (waiter, order) = (link.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                waiter
                    .take_credit(rank, Duration::from_secs(30))
                    .await
                    .unwrap();
                order.lock().unwrap().push(name);
            }));
            // Queued in this order.
            while link.credits.state.lock().unwrap().waiting.len() < waiting.len() {
                tokio::task::yield_now().await;
            }
        }
        for expected in 1..=4 {
            link.grant(1);
            while order.lock().unwrap().len() < expected {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(*order.lock().unwrap(), ["high-a", "high-b", "mid", "low"]);
        assert_eq!(link.credits(), 0);
    }

    #[tokio::test]
    async fn a_wait_that_times_out_leaves_the_credit_to_the_next() {
        let (link, _rx) = link(0);
        assert_eq!(
            link.take_credit(9, Duration::from_millis(5)).await,
            Err(LinkFailure::NoCredit)
        );
        link.grant(1);
        assert_eq!(link.credits(), 1, "the gone waiter took nothing");
        assert_eq!(link.take_credit(0, Duration::from_millis(5)).await, Ok(()));
    }

    #[test]
    fn a_link_serves_only_its_own_app_and_a_newer_connection_replaces_the_older() {
        let links = PullLinks::default();
        let (first, _rx1) = link(1);
        links.insert(first.clone());
        assert!(links.get("pull://i", Some("app")).is_some());
        assert!(links.get("pull://i", Some("other")).is_none());
        let (second, _rx2) = link(1);
        links.insert(second.clone());
        // The older connection's end does not take the newer one away.
        links.remove(&first);
        assert!(Arc::ptr_eq(&links.get("pull://i", None).unwrap(), &second));
        links.remove(&second);
        assert_eq!(links.len(), 0);
    }
}
