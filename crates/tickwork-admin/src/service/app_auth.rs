//! Callers known by an executor group's app name and access token (XXL-JOB 3.5's job API):
//! who they are, as a [`Principal`] that may change that group's jobs only, and XXL-JOB's
//! limit on how often they may call.

use subtle::ConstantTimeEq;

use super::Inner;
use crate::{Error, Principal, Role};

/// Calls one group's token may make in a burst; the bucket refills over [`REFILL_MS`].
const BURST: i64 = 100;
/// The time in which an empty bucket fills again (XXL-JOB 3.5: 100 calls per 30 s).
const REFILL_MS: i64 = 30_000;
/// The longest a call waits for its turn before it is refused, as XXL-JOB 3.5's
/// `tryAcquire(1, 1 s)`.
const MAX_WAIT_MS: i64 = 1_000;

/// One group's call budget: XXL-JOB 3.5's token bucket, kept as the instant at which the
/// bucket would be full again if no call came (a generic cell rate), so a call is one
/// comparison and no timer refills anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CallBudget {
    full_at_ms: i64,
}

impl CallBudget {
    /// Takes a call at `now_ms`: how long it must wait for its turn, or `None` when that
    /// would be longer than [`MAX_WAIT_MS`] (then nothing is taken).
    pub(crate) fn take(&mut self, now_ms: i64) -> Option<i64> {
        let interval = REFILL_MS / BURST;
        let full_at = self.full_at_ms.max(now_ms) + interval;
        // The call may go once the bucket holds at most BURST calls' worth of debt.
        let wait = (full_at - BURST * interval - now_ms).max(0);
        if wait > MAX_WAIT_MS {
            return None;
        }
        self.full_at_ms = full_at;
        Some(wait)
    }
}

/// Callers known by an app name and a token, borrowed from a [`crate::Service`].
#[derive(Clone, Copy)]
pub struct AppAuth<'a> {
    pub(super) inner: &'a Inner,
}

impl AppAuth<'_> {
    /// The caller that presents `token` for the group of `app_name`: the group's own token,
    /// or the admin's global one when the group has none (never an empty one). It may change
    /// that group's jobs and nothing else, and is recorded in the audit log as
    /// `app:<app_name>`. Once known, the call takes its turn in the group's budget: it waits
    /// up to a second, or is refused with [`Error::RateLimited`].
    pub async fn authenticate(self, app_name: &str, token: &str) -> Result<Principal, Error> {
        let invalid = || Error::Unauthorized(tickwork_protocol::msg::TOKEN_OR_APP_INVALID.into());
        let group = match self.inner.store.group_get_by_app_name(app_name).await {
            Ok(g) => g,
            Err(tickwork_store::Error::NotFound { .. }) => return Err(invalid()),
            Err(e) => return Err(e.into()),
        };
        let expected = group
            .access_token
            .as_deref()
            .unwrap_or(&self.inner.config.access_token);
        if expected.is_empty() || !bool::from(expected.as_bytes().ct_eq(token.as_bytes())) {
            return Err(invalid());
        }
        let wait = {
            let mut budgets = self.inner.app_budgets.lock().expect("app budgets lock");
            budgets
                .entry(group.id)
                .or_default()
                .take(self.inner.clock.now_ms())
        };
        match wait {
            None => {
                return Err(Error::RateLimited(
                    tickwork_protocol::msg::TOO_MANY_REQUESTS.into(),
                ));
            }
            Some(0) => {}
            Some(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms as u64)).await,
        }
        Ok(Principal {
            user_id: 0,
            username: format!("app:{}", group.app_name),
            role: Role::Operator,
            groups: vec![group.id],
            locale: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_lets_a_burst_through_then_makes_calls_wait_then_refuses() {
        let mut b = CallBudget::default();
        let t0 = 1_000_000;
        for i in 0..BURST {
            assert_eq!(b.take(t0), Some(0), "call {i} of the burst");
        }
        // Then one call every 300 ms: the next ones wait, up to a second.
        assert_eq!(b.take(t0), Some(300));
        assert_eq!(b.take(t0), Some(600));
        assert_eq!(b.take(t0), Some(900));
        assert_eq!(b.take(t0), None, "a wait over a second is refused");
        assert_eq!(b.take(t0 + 100), None, "and a refusal takes nothing");
        assert_eq!(b.take(t0 + 200), Some(1_000));
    }

    #[test]
    fn a_budget_refills_with_time() {
        for (idle_ms, free_calls) in [(0, 0), (299, 0), (300, 1), (3_000, 10), (60_000, 100)] {
            let mut b = CallBudget::default();
            for _ in 0..BURST {
                b.take(0);
            }
            let mut n = 0;
            while b.take(idle_ms) == Some(0) {
                n += 1;
            }
            assert_eq!(n, free_calls, "after {idle_ms} ms idle");
        }
    }
}
