//! The admin's validated configuration. The binary reads a TOML file, `TICKWORK_*` variables
//! and flags into [`ConfigFile`] (unknown keys are errors), then [`ConfigFile::into_config`]
//! checks every value once, so the running admin never meets a bad one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tickwork_store::SessionBounds;

use crate::Error;
pub use crate::auth::AuthConfig;

/// The admin's configuration, every value checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the HTTP server listens (executor API, JSON API, health).
    pub listen: SocketAddr,
    /// The database URL: `sqlite://…`, `postgres://…` or `mysql://…`.
    pub database_url: String,
    /// Executors must send this in `XXL-JOB-ACCESS-TOKEN`; the admin sends it to them.
    pub access_token: String,
    /// Bearer token of the JSON API (`/openapi/v1`).
    pub api_token: String,
    /// This admin node's id in the run ledger (`owner_node`) and the cluster.
    pub node_id: String,
    /// The zone of jobs created without one.
    pub default_time_zone: String,
    pub scheduler: SchedulerConfig,
    pub dispatch: DispatchConfig,
    pub registry: RegistryConfig,
    pub cluster: ClusterConfig,
    pub monitor: MonitorConfig,
    pub alarm: AlarmConfig,
    /// Console sessions, logins and the first admin.
    pub auth: AuthConfig,
    /// Limits of the HTTP server (`[http]`).
    pub http: tickwork_serve::Limits,
}

/// Claim and timer settings.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// How far ahead a job's next fire is when the job is claimed; its fires are planned into
    /// the timer up to this far past that one.
    pub lookahead: Duration,
    /// The longest pause between claim rounds (a job change wakes the loop earlier).
    pub claim_interval: Duration,
    /// Jobs per claim transaction.
    pub claim_limit: u32,
    /// Fires of one job per claim round (a 10 ms fixed-rate job has many).
    pub max_fires_per_job: usize,
    /// A fire older than this when claimed is late and follows the job's misfire policy.
    pub misfire_threshold: Duration,
    /// Runs this node may hold between its claim and the ledger (in the timers, the lanes,
    /// and dispatched waiting for their record) before it claims more: past it, the claim
    /// waits for the pipeline to drain, so memory stays bounded when more is due than can be
    /// sent, and fires that wait too long follow their job's misfire policy.
    pub max_backlog: usize,
}

/// Dispatch settings.
#[derive(Debug, Clone)]
pub struct DispatchConfig {
    /// `/run` calls in flight at once for ordinary jobs.
    pub concurrency: usize,
    /// `/run` calls in flight at once for jobs whose dispatches are slow.
    pub slow_concurrency: usize,
    /// Timeout of every call to an executor (XXL-JOB's default is 3 s).
    pub executor_timeout: Duration,
    /// A dispatch slower than this counts towards moving its job to the slow lane.
    pub slow_call: Duration,
    /// Slow dispatches of one job within a minute that move it to the slow lane.
    pub slow_calls_per_minute: u32,
    /// How long the ledger holds an accepted run's dispatch record for its callback, to write
    /// both in one update (0: each record at once).
    pub record_hold: Duration,
}

/// Executor registry settings.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// An executor whose last heartbeat is older than this is dead (XXL-JOB: 90 s).
    pub dead_after: Duration,
    /// How often dead registry rows are deleted.
    pub sweep_interval: Duration,
    /// How long a group's live address list is reused before it is read again; a
    /// registration or removal on this node refreshes it at once.
    pub address_cache: Duration,
}

/// Membership of the admin cluster: heartbeats, the maintenance lease, adoption.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// How often this node writes its heartbeat (and renews the lease it holds).
    pub heartbeat_interval: Duration,
    /// A node whose heartbeat is older than this is dead: its planned runs are adopted. A node
    /// whose own last heartbeat is older than half of this stops claiming and firing.
    pub node_dead_after: Duration,
    /// How long the maintenance lease lasts unless renewed (its holder died).
    pub lease_ttl: Duration,
    /// How often this node looks for orphaned runs to adopt.
    pub adopt_interval: Duration,
}

/// The maintenance work of the lease holder.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// A run dispatched longer ago than this whose executor is gone is lost (XXL-JOB: 10 min).
    pub lost_run_timeout: Duration,
    /// How often lost runs are looked for.
    pub lost_run_interval: Duration,
    /// How often failed runs are queued for an alarm.
    pub alarm_interval: Duration,
    /// How often the daily run reports (today and the two days before) are recomputed.
    pub report_interval: Duration,
    /// Runs and reports older than this many days are deleted; below 3 keeps everything.
    pub retention_days: u32,
    /// How often retention runs.
    pub retention_interval: Duration,
    /// How often the ledger's fires are checked (missed, late, doubled).
    pub fire_check_interval: Duration,
    /// A fire not at an executor this long after its instant is missed.
    pub fire_missed_after: Duration,
    /// A `sending` run gets this much longer (its dispatch record may lag under load).
    pub fire_sending_grace: Duration,
    /// After a fire alert of a job and kind, more of the same are added to it for this long
    /// instead of alarming again.
    pub fire_alert_quiet: Duration,
}

/// Delivery of alarms (by the maintenance lease holder).
#[derive(Debug, Clone)]
pub struct AlarmConfig {
    /// How often due deliveries are looked for (queued ones wake the loop at once).
    pub poll_interval: Duration,
    /// Attempts per delivery before it is marked failed.
    pub max_attempts: u32,
    /// The wait after the first failed attempt; it doubles per attempt up to `backoff_max`.
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// The longest one send may take (SMTP conversation or HTTP request).
    pub send_timeout: Duration,
    /// A job's alarms on a channel are at least this far apart: the runs that fail in between
    /// join the next one, which counts them. Zero sends one alarm per failed run at once.
    pub group_window: Duration,
}

impl Default for AlarmConfig {
    fn default() -> Self {
        AlarmConfig {
            poll_interval: Duration::from_secs(1),
            max_attempts: 5,
            backoff: Duration::from_secs(10),
            backoff_max: Duration::from_secs(600),
            send_timeout: Duration::from_secs(10),
            group_window: Duration::from_secs(60),
        }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            heartbeat_interval: Duration::from_secs(1),
            node_dead_after: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(5),
            adopt_interval: Duration::from_secs(1),
        }
    }
}

/// The statement bound of an admin's sessions. The biggest legitimate statements (a claim's
/// inserts of up to 500 runs each, a retention batch, a job deleted with all its runs, a
/// day's report) take seconds on a healthy database: five minutes leaves room for a slow
/// disk and still ends a runaway.
const STATEMENT_BOUND: Duration = Duration::from_secs(300);

impl ClusterConfig {
    /// The server-side bounds of this admin's database sessions, from the cluster's timing:
    /// a frozen or cut-off admin must not keep rows locked past the time the cluster gives it.
    ///
    /// - A transaction idle for half of `node_dead_after` is ended by the server, which
    ///   releases its locks before the node counts as dead (its fence closes at that half too).
    /// - A lock wait ends after `node_dead_after`: longer than a silent holder lasts, so a
    ///   waiter behind a frozen node gets the row once the server ends that node's transaction.
    /// - A statement ends after [`STATEMENT_BOUND`], or the lock wait when that is longer.
    ///
    /// Each is kept within the store's range: at least a second (the gaps of a busy admin
    /// between two statements of a transaction are not silence), at most a day.
    pub fn session_bounds(&self) -> SessionBounds {
        let within = |d: Duration| d.clamp(SessionBounds::MIN, SessionBounds::MAX);
        let lock_wait = within(self.node_dead_after);
        SessionBounds::new(
            within(self.node_dead_after / 2),
            lock_wait,
            lock_wait.max(STATEMENT_BOUND),
        )
        .expect("bounds within the store's range, the lock wait within the statement bound")
    }
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            lost_run_timeout: Duration::from_secs(600),
            lost_run_interval: Duration::from_secs(10),
            alarm_interval: Duration::from_secs(1),
            report_interval: Duration::from_secs(60),
            retention_days: 30,
            retention_interval: Duration::from_secs(3600),
            fire_check_interval: Duration::from_secs(5),
            fire_missed_after: Duration::from_secs(10),
            fire_sending_grace: Duration::from_secs(60),
            fire_alert_quiet: Duration::from_secs(600),
        }
    }
}

impl MonitorConfig {
    /// The retention period, or `None` when retention is off (fewer than 3 days).
    pub fn retention(&self) -> Option<Duration> {
        (self.retention_days >= 3)
            .then(|| Duration::from_secs(u64::from(self.retention_days) * 86_400))
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            lookahead: Duration::from_millis(3000),
            claim_interval: Duration::from_millis(500),
            claim_limit: 1000,
            max_fires_per_job: 10_000,
            misfire_threshold: Duration::from_millis(5000),
            max_backlog: 100_000,
        }
    }
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            concurrency: 256,
            slow_concurrency: 32,
            executor_timeout: Duration::from_secs(3),
            slow_call: Duration::from_millis(500),
            slow_calls_per_minute: 10,
            record_hold: Duration::from_millis(250),
        }
    }
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            dead_after: Duration::from_secs(90),
            sweep_interval: Duration::from_secs(30),
            address_cache: Duration::from_secs(1),
        }
    }
}

impl Config {
    /// A configuration with defaults for everything but the essentials.
    pub fn new(database_url: &str, access_token: &str, api_token: &str) -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            database_url: database_url.to_owned(),
            access_token: access_token.to_owned(),
            api_token: api_token.to_owned(),
            node_id: default_node_id(),
            default_time_zone: "UTC".to_owned(),
            scheduler: SchedulerConfig::default(),
            dispatch: DispatchConfig::default(),
            registry: RegistryConfig::default(),
            cluster: ClusterConfig::default(),
            monitor: MonitorConfig::default(),
            alarm: AlarmConfig::default(),
            auth: AuthConfig::default(),
            http: tickwork_serve::Limits::default(),
        }
    }

    /// Checks the relations between values.
    pub fn validate(&self) -> Result<(), Error> {
        let s = &self.scheduler;
        if s.lookahead <= s.claim_interval {
            return Err(Error::invalid(format!(
                "scheduler.lookahead_ms ({}) must be greater than scheduler.claim_interval_ms ({})",
                s.lookahead.as_millis(),
                s.claim_interval.as_millis()
            )));
        }
        if s.claim_limit == 0 || s.max_fires_per_job == 0 || s.max_backlog == 0 {
            return Err(Error::invalid(
                "scheduler.claim_limit, scheduler.max_fires_per_job and scheduler.max_backlog \
                 must be at least 1",
            ));
        }
        if self.dispatch.concurrency == 0 || self.dispatch.slow_concurrency == 0 {
            return Err(Error::invalid(
                "dispatch.concurrency and dispatch.slow_concurrency must be at least 1",
            ));
        }
        if self.access_token.is_empty() || self.api_token.is_empty() {
            return Err(Error::invalid("access and api tokens must not be empty"));
        }
        tickwork_core::schedule::parse_time_zone(&self.default_time_zone)?;
        if self.node_id.trim().is_empty() || self.node_id.len() > 64 {
            return Err(Error::invalid("node_id must be 1 to 64 characters"));
        }
        // MySQL compares strings without their trailing spaces: "a" and "a " would be one
        // node to it and two to the others.
        if self.node_id.trim() != self.node_id {
            return Err(Error::invalid(
                "node_id must not start or end with white space",
            ));
        }
        let c = &self.cluster;
        let ms = |d: Duration| d.as_millis();
        // A node fences itself when its heartbeat is older than half of node_dead_after, so a
        // single slow beat must not already close the fence.
        if c.heartbeat_interval.is_zero() || c.heartbeat_interval * 2 > c.node_dead_after / 2 {
            return Err(Error::invalid(format!(
                "cluster.heartbeat_interval_ms ({}) must be at most a quarter of \
                 cluster.node_dead_after_ms ({})",
                ms(c.heartbeat_interval),
                ms(c.node_dead_after)
            )));
        }
        if c.lease_ttl < c.heartbeat_interval * 2 {
            return Err(Error::invalid(format!(
                "cluster.lease_ttl_ms ({}) must be at least twice cluster.heartbeat_interval_ms ({})",
                ms(c.lease_ttl),
                ms(c.heartbeat_interval)
            )));
        }
        let a = &self.auth;
        if a.session_idle < Duration::from_secs(60) || a.session_max < a.session_idle {
            return Err(Error::invalid(format!(
                "auth.session_idle_s ({}) must be at least 60 and at most auth.session_max_s ({})",
                a.session_idle.as_secs(),
                a.session_max.as_secs()
            )));
        }
        if a.login_max_failures == 0 {
            return Err(Error::invalid("auth.login_max_failures must be at least 1"));
        }
        if !(1..=256).contains(&a.max_concurrent_logins) {
            return Err(Error::invalid(format!(
                "auth.max_concurrent_logins ({}) is out of range 1-256",
                a.max_concurrent_logins
            )));
        }
        let m = &self.monitor;
        for (name, d) in [
            ("cluster.adopt_interval_ms", c.adopt_interval),
            ("monitor.lost_run_timeout_ms", m.lost_run_timeout),
            ("monitor.lost_run_interval_ms", m.lost_run_interval),
            ("monitor.alarm_interval_ms", m.alarm_interval),
            ("monitor.report_interval_ms", m.report_interval),
            ("monitor.retention_interval_ms", m.retention_interval),
            ("monitor.fire_check_interval_ms", m.fire_check_interval),
            ("monitor.fire_missed_after_ms", m.fire_missed_after),
            ("registry.sweep_interval_ms", self.registry.sweep_interval),
            ("alarm.poll_interval_ms", self.alarm.poll_interval),
            ("alarm.backoff_ms", self.alarm.backoff),
        ] {
            if d < Duration::from_millis(10) {
                return Err(Error::invalid(format!(
                    "{name} ({}) must be at least 10",
                    ms(d)
                )));
            }
        }
        let a = &self.alarm;
        if !(1..=100).contains(&a.max_attempts) {
            return Err(Error::invalid(format!(
                "alarm.max_attempts ({}) is out of range 1-100",
                a.max_attempts
            )));
        }
        if a.backoff_max < a.backoff {
            return Err(Error::invalid(format!(
                "alarm.backoff_max_ms ({}) must be at least alarm.backoff_ms ({})",
                ms(a.backoff_max),
                ms(a.backoff)
            )));
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(300)).contains(&a.send_timeout) {
            return Err(Error::invalid(format!(
                "alarm.send_timeout_ms ({}) is out of range 100-300000",
                ms(a.send_timeout)
            )));
        }
        if a.group_window > Duration::from_secs(86_400) {
            return Err(Error::invalid(format!(
                "alarm.group_window_ms ({}) is out of range 0-86400000",
                ms(a.group_window)
            )));
        }
        self.http
            .check("http.header_read_timeout_ms", "http.max_connections")
            .map_err(Error::invalid)?;
        Ok(())
    }
}

/// `<hostname>-<random>`: unique per process start, readable in the ledger. The suffix is
/// 128 bits from the operating system's generator; the host name is cut to fit 64 bytes.
pub fn default_node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "admin".to_owned()
    } else {
        host
    };
    let mut cut = String::new();
    for ch in host.chars() {
        if cut.len() + ch.len_utf8() > NODE_HOST_BYTES {
            break;
        }
        cut.push(ch);
    }
    let suffix = crate::auth::random_hex(16)
        .expect("the operating system's random generator is needed for the node id");
    format!("{cut}-{suffix}")
}

/// The host name part of a generated node id: with `-` and 32 hex digits, 64 bytes at most.
const NODE_HOST_BYTES: usize = 31;

/// The configuration as written in a TOML file (and overlaid by env and flags): every field
/// optional, unknown keys refused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub listen: Option<String>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub access_token: Option<String>,
    pub api_token: Option<String>,
    pub node_id: Option<String>,
    pub default_time_zone: Option<String>,
    #[serde(default)]
    pub scheduler: SchedulerFile,
    #[serde(default)]
    pub dispatch: DispatchFile,
    #[serde(default)]
    pub registry: RegistryFile,
    #[serde(default)]
    pub cluster: ClusterFile,
    #[serde(default)]
    pub monitor: MonitorFile,
    #[serde(default)]
    pub alarm: AlarmFile,
    #[serde(default)]
    pub auth: AuthFile,
    #[serde(default)]
    pub http: HttpFile,
}

/// `[http]`: limits of the HTTP server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpFile {
    pub header_read_timeout_ms: Option<u64>,
    pub max_connections: Option<usize>,
}

/// `[auth]`: sessions, logins, the first admin.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFile {
    /// The first admin's password, used only when the database has no user yet.
    pub admin_password: Option<String>,
    pub session_idle_s: Option<u64>,
    pub session_max_s: Option<u64>,
    /// Mark the session cookie `Secure` (the console is served over HTTPS).
    pub secure_cookie: Option<bool>,
    pub login_max_failures: Option<u32>,
    pub login_window_s: Option<u64>,
    /// Password checks of logins that may run at once (each takes 19 MiB).
    pub max_concurrent_logins: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerFile {
    pub lookahead_ms: Option<u64>,
    pub claim_interval_ms: Option<u64>,
    pub claim_limit: Option<u32>,
    pub max_fires_per_job: Option<usize>,
    pub misfire_threshold_ms: Option<u64>,
    pub max_backlog: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchFile {
    pub concurrency: Option<usize>,
    pub slow_concurrency: Option<usize>,
    pub executor_timeout_ms: Option<u64>,
    pub record_hold_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryFile {
    pub dead_after_ms: Option<u64>,
    pub sweep_interval_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub heartbeat_interval_ms: Option<u64>,
    pub node_dead_after_ms: Option<u64>,
    pub lease_ttl_ms: Option<u64>,
    pub adopt_interval_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorFile {
    pub lost_run_timeout_ms: Option<u64>,
    pub lost_run_interval_ms: Option<u64>,
    pub alarm_interval_ms: Option<u64>,
    pub report_interval_ms: Option<u64>,
    pub retention_days: Option<u32>,
    pub retention_interval_ms: Option<u64>,
    pub fire_check_interval_ms: Option<u64>,
    pub fire_missed_after_ms: Option<u64>,
    pub fire_sending_grace_ms: Option<u64>,
    pub fire_alert_quiet_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmFile {
    pub poll_interval_ms: Option<u64>,
    pub max_attempts: Option<u32>,
    pub backoff_ms: Option<u64>,
    pub backoff_max_ms: Option<u64>,
    pub send_timeout_ms: Option<u64>,
    pub group_window_ms: Option<u64>,
}

impl ConfigFile {
    /// Validates into a [`Config`]. Tokens and the database URL must have been resolved by
    /// the caller (it owns the data folder where generated tokens are kept).
    pub fn into_config(self) -> Result<Config, Error> {
        let database_url = self
            .database_url
            .ok_or_else(|| Error::invalid("database_url is required"))?;
        let access_token = self.access_token.unwrap_or_default();
        let api_token = self.api_token.unwrap_or_default();
        let mut c = Config::new(&database_url, &access_token, &api_token);
        if let Some(l) = self.listen {
            c.listen = l.parse().map_err(|_| {
                Error::invalid_field("listen", format!("{l:?} is not an ip:port address"))
            })?;
        }
        if let Some(n) = self.node_id {
            c.node_id = n;
        }
        if let Some(z) = self.default_time_zone {
            c.default_time_zone = z;
        }
        let ms = Duration::from_millis;
        let s = self.scheduler;
        if let Some(v) = s.lookahead_ms {
            c.scheduler.lookahead = ms(v);
        }
        if let Some(v) = s.claim_interval_ms {
            c.scheduler.claim_interval = ms(v);
        }
        if let Some(v) = s.claim_limit {
            c.scheduler.claim_limit = v;
        }
        if let Some(v) = s.max_fires_per_job {
            c.scheduler.max_fires_per_job = v;
        }
        if let Some(v) = s.misfire_threshold_ms {
            c.scheduler.misfire_threshold = ms(v);
        }
        if let Some(v) = s.max_backlog {
            c.scheduler.max_backlog = v;
        }
        let d = self.dispatch;
        if let Some(v) = d.concurrency {
            c.dispatch.concurrency = v;
        }
        if let Some(v) = d.slow_concurrency {
            c.dispatch.slow_concurrency = v;
        }
        if let Some(v) = d.executor_timeout_ms {
            if !(100..=60_000).contains(&v) {
                return Err(Error::invalid(format!(
                    "dispatch.executor_timeout_ms: {v} is out of range 100-60000"
                )));
            }
            c.dispatch.executor_timeout = ms(v);
        }
        if let Some(v) = d.record_hold_ms {
            if v > 5_000 {
                return Err(Error::invalid(format!(
                    "dispatch.record_hold_ms: {v} is out of range 0-5000"
                )));
            }
            c.dispatch.record_hold = ms(v);
        }
        let r = self.registry;
        if let Some(v) = r.dead_after_ms {
            c.registry.dead_after = ms(v);
        }
        if let Some(v) = r.sweep_interval_ms {
            c.registry.sweep_interval = ms(v);
        }
        let k = self.cluster;
        let set = |slot: &mut Duration, v: Option<u64>| {
            if let Some(v) = v {
                *slot = ms(v);
            }
        };
        set(&mut c.cluster.heartbeat_interval, k.heartbeat_interval_ms);
        set(&mut c.cluster.node_dead_after, k.node_dead_after_ms);
        set(&mut c.cluster.lease_ttl, k.lease_ttl_ms);
        set(&mut c.cluster.adopt_interval, k.adopt_interval_ms);
        let m = self.monitor;
        set(&mut c.monitor.lost_run_timeout, m.lost_run_timeout_ms);
        set(&mut c.monitor.lost_run_interval, m.lost_run_interval_ms);
        set(&mut c.monitor.alarm_interval, m.alarm_interval_ms);
        set(&mut c.monitor.report_interval, m.report_interval_ms);
        set(&mut c.monitor.retention_interval, m.retention_interval_ms);
        set(&mut c.monitor.fire_check_interval, m.fire_check_interval_ms);
        set(&mut c.monitor.fire_missed_after, m.fire_missed_after_ms);
        set(&mut c.monitor.fire_sending_grace, m.fire_sending_grace_ms);
        set(&mut c.monitor.fire_alert_quiet, m.fire_alert_quiet_ms);
        if let Some(v) = m.retention_days {
            c.monitor.retention_days = v;
        }
        let a = self.alarm;
        set(&mut c.alarm.poll_interval, a.poll_interval_ms);
        set(&mut c.alarm.backoff, a.backoff_ms);
        set(&mut c.alarm.backoff_max, a.backoff_max_ms);
        set(&mut c.alarm.send_timeout, a.send_timeout_ms);
        set(&mut c.alarm.group_window, a.group_window_ms);
        if let Some(v) = a.max_attempts {
            c.alarm.max_attempts = v;
        }
        let a = self.auth;
        let secs = Duration::from_secs;
        c.auth.initial_admin_password = a.admin_password.filter(|p| !p.is_empty());
        if let Some(v) = a.session_idle_s {
            c.auth.session_idle = secs(v);
        }
        if let Some(v) = a.session_max_s {
            c.auth.session_max = secs(v);
        }
        if let Some(v) = a.secure_cookie {
            c.auth.secure_cookie = v;
        }
        if let Some(v) = a.login_max_failures {
            c.auth.login_max_failures = v;
        }
        if let Some(v) = a.login_window_s {
            c.auth.login_window = secs(v);
        }
        if let Some(v) = a.max_concurrent_logins {
            c.auth.max_concurrent_logins = v;
        }
        set(
            &mut c.http.header_read_timeout,
            self.http.header_read_timeout_ms,
        );
        if let Some(v) = self.http.max_connections {
            c.http.max_connections = v;
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<Config, String> {
        let mut f: ConfigFile = toml::from_str(text).map_err(|e| e.to_string())?;
        f.database_url = Some("sqlite::memory:".into());
        f.access_token = Some("a".into());
        f.api_token = Some("b".into());
        f.into_config().map_err(|e| e.to_string())
    }

    #[test]
    fn cluster_and_monitor_keys_are_read() {
        let c = file(
            "[cluster]\nheartbeat_interval_ms = 500\nnode_dead_after_ms = 3000\n\
             lease_ttl_ms = 2000\nadopt_interval_ms = 250\n\
             [monitor]\nlost_run_timeout_ms = 2000\nlost_run_interval_ms = 100\n\
             alarm_interval_ms = 100\nreport_interval_ms = 1000\nretention_days = 2\n\
             retention_interval_ms = 60000\n",
        )
        .unwrap();
        assert_eq!(c.cluster.heartbeat_interval, Duration::from_millis(500));
        assert_eq!(c.cluster.node_dead_after, Duration::from_secs(3));
        assert_eq!(c.cluster.lease_ttl, Duration::from_secs(2));
        assert_eq!(c.cluster.adopt_interval, Duration::from_millis(250));
        assert_eq!(c.monitor.lost_run_timeout, Duration::from_secs(2));
        assert_eq!(c.monitor.retention_days, 2);
        assert_eq!(c.monitor.retention(), None);
        let d = file("").unwrap();
        assert_eq!(d.monitor.lost_run_timeout, Duration::from_secs(600));
        assert_eq!(
            d.monitor.retention(),
            Some(Duration::from_secs(30 * 86_400))
        );
    }

    #[test]
    fn alarm_keys_are_read_and_checked() {
        let c = file(
            "[alarm]\npoll_interval_ms = 200\nmax_attempts = 3\nbackoff_ms = 50\n\
             backoff_max_ms = 400\nsend_timeout_ms = 2000\ngroup_window_ms = 0\n",
        )
        .unwrap();
        assert_eq!(c.alarm.group_window, Duration::ZERO);
        assert_eq!(
            file("").unwrap().alarm.group_window,
            Duration::from_secs(60)
        );
        assert_eq!(c.alarm.poll_interval, Duration::from_millis(200));
        assert_eq!(c.alarm.max_attempts, 3);
        assert_eq!(c.alarm.backoff, Duration::from_millis(50));
        assert_eq!(c.alarm.backoff_max, Duration::from_millis(400));
        assert_eq!(c.alarm.send_timeout, Duration::from_secs(2));
        assert_eq!(file("").unwrap().alarm.max_attempts, 5);
        for (text, want) in [
            ("[alarm]\nmax_attempts = 0\n", "alarm.max_attempts"),
            (
                "[alarm]\nbackoff_ms = 5000\nbackoff_max_ms = 10\n",
                "alarm.backoff_max_ms",
            ),
            ("[alarm]\nsend_timeout_ms = 1\n", "alarm.send_timeout_ms"),
            ("[alarm]\npoll_interval_ms = 1\n", "alarm.poll_interval_ms"),
            (
                "[alarm]\ngroup_window_ms = 86400001\n",
                "alarm.group_window_ms (86400001) is out of range",
            ),
            ("[alarm]\ngroup_window_ms = -1\n", "group_window_ms"),
            ("[alarm]\nretries = 1\n", "retries"),
        ] {
            let err = file(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn bad_cluster_settings_are_refused() {
        let err = file("[cluster]\nheartbeat_interval_ms = 2000\n").unwrap_err();
        assert!(err.contains("cluster.heartbeat_interval_ms"), "{err}");
        let err = file("[cluster]\nlease_ttl_ms = 1000\n").unwrap_err();
        assert!(err.contains("cluster.lease_ttl_ms"), "{err}");
        let err = file("[monitor]\nlost_run_interval_ms = 0\n").unwrap_err();
        assert!(err.contains("monitor.lost_run_interval_ms"), "{err}");
        let err = file("[cluster]\nheartbeat_ms = 1\n").unwrap_err();
        assert!(err.contains("heartbeat_ms"), "{err}");
    }

    #[test]
    fn session_bounds_follow_node_dead_after_within_the_store_range() {
        let bounds = |dead_after_ms: u64| {
            let c = ClusterConfig {
                node_dead_after: Duration::from_millis(dead_after_ms),
                ..ClusterConfig::default()
            };
            let b = c.session_bounds();
            (
                b.transaction_idle().as_millis(),
                b.lock_wait().as_millis(),
                b.statement().as_millis(),
            )
        };
        assert_eq!(bounds(5_000), (2_500, 5_000, 300_000));
        assert_eq!(bounds(1_000), (1_000, 1_000, 300_000));
        assert_eq!(bounds(4), (1_000, 1_000, 300_000));
        assert_eq!(bounds(21_600_000), (10_800_000, 21_600_000, 21_600_000));
        assert_eq!(bounds(u64::MAX / 2), (86_400_000, 86_400_000, 86_400_000));
        assert_eq!(
            ClusterConfig::default().session_bounds(),
            file("").unwrap().cluster.session_bounds()
        );
    }

    #[test]
    fn dispatch_record_hold_is_read_and_checked() {
        assert_eq!(
            file("").unwrap().dispatch.record_hold,
            Duration::from_millis(250)
        );
        let c = file("[dispatch]\nrecord_hold_ms = 0\n").unwrap();
        assert_eq!(c.dispatch.record_hold, Duration::ZERO);
        let err = file("[dispatch]\nrecord_hold_ms = 5001\n").unwrap_err();
        assert!(err.contains("dispatch.record_hold_ms"), "{err}");
    }

    #[test]
    fn http_keys_are_read_and_checked() {
        let c = file("[http]\nheader_read_timeout_ms = 2500\nmax_connections = 40\n").unwrap();
        assert_eq!(c.http.header_read_timeout, Duration::from_millis(2500));
        assert_eq!(c.http.max_connections, 40);
        let d = file("").unwrap();
        assert_eq!(d.http, tickwork_serve::Limits::default());
        assert_eq!(d.http.header_read_timeout, Duration::from_secs(30));
        for (text, want) in [
            (
                "[http]\nheader_read_timeout_ms = 5\n",
                "http.header_read_timeout_ms",
            ),
            ("[http]\nmax_connections = 0\n", "http.max_connections"),
            ("[http]\nidle_ms = 1\n", "idle_ms"),
        ] {
            let err = file(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn node_ids_are_checked() {
        for (id, wanted) in [
            ("", "1 to 64 characters"),
            ("   ", "1 to 64 characters"),
            (&"n".repeat(65), "1 to 64 characters"),
            ("node-a ", "white space"),
            (" node-a", "white space"),
        ] {
            let err = file(&format!("node_id = {id:?}\n")).unwrap_err();
            assert!(err.contains(wanted), "{id:?}: {err}");
        }
        assert_eq!(file("node_id = \"node a\"\n").unwrap().node_id, "node a");
    }

    #[test]
    fn node_id_suffix_has_128_bits_from_the_os_generator() {
        let ids: std::collections::HashSet<String> = (0..100).map(|_| default_node_id()).collect();
        assert_eq!(ids.len(), 100, "node ids repeat");
        for id in &ids {
            let (host, suffix) = id.rsplit_once('-').unwrap();
            assert!(!host.is_empty(), "{id}");
            assert_eq!(suffix.len(), 32, "{id}");
            assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
            assert!(id.len() <= 64, "{id}");
        }
        let mut c = file("").unwrap();
        c.node_id = ids.into_iter().next().unwrap();
        c.validate().expect("a generated node id is valid");
    }

    #[test]
    fn concurrent_logins_are_bounded() {
        assert_eq!(AuthConfig::default().max_concurrent_logins, 4);
        let c = file("[auth]\nmax_concurrent_logins = 2\n").unwrap();
        assert_eq!(c.auth.max_concurrent_logins, 2);
        for n in [0, 257] {
            let err = file(&format!("[auth]\nmax_concurrent_logins = {n}\n")).unwrap_err();
            assert!(err.contains("auth.max_concurrent_logins"), "{err}");
        }
    }
}
