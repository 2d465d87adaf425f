//! The dispatch tasks of one lane: at most `concurrency` tasks that live as long as the lane,
//! each taking its next run from a slot of its own. A run costs the wake of a task that waits
//! for it, not a task spawned for it (an allocation, a copy of the dispatch's future and the
//! runtime's bookkeeping, about a tenth of the admin's CPU inside a burst), and no lock is
//! passed from task to task.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::task::JoinSet;

/// The senders of one lane: each item goes to `work` on one of them.
pub(super) struct Senders<T, W> {
    work: W,
    concurrency: usize,
    /// Each sender's slot, by its index.
    slots: Vec<Arc<Slot<T>>>,
    tasks: JoinSet<()>,
    idle: Arc<Idle>,
}

/// Where a sender takes its next item: one item at most (a channel's first block held 32 runs
/// for each of 256 senders, some 3 MiB).
struct Slot<T> {
    item: Mutex<Option<T>>,
    /// Told when an item is put in, or the slot is closed.
    ready: Notify,
    closed: AtomicBool,
}

impl<T> Slot<T> {
    /// The next item, or `None` once the slot is closed and empty.
    async fn take(&self) -> Option<T> {
        loop {
            if let Some(item) = self.item.lock().expect("slot lock").take() {
                return Some(item);
            }
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            // An item put in since the look above left its notice: no wait.
            self.ready.notified().await;
        }
    }

    fn put(&self, item: T) {
        *self.item.lock().expect("slot lock") = Some(item);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }
}

/// The senders that are not busy.
#[derive(Default)]
struct Idle {
    stacks: Mutex<Stacks>,
    /// Told each time a sender finishes an item.
    freed: Notify,
}

/// A sender that can be given an item.
enum Free {
    /// Its work panicked: a new sender takes its index.
    Ended(usize),
    Waiting(usize),
}

#[derive(Default)]
struct Stacks {
    /// Senders waiting for an item, the last to finish on top: its memory is the warmest.
    waiting: Vec<usize>,
    /// Senders whose work panicked: they are gone, and new ones take their places.
    ended: Vec<usize>,
}

impl<T, W, F> Senders<T, W>
where
    T: Send + 'static,
    W: Fn(T) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    /// No sender yet: they start as items come, up to `concurrency`.
    pub(super) fn new(work: W, concurrency: usize) -> Self {
        Senders {
            work,
            concurrency: concurrency.max(1),
            slots: Vec::new(),
            tasks: JoinSet::new(),
            idle: Arc::default(),
        }
    }

    /// Hands `item` to a waiting sender, or to a new one while fewer than `concurrency` run;
    /// otherwise waits for one to finish.
    pub(super) async fn send(&mut self, item: T) {
        loop {
            // A sender that ended first: its place is free.
            let free = {
                let mut stacks = self.idle.stacks.lock().expect("idle lock");
                match stacks.ended.pop() {
                    Some(at) => Some(Free::Ended(at)),
                    None => stacks.waiting.pop().map(Free::Waiting),
                }
            };
            let at = match free {
                Some(Free::Ended(at)) => {
                    self.slots[at] = self.start(at);
                    at
                }
                Some(Free::Waiting(at)) => at,
                None if self.slots.len() < self.concurrency => {
                    let at = self.slots.len();
                    let slot = self.start(at);
                    self.slots.push(slot);
                    at
                }
                None => {
                    // A sender that finished since the look above left its notice: no wait.
                    self.idle.freed.notified().await;
                    continue;
                }
            };
            // Only a sender that waits is given an item: one that is busy or gone is not.
            self.slots[at].put(item);
            return;
        }
    }

    /// Starts sender `at`; its slot.
    fn start(&mut self, at: usize) -> Arc<Slot<T>> {
        let slot = Arc::new(Slot {
            item: Mutex::new(None),
            ready: Notify::new(),
            closed: AtomicBool::new(false),
        });
        let (work, idle, mine) = (self.work.clone(), Arc::clone(&self.idle), Arc::clone(&slot));
        self.tasks.spawn(async move {
            while let Some(item) = mine.take().await {
                let _done = Done { idle: &idle, at };
                work(item).await;
            }
        });
        slot
    }

    /// Ends the senders once each has finished what it was given.
    pub(super) async fn finish(self) {
        for slot in &self.slots {
            slot.close();
        }
        let mut tasks = self.tasks;
        while tasks.join_next().await.is_some() {}
    }
}

/// Puts a sender back among the waiting when its item is done, or among the ended when its
/// work panicked (the task is unwinding, and a new sender in a new slot takes its place).
struct Done<'a> {
    idle: &'a Idle,
    at: usize,
}

impl Drop for Done<'_> {
    fn drop(&mut self) {
        // Not `expect`: this may run while a panic unwinds.
        let mut stacks = match self.idle.stacks.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if std::thread::panicking() {
            stacks.ended.push(self.at);
        } else {
            stacks.waiting.push(self.at);
        }
        drop(stacks);
        self.idle.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Semaphore;

    use super::*;

    /// Work that counts how many run at once, the most seen, and what it was given; each item
    /// waits for a permit of `gate`.
    #[derive(Clone, Default)]
    struct Probe {
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        done: Arc<Mutex<Vec<u32>>>,
    }

    impl Probe {
        fn work(
            &self,
            gate: Arc<Semaphore>,
        ) -> impl Fn(u32) -> futures::future::BoxFuture<'static, ()> + Clone + Send + 'static
        {
            let probe = self.clone();
            move |item| {
                let (probe, gate) = (probe.clone(), Arc::clone(&gate));
                Box::pin(async move {
                    let n = probe.now.fetch_add(1, Ordering::SeqCst) + 1;
                    probe.most.fetch_max(n, Ordering::SeqCst);
                    // Each item takes a permit for good: the gate lets through as many items
                    // as it was given permits.
                    gate.acquire().await.expect("gate open").forget();
                    assert!(item != 13, "item 13 panics");
                    probe.now.fetch_sub(1, Ordering::SeqCst);
                    probe.done.lock().unwrap().push(item);
                })
            }
        }
    }

    #[tokio::test]
    async fn items_go_to_at_most_concurrency_senders_started_as_needed() {
        let probe = Probe::default();
        let gate = Arc::new(Semaphore::new(0));
        let mut senders = Senders::new(probe.work(Arc::clone(&gate)), 4);
        // One item at a time, each finished before the next: one sender does them all.
        for item in 0..3 {
            gate.add_permits(1);
            senders.send(item).await;
            while senders.idle.stacks.lock().unwrap().waiting.is_empty() {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(*probe.done.lock().unwrap(), [0, 1, 2]);
        assert_eq!(senders.slots.len(), 1);
        // Ten held at the gate: four take one each, and the fifth send waits for a sender.
        let sending = tokio::spawn(async move {
            for item in 100..110 {
                senders.send(item).await;
            }
            senders
        });
        while probe.now.load(Ordering::SeqCst) < 4 {
            tokio::task::yield_now().await;
        }
        assert!(!sending.is_finished());
        gate.add_permits(10);
        let senders = sending.await.unwrap();
        assert_eq!(senders.slots.len(), 4);
        senders.finish().await;
        assert_eq!(probe.most.load(Ordering::SeqCst), 4);
        let mut done = probe.done.lock().unwrap().clone();
        done.sort_unstable();
        assert_eq!(
            done,
            [0, 1, 2, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109]
        );
    }

    #[tokio::test]
    async fn a_sender_whose_work_panicked_is_replaced_and_the_items_after_it_are_done() {
        let probe = Probe::default();
        let gate = Arc::new(Semaphore::new(100));
        let mut senders = Senders::new(probe.work(gate), 1);
        for item in [12, 13, 14, 15] {
            senders.send(item).await;
        }
        senders.finish().await;
        assert_eq!(*probe.done.lock().unwrap(), [12, 14, 15]);
    }
}
