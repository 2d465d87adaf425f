//! The results writer: executors' callbacks recorded in batches, the requests that arrive
//! together in one transaction. A burst of callbacks then holds one database connection, not
//! one per request: one each took the whole pool, and the heartbeat starved behind them.
//!
//! A callback takes its runs' held dispatch records when it comes, not when it is written: a
//! record's hold may end while its callback waits here behind a long write, and a record
//! written alone is one more update of its run for the database that is already the bound.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use tickwork_store::{Dispatched, RunComplete};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::Scheduler;
use crate::Error;

/// One callback request's results, the dispatch records it took, and where its answer goes:
/// how many of its runs ended now.
pub(crate) struct ResultsRequest {
    items: Vec<RunComplete>,
    records: Vec<Dispatched>,
    reply: oneshot::Sender<Result<usize, Error>>,
}

/// Requests taken into one transaction at most.
const REQUESTS_PER_BATCH: usize = 256;

/// Longest wait of a batch of results for a burst of sends to pass: a Java executor gives
/// its callback 3 s by default, 1 s at the least it can be set to.
const BURST_WAIT_MAX: Duration = Duration::from_millis(500);

/// The results writer of a [`Scheduler`].
pub(crate) struct Results {
    pub(super) scheduler: Scheduler,
}

impl Results {
    /// Records results (and what follows them) through the results writer, or directly once
    /// it has stopped; how many runs reached their final state now.
    pub(crate) async fn record(&self, items: Vec<RunComplete>) -> Result<usize, Error> {
        if items.is_empty() {
            return Ok(0);
        }
        let records = self
            .scheduler
            .inner
            .dispatch_records
            .take_for(items.iter().map(|c| c.run_id));
        let (reply, answer) = oneshot::channel();
        let request = ResultsRequest {
            items,
            records,
            reply,
        };
        match self.scheduler.inner.results.send(request) {
            Ok(()) => answer
                .await
                .unwrap_or_else(|_| Err(Error::Internal("the results writer stopped".to_owned()))),
            Err(mpsc::error::SendError(request)) => {
                let ended = self
                    .scheduler
                    .complete_many(&request.items, request.records)
                    .await?;
                Ok(ended.len())
            }
        }
    }

    /// Writes queued results until the ledger stops, then what is still queued.
    pub(super) async fn run(self, mut requests: mpsc::UnboundedReceiver<ResultsRequest>) {
        let mut buf = Vec::with_capacity(REQUESTS_PER_BATCH);
        let mut backlog = false;
        loop {
            let n = tokio::select! {
                biased;
                n = requests.recv_many(&mut buf, REQUESTS_PER_BATCH) => n,
                _ = self.scheduler.inner.ledger_stop.cancelled() => {
                    // From now on callers write directly.
                    requests.close();
                    while let Ok(request) = requests.try_recv() {
                        buf.push(request);
                    }
                    buf.len()
                }
            };
            if n == 0 {
                return;
            }
            // The burst first: its sends want both cores, and on SQLite the write of a burst's
            // results took a third of them while it was being sent (10,000 jobs due each
            // second, p99 489-496 ms with the writes in the burst, 320-373 ms after it). The
            // callbacks wait for their answer meanwhile, well within an executor's timeout.
            // Every batch asks, so a burst that starts while results are being written stops
            // them too. A lane still queued when the wait ends is a backlog, not a burst:
            // results then go at once until it has emptied, since waiting would only pile
            // them up.
            let taken_at = Instant::now();
            backlog = if backlog {
                self.scheduler.inner.metrics.fast_lane_queued()
            } else {
                !self.scheduler.wait_for_burst(BURST_WAIT_MAX).await
            };
            self.write_results(&mut buf).await;
            // The holds stretch by how long these results waited for their answer, the wait
            // for the burst included: an executor that posts its next results once it has
            // this answer brings the records' callbacks that much later.
            let records = &self.scheduler.inner.dispatch_records;
            records.results_written(taken_at.elapsed());
            if self.scheduler.inner.ledger_stop.is_cancelled() && requests.is_empty() {
                return;
            }
        }
    }

    async fn write_results(&self, buf: &mut Vec<ResultsRequest>) {
        let mut requests: Vec<ResultsRequest> = std::mem::take(buf);
        if requests.len() > 1 {
            let all: Vec<RunComplete> = requests
                .iter()
                .flat_map(|r| r.items.iter().cloned())
                .collect();
            // A failed write puts the records back, for the requests one by one to take again.
            let records = requests
                .iter_mut()
                .flat_map(|r| std::mem::take(&mut r.records))
                .collect();
            match self.scheduler.complete_many(&all, records).await {
                Ok(ended) => {
                    let mut ended: HashSet<i64> = ended.into_iter().collect();
                    for request in requests {
                        let n = request
                            .items
                            .iter()
                            .filter(|i| ended.remove(&i.run_id))
                            .count();
                        let _ = request.reply.send(Ok(n));
                    }
                    return;
                }
                // One bad result must not fail the others: each request on its own.
                Err(e) => warn!(
                    error = %e,
                    requests = requests.len(),
                    "a batch of results failed; writing its requests one by one"
                ),
            }
        }
        for request in requests {
            let written = self
                .scheduler
                .complete_many(&request.items, request.records)
                .await;
            let written = written.map(|ended| ended.len());
            let _ = request.reply.send(written);
        }
    }
}
