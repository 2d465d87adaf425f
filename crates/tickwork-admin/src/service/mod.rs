//! The service layer: the operations the REST API, the console and the CLI call, one file per
//! resource. Every input is validated here, once, before anything changes. Every change takes
//! the acting [`Principal`], checks its role here (not in the HTTP handlers or the console),
//! and writes an audit record with the target before and after.
//!
//! The service reaches the pipeline only through [`PipelineHandle`]: it arms the runs it
//! writes, wakes the claim loop and drops what the pipeline caches of what it changed.

mod alarms;
mod app_auth;
pub(crate) mod audit;
mod dashboard;
mod groups;
mod heatmap;
mod job_writer;
mod jobs;
mod jobs_bulk;
mod runs;
mod scripts;
mod submissions;
mod tokens;
mod users;
mod workflows;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tickwork_protocol::api::{JobView, LatenessView, Page, RunView};
use tickwork_store::{Job, PageReq, Run, RunComplete, Store};

use crate::Error;
use crate::Scheduler;
use crate::alarm::Senders;
use crate::auth::Auth;
use crate::clock::Clock;
use crate::config::Config;
use crate::executor_client::ExecutorClient;
use crate::metrics::Metrics;
use submissions::Submissions;
pub(crate) use submissions::completion;
use workflows::Workflows;

/// What the service may ask of the pipeline. The admin's [`crate::Scheduler`] is one; tests
/// of the service and its HTTP layer use one that records the calls.
#[async_trait::async_trait]
pub trait PipelineHandle: Send + Sync {
    /// Wakes the claim loop: a job was created, started or changed.
    fn wake(&self);
    /// Fires a run this node wrote (manual and API triggers) at its `scheduled_at`.
    fn arm(&self, run: Run);
    /// Drops what is cached of a job (it changed or was deleted).
    fn forget_job(&self, job_id: i64);
    /// Drops a group's cached addresses and token (it changed or was deleted).
    fn forget_group(&self, group_id: i64);
    /// Records a run's result (a kill) and what follows it; `None` when the run was unknown
    /// or already final.
    async fn complete(&self, c: RunComplete) -> Result<Option<Run>, Error>;
    /// Dispatch lateness so far, for the dashboard.
    fn lateness(&self) -> Option<LatenessView>;
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) auth: Arc<Auth>,
    pub(crate) pipeline: Arc<dyn PipelineHandle>,
    pub(crate) metrics: Arc<Metrics>,
    /// Calls executors for kills and logs, with the global token (a group's own token where
    /// it has one).
    pub(crate) client: ExecutorClient,
    /// Sends test messages of alarm channels.
    pub(crate) senders: Arc<Senders>,
    /// Where jobs' fires are planned from: the scheduler's clock.
    pub(crate) clock: Clock,
    /// Writes job creates in batches (group commit).
    pub(crate) job_writer: job_writer::JobWriter,
    /// Groups seen to exist, so that creating jobs does not read them again and again.
    pub(crate) known_groups: Mutex<HashSet<i64>>,
    /// Each group's budget of calls by its app name and token (XXL-JOB 3.5's job API).
    pub(crate) app_budgets: Mutex<HashMap<i64, app_auth::CallBudget>>,
}

/// The operations of one resource, borrowed from a [`Service`]: `service.jobs().create(..)`.
/// Executor groups.
#[derive(Clone, Copy)]
pub struct Groups<'a> {
    inner: &'a Inner,
}

/// Jobs and their schedules.
#[derive(Clone, Copy)]
pub struct Jobs<'a> {
    inner: &'a Inner,
}

/// Job scripts and their versions.
#[derive(Clone, Copy)]
pub struct Scripts<'a> {
    inner: &'a Inner,
}

/// The run ledger as operators see it.
#[derive(Clone, Copy)]
pub struct Runs<'a> {
    inner: &'a Inner,
}

/// User accounts.
#[derive(Clone, Copy)]
pub struct Users<'a> {
    inner: &'a Inner,
}

/// API tokens.
#[derive(Clone, Copy)]
pub struct Tokens<'a> {
    inner: &'a Inner,
}

/// The audit log.
#[derive(Clone, Copy)]
pub struct AuditLog<'a> {
    inner: &'a Inner,
}

/// Alarm channels and deliveries.
#[derive(Clone, Copy)]
pub struct Alarms<'a> {
    inner: &'a Inner,
}

/// The dashboard's figures.
#[derive(Clone, Copy)]
pub struct Dashboard<'a> {
    inner: &'a Inner,
}

impl Inner {
    pub(crate) fn groups(&self) -> Groups<'_> {
        Groups { inner: self }
    }

    pub(crate) fn jobs(&self) -> Jobs<'_> {
        Jobs { inner: self }
    }

    pub(crate) fn scripts(&self) -> Scripts<'_> {
        Scripts { inner: self }
    }

    pub(crate) fn runs(&self) -> Runs<'_> {
        Runs { inner: self }
    }

    pub(crate) fn users(&self) -> Users<'_> {
        Users { inner: self }
    }

    pub(crate) fn tokens(&self) -> Tokens<'_> {
        Tokens { inner: self }
    }

    pub(crate) fn audit_log(&self) -> AuditLog<'_> {
        AuditLog { inner: self }
    }

    pub(crate) fn alarms(&self) -> Alarms<'_> {
        Alarms { inner: self }
    }

    pub(crate) fn dashboard(&self) -> Dashboard<'_> {
        Dashboard { inner: self }
    }
}

/// The admin's operations; cheap to clone.
#[derive(Clone)]
pub struct Service {
    pub(crate) inner: Arc<Inner>,
}

impl Service {
    /// A service over `store`, reaching the pipeline through `pipeline`.
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        pipeline: Arc<dyn PipelineHandle>,
    ) -> Service {
        let client = ExecutorClient::new(&config.access_token, config.dispatch.executor_timeout);
        let metrics = Arc::new(Metrics::default());
        let senders = Arc::new(Senders::new());
        let clock = Clock::system();
        Self::with_parts(
            config, store, auth, pipeline, metrics, client, senders, clock,
        )
    }

    /// The admin's service over its running `scheduler`: the same metrics, executor client
    /// (its connections) and alarm senders (their SMTP pools) instead of copies of them.
    pub(crate) fn over(
        config: Config,
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        scheduler: &Scheduler,
    ) -> Service {
        let shared = &scheduler.inner;
        let (metrics, client, senders) = (
            shared.metrics.clone(),
            shared.client.clone(),
            shared.senders.clone(),
        );
        let pipeline = Arc::new(scheduler.clone());
        let clock = shared.clock.clone();
        Self::with_parts(
            config, store, auth, pipeline, metrics, client, senders, clock,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn with_parts(
        config: Config,
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        pipeline: Arc<dyn PipelineHandle>,
        metrics: Arc<Metrics>,
        client: ExecutorClient,
        senders: Arc<Senders>,
        clock: Clock,
    ) -> Service {
        Service {
            inner: Arc::new(Inner {
                config,
                store,
                auth,
                pipeline,
                metrics,
                client,
                senders,
                clock,
                job_writer: Default::default(),
                known_groups: Default::default(),
                app_budgets: Default::default(),
            }),
        }
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Now, on the scheduler's clock: the instant the service plans fires and judges
    /// executors' heartbeats from.
    pub fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// Logins, sessions and API credentials.
    pub fn auth(&self) -> &Arc<Auth> {
        &self.inner.auth
    }

    pub fn groups(&self) -> Groups<'_> {
        self.inner.groups()
    }

    pub fn jobs(&self) -> Jobs<'_> {
        self.inner.jobs()
    }

    pub fn scripts(&self) -> Scripts<'_> {
        self.inner.scripts()
    }

    pub fn runs(&self) -> Runs<'_> {
        self.inner.runs()
    }

    pub fn users(&self) -> Users<'_> {
        self.inner.users()
    }

    pub fn tokens(&self) -> Tokens<'_> {
        self.inner.tokens()
    }

    pub fn audit_log(&self) -> AuditLog<'_> {
        self.inner.audit_log()
    }

    pub fn alarms(&self) -> Alarms<'_> {
        self.inner.alarms()
    }

    pub fn submissions(&self) -> Submissions<'_> {
        Submissions { inner: &self.inner }
    }

    pub fn workflows(&self) -> Workflows<'_> {
        Workflows { inner: &self.inner }
    }

    pub fn dashboard(&self) -> Dashboard<'_> {
        self.inner.dashboard()
    }

    /// Callers known by a group's app name and token.
    pub fn app_auth(&self) -> app_auth::AppAuth<'_> {
        app_auth::AppAuth { inner: &self.inner }
    }
}

/// The furthest back "clear runs older than N days" reaches: a hundred years.
pub(crate) const MAX_CLEAR_DAYS: i64 = 36_500;

/// The API view of a stored job.
pub(crate) fn job_view(j: Job) -> JobView {
    JobView {
        id: j.id,
        key: j.key,
        spec: j.spec,
        glue_updated_at: j.glue_updated_at,
        status: j.status.as_str().to_owned(),
        next_fire_at: j
            .next_fire_at
            .filter(|&n| n != crate::planner::WAITING_FOR_COMPLETION),
        last_fire_at: j.last_fire_at,
        version: j.version,
        created_at: j.created_at,
        updated_at: j.updated_at,
    }
}

/// The API view of a stored run.
pub(crate) fn run_view(r: Run) -> RunView {
    RunView {
        id: r.id,
        job_id: r.job_id,
        group_id: r.group_id,
        scheduled_at: r.scheduled_at,
        fire_key: r.fire_key,
        trigger_type: r.trigger_type,
        attempt: r.attempt,
        parent_run_id: r.parent_run_id,
        executor_address: r.executor_address,
        handler: r.handler,
        params: r.params,
        shard_index: r.shard_index,
        shard_total: r.shard_total,
        state: r.state,
        trigger_code: r.trigger_code,
        trigger_msg: r.trigger_msg,
        handle_code: r.handle_code,
        handle_msg: r.handle_msg,
        owner_node: r.owner_node,
        created_at: r.created_at,
        dispatched_at: r.dispatched_at,
        finished_at: r.finished_at,
    }
}

pub(crate) fn page(offset: Option<u64>, limit: Option<u64>) -> Result<PageReq, Error> {
    let limit = limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(Error::invalid_field(
            "limit",
            format!("{limit} is out of range 1-1000"),
        ));
    }
    Ok(PageReq {
        offset: offset.unwrap_or(0),
        limit,
    })
}

/// A page of a listing with its `page` number (from 1) and `size`.
pub(crate) fn paged<T, U>(
    p: tickwork_store::Paged<T>,
    req: PageReq,
    f: impl FnMut(T) -> U,
) -> Page<U> {
    Page {
        items: p.items.into_iter().map(f).collect(),
        total: p.total,
        page: req.offset / req.limit + 1,
        size: req.limit,
    }
}

/// Whether jobs of this glue type carry their source (every glue type, Groovy included:
/// the editor and its versions serve them all; only where they run differs).
pub(crate) use tickwork_core::job::has_source;

/// An error as one item of a batch's answer shows it: its stable code and its message; an
/// internal failure's cause is logged, never shown.
pub(crate) fn item_error(e: &Error, surface: &'static str) -> (String, String) {
    let message = e
        .client_message(surface)
        .unwrap_or_else(|| "internal error (see the admin's log)".to_owned());
    (e.code().as_str().to_owned(), message)
}

pub(crate) fn invalid(field: &str, msg: impl std::fmt::Display) -> Error {
    Error::invalid_field(field, msg)
}
