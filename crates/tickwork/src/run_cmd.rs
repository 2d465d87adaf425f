//! `tickwork run …`: list, show, read the log of (optionally following it) and kill runs.

use std::time::Duration;

use clap::Subcommand;
use tickwork_protocol::api::RunQuery;

use crate::remote::{Remote, cell, instant};

#[derive(Debug, Subcommand)]
pub(crate) enum RunCommand {
    /// List runs, newest first.
    List {
        /// Only runs of this job (its key, or its id).
        #[arg(long)]
        job: Option<String>,
        /// Only runs in this state (planned, dispatched, succeeded, failed, timed_out, killed,
        /// lost, misfired, skipped).
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// Show one run.
    Show { id: i64 },
    /// Print a run's log, read from its executor.
    Log {
        id: i64,
        /// Keep printing new lines until the run has ended.
        #[arg(long, short)]
        follow: bool,
    },
    /// Kill a dispatched run on its executor.
    Kill { id: i64 },
}

/// Runs one `tickwork run` command.
pub(crate) async fn run(remote: &Remote, command: RunCommand) -> anyhow::Result<()> {
    let client = remote.client()?;
    match command {
        RunCommand::List { job, state, limit } => {
            let job_id = match &job {
                Some(name) => Some(crate::job_cmd::job_id(&client, name).await?),
                None => None,
            };
            let page = client
                .runs_list(&RunQuery {
                    job_id,
                    state,
                    limit: Some(limit),
                    ..RunQuery::default()
                })
                .await?;
            println!(
                "{:>8} {:>6}  {:<9} {:<10} {:<29} {:<26} RESULT",
                "ID", "JOB", "TRIGGER", "STATE", "SCHEDULED", "EXECUTOR"
            );
            for r in &page.items {
                let result = r.handle_msg.as_deref().or(r.trigger_msg.as_deref());
                println!(
                    "{:>8} {:>6}  {:<9} {:<10} {:<29} {:<26} {}",
                    r.id,
                    r.job_id,
                    r.trigger_type.as_str(),
                    r.state.as_str(),
                    instant(Some(r.scheduled_at)),
                    cell(r.executor_address.as_deref().unwrap_or("-"), 26),
                    cell(result.unwrap_or(""), 50)
                );
            }
            println!("({} of {} runs)", page.items.len(), page.total);
        }
        RunCommand::Show { id } => {
            let r = client.run_get(id).await?;
            println!(
                "run {} of job {} ({})",
                r.id,
                r.job_id,
                r.trigger_type.as_str()
            );
            println!("  state:      {}", r.state.as_str());
            println!("  scheduled:  {}", instant(Some(r.scheduled_at)));
            println!("  dispatched: {}", instant(r.dispatched_at));
            println!("  finished:   {}", instant(r.finished_at));
            println!(
                "  executor:   {}",
                r.executor_address.as_deref().unwrap_or("-")
            );
            println!("  attempt:    {}", r.attempt);
            if let Some(p) = r.parent_run_id {
                println!("  parent run: {p}");
            }
            if let (Some(i), Some(n)) = (r.shard_index, r.shard_total) {
                println!("  shard:      {i}/{n}");
            }
            println!("  params:     {}", r.params);
            println!(
                "  trigger:    {} {}",
                r.trigger_code,
                r.trigger_msg.as_deref().unwrap_or("")
            );
            println!(
                "  result:     {} {}",
                r.handle_code,
                r.handle_msg.as_deref().unwrap_or("")
            );
        }
        RunCommand::Log { id, follow } => {
            let mut from = 1;
            // Executors answer a long log a page at a time: ask until a page comes back empty
            // (and, when following, until the run has ended).
            loop {
                let log = client.run_log(id, from).await?;
                let got = log.to_line >= log.from_line;
                if got {
                    print!("{}", log.content);
                    from = log.to_line + 1;
                }
                if log.end || (!got && !follow) {
                    break;
                }
                if !got {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        RunCommand::Kill { id } => {
            let r = client.run_kill(id).await?;
            println!("run {} is {}", r.id, r.state.as_str());
        }
    }
    Ok(())
}
