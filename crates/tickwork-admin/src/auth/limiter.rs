//! The login rate limit: failed logins per (client IP, username), in memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Failed logins per (client IP, username), in memory. An attempt is entered when it is
/// let through to the password check ([`LoginLimiter::reserve`]) and stays a failure unless
/// it succeeds or is released unchecked.
#[derive(Default)]
pub(super) struct LoginLimiter {
    failures: Mutex<HashMap<(IpAddr, String), Vec<Instant>>>,
}

impl LoginLimiter {
    /// Entries kept before old ones are swept, bounding memory under a spray of names.
    const SWEEP_ABOVE: usize = 10_000;

    /// Takes one attempt of `key` in one step with the check, so that concurrent attempts
    /// cannot all pass it: `None` when `max` attempts are in the window already.
    pub(super) fn reserve(
        &self,
        key: &(IpAddr, String),
        max: u32,
        window: Duration,
    ) -> Option<Instant> {
        let mut map = self.failures.lock().expect("login limiter lock");
        if map.len() > Self::SWEEP_ABOVE {
            map.retain(|_, times| times.iter().any(|t| t.elapsed() < window));
        }
        let times = map.entry(key.clone()).or_default();
        times.retain(|t| t.elapsed() < window);
        if times.len() >= max as usize {
            return None;
        }
        let at = Instant::now();
        times.push(at);
        Some(at)
    }

    /// Gives back an attempt whose password was not checked.
    pub(super) fn release(&self, key: &(IpAddr, String), at: Instant) {
        let mut map = self.failures.lock().expect("login limiter lock");
        if let Some(times) = map.get_mut(key) {
            if let Some(i) = times.iter().position(|t| *t == at) {
                times.remove(i);
            }
            if times.is_empty() {
                map.remove(key);
            }
        }
    }

    pub(super) fn succeeded(&self, key: &(IpAddr, String)) {
        self.failures
            .lock()
            .expect("login limiter lock")
            .remove(key);
    }
}

/// Counts a password check while it runs, and the most that ran at once.
pub(super) struct Checking<'a> {
    running: &'a AtomicUsize,
}

impl<'a> Checking<'a> {
    pub(super) fn enter(running: &'a AtomicUsize, peak: &AtomicUsize) -> Self {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        Checking { running }
    }
}

impl Drop for Checking<'_> {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}
