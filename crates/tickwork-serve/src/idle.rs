//! The connections between two requests of theirs (keep-alive idle), the longest idle first:
//! at the connection cap the first of them is closed to make room for a new connection, as it
//! would close at its header-read timeout anyway. Without this a client that opened many
//! connections in a burst (an executor calling back hundreds of results at once) held every
//! slot with idle ones, and any other client waited up to the timeout.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
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
    /// Each idle connection's close token, by the order in which it became idle.
    by_age: BTreeMap<u64, CancellationToken>,
    next: u64,
}

impl IdleConnections {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the connection idle the longest (gracefully: one whose next request has just
    /// begun finishes it first); `false` when none is idle.
    pub(crate) fn close_longest_idle(&self) -> bool {
        let Some((_, close)) = self.lock().by_age.pop_first() else {
            return false;
        };
        close.cancel();
        true
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
        state.by_age.insert(new, self.close.clone());
        *key = Some(new);
        drop(state);
        self.idle.became_idle.notify_one();
    }

    /// The connection ended.
    pub(crate) fn ended(&self) {
        self.busy();
    }
}
