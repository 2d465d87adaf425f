//! Properties that hold for every route strategy over any non-empty candidate list.

use proptest::prelude::*;
use tickwork_core::RouteStrategy;
use tickwork_core::routing::{HashRing, Route, Router};

fn strategy() -> impl Strategy<Value = RouteStrategy> {
    prop::sample::select(RouteStrategy::ALL.to_vec())
}

/// Lists of 1..12 short addresses, duplicates allowed (a misconfigured manual list can have
/// them).
fn candidates() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("http://[a-d]{1,2}:[0-9]{1,2}/", 1..12)
}

proptest! {
    #[test]
    fn every_route_stays_within_bounds(
        seed in any::<u64>(),
        // A sequence of (strategy, job, list, time step) so state carries across calls.
        calls in prop::collection::vec(
            (strategy(), 0i64..5, candidates(), 0i64..10_000_000_000),
            1..40,
        ),
    ) {
        let mut router = Router::with_seed(seed);
        let mut now = 1_700_000_000_000i64;
        for (strategy, job, list, step) in calls {
            now += step;
            let route = router.route(strategy, job, &list, now).unwrap();
            match route {
                Route::One(i) => prop_assert!(i < list.len(), "{strategy}: {i} of {}", list.len()),
                Route::Probe { order, .. } => {
                    prop_assert_eq!(order.len(), list.len());
                    prop_assert!(order.iter().all(|&i| i < list.len()));
                }
                Route::Broadcast { total } => prop_assert_eq!(total, list.len()),
            }
        }
    }

    #[test]
    fn consistent_hash_is_stable(job in any::<i64>(), list in candidates()) {
        let ring = HashRing::new(&list);
        let picked = ring.pick(job).unwrap();
        prop_assert!(picked < list.len());
        prop_assert_eq!(HashRing::new(&list).pick(job), Some(picked));
    }
}
