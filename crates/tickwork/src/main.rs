//! The `tickwork` binary: one command line for Tickwork's admin, executor and tools. Each group
//! of subcommands lives in its own module; this file only parses the command line, dispatches
//! and turns errors into exit codes.

mod admin_cmd;
mod alloc;
mod cron_cmd;
mod demo_cmd;
mod executor_cmd;
mod job_cmd;
mod mcp;
mod remote;
mod run_cmd;
mod schedule_cmd;
mod submit_cmd;
mod workflow_cmd;

use std::fmt;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tickwork: a distributed job scheduler.
#[derive(Debug, Parser)]
#[command(name = "tickwork", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Cron expressions and other schedules: preview their fire times.
    #[command(subcommand)]
    Cron(cron_cmd::CronCommand),
    /// Run the admin (scheduling center): scheduler, executor API, JSON API.
    Admin(admin_cmd::AdminArgs),
    /// Run a demo: an admin on SQLite, an executor with scripts enabled and sample jobs.
    Demo(demo_cmd::DemoArgs),
    /// Manage jobs on an admin (named by key or id): list, show, add, edit, start, stop,
    /// trigger, delete, export, import.
    Job {
        #[command(flatten)]
        remote: remote::Remote,
        #[command(subcommand)]
        command: job_cmd::JobCommand,
    },
    /// Inspect runs on an admin: list, show, log, kill.
    Run {
        #[command(flatten)]
        remote: remote::Remote,
        #[command(subcommand)]
        command: run_cmd::RunCommand,
    },
    /// The schedule ahead on an admin: a heatmap of fires per minute with the peaks.
    Schedule {
        #[command(flatten)]
        remote: remote::Remote,
        #[command(subcommand)]
        command: schedule_cmd::ScheduleCommand,
    },
    /// Submit under a key of your own in an executor group: once now or at an instant, a
    /// repeat (with a count or until cancelled) or a cron. Idempotent under the key.
    Submit {
        #[command(flatten)]
        remote: remote::Remote,
        #[command(flatten)]
        args: submit_cmd::SubmitArgs,
    },
    /// Submissions by key: show, cancel.
    Submission {
        #[command(flatten)]
        remote: remote::Remote,
        #[command(subcommand)]
        command: submit_cmd::SubmissionCommand,
    },
    /// Workflows (DAGs of jobs) on an admin: list, show, apply a file, run, instances, stop,
    /// resume, mark a node succeeded, rerun a node, export.
    Workflow {
        #[command(flatten)]
        remote: remote::Remote,
        #[command(subcommand)]
        command: workflow_cmd::WorkflowCommand,
    },
    /// Serve the Model Context Protocol on stdin and stdout: tools over an admin's
    /// jobs, runs, logs and schedule, through its REST API with the token's role.
    Mcp {
        #[command(flatten)]
        remote: remote::Remote,
    },
    /// Run an executor: script jobs (when enabled) and built-in handlers.
    Executor(executor_cmd::ExecutorArgs),
}

/// Something wrong in what the user typed (an invalid expression, an unknown time zone). It
/// exits with status 2, as clap's own usage errors do; every other failure exits with 1.
#[derive(Debug)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`); coloured only when stderr is a
/// terminal, so that files and log collectors get plain text.
pub fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Fails only when a subscriber is already installed, which is then used.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// SIGTERM and SIGINT, listened for from creation on, so that a signal during start-up drains
/// instead of killing.
pub struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn new() -> anyhow::Result<Self> {
        use anyhow::Context;
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            terminate: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        })
    }

    /// Waits for the next signal and logs it.
    pub async fn wait(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => tracing::info!("SIGTERM received"),
            _ = self.interrupt.recv() => tracing::info!("SIGINT received"),
        }
    }
}

/// Prints `line` on stdout at once: scripts and tests wait for such lines (port 0 picks the
/// port).
pub fn announce(line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

/// Runs an async command on a multi-threaded tokio runtime.
fn async_main(command: impl Future<Output = anyhow::Result<ExitCode>>) -> anyhow::Result<ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(command)
}

fn main() -> ExitCode {
    alloc::return_freed_memory_at_once();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cron(command) => cron_cmd::run(command).map(|()| ExitCode::SUCCESS),
        Command::Admin(args) => async_main(admin_cmd::run(args)),
        Command::Demo(args) => async_main(demo_cmd::run(args)),
        Command::Job { remote, command } => async_main(async move {
            job_cmd::run(&remote, command)
                .await
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Run { remote, command } => async_main(async move {
            run_cmd::run(&remote, command)
                .await
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Schedule { remote, command } => async_main(async move {
            schedule_cmd::run(&remote, command)
                .await
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Submit { remote, args } => async_main(async move {
            submit_cmd::submit(&remote, args)
                .await
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Submission { remote, command } => async_main(async move {
            submit_cmd::run(&remote, command)
                .await
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Workflow { remote, command } => async_main(async move {
            workflow_cmd::run(&remote, command)
                .await
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Mcp { remote } => {
            async_main(async move { mcp::run(&remote).await.map(|()| ExitCode::SUCCESS) })
        }
        Command::Executor(args) => async_main(executor_cmd::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
