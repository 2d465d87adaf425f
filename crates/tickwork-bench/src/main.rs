//! `tickwork-bench`: Tickwork's benchmarks. Each scenario prints its figures, one line per
//! measurement, and ends with a `RESULT scenario=<name> ...` line; nothing is asserted.

mod executor_run;
mod next_fire;

use clap::{Parser, ValueEnum};

/// Runs one benchmark scenario and prints its figures.
#[derive(Debug, Parser)]
#[command(name = "tickwork-bench", version, about)]
struct Cli {
    /// The scenario to run.
    #[arg(long, value_enum)]
    scenario: Scenario,
    #[command(flatten)]
    executor_run: executor_run::ExecutorRunArgs,
}

/// The scenarios, one module each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Next-fire computations per second on one core, for typical schedules.
    NextFire,
    /// `/run` requests accepted and runs completed per second by one executor with a no-op
    /// handler, and its RSS with 1,000 idle job workers.
    ExecutorRun,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.scenario {
        Scenario::NextFire => next_fire::run(),
        Scenario::ExecutorRun => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(executor_run::run(cli.executor_run)),
    }
}
