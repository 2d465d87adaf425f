//! The Tickwork executor: an SDK to run jobs from Rust, and the embedded server that speaks
//! XXL-JOB's executor protocol (2.3.0 to 3.4.2), so that a Java `xxl-job-admin` or a Tickwork
//! admin drives it exactly as it drives `xxl-job-core`.
//!
//! ```no_run
//! use tickwork_executor::{Executor, JobContext, JobOutcome};
//!
//! # async fn demo() -> Result<(), tickwork_executor::Error> {
//! let executor = Executor::builder("my-app")
//!     .admin_addresses("http://127.0.0.1:8080/xxl-job-admin")
//!     .access_token("secret")
//!     .handler("hello", |ctx: JobContext| async move {
//!         ctx.log(format!("hello, shard {}/{}", ctx.shard_index(), ctx.shard_total()));
//!         Ok(JobOutcome::success_with("said hello"))
//!     })
//!     .start()
//!     .await?;
//! println!("listening on {}", executor.local_addr());
//! // ... later, e.g. on SIGTERM:
//! executor.shutdown();
//! let report = executor.wait().await?;
//! assert!(report.is_clean());
//! # Ok(()) }
//! ```
//!
//! Module map: [`config`] (settings and their defaults), [`handler`] (the handler trait, its
//! context and outcome), [`builtin`] (ready-made handlers), `server` (the HTTP endpoints),
//! `worker` (one worker per job id, block policies, kill, timeouts), `accepted` (the bounded
//! record of accepted run ids against a repeated `/run`), `script` (script jobs as
//! child process groups), `runlog` (per-run log files), `callback` (batched callbacks and the
//! disk spool), `admin` (calls to the admin and the registration loop), `executor` (start and
//! graceful shutdown).

mod accepted;
mod admin;
pub mod builtin;
mod callback;
pub mod config;
mod error;
mod executor;
pub mod handler;
mod pull;
mod runlog;
mod script;
mod server;
mod worker;

pub use config::{ExecutorConfig, ShutdownMode};
pub use error::Error;
pub use executor::{
    Executor, ExecutorBuilder, ExecutorStats, RunningExecutor, ShutdownHandle, ShutdownReport,
};
pub use handler::{HandlerError, HandlerResult, JobContext, JobHandler, JobOutcome};
pub use runlog::RunLog;

/// The `/run` refusal while the executor drains for shutdown.
pub const SHUTTING_DOWN_MESSAGE: &str = "executor is shutting down";

/// Largest request body the server reads, as the Java executor (5 MiB).
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
