//! Route strategies, one table per strategy, including how per-job state evolves.

use tickwork_core::routing::{
    HashRing, Probe, ProbeOutcome, Route, Router, STATE_TTL_MS, pick_probed, xxl_hash,
};
use tickwork_core::{Error, RouteStrategy};

const T0: i64 = 1_700_000_000_000;

fn addrs(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn abc() -> Vec<String> {
    addrs(&["http://a/", "http://b/", "http://c/"])
}

fn one(route: Result<Route, Error>) -> usize {
    match route {
        Ok(Route::One(i)) => i,
        other => panic!("expected one index, got {other:?}"),
    }
}

/// Picks `count` times for `job` at `now` and returns the chosen addresses.
fn picks(
    router: &mut Router,
    strategy: RouteStrategy,
    job: i64,
    list: &[String],
    now: i64,
    count: usize,
) -> Vec<String> {
    (0..count)
        .map(|_| list[one(router.route(strategy, job, list, now))].clone())
        .collect()
}

#[test]
fn empty_candidate_list_is_an_error_for_every_strategy() {
    let mut router = Router::with_seed(1);
    for &strategy in RouteStrategy::ALL {
        let err = router.route(strategy, 1, &[], T0).unwrap_err();
        assert_eq!(err, Error::NoExecutor, "{strategy}");
        assert_eq!(err.to_string(), "route: no executor address is registered");
    }
}

#[test]
fn first_and_last() {
    let cases: &[(&[&str], usize, usize)] = &[
        (&["http://a/"], 0, 0),
        (&["http://a/", "http://b/"], 0, 1),
        (&["http://a/", "http://b/", "http://c/", "http://d/"], 0, 3),
    ];
    let mut router = Router::with_seed(1);
    for &(list, first, last) in cases {
        let list = addrs(list);
        for job in [1, 2, 99] {
            assert_eq!(
                one(router.route(RouteStrategy::First, job, &list, T0)),
                first
            );
            assert_eq!(one(router.route(RouteStrategy::Last, job, &list, T0)), last);
        }
    }
    // Stateless strategies leave no per-job state behind.
    assert_eq!(router.tracked_jobs(), 0);
}

#[test]
fn random_is_reproducible_with_a_seed_and_covers_every_candidate() {
    let list = abc();
    let a = picks(
        &mut Router::with_seed(7),
        RouteStrategy::Random,
        1,
        &list,
        T0,
        50,
    );
    let b = picks(
        &mut Router::with_seed(7),
        RouteStrategy::Random,
        1,
        &list,
        T0,
        50,
    );
    assert_eq!(a, b);
    for address in &list {
        assert!(a.contains(address), "{address} never picked in 50 draws");
    }
}

#[test]
fn round_robin_cycles_from_a_random_start() {
    let list = abc();
    for seed in 0..20 {
        let mut router = Router::with_seed(seed);
        let got: Vec<usize> = (0..7)
            .map(|_| one(router.route(RouteStrategy::Round, 5, &list, T0)))
            .collect();
        for pair in got.windows(2) {
            assert_eq!(pair[1], (pair[0] + 1) % 3, "seed {seed}: {got:?}");
        }
    }
}

#[test]
fn round_robin_starts_differ_between_jobs_and_counters_are_per_job() {
    let list = addrs(&[
        "http://a/",
        "http://b/",
        "http://c/",
        "http://d/",
        "http://e/",
    ]);
    let mut router = Router::with_seed(3);
    let starts: Vec<usize> = (0..30)
        .map(|job| one(router.route(RouteStrategy::Round, job, &list, T0)))
        .collect();
    let distinct: std::collections::HashSet<_> = starts.iter().collect();
    assert!(distinct.len() > 1, "all jobs started on the same executor");
    // Job 0 continues from its own counter, untouched by the 29 others.
    assert_eq!(
        one(router.route(RouteStrategy::Round, 0, &list, T0)),
        (starts[0] + 1) % 5
    );
}

#[test]
fn round_robin_follows_a_changed_list_size() {
    let mut router = Router::with_seed(11);
    let three = abc();
    let first = one(router.route(RouteStrategy::Round, 1, &three, T0));
    let two = addrs(&["http://a/", "http://b/"]);
    let second = one(router.route(RouteStrategy::Round, 1, &two, T0));
    assert!(second < 2);
    // The counter went on by one; only the modulus changed.
    let third = one(router.route(RouteStrategy::Round, 1, &three, T0));
    assert_eq!(third, (first + 2) % 3);
}

#[test]
fn least_frequently_used_balances_picks() {
    let list = abc();
    for seed in 0..10 {
        let mut router = Router::with_seed(seed);
        let mut counts = [0usize; 3];
        for _ in 0..300 {
            counts[one(router.route(RouteStrategy::LeastFrequentlyUsed, 1, &list, T0))] += 1;
        }
        // The counts (random start + picks) end within 1 of each other and the starts differ
        // by at most 2, so the picks differ by at most 3.
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(max - min <= 3, "seed {seed}: {counts:?}");
    }
}

#[test]
fn least_frequently_used_single_candidate_always_wins() {
    let list = addrs(&["http://only/"]);
    let mut router = Router::with_seed(1);
    for _ in 0..10 {
        assert_eq!(
            one(router.route(RouteStrategy::LeastFrequentlyUsed, 1, &list, T0)),
            0
        );
    }
}

#[test]
fn least_frequently_used_favours_a_new_address_and_drops_vanished_ones() {
    let mut router = Router::with_seed(5);
    let two = addrs(&["http://a/", "http://b/"]);
    for _ in 0..100 {
        router
            .route(RouteStrategy::LeastFrequentlyUsed, 1, &two, T0)
            .unwrap();
    }
    // `c` joins with a count below 3, far behind the ~50 of the others: it takes the picks.
    let three = abc();
    let next = picks(
        &mut router,
        RouteStrategy::LeastFrequentlyUsed,
        1,
        &three,
        T0,
        10,
    );
    assert!(next.iter().all(|a| a == "http://c/"), "{next:?}");
    // `a` leaves and comes back: it was forgotten, so it restarts low and is picked at once.
    let without_a = addrs(&["http://b/", "http://c/"]);
    router
        .route(RouteStrategy::LeastFrequentlyUsed, 1, &without_a, T0)
        .unwrap();
    let back = picks(
        &mut router,
        RouteStrategy::LeastFrequentlyUsed,
        1,
        &three,
        T0,
        1,
    );
    assert_eq!(back, ["http://a/"]);
}

#[test]
fn least_recently_used_rotates_in_list_order() {
    let list = abc();
    let mut router = Router::with_seed(1);
    let got = picks(
        &mut router,
        RouteStrategy::LeastRecentlyUsed,
        1,
        &list,
        T0,
        7,
    );
    assert_eq!(
        got,
        [
            "http://a/",
            "http://b/",
            "http://c/",
            "http://a/",
            "http://b/",
            "http://c/",
            "http://a/"
        ]
    );
}

#[test]
fn least_recently_used_state_evolution() {
    // Each step: the candidate list, then the expected picks in a row.
    let steps: &[(&[&str], &[&str])] = &[
        // Order [a, b]: `a` is picked and moves behind `b`.
        (&["http://a/", "http://b/"], &["http://a/"]),
        // A new address is appended behind the existing ones: [b, a, c].
        (
            &["http://a/", "http://b/", "http://c/"],
            &["http://b/", "http://a/", "http://c/"],
        ),
        // `b` vanishes and leaves the rotation: [a, c].
        (&["http://a/", "http://c/"], &["http://a/", "http://c/"]),
        // `b` returns as a new address, at the back: [a, c, b].
        (
            &["http://a/", "http://b/", "http://c/"],
            &["http://a/", "http://c/", "http://b/", "http://a/"],
        ),
    ];
    let mut router = Router::with_seed(1);
    for (n, &(list, expected)) in steps.iter().enumerate() {
        let list = addrs(list);
        let got = picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            1,
            &list,
            T0,
            expected.len(),
        );
        assert_eq!(got, expected, "step {n}");
    }
}

#[test]
fn least_recently_used_is_per_job() {
    let list = abc();
    let mut router = Router::with_seed(1);
    assert_eq!(
        picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            1,
            &list,
            T0,
            2
        ),
        ["http://a/", "http://b/"]
    );
    assert_eq!(
        picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            2,
            &list,
            T0,
            1
        ),
        ["http://a/"]
    );
    assert_eq!(
        picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            1,
            &list,
            T0,
            1
        ),
        ["http://c/"]
    );
}

#[test]
fn per_job_state_starts_over_after_24_hours() {
    let list = abc();
    let mut router = Router::with_seed(1);
    picks(
        &mut router,
        RouteStrategy::LeastRecentlyUsed,
        1,
        &list,
        T0,
        2,
    );
    // Still within the day: the rotation goes on.
    assert_eq!(
        picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            1,
            &list,
            T0 + STATE_TTL_MS - 1,
            1
        ),
        ["http://c/"]
    );
    // A day after the state was born it starts over, even though it was used in between.
    assert_eq!(
        picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            1,
            &list,
            T0 + STATE_TTL_MS,
            1
        ),
        ["http://a/"]
    );
}

#[test]
fn state_of_idle_jobs_is_forgotten() {
    let list = abc();
    let mut router = Router::with_seed(1);
    for job in 0..1000 {
        router
            .route(RouteStrategy::Round, job, &list, T0 + job)
            .unwrap();
    }
    assert_eq!(router.tracked_jobs(), 1000);
    // Job 999 keeps being used; the others go idle.
    router
        .route(RouteStrategy::Round, 999, &list, T0 + STATE_TTL_MS / 2)
        .unwrap();
    // One route a day later sweeps: only the job touched within the last day survives
    // (plus the job routed now).
    router
        .route(
            RouteStrategy::LeastRecentlyUsed,
            5000,
            &list,
            T0 + STATE_TTL_MS + 1000,
        )
        .unwrap();
    assert_eq!(router.tracked_jobs(), 2);
    router.forget_job(5000);
    assert_eq!(router.tracked_jobs(), 1);
    router.sweep(T0 + 2 * STATE_TTL_MS);
    assert_eq!(router.tracked_jobs(), 0);
}

#[test]
fn a_clock_step_backwards_forgets_nothing() {
    let list = abc();
    let mut router = Router::with_seed(1);
    picks(
        &mut router,
        RouteStrategy::LeastRecentlyUsed,
        1,
        &list,
        T0,
        1,
    );
    assert_eq!(
        picks(
            &mut router,
            RouteStrategy::LeastRecentlyUsed,
            1,
            &list,
            T0 - 60_000,
            1
        ),
        ["http://b/"]
    );
    router.sweep(T0 - 120_000);
    assert_eq!(router.tracked_jobs(), 1);
}

#[test]
fn xxl_hash_vectors() {
    let cases: &[(&str, u32)] = &[
        ("1", 943_901_380),
        ("2", 2_373_066_440),
        ("SHARD-http://127.0.0.1:9999/-NODE-0", 2_087_608_106),
    ];
    for &(input, expected) in cases {
        assert_eq!(xxl_hash(input), expected, "hash({input:?})");
    }
}

#[test]
fn consistent_hash_matches_the_java_admin() {
    let list = addrs(&[
        "http://127.0.0.1:9997/",
        "http://127.0.0.1:9998/",
        "http://127.0.0.1:9999/",
    ]);
    let cases: &[(i64, &str)] = &[
        (1, "http://127.0.0.1:9999/"),
        (2, "http://127.0.0.1:9999/"),
        (3, "http://127.0.0.1:9999/"),
        (4, "http://127.0.0.1:9998/"),
        (5, "http://127.0.0.1:9998/"),
        (6, "http://127.0.0.1:9999/"),
    ];
    let mut router = Router::with_seed(1);
    let ring = HashRing::new(&list);
    for &(job, expected) in cases {
        // Twice through the router: the second time the ring comes from the cache.
        for _ in 0..2 {
            let got = one(router.route(RouteStrategy::ConsistentHash, job, &list, T0));
            assert_eq!(list[got], expected, "job {job}");
        }
        assert_eq!(ring.pick(job).map(|i| list[i].as_str()), Some(expected));
    }
}

#[test]
fn consistent_hash_moves_only_the_jobs_of_a_removed_address() {
    let full = addrs(&[
        "http://127.0.0.1:9997/",
        "http://127.0.0.1:9998/",
        "http://127.0.0.1:9999/",
    ]);
    let reduced = addrs(&["http://127.0.0.1:9998/", "http://127.0.0.1:9999/"]);
    let (full_ring, reduced_ring) = (HashRing::new(&full), HashRing::new(&reduced));
    for job in 1..500 {
        let before = &full[full_ring.pick(job).unwrap()];
        let after = &reduced[reduced_ring.pick(job).unwrap()];
        if before != "http://127.0.0.1:9997/" {
            assert_eq!(before, after, "job {job} moved");
        }
    }
}

#[test]
fn consistent_hash_of_an_empty_ring_is_none() {
    assert_eq!(HashRing::new(&[]).pick(1), None);
}

#[test]
fn failover_busyover_and_broadcast_routes() {
    let list = abc();
    let mut router = Router::with_seed(1);
    let cases = [
        (
            RouteStrategy::Failover,
            Route::Probe {
                probe: Probe::Beat,
                order: vec![0, 1, 2],
            },
        ),
        (
            RouteStrategy::Busyover,
            Route::Probe {
                probe: Probe::IdleBeat,
                order: vec![0, 1, 2],
            },
        ),
        (
            RouteStrategy::ShardingBroadcast,
            Route::Broadcast { total: 3 },
        ),
    ];
    for (strategy, expected) in cases {
        assert_eq!(router.route(strategy, 1, &list, T0).unwrap(), expected);
    }
    assert_eq!(Probe::Beat.path(), "/beat");
    assert_eq!(Probe::IdleBeat.path(), "/idleBeat");
}

/// A probe answer in a table: (candidate index, code, message).
type Answer = (usize, i32, &'static str);

#[test]
fn probe_picks_the_first_ok_in_order() {
    let list = abc();
    // (outcomes as (index, code, msg), expected index, expected report)
    let cases: &[(&[Answer], usize, &str)] = &[
        (&[(0, 200, "")], 0, "beat http://a/: code 200, msg "),
        (
            &[(0, 500, "connection refused"), (1, 200, "ok")],
            1,
            "beat http://a/: code 500, msg connection refused; beat http://b/: code 200, msg ok",
        ),
        // Answers are judged in the order given, not by index.
        (
            &[(2, 200, ""), (0, 200, "")],
            2,
            "beat http://c/: code 200, msg ",
        ),
        // Probes after the winner are not part of the report.
        (
            &[(0, 500, "x"), (1, 200, ""), (2, 200, "")],
            1,
            "beat http://a/: code 500, msg x; beat http://b/: code 200, msg ",
        ),
    ];
    for &(outcomes, index, report) in cases {
        let outcomes: Vec<ProbeOutcome> = outcomes
            .iter()
            .map(|&(i, code, msg)| ProbeOutcome::new(i, code, msg))
            .collect();
        let pick = pick_probed(Probe::Beat, &list, &outcomes).unwrap();
        assert_eq!(pick.index, index);
        assert_eq!(pick.report, report);
    }
}

#[test]
fn probe_failure_lists_every_probe() {
    let list = abc();
    let outcomes = [
        ProbeOutcome::new(0, 500, "busy"),
        ProbeOutcome::new(1, 500, "connection refused"),
        ProbeOutcome::new(2, 404, "not found"),
    ];
    let err = pick_probed(Probe::IdleBeat, &list, &outcomes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "route: no executor passed the idle beat check: \
         idle beat http://a/: code 500, msg busy; \
         idle beat http://b/: code 500, msg connection refused; \
         idle beat http://c/: code 404, msg not found"
    );
}

#[test]
fn probe_edge_cases() {
    let list = abc();
    let err = pick_probed(Probe::Beat, &list, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "route: no executor passed the beat check: no executor was probed"
    );
    // An index past the list is never chosen, and says so.
    let err = pick_probed(Probe::Beat, &list, &[ProbeOutcome::new(7, 200, "")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "route: no executor passed the beat check: \
         beat candidate #7 (out of range): code 200, msg "
    );
}

#[test]
fn runs_wait_for_a_slot_by_hand_first_then_by_priority() {
    use tickwork_core::TriggerType::{Api, Cron, Manual, Parent, Retry};
    use tickwork_core::routing::slot_rank;
    // Each case ranks strictly above the next.
    let order = [
        (Manual, 5),
        (Api, 0),
        (Manual, i32::MIN),
        (Cron, i32::MAX),
        (Retry, 10),
        (Cron, 0),
        (Parent, -1),
        (Cron, i32::MIN),
    ];
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            slot_rank(a.0, a.1) > slot_rank(b.0, b.1),
            "{a:?} must go before {b:?}"
        );
    }
    assert_eq!(slot_rank(Manual, 3), slot_rank(Api, 3));
}
