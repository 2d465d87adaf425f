//! The schedule ahead: fires per bucket of every running job over a range, by executor group,
//! with the peaks (`tickwork_core::heatmap` does the counting).

use std::collections::HashMap;

use tickwork_core::ScheduleType;
use tickwork_core::heatmap::{self, HeatJob, Limits, MINUTE_MS, Window};
use tickwork_core::schedule::Schedule;
use tickwork_protocol::api::{
    HeatmapCapped, HeatmapGroup, HeatmapPeak, HeatmapPeakJob, HeatmapQuery, HeatmapView,
};
use tickwork_store::{JobFilter, JobStatus, PageReq};

use super::{Jobs, invalid};
use crate::Error;
use crate::planner::WAITING_FOR_COMPLETION;

/// The range when none is given: a day.
const DEFAULT_RANGE_MS: i64 = 86_400_000;

impl Jobs<'_> {
    /// Fires per bucket over `[from, to)` of the running jobs (of one group, by app name), by
    /// group, with the busiest buckets and the jobs in them. Every role may read it, as the job
    /// list. Defaults: from the current minute, for a day, in buckets of a minute.
    pub async fn heatmap(self, q: HeatmapQuery) -> Result<HeatmapView, Error> {
        let bucket_ms = match q.bucket.as_deref().map(str::trim) {
            None | Some("") => MINUTE_MS,
            Some(text) => heatmap::parse_bucket(text)?,
        };
        let from = q.from.unwrap_or_else(|| {
            let now = self.inner.clock.now_ms();
            now - now.rem_euclid(MINUTE_MS)
        });
        let to = q.to.unwrap_or(from.saturating_add(DEFAULT_RANGE_MS));
        let window = Window::new(from, to, bucket_ms)?;

        let groups = self.inner.store.groups_list().await?;
        let group_id = match q.group.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(app) => Some(
                groups
                    .iter()
                    .find(|g| g.app_name == app)
                    .map(|g| g.id)
                    .ok_or_else(|| {
                        invalid("group", format!("no executor group has app name {app:?}"))
                    })?,
            ),
        };
        let jobs = self.running_jobs(group_id).await?;
        let counted = jobs.len() as u64;
        let map =
            tokio::task::spawn_blocking(move || heatmap::heatmap(&jobs, window, Limits::STANDARD))
                .await
                .map_err(|e| Error::Internal(format!("the heatmap task failed: {e}")))?;

        let names: HashMap<i64, (String, String)> = groups
            .into_iter()
            .map(|g| (g.id, (g.app_name, g.title)))
            .collect();
        Ok(HeatmapView {
            from,
            to,
            bucket_ms,
            buckets: map.totals.len() as u64,
            jobs: counted,
            fires: map.fires,
            totals: map.totals,
            groups: map
                .groups
                .into_iter()
                .map(|g| {
                    let (app_name, title) = names.get(&g.group_id).cloned().unwrap_or_default();
                    HeatmapGroup {
                        group_id: g.group_id,
                        app_name,
                        title,
                        fires: g.fires,
                        counts: g.counts,
                    }
                })
                .collect(),
            peaks: map
                .peaks
                .into_iter()
                .map(|p| HeatmapPeak {
                    start: p.start_ms,
                    end: p.end_ms,
                    fires: p.fires,
                    jobs: p
                        .jobs
                        .into_iter()
                        .map(|j| HeatmapPeakJob {
                            job_id: j.id,
                            key: j.key,
                            description: j.name,
                            group_id: j.group_id,
                            fires: j.fires,
                            first_fire: j.first_ms,
                        })
                        .collect(),
                    more_jobs: p.more_jobs as u64,
                })
                .collect(),
            capped: map
                .capped
                .into_iter()
                .map(|c| HeatmapCapped {
                    job_id: c.id,
                    key: c.key,
                    counted: c.counted,
                    until: c.until_ms,
                })
                .collect(),
        })
    }

    /// Every running job (of one group), as the heatmap counts it, page by page.
    async fn running_jobs(self, group_id: Option<i64>) -> Result<Vec<HeatJob>, Error> {
        let mut out = Vec::new();
        // One parse per distinct schedule: a parsed cron holds about 5 KB, and many jobs share
        // their schedule.
        let mut parsed: HashMap<(ScheduleType, String, String), Option<Schedule>> = HashMap::new();
        let mut offset = 0;
        loop {
            let page = self
                .inner
                .store
                .jobs_list(JobFilter {
                    group_id,
                    status: Some(JobStatus::Running),
                    text: None,
                    page: PageReq {
                        offset,
                        limit: PageReq::MAX_LIMIT,
                    },
                    ..JobFilter::default()
                })
                .await?;
            let n = page.items.len() as u64;
            for job in page.items {
                let spec = &job.spec;
                let text = (
                    spec.schedule_type,
                    spec.schedule_conf.clone(),
                    spec.time_zone.clone(),
                );
                // Every stored schedule was checked when it was saved; one that no longer
                // parses (a time zone gone from the database) fires nothing, as in the claim.
                let Some(schedule) = parsed
                    .entry(text)
                    .or_insert_with_key(|(kind, conf, zone)| {
                        Schedule::parse(*kind, conf, zone).ok()
                    })
                    .clone()
                else {
                    continue;
                };
                out.push(HeatJob {
                    id: job.id,
                    name: spec.description.clone(),
                    group_id: spec.group_id,
                    schedule,
                    anchor_ms: job.next_fire_at.filter(|&n| n != WAITING_FOR_COMPLETION),
                    key: job.key,
                });
            }
            offset += n;
            if n == 0 || offset >= page.total {
                return Ok(out);
            }
        }
    }
}
