//! The dashboard's figures.

use tickwork_core::fire_check::FireAlertKind;
use tickwork_core::run::RunState;
use tickwork_protocol::api::{DayRuns, FireAlertTotalView, StatsView};
use tickwork_store::{
    FireAlertRecord, FireAlertTotal, JobFilter, JobStatus, PageReq, RegistryEntry, TimeRange,
};

use super::Dashboard;
use crate::Error;
use crate::timer::now_ms;

/// The period of the ledger's alerts in the dashboard's figures.
const DAY_MS: i64 = 86_400_000;

impl Dashboard<'_> {
    /// The dashboard's figures: counts of jobs, groups and live executors, today's runs by
    /// state, runs per day over the last 7 days (admin's zone), and dispatch lateness.
    pub async fn stats(self) -> Result<StatsView, Error> {
        let store = &self.inner.store;
        let count_jobs = |status: Option<JobStatus>| async move {
            Ok::<u64, Error>(
                store
                    .jobs_list(JobFilter {
                        status,
                        page: PageReq::first(1),
                        ..JobFilter::default()
                    })
                    .await?
                    .total,
            )
        };
        let jobs = count_jobs(None).await?;
        let jobs_running = count_jobs(Some(JobStatus::Running)).await?;
        let groups = store.groups_list().await?.len() as u64;
        let now = now_ms();
        let alive_since = now - self.inner.config.registry.dead_after.as_millis() as i64;
        let executors = store
            .registry_list()
            .await?
            .iter()
            .filter(|r| r.updated_at >= alive_since)
            .count() as u64;
        let zone = tickwork_core::schedule::parse_time_zone(&self.inner.config.default_time_zone)?;
        let today = jiff::Timestamp::from_millisecond(now)
            .map_err(|e| Error::Internal(e.to_string()))?
            .to_zoned(zone)
            .start_of_day()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let mut runs_per_day = Vec::with_capacity(7);
        for back in (0..7).rev() {
            let start = today
                .checked_sub(jiff::Span::new().days(back))
                .map_err(|e| Error::Internal(e.to_string()))?;
            let end = start
                .checked_add(jiff::Span::new().days(1))
                .map_err(|e| Error::Internal(e.to_string()))?;
            let counts = store
                .runs_state_counts(TimeRange {
                    from: Some(start.timestamp().as_millisecond()),
                    to: Some(end.timestamp().as_millisecond()),
                })
                .await?;
            runs_per_day.push(DayRuns {
                day: start.timestamp().as_millisecond(),
                by_state: counts
                    .into_iter()
                    .map(|(state, n)| (state.as_str().to_owned(), n))
                    .collect(),
            });
        }
        let runs_today = runs_per_day
            .last()
            .map(|d| d.by_state.clone())
            .unwrap_or_default();
        let lateness = self.inner.pipeline.lateness();
        let fire_alerts = self
            .fire_alert_totals(TimeRange {
                from: Some(now - DAY_MS),
                to: None,
            })
            .await?
            .into_iter()
            .map(|t| FireAlertTotalView {
                kind: t.kind.as_str().to_owned(),
                alerts: t.alerts,
                fires: t.fires,
            })
            .collect();
        Ok(StatsView {
            jobs,
            jobs_running,
            groups,
            executors,
            runs_today,
            runs_per_day,
            lateness,
            fire_alerts,
        })
    }

    /// The ledger's alerts written in `range` per kind, every kind present (zero when none),
    /// in the kinds' order.
    pub async fn fire_alert_totals(self, range: TimeRange) -> Result<Vec<FireAlertTotal>, Error> {
        let written = self.inner.store.fire_alerts_totals(range).await?;
        Ok(FireAlertKind::ALL
            .iter()
            .map(|&kind| {
                written
                    .iter()
                    .find(|t| t.kind == kind)
                    .copied()
                    .unwrap_or(FireAlertTotal {
                        kind,
                        alerts: 0,
                        fires: 0,
                    })
            })
            .collect())
    }

    /// The newest `limit` ledger alerts written in `range`, newest first.
    pub async fn fire_alerts_recent(
        self,
        range: TimeRange,
        limit: u32,
    ) -> Result<Vec<FireAlertRecord>, Error> {
        Ok(self.inner.store.fire_alerts_recent(range, limit).await?)
    }

    /// Every registry row (alive or not yet swept), for the console's group and dashboard
    /// pages.
    pub async fn registry_entries(self) -> Result<Vec<RegistryEntry>, Error> {
        Ok(self.inner.store.registry_list().await?)
    }

    /// How many runs scheduled in `range` are in each state.
    pub async fn run_state_counts(self, range: TimeRange) -> Result<Vec<(RunState, u64)>, Error> {
        Ok(self.inner.store.runs_state_counts(range).await?)
    }
}
