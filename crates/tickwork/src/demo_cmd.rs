//! `tickwork demo`: one command that shows Tickwork working on a fresh machine: an admin on a
//! SQLite file, an executor with scripts enabled, and a few sample jobs (started once the
//! executor has registered), in one process; the console's login is printed with its URL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tickwork_admin::{GroupInput, GroupView, JobInput, Principal, Service};
use tickwork_core::job::JobSpec;
use tickwork_core::{GlueType, ScheduleType};
use tickwork_executor::ExecutorConfig;

use crate::admin_cmd::{self, AdminArgs};
use crate::executor_cmd;

/// The executor group of the demo's jobs.
const DEMO_APP: &str = "tickwork-demo";

/// Settings of `tickwork demo`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DemoArgs {
    /// Address of the admin.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "IP:PORT")]
    pub listen: SocketAddr,
    /// Address of the demo executor.
    #[arg(long, default_value = "127.0.0.1:9999", value_name = "IP:PORT")]
    pub executor_listen: SocketAddr,
    /// Folder of the demo's database, tokens and run logs.
    #[arg(long, default_value = "tickwork-demo", value_name = "DIR")]
    pub data_dir: PathBuf,
}

/// A sample job: its key, what it shows, and its definition.
fn sample_jobs(group_id: i64) -> Vec<(&'static str, JobInput)> {
    let job = |description: &str, kind: ScheduleType, conf: &str| JobInput {
        spec: JobSpec {
            description: description.to_owned(),
            owner: "demo".to_owned(),
            schedule_type: kind,
            schedule_conf: conf.to_owned(),
            ..JobSpec::blank(group_id)
        },
        start: true,
        ..JobInput::new(group_id)
    };
    let mut echo = job("echo every 5 seconds", ScheduleType::FixRate, "5s");
    echo.spec.handler = "echo".to_owned();
    echo.spec.params = "hello from Tickwork".to_owned();
    let mut shell = job(
        "shell script every 10 seconds",
        ScheduleType::Cron,
        "0/10 * * * * ?",
    );
    shell.spec.glue_type = GlueType::Shell;
    shell.spec.glue_source = "echo \"shell job, param=$1 shard=$2/$3\"\ndate -u\n".to_owned();
    shell.spec.params = "demo".to_owned();
    let mut python = job(
        "python script every minute",
        ScheduleType::Cron,
        "0 * * * * ?",
    );
    python.spec.glue_type = GlueType::Python;
    python.spec.glue_source =
        "import sys, platform\nprint('python', platform.python_version(), 'args', sys.argv[1:])\n"
            .to_owned();
    let mut sleepy = job(
        "sleeps 2 s, at most one at a time",
        ScheduleType::FixDelay,
        "3s",
    );
    sleepy.spec.handler = "sleep".to_owned();
    sleepy.spec.params = "2s".to_owned();
    vec![
        ("demo-echo", echo),
        ("demo-shell", shell),
        ("demo-python", python),
        ("demo-sleep", sleepy),
    ]
}

/// The demo's executor group, created unless a previous run of the demo already did.
async fn demo_group(admin: &Service) -> anyhow::Result<GroupView> {
    Ok(
        match admin
            .groups()
            .list()
            .await?
            .into_iter()
            .find(|g| g.app_name == DEMO_APP)
        {
            Some(g) => g,
            None => {
                admin
                    .groups()
                    .create(
                        &Principal::system(),
                        GroupInput {
                            app_name: DEMO_APP.to_owned(),
                            title: "Tickwork demo".to_owned(),
                            address_mode: None,
                            addresses: Vec::new(),
                        },
                    )
                    .await?
            }
        },
    )
}

/// How long the demo waits for its executor to register before it starts the sample jobs.
const REGISTER_WITHIN: Duration = Duration::from_secs(30);

/// Waits until the admin lists `address` as a live executor of `group`: sample jobs started
/// before that would fire with no executor to send them to. Whether it did.
async fn registered(admin: &Service, group: i64, address: &str) -> anyhow::Result<bool> {
    let bare = |a: &str| a.trim_end_matches('/').to_owned();
    let deadline = tokio::time::Instant::now() + REGISTER_WITHIN;
    loop {
        let live = admin.groups().instances(group).await?;
        if live
            .iter()
            .any(|i| i.alive && bare(&i.address) == bare(address))
        {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        // The executor registers at its start; the registry has no signal to wait on.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the demo's jobs unless a previous run of the demo already did.
async fn seed(admin: &Service, group: &GroupView) -> anyhow::Result<()> {
    for (key, mut input) in sample_jobs(group.id) {
        match admin.jobs().get_by_key(key).await {
            Ok(_) => continue,
            Err(tickwork_admin::Error::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        input.key = Some(key.to_owned());
        admin.jobs().create(&Principal::system(), input).await?;
    }
    Ok(())
}

/// Runs the demo until SIGTERM or SIGINT.
pub(crate) async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    crate::init_logging();
    let mut signals = crate::StopSignals::new()?;
    let config = admin_cmd::resolve(AdminArgs {
        listen: Some(args.listen.to_string()),
        data_dir: Some(args.data_dir.clone()),
        ..AdminArgs::default()
    })?;
    let token = config.access_token.clone();
    let api_token = config.api_token.clone();
    let admin = admin_cmd::start(config).await?;
    let admin_url = format!("http://{}", admin.local_addr);

    let mut exec = ExecutorConfig::new(DEMO_APP);
    exec.admin_addresses = vec![admin_url.clone()];
    exec.access_token = token;
    exec.listen = args.executor_listen;
    exec.log_folder = args.data_dir.join("executor-logs");
    exec.scripts_enabled = true;
    exec.validate()?;
    let executor = executor_cmd::start(executor_cmd::Settings {
        config: exec,
        http_allow: Vec::new(),
    })
    .await?;

    let service = &admin.running.admin.service;
    let group = demo_group(service).await?;
    if !registered(service, group.id, executor.address()).await? {
        tracing::warn!(
            "the demo executor did not register within {REGISTER_WITHIN:?}; starting the \
             sample jobs anyway"
        );
    }
    seed(service, &group).await?;
    // The login goes with the URL, after the start-up logs, where it is seen.
    let login = match admin.running.generated_admin_password.as_deref() {
        Some(password) => format!(
            "user admin, password {password}  (generated now and shown only this once; \
             change it in the console)"
        ),
        None => "user admin, with the password shown or set at the first start".to_owned(),
    };
    crate::announce(&format!(
        "Tickwork demo is running.\n\
         \x20 admin:     {admin_url}\n\
         \x20 console:   {}  ({login})\n\
         \x20 JSON API:  {admin_url}/openapi/v1  (Authorization: Bearer {api_token})\n\
         \x20 executor:  http://{}/  (app {DEMO_APP}, scripts enabled)\n\
         \x20 data:      {}\n\
         Try: curl -H 'Authorization: Bearer {api_token}' '{admin_url}/openapi/v1/runs?limit=5'\n\
         Press Ctrl-C to stop.",
        admin_cmd::console_url(admin.local_addr),
        executor.local_addr(),
        args.data_dir.display(),
    ))?;

    signals.wait().await;
    executor.shutdown();
    executor.wait().await?;
    admin.stop().await?;
    Ok(ExitCode::SUCCESS)
}
