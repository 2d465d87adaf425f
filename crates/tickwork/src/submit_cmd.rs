//! `tickwork submit` and `tickwork submission show|completions|cancel`: submissions from code, by the
//! client's own key in an executor group.

use clap::{ArgGroup, Args, Subcommand};
use tickwork_core::RouteStrategy;
use tickwork_core::schedule::parse_interval_ms;
use tickwork_protocol::submissions::{OnConflict, SubmissionInput, SubmissionView, When};

use crate::InputError;
use crate::remote::{Remote, cell, instant};

/// What `tickwork submit` takes.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("when").required(true).args(["now", "at", "every", "cron"])))]
pub(crate) struct SubmitArgs {
    /// The executor group's app name.
    app: String,
    /// Your key for it, unique in the group: submitting it again is idempotent.
    key: String,
    /// The executor handler that runs it.
    #[arg(long)]
    handler: String,
    #[arg(long, default_value = "")]
    params: String,
    /// Fire once, now.
    #[arg(long)]
    now: bool,
    /// Fire once at this instant (RFC 3339, or a date-time in --time-zone).
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// Fire now and then every interval (500ms, 30s, 5m, ...).
    #[arg(long, value_name = "INTERVAL")]
    every: Option<String>,
    /// With --every: fire this many times in all (default: until cancelled).
    #[arg(long, requires = "every")]
    count: Option<i64>,
    /// Fire on a Quartz cron expression, in --time-zone.
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// IANA time zone of --cron and of a civil --at (default: the admin's).
    #[arg(long)]
    time_zone: Option<String>,
    /// One run at a time, the next counted from the end of the last (--every only).
    #[arg(long)]
    rely_on_prev_cycle: bool,
    /// When the key is taken, write this over it (default: keep what is there).
    #[arg(long)]
    replace: bool,
    #[arg(long, default_value_t = 0)]
    priority: i32,
    #[arg(long, default_value_t = 0)]
    retries: i32,
    #[arg(long, default_value_t = 0)]
    retry_backoff_ms: i64,
    /// Run timeout in seconds (0: none).
    #[arg(long, default_value_t = 0)]
    timeout_s: i32,
    /// Route strategy (FIRST, ROUND, SHARDING_BROADCAST, ...).
    #[arg(long)]
    route: Option<String>,
    /// A webhook alarm channel each completion is posted to.
    #[arg(long, value_name = "CHANNEL")]
    feedback_channel: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SubmissionCommand {
    /// Show a submission.
    Show { app: String, key: String },
    /// How the runs of the group's submissions ended, oldest first, until acknowledged.
    Completions {
        app: String,
        /// Only completions after this id.
        #[arg(long)]
        after: Option<i64>,
        #[arg(long, default_value_t = 100)]
        limit: u64,
        /// Acknowledge the completions printed: they are not read again.
        #[arg(long)]
        ack: bool,
    },
    /// Cancel a submission: deleted with its job and runs.
    Cancel {
        app: String,
        key: String,
        /// Kill its running runs rather than refuse while one runs.
        #[arg(long)]
        kill: bool,
    },
}

/// Runs `tickwork submit`.
pub(crate) async fn submit(remote: &Remote, args: SubmitArgs) -> anyhow::Result<()> {
    let client = remote.client()?;
    let schedule = if args.now {
        When::Now
    } else if let Some(at) = args.at {
        When::At { at }
    } else if let Some(every) = args.every {
        let every_ms =
            parse_interval_ms(&every).map_err(|e| InputError(format!("--every: {e}")))?;
        When::Repeat {
            every_ms,
            count: args.count,
        }
    } else if let Some(cron) = args.cron {
        When::Cron { cron }
    } else {
        return Err(InputError("give one of --now, --at, --every or --cron".into()).into());
    };
    let route_strategy = match args.route {
        Some(name) => Some(
            name.parse::<RouteStrategy>()
                .map_err(|e| InputError(format!("--route: {e}")))?,
        ),
        None => None,
    };
    let input = SubmissionInput {
        handler: args.handler,
        params: args.params,
        schedule,
        time_zone: args.time_zone,
        rely_on_prev_cycle: args.rely_on_prev_cycle,
        on_conflict: if args.replace {
            OnConflict::Replace
        } else {
            OnConflict::Ignore
        },
        priority: args.priority,
        retry_count: args.retries,
        retry_backoff_ms: args.retry_backoff_ms,
        timeout_s: args.timeout_s,
        route_strategy,
        description: String::new(),
        feedback_channel: args.feedback_channel,
    };
    let put = client
        .submissions()
        .submit(&args.app, &args.key, &input)
        .await?;
    let outcome = serde_json::to_value(put.outcome)?;
    println!("{}", outcome.as_str().unwrap_or("done"));
    print_submission(&put.submission);
    Ok(())
}

/// Runs one `tickwork submission` command.
pub(crate) async fn run(remote: &Remote, command: SubmissionCommand) -> anyhow::Result<()> {
    let client = remote.client()?;
    match command {
        SubmissionCommand::Show { app, key } => {
            print_submission(&client.submissions().get(&app, &key).await?);
        }
        SubmissionCommand::Completions {
            app,
            after,
            limit,
            ack,
        } => {
            let page = client
                .submissions()
                .completions(&app, after, Some(limit))
                .await?;
            println!(
                "{:>8} {:<24} {:>8} {:>7} {:<10} {:<29} RESULT",
                "ID", "KEY", "RUN", "ATTEMPT", "STATE", "ENDED"
            );
            for c in &page.items {
                println!(
                    "{:>8} {:<24} {:>8} {:>7} {:<10} {:<29} {}",
                    c.id,
                    cell(&c.key, 24),
                    c.run_id,
                    c.attempt,
                    c.state.as_str(),
                    instant(Some(c.ended_at)),
                    cell(c.handle_msg.as_deref().unwrap_or(""), 50)
                );
            }
            if ack && !page.items.is_empty() {
                let ids: Vec<i64> = page.items.iter().map(|c| c.id).collect();
                let acked = client.submissions().ack(&app, &ids).await?;
                println!("acknowledged {acked}");
            }
        }
        SubmissionCommand::Cancel { app, key, kill } => {
            let gone = client.submissions().cancel(&app, &key, kill).await?;
            println!(
                "cancelled {} {} (job {})",
                gone.app_name, gone.key, gone.job_id
            );
        }
    }
    Ok(())
}

fn print_submission(s: &SubmissionView) {
    println!("submission {} {} (job {})", s.app_name, s.key, s.job_id);
    println!(
        "  schedule   {}",
        serde_json::to_string(&s.schedule).unwrap_or_default()
    );
    println!("  time zone  {}", s.time_zone);
    println!("  state      {}", s.state);
    println!("  next fire  {}", instant(s.next_fire_at));
    if let Some(left) = s.fires_left {
        println!("  fires left {left}");
    }
    if let Some(channel) = &s.feedback_channel {
        println!("  feedback   {channel}");
    }
}
