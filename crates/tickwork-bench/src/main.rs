//! `tickwork-bench`: Tickwork's benchmarks. Each scenario prints its figures, one line per
//! measurement, and ends with a `RESULT scenario=<name> ...` line; nothing is asserted.

mod admin_load;
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
    /// Knobs of the admin load scenarios (one-per-second, fire-rate, overload, create-jobs).
    #[command(flatten)]
    load: admin_load::LoadArgs,
}

/// The scenarios, one module each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Next-fire computations per second on one core, for typical schedules.
    NextFire,
    /// `/run` requests accepted and runs completed per second by one executor with a no-op
    /// handler, and its RSS with 1,000 idle job workers.
    ExecutorRun,
    /// One job firing every second through a real admin and executor: lateness at rest.
    OnePerSecond,
    /// `--jobs` jobs all due every second through a real admin and executor: throughput.
    FireRate,
    /// More due than one admin can send (`--jobs` default 40,000): fires not delivered must be
    /// recorded misfired, none doubled, RSS bounded, `/healthz` answering throughout.
    Overload,
    /// Job creation through the API: `--jobs` one request each, then 10,000 in one bulk
    /// request.
    CreateJobs,
    /// The console's jobs page (and the API's job list) with 500 jobs and 50,000 runs: the
    /// answer time per sort and page size.
    JobsPage,
    /// Workflows of 10 nodes firing every 10 s (`--jobs` of them, default 100), with the
    /// fake executor: node lateness after its last parent, nothing missed or doubled.
    Workflow,
    /// `--jobs` `/run` calls due on the same instant every second (default 10,000), sent to
    /// the fake executor with no scheduler: the lateness floor of this machine, against which
    /// fire-rate's is read.
    SendFloor,
}

fn main() -> anyhow::Result<()> {
    // The admin load scenarios re-invoke this binary as their executor process.
    if admin_load::child::is_child() {
        return admin_load::child::main();
    }
    let cli = Cli::parse();
    match cli.scenario {
        Scenario::NextFire => next_fire::run(),
        Scenario::ExecutorRun => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(executor_run::run(cli.executor_run)),
        Scenario::OnePerSecond => admin_load::run(admin_load::Load::OnePerSecond, cli.load),
        Scenario::FireRate => admin_load::run(admin_load::Load::FireRate, cli.load),
        Scenario::Overload => admin_load::run(admin_load::Load::Overload, cli.load),
        Scenario::CreateJobs => admin_load::run(admin_load::Load::CreateJobs, cli.load),
        Scenario::SendFloor => admin_load::send_floor(cli.load),
        Scenario::JobsPage => admin_load::run(admin_load::Load::JobsPage, cli.load),
        Scenario::Workflow => admin_load::run(admin_load::Load::Workflow, cli.load),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every scenario's flags share one command line: clap checks they do not collide.
    #[test]
    fn command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
