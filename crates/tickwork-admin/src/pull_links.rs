//! The pull executors connected to this admin: a call the executor client makes to a
//! `pull://` address goes down that executor's own connection as a frame, and its answer
//! comes back up the same way. A `/run` first takes one of the credits the executor granted,
//! so the executor never has more runs from this admin than it said it can take.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tickwork_protocol::pull::Frame;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Why a call over a pull connection got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl std::fmt::Display for LinkFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkFailure::NotHere => "no pull connection of this executor is held by this admin",
            LinkFailure::Draining => "the executor is shutting down",
            LinkFailure::NoCredit => "the executor had no free slot within the call's timeout",
            LinkFailure::Closed => "the pull connection closed before the answer",
            LinkFailure::Timeout => "no answer within the call's timeout",
        })
    }
}

/// One executor's connection, as the callers of its address see it.
pub(crate) struct Link {
    pub(crate) app: String,
    pub(crate) address: String,
    outbox: mpsc::Sender<Frame>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    credits: Semaphore,
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
            credits: Semaphore::new(credits as usize),
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

    /// Takes one credit for a `/run`, waiting at most `timeout` for one.
    pub(crate) async fn take_credit(&self, timeout: Duration) -> Result<(), LinkFailure> {
        if self.is_draining() {
            return Err(LinkFailure::Draining);
        }
        match tokio::time::timeout(timeout, self.credits.acquire()).await {
            Ok(Ok(permit)) => {
                // Given back by the executor (a credit frame), not by this side.
                permit.forget();
                Ok(())
            }
            Ok(Err(_)) => Err(LinkFailure::Closed),
            Err(_) => Err(LinkFailure::NoCredit),
        }
    }

    /// Gives back a credit taken for a `/run` that never left.
    pub(crate) fn return_credit(&self) {
        self.credits.add_permits(1);
    }

    /// The executor granted `n` more runs.
    pub(crate) fn grant(&self, n: u32) {
        // A semaphore holds at most `usize::MAX >> 3` permits; an executor cannot usefully
        // grant anywhere near that, so a runaway grant stops growing there.
        let room = Semaphore::MAX_PERMITS - self.credits.available_permits();
        self.credits.add_permits((n as usize).min(room));
    }

    /// Credits left now.
    pub(crate) fn credits(&self) -> usize {
        self.credits.available_permits()
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

/// The links of this admin, by address.
#[derive(Default)]
pub(crate) struct PullLinks {
    links: Mutex<HashMap<String, Arc<Link>>>,
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

    /// Lets go of `link` if its address still has it (not a newer connection of the executor).
    pub(crate) fn remove(&self, link: &Arc<Link>) {
        let mut links = self.links.lock().expect("links lock");
        if links
            .get(&link.address)
            .is_some_and(|l| Arc::ptr_eq(l, link))
        {
            links.remove(&link.address);
        }
        drop(links);
        link.close();
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
        (Arc::new(Link::new("app", "pull://n/i", credits, tx)), rx)
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
        assert_eq!(link.take_credit(short).await, Ok(()));
        assert_eq!(link.take_credit(short).await, Err(LinkFailure::NoCredit));
        link.grant(1);
        assert_eq!(link.take_credit(short).await, Ok(()));
        let waiting = {
            let link = link.clone();
            tokio::spawn(async move { link.take_credit(Duration::from_secs(30)).await })
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
            link.take_credit(Duration::from_secs(1)).await,
            Err(LinkFailure::Draining)
        );
    }

    #[test]
    fn a_link_serves_only_its_own_app_and_a_newer_connection_replaces_the_older() {
        let links = PullLinks::default();
        let (first, _rx1) = link(1);
        links.insert(first.clone());
        assert!(links.get("pull://n/i", Some("app")).is_some());
        assert!(links.get("pull://n/i", Some("other")).is_none());
        let (second, _rx2) = link(1);
        links.insert(second.clone());
        // The older connection's end does not take the newer one away.
        links.remove(&first);
        assert!(Arc::ptr_eq(
            &links.get("pull://n/i", None).unwrap(),
            &second
        ));
        links.remove(&second);
        assert_eq!(links.len(), 0);
    }
}
