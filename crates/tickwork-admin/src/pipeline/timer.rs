//! The millisecond timer: claimed runs wait here and are released at their exact millisecond.
//!
//! A binary heap keyed by (fire instant, insertion order) behind a mutex; one task sleeps until
//! the earliest entry and hands every due entry to the dispatcher in one batch (with a window,
//! also the entries due within that window, so that work done ahead goes in fewer batches). XXL-JOB's ring
//! of 60 one-second slots is too coarse for millisecond schedules; a heap costs O(log n) per run
//! and stays exact. The task reads and waits on the scheduler's [`Clock`].

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::Mutex;
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

struct Entry<T> {
    at: i64,
    seq: u64,
    item: T,
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

struct Shared<T> {
    /// Entries due within this many ms of a released one go with it; 0: each at its instant.
    window_ms: i64,
    heap: Mutex<(BinaryHeap<Reverse<Entry<T>>>, u64)>,
    /// Woken when an entry earlier than every other one arrives.
    wake: Notify,
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
    /// (never earlier than that). The task ends when `stop` is cancelled or `out` is closed.
    pub fn start(
        out: mpsc::UnboundedSender<Vec<(i64, T)>>,
        stop: CancellationToken,
        clock: Clock,
        window_ms: i64,
    ) -> Self {
        let shared = Arc::new(Shared {
            window_ms,
            heap: Mutex::new((BinaryHeap::new(), 0)),
            wake: Notify::new(),
        });
        let task = shared.clone();
        tokio::spawn(async move { run(task, out, stop, clock).await });
        Timer { shared }
    }

    /// Schedules `item` for the instant `at` (epoch ms). An instant in the past fires at once.
    pub fn schedule(&self, at: i64, item: T) {
        self.schedule_all(std::iter::once((at, item)));
    }

    /// Schedules many items under one lock.
    pub fn schedule_all(&self, items: impl IntoIterator<Item = (i64, T)>) {
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
                    item,
                }));
                if before.is_none_or(|b| at < b) {
                    earliest_changed = true;
                }
            }
        }
        if earliest_changed {
            self.shared.wake.notify_one();
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
                removed.push((e.at, e.item));
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
    out: mpsc::UnboundedSender<Vec<(i64, T)>>,
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
            let now = clock.now_ms();
            let mut guard = shared.heap.lock().expect("timer lock");
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
            (due, heap.peek().map(|e| e.0.at))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::clock::ManualClock;

    #[tokio::test]
    async fn fires_in_order_and_never_early() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(1_000_000);
        let timer = Timer::start(tx, stop.clone(), manual.clock(), 0);
        let base = manual.now_ms() + 50;
        // Inserted out of order; an earlier entry arriving later must wake the task.
        timer.schedule(base + 30, "c");
        timer.schedule(base + 10, "b");
        timer.schedule(base, "a");
        timer.schedule(base - 10_000, "late");
        let late = rx.recv().await.expect("timer alive");
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
            assert_eq!(rx.recv().await.expect("timer alive"), [(at, item)]);
        }
        assert!(timer.is_empty());
        stop.cancel();
    }

    #[tokio::test]
    async fn a_window_releases_what_is_due_soon_with_the_first_due_entry() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(0);
        let timer = Timer::start(tx, stop.clone(), manual.clock(), 20);
        timer.schedule_all([(100, "a"), (115, "b"), (120, "c"), (121, "d")]);
        while manual.sleepers() != [100] {
            tokio::task::yield_now().await;
        }
        // Nothing before the first instant; then everything up to 20 ms after it.
        manual.set(99);
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "released before its instant");
        manual.set(100);
        let batch = rx.recv().await.expect("timer alive");
        assert_eq!(batch, [(100, "a"), (115, "b"), (120, "c")]);
        manual.set(121);
        assert_eq!(rx.recv().await.expect("timer alive"), [(121, "d")]);
        stop.cancel();
    }

    #[tokio::test]
    async fn removed_entries_never_fire() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let manual = ManualClock::new(0);
        let timer = Timer::start(tx, stop.clone(), manual.clock(), 0);
        let at = 100;
        timer.schedule_all([(at, 1), (at, 2), (at, 3)]);
        let removed = timer.remove_where(|i| *i == 2);
        assert_eq!(removed, vec![(at, 2)]);
        manual.set(at);
        let mut seen = Vec::new();
        while seen.len() < 2 {
            seen.extend(rx.recv().await.unwrap().into_iter().map(|(_, i)| i));
        }
        assert_eq!(seen, [1, 3]);
        stop.cancel();
    }
}
