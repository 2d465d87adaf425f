//! The record of run ids (`logId`) this executor accepted on `/run`: a `/run` of an id in it is
//! not run again, and `/tickwork/accepted` answers from it, so that an admin that lost track of
//! a run can ask before sending it again.
//!
//! Bounded in memory: past its capacity the oldest ids are evicted, and the record says from
//! which instant it is complete (`record_since`): the executor's start, or the accept instant
//! of the newest id it evicted.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};

struct Inner {
    ids: HashSet<i64>,
    /// Accepted ids with their accept instant (epoch ms), oldest first.
    order: VecDeque<(i64, i64)>,
    since: i64,
}

/// The accepted run ids, at most `capacity` of them.
pub(crate) struct AcceptedRecord {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl AcceptedRecord {
    /// An empty record, complete from `start_ms`.
    pub(crate) fn new(capacity: usize, start_ms: i64) -> Self {
        AcceptedRecord {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner {
                ids: HashSet::new(),
                order: VecDeque::new(),
                since: start_ms,
            }),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every change below is completed before the guard drops; a panic cannot leave one half
        // done.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn contains(&self, log_id: i64) -> bool {
        self.inner().ids.contains(&log_id)
    }

    /// Records `log_id` as accepted at `now_ms`, evicting the oldest ids beyond the capacity.
    pub(crate) fn insert(&self, log_id: i64, now_ms: i64) {
        let mut inner = self.inner();
        if !inner.ids.insert(log_id) {
            return;
        }
        inner.order.push_back((log_id, now_ms));
        while inner.order.len() > self.capacity {
            if let Some((old, at)) = inner.order.pop_front() {
                inner.ids.remove(&old);
                // Never backwards, even when the wall clock was set back in between.
                inner.since = inner.since.max(at);
            }
        }
    }

    /// The ids among `asked` that are in the record (in the order asked, each once), and the
    /// instant from which the record is complete.
    pub(crate) fn query(&self, asked: &[i64]) -> (Vec<i64>, i64) {
        let inner = self.inner();
        let mut seen = HashSet::new();
        let accepted = asked
            .iter()
            .copied()
            .filter(|id| inner.ids.contains(id) && seen.insert(*id))
            .collect();
        (accepted, inner.since)
    }
}

/// The wall clock in epoch ms: the instants the record gives are compared with the admins'.
pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

#[cfg(test)]
mod tests {
    use super::AcceptedRecord;

    #[test]
    fn lists_the_accepted_ids_among_those_asked() {
        let r = AcceptedRecord::new(10, 1_000);
        r.insert(5, 1_001);
        r.insert(7, 1_002);
        r.insert(5, 1_003);
        assert!(r.contains(5) && r.contains(7) && !r.contains(6));
        assert_eq!(r.query(&[7, 6, 5, 7]), (vec![7, 5], 1_000));
        assert_eq!(r.query(&[]), (vec![], 1_000));
    }

    #[test]
    fn past_the_capacity_the_oldest_go_and_record_since_moves_to_them() {
        let r = AcceptedRecord::new(2, 1_000);
        r.insert(1, 1_010);
        r.insert(2, 1_020);
        r.insert(3, 1_030);
        assert_eq!(r.query(&[1, 2, 3]), (vec![2, 3], 1_010));
        r.insert(4, 1_040);
        assert_eq!(r.query(&[1, 2, 3, 4]), (vec![3, 4], 1_020));
        // The wall clock set back: the instant does not move backwards.
        r.insert(5, 900);
        r.insert(6, 901);
        assert_eq!(r.query(&[3, 4, 5, 6]), (vec![5, 6], 1_040));
    }
}
