//! Executor settings, their defaults (XXL-JOB's where it has one) and their validation.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::Error;

/// What a graceful shutdown does with the runs it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShutdownMode {
    /// Finish the running runs and every queued one.
    #[default]
    WaitAll,
    /// Finish the running runs; queued ones fail at once with a callback saying why.
    WaitRunning,
}

impl ShutdownMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            ShutdownMode::WaitAll => "wait-all",
            ShutdownMode::WaitRunning => "wait-running",
        }
    }
}

impl fmt::Display for ShutdownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ShutdownMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim() {
            "wait-all" => Ok(ShutdownMode::WaitAll),
            "wait-running" => Ok(ShutdownMode::WaitRunning),
            other => Err(Error::Config(format!(
                "shutdown mode {other:?} is not one of wait-all, wait-running"
            ))),
        }
    }
}

/// Everything an executor needs to know. Build one with [`ExecutorConfig::new`] and adjust the
/// public fields, or use the setters of [`crate::ExecutorBuilder`].
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// The app name the executor registers under (XXL: `appname`), 1 to 64 characters.
    pub app_name: String,
    /// Admin base URLs, with or without a context path such as `/xxl-job-admin`; tried in order.
    pub admin_addresses: Vec<String>,
    /// Access token required on incoming calls and sent on outgoing ones; empty = none.
    pub access_token: String,
    /// Where the HTTP server listens (port 0 picks a free port).
    pub listen: SocketAddr,
    /// The address registered with the admin, sent verbatim; default `http://<ip>:<port>/`.
    pub advertised_address: Option<String>,
    /// Root of run logs, cached script sources and the callback spool.
    pub log_folder: PathBuf,
    /// Whether script jobs (`GLUE_SHELL`, `GLUE_PYTHON`, ...) may run here.
    pub scripts_enabled: bool,
    /// What shutdown does with queued runs.
    pub shutdown_mode: ShutdownMode,
    /// How long shutdown waits for runs before killing what is left.
    pub shutdown_timeout: Duration,
    /// Interval between registration rounds (XXL: 30 s).
    pub registry_interval: Duration,
    /// Connect and read timeout of every call to an admin (XXL: 3 s).
    pub admin_timeout: Duration,
    /// How long the callback sender waits for more results before posting a partial batch.
    pub callback_linger: Duration,
    /// Most results posted in one callback request (XXL 3.4.1+: 50).
    pub callback_batch_size: usize,
    /// First delay before resending spooled callbacks after a failure; doubled per failure.
    pub callback_retry_min: Duration,
    /// Longest delay between resend attempts, and the period of the spool scan.
    pub callback_retry_max: Duration,
    /// A job worker with nothing to do for this long ends (XXL: about 90 s).
    pub idle_timeout: Duration,
    /// How long a killed or timed-out run has to stop on its own: a handler to return, a
    /// script between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Run logs older than this many days are deleted once a day; values below 3 disable it.
    pub log_retention_days: u32,
    /// The HTTP server closes a connection that has not sent a complete request head this
    /// long after it opened or after its previous response (idle keep-alive ones too).
    pub header_read_timeout: Duration,
    /// Connections the HTTP server serves at once; more wait until one ends.
    pub max_connections: usize,
    /// How many accepted run ids the executor remembers (a `/run` of one of them is not run
    /// again, and `/tickwork/accepted` answers from them); past it the oldest are forgotten.
    /// At most about 64 bytes each (a hash set and a queue, grown by doubling).
    pub accepted_runs_capacity: usize,
    /// Pull mode: listen on no port, dial one admin of `admin_addresses` instead (a WebSocket
    /// at `/api/pull`) and take runs, kills and log reads over that connection.
    pub pull: bool,
    /// Pull mode: how many runs (queued or running) this executor takes at once; the admin
    /// sends no more.
    pub pull_slots: u32,
}

/// Default of [`ExecutorConfig::pull_slots`].
pub const DEFAULT_PULL_SLOTS: u32 = 64;
/// Largest [`ExecutorConfig::pull_slots`] accepted.
pub const MAX_PULL_SLOTS: u32 = 100_000;

/// Default of [`ExecutorConfig::accepted_runs_capacity`]: a few MiB.
pub const DEFAULT_ACCEPTED_RUNS_CAPACITY: usize = 100_000;
/// Largest [`ExecutorConfig::accepted_runs_capacity`] accepted (some hundreds of MiB).
pub const MAX_ACCEPTED_RUNS_CAPACITY: usize = 10_000_000;

impl ExecutorConfig {
    /// The defaults, for the given app name.
    pub fn new(app_name: impl Into<String>) -> Self {
        ExecutorConfig {
            app_name: app_name.into(),
            admin_addresses: Vec::new(),
            access_token: String::new(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 9999),
            advertised_address: None,
            log_folder: PathBuf::from("tickwork-data/executor-logs"),
            scripts_enabled: false,
            shutdown_mode: ShutdownMode::WaitAll,
            shutdown_timeout: Duration::from_secs(30),
            registry_interval: Duration::from_secs(30),
            admin_timeout: Duration::from_secs(3),
            callback_linger: Duration::from_millis(5),
            callback_batch_size: 50,
            callback_retry_min: Duration::from_secs(1),
            callback_retry_max: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(90),
            kill_grace: Duration::from_secs(5),
            log_retention_days: 30,
            header_read_timeout: tickwork_serve::Limits::default().header_read_timeout,
            max_connections: tickwork_serve::Limits::default().max_connections,
            accepted_runs_capacity: DEFAULT_ACCEPTED_RUNS_CAPACITY,
            pull: false,
            pull_slots: DEFAULT_PULL_SLOTS,
        }
    }

    /// Splits a comma-separated admin list, trimming entries and skipping blanks (as XXL does).
    pub fn parse_admin_list(list: &str) -> Vec<String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Checks every setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        let app = self.app_name.trim();
        if app.is_empty() || app.chars().count() > 64 {
            return Err(Error::Config(format!(
                "app name {:?} must have 1 to 64 characters",
                self.app_name
            )));
        }
        for admin in &self.admin_addresses {
            if !(admin.starts_with("http://") || admin.starts_with("https://")) {
                return Err(Error::Config(format!(
                    "admin address {admin:?} must start with http:// or https://"
                )));
            }
        }
        if self.pull {
            if self.admin_addresses.is_empty() {
                return Err(Error::Config(
                    "pull mode needs at least one admin address to dial".into(),
                ));
            }
            if self.advertised_address.is_some() {
                return Err(Error::Config(
                    "pull mode registers no address of its own: leave the advertised address out"
                        .into(),
                ));
            }
            if self.access_token.trim().is_empty() {
                return Err(Error::Config(
                    "pull mode needs the access token: an admin refuses a pull connection \
                     without one"
                        .into(),
                ));
            }
            if !(1..=MAX_PULL_SLOTS).contains(&self.pull_slots) {
                return Err(Error::Config(format!(
                    "pull slots {} must be between 1 and {MAX_PULL_SLOTS}",
                    self.pull_slots
                )));
            }
        }
        if let Some(address) = &self.advertised_address {
            let address = address.trim();
            if !(address.starts_with("http://") || address.starts_with("https://")) {
                return Err(Error::Config(format!(
                    "advertised address {address:?} must start with http:// or https://"
                )));
            }
        }
        if self.log_folder.as_os_str().is_empty() {
            return Err(Error::Config("log folder must not be empty".into()));
        }
        if self.callback_batch_size == 0 {
            return Err(Error::Config(
                "callback batch size must be at least 1".into(),
            ));
        }
        if !(1..=MAX_ACCEPTED_RUNS_CAPACITY).contains(&self.accepted_runs_capacity) {
            return Err(Error::Config(format!(
                "accepted runs capacity {} must be between 1 and {MAX_ACCEPTED_RUNS_CAPACITY}",
                self.accepted_runs_capacity
            )));
        }
        let positive = [
            ("registry interval", self.registry_interval),
            ("admin timeout", self.admin_timeout),
            ("callback retry min", self.callback_retry_min),
            ("callback retry max", self.callback_retry_max),
            ("idle timeout", self.idle_timeout),
        ];
        for (name, value) in positive {
            if value.is_zero() {
                return Err(Error::Config(format!("{name} must be greater than zero")));
            }
        }
        if self.callback_retry_max < self.callback_retry_min {
            return Err(Error::Config(
                "callback retry max must not be below callback retry min".into(),
            ));
        }
        self.http_limits()
            .check("header read timeout", "max connections")
            .map_err(Error::Config)?;
        let token = self.access_token.trim();
        if token == WELL_KNOWN_TOKEN {
            return Err(Error::Config(format!(
                "access token {WELL_KNOWN_TOKEN:?} is XXL-JOB's well-known default: set a secret token"
            )));
        }
        // Without a token anyone who reaches the port runs shell commands here (a pull
        // executor has no port).
        if self.scripts_enabled && token.is_empty() && !self.pull && !self.listen.ip().is_loopback()
        {
            return Err(Error::Config(format!(
                "scripts are enabled without an access token while listening on {}: set a token, \
                 or listen on a loopback address (127.0.0.1) only",
                self.listen
            )));
        }
        Ok(())
    }

    /// Whether the access token is empty, which is worth a warning (anyone who reaches the
    /// port may call the executor). XXL's well-known default is refused by [`Self::validate`].
    pub fn token_is_weak(&self) -> bool {
        self.access_token.trim().is_empty()
    }

    /// The HTTP server's limits.
    pub fn http_limits(&self) -> tickwork_serve::Limits {
        tickwork_serve::Limits {
            header_read_timeout: self.header_read_timeout,
            max_connections: self.max_connections,
            ..tickwork_serve::Limits::default()
        }
    }
}

/// XXL-JOB's shipped access token: known to everyone, so no protection at all.
pub const WELL_KNOWN_TOKEN: &str = "default_token";

/// Reads a duration written as `<n>ms`, `<n>s`, `<n>m` or `<n>h`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, Error> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| {
        Error::Config(format!(
            "duration {text:?} must look like 500ms, 30s, 5m or 1h"
        ))
    })?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(n.saturating_mul(3600))),
        _ => Err(Error::Config(format!(
            "duration {text:?} must look like 500ms, 30s, 5m or 1h"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_list_is_trimmed_and_blanks_skipped() {
        assert_eq!(
            ExecutorConfig::parse_admin_list(" http://a:8080/xxl-job-admin , ,http://b/ "),
            vec!["http://a:8080/xxl-job-admin", "http://b/"]
        );
    }

    #[test]
    fn validation_names_the_bad_setting() {
        let mut c = ExecutorConfig::new("app");
        assert!(c.validate().is_ok());
        c.admin_addresses = vec!["ftp://x".into()];
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("admin address")
        );
        let c = ExecutorConfig::new(" ");
        assert!(c.validate().unwrap_err().to_string().contains("app name"));
        for bad in [0, MAX_ACCEPTED_RUNS_CAPACITY + 1] {
            let mut c = ExecutorConfig::new("app");
            c.accepted_runs_capacity = bad;
            assert!(
                c.validate()
                    .unwrap_err()
                    .to_string()
                    .contains("accepted runs capacity"),
                "{bad}"
            );
        }
    }

    #[test]
    fn pull_mode_settings_are_checked() {
        let pull = || {
            let mut c = ExecutorConfig::new("app");
            c.pull = true;
            c.admin_addresses = vec!["http://admin:8080".into()];
            c.access_token = "secret-token".into();
            c
        };
        assert!(pull().validate().is_ok());
        // Scripts without a listening port need no loopback rule.
        let mut scripts = pull();
        scripts.scripts_enabled = true;
        assert!(scripts.validate().is_ok());
        type Change = fn(&mut ExecutorConfig);
        let cases: [(&str, Change); 5] = [
            ("at least one admin", |c| c.admin_addresses.clear()),
            ("advertised address", |c| {
                c.advertised_address = Some("http://me/".into())
            }),
            ("access token", |c| c.access_token.clear()),
            ("pull slots", |c| c.pull_slots = 0),
            ("pull slots", |c| c.pull_slots = MAX_PULL_SLOTS + 1),
        ];
        for (says, change) in cases {
            let mut c = pull();
            change(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn shutdown_modes_parse() {
        assert_eq!(
            "wait-running".parse::<ShutdownMode>().unwrap(),
            ShutdownMode::WaitRunning
        );
        assert!("later".parse::<ShutdownMode>().is_err());
    }
}
