//! The pipeline's cache of jobs: each claimed job's row and parsed schedule, the parse shared
//! by every job with the same schedule text. A parsed cron holds about 5 KB (croner's bitmap
//! of years): one per job was 50 MB of the admin's memory at 10,000 jobs sharing one
//! expression.

use std::collections::HashMap;
use std::sync::Arc;

use tickwork_core::ScheduleType;
use tickwork_core::schedule::Schedule;
use tickwork_store::Job;
use tracing::warn;

/// A job as the pipeline uses it: the stored row and its parsed schedule.
pub(crate) struct CachedJob {
    /// Shared with the claim, which plans with it while the version is unchanged.
    pub(crate) job: Arc<Job>,
    /// `None`: the schedule no longer parses (the claim stops the job).
    pub(crate) schedule: Option<Schedule>,
}

/// What a parsed schedule depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ScheduleText {
    kind: ScheduleType,
    conf: String,
    time_zone: String,
}

impl ScheduleText {
    fn of(job: &Job) -> ScheduleText {
        ScheduleText {
            kind: job.spec.schedule_type,
            conf: job.spec.schedule_conf.clone(),
            time_zone: job.spec.time_zone.clone(),
        }
    }
}

/// Cached jobs by id, and the parsed schedules they share.
#[derive(Default)]
pub(crate) struct JobCache {
    jobs: HashMap<i64, Arc<CachedJob>>,
    schedules: HashMap<ScheduleText, Schedule>,
}

impl JobCache {
    pub(crate) fn get(&self, job_id: i64) -> Option<Arc<CachedJob>> {
        self.jobs.get(&job_id).cloned()
    }

    /// Job `id` when it is cached at `version` (and `created_at`: the same row, not another
    /// under its id).
    pub(crate) fn get_version(
        &self,
        id: i64,
        version: i64,
        created_at: i64,
    ) -> Option<&Arc<CachedJob>> {
        self.jobs
            .get(&id)
            .filter(|c| c.job.version == version && c.job.created_at == created_at)
    }

    /// Caches `job`, keeping the cached entry while the job's version is unchanged: a job
    /// cached at its version is not copied again.
    pub(crate) fn insert(&mut self, job: &Job) -> Arc<CachedJob> {
        if let Some(c) = self.get_version(job.id, job.version, job.created_at) {
            return c.clone();
        }
        let job = job.clone();
        let text = ScheduleText::of(&job);
        let mut parsed = false;
        let schedule = match self.schedules.get(&text) {
            Some(s) => Some(s.clone()),
            None => match Schedule::parse(text.kind, &text.conf, &text.time_zone) {
                Ok(s) => {
                    self.schedules.insert(text, s.clone());
                    parsed = true;
                    Some(s)
                }
                Err(e) => {
                    warn!(job_id = job.id, error = %e, "job schedule no longer parses; stopping it");
                    None
                }
            },
        };
        let cached = Arc::new(CachedJob {
            job: Arc::new(job),
            schedule,
        });
        self.jobs.insert(cached.job.id, cached.clone());
        if parsed {
            self.prune();
        }
        cached
    }

    /// Forgets a job (it changed or was deleted).
    pub(crate) fn remove(&mut self, job_id: i64) {
        self.jobs.remove(&job_id);
    }

    /// Drops the parsed schedules no cached job uses once there are more than twice as many
    /// as jobs (plus 64): edited and deleted jobs leave theirs behind. Amortized O(1) per
    /// insert.
    fn prune(&mut self) {
        if self.schedules.len() <= 2 * self.jobs.len() + 64 {
            return;
        }
        let used: std::collections::HashSet<ScheduleText> = self
            .jobs
            .values()
            .map(|c| ScheduleText::of(&c.job))
            .collect();
        self.schedules.retain(|text, _| used.contains(text));
    }

    /// Parsed schedules held (tests).
    #[cfg(test)]
    fn parsed(&self) -> usize {
        self.schedules.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork_store::{JobSpec, JobStatus};

    fn job(id: i64, version: i64, conf: &str, time_zone: &str) -> Job {
        let mut spec = JobSpec::new(1, "h");
        spec.schedule_type = ScheduleType::Cron;
        spec.schedule_conf = conf.to_owned();
        spec.time_zone = time_zone.to_owned();
        Job {
            id,
            key: format!("k{id}"),
            spec,
            status: JobStatus::Running,
            next_fire_at: Some(0),
            last_fire_at: None,
            fires_left: None,
            glue_updated_at: 0,
            version,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn jobs_with_one_schedule_text_share_one_parse() {
        let mut cache = JobCache::default();
        for id in 0..1000 {
            cache.insert(&job(id, 1, "* * * * * ?", "UTC"));
        }
        cache.insert(&job(1000, 1, "* * * * * ?", "Asia/Shanghai"));
        cache.insert(&job(1001, 1, "0 * * * * ?", "UTC"));
        assert_eq!(cache.parsed(), 3);
        let a = cache.get(0).unwrap();
        let b = cache.get(999).unwrap();
        assert_eq!(a.schedule, b.schedule);
        assert!(a.schedule.is_some());
    }

    #[test]
    fn a_new_version_is_parsed_again_and_an_unparsable_one_has_no_schedule() {
        let mut cache = JobCache::default();
        let first = cache.insert(&job(1, 1, "* * * * * ?", "UTC"));
        assert!(Arc::ptr_eq(
            &first,
            &cache.insert(&job(1, 1, "* * * * * ?", "UTC"))
        ));
        let changed = cache.insert(&job(1, 2, "0 0 * * * ?", "UTC"));
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_ne!(first.schedule, changed.schedule);
        let broken = cache.insert(&job(1, 3, "not a cron", "UTC"));
        assert!(broken.schedule.is_none());
    }

    #[test]
    fn a_job_is_known_only_at_its_version_and_creation() {
        let mut cache = JobCache::default();
        cache.insert(&job(1, 4, "* * * * * ?", "UTC"));
        assert!(cache.get_version(1, 4, 0).is_some());
        assert!(cache.get_version(1, 5, 0).is_none(), "edited since");
        assert!(
            cache.get_version(1, 4, 7).is_none(),
            "another row under the id"
        );
        assert!(cache.get_version(2, 4, 0).is_none(), "never cached");
        let mut again = job(1, 4, "0 0 * * * ?", "UTC");
        again.created_at = 7;
        let other = cache.insert(&again);
        assert_eq!(
            other.job.created_at, 7,
            "the other row replaces the cached one"
        );
    }

    #[test]
    fn schedules_no_job_uses_are_dropped_once_they_pile_up() {
        let mut cache = JobCache::default();
        // One job edited through 200 distinct expressions: the old parses go (kept: at most
        // twice the jobs plus 64, and the one just parsed).
        for v in 0..200 {
            cache.insert(&job(1, v, &format!("{} * * * * ?", v % 60), &zone(v)));
        }
        assert!(cache.parsed() <= 67, "{} parses kept", cache.parsed());
        assert!(cache.get(1).unwrap().schedule.is_some());
    }

    fn zone(v: i64) -> String {
        ["UTC", "Asia/Shanghai", "Europe/Paris", "America/New_York"][(v / 60) as usize % 4]
            .to_owned()
    }
}
