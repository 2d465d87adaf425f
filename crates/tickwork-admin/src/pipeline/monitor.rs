//! The maintenance monitors, run by the holder of the maintenance lease only: the registry
//! sweep, lost runs, alarm queueing (the sending is `alarm`'s), the daily run reports,
//! retention, the ledger's check of fires (`fire_check`) and the posting of submissions'
//! completions (`completion_delivery`). Each is a loop of its
//! own that survives database errors (logged, tried again next round).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jiff::Timestamp;
use tickwork_core::run::RunState;
use tickwork_store::{AddressMode, LostQuery, RunComplete, RunPurge, RunReport, TimeRange};
use tracing::{info, warn};

use std::sync::Arc;

use super::{Inner, Scheduler};
use crate::Error;
use crate::config::Config;
use crate::executor_client::ExecutorClient;

/// Runs handled per lost-run or alarm statement.
const BATCH: u32 = 1000;
/// Node rows older than this are forgotten (their runs were adopted long ago).
const NODE_FORGET_AFTER: Duration = Duration::from_secs(86_400);
/// Days in the run report: today and the two before, as XXL-JOB.
const REPORT_DAYS: usize = 3;
/// After a round that took `d`, a monitor waits at least this many times `d`.
const WAIT_PER_ROUND_TIME: u32 = 20;

/// The wait before a monitor's next round: its interval, or longer after a long round. The
/// report counts the runs of three days and the fire check reads a span of the ledger, so a
/// round's cost grows with the fire rate (1.3 s a report at 20,000 fires a second after
/// 90 s, and on through the day); paced so, a monitor keeps its statements to at most a
/// twenty-first of its time, whatever the ledger holds. The database gauges of `/metrics`
/// are reused as long.
pub(crate) fn wait_after_round(interval: Duration, took: Duration) -> Duration {
    interval.max(took.saturating_mul(WAIT_PER_ROUND_TIME))
}

/// One maintenance task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Monitor {
    RegistrySweep,
    LostRuns,
    Alarms,
    Reports,
    Retention,
    FireCheck,
    /// Completions of submissions posted to their webhook channels.
    Completions,
}

impl Monitor {
    pub(crate) const ALL: [Monitor; 7] = [
        Monitor::RegistrySweep,
        Monitor::LostRuns,
        Monitor::Alarms,
        Monitor::Reports,
        Monitor::Retention,
        Monitor::FireCheck,
        Monitor::Completions,
    ];

    fn name(self) -> &'static str {
        match self {
            Monitor::RegistrySweep => "registry-sweep",
            Monitor::LostRuns => "lost-runs",
            Monitor::Alarms => "alarms",
            Monitor::Reports => "reports",
            Monitor::Retention => "retention",
            Monitor::FireCheck => "fire-check",
            Monitor::Completions => "completions",
        }
    }

    fn interval(self, c: &Config) -> Duration {
        match self {
            Monitor::RegistrySweep => c.registry.sweep_interval,
            Monitor::LostRuns => c.monitor.lost_run_interval,
            Monitor::Alarms => c.monitor.alarm_interval,
            Monitor::Reports => c.monitor.report_interval,
            Monitor::Retention => c.monitor.retention_interval,
            Monitor::FireCheck => c.monitor.fire_check_interval,
            // As often as alarms are looked at: both are messages someone waits for.
            Monitor::Completions => c.monitor.alarm_interval,
        }
    }
}

/// What the lease holder maintains: the monitors here and the alarm delivery loop (`alarm`).
#[derive(Clone)]
pub(crate) struct Maintenance {
    pub(super) inner: Arc<Inner>,
}

impl Maintenance {
    pub(crate) fn scheduler(&self) -> Scheduler {
        Scheduler {
            inner: self.inner.clone(),
        }
    }

    /// Runs `monitor` every interval while this node holds the maintenance lease.
    pub(crate) async fn monitor_loop(self, monitor: Monitor) {
        let interval = monitor.interval(&self.inner.config);
        let mut wait = interval;
        loop {
            tokio::select! {
                _ = self.inner.stop.cancelled() => return,
                _ = self.inner.clock.sleep(wait) => {}
            }
            wait = interval;
            if !self.scheduler().is_lease_holder() {
                continue;
            }
            // In real time: what is paced is the database's time, and a test's clock can jump
            // while a round waits on the database.
            let started = std::time::Instant::now();
            let result = match monitor {
                Monitor::RegistrySweep => self.sweep_registry().await,
                Monitor::LostRuns => self.end_lost_runs().await.map(drop),
                Monitor::Alarms => match self.queue_alarms().await {
                    Ok(_) => self.queue_deliveries().await.map(drop),
                    Err(e) => Err(e),
                },
                Monitor::Reports => self.write_reports().await,
                Monitor::Retention => self.apply_retention().await.map(drop),
                Monitor::FireCheck => self.check_fires().await.map(drop),
                Monitor::Completions => self.post_completions().await.map(drop),
            };
            if let Err(e) = result {
                warn!(monitor = monitor.name(), error = %e, "maintenance round failed");
            }
            let took = started.elapsed();
            wait = wait_after_round(interval, took);
            if wait > interval {
                info!(
                    monitor = monitor.name(),
                    took_ms = took.as_millis() as u64,
                    next_in_ms = wait.as_millis() as u64,
                    "maintenance round took long; the next waits longer"
                );
            }
        }
    }

    /// Deletes dead executors from the registry, and node rows nobody has heard of for a day.
    async fn sweep_registry(&self) -> Result<(), Error> {
        let now = self.inner.clock.now_ms();
        let dead_after = self.inner.config.registry.dead_after.as_millis() as i64;
        let removed = self.inner.store.registry_sweep(now - dead_after).await?;
        if removed > 0 {
            info!(removed, "dead executors removed from the registry");
            self.inner.addresses.clear();
        }
        let forgotten = self
            .inner
            .store
            .nodes_sweep(now - NODE_FORGET_AFTER.as_millis() as i64)
            .await?;
        if forgotten > 0 {
            info!(forgotten, "long-dead admin nodes forgotten");
        }
        Ok(())
    }

    /// Ends as `lost` the runs dispatched longer than the lost-run timeout ago whose executor
    /// is gone, through the completion path (so they retry and alarm as failures do). An
    /// executor of a manual group is not in the registry: it is gone when `/beat` fails.
    async fn end_lost_runs(&self) -> Result<usize, Error> {
        let c = &self.inner.config;
        let now = self.inner.clock.now_ms();
        let timeout = c.monitor.lost_run_timeout;
        let query = LostQuery {
            dispatched_before: now - timeout.as_millis() as i64,
            alive_since: now - c.registry.dead_after.as_millis() as i64,
            limit: BATCH,
        };
        let candidates = self.inner.store.runs_find_lost(query).await?;
        if candidates.is_empty() {
            return Ok(0);
        }
        // Each group's manual list, and the client with its token.
        let mut manual: HashMap<i64, (Vec<String>, Option<ExecutorClient>)> = HashMap::new();
        let mut beats: HashMap<String, bool> = HashMap::new();
        let mut lost = Vec::new();
        for run in candidates {
            let address = run.executor_address.clone().unwrap_or_default();
            if let std::collections::hash_map::Entry::Vacant(slot) = manual.entry(run.group_id) {
                let list = match self.inner.store.group_get(run.group_id).await {
                    Ok(g) if g.address_mode == AddressMode::Manual => {
                        let client = self.inner.client.for_group(&g);
                        (g.addresses, Some(client))
                    }
                    Ok(_) | Err(tickwork_store::Error::NotFound { .. }) => (Vec::new(), None),
                    Err(e) => return Err(e.into()),
                };
                slot.insert(list);
            }
            if let (list, Some(client)) = &manual[&run.group_id]
                && list.contains(&address)
            {
                let alive = match beats.get(&address) {
                    Some(&alive) => alive,
                    None => {
                        let alive = client.beat(&address).await.is_success();
                        beats.insert(address.clone(), alive);
                        alive
                    }
                };
                if alive {
                    continue;
                }
            }
            warn!(
                run_id = run.id,
                job_id = run.job_id,
                executor = %address,
                "run lost: its executor is gone and sent no result"
            );
            let reason = format!(
                "lost: executor {address} stopped beating and sent no result within {} s",
                timeout.as_secs()
            );
            lost.push(RunComplete::lost(run.id, reason, now));
        }
        super::complete::end_lost(&self.scheduler(), &lost).await
    }

    /// Queues failed runs for an alarm, once each (their `alarm_status`); `queue_deliveries`
    /// then writes one delivery per channel of each.
    async fn queue_alarms(&self) -> Result<usize, Error> {
        let mut total = 0;
        loop {
            let runs = self.inner.store.runs_queue_alarms(BATCH).await?;
            for run in &runs {
                warn!(
                    run_id = run.id,
                    job_id = run.job_id,
                    state = %run.state,
                    "alarm queued"
                );
            }
            let n = runs.len();
            total += n;
            self.inner
                .stats
                .alarms_queued
                .fetch_add(n as u64, Ordering::Relaxed);
            if n < BATCH as usize || self.inner.stop.is_cancelled() {
                return Ok(total);
            }
        }
    }

    /// Recomputes the run report of today and the two days before, days being midnights of
    /// the admin's default time zone. Runs count by their scheduled instant: pending ones as
    /// running, succeeded, and failed (failed, timed out, killed, lost); misfired and skipped
    /// runs never ran and count in none.
    async fn write_reports(&self) -> Result<(), Error> {
        let now = self.inner.clock.now_ms();
        for (day, next) in report_days(&self.inner.config.default_time_zone, now)? {
            let counts = self
                .inner
                .store
                .runs_state_counts(TimeRange {
                    from: Some(day),
                    to: Some(next),
                })
                .await?;
            let mut report = RunReport {
                day,
                running: 0,
                succeeded: 0,
                failed: 0,
                updated_at: now,
            };
            for (state, n) in counts {
                let n = n as i64;
                match state {
                    RunState::Planned | RunState::Sending | RunState::Dispatched => {
                        report.running += n
                    }
                    RunState::Succeeded => report.succeeded += n,
                    RunState::Failed | RunState::TimedOut | RunState::Killed | RunState::Lost => {
                        report.failed += n
                    }
                    RunState::Misfired | RunState::Skipped => {}
                }
            }
            self.inner.store.report_upsert(report).await?;
        }
        self.inner
            .stats
            .reports_written
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Deletes runs and reports older than the retention period, a bounded batch per
    /// statement so that no lock is held for long; how many runs went.
    async fn apply_retention(&self) -> Result<u64, Error> {
        let Some(keep) = self.inner.config.monitor.retention() else {
            return Ok(0);
        };
        let before = self.inner.clock.now_ms() - keep.as_millis() as i64;
        let mut total = 0;
        loop {
            let n = self
                .inner
                .store
                .runs_purge(RunPurge {
                    before,
                    limit: BATCH,
                })
                .await?;
            total += n;
            self.inner.stats.runs_purged.fetch_add(n, Ordering::Relaxed);
            if n < u64::from(BATCH) || self.inner.stop.is_cancelled() {
                break;
            }
            // Let the pipeline's writes in between batches.
            tokio::task::yield_now().await;
        }
        let reports = self.inner.store.reports_purge(before).await?;
        let fire_alerts = self.inner.store.fire_alerts_purge(before).await?;
        if total > 0 || reports > 0 || fire_alerts > 0 {
            info!(
                runs = total,
                reports, fire_alerts, "retention: old runs, reports and fire alerts deleted"
            );
        }
        Ok(total)
    }
}

/// `(start, next start)` of today and the two days before in `zone`, newest first, in epoch
/// milliseconds. Days are calendar days: 23 or 25 hours long across a DST change.
pub(crate) fn report_days(zone: &str, now: i64) -> Result<Vec<(i64, i64)>, Error> {
    let tz = tickwork_core::schedule::parse_time_zone(zone)?;
    let bad = |e: jiff::Error| Error::invalid(format!("report day in {zone}: {e}"));
    let mut day = Timestamp::from_millisecond(now)
        .map_err(bad)?
        .to_zoned(tz)
        .start_of_day()
        .map_err(bad)?;
    let mut days = Vec::with_capacity(REPORT_DAYS);
    for _ in 0..REPORT_DAYS {
        let next = day.tomorrow().map_err(bad)?.start_of_day().map_err(bad)?;
        days.push((
            day.timestamp().as_millisecond(),
            next.timestamp().as_millisecond(),
        ));
        day = day.yesterday().map_err(bad)?.start_of_day().map_err(bad)?;
    }
    Ok(days)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{report_days, wait_after_round};

    #[test]
    fn a_monitor_waits_its_interval_or_twenty_times_its_round_after_a_long_one() {
        let ms = Duration::from_millis;
        for (interval, took, wait) in [
            (ms(60_000), ms(0), ms(60_000)),
            (ms(60_000), ms(1_300), ms(60_000)),
            (ms(60_000), ms(3_000), ms(60_000)),
            (ms(60_000), ms(3_001), ms(60_020)),
            (ms(60_000), ms(45_000), ms(900_000)),
            (ms(1_000), ms(400), ms(8_000)),
            (ms(0), ms(0), ms(0)),
            (ms(5_000), Duration::MAX, Duration::MAX),
        ] {
            assert_eq!(
                wait_after_round(interval, took),
                wait,
                "{interval:?} {took:?}"
            );
        }
    }

    #[test]
    fn report_days_are_calendar_days_of_the_zone() {
        // 2026-03-09T12:00:00Z; New York moved to DST on 2026-03-08.
        let now = 1_773_057_600_000;
        let days = report_days("America/New_York", now).unwrap();
        let hours: Vec<i64> = days.iter().map(|(a, b)| (b - a) / 3_600_000).collect();
        assert_eq!(hours, [24, 23, 24]);
        // Midnight in New York (EDT) is 04:00 UTC.
        assert_eq!(days[0].0, 1_773_028_800_000);
        assert_eq!(days[0].0, days[1].1);
        let utc = report_days("UTC", now).unwrap();
        assert_eq!(utc[0], (1_773_014_400_000, 1_773_100_800_000));
        assert!(report_days("Mars/Olympus", now).is_err());
    }
}
