//! Database calls bounded in time without being cancelled.
//!
//! Dropping a store call in the middle of a statement can leave its connection unusable: on
//! MySQL/MariaDB such a connection never came back to the pool, and a paused peer's lock waits
//! that made a few heartbeats time out drained a whole pool for good. So a call that must not
//! hold its caller for long runs as a task of its own: the caller stops waiting after its
//! bound, the call finishes (its statement is bounded by the session bounds) and its
//! connection goes back clean.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;

/// What a bounded call came to.
#[derive(Debug)]
pub(crate) enum Bounded<T> {
    Done(T),
    /// Still running after the bound; it finishes in the background.
    TimedOut,
    /// Not started: the previous call of this slot is still running.
    Busy,
}

/// One call at a time: a loop that calls again while its last call still runs would pile up
/// calls waiting for the same database.
pub(crate) struct BoundedSlot<T> {
    running: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> BoundedSlot<T> {
    pub(crate) fn new() -> Self {
        BoundedSlot { running: None }
    }

    /// Starts `call` unless the previous one still runs, and waits for it up to `limit`.
    pub(crate) async fn run(
        &mut self,
        limit: Duration,
        call: impl Future<Output = T> + Send + 'static,
    ) -> Bounded<T> {
        if self.running.as_ref().is_some_and(|t| !t.is_finished()) {
            return Bounded::Busy;
        }
        let mut task = tokio::spawn(call);
        match tokio::time::timeout(limit, &mut task).await {
            Ok(Ok(value)) => {
                self.running = None;
                Bounded::Done(value)
            }
            // The call panicked: the panic was reported where it happened.
            Ok(Err(e)) => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {
                self.running = Some(task);
                Bounded::TimedOut
            }
        }
    }
}

/// Waits for `call` up to `limit` (None after it), letting it finish in the background.
pub(crate) async fn wait_at_most<T: Send + 'static>(
    limit: Duration,
    call: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    match BoundedSlot::new().run(limit, call).await {
        Bounded::Done(value) => Some(value),
        Bounded::TimedOut | Bounded::Busy => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::sync::Notify;

    #[tokio::test]
    async fn a_call_that_outlives_its_bound_still_finishes_and_blocks_the_next() {
        let release = Arc::new(Notify::new());
        let finished = Arc::new(AtomicBool::new(false));
        let mut slot = BoundedSlot::new();
        let call = {
            let (release, finished) = (release.clone(), finished.clone());
            async move {
                release.notified().await;
                finished.store(true, Ordering::SeqCst);
                1
            }
        };
        let first = slot.run(Duration::from_millis(10), call).await;
        assert!(matches!(first, Bounded::TimedOut), "{first:?}");
        let second = slot.run(Duration::from_secs(5), async { 2 }).await;
        assert!(matches!(second, Bounded::Busy), "{second:?}");
        release.notify_one();
        let task = slot.running.take().expect("the first call is kept");
        assert_eq!(task.await.expect("finished"), 1);
        assert!(finished.load(Ordering::SeqCst), "not cancelled");
        let third = slot.run(Duration::from_secs(5), async { 3 }).await;
        assert!(matches!(third, Bounded::Done(3)), "{third:?}");
    }

    #[tokio::test]
    async fn wait_at_most_gives_the_answer_in_time() {
        assert_eq!(
            wait_at_most(Duration::from_secs(5), async { 7 }).await,
            Some(7)
        );
        let never = std::future::pending::<()>();
        assert_eq!(wait_at_most(Duration::from_millis(10), never).await, None);
    }
}
