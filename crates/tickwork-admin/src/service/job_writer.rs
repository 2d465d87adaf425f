//! Group commit of job creations. Each create of the API is validated on its own, then handed
//! to one writer task, which writes every create waiting for it in one transaction (the jobs,
//! their first script versions and their audit records: `JobStore::jobs_create`). While a
//! batch is written the next one gathers, so under load many creates share one commit and at
//! rest a create waits for nobody. Each request still gets its own answer: when a batch fails
//! (a key taken, a group deleted meanwhile) its creates are written again one by one, each
//! with its own result.
//!
//! The writer is a task of its own, so a request whose client goes away cannot cut a batch
//! that other requests wait for.

use std::sync::{Arc, OnceLock};

use tickwork_store::{Job, JobCreate, Store};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::audit::{Target, audit_entry};
use super::job_view;
use crate::Error;
use crate::auth::Principal;

/// Most creates in one transaction.
const MAX_BATCH: usize = 256;

/// One create waiting for the writer.
struct Pending {
    create: JobCreate,
    by: Principal,
    reply: oneshot::Sender<Result<Job, tickwork_store::Error>>,
}

/// The queue of the writer task, started by the first create.
#[derive(Default)]
pub(crate) struct JobWriter {
    queue: OnceLock<mpsc::UnboundedSender<Pending>>,
}

impl JobWriter {
    /// Writes one job (with its first script version and its `job.create` record by `by`),
    /// together with the creates that arrive meanwhile.
    pub(crate) async fn create(
        &self,
        store: &Arc<dyn Store>,
        by: &Principal,
        create: JobCreate,
    ) -> Result<Job, Error> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_loop(store.clone(), rx));
            tx
        });
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            create,
            by: by.clone(),
            reply,
        };
        if queue.send(pending).is_err() {
            return Err(writer_gone());
        }
        match answer.await {
            Ok(result) => Ok(result?),
            Err(_) => Err(writer_gone()),
        }
    }
}

fn writer_gone() -> Error {
    Error::Internal("the job writer stopped before it answered".into())
}

/// The `job.create` record of `job`, created by `by`.
pub(crate) fn create_record(
    by: &Principal,
    job: &Job,
) -> Result<tickwork_store::AuditNew, tickwork_store::Error> {
    let view = job_view(job.clone());
    audit_entry(
        by,
        "job.create",
        Target::Job(view.id),
        None::<&()>,
        Some(&view),
    )
    .map_err(|e: Error| tickwork_store::Error::Invalid(e.to_string()))
}

/// Writes what is queued, batch after batch, until the service is gone.
async fn write_loop(store: Arc<dyn Store>, mut queue: mpsc::UnboundedReceiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        write_batch(store.as_ref(), std::mem::take(&mut batch)).await;
    }
}

async fn write_batch(store: &dyn Store, batch: Vec<Pending>) {
    let creates: Vec<JobCreate> = batch.iter().map(|p| p.create.clone()).collect();
    let audit = |i: usize, job: &Job| create_record(&batch[i].by, job);
    match store.jobs_create(creates, &audit).await {
        Ok(jobs) => {
            for (p, job) in batch.into_iter().zip(jobs) {
                let _ = p.reply.send(Ok(job));
            }
        }
        Err(e) if batch.len() == 1 => {
            if let Some(p) = batch.into_iter().next() {
                let _ = p.reply.send(Err(e));
            }
        }
        Err(e) => {
            // Whose create spoilt the batch is not known: each alone gets its own answer.
            warn!(error = %e, creates = batch.len(), "a batch of job creates failed; writing them one by one");
            for p in batch {
                let by = &p.by;
                let one = |_: usize, job: &Job| create_record(by, job);
                let result = store.jobs_create(vec![p.create], &one).await;
                match result.map(|jobs| jobs.into_iter().next()) {
                    Ok(Some(job)) => {
                        let _ = p.reply.send(Ok(job));
                    }
                    // No job and no error cannot happen; the dropped reply answers internal.
                    Ok(None) => {}
                    Err(e) => {
                        let _ = p.reply.send(Err(e));
                    }
                }
            }
        }
    }
}
