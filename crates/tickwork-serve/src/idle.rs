//! The connections between two requests of theirs (keep-alive idle), the longest idle first:
//! at the connection cap the first of them is closed to make room for a new connection, as it
//! would close at its header-read timeout anyway. Without this a client that opened many
//! connections in a burst (an executor calling back hundreds of results at once) held every
//! slot with idle ones, and any other client waited up to the timeout.
//!
//! Only a connection idle for some time is closed: one that has just been answered is most
//! likely about to carry its client's next request, which a close would cut (the client sees
//! its connection end without an answer, and does not resend a POST).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The idle connections of one server.
#[derive(Default)]
pub(crate) struct IdleConnections {
    state: Mutex<State>,
    /// Signalled when a connection becomes idle, for an accept waiting at the cap.
    became_idle: Notify,
}

#[derive(Default)]
struct State {
    /// Each idle connection's close token and the instant it became idle, by the order in
    /// which it became idle.
    by_age: BTreeMap<u64, (Instant, CancellationToken)>,
    next: u64,
}

/// What [`IdleConnections::close_longest_idle`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    /// The connection idle the longest is closing.
    Closed,
    /// None is idle.
    NoneIdle,
    /// The connection idle the longest has been idle for less than the minimum: it may be
    /// closed once this much more time has passed (if it is still idle then).
    TooRecent(Duration),
}

impl IdleConnections {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the connection idle the longest if it has been idle for at least `min_idle`
    /// (gracefully: one whose next request has just begun finishes it first).
    pub(crate) fn close_longest_idle(&self, min_idle: Duration) -> Closing {
        let mut state = self.lock();
        let Some(oldest) = state.by_age.first_entry() else {
            return Closing::NoneIdle;
        };
        let idle_for = oldest.get().0.elapsed();
        if idle_for < min_idle {
            return Closing::TooRecent(min_idle - idle_for);
        }
        let (_, close) = oldest.remove();
        drop(state);
        close.cancel();
        Closing::Closed
    }

    /// Waits until some connection becomes idle (at once when one did since the last wait).
    pub(crate) async fn one_became_idle(&self) {
        self.became_idle.notified().await;
    }
}

/// One connection's place among the idle ones. A new connection is not idle: it has not sent
/// its first request yet, and closing it could fail that request.
pub(crate) struct ConnectionIdleness {
    idle: Arc<IdleConnections>,
    /// Cancelled to close the connection.
    close: CancellationToken,
    key: Mutex<Option<u64>>,
}

impl ConnectionIdleness {
    pub(crate) fn new(idle: Arc<IdleConnections>, close: CancellationToken) -> Self {
        ConnectionIdleness {
            idle,
            close,
            key: Mutex::new(None),
        }
    }

    fn key(&self) -> MutexGuard<'_, Option<u64>> {
        self.key.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request began: the connection is no longer idle.
    pub(crate) fn busy(&self) {
        if let Some(key) = self.key().take() {
            self.idle.lock().by_age.remove(&key);
        }
    }

    /// Its request was answered: the connection is idle until the next one.
    pub(crate) fn idle(&self) {
        let mut key = self.key();
        let mut state = self.idle.lock();
        if let Some(old) = key.take() {
            state.by_age.remove(&old);
        }
        let new = state.next;
        state.next += 1;
        state
            .by_age
            .insert(new, (Instant::now(), self.close.clone()));
        *key = Some(new);
        drop(state);
        self.idle.became_idle.notify_one();
    }

    /// The connection ended.
    pub(crate) fn ended(&self) {
        self.busy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN_IDLE: Duration = Duration::from_secs(1);

    fn connection(idle: &Arc<IdleConnections>) -> (ConnectionIdleness, CancellationToken) {
        let close = CancellationToken::new();
        (
            ConnectionIdleness::new(Arc::clone(idle), close.clone()),
            close,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_connection_idle_for_the_minimum_is_closed() {
        let idle = Arc::new(IdleConnections::default());
        let (conn, close) = connection(&idle);
        assert_eq!(idle.close_longest_idle(MIN_IDLE), Closing::NoneIdle);
        conn.idle();
        tokio::time::advance(Duration::from_millis(400)).await;
        assert_eq!(
            idle.close_longest_idle(MIN_IDLE),
            Closing::TooRecent(Duration::from_millis(600))
        );
        assert!(!close.is_cancelled());
        tokio::time::advance(Duration::from_millis(600)).await;
        assert_eq!(idle.close_longest_idle(MIN_IDLE), Closing::Closed);
        assert!(close.is_cancelled());
        assert_eq!(idle.close_longest_idle(MIN_IDLE), Closing::NoneIdle);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_request_starts_a_connections_idleness_again() {
        let idle = Arc::new(IdleConnections::default());
        let (first, first_close) = connection(&idle);
        let (second, second_close) = connection(&idle);
        first.idle();
        second.idle();
        tokio::time::advance(MIN_IDLE).await;
        // The first one is asked again: it is busy, then idle from now on.
        first.busy();
        first.idle();
        assert_eq!(idle.close_longest_idle(MIN_IDLE), Closing::Closed);
        assert!(second_close.is_cancelled());
        assert!(!first_close.is_cancelled());
        assert_eq!(
            idle.close_longest_idle(MIN_IDLE),
            Closing::TooRecent(MIN_IDLE)
        );
        first.ended();
        assert_eq!(idle.close_longest_idle(MIN_IDLE), Closing::NoneIdle);
    }
}
