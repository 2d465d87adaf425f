//! `tickwork-bench`: Tickwork's benchmarks. Each scenario prints its figures, one line per
//! measurement, and ends with a `RESULT scenario=<name> ...` line; nothing is asserted.

mod next_fire;

use clap::{Parser, ValueEnum};

/// Runs one benchmark scenario and prints its figures.
#[derive(Debug, Parser)]
#[command(name = "tickwork-bench", version, about)]
struct Cli {
    /// The scenario to run.
    #[arg(long, value_enum)]
    scenario: Scenario,
}

/// The scenarios, one module each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Next-fire computations per second on one core, for typical schedules.
    NextFire,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.scenario {
        Scenario::NextFire => next_fire::run(),
    }
}
