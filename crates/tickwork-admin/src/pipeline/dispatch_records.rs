//! Dispatch records held for their run's callback: the ledger keeps an accepted run's record
//! for `dispatch.record_hold` (250 ms by default), and a callback that arrives meanwhile takes
//! it, so that the run's dispatch and result land in one update of its row (each update of a
//! run writes a new row version and an entry in every index of the runs table). A record
//! nobody took is written on its own.
//!
//! Under load the hold stretches: an executor posts its results one request at a time, so a
//! run's callback waits for the answer to the request before it, then for its own. At 20,000
//! fires a second on PostgreSQL a 250 ms hold saw 22-71% of the records written alone, one
//! more update of each of those runs for the server that was already the bound. The hold in
//! force is the configured one plus twice the time the last results waited for their answer
//! (the results writer's wait for a burst and its write), at most [`HOLD_STRETCH_MAX`] times
//! the configured one.
//!
//! Holding a record lengthens the time an accepted run stays `sending` in the database by at
//! most the hold in force, or until the write of the callback that took it: a node that dies
//! in that time leaves it to the maybe-sent resolution, as it does a run whose record had not
//! been written yet.
//!
//! A result can also come before its record: an executor that calls back before it answers
//! the call (XXL-JOB 3.5 does). The run then ended without the executor that ran it, which its
//! log is read from; its record is written as soon as it comes, not held, and so is one that
//! came while the result was being written.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tickwork_store::Dispatched;

/// Records held at most: past it the oldest are written at once, whatever their age.
const MAX_HELD: usize = 50_000;

/// How long a run whose result came first waits for its record: longer than any call to an
/// executor lasts. A record that never comes (the call failed) is forgotten after it.
const ENDED_FIRST_KEPT: Duration = Duration::from_secs(120);

/// How often the runs whose result came first are looked over for those past
/// [`ENDED_FIRST_KEPT`]. The ledger takes due records many times a second, and under load
/// there can be tens of thousands of such runs: going over them every time cost the admin
/// about a twelfth of its CPU at 20,000 fires a second.
const ENDED_FIRST_PRUNED_EVERY: Duration = Duration::from_secs(1);

/// The hold in force is at most this many times the configured one.
const HOLD_STRETCH_MAX: u32 = 4;

/// The hold in force: `configured` plus twice `last_answer`, how long the last results waited
/// for their answer, at most [`HOLD_STRETCH_MAX`] times `configured`.
fn hold_in_force(configured: Duration, last_answer: Duration) -> Duration {
    (configured + last_answer * 2).min(configured * HOLD_STRETCH_MAX)
}

/// The records held, by run, and in the order they came.
#[derive(Default)]
pub(crate) struct DispatchRecords {
    state: Mutex<Held>,
    /// How long the last results written waited for their answer, in microseconds.
    last_answer_us: AtomicU64,
}

#[derive(Default)]
struct Held {
    by_run: HashMap<i64, Dispatched>,
    /// When each record came, oldest first; a record taken early leaves its entry behind.
    order: VecDeque<(Instant, i64)>,
    /// The runs whose result was written before their record came, and since when.
    ended_first: HashMap<i64, Instant>,
    /// When `ended_first` is next looked over; `None` before the first time.
    ended_first_pruned_next: Option<Instant>,
}

impl DispatchRecords {
    /// Holds `records`, which came at `now`, but for those of runs whose result was written
    /// first: those are returned, to be written at once.
    pub(crate) fn hold(&self, records: Vec<Dispatched>, now: Instant) -> Vec<Dispatched> {
        let mut held = self.state.lock().expect("dispatch records lock");
        if held.ended_first.is_empty() {
            held.hold(records, now);
            return Vec::new();
        }
        let (now_due, to_hold): (Vec<Dispatched>, Vec<Dispatched>) = records
            .into_iter()
            .partition(|d| held.ended_first.contains_key(&d.run_id));
        for d in &now_due {
            held.ended_first.remove(&d.run_id);
        }
        held.hold(to_hold, now);
        now_due
    }

    /// Notes the runs whose result was written at `now` before their record came. A record
    /// that came while the result was being written (after the callback looked for it, before
    /// its commit) is held already: those are returned, to be written at once.
    pub(crate) fn ended_first(
        &self,
        run_ids: impl Iterator<Item = i64>,
        now: Instant,
    ) -> Vec<Dispatched> {
        let mut held = self.state.lock().expect("dispatch records lock");
        let mut came = Vec::new();
        for id in run_ids {
            if let Some(d) = held.by_run.remove(&id) {
                // Its entry in `order` stays behind, as for a record a callback took.
                came.push(d);
            } else if held.ended_first.len() < MAX_HELD {
                held.ended_first.insert(id, now);
            }
        }
        came
    }

    /// Takes the records of the runs among `run_ids` (a callback's).
    pub(crate) fn take_for(&self, run_ids: impl Iterator<Item = i64>) -> Vec<Dispatched> {
        let mut held = self.state.lock().expect("dispatch records lock");
        if held.by_run.is_empty() {
            return Vec::new();
        }
        run_ids.filter_map(|id| held.by_run.remove(&id)).collect()
    }

    /// Puts back records taken for a write that failed.
    pub(crate) fn put_back(&self, records: Vec<Dispatched>, now: Instant) {
        self.state
            .lock()
            .expect("dispatch records lock")
            .hold(records, now);
    }

    /// Notes how long the results just written waited for their answer (the results writer's
    /// wait and its write): the next holds stretch by twice it.
    pub(crate) fn results_written(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.last_answer_us.store(us, Ordering::Relaxed);
    }

    /// Takes the records held for the hold in force (`configured`, stretched by the last
    /// results' wait for their answer) or longer, and the oldest beyond [`MAX_HELD`]; with
    /// them, when the next one is due.
    pub(crate) fn take_due(
        &self,
        now: Instant,
        configured: Duration,
    ) -> (Vec<Dispatched>, Option<Instant>) {
        let last_answer = Duration::from_micros(self.last_answer_us.load(Ordering::Relaxed));
        let hold = hold_in_force(configured, last_answer);
        let mut held = self.state.lock().expect("dispatch records lock");
        if held.ended_first_pruned_next.is_none_or(|next| now >= next) {
            held.ended_first
                .retain(|_, at| now.saturating_duration_since(*at) < ENDED_FIRST_KEPT);
            held.ended_first_pruned_next = Some(now + ENDED_FIRST_PRUNED_EVERY);
        }
        let mut due = Vec::new();
        while let Some(&(at, run_id)) = held.order.front() {
            if now.saturating_duration_since(at) < hold && held.by_run.len() <= MAX_HELD {
                return (due, Some(at + hold));
            }
            held.order.pop_front();
            // Nothing when a callback took the record. A record put back after a failed
            // write has a second entry: it goes with the first, earlier than it might.
            if let Some(d) = held.by_run.remove(&run_id) {
                due.push(d);
            }
        }
        (due, None)
    }

    /// Takes every record held.
    pub(crate) fn take_all(&self) -> Vec<Dispatched> {
        let mut held = self.state.lock().expect("dispatch records lock");
        held.order.clear();
        held.ended_first.clear();
        held.by_run.drain().map(|(_, d)| d).collect()
    }

    /// How many records are held.
    pub(crate) fn len(&self) -> usize {
        self.state
            .lock()
            .expect("dispatch records lock")
            .by_run
            .len()
    }
}

impl Held {
    fn hold(&mut self, records: Vec<Dispatched>, now: Instant) {
        for d in records {
            self.order.push_back((now, d.run_id));
            self.by_run.insert(d.run_id, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run_id: i64) -> Dispatched {
        Dispatched {
            run_id,
            address: "http://127.0.0.1:9999".into(),
            trigger_code: 200,
            trigger_msg: None,
            at: 1,
        }
    }

    fn ids(records: &[Dispatched]) -> Vec<i64> {
        let mut ids: Vec<i64> = records.iter().map(|d| d.run_id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn the_hold_stretches_by_twice_the_last_results_wait_for_their_answer_up_to_four_times() {
        let ms = Duration::from_millis;
        for (configured, last_answer, in_force) in [
            (250, 0, 250),
            (250, 2, 254),
            (250, 100, 450),
            (250, 375, 1_000),
            (250, 600, 1_000),
            (5_000, 30_000, 20_000),
            (0, 600, 0),
        ] {
            assert_eq!(
                hold_in_force(ms(configured), ms(last_answer)),
                ms(in_force),
                "{configured} ms held, last answer after {last_answer} ms"
            );
        }
    }

    #[test]
    fn records_fall_due_later_while_results_wait_long_for_their_answer() {
        let hold = Duration::from_millis(250);
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        held.hold(vec![record(1)], t0);
        held.results_written(Duration::from_millis(300));
        let (due, next) = held.take_due(t0 + hold, hold);
        assert_eq!(
            (ids(&due), next),
            (vec![], Some(t0 + Duration::from_millis(850)))
        );
        held.results_written(Duration::from_millis(1));
        assert_eq!(ids(&held.take_due(t0 + hold * 2, hold).0), [1]);
    }

    #[test]
    fn a_callback_takes_its_records_and_the_rest_fall_due_after_the_hold() {
        let hold = Duration::from_millis(250);
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        held.hold((1..=3).map(record).collect(), t0);
        held.hold(vec![record(4)], t0 + Duration::from_millis(100));
        assert_eq!(held.len(), 4);

        // A callback of runs 2 and 9: only 2 was held.
        assert_eq!(ids(&held.take_for([2, 9].into_iter())), [2]);
        assert_eq!(held.take_for([2].into_iter()), []);

        // Before the hold nothing is due; the next is due at the oldest's end of hold.
        let (due, next) = held.take_due(t0 + Duration::from_millis(249), hold);
        assert_eq!((ids(&due), next), (vec![], Some(t0 + hold)));
        let (due, next) = held.take_due(t0 + hold, hold);
        assert_eq!(
            (ids(&due), next),
            (vec![1, 3], Some(t0 + Duration::from_millis(350)))
        );
        let (due, next) = held.take_due(t0 + Duration::from_secs(1), hold);
        assert_eq!((ids(&due), next), (vec![4], None));
        assert_eq!(held.len(), 0);
    }

    #[test]
    fn the_record_of_a_run_whose_result_came_first_is_not_held() {
        let hold = Duration::from_millis(250);
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        assert_eq!(held.ended_first([5, 6].into_iter(), t0), []);
        assert_eq!(ids(&held.hold(vec![record(4), record(5)], t0)), [5]);
        assert_eq!(held.len(), 1);
        // Once: another record of run 5 is held as any.
        assert_eq!(held.hold(vec![record(5)], t0), []);
        assert_eq!(held.len(), 2);
        // Run 6's record never came: forgotten after a while, its run held as any then.
        let later = t0 + ENDED_FIRST_KEPT;
        assert_eq!(ids(&held.take_due(later, hold).0), [4, 5]);
        assert_eq!(held.hold(vec![record(6)], later), []);
        assert_eq!(held.len(), 1);
    }

    #[test]
    fn runs_whose_result_came_first_are_looked_over_once_a_second_not_at_every_take() {
        let hold = Duration::from_millis(250);
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        assert_eq!(held.ended_first([6].into_iter(), t0), []);
        // Looked over half a second before run 6 is past keeping: it stays.
        let before = t0 + ENDED_FIRST_KEPT - Duration::from_millis(500);
        held.take_due(before, hold);
        // Past keeping, but the next look is a second after the last.
        held.take_due(t0 + ENDED_FIRST_KEPT, hold);
        assert_eq!(held.state.lock().unwrap().ended_first.len(), 1);
        held.take_due(before + ENDED_FIRST_PRUNED_EVERY, hold);
        assert_eq!(held.state.lock().unwrap().ended_first.len(), 0);
        // Forgotten: its record is held as any.
        assert_eq!(held.hold(vec![record(6)], t0), []);
        assert_eq!(held.len(), 1);
    }

    #[test]
    fn a_record_that_came_while_its_runs_result_was_written_is_not_held() {
        let hold = Duration::from_millis(250);
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        // The callback looked for run 7's record before it came, and wrote the result; the
        // record came before that write's end.
        assert_eq!(held.take_for([7].into_iter()), []);
        assert_eq!(held.hold(vec![record(7), record(8)], t0), []);
        assert_eq!(ids(&held.ended_first([7].into_iter(), t0)), [7]);
        assert_eq!(held.len(), 1);
        // Not noted as ended first: it came, and a second record of run 7 is held as any.
        assert_eq!(held.hold(vec![record(7)], t0), []);
        let (due, _) = held.take_due(t0 + hold, hold);
        assert_eq!(ids(&due), [7, 8]);
    }

    #[test]
    fn records_put_back_after_a_failed_write_are_written_later() {
        let hold = Duration::from_millis(250);
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        held.hold(vec![record(1), record(2)], t0);
        let taken = held.take_for([1, 2].into_iter());
        held.put_back(taken, t0 + Duration::from_millis(10));
        assert_eq!(held.len(), 2);
        let (due, _) = held.take_due(t0 + hold, hold);
        assert_eq!(ids(&due), [1, 2]);
        assert_eq!(held.take_due(t0 + Duration::from_secs(1), hold).0, []);
    }

    #[test]
    fn no_hold_makes_every_record_due_at_once_and_the_cap_bounds_what_waits() {
        let t0 = Instant::now();
        let held = DispatchRecords::default();
        held.hold(vec![record(1)], t0);
        assert_eq!(ids(&held.take_due(t0, Duration::ZERO).0), [1]);

        let many = (0..MAX_HELD as i64 + 3).map(record).collect();
        held.hold(many, t0);
        let (due, next) = held.take_due(t0, Duration::from_secs(1));
        assert_eq!(ids(&due), [0, 1, 2]);
        assert_eq!(next, Some(t0 + Duration::from_secs(1)));
        assert_eq!(held.take_all().len(), MAX_HELD);
        assert_eq!(held.len(), 0);
    }
}
