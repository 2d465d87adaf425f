//! The ledger writer: dispatch outcomes and skips recorded in batches (one transaction for
//! many runs), tried again until the database answers.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tickwork_store::{Dispatched, MarkDispatched, MarkSkipped, Run, TriggerFailed};
use tokio::sync::mpsc;
use tracing::{error, warn};

use super::Scheduler;
use super::dispatch::DispatchOutcome;
use crate::metrics::DispatchCause;

/// Trigger failures written in one transaction at most: each is a statement of its own, and
/// on SQLite the transaction holds the one write lock.
const TRIGGER_FAILURES_PER_WRITE: usize = 500;

/// Why a skipped run did not run, for operators.
const SKIPPED_REASON: &str = "job stopped before the run was due";

/// What the lanes hand the ledger writer for one run.
#[derive(Debug)]
pub(super) enum Entry {
    /// The run was sent, or its send failed.
    Dispatched(Run, DispatchOutcome),
    /// Its job was stopped after the claim: the run ends `skipped`, unsent.
    Skipped(Run),
}

/// The ledger writer of a [`Scheduler`].
pub(super) struct Ledger {
    pub(super) s: Scheduler,
}

impl Ledger {
    /// Writes dispatch outcomes and skips in batches: one transaction for many runs. A write
    /// that fails is tried again until the database answers: the executor runs these, and a
    /// run left `planned` would be fired again by whoever adopts it.
    pub(super) async fn run(self, mut outcomes: mpsc::UnboundedReceiver<Entry>) {
        // A write waits its turn behind the others (on SQLite 100-200 ms at 10,000 fires a
        // second) whatever its size: batches of 1,000 recorded at most 6,000 runs a second
        // there, and the ledger fell minutes behind.
        const BATCH: usize = 10_000;
        let mut buf = Vec::with_capacity(BATCH);
        let mut next_due: Option<Instant> = None;
        loop {
            let wait = next_due.map(tokio::time::Instant::from_std);
            let closed = tokio::select! {
                biased;
                n = outcomes.recv_many(&mut buf, BATCH) => n == 0,
                _ = tokio::time::sleep_until(wait.unwrap_or_else(tokio::time::Instant::now)),
                    if wait.is_some() => false,
                _ = self.s.inner.ledger_stop.cancelled() => {
                    while let Ok(item) = outcomes.try_recv() {
                        buf.push(item);
                    }
                    false
                }
            };
            if !buf.is_empty() {
                self.s.inner.metrics.ledger_received(buf.len());
                self.write_outcomes(&mut buf).await;
            }
            let stopping = closed || self.s.inner.ledger_stop.is_cancelled();
            let due = if stopping {
                next_due = None;
                self.s.inner.dispatch_records.take_all()
            } else {
                let hold = self.s.inner.config.dispatch.record_hold;
                let (due, next) = self.s.inner.dispatch_records.take_due(Instant::now(), hold);
                next_due = next;
                due
            };
            self.write_dispatched(due).await;
            if stopping && outcomes.is_empty() {
                return;
            }
        }
    }

    /// Records accepted dispatches on their own (no callback came for them in time).
    async fn write_dispatched(&self, runs: Vec<Dispatched>) {
        if runs.is_empty() {
            return;
        }
        let n = runs.len() as u64;
        // Only on runs this node still owns: a node adopted by others while it was paused
        // does not overwrite what they recorded.
        let batch = MarkDispatched {
            node_id: self.s.inner.config.node_id.clone(),
            runs,
        };
        let written = self
            .persist("recording dispatched runs", || {
                self.s.inner.store.runs_mark_dispatched(batch.clone())
            })
            .await;
        if written.is_some() {
            self.s
                .inner
                .stats
                .dispatched
                .fetch_add(n, Ordering::Relaxed);
        } else {
            error!(
                runs = n,
                "dispatched runs not recorded; another node may fire them again"
            );
        }
    }

    /// Ends the runs of stopped jobs as `skipped`. One not written stays the node's, and
    /// whoever meets it next (this node after a restart, or one adopting it) skips it then.
    async fn write_skipped(&self, run_ids: Vec<i64>, at: i64) {
        if run_ids.is_empty() {
            return;
        }
        let n = run_ids.len();
        let skipped = MarkSkipped {
            node_id: self.s.inner.config.node_id.clone(),
            run_ids,
            reason: SKIPPED_REASON.to_owned(),
            at,
        };
        let written = self
            .persist("recording skipped runs", || {
                self.s.inner.store.runs_mark_skipped(skipped.clone())
            })
            .await;
        if written.is_none() {
            error!(runs = n, "skipped runs not recorded");
        }
    }

    async fn write_outcomes(&self, buf: &mut Vec<Entry>) {
        let at = self.s.inner.clock.now_ms();
        let mut accepted = Vec::with_capacity(buf.len());
        let mut refused = Vec::new();
        let mut skipped = Vec::new();
        for entry in buf.drain(..) {
            let (run, out) = match entry {
                Entry::Dispatched(run, out) => (run, out),
                Entry::Skipped(run) => {
                    skipped.push(run.id);
                    continue;
                }
            };
            if out.accepted() {
                accepted.push(Dispatched {
                    run_id: out.run_id,
                    address: out.address.unwrap_or_default(),
                    trigger_code: out.trigger_code,
                    trigger_msg: Some(out.trigger_msg),
                    at,
                });
            } else {
                refused.push((run, out));
            }
        }
        // Held for their callback (see `dispatch_records`), unless there is no hold or the
        // result came first; one without an address, which the store refuses, is written now
        // so that it fails without the held ones.
        let (held, mut now): (Vec<Dispatched>, Vec<Dispatched>) =
            if self.s.inner.config.dispatch.record_hold.is_zero() {
                (Vec::new(), accepted)
            } else {
                accepted.into_iter().partition(|d| !d.address.is_empty())
            };
        now.extend(self.s.inner.dispatch_records.hold(held, Instant::now()));
        self.write_dispatched(now).await;
        self.write_skipped(skipped, at).await;
        let mut failures = Vec::with_capacity(refused.len());
        for (run, out) in refused {
            let cause = DispatchCause::of(&out);
            self.s
                .inner
                .stats
                .dispatch_failed
                .fetch_add(1, Ordering::Relaxed);
            let counter = match cause {
                DispatchCause::NoExecutor => &self.s.inner.stats.dispatch_no_executor,
                DispatchCause::Refused => &self.s.inner.stats.dispatch_refused,
                DispatchCause::Transport => &self.s.inner.stats.dispatch_transport,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            warn!(
                run_id = run.id,
                job_id = run.job_id,
                cause = cause.as_str(),
                msg = %out.trigger_msg,
                "trigger failed"
            );
            failures.push(TriggerFailed {
                run_id: run.id,
                node_id: self.s.inner.config.node_id.clone(),
                address: out.address,
                trigger_code: out.trigger_code,
                trigger_msg: out.trigger_msg,
                at,
            });
        }
        // An executor outage fails every fire: one transaction per failure fell ever further
        // behind the fires, and a stopping admin could not finish writing them.
        let planner = self.s.follow_up_planner();
        for batch in failures.chunks(TRIGGER_FAILURES_PER_WRITE) {
            let done = self
                .persist("recording trigger failures", || {
                    self.s.inner.store.runs_mark_trigger_failed(batch, &planner)
                })
                .await;
            match done {
                Some(ended) => self.s.follow(ended),
                // Refused as a whole for one bad failure: each on its own, so that the others
                // are still recorded (unless the admin is stopping with the database gone).
                None if batch.len() > 1 && self.s.inner.write_deadline.get().is_none() => {
                    for failed in batch {
                        let done = self
                            .persist("recording a trigger failure", || {
                                self.s
                                    .inner
                                    .store
                                    .run_mark_trigger_failed(failed.clone(), &planner)
                            })
                            .await;
                        if let Some(ended) = done {
                            self.s.follow(ended);
                        }
                    }
                }
                None => {}
            }
        }
    }

    /// Runs a ledger write until it succeeds. Gives up (`None`) when the store refuses the
    /// input, or when the admin is stopping and the database stayed unreachable for
    /// [`SHUTDOWN_WRITE_DEADLINE`]. The pauses between tries and the deadline wait for the
    /// database, so they are real time, not the scheduler's clock: a database that comes back
    /// is written to whatever a test's clock says.
    async fn persist<T, F, Fut>(&self, what: &str, mut write: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, tickwork_store::Error>>,
    {
        let mut tries: u64 = 0;
        loop {
            match write().await {
                Ok(v) => return Some(v),
                // Only the database failing is worth waiting for; bad input stays bad.
                Err(
                    e
                    @ (tickwork_store::Error::Invalid(_) | tickwork_store::Error::NotFound { .. }),
                ) => {
                    error!(error = %e, "{what} refused");
                    return None;
                }
                Err(e) => {
                    tries += 1;
                    warn!(error = %e, tries, "{what} failed");
                    if self
                        .s
                        .inner
                        .write_deadline
                        .get()
                        .is_some_and(|d| Instant::now() >= *d)
                    {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(200 * tries.min(25))).await;
                }
            }
        }
    }
}
