//! The Tickwork admin: stores jobs, fires them on time and records every run.
//!
//! Two types do the work (see ARCHITECTURE.md). The [`Scheduler`] (`pipeline`) runs claim ->
//! timer -> dispatch -> ledger -> completion on a [`tickwork_store::Store`], with the cluster
//! membership (heartbeats, the fence, adoption, the maintenance lease), the lease holder's
//! maintenance and alarm delivery; executors drive it through the executor API. The
//! [`Service`] (`service`) holds the operations the REST API, the console and the CLI call,
//! with permissions and the audit log; it reaches the pipeline only through a
//! [`PipelineHandle`]. [`start`] builds both; `http` serves them. The pipeline reads and waits
//! on a [`clock::Clock`]: the system clock, or a [`clock::ManualClock`] a test hands to
//! [`start_with_clock`].

mod alarm;
pub mod auth;
pub mod config;
mod console;
pub mod diff;
mod error;
pub mod executor_client;
pub mod http;
mod metrics;
pub mod openapi;
mod pipeline;
mod pull_links;
mod service;

use std::sync::Arc;

use tickwork_store::Store;

pub use auth::{Auth, NewSession, Principal, Role, SESSION_COOKIE, SessionInfo, check_csrf};
pub use config::Config;
pub use error::{Error, ErrorCode};
pub use pipeline::cluster::MAINTENANCE_LEASE;
pub use pipeline::executor_api::{ExecutorApi, ExecutorAuth, ExecutorCaller};
pub use pipeline::{FENCE_LEAD_MS, Scheduler, Stats, Waiting, clock, planner, timer};
pub use service::{PipelineHandle, Service};
pub use tickwork_protocol::api::{
    GroupInput, GroupView, JobInput, JobQuery, JobView, RunQuery, RunView, TriggerInput,
};

/// A running admin: the pipeline and the service over it; cheap to clone.
#[derive(Clone)]
pub struct Admin {
    pub scheduler: Scheduler,
    pub service: Service,
}

/// The admin's background tasks; [`Running::shutdown`] stops them and waits. Dropping it
/// without a shutdown aborts them.
pub struct Running {
    pub admin: Admin,
    /// The password generated for the first admin account when this start created it (and
    /// none was configured): the caller shows it once; it is stored only as a hash.
    pub generated_admin_password: Option<String>,
    tasks: pipeline::Tasks,
}

/// Starts an admin on `store`: makes sure an admin account exists, then starts the pipeline
/// (after a first heartbeat) and the service over it, on the system clock.
pub async fn start(config: Config, store: Arc<dyn Store>) -> Result<Running, Error> {
    start_with_clock(config, store, clock::Clock::system()).await
}

/// As [`start`], with the pipeline (and the service's planning of fires) on `clock`: tests
/// pass a [`clock::ManualClock`]'s clock and move time themselves.
pub async fn start_with_clock(
    config: Config,
    store: Arc<dyn Store>,
    clock: clock::Clock,
) -> Result<Running, Error> {
    config.validate()?;
    let auth = Arc::new(Auth::new(
        store.clone(),
        config.auth.clone(),
        &config.api_token,
    ));
    // Before anything is served: there is never a moment without an admin account, and never
    // a default password.
    let generated_admin_password = auth.ensure_first_admin(store.as_ref()).await?;
    let metrics = Arc::new(metrics::Metrics::default());
    let (scheduler, tasks) =
        Scheduler::start(config.clone(), store.clone(), metrics, clock).await?;
    let service = Service::over(config, store, auth, &scheduler);
    Ok(Running {
        admin: Admin { scheduler, service },
        generated_admin_password,
        tasks,
    })
}

impl Running {
    /// Stops the admin cleanly and hands its work over (see [`Scheduler`]'s shutdown):
    /// dispatches in flight are recorded, then the node leaves the cluster so that the other
    /// nodes adopt its planned runs at once.
    pub async fn shutdown(self) {
        self.admin.scheduler.shutdown(self.tasks).await;
    }
}
