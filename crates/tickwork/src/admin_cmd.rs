//! `tickwork admin`: the scheduling center. Flags beat `TICKWORK_*` variables, which beat the
//! `--config` TOML file, which beats the defaults; zero configuration runs on a SQLite file in
//! the data folder. Tokens that are not given are generated on first start and kept in the
//! data folder, so there is never a well-known default.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tickwork_admin::Config;
use tickwork_admin::config::ConfigFile;
use tokio_util::sync::CancellationToken;

use crate::InputError;

/// Settings of `tickwork admin`.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct AdminArgs {
    /// A TOML file with the admin's settings (see README).
    #[arg(long, env = "TICKWORK_ADMIN_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 0.0.0.0:8080].
    #[arg(long, env = "TICKWORK_LISTEN", value_name = "IP:PORT")]
    pub listen: Option<String>,
    /// Database URL: sqlite://FILE, postgres://…, mysql://… [default: SQLite in the data folder].
    #[arg(long, env = "TICKWORK_DB", value_name = "URL")]
    pub db: Option<String>,
    /// Access token executors must send; generated on first start when not given.
    #[arg(
        long,
        env = "TICKWORK_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Bearer token of the JSON API; generated on first start when not given.
    #[arg(
        long,
        env = "TICKWORK_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub api_token: Option<String>,
    /// Password of the first console account `admin`, used only when the database has no
    /// user yet; generated and printed once when not given. Never a default.
    #[arg(
        long,
        env = "TICKWORK_ADMIN_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub admin_password: Option<String>,
    /// Folder of the SQLite database and the generated tokens [default: tickwork-data].
    #[arg(long, env = "TICKWORK_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// This node's id in the run ledger [default: <hostname>-<random>].
    #[arg(long, env = "TICKWORK_NODE_ID", value_name = "ID")]
    pub node_id: Option<String>,
    /// Time zone of jobs created without one [default: UTC].
    #[arg(long, env = "TICKWORK_TIME_ZONE", value_name = "ZONE")]
    pub time_zone: Option<String>,
    /// Close a connection that has not sent a complete request head within this many
    /// milliseconds (`[http] header_read_timeout_ms`) [default: 30000].
    #[arg(long, env = "TICKWORK_HTTP_HEADER_READ_TIMEOUT_MS", value_name = "MS")]
    pub http_header_read_timeout_ms: Option<u64>,
    /// Connections served at once; more wait until one ends (`[http] max_connections`)
    /// [default: 512].
    #[arg(long, env = "TICKWORK_HTTP_MAX_CONNECTIONS", value_name = "N")]
    pub http_max_connections: Option<usize>,
}

fn input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// Reads the file, lays env and flags over it, resolves the data folder and the tokens.
pub(crate) fn resolve(args: AdminArgs) -> anyhow::Result<Config> {
    let mut file: ConfigFile = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the config file {}", path.display()))?;
            toml::from_str(&text)
                .map_err(|e| input(format!("config file {}: {e}", path.display())))?
        }
        None => ConfigFile::default(),
    };
    let overlay = |flag: Option<String>, slot: &mut Option<String>| {
        if flag.is_some() {
            *slot = flag;
        }
    };
    overlay(args.listen, &mut file.listen);
    overlay(args.db, &mut file.database_url);
    overlay(args.token, &mut file.access_token);
    overlay(args.api_token, &mut file.api_token);
    overlay(args.node_id, &mut file.node_id);
    overlay(args.time_zone, &mut file.default_time_zone);
    if args.data_dir.is_some() {
        file.data_dir = args.data_dir;
    }
    if args.admin_password.is_some() {
        file.auth.admin_password = args.admin_password;
    }
    if args.http_header_read_timeout_ms.is_some() {
        file.http.header_read_timeout_ms = args.http_header_read_timeout_ms;
    }
    if args.http_max_connections.is_some() {
        file.http.max_connections = args.http_max_connections;
    }
    let data_dir = file
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("tickwork-data"));
    create_private_dir(&data_dir)
        .with_context(|| format!("cannot create the data folder {}", data_dir.display()))?;
    if file.database_url.is_none() {
        let db = data_dir.join("tickwork.db");
        file.database_url = Some(format!("sqlite://{}?mode=rwc", db.display()));
    }
    match file.access_token.as_deref() {
        None => file.access_token = Some(stored_token(&data_dir, "access_token")?),
        Some("") => tracing::warn!(
            "the executor access token is empty: any client can register executors and post results"
        ),
        Some(t) if t.trim() == tickwork_executor::config::WELL_KNOWN_TOKEN => {
            return Err(input(
                "the access token \"default_token\" is XXL-JOB's well-known default: set a secret token",
            ));
        }
        Some(_) => {}
    }
    if file.api_token.as_deref().is_none_or(str::is_empty) {
        file.api_token = Some(stored_token(&data_dir, "api_token")?);
    }
    file.into_config().map_err(|e| input(e.to_string()))
}

/// The token kept in `<data_dir>/<name>`, generated (and kept, readable by the owner only)
/// when the file does not exist yet.
fn stored_token(data_dir: &Path, name: &str) -> anyhow::Result<String> {
    let path = data_dir.join(name);
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_owned();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let token = tickwork_admin::auth::generate_token()?;
    write_private(&path, &token)
        .with_context(|| format!("cannot write the generated token to {}", path.display()))?;
    tracing::info!(file = %path.display(), "generated a new {name}");
    Ok(token)
}

/// Creates the data folder readable by the owner only (0700): it holds the tokens and the
/// SQLite database with the alarm channels' secrets. A folder that exists is left as it is.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The file of a `sqlite://FILE?mode=rwc` URL (the admin may create it), if it does not
/// exist yet.
fn sqlite_file_to_create(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let creates = query.split('&').any(|pair| pair == "mode=rwc");
    // A percent-encoded name is decoded by the driver; leave such files to it.
    let plain = !path.is_empty() && path != ":memory:" && !path.contains('%');
    (creates && plain && !Path::new(path).exists()).then(|| PathBuf::from(path))
}

/// Creates an empty SQLite database file readable by the owner only (0600): SQLite would
/// create it with 0644, and gives its -wal and -shm files the database file's mode.
fn create_private_file(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    // A failure (missing folder, no permission) is left to the driver, which names it.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// A started admin: the pipeline, its HTTP server and its database.
pub(crate) struct StartedAdmin {
    pub running: tickwork_admin::Running,
    pub local_addr: std::net::SocketAddr,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    stop: CancellationToken,
    store: std::sync::Arc<dyn tickwork_store::Store>,
}

impl StartedAdmin {
    /// Stops the HTTP server, then the pipeline, then closes the database.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        let began = std::time::Instant::now();
        self.stop.cancel();
        let served = self.server.await;
        tracing::info!(
            elapsed_ms = began.elapsed().as_millis() as u64,
            "stopping: HTTP requests in flight answered"
        );
        self.running.shutdown().await;
        self.store.close().await;
        served
            .context("the HTTP server task failed")?
            .context("the HTTP server failed")
    }
}

/// Opens the database, starts the pipeline and serves HTTP on `config.listen`. A generated
/// first admin password is in `running.generated_admin_password`, for the caller to show.
pub(crate) async fn start(config: Config) -> anyhow::Result<StartedAdmin> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    if let Some(path) = sqlite_file_to_create(&config.database_url) {
        create_private_file(&path);
    }
    // The database ends a transaction of this admin that goes silent (a paused process, a
    // partition) in time for the other admins to take over its jobs.
    let options = tickwork_store::StoreOptions {
        session_bounds: config.cluster.session_bounds(),
        ..Default::default()
    };
    let store = tickwork_store::connect(&config.database_url, &options)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open the database: {e}"))?;
    tracing::info!(backend = store.backend(), node = %config.node_id, "database ready");
    let running = tickwork_admin::start(config, store.clone()).await?;
    let stop = CancellationToken::new();
    let server = tokio::spawn(tickwork_admin::http::serve(
        running.admin.clone(),
        listener,
        stop.clone(),
    ));
    Ok(StartedAdmin {
        running,
        local_addr,
        server,
        stop,
        store,
    })
}

/// The console's URL for a browser on this machine.
pub(crate) fn console_url(addr: std::net::SocketAddr) -> String {
    let host = if addr.ip().is_unspecified() {
        std::net::SocketAddr::new([127, 0, 0, 1].into(), addr.port())
    } else {
        addr
    };
    format!("http://{host}/")
}

/// Tells the operator where the console is, and, on the start that created the first admin
/// account with a generated password, that password: on stderr, once, never logged.
fn announce_console(addr: std::net::SocketAddr, generated: Option<&str>) -> std::io::Result<()> {
    let url = console_url(addr);
    let mut err = std::io::stderr().lock();
    match generated {
        Some(password) => {
            let rule = "=".repeat(72);
            let user = tickwork_admin::auth::FIRST_ADMIN;
            writeln!(err, "{rule}")?;
            writeln!(err, " First start: created the console account {user:?}.")?;
            writeln!(err, " Console:  {url}")?;
            writeln!(err, " Login:    {user}")?;
            writeln!(err, " Password: {password}")?;
            writeln!(
                err,
                " This password is shown only this once; change it after logging in."
            )?;
            writeln!(err, "{rule}")?;
        }
        None => writeln!(err, "console: {url}")?,
    }
    err.flush()
}

/// Runs the admin until SIGTERM or SIGINT.
pub(crate) async fn run(args: AdminArgs) -> anyhow::Result<ExitCode> {
    crate::init_logging();
    let config = resolve(args)?;
    let mut signals = crate::StopSignals::new()?;
    let admin = start(config).await?;
    announce_console(
        admin.local_addr,
        admin.running.generated_admin_password.as_deref(),
    )?;
    crate::announce(&format!("admin listening on {}", admin.local_addr))?;
    signals.wait().await;
    admin.stop().await?;
    Ok(ExitCode::SUCCESS)
}
