//! Waiting until a condition holds: a check of the state polled until it holds or a deadline
//! passes, and then a message that names what was awaited and what the last check saw.
//!
//! The check reads state (a row, an HTTP answer, a counter); the pause between two checks only
//! spaces the polling, starting at a few milliseconds and doubling up to [`DEFAULT_EVERY`] (or
//! [`Wait::every`]), so a condition that holds soon is seen soon and a long wait does not hammer
//! a loaded machine. There is always one check at the deadline, so a slow machine that paused
//! the test past the deadline still gets to look once more.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::Error;

/// The longest pause between two checks, unless [`Wait::every`] says otherwise.
pub const DEFAULT_EVERY: Duration = Duration::from_millis(100);
/// The first pause: short, since many conditions hold a moment after the action.
const FIRST_PAUSE: Duration = Duration::from_millis(5);

/// What a check returns: the awaited value when the condition holds, and otherwise, when the
/// check can tell, what it saw (shown in the timeout message).
///
/// `bool` and `Option<T>` say only whether the condition holds; `Result<T, E>` gives the value
/// or, as `Err`, what was seen instead (say, the run's state), printed with `{:?}`.
pub trait Outcome {
    /// The value a wait returns once the condition holds.
    type Value;
    /// `Ok(value)` when the condition holds; otherwise what was seen, if anything.
    fn into_result(self) -> Result<Self::Value, Option<String>>;
}

impl Outcome for bool {
    type Value = ();
    fn into_result(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn into_result(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: Debug> Outcome for Result<T, E> {
    type Value = T;
    fn into_result(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(format!("{seen:?}")))
    }
}

/// A wait: what is awaited, its deadline and the longest pause between checks.
#[derive(Debug, Clone)]
#[must_use = "a wait does nothing until one of its `until` methods is awaited"]
pub struct Wait {
    what: String,
    deadline: Duration,
    every: Duration,
}

impl Wait {
    /// A wait for `what` (as the timeout message will name it) of at most `deadline`.
    pub fn new(what: impl Display, deadline: Duration) -> Wait {
        Wait {
            what: what.to_string(),
            deadline,
            every: DEFAULT_EVERY,
        }
    }

    /// Pauses at most `every` between two checks (for checks that are costly to run).
    pub fn every(mut self, every: Duration) -> Wait {
        self.every = every.max(Duration::from_millis(1));
        self
    }

    /// Runs `check` until it holds and returns its value; [`Error::TimedOut`] once the
    /// deadline has passed (after one last check).
    pub async fn try_until<O, F, Fut>(self, mut check: F) -> Result<O::Value, Error>
    where
        O: Outcome,
        F: FnMut() -> Fut,
        Fut: Future<Output = O>,
    {
        let end = Instant::now() + self.deadline;
        let mut pause = FIRST_PAUSE.min(self.every);
        loop {
            let last = match check().await.into_result() {
                Ok(value) => return Ok(value),
                Err(seen) => seen,
            };
            let now = Instant::now();
            if now >= end {
                return Err(Error::TimedOut {
                    what: self.what,
                    deadline: self.deadline,
                    last,
                });
            }
            tokio::time::sleep(pause.min(end - now)).await;
            pause = (pause * 2).min(self.every);
        }
    }

    /// Like [`Wait::try_until`], panicking with the timeout message.
    pub async fn until<O, F, Fut>(self, check: F) -> O::Value
    where
        O: Outcome,
        F: FnMut() -> Fut,
        Fut: Future<Output = O>,
    {
        self.try_until(check)
            .await
            .unwrap_or_else(|timeout| panic!("{timeout}"))
    }

    /// Like [`Wait::until`] with a plain (not async) check, for state in memory.
    pub async fn until_sync<O, F>(self, mut check: F) -> O::Value
    where
        O: Outcome,
        F: FnMut() -> O,
    {
        self.until(|| std::future::ready(check())).await
    }
}

/// Runs `check` until it holds and returns its value; after `deadline` panics with
/// "timed out after {deadline} waiting for {what}" and what the last check saw, if it said.
pub async fn wait_until<O, F, Fut>(what: impl Display, deadline: Duration, check: F) -> O::Value
where
    O: Outcome,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    Wait::new(what, deadline).until(check).await
}

/// [`wait_until`] with a plain (not async) check, for state in memory.
pub async fn wait_until_sync<O, F>(what: impl Display, deadline: Duration, check: F) -> O::Value
where
    O: Outcome,
    F: FnMut() -> O,
{
    Wait::new(what, deadline).until_sync(check).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_the_value_once_the_condition_holds() {
        let checks = AtomicU32::new(0);
        let value = wait_until_sync("the third check", Duration::from_secs(10), || {
            let n = checks.fetch_add(1, Ordering::SeqCst) + 1;
            (n == 3).then_some(n * 10)
        })
        .await;
        assert_eq!(value, 30);
        assert_eq!(checks.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_timeout_names_what_was_awaited_and_the_last_value_seen() {
        let checks = Arc::new(AtomicU32::new(0));
        let error = Wait::new("run 7 to end", Duration::from_millis(50))
            .try_until(|| {
                let checks = checks.clone();
                async move {
                    let n = checks.fetch_add(1, Ordering::SeqCst);
                    Err::<(), _>(format!("planned after {} checks", n + 1))
                }
            })
            .await
            .unwrap_err();
        let n = checks.load(Ordering::SeqCst);
        assert!(n >= 2, "checked at the start and at the deadline: {n}");
        assert_eq!(
            error.to_string(),
            format!(
                "timed out after 50ms waiting for run 7 to end; \
                 last seen: \"planned after {n} checks\""
            )
        );
    }

    #[tokio::test]
    async fn a_check_that_says_nothing_gives_the_plain_message() {
        let error = Wait::new("a flag", Duration::from_millis(20))
            .try_until(|| async { false })
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), "timed out after 20ms waiting for a flag");
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 10ms waiting for nothing at all")]
    async fn until_panics_with_the_message() {
        wait_until("nothing at all", Duration::from_millis(10), || async {
            None::<()>
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn pauses_grow_up_to_the_interval() {
        // With the clock paused, sleeps advance it exactly: 5, 10, 20, 40, 50, 50, ... ms.
        let start = Instant::now();
        let mut at = Vec::new();
        let _ = Wait::new("never", Duration::from_millis(200))
            .every(Duration::from_millis(50))
            .try_until(|| {
                at.push((Instant::now() - start).as_millis());
                async { false }
            })
            .await;
        assert_eq!(at, [0, 5, 15, 35, 75, 125, 175, 200]);
    }
}
