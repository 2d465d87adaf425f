//! Job handlers: the async functions registered by name, the context they receive and the
//! outcome they return.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::runlog::RunLog;

/// An error returned by a handler: the run fails (code 500) with its message and the messages
/// of its sources.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a handler returns.
pub type HandlerResult = Result<JobOutcome, HandlerError>;

/// The boxed future of one execution.
pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>>;

/// The result of a run that the handler itself decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Code 200, with an optional message.
    Success(Option<String>),
    /// Code 500, with a message.
    Failure(String),
}

impl JobOutcome {
    /// Success without a message.
    pub fn success() -> Self {
        JobOutcome::Success(None)
    }

    /// Success with a message.
    pub fn success_with(msg: impl Into<String>) -> Self {
        JobOutcome::Success(Some(msg.into()))
    }

    /// Failure with a message.
    pub fn failure(msg: impl Into<String>) -> Self {
        JobOutcome::Failure(msg.into())
    }
}

/// A job handler. Any `Fn(JobContext) -> impl Future<Output = HandlerResult>` is one.
///
/// A run that is killed or times out first sees its [`JobContext::cancelled`] signal; if it has
/// not returned within the executor's kill grace its future is dropped. Work started outside
/// the future (threads, `spawn_blocking`) should watch the signal.
pub trait JobHandler: Send + Sync + 'static {
    /// Starts one execution.
    fn run(&self, ctx: JobContext) -> HandlerFuture;
}

impl<F, Fut> JobHandler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    fn run(&self, ctx: JobContext) -> HandlerFuture {
        Box::pin(self(ctx))
    }
}

/// Everything a handler knows about its run.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) job_id: i32,
    pub(crate) log_id: i64,
    pub(crate) log_date_time: i64,
    pub(crate) params: String,
    pub(crate) shard_index: i32,
    pub(crate) shard_total: i32,
    pub(crate) timeout: Option<Duration>,
    pub(crate) log: RunLog,
    pub(crate) cancel: CancellationToken,
}

impl JobContext {
    /// The job's id.
    pub fn job_id(&self) -> i32 {
        self.job_id
    }

    /// The run's id (XXL `logId`).
    pub fn log_id(&self) -> i64 {
        self.log_id
    }

    /// The trigger time, epoch milliseconds.
    pub fn log_date_time(&self) -> i64 {
        self.log_date_time
    }

    /// The job parameter text (may be empty).
    pub fn params(&self) -> &str {
        &self.params
    }

    /// This run's shard index, 0-based.
    pub fn shard_index(&self) -> i32 {
        self.shard_index
    }

    /// The number of shards; 1 when not broadcasting.
    pub fn shard_total(&self) -> i32 {
        self.shard_total
    }

    /// The run's timeout, if it has one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The run's log file.
    pub fn run_log(&self) -> &RunLog {
        &self.log
    }

    /// Appends a line to the run's log, read by the admin through `/log`.
    pub fn log(&self, line: impl AsRef<str>) {
        self.log.append(line.as_ref());
    }

    /// Resolves when the run is killed or times out.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Whether the run has been killed or has timed out.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The run's cancellation signal, to hand to work the handler spawns.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}
