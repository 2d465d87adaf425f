//! The `tickwork` binary: one command line for Tickwork's admin, executor and tools. Each group
//! of subcommands lives in its own module; this file only parses the command line, dispatches
//! and turns errors into exit codes.

mod cron_cmd;

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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cron(command) => cron_cmd::run(command).map(|()| ExitCode::SUCCESS),
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
