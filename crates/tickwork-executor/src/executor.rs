//! Building, starting and stopping an executor: the server, the background loops, and the
//! graceful shutdown (deregister, refuse new runs, drain, kill what is left at the deadline,
//! flush callbacks).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tickwork_protocol::RegistryParam;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accepted::{AcceptedRecord, now_ms};
use crate::admin::{AdminClient, registry_loop};
use crate::callback::{CallbackQueue, Spool, resend_loop, sender_loop};
use crate::config::{ExecutorConfig, ShutdownMode};
use crate::handler::JobHandler;
use crate::pull::{Pull, pull_loop};
use crate::runlog::RunLogs;
use crate::script::ScriptEnv;
use crate::server::{ServerState, router};
use crate::worker::{Runtime, Workers};
use crate::{Error, SHUTTING_DOWN_MESSAGE};

/// Kill reason of runs still going when the shutdown deadline passes.
const DEADLINE_REASON: &str = "executor shutdown deadline exceeded";
/// How long shutdown waits for open HTTP connections to finish their requests.
const SERVER_DRAIN: Duration = Duration::from_secs(5);
/// Period of the run log clean-up.
const CLEANUP_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// Installs the ring crypto provider for rustls once per process, so that reqwest clients can
/// be built (the workspace compiles reqwest without a default provider).
pub(crate) fn install_crypto_provider() {
    // An error only means a provider is installed already, which is all we need.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Counters shared by the executor's parts, read by [`RunningExecutor::stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) registry_ok: AtomicU64,
    pub(crate) registry_failed: AtomicU64,
    pub(crate) runs_started: AtomicU64,
    pub(crate) runs_finished: AtomicU64,
    pub(crate) runs_duplicate: AtomicU64,
    pub(crate) callbacks_queued: AtomicU64,
    pub(crate) callbacks_sent: AtomicU64,
    pub(crate) callbacks_spooled: AtomicU64,
    /// Pull mode: the runs that ended whose results no admin accepted yet (a reconnecting
    /// executor still holds them: their results are on the way).
    pub(crate) unreported: Option<std::sync::Mutex<std::collections::HashSet<i64>>>,
}

impl Counters {
    /// A run ended; its result is queued.
    pub(crate) fn result_queued(&self, run_id: i64) {
        self.callbacks_queued.fetch_add(1, Ordering::Relaxed);
        if let Some(unreported) = &self.unreported {
            unreported.lock().expect("unreported lock").insert(run_id);
        }
    }

    /// An admin accepted these results.
    pub(crate) fn results_delivered(&self, batch: &[tickwork_protocol::HandleCallbackParam]) {
        self.callbacks_sent
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        if let Some(unreported) = &self.unreported {
            let mut unreported = unreported.lock().expect("unreported lock");
            for result in batch {
                unreported.remove(&result.log_id);
            }
        }
    }

    /// The runs whose results are not delivered yet.
    pub(crate) fn unreported(&self) -> Vec<i64> {
        self.unreported.as_ref().map_or_else(Vec::new, |u| {
            u.lock().expect("unreported lock").iter().copied().collect()
        })
    }
}

/// A snapshot of what an executor is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutorStats {
    /// Live job workers.
    pub workers: usize,
    /// Runs executing now.
    pub running: usize,
    /// Runs waiting in worker queues.
    pub queued: usize,
    pub runs_started: u64,
    pub runs_finished: u64,
    /// `/run` calls of a run already accepted, answered without running it again.
    pub runs_duplicate: u64,
    /// Results handed to the callback sender.
    pub callbacks_queued: u64,
    /// Results accepted by an admin (directly or from the spool).
    pub callbacks_sent: u64,
    /// Results written to the spool.
    pub callbacks_spooled: u64,
    /// Batches waiting in the spool now.
    pub spooled_batches: usize,
    /// Registration rounds an admin accepted / that no admin accepted.
    pub registry_ok: u64,
    pub registry_failed: u64,
    /// Pull mode: whether a connection to an admin is up now.
    pub pull_connected: bool,
}

/// The outcome of a graceful shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    pub mode: ShutdownMode,
    /// Every run finished (or, in wait-running mode, every queued run was failed) before the
    /// deadline.
    pub drained: bool,
    /// Runs killed at the deadline.
    pub killed_running: usize,
    /// Queued runs failed without running (wait-running mode, or left at the deadline).
    pub dropped_queued: usize,
    /// Callback batches left in the spool for a later executor on the same folder.
    pub spooled_batches: usize,
}

impl ShutdownReport {
    /// Whether the drain finished without killing anything.
    pub fn is_clean(&self) -> bool {
        self.drained && self.killed_running == 0
    }
}

/// Entry point of the SDK: `Executor::builder("app").handler(...).start().await`.
#[derive(Debug, Clone, Copy)]
pub struct Executor;

impl Executor {
    /// A builder with the default settings for `app_name`.
    pub fn builder(app_name: impl Into<String>) -> ExecutorBuilder {
        ExecutorBuilder::from_config(ExecutorConfig::new(app_name))
    }
}

/// Collects settings and handlers, then starts the executor.
pub struct ExecutorBuilder {
    config: ExecutorConfig,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
}

impl std::fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.handlers.keys().collect();
        names.sort();
        f.debug_struct("ExecutorBuilder")
            .field("config", &self.config)
            .field("handlers", &names)
            .finish()
    }
}

impl ExecutorBuilder {
    /// A builder over a complete configuration.
    pub fn from_config(config: ExecutorConfig) -> Self {
        ExecutorBuilder {
            config,
            handlers: HashMap::new(),
        }
    }

    /// The configuration so far, to adjust fields without a setter.
    pub fn config_mut(&mut self) -> &mut ExecutorConfig {
        &mut self.config
    }

    /// Registers `handler` under `name` (the job's `executorHandler`); a second registration
    /// of the same name replaces the first.
    pub fn handler(self, name: impl Into<String>, handler: impl JobHandler) -> Self {
        self.handler_arc(name, Arc::new(handler))
    }

    /// Registers a shared handler.
    pub fn handler_arc(mut self, name: impl Into<String>, handler: Arc<dyn JobHandler>) -> Self {
        self.handlers.insert(name.into(), handler);
        self
    }

    /// Admin base URLs as a comma-separated list (added to those already set).
    pub fn admin_addresses(mut self, list: &str) -> Self {
        self.config
            .admin_addresses
            .extend(ExecutorConfig::parse_admin_list(list));
        self
    }

    pub fn access_token(mut self, token: impl Into<String>) -> Self {
        self.config.access_token = token.into();
        self
    }

    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.config.listen = addr;
        self
    }

    pub fn advertised_address(mut self, address: impl Into<String>) -> Self {
        self.config.advertised_address = Some(address.into());
        self
    }

    pub fn log_folder(mut self, folder: impl Into<PathBuf>) -> Self {
        self.config.log_folder = folder.into();
        self
    }

    pub fn scripts_enabled(mut self, enabled: bool) -> Self {
        self.config.scripts_enabled = enabled;
        self
    }

    pub fn shutdown_mode(mut self, mode: ShutdownMode) -> Self {
        self.config.shutdown_mode = mode;
        self
    }

    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.config.shutdown_timeout = timeout;
        self
    }

    pub fn registry_interval(mut self, interval: Duration) -> Self {
        self.config.registry_interval = interval;
        self
    }

    pub fn admin_timeout(mut self, timeout: Duration) -> Self {
        self.config.admin_timeout = timeout;
        self
    }

    pub fn callback_linger(mut self, linger: Duration) -> Self {
        self.config.callback_linger = linger;
        self
    }

    pub fn callback_batch_size(mut self, size: usize) -> Self {
        self.config.callback_batch_size = size;
        self
    }

    /// Resend delays of spooled callbacks: first `min`, doubling up to `max`.
    pub fn callback_retry(mut self, min: Duration, max: Duration) -> Self {
        self.config.callback_retry_min = min;
        self.config.callback_retry_max = max;
        self
    }

    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.config.idle_timeout = timeout;
        self
    }

    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.config.kill_grace = grace;
        self
    }

    pub fn log_retention_days(mut self, days: u32) -> Self {
        self.config.log_retention_days = days;
        self
    }

    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.config.header_read_timeout = timeout;
        self
    }

    pub fn max_connections(mut self, max: usize) -> Self {
        self.config.max_connections = max;
        self
    }

    /// How many accepted run ids are remembered against a repeated `/run`.
    pub fn accepted_runs_capacity(mut self, capacity: usize) -> Self {
        self.config.accepted_runs_capacity = capacity;
        self
    }

    /// Pull mode: listen on no port, dial one of `admin_urls` (comma-separated, tried in turn)
    /// and take work over that connection.
    pub fn pull(mut self, admin_urls: &str) -> Self {
        self.config.admin_addresses = ExecutorConfig::parse_admin_list(admin_urls);
        self.config.pull = true;
        self
    }

    /// Pull mode: how many runs this executor takes at once.
    pub fn pull_slots(mut self, slots: u32) -> Self {
        self.config.pull_slots = slots;
        self
    }

    /// Validates the configuration, binds the listen address, and starts serving, registering
    /// and sending callbacks.
    pub async fn start(self) -> Result<RunningExecutor, Error> {
        install_crypto_provider();
        let config = self.config;
        config.validate()?;
        if config.token_is_weak() {
            tracing::warn!(
                "the access token is empty: anyone who can reach this executor can run its jobs"
            );
        }
        let folder = &config.log_folder;
        crate::runlog::create_private_dir(folder)
            .map_err(|e| Error::io("cannot create log folder", folder, e))?;
        let spool_dir = folder.join("callbacklogs");
        let spool = Arc::new(
            Spool::open(spool_dir.clone())
                .map_err(|e| Error::io("cannot open callback spool", spool_dir, e))?,
        );
        // A pull executor binds nothing: the admin reaches it over the connection it dials.
        let listener = if config.pull {
            None
        } else {
            let listener =
                tokio::net::TcpListener::bind(config.listen)
                    .await
                    .map_err(|source| Error::Bind {
                        addr: config.listen,
                        source,
                    })?;
            Some(listener)
        };
        let local_addr = match &listener {
            Some(listener) => listener.local_addr().map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?,
            None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        };
        let instance = instance_id();
        let address = match (&config.advertised_address, config.pull) {
            (_, true) => tickwork_protocol::pull::pull_address(&instance),
            (Some(address), false) => address.trim().to_owned(),
            (None, false) => default_address(local_addr, &config.admin_addresses).await,
        };
        let pull_calls = Arc::new(crate::pull::PullCalls::default());
        let admin = match config.pull {
            true => AdminClient::new(&config)?.with_pull(Arc::clone(&pull_calls)),
            false => AdminClient::new(&config)?,
        };
        let admin = Arc::new(admin);
        let counters = Arc::new(Counters {
            unreported: config.pull.then(Default::default),
            ..Counters::default()
        });
        let (ended_tx, ended_rx) = tokio::sync::mpsc::unbounded_channel();
        let ended_tx = config.pull.then_some(ended_tx);
        let (callbacks, callback_rx) = CallbackQueue::new(Arc::clone(&counters), ended_tx);
        let tracker = TaskTracker::new();
        let logs = RunLogs::new(folder.clone(), jiff::tz::TimeZone::system())
            .map_err(|e| Error::io("cannot start the run log writer for", folder, e))?;
        let script_env = Arc::new(ScriptEnv {
            dir: folder.join("gluesource"),
            kill_grace: config.kill_grace,
            tracker: tracker.clone(),
        });
        let runtime = Arc::new(Runtime {
            workers: Workers::default(),
            accepted: AcceptedRecord::new(config.accepted_runs_capacity, now_ms()),
            handlers: self.handlers,
            scripts_enabled: config.scripts_enabled,
            script_env,
            logs: logs.clone(),
            callbacks,
            idle_timeout: config.idle_timeout,
            kill_grace: config.kill_grace,
            tracker: tracker.clone(),
            counters: Arc::clone(&counters),
        });
        if config.admin_addresses.is_empty() {
            tracing::warn!(
                "no admin address: the executor does not register, and results stay in the callback spool"
            );
        }

        let server_stop = CancellationToken::new();
        let pull_drain = CancellationToken::new();
        let server = match listener {
            Some(listener) => {
                let app = router(Arc::new(ServerState {
                    runtime: Arc::clone(&runtime),
                    token: config.access_token.trim().to_owned(),
                }));
                tokio::spawn(tickwork_serve::serve(
                    listener,
                    app,
                    config.http_limits(),
                    server_stop.clone(),
                ))
            }
            None => {
                let pull = Pull {
                    runtime: Arc::clone(&runtime),
                    admins: config.admin_addresses.clone(),
                    token: config.access_token.trim().to_owned(),
                    app: config.app_name.trim().to_owned(),
                    instance,
                    slots: config.pull_slots,
                    connect_timeout: config.admin_timeout,
                    ended: ended_rx,
                    calls: Arc::clone(&pull_calls),
                    counters: Arc::clone(&counters),
                };
                let (drain, stop) = (pull_drain.clone(), server_stop.clone());
                tokio::spawn(async move {
                    pull_loop(pull, drain, stop).await;
                    Ok(())
                })
            }
        };

        let registration = Bytes::from(tickwork_protocol::encode(&RegistryParam::executor(
            &config.app_name,
            &address,
        )));
        let registry_stop = CancellationToken::new();
        // A pull executor is registered by its connection.
        let registry = if config.pull {
            tokio::spawn(async {})
        } else {
            tokio::spawn(registry_loop(
                Arc::clone(&admin),
                registration.clone(),
                config.registry_interval,
                registry_stop.clone(),
                Arc::clone(&counters),
            ))
        };
        let sender_stop = CancellationToken::new();
        let sender = tokio::spawn(sender_loop(
            callback_rx,
            Arc::clone(&admin),
            Arc::clone(&spool),
            config.callback_batch_size,
            config.callback_linger,
            sender_stop.clone(),
            Arc::clone(&counters),
        ));
        let resend_stop = CancellationToken::new();
        let resend = tokio::spawn(resend_loop(
            Arc::clone(&admin),
            Arc::clone(&spool),
            config.callback_retry_min,
            config.callback_retry_max,
            resend_stop.clone(),
            Arc::clone(&counters),
        ));
        let cleanup_stop = CancellationToken::new();
        let cleanup = tokio::spawn(cleanup_loop(
            logs,
            config.log_retention_days,
            cleanup_stop.clone(),
        ));

        tracing::info!(
            app = %config.app_name,
            %local_addr,
            %address,
            scripts = config.scripts_enabled,
            "executor started"
        );
        let shutdown = CancellationToken::new();
        let drain = Drain {
            runtime: Arc::clone(&runtime),
            admin,
            registration,
            pull_drain: config.pull.then_some(pull_drain),
            mode: config.shutdown_mode,
            timeout: config.shutdown_timeout,
            tracker,
            spool: Arc::clone(&spool),
            server: (server_stop, server),
            registry: (registry_stop, registry),
            sender: (sender_stop, sender),
            resend: (resend_stop, resend),
            cleanup: (cleanup_stop, cleanup),
        };
        let join = tokio::spawn(drain.run(shutdown.clone()));
        Ok(RunningExecutor {
            local_addr,
            address,
            shutdown: ShutdownHandle(shutdown),
            join,
            runtime,
            counters,
            spool,
            pull_calls,
        })
    }
}

/// An id of this executor process that stays the same across its pull reconnects.
fn instance_id() -> String {
    use std::hash::BuildHasher;
    // Randomly keyed by the standard library: distinct per process, no secret.
    let random = std::collections::hash_map::RandomState::new().hash_one(now_ms());
    format!("{:x}-{random:016x}", std::process::id())
}

/// The address registered by default: `http://<ip>:<port>/`, the ip being the listen address,
/// or when that is unspecified (`0.0.0.0`), the local address that routes to the first admin.
async fn default_address(local: SocketAddr, admins: &[String]) -> String {
    let ip = if local.ip().is_unspecified() {
        outbound_ip(admins)
            .await
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    } else {
        local.ip()
    };
    format!("http://{}/", SocketAddr::new(ip, local.port()))
}

async fn outbound_ip(admins: &[String]) -> Option<IpAddr> {
    let target = match admins.first().and_then(|a| reqwest::Url::parse(a).ok()) {
        Some(url) => {
            let host = url.host_str()?.trim_matches(['[', ']']).to_owned();
            let port = url.port_or_known_default().unwrap_or(80);
            tokio::net::lookup_host((host, port)).await.ok()?.next()?
        }
        // No admin to aim at: any public address gives the default route's interface.
        None => SocketAddr::from(([192, 0, 2, 1], 80)),
    };
    let bind: SocketAddr = if target.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    // Connecting a UDP socket sends nothing; it only asks the kernel for a route.
    let socket = tokio::net::UdpSocket::bind(bind).await.ok()?;
    socket.connect(target).await.ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// Deletes old run log folders at start and then once a day.
async fn cleanup_loop(logs: RunLogs, retention_days: u32, stop: CancellationToken) {
    if retention_days < 3 {
        return;
    }
    loop {
        let pass = logs.clone();
        let outcome =
            tokio::task::spawn_blocking(move || pass.cleanup(retention_days, pass.today())).await;
        match outcome {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(folders = n, retention_days, "old run logs deleted"),
            Ok(Err(e)) => tracing::warn!(error = %e, "run log clean-up failed"),
            Err(e) => tracing::warn!(error = %e, "run log clean-up task failed"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(CLEANUP_PERIOD) => {}
        }
    }
}

/// Asks a running executor to shut down; cheap to clone.
#[derive(Debug, Clone)]
pub struct ShutdownHandle(CancellationToken);

impl ShutdownHandle {
    /// Starts the graceful shutdown (idempotent).
    pub fn shutdown(&self) {
        self.0.cancel();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// A started executor.
#[derive(Debug)]
pub struct RunningExecutor {
    local_addr: SocketAddr,
    address: String,
    shutdown: ShutdownHandle,
    join: JoinHandle<Result<ShutdownReport, Error>>,
    runtime: Arc<Runtime>,
    counters: Arc<Counters>,
    spool: Arc<Spool>,
    pull_calls: Arc<crate::pull::PullCalls>,
}

impl RunningExecutor {
    /// The address the server is bound to (the real port when listening on port 0; `0.0.0.0:0`
    /// in pull mode, where nothing listens).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address registered with the admins (in pull mode `pull://<instance>`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// A handle that can start the shutdown from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Starts the graceful shutdown; [`RunningExecutor::wait`] tells when it is over.
    pub fn shutdown(&self) {
        self.shutdown.shutdown();
    }

    pub fn stats(&self) -> ExecutorStats {
        let occ = self.runtime.occupation();
        let c = &self.counters;
        ExecutorStats {
            workers: occ.workers,
            running: occ.running,
            queued: occ.queued,
            runs_started: c.runs_started.load(Ordering::Relaxed),
            runs_finished: c.runs_finished.load(Ordering::Relaxed),
            runs_duplicate: c.runs_duplicate.load(Ordering::Relaxed),
            callbacks_queued: c.callbacks_queued.load(Ordering::Relaxed),
            callbacks_sent: c.callbacks_sent.load(Ordering::Relaxed),
            callbacks_spooled: c.callbacks_spooled.load(Ordering::Relaxed),
            spooled_batches: self.spool.pending(),
            registry_ok: c.registry_ok.load(Ordering::Relaxed),
            registry_failed: c.registry_failed.load(Ordering::Relaxed),
            pull_connected: self.pull_calls.is_up(),
        }
    }

    /// Waits until the executor has shut down (after [`RunningExecutor::shutdown`] or a
    /// [`ShutdownHandle`]).
    pub async fn wait(self) -> Result<ShutdownReport, Error> {
        self.join
            .await
            .map_err(|e| Error::Task(format!("shutdown task: {e}")))?
    }

    /// Shuts down and waits.
    pub async fn shutdown_and_wait(self) -> Result<ShutdownReport, Error> {
        self.shutdown();
        self.wait().await
    }
}

/// Everything the shutdown sequence stops, in order.
struct Drain {
    runtime: Arc<Runtime>,
    admin: Arc<AdminClient>,
    registration: Bytes,
    /// Pull mode: tells the pull connection to send the drain notice (instead of the
    /// deregistration call).
    pull_drain: Option<CancellationToken>,
    mode: ShutdownMode,
    timeout: Duration,
    tracker: TaskTracker,
    spool: Arc<Spool>,
    server: (CancellationToken, JoinHandle<std::io::Result<()>>),
    registry: (CancellationToken, JoinHandle<()>),
    sender: (CancellationToken, JoinHandle<()>),
    resend: (CancellationToken, JoinHandle<()>),
    cleanup: (CancellationToken, JoinHandle<()>),
}

impl Drain {
    async fn run(self, shutdown: CancellationToken) -> Result<ShutdownReport, Error> {
        shutdown.cancelled().await;
        tracing::info!(mode = %self.mode, timeout = ?self.timeout, "executor shutting down");
        let deadline = tokio::time::Instant::now() + self.timeout;
        // New runs are refused from here on; the admin also stops routing to us below.
        self.runtime.stop_accepting();
        let mut failures = Vec::new();
        let (stop, task) = self.registry;
        stop.cancel();
        if let Err(e) = task.await {
            failures.push(format!("registry loop: {e}"));
        }
        match &self.pull_drain {
            Some(drain) => drain.cancel(),
            None => match self
                .admin
                .call("registryRemove", self.registration.clone())
                .await
            {
                Ok(url) => tracing::info!(%url, "deregistered"),
                Err(e) => tracing::warn!(error = %e, "deregistration failed"),
            },
        }

        let mut dropped = 0;
        if self.mode == ShutdownMode::WaitRunning {
            dropped += self.runtime.drop_all_queued(SHUTTING_DOWN_MESSAGE);
        }
        let drained = self
            .runtime
            .wait_for(|o| o.running == 0 && o.queued == 0, deadline)
            .await;
        let left = self.runtime.occupation();
        dropped += left.queued;
        // Also ends the idle workers, which would otherwise wait for their idle timeout.
        let killed = self.runtime.kill_all(DEADLINE_REASON);
        if killed > 0 {
            tracing::warn!(killed, "shutdown deadline passed; remaining runs killed");
        }
        self.tracker.close();
        self.tracker.wait().await;
        self.runtime.logs.flush().await;

        let (stop, mut task) = self.server;
        stop.cancel();
        match tokio::time::timeout(SERVER_DRAIN, &mut task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => failures.push(format!("server: {e}")),
            Ok(Err(e)) => failures.push(format!("server: {e}")),
            Err(_) => {
                tracing::warn!("http connections still open after the drain; closed");
                task.abort();
            }
        }
        for (name, (stop, task)) in [
            ("clean-up loop", self.cleanup),
            ("callback sender", self.sender),
            ("callback resend loop", self.resend),
        ] {
            stop.cancel();
            if let Err(e) = task.await {
                failures.push(format!("{name}: {e}"));
            }
        }
        if !failures.is_empty() {
            return Err(Error::Task(failures.join("; ")));
        }
        let report = ShutdownReport {
            mode: self.mode,
            drained,
            killed_running: killed,
            dropped_queued: dropped,
            spooled_batches: self.spool.pending(),
        };
        tracing::info!(?report, "executor stopped");
        Ok(report)
    }
}
