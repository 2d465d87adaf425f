//! The figures of the admin load scenarios, computed from the executors' arrival records: each
//! record is one run as the no-op handler saw it.

use std::collections::HashMap;

/// One run as the executor's handler saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Arrival {
    pub job_id: i64,
    pub log_id: i64,
    /// The run's scheduled instant (`log_date_time`), epoch ms.
    pub scheduled_at_ms: i64,
    /// When the handler was invoked, epoch µs.
    pub arrived_us: i64,
    /// When the `/run` body came off the admin's socket (wire probe), epoch µs; 0 = unknown.
    pub wire_us: i64,
}

impl Arrival {
    /// One record as the executor child writes it: `job log scheduled_ms arrived_us wire_us`.
    pub(super) fn to_line(self) -> String {
        format!(
            "{} {} {} {} {}\n",
            self.job_id, self.log_id, self.scheduled_at_ms, self.arrived_us, self.wire_us
        )
    }

    pub(super) fn parse(line: &str) -> Option<Arrival> {
        let mut it = line.split_ascii_whitespace().map(str::parse::<i64>);
        let a = Arrival {
            job_id: it.next()?.ok()?,
            log_id: it.next()?.ok()?,
            scheduled_at_ms: it.next()?.ok()?,
            arrived_us: it.next()?.ok()?,
            wire_us: it.next()?.ok()?,
        };
        it.next().is_none().then_some(a)
    }
}

/// p50, p99 and max of a set of values (nearest rank); `None` when empty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Spread {
    pub min: i64,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
    pub count: usize,
}

impl Spread {
    pub(super) fn of(mut values: Vec<i64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let rank = |q: f64| {
            let i = (q * values.len() as f64).ceil() as usize;
            values[i.clamp(1, values.len()) - 1]
        };
        Some(Spread {
            min: values[0],
            p50: rank(0.50),
            p99: rank(0.99),
            max: *values.last().expect("not empty"),
            count: values.len(),
        })
    }
}

/// Microseconds as milliseconds with one decimal.
pub(super) fn ms(us: i64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// What the window's arrivals say.
#[derive(Debug, Clone)]
pub(super) struct WindowFigures {
    /// Arrivals whose arrival instant lies in the window (any scheduled instant).
    pub arrived_in_window: usize,
    /// Lateness of the first arrival of every expected (job, second) pair that arrived.
    pub lateness: Option<Spread>,
    pub expected: usize,
    pub missed: usize,
    /// (job, scheduled_at) pairs of the window that arrived more than once.
    pub duplicated: usize,
    /// With the wire probe: scheduled instant to `/run` off the admin's socket (the admin's
    /// part), and from there to the handler (the executor's part), in µs.
    pub wire: Option<Spread>,
    pub executor_part: Option<Spread>,
    /// Arrivals of the window's fires that are not expected (an unknown job, an off-second
    /// instant): should be zero.
    pub unexpected: usize,
    pub per_second: Vec<SecondFigures>,
}

/// One second of the window.
#[derive(Debug, Clone)]
pub(super) struct SecondFigures {
    /// Runs whose arrival instant lies in this second.
    pub arrived: usize,
    /// Lateness of the fires scheduled at this second.
    pub lateness: Option<Spread>,
    /// Fires scheduled at this second that never arrived.
    pub missed: usize,
}

/// Computes the window's figures. The window is `[from_ms, to_ms)`, whole seconds; every job in
/// `jobs` is expected once at every second of it.
pub(super) fn window_figures(
    arrivals: &[Arrival],
    jobs: &[i64],
    from_ms: i64,
    to_ms: i64,
) -> WindowFigures {
    let seconds: Vec<i64> = (from_ms..to_ms).step_by(1000).collect();
    let known: std::collections::HashSet<i64> = jobs.iter().copied().collect();
    // (job, scheduled_at) -> (arrivals, the earliest arrival)
    let mut pairs: HashMap<(i64, i64), (u32, Arrival)> = HashMap::new();
    let mut arrived_by_second: HashMap<i64, usize> = HashMap::new();
    let mut arrived_in_window = 0;
    let mut unexpected = 0;
    for a in arrivals {
        let arrived_ms = a.arrived_us.div_euclid(1000);
        if (from_ms..to_ms).contains(&arrived_ms) {
            arrived_in_window += 1;
            *arrived_by_second
                .entry(arrived_ms - arrived_ms.rem_euclid(1000))
                .or_default() += 1;
        }
        if !(from_ms..to_ms).contains(&a.scheduled_at_ms) {
            continue;
        }
        if !known.contains(&a.job_id) || a.scheduled_at_ms.rem_euclid(1000) != 0 {
            unexpected += 1;
            continue;
        }
        let e = pairs
            .entry((a.job_id, a.scheduled_at_ms))
            .or_insert((0, *a));
        e.0 += 1;
        if a.arrived_us < e.1.arrived_us {
            e.1 = *a;
        }
    }
    let duplicated = pairs.values().filter(|(n, _)| *n > 1).count();
    let mut by_second: HashMap<i64, Vec<i64>> = HashMap::new();
    let (mut wire, mut executor_part) = (Vec::new(), Vec::new());
    for (&(_, at), (_, first)) in &pairs {
        by_second
            .entry(at)
            .or_default()
            .push(first.arrived_us - at * 1000);
        if first.wire_us > 0 {
            wire.push(first.wire_us - at * 1000);
            executor_part.push(first.arrived_us - first.wire_us);
        }
    }
    let expected = seconds.len() * jobs.len();
    let per_second: Vec<SecondFigures> = seconds
        .iter()
        .map(|&at| {
            let late = by_second.get(&at).cloned().unwrap_or_default();
            SecondFigures {
                arrived: arrived_by_second.get(&at).copied().unwrap_or(0),
                missed: jobs.len() - late.len(),
                lateness: Spread::of(late),
            }
        })
        .collect();
    let all: Vec<i64> = by_second.into_values().flatten().collect();
    WindowFigures {
        arrived_in_window,
        missed: expected - pairs.len(),
        lateness: Spread::of(all),
        expected,
        duplicated,
        wire: Spread::of(wire),
        executor_part: Spread::of(executor_part),
        unexpected,
        per_second,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(job_id: i64, at: i64, late_us: i64) -> Arrival {
        Arrival {
            job_id,
            log_id: 0,
            scheduled_at_ms: at,
            arrived_us: at * 1000 + late_us,
            wire_us: 0,
        }
    }

    #[test]
    fn records_round_trip() {
        let a = arrival(7, 12_000, 1_234);
        assert_eq!(Arrival::parse(a.to_line().trim()), Some(a));
        assert_eq!(Arrival::parse("1 2 3 4"), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = Spread::of((1..=100).collect()).unwrap();
        assert_eq!((s.p50, s.p99, s.max, s.count), (50, 99, 100, 100));
        assert_eq!(Spread::of(vec![]), None);
    }

    #[test]
    fn missed_duplicated_and_lateness() {
        let jobs = [1, 2];
        let arrivals = [
            arrival(1, 10_000, 2_000),
            arrival(2, 10_000, 4_000),
            arrival(1, 11_000, 1_000),
            arrival(1, 11_000, 9_000), // a duplicate
            arrival(1, 12_000, 0),     // outside the window
        ];
        let f = window_figures(&arrivals, &jobs, 10_000, 12_000);
        assert_eq!(f.expected, 4);
        assert_eq!(f.missed, 1); // job 2 at 11 s
        assert_eq!(f.duplicated, 1);
        assert_eq!(f.lateness.unwrap().max, 4_000);
        assert_eq!(f.arrived_in_window, 4);
        assert_eq!(f.per_second[1].missed, 1);
    }
}
