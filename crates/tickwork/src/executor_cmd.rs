//! `tickwork executor`: a ready-made executor process that runs script jobs (when enabled) and
//! built-in handlers (`httpJobHandler` with a host allow-list, `echo`, `sleep`), configured by
//! flags, `TICKWORK_*` environment variables or a TOML file (in that order of precedence), and
//! drained gracefully on SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use tickwork_executor::builtin::{
    ECHO_HANDLER, EchoHandler, HTTP_HANDLER, HttpJobHandler, SLEEP_HANDLER, SleepHandler,
};
use tickwork_executor::config::parse_duration;
use tickwork_executor::{ExecutorBuilder, ExecutorConfig, RunningExecutor, ShutdownMode};

use crate::InputError;

/// Settings of `tickwork executor`. Each flag can also come from its environment variable or
/// from the `--config` file; a flag beats the variable, which beats the file.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ExecutorArgs {
    /// A TOML file with any of the settings below (keys: app, admin, token, listen, address,
    /// logs, enable_scripts, shutdown, shutdown_timeout, http_allow, log_retention_days,
    /// header_read_timeout, max_connections, pull, pull_slots).
    #[arg(long, env = "TICKWORK_EXECUTOR_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The app name this executor registers under (the executor group's AppName).
    #[arg(long, env = "TICKWORK_APP", value_name = "NAME")]
    pub app: Option<String>,
    /// Admin base URLs, comma-separated, with or without the /xxl-job-admin context path.
    #[arg(long, env = "TICKWORK_ADMIN", value_name = "URL[,URL]")]
    pub admin: Option<String>,
    /// Access token shared with the admin.
    #[arg(
        long,
        env = "TICKWORK_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Address to listen on [default: 0.0.0.0:9999].
    #[arg(long, env = "TICKWORK_EXECUTOR_LISTEN", value_name = "IP:PORT")]
    pub listen: Option<SocketAddr>,
    /// Address to register with the admin [default: http://<ip>:<port>/].
    #[arg(long, env = "TICKWORK_EXECUTOR_ADDRESS", value_name = "URL")]
    pub address: Option<String>,
    /// Folder of run logs, cached scripts and the callback spool
    /// [default: tickwork-data/executor-logs].
    #[arg(long, env = "TICKWORK_EXECUTOR_LOGS", value_name = "DIR")]
    pub logs: Option<PathBuf>,
    /// Run script jobs (shell, python, node, php, powershell).
    #[arg(long, env = "TICKWORK_ENABLE_SCRIPTS", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true")]
    pub enable_scripts: Option<bool>,
    /// On SIGTERM: finish running and queued runs (wait-all), or only running ones
    /// (wait-running) [default: wait-all].
    #[arg(long, env = "TICKWORK_SHUTDOWN", value_name = "MODE", value_parser = parse_mode)]
    pub shutdown: Option<ShutdownMode>,
    /// How long the shutdown waits before killing what still runs, e.g. 30s [default: 30s].
    #[arg(long, env = "TICKWORK_SHUTDOWN_TIMEOUT", value_name = "DURATION")]
    pub shutdown_timeout: Option<String>,
    /// Hosts that httpJobHandler may call, comma-separated (host, or host:port).
    #[arg(
        long,
        env = "TICKWORK_HTTP_ALLOW",
        value_name = "HOST[,HOST]",
        value_delimiter = ','
    )]
    pub http_allow: Option<Vec<String>>,
    /// Days run logs are kept; below 3 keeps them forever [default: 30].
    #[arg(long, env = "TICKWORK_LOG_RETENTION_DAYS", value_name = "DAYS")]
    pub log_retention_days: Option<u32>,
    /// A connection that has not sent a complete request head within this time is closed,
    /// e.g. 30s [default: 30s].
    #[arg(
        long,
        env = "TICKWORK_EXECUTOR_HEADER_READ_TIMEOUT",
        value_name = "DURATION"
    )]
    pub header_read_timeout: Option<String>,
    /// Connections served at once; more wait until one ends [default: 512].
    #[arg(long, env = "TICKWORK_EXECUTOR_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,
    /// Pull mode: listen on no port; dial an admin of --admin and take work over that
    /// connection (for executors the admin cannot reach: behind NAT, in pods, on laptops).
    #[arg(long, env = "TICKWORK_PULL", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true")]
    pub pull: Option<bool>,
    /// Pull mode: runs taken at once (queued or running); the admin sends no more [default: 64].
    #[arg(long, env = "TICKWORK_PULL_SLOTS", value_name = "N")]
    pub pull_slots: Option<u32>,
}

fn parse_mode(s: &str) -> Result<ShutdownMode, String> {
    s.parse()
        .map_err(|e: tickwork_executor::Error| e.to_string())
}

/// The `--config` file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    app: Option<String>,
    admin: Option<AdminList>,
    token: Option<String>,
    listen: Option<String>,
    address: Option<String>,
    logs: Option<PathBuf>,
    enable_scripts: Option<bool>,
    shutdown: Option<String>,
    shutdown_timeout: Option<String>,
    http_allow: Option<Vec<String>>,
    log_retention_days: Option<u32>,
    header_read_timeout: Option<String>,
    max_connections: Option<usize>,
    pull: Option<bool>,
    pull_slots: Option<u32>,
}

/// `admin = "http://a,http://b"` or `admin = ["http://a", "http://b"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AdminList {
    One(String),
    Many(Vec<String>),
}

impl AdminList {
    fn into_vec(self) -> Vec<String> {
        match self {
            AdminList::One(list) => ExecutorConfig::parse_admin_list(&list),
            AdminList::Many(list) => list
                .iter()
                .flat_map(|s| ExecutorConfig::parse_admin_list(s))
                .collect(),
        }
    }
}

/// The executor's configuration and the built-in handlers' settings.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) config: ExecutorConfig,
    pub(crate) http_allow: Vec<String>,
}

fn input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

fn read_file(path: &PathBuf) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    toml::from_str(&text).map_err(|e| input(format!("config file {}: {e}", path.display())))
}

/// Merges flags/environment (already merged by clap) over the file over the defaults, and
/// validates the result.
fn resolve(args: ExecutorArgs, file: FileConfig) -> anyhow::Result<Settings> {
    let app = args.app.or(file.app).ok_or_else(|| {
        input("the app name is required: --app, TICKWORK_APP or `app` in the config file")
    })?;
    let mut config = ExecutorConfig::new(app);
    config.pull = args.pull.or(file.pull).unwrap_or(false);
    if config.pull && (args.listen.is_some() || file.listen.is_some()) {
        return Err(input(
            "pull mode listens on no port: leave --listen (and `listen`) out",
        ));
    }
    if let Some(slots) = args.pull_slots.or(file.pull_slots) {
        config.pull_slots = slots;
    }
    if let Some(list) = args.admin {
        config.admin_addresses = ExecutorConfig::parse_admin_list(&list);
    } else if let Some(list) = file.admin {
        config.admin_addresses = list.into_vec();
    }
    if let Some(token) = args.token.or(file.token) {
        config.access_token = token;
    }
    if let Some(listen) = args.listen {
        config.listen = listen;
    } else if let Some(text) = file.listen {
        config.listen = text
            .trim()
            .parse()
            .map_err(|_| input(format!("listen {text:?} is not an IP:PORT address")))?;
    }
    if let Some(address) = args.address.or(file.address) {
        config.advertised_address = Some(address);
    }
    if let Some(logs) = args.logs.or(file.logs) {
        config.log_folder = logs;
    }
    if let Some(enabled) = args.enable_scripts.or(file.enable_scripts) {
        config.scripts_enabled = enabled;
    }
    if let Some(mode) = args.shutdown {
        config.shutdown_mode = mode;
    } else if let Some(text) = file.shutdown {
        config.shutdown_mode = text
            .parse()
            .map_err(|e: tickwork_executor::Error| input(e.to_string()))?;
    }
    if let Some(text) = args.shutdown_timeout.or(file.shutdown_timeout) {
        config.shutdown_timeout =
            parse_duration(&text).map_err(|e| input(format!("shutdown timeout: {e}")))?;
    }
    if let Some(days) = args.log_retention_days.or(file.log_retention_days) {
        config.log_retention_days = days;
    }
    if let Some(text) = args.header_read_timeout.or(file.header_read_timeout) {
        config.header_read_timeout =
            parse_duration(&text).map_err(|e| input(format!("header read timeout: {e}")))?;
    }
    if let Some(n) = args.max_connections.or(file.max_connections) {
        config.max_connections = n;
    }
    config.validate().map_err(|e| input(e.to_string()))?;
    let http_allow = args.http_allow.or(file.http_allow).unwrap_or_default();
    Ok(Settings { config, http_allow })
}

/// Starts an executor with the built-in handlers.
pub(crate) async fn start(settings: Settings) -> anyhow::Result<RunningExecutor> {
    if settings.http_allow.is_empty() {
        tracing::info!(
            "{HTTP_HANDLER} has an empty allow-list: every call is refused (--http-allow)"
        );
    }
    let http = HttpJobHandler::new(&settings.http_allow)?;
    Ok(ExecutorBuilder::from_config(settings.config)
        .handler(HTTP_HANDLER, http)
        .handler(ECHO_HANDLER, EchoHandler)
        .handler(SLEEP_HANDLER, SleepHandler)
        .start()
        .await?)
}

/// Runs the executor until SIGTERM or SIGINT, then drains it. Exits 0 on a clean drain, 1 when
/// runs had to be killed at the shutdown deadline.
pub(crate) async fn run(args: ExecutorArgs) -> anyhow::Result<ExitCode> {
    crate::init_logging();
    let file = match &args.config {
        Some(path) => read_file(path)?,
        None => FileConfig::default(),
    };
    let settings = resolve(args, file)?;
    let mut signals = crate::StopSignals::new()?;
    let executor = start(settings).await?;
    if executor
        .address()
        .starts_with(tickwork_protocol::pull::PULL_SCHEME)
    {
        crate::announce(&format!("executor pulling as {}", executor.address()))?;
    } else {
        crate::announce(&format!("executor listening on {}", executor.local_addr()))?;
    }
    signals.wait().await;
    executor.shutdown();
    let report = executor.wait().await?;
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ExecutorArgs,
    }

    fn args(list: &[&str]) -> ExecutorArgs {
        let mut argv = vec!["executor"];
        argv.extend_from_slice(list);
        Cli::try_parse_from(argv).unwrap().args
    }

    fn file(text: &str) -> FileConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn flags_beat_the_file_which_beats_the_defaults() {
        let f = file(
            r#"
            app = "from-file"
            admin = ["http://a:8080/xxl-job-admin", "http://b:8080"]
            token = "file-token"
            listen = "127.0.0.1:7000"
            enable_scripts = true
            shutdown = "wait-running"
            shutdown_timeout = "45s"
            http_allow = ["example.com"]
            "#,
        );
        let s = resolve(
            args(&[
                "--app",
                "from-flag",
                "--listen",
                "127.0.0.1:7001",
                "--enable-scripts=false",
            ]),
            f,
        )
        .unwrap();
        assert_eq!(s.config.app_name, "from-flag");
        assert_eq!(s.config.listen, "127.0.0.1:7001".parse().unwrap());
        assert!(!s.config.scripts_enabled);
        assert_eq!(s.config.access_token, "file-token");
        assert_eq!(
            s.config.admin_addresses,
            vec!["http://a:8080/xxl-job-admin", "http://b:8080"]
        );
        assert_eq!(s.config.shutdown_mode, ShutdownMode::WaitRunning);
        assert_eq!(
            s.config.shutdown_timeout,
            std::time::Duration::from_secs(45)
        );
        assert_eq!(s.http_allow, vec!["example.com"]);
        // Defaults where nobody said anything.
        assert_eq!(s.config.log_retention_days, 30);
        assert_eq!(s.config.advertised_address, None);
    }

    #[test]
    fn pull_mode_from_a_flag_or_the_file_and_never_with_a_port() {
        let base = ["--app", "a", "--token", "t", "--admin", "http://admin:8080"];
        let s = resolve(
            args(&[&base[..], &["--pull", "--pull-slots", "3"]].concat()),
            FileConfig::default(),
        )
        .unwrap();
        assert!(s.config.pull);
        assert_eq!(s.config.pull_slots, 3);
        let s = resolve(args(&base), file("pull = true\npull_slots = 9")).unwrap();
        assert!(s.config.pull);
        assert_eq!(s.config.pull_slots, 9);
        for (flags, text) in [
            (&["--pull", "--listen", "127.0.0.1:9"][..], ""),
            (&["--pull"][..], "listen = \"127.0.0.1:9\""),
        ] {
            let e = resolve(args(&[&base[..], flags].concat()), file(text)).unwrap_err();
            assert!(e.to_string().contains("listens on no port"), "{e}");
        }
        let e = resolve(
            args(&[&base[..], &["--pull", "--pull-slots", "0"]].concat()),
            FileConfig::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("pull slots"), "{e}");
    }

    #[test]
    fn defaults_apply_without_file() {
        let s = resolve(
            args(&[
                "--app",
                "a",
                "--token",
                "t",
                "--enable-scripts",
                "--http-allow",
                "x.org,y.org:8080",
            ]),
            FileConfig::default(),
        )
        .unwrap();
        assert_eq!(s.config.listen, "0.0.0.0:9999".parse().unwrap());
        assert_eq!(s.config.shutdown_mode, ShutdownMode::WaitAll);
        assert!(s.config.scripts_enabled);
        assert_eq!(s.http_allow, vec!["x.org", "y.org:8080"]);
    }

    #[test]
    fn bad_input_is_an_input_error() {
        let err = toml::from_str::<FileConfig>("app = \"a\"\nlisten_port = 1\n").unwrap_err();
        assert!(err.to_string().contains("listen_port"), "{err}");
        let err = resolve(args(&[]), FileConfig::default()).unwrap_err();
        assert!(err.downcast_ref::<InputError>().is_some());
        assert!(err.to_string().contains("app name is required"));
        let err = resolve(
            args(&["--app", "a", "--shutdown-timeout", "soon"]),
            FileConfig::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("shutdown timeout"), "{err}");
        assert!(Cli::try_parse_from(["executor", "--shutdown", "later"]).is_err());
    }
}
