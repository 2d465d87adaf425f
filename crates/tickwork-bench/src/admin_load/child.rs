//! The executor child: the bench binary re-invoked as `tickwork-bench --executor-child ...`, a
//! real executor process on the Tickwork SDK with one no-op handler that records, for every run,
//! when the handler was invoked. On SIGTERM it shuts down gracefully (its callbacks flushed to
//! the admin), then writes its records to a file the parent reads.
//!
//! Protocol with the parent, on stdout: `executor listening on ADDR` once started, then
//! `arrivals TOTAL` every second, then `records N` when the record file is complete.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use tickwork_executor::{Executor, HandlerError, JobContext, JobOutcome};

use super::probe::WireTimes;
use super::stats::Arrival;

/// The flag that selects this mode; it must come first.
pub(crate) const FLAG: &str = "--executor-child";

#[derive(Debug, Parser)]
#[command(name = "tickwork-bench --executor-child")]
struct ChildArgs {
    /// The mode flag itself.
    #[arg(long = "executor-child")]
    _marker: bool,
    /// Admin base URLs, comma-separated.
    #[arg(long)]
    admins: String,
    #[arg(long)]
    token: String,
    #[arg(long)]
    app: String,
    #[arg(long)]
    handler: String,
    /// Where the records go (written at the end).
    #[arg(long)]
    out: PathBuf,
    /// Run log folder of the executor.
    #[arg(long)]
    logs: PathBuf,
    /// Shut down by itself after this long, should the parent never ask.
    #[arg(long)]
    max_secs: u64,
    /// Put the wire probe (see `probe.rs`) in front of the server.
    #[arg(long)]
    wire_probe: bool,
}

/// Whether this process was started as an executor child.
pub(crate) fn is_child() -> bool {
    std::env::args().nth(1).as_deref() == Some(FLAG)
}

/// Runs the executor child until SIGTERM (or its deadline).
pub(crate) fn main() -> anyhow::Result<()> {
    let args = ChildArgs::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

pub(super) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

async fn run(args: ChildArgs) -> anyhow::Result<()> {
    let records: Arc<Mutex<Vec<Arrival>>> = Arc::new(Mutex::new(Vec::with_capacity(1 << 16)));
    let rec = Arc::clone(&records);
    let probe = match args.wire_probe {
        true => Some(tokio::net::TcpListener::bind("127.0.0.1:0").await?),
        false => None,
    };
    let mut builder = Executor::builder(args.app.as_str());
    if let Some(p) = &probe {
        // The admin dispatches to the probe, which forwards to the real server.
        builder = builder.advertised_address(format!("http://{}/", p.local_addr()?));
    }
    let executor = builder
        .admin_addresses(&args.admins)
        .access_token(args.token.as_str())
        .listen("127.0.0.1:0".parse()?)
        .log_folder(&args.logs)
        .handler(args.handler.as_str(), move |ctx: JobContext| {
            // Taken when the SDK invokes the handler, before its future is first polled: the
            // earliest instant the SDK lets a handler see.
            let arrived_us = now_us();
            rec.lock().expect("records lock").push(Arrival {
                job_id: i64::from(ctx.job_id()),
                log_id: ctx.log_id(),
                scheduled_at_ms: ctx.log_date_time(),
                arrived_us,
                wire_us: 0,
            });
            async { Ok::<_, HandlerError>(JobOutcome::success()) }
        })
        .start()
        .await
        .context("executor did not start")?;
    let wire: WireTimes = Arc::default();
    if let Some(p) = probe {
        super::probe::start(p, executor.local_addr(), Arc::clone(&wire));
    }
    say(&format!("executor listening on {}", executor.local_addr()))?;

    // Ends only when stdout breaks: the parent is gone, so this executor stops too.
    let mut ticker = {
        let records = Arc::clone(&records);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let n = records.lock().expect("records lock").len();
                if say(&format!("arrivals {n}")).is_err() {
                    return;
                }
            }
        })
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = &mut ticker => eprintln!("executor child: the parent is gone, stopping"),
        _ = tokio::time::sleep(Duration::from_secs(args.max_secs)) => {
            eprintln!("executor child: deadline reached without SIGTERM, stopping");
        }
    }
    ticker.abort();
    let stats = executor.stats();
    // Records first: they are complete (the parent waited for arrivals to settle), and a slow
    // graceful shutdown must not lose them.
    let mut records = std::mem::take(&mut *records.lock().expect("records lock"));
    {
        let wire = wire.lock().expect("wire times lock");
        for r in &mut records {
            r.wire_us = wire.get(&r.log_id).copied().unwrap_or(0);
        }
    }
    // Written under a temporary name and renamed: the parent never reads half a file.
    let tmp = args.out.with_extension("partial");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        for r in &records {
            w.write_all(r.to_line().as_bytes())?;
        }
        w.flush()?;
    }
    std::fs::rename(&tmp, &args.out)?;
    // The parent may be gone already; the shutdown goes on regardless.
    let _ = say(&format!("records {}", records.len()));
    eprintln!("executor child: stats at SIGTERM {stats:?}");
    let started = std::time::Instant::now();
    let report = executor.shutdown_and_wait().await;
    eprintln!(
        "executor child: shutdown took {:.1} s: {report:?}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn say(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}
