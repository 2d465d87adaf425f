//! The claim loop: plans every fire of the look-ahead window in one transaction and arms the
//! planned runs; and the cache of jobs with their parsed schedules.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tickwork_store::{ClaimParams, ClaimPlanner, Job, JobDue, JobPlan};
use tracing::warn;

use super::planner::{PlanLimits, plan_job};
use super::{CachedJob, Scheduler};
use crate::Error;

/// A test-only fault point (debug builds): with `TICKWORK_TEST_STOP_IN_CLAIM` naming a file,
/// the first claim that plans a job once the file exists freezes the whole process with
/// SIGSTOP there, inside its transaction with its jobs' rows locked, until it gets SIGCONT.
/// Several admins may be armed with one file: the first to plan takes it (a rename succeeds
/// once), so one stops, and the test need not wait for a given admin to win a claim.
fn stop_point_in_claim() {
    #[cfg(debug_assertions)]
    {
        use std::sync::atomic::AtomicBool;
        static STOPPED: AtomicBool = AtomicBool::new(false);
        if STOPPED.load(Ordering::Relaxed) {
            return;
        }
        let Some(path) = std::env::var_os("TICKWORK_TEST_STOP_IN_CLAIM") else {
            return;
        };
        let mut taken = path.clone();
        taken.push(format!(".taken-by-{}", std::process::id()));
        if std::fs::rename(&path, &taken).is_ok() && !STOPPED.swap(true, Ordering::SeqCst) {
            tracing::error!("test fault point: stopping inside a claim transaction");
            // On stdout too, where a test waits for its children's lines.
            println!("TW-STOPPED-IN-CLAIM");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        }
    }
}

/// How long a claim put off by a full backlog waits before it looks again.
const BACKLOG_WAIT: Duration = Duration::from_millis(20);

/// Least time from the start of one claim round to the start of a round woken early (a job
/// created, started or changed). Jobs created one request at a time woke a round each: about
/// 600 claim transactions a second that found nothing, beside the creates' own writes. A job
/// due sooner than a claim interval is claimed at most this much later; a wake that comes
/// after a quiet spell is answered at once.
const WOKEN_ROUND_GAP: Duration = Duration::from_millis(20);

/// How long a round woken `since_last` after the last round started waits before it claims.
fn woken_round_wait(since_last: Duration) -> Duration {
    WOKEN_ROUND_GAP.saturating_sub(since_last)
}

/// Most fires one claim transaction should write. Every fire is a row, a misfired one too:
/// an overloaded admin ran minutes behind, each of `claim_limit` jobs had hundreds of fires to
/// record, and a claim held their rows locked longer than a session waits for a lock, so
/// starts and stops from the API failed with a lock timeout (PostgreSQL) or queued behind it
/// (SQLite).
const CLAIM_FIRES_MAX: usize = 20_000;

/// The claim's planner: the job cache's definitions and parsed schedules, and core's rules.
struct CachedPlanner<'a> {
    scheduler: &'a Scheduler,
    limits: PlanLimits,
}

impl ClaimPlanner for CachedPlanner<'_> {
    fn known(&self, id: i64, version: i64, created_at: i64) -> Option<Arc<Job>> {
        let jobs = self.scheduler.inner.jobs.lock().expect("jobs lock");
        jobs.get_version(id, version, created_at)
            .map(|c| c.job.clone())
    }

    fn plan(&self, job: &Job, due: JobDue, now: i64) -> JobPlan {
        stop_point_in_claim();
        let cached = self.scheduler.cache_job(job);
        plan_job(job, due, cached.schedule.as_ref(), now, self.limits)
    }
}

/// The jobs the next claim takes: `configured`, or fewer when the last claim's jobs had so
/// many fires each (`last_fires` over `last_jobs`) that `configured` of them would write more
/// than [`CLAIM_FIRES_MAX`]; at least one.
fn next_claim_limit(configured: u32, last_jobs: usize, last_fires: usize) -> u32 {
    if last_jobs == 0 {
        return configured;
    }
    let per_job = last_fires.div_ceil(last_jobs).max(1);
    (CLAIM_FIRES_MAX / per_job).clamp(1, configured as usize) as u32
}

impl Scheduler {
    pub(super) async fn claim_loop(self) {
        let inner = &self.inner;
        let s = &inner.config.scheduler;
        let limits = PlanLimits {
            lookahead_ms: s.lookahead.as_millis() as i64,
            misfire_threshold_ms: s.misfire_threshold.as_millis() as i64,
            max_fires_per_job: s.max_fires_per_job,
        };
        // Successful claim rounds in a row: held runs go back once two rounds passed, so that
        // the late fires of every due job were planned (and their catch-ups written) first.
        let mut ok_rounds = 0u32;
        // Whether the closed fence was reported (once a closure).
        let mut fenced = false;
        let mut limit = s.claim_limit;
        loop {
            if inner.stop.is_cancelled() {
                return;
            }
            let now = inner.clock.now_ms();
            if !inner.membership.fence_open(now, &inner.config) {
                // Others may soon count this node as dead: claim nothing they would adopt.
                ok_rounds = 0;
                let last_beat = inner.membership.last_beat();
                if !fenced && last_beat > 0 {
                    fenced = true;
                    warn!(
                        heartbeat_age_ms = now - last_beat,
                        "fence closed: the last heartbeat is too old; claims and fires wait"
                    );
                }
                tokio::select! {
                    _ = inner.stop.cancelled() => return,
                    _ = inner.clock.sleep(s.claim_interval) => {}
                }
                continue;
            }
            fenced = false;
            if self.waiting().backlog() >= s.max_backlog
                || inner.send_behind.load(Ordering::Relaxed)
            {
                // More is due than this node can send: claim nothing more until the pipeline
                // drains, so that memory stays bounded and the send fence gets the database
                // first (a claim's write would hold it up further); fires that wait too long
                // follow their job's misfire policy when they are claimed, recorded by the
                // claim's own insert instead of being planned, armed and misfired later.
                inner.stats.claims_deferred.fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    _ = inner.stop.cancelled() => return,
                    _ = inner.clock.sleep(BACKLOG_WAIT) => {}
                }
                continue;
            }
            let params = ClaimParams {
                node_id: inner.config.node_id.clone(),
                now,
                lookahead_ms: limits.lookahead_ms,
                limit,
            };
            let planner = CachedPlanner {
                scheduler: &self,
                limits,
            };
            // Real time: what the gap spares is the database's, on any clock.
            let round_started = tokio::time::Instant::now();
            let more = match inner.store.jobs_claim_due(params, &planner).await {
                Ok(result) => {
                    inner.stats.claim_rounds.fetch_add(1, Ordering::Relaxed);
                    inner
                        .stats
                        .runs_claimed
                        .fetch_add(result.runs.len() as u64, Ordering::Relaxed);
                    inner
                        .stats
                        .runs_misfired
                        .fetch_add(result.misfired as u64, Ordering::Relaxed);
                    if result.duplicates > 0 {
                        warn!(
                            duplicates = result.duplicates,
                            "claim met fires the ledger already held"
                        );
                    }
                    let full = result.jobs >= limit as usize;
                    let fires = result.runs.len() + result.misfired + result.duplicates;
                    limit = next_claim_limit(s.claim_limit, result.jobs, fires);
                    self.arm_all(result.runs, 0);
                    // After the arming: whoever sees this instant finds the round's runs armed.
                    inner.stats.last_claim_at.fetch_max(now, Ordering::SeqCst);
                    ok_rounds = ok_rounds.saturating_add(1);
                    full
                }
                Err(e) => {
                    // The database may be down: keep the loop alive, try again shortly.
                    warn!(error = %e, "claim failed");
                    ok_rounds = 0;
                    false
                }
            };
            if more {
                continue;
            }
            // Once stopping, held runs are the shutdown's to hand back: given back here, the
            // late ones would be misfired by a node that is leaving.
            if ok_rounds >= 2 && !inner.stop.is_cancelled() {
                self.adoption().resume_held().await;
            }
            // A random pause between half and all of the interval: admins that started
            // together would otherwise keep the same phase, and the one whose claim always
            // comes first after a fire instant enters the window would take every job.
            let pause = s.claim_interval.mul_f64(0.5 + fastrand::f64() / 2.0);
            let woken = tokio::select! {
                _ = inner.stop.cancelled() => return,
                _ = inner.claim_wake.notified() => true,
                _ = inner.clock.sleep(pause) => false,
            };
            if woken {
                let wait = woken_round_wait(round_started.elapsed());
                tokio::select! {
                    _ = inner.stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
            // A round that took all it could is followed at once; the next cycle lets a burst
            // go first. Jobs due on one instant come into the look-ahead together at the
            // instant their earlier fire is due, so an unpaced claim met their burst, and its
            // write and planning took the cores from the sends (on SQLite, 20,000 jobs due each
            // second: p99 999 ms with the claim in the burst, 596 ms after it). The fires it
            // claims are a look-ahead away.
            self.wait_for_burst(s.claim_interval).await;
        }
    }

    /// Caches `job` with its parsed schedule, reusing the parse while the job is unchanged.
    pub(super) fn cache_job(&self, job: &Job) -> Arc<CachedJob> {
        self.inner.jobs.lock().expect("jobs lock").insert(job)
    }

    pub(crate) async fn job(&self, job_id: i64) -> Result<Arc<CachedJob>, Error> {
        if let Some(c) = self.inner.jobs.lock().expect("jobs lock").get(job_id) {
            return Ok(c);
        }
        let job = self.inner.store.job_get(job_id).await?;
        Ok(self.cache_job(&job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_woken_round_starts_at_least_the_gap_after_the_last() {
        let ms = Duration::from_millis;
        // (since the last round started, the wait)
        for (since, wait) in [
            (ms(0), WOKEN_ROUND_GAP),
            (ms(5), WOKEN_ROUND_GAP - ms(5)),
            (WOKEN_ROUND_GAP, ms(0)),
            // After a quiet spell: at once.
            (ms(400), ms(0)),
        ] {
            assert_eq!(
                woken_round_wait(since),
                wait,
                "woken {since:?} after a round"
            );
        }
    }

    #[test]
    fn a_claim_takes_fewer_jobs_when_each_has_many_fires() {
        for (configured, last_jobs, last_fires, want) in [
            // Nothing claimed, or a few fires a job (on time): the configured limit.
            (1000, 0, 0, 1000),
            (1000, 1000, 3000, 1000),
            (1000, 1000, 20_000, 1000),
            // Minutes behind: hundreds of fires a job.
            (1000, 1000, 250_000, 80),
            (1000, 80, 20_000, 80),
            // A limit set lower stays the ceiling; never fewer than one job.
            (50, 10, 30, 50),
            (1000, 1, 10_000_000, 1),
        ] {
            assert_eq!(
                next_claim_limit(configured, last_jobs, last_fires),
                want,
                "{configured} configured, last claim {last_jobs} jobs with {last_fires} fires"
            );
        }
    }
}
