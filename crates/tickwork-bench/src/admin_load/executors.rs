//! The executors of a load run (child processes on the SDK, or fakes in the bench process):
//! waiting for their registration, their live counters, and their records at the end.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::procs::ExecutorProc;
use super::report::print_log_summary;
use super::stats::Arrival;
use super::{EXECUTOR_EXIT_GRACE, SETTLE_MAX, api, fake};

/// Waits until the group lists `n` live executors.
pub(super) async fn wait_for_executors(
    api: &api::Api,
    group_id: i64,
    n: usize,
) -> anyhow::Result<()> {
    let t = Instant::now();
    loop {
        let g = api.get(0, &format!("/groups/{group_id}")).await?;
        let live = g
            .get("live_addresses")
            .and_then(|a| a.as_array())
            .map_or(0, Vec::len);
        if live >= n {
            println!(
                "setup: {live} executors registered after {:.2} s",
                t.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(30) {
            bail!("only {live} of {n} executors registered after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The executors of a run: child processes on the SDK, or fakes in this process.
pub(super) enum Executors {
    Children(Vec<ExecutorProc>),
    Fake(Vec<fake::FakeExecutor>),
}

impl Executors {
    /// The live counters of runs seen, one per executor.
    pub(super) fn counters(&self) -> Vec<Arc<AtomicU64>> {
        match self {
            Executors::Children(c) => c.iter().map(|e| Arc::clone(&e.arrivals)).collect(),
            Executors::Fake(f) => f.iter().map(|e| Arc::clone(&e.arrivals)).collect(),
        }
    }

    pub(super) fn total(&self) -> u64 {
        self.counters()
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum()
    }

    /// Executor processes (none for the fakes, which live in the bench process).
    pub(super) fn pids(&self) -> Vec<u32> {
        match self {
            Executors::Children(c) => c.iter().map(|e| e.proc.pid).collect(),
            Executors::Fake(_) => Vec::new(),
        }
    }

    /// Stops the executors, their last results delivered to the live admins, and returns
    /// every run they saw.
    pub(super) async fn finish(self) -> anyhow::Result<Vec<Arrival>> {
        let mut arrivals: Vec<Arrival> = Vec::new();
        match self {
            Executors::Children(children) => {
                for e in children {
                    let name = e.proc.name.clone();
                    let records = e.records.clone();
                    let log = e.proc.log.clone();
                    let status = e.proc.terminate(EXECUTOR_EXIT_GRACE).await;
                    if !records.exists() {
                        bail!("{name} wrote no records ({status}); see {}", log.display());
                    }
                    let n_before = arrivals.len();
                    read_records(&records, &mut arrivals)?;
                    println!(
                        "{name}: {} records, exit {status}",
                        arrivals.len() - n_before
                    );
                    print_log_summary(&name, &log);
                }
            }
            Executors::Fake(fakes) => {
                for f in fakes {
                    let (name, sent) = (f.name.clone(), Arc::clone(&f.callbacks_sent));
                    let records = f.finish().await;
                    println!(
                        "{name}: {} records, {} results accepted by the admins",
                        records.len(),
                        sent.load(Ordering::Relaxed)
                    );
                    arrivals.extend(records);
                }
            }
        }
        Ok(arrivals)
    }
}

/// Waits until no executor has seen a new run for a second.
pub(super) async fn settle(counters: &[Arc<AtomicU64>]) {
    let total = || {
        counters
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let t = Instant::now();
    let mut last = total();
    loop {
        // The children report once a second: two reports without change mean quiet.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let now = total();
        if now == last || t.elapsed() > SETTLE_MAX {
            return;
        }
        last = now;
    }
}

fn read_records(path: &Path, out: &mut Vec<Arrival>) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    for line in text.lines() {
        out.push(Arrival::parse(line).with_context(|| format!("odd record {line:?}"))?);
    }
    Ok(())
}
