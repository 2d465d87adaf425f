//! The schedule ahead: how many fires fall into each bucket of a time range, per executor
//! group, and the busiest buckets with the jobs that fire in them, so that an operator sees
//! the jobs that collide (every nightly job at 00:00:00) before they do.
//!
//! A plain function over jobs' schedules ([`heatmap`]). The work is bounded whatever the jobs:
//!
//! - `FIX_RATE` fires are counted arithmetically: a job every 10 ms costs what a job every
//!   hour costs;
//! - cron fires are enumerated, at most [`Limits::fires_per_job`] per job and
//!   [`Limits::fires_total`] per heatmap; a job counted only up to some instant is listed in
//!   [`Heatmap::capped`] with that instant, so its counts are a lower bound and say so.
//!
//! What a schedule counts, in the job's own time zone (cron) or in real time (intervals):
//!
//! | type | fires counted in `[from, to)` |
//! |---|---|
//! | `CRON` | every match of the expression, under the DST policy of [`crate::cron`] |
//! | `FIX_RATE` | `anchor + k * interval` for every whole `k`: the job's phase, before and after its next fire |
//! | `FIX_DELAY` | `anchor + k * delay` for `k >= 0`, as if runs took no time (the preview's assumption) |
//! | `CRON_AFTER_END` | every match of the expression, as if runs took no time |
//! | `ONCE` | its instant |
//! | `NONE` | nothing |

use std::collections::BTreeMap;

use crate::schedule::{Schedule, parse_interval_ms};
use crate::{Error, ScheduleType};

/// The longest range a heatmap covers: 7 days.
pub const MAX_RANGE_MS: i64 = 7 * 86_400_000;
/// Buckets are whole minutes.
pub const MINUTE_MS: i64 = 60_000;

/// How much work one heatmap may do, and how much it tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Cron fires enumerated per job; past it the job is capped.
    pub fires_per_job: u64,
    /// Cron fires enumerated over all jobs; once spent, the remaining cron jobs are capped.
    pub fires_total: u64,
    /// How many peaks are named.
    pub peaks: usize,
    /// How many jobs a peak names (the busiest first).
    pub jobs_per_peak: usize,
}

impl Limits {
    /// What the admin allows: a cron every second is counted over a whole day, and no heatmap
    /// enumerates more than two million cron fires (a few seconds of one core at most).
    pub const STANDARD: Limits = Limits {
        fires_per_job: 100_000,
        fires_total: 2_000_000,
        peaks: 10,
        jobs_per_peak: 20,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::STANDARD
    }
}

/// The range `[from_ms, to_ms)` cut into buckets of `bucket_ms` from `from_ms` on; the last
/// bucket ends at `to_ms` and may be shorter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    from_ms: i64,
    to_ms: i64,
    bucket_ms: i64,
}

impl Window {
    /// A window, checked: `to` after `from`, at most [`MAX_RANGE_MS`] apart, and buckets of
    /// whole minutes no longer than that.
    pub fn new(from_ms: i64, to_ms: i64, bucket_ms: i64) -> Result<Window, Error> {
        let invalid = |field, message: String| Error::Invalid { field, message };
        if to_ms <= from_ms {
            return Err(invalid(
                "to",
                format!("{to_ms} is not after from ({from_ms}); the range is [from, to)"),
            ));
        }
        if to_ms.checked_sub(from_ms).is_none_or(|d| d > MAX_RANGE_MS) {
            return Err(invalid(
                "to",
                "the range is longer than the maximum of 7 days".to_owned(),
            ));
        }
        if bucket_ms <= 0 || bucket_ms % MINUTE_MS != 0 {
            return Err(invalid(
                "bucket",
                format!("{bucket_ms} ms is not a positive whole number of minutes"),
            ));
        }
        if bucket_ms > MAX_RANGE_MS {
            return Err(invalid(
                "bucket",
                "is longer than the maximum of 7 days".to_owned(),
            ));
        }
        Ok(Window {
            from_ms,
            to_ms,
            bucket_ms,
        })
    }

    pub fn from_ms(&self) -> i64 {
        self.from_ms
    }

    pub fn to_ms(&self) -> i64 {
        self.to_ms
    }

    pub fn bucket_ms(&self) -> i64 {
        self.bucket_ms
    }

    /// How many buckets: the last one may be cut short by `to`.
    pub fn buckets(&self) -> usize {
        // At most 7 days of minutes: the conversion cannot fail.
        usize::try_from(ceil_div(
            i128::from(self.to_ms - self.from_ms),
            i128::from(self.bucket_ms),
        ))
        .unwrap_or(0)
    }

    /// Where bucket `i` starts and ends.
    pub fn bucket(&self, i: usize) -> (i64, i64) {
        let start = self.from_ms + self.bucket_ms * i as i64;
        (start, start.saturating_add(self.bucket_ms).min(self.to_ms))
    }

    /// The bucket an instant inside the window falls into.
    fn index(&self, at: i64) -> usize {
        ((at - self.from_ms) / self.bucket_ms) as usize
    }
}

/// Reads a bucket size: a whole number of minutes with its unit (`1m`, `15m`, `1h`, `1d`;
/// `120s` too). A bare number is refused: it would be seconds, as elsewhere, which a reader of
/// "bucket=60000" would not guess.
pub fn parse_bucket(text: &str) -> Result<i64, Error> {
    let t = text.trim();
    let invalid = |message: String| Error::Invalid {
        field: "bucket",
        message,
    };
    if t.is_empty() || t.chars().all(|c| c.is_ascii_digit()) {
        return Err(invalid(format!(
            "\"{t}\" needs a unit: a whole number of minutes such as 1m, 15m, 1h or 1d"
        )));
    }
    let whole_minutes = |ms: &i64| ms % MINUTE_MS == 0;
    parse_interval_ms(t)
        .ok()
        .filter(whole_minutes)
        .ok_or_else(|| {
            invalid(format!(
                "\"{t}\" is not a whole number of minutes such as 1m, 15m, 1h or 1d"
            ))
        })
}

/// How dark a bucket is drawn: 0 for none, else 1 to 9 by its share of the busiest bucket
/// (rounded up, so that a single fire among thousands still shows).
pub fn intensity(count: u64, max: u64) -> u8 {
    if count == 0 || max == 0 {
        return 0;
    }
    let step = u128::from(count.min(max)) * 9;
    step.div_ceil(u128::from(max)).clamp(1, 9) as u8
}

/// One job as the heatmap counts it.
#[derive(Debug, Clone)]
pub struct HeatJob {
    pub id: i64,
    pub key: String,
    /// What people call it (its description).
    pub name: String,
    pub group_id: i64,
    pub schedule: Schedule,
    /// The job's next planned fire, which fixes the phase of `FIX_RATE` and `FIX_DELAY`;
    /// `None` (not known, or waiting for a run to complete) counts from `from`.
    pub anchor_ms: Option<i64>,
}

/// Fires per bucket of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCounts {
    pub group_id: i64,
    /// All fires of the group in the window.
    pub fires: u64,
    /// One count per bucket.
    pub counts: Vec<u64>,
}

/// A job that fires in a peak, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeakJob {
    pub id: i64,
    pub key: String,
    pub name: String,
    pub group_id: i64,
    pub fires: u64,
    /// Its first fire in the bucket: jobs with the same instant collide.
    pub first_ms: i64,
}

/// One of the busiest buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peak {
    pub start_ms: i64,
    pub end_ms: i64,
    pub fires: u64,
    /// The jobs firing in it, the busiest first (then by first fire, then by id), at most
    /// [`Limits::jobs_per_peak`].
    pub jobs: Vec<PeakJob>,
    /// How many more jobs fire in it than are named.
    pub more_jobs: usize,
}

/// A job whose fires were counted only up to an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    pub id: i64,
    pub key: String,
    /// Fires counted.
    pub counted: u64,
    /// Fires from this instant on were not counted.
    pub until_ms: i64,
}

/// Fires per bucket over a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heatmap {
    pub window: Window,
    /// All fires in the window.
    pub fires: u64,
    /// Fires per bucket, all groups together.
    pub totals: Vec<u64>,
    /// Per group with at least one job, by group id.
    pub groups: Vec<GroupCounts>,
    /// The busiest buckets, busiest first (the earlier first on a tie); empty buckets never.
    pub peaks: Vec<Peak>,
    /// Jobs whose counts stop short of `to`; the counts above are lower bounds then.
    pub capped: Vec<Capped>,
}

/// Counts the fires of `jobs` in `window`, by bucket and group, and names the peaks.
pub fn heatmap(jobs: &[HeatJob], window: Window, limits: Limits) -> Heatmap {
    let n = window.buckets();
    let mut totals = vec![0u64; n];
    let mut groups: BTreeMap<i64, GroupCounts> = BTreeMap::new();
    let mut capped = Vec::new();
    // How far each job was counted: `to` unless capped.
    let mut counted_until = Vec::with_capacity(jobs.len());
    let mut budget = limits.fires_total;
    for job in jobs {
        let group = groups.entry(job.group_id).or_insert_with(|| GroupCounts {
            group_id: job.group_id,
            fires: 0,
            counts: vec![0; n],
        });
        let mut add = |bucket: usize, k: u64| {
            group.counts[bucket] += k;
            group.fires += k;
            totals[bucket] += k;
        };
        let until = match lattice(job, &window) {
            Some(l) => {
                for (i, count) in totals_by_bucket(&l, &window) {
                    add(i, count);
                }
                window.to_ms
            }
            None => {
                let cap = limits.fires_per_job.min(budget);
                let (fires, until) = enumerate(&job.schedule, window.from_ms, window.to_ms, cap);
                budget -= fires.len() as u64;
                for &at in &fires {
                    add(window.index(at), 1);
                }
                if until < window.to_ms {
                    capped.push(Capped {
                        id: job.id,
                        key: job.key.clone(),
                        counted: fires.len() as u64,
                        until_ms: until,
                    });
                }
                until
            }
        };
        counted_until.push(until);
    }
    let peaks = peaks(jobs, &counted_until, &window, &totals, limits);
    Heatmap {
        window,
        fires: totals.iter().sum(),
        totals,
        groups: groups.into_values().collect(),
        peaks,
        capped,
    }
}

/// Fires `anchor + k * step`, for every `k` or only `k >= 0`.
struct Lattice {
    anchor: i128,
    step: i128,
    forward_only: bool,
}

impl Lattice {
    /// The smallest `k` allowed whose fire is at or after `at`.
    fn first_k(&self, at: i64) -> i128 {
        let k = ceil_div(i128::from(at) - self.anchor, self.step);
        if self.forward_only { k.max(0) } else { k }
    }

    /// How many fires in `[start, end)`, and the first of them.
    fn count(&self, start: i64, end: i64) -> (u64, Option<i64>) {
        let (a, b) = (self.first_k(start), self.first_k(end));
        if b <= a {
            return (0, None);
        }
        let first = i64::try_from(self.anchor + a * self.step).ok();
        (u64::try_from(b - a).unwrap_or(u64::MAX), first)
    }
}

/// The arithmetic form of an interval schedule; `None` for the others.
fn lattice(job: &HeatJob, window: &Window) -> Option<Lattice> {
    let forward_only = match job.schedule.kind() {
        ScheduleType::FixRate => false,
        ScheduleType::FixDelay => true,
        _ => return None,
    };
    Some(Lattice {
        anchor: i128::from(job.anchor_ms.unwrap_or(window.from_ms)),
        step: i128::from(job.schedule.interval_ms()?),
        forward_only,
    })
}

/// A lattice's fires per bucket, the buckets without any left out.
fn totals_by_bucket(l: &Lattice, window: &Window) -> Vec<(usize, u64)> {
    (0..window.buckets())
        .filter_map(|i| {
            let (start, end) = window.bucket(i);
            let (count, _) = l.count(start, end);
            (count > 0).then_some((i, count))
        })
        .collect()
}

/// Every fire of a (non-interval) schedule in `[from, to)`, at most `cap` of them, and the
/// instant up to which they are all there: `to`, or the first fire left out.
fn enumerate(schedule: &Schedule, from: i64, to: i64, cap: u64) -> (Vec<i64>, i64) {
    let mut fires = Vec::new();
    let mut after = from.saturating_sub(1);
    while let Some(next) = schedule.next_after(after).filter(|&t| t < to) {
        if fires.len() as u64 >= cap {
            return (fires, next);
        }
        fires.push(next);
        after = next;
    }
    (fires, to)
}

/// The busiest buckets and the jobs in them.
fn peaks(
    jobs: &[HeatJob],
    counted_until: &[i64],
    window: &Window,
    totals: &[u64],
    limits: Limits,
) -> Vec<Peak> {
    let mut order: Vec<usize> = (0..totals.len()).filter(|&i| totals[i] > 0).collect();
    order.sort_by(|&a, &b| totals[b].cmp(&totals[a]).then(a.cmp(&b)));
    order.truncate(limits.peaks);
    order
        .into_iter()
        .map(|i| {
            let (start, end) = window.bucket(i);
            let mut in_peak: Vec<PeakJob> = jobs
                .iter()
                .zip(counted_until)
                .filter_map(|(job, &until)| {
                    let (fires, first) = fires_in(job, window, start, end.min(until))?;
                    Some(PeakJob {
                        id: job.id,
                        key: job.key.clone(),
                        name: job.name.clone(),
                        group_id: job.group_id,
                        fires,
                        first_ms: first,
                    })
                })
                .collect();
            in_peak.sort_by(|a, b| {
                (b.fires.cmp(&a.fires))
                    .then(a.first_ms.cmp(&b.first_ms))
                    .then(a.id.cmp(&b.id))
            });
            let more_jobs = in_peak.len().saturating_sub(limits.jobs_per_peak);
            in_peak.truncate(limits.jobs_per_peak);
            Peak {
                start_ms: start,
                end_ms: end,
                fires: totals[i],
                jobs: in_peak,
                more_jobs,
            }
        })
        .collect()
}

/// How often a job fires in `[start, end)` and its first fire there; `None` when never. A
/// bucket holds at most what the first pass counted in it, so the enumeration is bounded too.
fn fires_in(job: &HeatJob, window: &Window, start: i64, end: i64) -> Option<(u64, i64)> {
    if end <= start {
        return None;
    }
    if let Some(l) = lattice(job, window) {
        let (count, first) = l.count(start, end);
        return first.map(|f| (count, f));
    }
    let (fires, _) = enumerate(&job.schedule, start, end, u64::MAX);
    Some((fires.len() as u64, *fires.first()?))
}

/// `a / b` rounded up, for `b > 0`.
fn ceil_div(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_div_rounds_up_on_both_sides_of_zero() {
        for (a, b, q) in [
            (0, 5, 0),
            (1, 5, 1),
            (5, 5, 1),
            (6, 5, 2),
            (-1, 5, 0),
            (-5, 5, -1),
        ] {
            assert_eq!(ceil_div(a, b), q, "{a}/{b}");
        }
    }

    #[test]
    fn lattice_counts_half_open_ranges() {
        let l = Lattice {
            anchor: 1_000,
            step: 100,
            forward_only: false,
        };
        assert_eq!(l.count(1_000, 1_300), (3, Some(1_000)));
        assert_eq!(l.count(950, 1_001), (1, Some(1_000)));
        assert_eq!(l.count(801, 900), (0, None));
        assert_eq!(l.count(800, 900), (1, Some(800)));
        let forward = Lattice {
            forward_only: true,
            ..l
        };
        assert_eq!(forward.count(800, 1_100), (1, Some(1_000)));
    }
}
