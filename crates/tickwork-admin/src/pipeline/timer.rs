//! The millisecond timer: claimed runs wait here and are released at their exact millisecond.
//!
//! A binary heap keyed by (fire instant, insertion order) behind a mutex; one waiter sleeps
//! until the earliest entry and hands every due entry to the dispatcher in one batch (with a
//! window, also the entries due within that window, so that work done ahead goes in fewer
//! batches). XXL-JOB's ring of 60 one-second slots is too coarse for millisecond schedules; a
//! heap costs O(log n) per run and stays exact.
//!
//! On the system clock the waiter is a thread of its own, waiting on a condition variable
//! to the nanosecond: tokio's timer rounds every sleep up to its next millisecond tick and
//! woke a due run 1-2 ms after its instant. On a [`ManualClock`](super::clock::ManualClock)
//! it is a task that waits on the clock, so that tests move time themselves.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;

/// Milliseconds since the Unix epoch, from the wall clock. The pipeline reads its
/// [`Clock`] instead; this is the system clock's source and serves the rest of the admin.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Nanoseconds since the Unix epoch, from the wall clock.
fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// The longest a timer thread waits before it looks again: a wall clock set back, a stop or
/// a closed output is seen within it at worst.
const THREAD_WAIT_MAX: Duration = Duration::from_secs(1);

/// A heap entry. The item is boxed so that the heap moves 24 bytes per step: a pipeline's
/// item (a run, some 400 bytes) moved inline made each pop copy about 5 KiB at 10,000
/// entries, and releasing a burst of 10,000 runs took 9 ms before the first was sent. It
/// leaves in its box too: unboxed, a burst of 10,000 runs was 4 MB copied into a batch that
/// grew by doubling onto fresh pages, on the timer's thread, before the first run was sent.
struct Entry<T> {
    at: i64,
    seq: u64,
    item: Box<T>,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

type Heap<T> = (BinaryHeap<Reverse<Entry<T>>>, u64);

/// Entries released by the timers that feed one consumer and not yet passed on by it: counted
/// under a timer's lock as they leave its heap, so that a run on its way is always in a
/// timer, here, or wherever the consumer put it before calling [`Released::passed_on`].
#[derive(Clone, Default)]
pub struct Released(Arc<AtomicUsize>);

impl Released {
    /// How many wait to be passed on.
    pub fn count(&self) -> usize {
        self.0.load(AtomicOrdering::SeqCst)
    }

    /// A timer released `n` entries (under its lock).
    fn add(&self, n: usize) {
        self.0.fetch_add(n, AtomicOrdering::SeqCst);
    }

    /// The consumer has put `n` released entries where they are counted again.
    pub fn passed_on(&self, n: usize) {
        self.0.fetch_sub(n, AtomicOrdering::SeqCst);
    }
}

struct Shared<T> {
    /// Entries due within this many ms of a released one go with it; 0: each at its instant.
    window_ms: i64,
    heap: Mutex<Heap<T>>,
    released: Released,
    /// Woken when an entry earlier than every other one arrives (the task's wait).
    wake: Notify,
    /// The same, for the thread's wait; also signalled when the timer stops.
    ready: Condvar,
}

/// Handle to a running timer; cheap to clone.
pub struct Timer<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Timer<T> {
    fn clone(&self) -> Self {
        Timer {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static> Timer<T> {
    /// Starts the timer task on `clock`. Due entries are sent, in fire order, as batches on
    /// `out`; once one is due, those due within `window_ms` after it go in the same batch
    /// (never earlier than that), each counted in `released` until the consumer passes it
    /// on. The task ends when `stop` is cancelled or `out` is closed.
    pub fn start(
        out: mpsc::UnboundedSender<Vec<(i64, Box<T>)>>,
        released: Released,
        stop: CancellationToken,
        clock: Clock,
        window_ms: i64,
    ) -> Self {
        let shared = Arc::new(Shared {
            window_ms,
            heap: Mutex::new((BinaryHeap::new(), 0)),
            released,
            wake: Notify::new(),
            ready: Condvar::new(),
        });
        let task = shared.clone();
        if clock.is_system() {
            let waker = shared.clone();
            let stopped = stop.clone();
            tokio::spawn(async move {
                stopped.cancelled().await;
                // Under the lock: the thread looks at the token and waits in one step.
                let _heap = waker.heap.lock().expect("timer lock");
                waker.ready.notify_all();
            });
            std::thread::Builder::new()
                .name("tickwork-timer".to_owned())
                .spawn(move || run_thread(&task, &out, &stop))
                .expect("the timer's thread starts");
        } else {
            tokio::spawn(async move { run(task, out, stop, clock).await });
        }
        Timer { shared }
    }

    /// Schedules `item` for the instant `at` (epoch ms). An instant in the past fires at once.
    pub fn schedule(&self, at: i64, item: T) {
        self.schedule_all(std::iter::once((at, item)));
    }

    /// Schedules many items under one lock; items already boxed stay in their box.
    pub fn schedule_all<B: Into<Box<T>>>(&self, items: impl IntoIterator<Item = (i64, B)>) {
        let mut earliest_changed = false;
        {
            let mut guard = self.shared.heap.lock().expect("timer lock");
            let (heap, seq) = &mut *guard;
            for (at, item) in items {
                let before = heap.peek().map(|e| e.0.at);
                *seq += 1;
                heap.push(Reverse(Entry {
                    at,
                    seq: *seq,
                    item: item.into(),
                }));
                if before.is_none_or(|b| at < b) {
                    earliest_changed = true;
                }
            }
        }
        if earliest_changed {
            self.shared.wake.notify_one();
            self.shared.ready.notify_one();
        }
    }

    /// How many entries wait.
    pub fn len(&self) -> usize {
        self.shared.heap.lock().expect("timer lock").0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry for which `f` is true and returns them (used when a job is stopped
    /// or an admin hands its work over at shutdown).
    pub fn remove_where(&self, mut f: impl FnMut(&T) -> bool) -> Vec<(i64, T)> {
        let mut guard = self.shared.heap.lock().expect("timer lock");
        let heap = std::mem::take(&mut guard.0);
        let mut removed = Vec::new();
        let mut kept = Vec::with_capacity(heap.len());
        for Reverse(e) in heap.into_vec() {
            if f(&e.item) {
                removed.push((e.at, *e.item));
            } else {
                kept.push(Reverse(e));
            }
        }
        guard.0 = BinaryHeap::from(kept);
        removed.sort_by_key(|(at, _)| *at);
        removed
    }
}

async fn run<T>(
    shared: Arc<Shared<T>>,
    out: mpsc::UnboundedSender<Vec<(i64, Box<T>)>>,
    stop: CancellationToken,
    clock: Clock,
) {
    loop {
        // Register interest before looking, so that an insert between the look and the sleep
        // still wakes us.
        let notified = shared.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let (due, next) = {
            let mut guard = shared.heap.lock().expect("timer lock");
            let due = take_due(&mut guard, clock.now_ms(), &shared);
            (due, guard.0.peek().map(|e| e.0.at))
        };
        if !due.is_empty() && out.send(due).is_err() {
            return;
        }
        // Sleep to the millisecond: the clock never wakes a sleeper early, so nothing fires
        // early.
        let sleep = async {
            match next {
                Some(at) => clock.sleep_until(at).await,
                None => clock.sleep(Duration::from_secs(3600)).await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = &mut notified => {}
            _ = sleep => {}
        }
    }
}

/// Pops the entries due at `now` (epoch ms) and, once one is, those due within the window
/// after it; counts them released before the lock is let go.
fn take_due<T>(
    guard: &mut MutexGuard<'_, Heap<T>>,
    now: i64,
    shared: &Shared<T>,
) -> Vec<(i64, Box<T>)> {
    let heap = &mut guard.0;
    let mut due = Vec::new();
    let until = if heap.peek().is_some_and(|e| e.0.at <= now) {
        now + shared.window_ms
    } else {
        now
    };
    while heap.peek().is_some_and(|e| e.0.at <= until) {
        let Reverse(e) = heap.pop().expect("peeked");
        due.push((e.at, e.item));
    }
    shared.released.add(due.len());
    due
}

/// The system clock's waiter: a thread that waits to the nanosecond of the earliest entry's
/// millisecond (never before it) and sends what is due.
fn run_thread<T>(
    shared: &Shared<T>,
    out: &mpsc::UnboundedSender<Vec<(i64, Box<T>)>>,
    stop: &CancellationToken,
) {
    let mut guard = shared.heap.lock().expect("timer lock");
    loop {
        if stop.is_cancelled() || out.is_closed() {
            return;
        }
        let now = now_ns();
        let due = take_due(&mut guard, (now / 1_000_000) as i64, shared);
        if !due.is_empty() {
            drop(guard);
            if out.send(due).is_err() {
                return;
            }
            guard = shared.heap.lock().expect("timer lock");
            continue;
        }
        let wait = guard.0.peek().map_or(THREAD_WAIT_MAX, |e| {
            let ns = (i128::from(e.0.at) * 1_000_000 - now).clamp(0, i128::from(u32::MAX));
            Duration::from_nanos(ns as u64).min(THREAD_WAIT_MAX)
        });
        guard = shared
            .ready
            .wait_timeout(guard, wait)
            .expect("timer lock")
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::clock::ManualClock;

    /// A released batch with its items out of their boxes, to compare.
    fn unboxed<T>(batch: Option<Vec<(i64, Box<T>)>>) -> Vec<(i64, T)> {
        let batch = batch.expect("timer alive");
        batch.into_iter().map(|(at, item)| (at, *item)).collect()
    }

    #[tokio::test]
    async fn fires_in_order_and_never_early() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(1_000_000);
        let timer = Timer::start(tx, Released::default(), stop.clone(), manual.clock(), 0);
        let base = manual.now_ms() + 50;
        // Inserted out of order; an earlier entry arriving later must wake the task.
        timer.schedule(base + 30, "c");
        timer.schedule(base + 10, "b");
        timer.schedule(base, "a");
        timer.schedule(base - 10_000, "late");
        let late = unboxed(rx.recv().await);
        assert_eq!(late, [(base - 10_000, "late")]);
        // Asleep until its earliest entry; a move short of it fires nothing.
        while manual.sleepers() != [base] {
            tokio::task::yield_now().await;
        }
        manual.set(base - 1);
        tokio::task::yield_now().await;
        assert_eq!(manual.sleepers(), [base]);
        assert!(rx.try_recv().is_err(), "fired before its instant");
        // Each move to an instant releases exactly the entry due then.
        for (at, item) in [(base, "a"), (base + 10, "b"), (base + 30, "c")] {
            manual.set(at);
            assert_eq!(unboxed(rx.recv().await), [(at, item)]);
        }
        assert!(timer.is_empty());
        stop.cancel();
    }

    #[tokio::test]
    async fn released_entries_count_until_passed_on() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(1_000_000);
        let released = Released::default();
        // Two timers feeding one consumer share the count.
        let first = Timer::start(
            tx.clone(),
            released.clone(),
            stop.clone(),
            manual.clock(),
            0,
        );
        let second = Timer::start(tx, released.clone(), stop.clone(), manual.clock(), 0);
        let at = manual.now_ms() + 10;
        first.schedule(at, "a");
        first.schedule(at, "b");
        second.schedule(at, "c");
        assert_eq!(released.count(), 0);
        manual.set(at);
        let mut got = rx.recv().await.expect("timer alive").len();
        got += rx.recv().await.expect("timer alive").len();
        assert_eq!((got, first.len() + second.len()), (3, 0));
        assert_eq!(released.count(), 3);
        released.passed_on(2);
        assert_eq!(released.count(), 1);
        stop.cancel();
    }

    #[tokio::test]
    async fn a_window_releases_what_is_due_soon_with_the_first_due_entry() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(0);
        let timer = Timer::start(tx, Released::default(), stop.clone(), manual.clock(), 20);
        timer.schedule_all([(100, "a"), (115, "b"), (120, "c"), (121, "d")]);
        while manual.sleepers() != [100] {
            tokio::task::yield_now().await;
        }
        // Nothing before the first instant; then everything up to 20 ms after it.
        manual.set(99);
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "released before its instant");
        manual.set(100);
        let batch = unboxed(rx.recv().await);
        assert_eq!(batch, [(100, "a"), (115, "b"), (120, "c")]);
        manual.set(121);
        assert_eq!(unboxed(rx.recv().await), [(121, "d")]);
        stop.cancel();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_the_system_clock_entries_fire_in_order_never_early_and_the_thread_stops() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let timer = Timer::start(tx, Released::default(), stop.clone(), Clock::system(), 0);
        let base = now_ms() + 30;
        timer.schedule_all([(base + 20, "c"), (base, "a"), (base + 10, "b")]);
        let mut seen = Vec::new();
        while seen.len() < 3 {
            for (at, item) in unboxed(rx.recv().await) {
                assert!(now_ms() >= at, "{item} released before its instant {at}");
                seen.push(item);
            }
        }
        assert_eq!(seen, ["a", "b", "c"]);
        // Stopped, the thread ends and drops its sender.
        timer.schedule(now_ms() + 60_000, "never");
        stop.cancel();
        assert!(rx.recv().await.is_none(), "the thread ended");
    }

    #[tokio::test]
    async fn removed_entries_never_fire() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(0);
        let timer = Timer::start(tx, Released::default(), stop.clone(), manual.clock(), 0);
        let at = 100;
        timer.schedule_all([(at, 1), (at, 2), (at, 3)]);
        let removed = timer.remove_where(|i| *i == 2);
        assert_eq!(removed, vec![(at, 2)]);
        manual.set(at);
        let mut seen = Vec::new();
        while seen.len() < 2 {
            seen.extend(unboxed(rx.recv().await).into_iter().map(|(_, i)| i));
        }
        assert_eq!(seen, [1, 3]);
        stop.cancel();
    }
}
