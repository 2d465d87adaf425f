//! Group commit of job creations, starts and stops. Each request of the API is checked on its
//! own, then handed to a writer task, which writes every change of its kind waiting for it in
//! one transaction with their audit records (`JobStore::jobs_create`,
//! `JobStore::jobs_set_status`). While a batch is written the next one gathers, so under load
//! many requests share one commit and at rest a request waits for nobody. Each request still
//! gets its own answer: when a batch fails (a key taken, a group deleted meanwhile) its changes
//! are written again one by one, each with its own result.
//!
//! The writers are tasks of their own, so a request whose client goes away cannot cut a batch
//! that other requests wait for.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, OnceLock};

use tickwork_protocol::api::JobView;
use tickwork_store::{Job, JobCreate, JobStatus, JobsStatusChange, Store};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::audit::{Target, audit_entry};
use super::job_view;
use crate::Error;
use crate::auth::Principal;

/// Most creates in one transaction.
const MAX_BATCH: usize = 256;

/// The answer a writer sends for one change.
type Reply = oneshot::Sender<Result<Job, tickwork_store::Error>>;

/// One change waiting for its writer: what to write, by whom, and where to answer.
struct Pending<T> {
    change: T,
    by: Principal,
    reply: Reply,
}

/// A start or a stop of one job, checked by the service.
pub(crate) struct StatusChange {
    pub(crate) id: i64,
    pub(crate) status: JobStatus,
    /// The first fire when starting; `None` when stopping.
    pub(crate) next_fire_at: Option<i64>,
    /// When, on the scheduler's clock (a stop skips the fires claimed before it).
    pub(crate) now: i64,
    /// The job as the request read it, for the audit record.
    pub(crate) before: JobView,
}

/// The queues of the writer tasks, each started by its first request.
#[derive(Default)]
pub(crate) struct JobWriter {
    creates: OnceLock<mpsc::UnboundedSender<Pending<JobCreate>>>,
    statuses: OnceLock<mpsc::UnboundedSender<Pending<StatusChange>>>,
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
        let start = |rx| write_loop(store.clone(), rx);
        submit(&self.creates, start, by, create).await
    }

    /// Starts or stops one job (with its `job.start` or `job.stop` record by `by`), together
    /// with the starts and stops that arrive meanwhile.
    pub(crate) async fn set_status(
        &self,
        store: &Arc<dyn Store>,
        by: &Principal,
        change: StatusChange,
    ) -> Result<Job, Error> {
        let start = |rx| status_loop(store.clone(), rx);
        submit(&self.statuses, start, by, change).await
    }
}

/// Hands `change` by `by` to the writer behind `queue`, started by the first change, and
/// waits for its answer.
async fn submit<T, F>(
    queue: &OnceLock<mpsc::UnboundedSender<Pending<T>>>,
    start: impl FnOnce(mpsc::UnboundedReceiver<Pending<T>>) -> F,
    by: &Principal,
    change: T,
) -> Result<Job, Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    let queue = queue.get_or_init(|| {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(start(rx));
        tx
    });
    let (reply, answer) = oneshot::channel();
    let pending = Pending {
        change,
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
async fn write_loop(store: Arc<dyn Store>, mut queue: mpsc::UnboundedReceiver<Pending<JobCreate>>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        write_batch(store.as_ref(), std::mem::take(&mut batch)).await;
    }
}

async fn write_batch(store: &dyn Store, batch: Vec<Pending<JobCreate>>) {
    let creates: Vec<JobCreate> = batch.iter().map(|p| p.change.clone()).collect();
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
                let result = store.jobs_create(vec![p.change], &one).await;
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

/// Writes the starts and stops queued, batch after batch, until the service is gone. A batch
/// names each job once (the store refuses a job named twice): a second change of a job waits
/// for the next batch, so that each job's changes are written in the order they came.
async fn status_loop(
    store: Arc<dyn Store>,
    mut queue: mpsc::UnboundedReceiver<Pending<StatusChange>>,
) {
    let mut waiting: Vec<Pending<StatusChange>> = Vec::with_capacity(MAX_BATCH);
    loop {
        if waiting.is_empty() {
            if queue.recv_many(&mut waiting, MAX_BATCH).await == 0 {
                return;
            }
        } else {
            while waiting.len() < MAX_BATCH {
                match queue.try_recv() {
                    Ok(p) => waiting.push(p),
                    Err(_) => break,
                }
            }
        }
        let mut named = HashSet::new();
        let (batch, later): (Vec<_>, Vec<_>) = std::mem::take(&mut waiting)
            .into_iter()
            .partition(|p| named.insert(p.change.id));
        waiting = later;
        let (starts, stops): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|p| p.change.status == JobStatus::Running);
        write_statuses(store.as_ref(), starts).await;
        write_statuses(store.as_ref(), stops).await;
    }
}

/// The `job.start` or `job.stop` record (by the status written) of `job` by `by`: the job as
/// read `before`, and as written.
pub(crate) fn status_record(
    by: &Principal,
    status: JobStatus,
    before: &JobView,
    job: &Job,
) -> Result<tickwork_store::AuditNew, tickwork_store::Error> {
    let action = match status {
        JobStatus::Running => "job.start",
        JobStatus::Stopped => "job.stop",
    };
    let after = job_view(job.clone());
    audit_entry(by, action, Target::Job(job.id), Some(before), Some(&after))
        .map_err(|e: Error| tickwork_store::Error::Invalid(e.to_string()))
}

/// Writes `batch`, changes of distinct jobs to one status, in one transaction.
async fn write_statuses(store: &dyn Store, batch: Vec<Pending<StatusChange>>) {
    let Some(first) = batch.first() else {
        return;
    };
    let change = JobsStatusChange {
        status: first.change.status,
        jobs: batch
            .iter()
            .map(|p| (p.change.id, p.change.next_fire_at))
            .collect(),
        // The latest: each request's own instant or later, and the stop skips fires claimed
        // before it (claims before this commit).
        now: batch.iter().map(|p| p.change.now).max().unwrap_or_default(),
    };
    let audit = |i: usize, job: &Job| {
        let p = &batch[i];
        status_record(&p.by, p.change.status, &p.change.before, job)
    };
    match store.jobs_set_status(change, &audit).await {
        Ok(jobs) => {
            let mut written: HashMap<i64, Job> = jobs.into_iter().map(|j| (j.id, j)).collect();
            for p in batch {
                let id = p.change.id;
                let answer = written.remove(&id).ok_or(tickwork_store::Error::NotFound {
                    what: "job",
                    id: id.to_string(),
                });
                let _ = p.reply.send(answer);
            }
        }
        Err(e) if batch.len() == 1 => {
            if let Some(p) = batch.into_iter().next() {
                let _ = p.reply.send(Err(e));
            }
        }
        Err(e) => {
            warn!(error = %e, changes = batch.len(), "a batch of job starts or stops failed; writing them one by one");
            for p in batch {
                Box::pin(write_statuses(store, vec![p])).await;
            }
        }
    }
}
