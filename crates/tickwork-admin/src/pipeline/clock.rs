//! The pipeline's clock: every time read and timed wait of the scheduler goes through it.
//!
//! The admin runs on the system clock. Tests hand the admin a [`ManualClock`] instead and move
//! time themselves, so "a job due in an hour fires" takes no hour: advancing the clock wakes
//! every sleeper whose instant has come, and no sleeper before its instant. The clock is an
//! enum rather than a trait object so that the system clock's `now_ms` is one branch and the
//! same `SystemTime` read as before: the claim loop and dispatch call it often.
//!
//! Timeouts of network and database calls are not the clock's business: they bound real IO
//! and stay on real time (`tokio::time`), whatever clock the admin runs on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::timer;

/// The source of time of a [`crate::Scheduler`]; cheap to clone. The default is the system
/// clock.
#[derive(Clone, Default)]
pub struct Clock {
    source: Source,
}

#[derive(Clone, Default)]
enum Source {
    #[default]
    System,
    Manual(Arc<Manual>),
}

impl Clock {
    /// The system clock: wall time for instants, tokio's timer for waits.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// Whether this is the system clock (real time, not moved by a test).
    pub fn is_system(&self) -> bool {
        matches!(self.source, Source::System)
    }

    /// Milliseconds since the Unix epoch.
    #[inline]
    pub fn now_ms(&self) -> i64 {
        match &self.source {
            Source::System => timer::now_ms(),
            Source::Manual(m) => m.now(),
        }
    }

    /// Waits for `d`.
    pub async fn sleep(&self, d: Duration) {
        match &self.source {
            Source::System => tokio::time::sleep(d).await,
            Source::Manual(m) => {
                // Rounded up: a wait never ends before its whole duration passed.
                let ms = i64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX);
                m.sleep_until(m.now().saturating_add(ms)).await
            }
        }
    }

    /// Waits until the clock reads `at` (epoch ms) or later; at once when it already does.
    pub async fn sleep_until(&self, at: i64) {
        match &self.source {
            // Tokio rounds a sleep up to the next millisecond: never woken early.
            Source::System => {
                let wait = at.saturating_sub(timer::now_ms()).max(0) as u64;
                tokio::time::sleep(Duration::from_millis(wait)).await
            }
            Source::Manual(m) => m.sleep_until(at).await,
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::System => f.write_str("Clock::System"),
            Source::Manual(m) => write!(f, "Clock::Manual({})", m.now()),
        }
    }
}

impl From<ManualClock> for Clock {
    fn from(manual: ManualClock) -> Clock {
        Clock {
            source: Source::Manual(manual.shared),
        }
    }
}

/// A clock that moves only when told: [`ManualClock::set`] and [`ManualClock::advance`] wake
/// every sleeper whose instant has come. Cheap to clone; clones are the same clock.
#[derive(Clone)]
pub struct ManualClock {
    shared: Arc<Manual>,
}

struct Manual {
    /// The time; every sleeper watches it.
    now: watch::Sender<i64>,
    /// The instants sleepers wait for, with how many wait for each.
    sleepers: Mutex<BTreeMap<i64, usize>>,
}

impl ManualClock {
    /// A clock reading `start_ms` (epoch ms) until it is moved.
    pub fn new(start_ms: i64) -> ManualClock {
        ManualClock {
            shared: Arc::new(Manual {
                now: watch::Sender::new(start_ms),
                sleepers: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// The clock to hand to the admin.
    pub fn clock(&self) -> Clock {
        self.clone().into()
    }

    pub fn now_ms(&self) -> i64 {
        self.shared.now()
    }

    /// Sets the time to `at` (epoch ms) and wakes the sleepers whose instant has come. Time may
    /// also be set back; sleepers then wait on for their instant.
    pub fn set(&self, at: i64) {
        self.shared.now.send_replace(at);
    }

    /// Moves the time forward by `d` (whole milliseconds), waking the sleepers whose instant
    /// has come; the new time.
    pub fn advance(&self, d: Duration) -> i64 {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let mut now = 0;
        self.shared.now.send_modify(|t| {
            *t = t.saturating_add(ms);
            now = *t;
        });
        now
    }

    /// The instants sleepers wait for now, earliest first, one entry per sleeper: a test can
    /// see that a loop went to sleep until a given instant.
    pub fn sleepers(&self) -> Vec<i64> {
        let sleepers = self.shared.sleepers.lock().expect("sleepers lock");
        sleepers
            .iter()
            .flat_map(|(&at, &n)| std::iter::repeat_n(at, n))
            .collect()
    }
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ManualClock({})", self.now_ms())
    }
}

impl Manual {
    fn now(&self) -> i64 {
        *self.now.borrow()
    }

    async fn sleep_until(&self, at: i64) {
        // Subscribed before the time is looked at: a move in between is still seen.
        let mut time = self.now.subscribe();
        if *time.borrow_and_update() >= at {
            return;
        }
        let _listed = Listed::new(self, at);
        // The sender lives as long as `self`, so the wait ends only when the time has come.
        let _ = time.wait_for(|&now| now >= at).await;
    }
}

/// A sleeper's entry in [`Manual::sleepers`], removed when the sleep ends or is dropped.
struct Listed<'a> {
    clock: &'a Manual,
    at: i64,
}

impl<'a> Listed<'a> {
    fn new(clock: &'a Manual, at: i64) -> Self {
        *clock
            .sleepers
            .lock()
            .expect("sleepers lock")
            .entry(at)
            .or_default() += 1;
        Listed { clock, at }
    }
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let mut sleepers = self.clock.sleepers.lock().expect("sleepers lock");
        if let Some(n) = sleepers.get_mut(&self.at) {
            *n -= 1;
            if *n == 0 {
                sleepers.remove(&self.at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Wake, Waker};

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

    fn sleep_until(clock: &Clock, at: i64) -> Sleep {
        let clock = clock.clone();
        Box::pin(async move { clock.sleep_until(at).await })
    }

    fn ready(sleep: &mut Sleep, waker: &Waker) -> bool {
        sleep
            .as_mut()
            .poll(&mut Context::from_waker(waker))
            .is_ready()
    }

    #[test]
    fn a_sleeper_wakes_exactly_when_the_clock_reaches_its_instant() {
        let manual = ManualClock::new(1_000);
        let clock = manual.clock();
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut sleep = sleep_until(&clock, 5_000);
        assert!(!ready(&mut sleep, &waker));
        assert_eq!(manual.sleepers(), [5_000]);

        manual.set(4_999);
        assert!(!ready(&mut sleep, &waker), "woken a millisecond early");
        assert_eq!(manual.sleepers(), [5_000]);

        let before = wakes.0.load(Ordering::SeqCst);
        assert_eq!(manual.advance(Duration::from_millis(1)), 5_000);
        assert!(
            wakes.0.load(Ordering::SeqCst) > before,
            "the move did not wake the sleeper"
        );
        assert!(ready(&mut sleep, &waker));
        assert!(manual.sleepers().is_empty());
        assert_eq!(clock.now_ms(), 5_000);
    }

    #[test]
    fn a_sleep_for_a_duration_counts_from_when_it_starts() {
        let manual = ManualClock::new(0);
        let clock = manual.clock();
        let waker = Waker::noop();
        manual.set(100);
        let mut sleep: Sleep = {
            let clock = clock.clone();
            Box::pin(async move { clock.sleep(Duration::from_micros(2_500)).await })
        };
        assert!(!ready(&mut sleep, waker));
        // 2.5 ms rounds up to 3: never woken before the whole duration.
        assert_eq!(manual.sleepers(), [103]);
        manual.set(102);
        assert!(!ready(&mut sleep, waker));
        manual.set(103);
        assert!(ready(&mut sleep, waker));
        // An instant already past does not wait at all.
        let mut past = sleep_until(&clock, 50);
        assert!(ready(&mut past, waker));
        assert!(manual.sleepers().is_empty());
    }

    #[test]
    fn many_sleepers_wake_in_turn_and_dropped_ones_leave_the_list() {
        let manual = ManualClock::new(0);
        let clock = manual.clock();
        let waker = Waker::noop();
        let mut instants: Vec<i64> = (1..=200).map(|i| (i % 50) * 10 + 10).collect();
        fastrand::shuffle(&mut instants);
        let mut sleeps: Vec<(i64, Sleep)> = instants
            .iter()
            .map(|&at| (at, sleep_until(&clock, at)))
            .collect();
        for (_, s) in &mut sleeps {
            assert!(!ready(s, waker));
        }
        assert_eq!(manual.sleepers().len(), 200);
        // A cancelled sleep (a `select!` that took another branch) leaves no entry.
        let (dropped_at, dropped) = sleeps.pop().expect("a sleeper");
        drop(dropped);
        assert_eq!(manual.sleepers().len(), 199);

        let mut done = vec![false; sleeps.len()];
        for now in (5..=510).step_by(5) {
            manual.set(now);
            for (i, (at, s)) in sleeps.iter_mut().enumerate() {
                if !done[i] {
                    done[i] = ready(s, waker);
                }
                assert_eq!(done[i], *at <= now, "sleeper for {at} at {now}");
            }
            let waiting: Vec<i64> = manual.sleepers();
            assert!(waiting.iter().all(|&at| at > now), "{waiting:?} at {now}");
        }
        assert!(done.iter().all(|&d| d));
        assert!(manual.sleepers().is_empty(), "{dropped_at} left behind");
    }

    #[tokio::test]
    async fn advancing_wakes_sleeping_tasks_and_only_those_due() {
        let manual = ManualClock::new(0);
        let clock = manual.clock();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 1..=20i64 {
            let clock = clock.clone();
            tasks.spawn(async move {
                clock.sleep(Duration::from_secs(i as u64 * 60)).await;
                (i, clock.now_ms())
            });
        }
        // Every task is asleep before time moves.
        while manual.sleepers().len() < 20 {
            tokio::task::yield_now().await;
        }
        manual.advance(Duration::from_secs(10 * 60));
        let mut woke = Vec::new();
        for _ in 0..10 {
            let (i, at) = tasks.join_next().await.expect("a task").expect("no panic");
            assert!(at >= i * 60_000, "task {i} woke at {at}");
            woke.push(i);
        }
        woke.sort_unstable();
        assert_eq!(woke, (1..=10).collect::<Vec<_>>());
        let waiting: Vec<i64> = (11..=20).map(|i| i * 60_000).collect();
        assert_eq!(manual.sleepers(), waiting);
        assert_eq!(tasks.len(), 10);
        manual.advance(Duration::from_secs(3600));
        while let Some(done) = tasks.join_next().await {
            done.expect("no panic");
        }
    }
}
