//! Prometheus metrics, rendered by hand in the text exposition format 0.0.4: counters from
//! [`crate::Stats`], the dispatch lateness histogram, queue depths, and a few database gauges
//! (runs by state today, live nodes and executors) read at most every few seconds.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tickwork_core::run::RunState;
use tickwork_store::{AlarmKind, DeliveryFilter, DeliveryState, PageReq, TimeRange};
use tokio::sync::Mutex;

use crate::Scheduler;
use crate::pipeline::dispatch::DispatchOutcome;
use crate::timer::now_ms;

/// How long the database gauges are reused, at least: longer when reading them took long
/// (`runs_today` counts the day's runs), as a monitor waits after a long round.
const DB_GAUGES_TTL: Duration = Duration::from_secs(5);

/// Upper bounds of the lateness buckets, in milliseconds.
const LATENESS_BOUNDS_MS: [i64; 14] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000,
];

/// A histogram of milliseconds, exposed in seconds.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; LATENESS_BOUNDS_MS.len() + 1],
    count: AtomicU64,
    sum_ms: AtomicU64,
}

impl Histogram {
    /// Records one value; a negative one (a clock step) counts as 0.
    pub(crate) fn observe_ms(&self, ms: i64) {
        let ms = ms.max(0);
        let i = LATENESS_BOUNDS_MS.partition_point(|&b| b < ms);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ms.fetch_add(ms as u64, Ordering::Relaxed);
    }

    /// Count, mean and the bucket upper bounds of the median and the 99th percentile (`None`
    /// in the `+Inf` bucket); `None` before the first value.
    pub(crate) fn summary(&self) -> Option<LatenessSummary> {
        let count = self.count.load(Ordering::Relaxed);
        if count == 0 {
            return None;
        }
        let quantile = |q: f64| {
            let rank = (q * count as f64).ceil().max(1.0) as u64;
            let mut cumulative = 0;
            for (i, bucket) in self.buckets.iter().enumerate() {
                cumulative += bucket.load(Ordering::Relaxed);
                if cumulative >= rank {
                    return LATENESS_BOUNDS_MS.get(i).copied();
                }
            }
            None
        };
        Some(LatenessSummary {
            count,
            mean_ms: self.sum_ms.load(Ordering::Relaxed) as f64 / count as f64,
            p50_ms: quantile(0.5),
            p99_ms: quantile(0.99),
        })
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = match LATENESS_BOUNDS_MS.get(i) {
                Some(&b) => seconds(b),
                None => "+Inf".to_owned(),
            };
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_ms.load(Ordering::Relaxed) as i64;
        let _ = writeln!(out, "{name}_sum {}", seconds(sum));
        let _ = writeln!(out, "{name}_count {}", self.count.load(Ordering::Relaxed));
    }
}

fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// What the dashboard shows of the lateness histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LatenessSummary {
    pub(crate) count: u64,
    pub(crate) mean_ms: f64,
    pub(crate) p50_ms: Option<i64>,
    pub(crate) p99_ms: Option<i64>,
}

/// Why a trigger failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DispatchCause {
    /// Routing found no executor (none live, or every probe failed).
    NoExecutor,
    /// The executor answered and refused the run.
    Refused,
    /// The call did not get an answer: connection refused, timeout, bad HTTP.
    Transport,
}

impl DispatchCause {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DispatchCause::NoExecutor => "no_executor",
            DispatchCause::Refused => "refused",
            DispatchCause::Transport => "transport",
        }
    }

    /// Reads the cause from a failed outcome. The executor client reports transport
    /// failures as code 500 with one of a few fixed phrases, which are matched here (a unit
    /// test pins them).
    pub(crate) fn of(outcome: &DispatchOutcome) -> DispatchCause {
        if outcome.address.is_none() {
            DispatchCause::NoExecutor
        } else if crate::executor_client::TRANSPORT_PHRASES
            .iter()
            .any(|p| outcome.trigger_msg.contains(p))
        {
            DispatchCause::Transport
        } else {
            DispatchCause::Refused
        }
    }
}

/// What the database says, cached for [`DB_GAUGES_TTL`].
#[derive(Debug, Clone, Default)]
struct DbGauges {
    runs_today: Vec<(RunState, u64)>,
    nodes: usize,
    nodes_live: usize,
    executors_live: usize,
    alarms_pending: u64,
}

/// The admin's metrics beyond the plain counters of [`crate::Stats`].
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Dispatch instant minus scheduled instant.
    pub(crate) lateness: Histogram,
    /// Runs sent to each lane (fast, slow) and not yet taken by it.
    lanes: [AtomicI64; 2],
    /// Outcomes waiting for the ledger.
    ledger: AtomicI64,
    /// The database gauges, until when they are reused.
    db: Mutex<Option<(Instant, Result<DbGauges, String>)>>,
    /// Alarm sends per channel kind (in `AlarmKind::ALL` order) and outcome (in
    /// `ALARM_OUTCOMES` order).
    alarm_sends: [[AtomicU64; 3]; 6],
}

/// The outcomes of an alarm send attempt.
const ALARM_OUTCOMES: [&str; 3] = ["sent", "retry", "failed"];

impl Metrics {
    pub(crate) fn lane_sent(&self, lane: usize) {
        self.lanes[lane].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn lane_received(&self, lane: usize) {
        self.lanes[lane].fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn ledger_sent(&self) {
        self.ledger.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one alarm send of `kind`; `outcome` indexes [`ALARM_OUTCOMES`].
    pub(crate) fn alarm_send(&self, kind: AlarmKind, outcome: usize) {
        let k = AlarmKind::ALL.iter().position(|&x| x == kind).unwrap_or(0);
        self.alarm_sends[k][outcome.min(2)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ledger_received(&self, n: usize) {
        self.ledger.fetch_sub(n as i64, Ordering::Relaxed);
    }

    /// Runs waiting in the fast lane for a dispatch slot: a burst is being sent.
    pub(crate) fn fast_lane_queued(&self) -> bool {
        self.lanes[0].load(Ordering::Relaxed) > 0
    }

    /// Runs waiting in the lanes and outcomes waiting for the ledger.
    pub(crate) fn queued(&self) -> usize {
        let n = self.ledger.load(Ordering::Relaxed)
            + self
                .lanes
                .iter()
                .map(|l| l.load(Ordering::Relaxed))
                .sum::<i64>();
        usize::try_from(n).unwrap_or(0)
    }
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// Reads the database gauges (or the cached ones).
async fn db_gauges(admin: &Scheduler) -> Result<DbGauges, String> {
    let metrics = &admin.inner.metrics;
    let mut cached = metrics.db.lock().await;
    if let Some((until, gauges)) = &*cached
        && Instant::now() < *until
    {
        return gauges.clone();
    }
    let started = Instant::now();
    let read = async {
        let config = &admin.inner.config;
        let store = &admin.inner.store;
        let now = now_ms();
        let day_start = crate::pipeline::monitor::report_days(&config.default_time_zone, now)
            .ok()
            .and_then(|days| days.first().map(|d| d.0))
            .unwrap_or(now - now.rem_euclid(86_400_000));
        let runs_today = store
            .runs_state_counts(TimeRange {
                from: Some(day_start),
                to: None,
            })
            .await?;
        let nodes = store.nodes_list().await?;
        let dead_after = config.cluster.node_dead_after.as_millis() as i64;
        let nodes_live = nodes
            .iter()
            .filter(|n| n.heartbeat_at >= now - dead_after)
            .count();
        let alive_since = now - config.registry.dead_after.as_millis() as i64;
        let executors_live = store
            .registry_list()
            .await?
            .iter()
            .filter(|e| e.updated_at >= alive_since)
            .count();
        let alarms_pending = store
            .alarm_deliveries_list(DeliveryFilter {
                state: Some(DeliveryState::Pending),
                page: PageReq::first(1),
                ..DeliveryFilter::default()
            })
            .await?
            .total;
        Ok::<_, tickwork_store::Error>(DbGauges {
            alarms_pending,
            runs_today,
            nodes: nodes.len(),
            nodes_live,
            executors_live,
        })
    };
    let gauges = read.await.map_err(|e| e.to_string());
    let reuse = crate::pipeline::monitor::wait_after_round(DB_GAUGES_TTL, started.elapsed());
    *cached = Some((Instant::now() + reuse, gauges.clone()));
    gauges
}

/// The whole exposition.
pub(crate) async fn render(admin: &Scheduler) -> String {
    let s = &admin.inner.stats;
    let m = &admin.inner.metrics;
    let mut out = String::with_capacity(8 * 1024);
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    for (name, help, value) in [
        (
            "tickwork_claim_rounds_total",
            "Claim transactions that succeeded.",
            get(&s.claim_rounds),
        ),
        (
            "tickwork_claims_deferred_total",
            "Claim rounds put off because the pipeline's backlog was full (overload).",
            get(&s.claims_deferred),
        ),
        (
            "tickwork_runs_claimed_total",
            "Runs claimed into this node's timer.",
            get(&s.runs_claimed),
        ),
        (
            "tickwork_runs_misfired_total",
            "Runs recorded as misfired (at claim, after adoption or a hold).",
            get(&s.runs_misfired),
        ),
        (
            "tickwork_runs_dispatched_total",
            "Runs an executor accepted, as recorded in the ledger.",
            get(&s.dispatched),
        ),
        (
            "tickwork_runs_dispatched_with_result_total",
            "Of the runs dispatched, those recorded in one write with their result (the \
             callback came while the ledger held the dispatch record).",
            get(&s.dispatched_with_result),
        ),
        (
            "tickwork_runs_completed_total",
            "Runs that reached their final state through this node.",
            get(&s.completed),
        ),
        (
            "tickwork_retries_total",
            "Retry runs planned.",
            get(&s.retries),
        ),
        (
            "tickwork_children_total",
            "Child job runs fired.",
            get(&s.children),
        ),
        (
            "tickwork_runs_adopted_total",
            "Planned runs of dead or departed nodes adopted by this node.",
            get(&s.runs_adopted),
        ),
        (
            "tickwork_runs_held_total",
            "Runs held back because the heartbeat was too old or the database unreachable.",
            get(&s.runs_held),
        ),
        (
            "tickwork_runs_disowned_total",
            "Held or adopted runs not fired because another node owned them.",
            get(&s.runs_disowned),
        ),
        (
            "tickwork_runs_maybe_sent_accepted_total",
            "Runs a stopped node left sending that an executor said it had accepted.",
            get(&s.runs_maybe_sent_accepted),
        ),
        (
            "tickwork_runs_maybe_sent_unsent_total",
            "Runs a stopped node left sending that no executor had: fired again.",
            get(&s.runs_maybe_sent_unsent),
        ),
        (
            "tickwork_runs_maybe_sent_lost_total",
            "Runs a stopped node left sending that no executor could answer for: ended as lost.",
            get(&s.runs_maybe_sent_lost),
        ),
        (
            "tickwork_runs_maybe_sent_resent_total",
            "Runs a stopped node left sending that no executor could answer for: sent again.",
            get(&s.runs_maybe_sent_resent),
        ),
        (
            "tickwork_runs_lost_total",
            "Runs ended as lost by the lost-run monitor.",
            get(&s.runs_lost),
        ),
        (
            "tickwork_fires_missed_total",
            "Scheduled fires that reached no executor by their instant plus the tolerance.",
            get(&s.fires_missed),
        ),
        (
            "tickwork_fires_late_total",
            "Scheduled fires that reached their executor later than their job's lateness budget.",
            get(&s.fires_late),
        ),
        (
            "tickwork_fires_doubled_total",
            "Scheduled fires held by more than one run in the ledger.",
            get(&s.fires_doubled),
        ),
        (
            "tickwork_alarms_queued_total",
            "Failed runs queued for an alarm.",
            get(&s.alarms_queued),
        ),
        (
            "tickwork_alarm_runs_grouped_total",
            "Failed runs carried by an alarm of their job not yet sent (alarm.group_window_ms) \
             instead of alarms of their own.",
            get(&s.alarm_runs_grouped),
        ),
        (
            "tickwork_heartbeats_total",
            "Heartbeats written.",
            get(&s.heartbeats),
        ),
        (
            "tickwork_heartbeat_failures_total",
            "Heartbeats that failed or timed out.",
            get(&s.heartbeat_failures),
        ),
        (
            "tickwork_reports_written_total",
            "Rounds of daily run reports written.",
            get(&s.reports_written),
        ),
        (
            "tickwork_runs_purged_total",
            "Runs deleted by retention.",
            get(&s.runs_purged),
        ),
        (
            "tickwork_log_checkpoints_total",
            "Rounds of SQLite's write-ahead log copied into the database file.",
            get(&s.log_checkpoints),
        ),
    ] {
        metric(&mut out, name, "counter", help, value);
    }

    let name = "tickwork_dispatch_errors_total";
    let _ = writeln!(
        out,
        "# HELP {name} Trigger failures by cause.\n# TYPE {name} counter"
    );
    for (cause, c) in [
        (DispatchCause::NoExecutor, &s.dispatch_no_executor),
        (DispatchCause::Refused, &s.dispatch_refused),
        (DispatchCause::Transport, &s.dispatch_transport),
    ] {
        let _ = writeln!(out, "{name}{{cause=\"{}\"}} {}", cause.as_str(), get(c));
    }
    let name = "tickwork_alarm_sends_total";
    let _ = writeln!(
        out,
        "# HELP {name} Alarm send attempts by channel kind and outcome.\n# TYPE {name} counter"
    );
    for (kind, row) in AlarmKind::ALL.iter().zip(&m.alarm_sends) {
        for (outcome, c) in ALARM_OUTCOMES.iter().zip(row) {
            let _ = writeln!(
                out,
                "{name}{{kind=\"{kind}\",outcome=\"{outcome}\"}} {}",
                get(c)
            );
        }
    }
    m.lateness.render(
        &mut out,
        "tickwork_dispatch_lateness_seconds",
        "Dispatch instant minus scheduled instant.",
    );

    metric(
        &mut out,
        "tickwork_timer_runs",
        "gauge",
        "Runs waiting in the timer.",
        admin.waiting().timer,
    );
    let name = "tickwork_lane_backlog";
    let _ = writeln!(
        out,
        "# HELP {name} Due runs waiting for a dispatch slot.\n# TYPE {name} gauge"
    );
    for (lane, n) in ["fast", "slow"].iter().zip(&m.lanes) {
        let _ = writeln!(
            out,
            "{name}{{lane=\"{lane}\"}} {}",
            n.load(Ordering::Relaxed).max(0)
        );
    }
    metric(
        &mut out,
        "tickwork_ledger_backlog",
        "gauge",
        "Dispatch outcomes waiting to be written.",
        m.ledger.load(Ordering::Relaxed).max(0),
    );
    metric(
        &mut out,
        "tickwork_dispatch_records_held",
        "gauge",
        "Accepted runs whose dispatch record waits for their callback, to be written with it.",
        admin.waiting().records,
    );
    metric(
        &mut out,
        "tickwork_held_runs",
        "gauge",
        "Runs held back, waiting to be checked and fired.",
        admin.waiting().held,
    );
    metric(
        &mut out,
        "tickwork_pull_executors",
        "gauge",
        "Pull executors connected to this node.",
        admin.inner.client.pull_links().len(),
    );
    metric(
        &mut out,
        "tickwork_pull_results_total",
        "counter",
        "Run results recorded from pull executors' connections.",
        admin.inner.client.pull_links().results(),
    );
    metric(
        &mut out,
        "tickwork_lease_held",
        "gauge",
        "1 when this node holds the maintenance lease.",
        u8::from(admin.is_lease_holder()),
    );
    metric(
        &mut out,
        "tickwork_fenced",
        "gauge",
        "1 when this node stopped claiming and firing because its heartbeat is too old.",
        u8::from(admin.is_fenced()),
    );
    let last = admin.last_heartbeat();
    let age = if last > 0 {
        admin.clock().now_ms() - last
    } else {
        0
    };
    metric(
        &mut out,
        "tickwork_heartbeat_age_seconds",
        "gauge",
        "Age of this node's last successful heartbeat.",
        seconds(age.max(0)),
    );

    let db = admin.store().connections();
    let name = "tickwork_db_connections";
    let _ = writeln!(
        out,
        "# HELP {name} Database connections of this node by state.\n# TYPE {name} gauge\n\
         {name}{{state=\"busy\"}} {}\n{name}{{state=\"idle\"}} {}",
        db.open.saturating_sub(db.idle),
        db.idle
    );

    match db_gauges(admin).await {
        Ok(g) => {
            metric(
                &mut out,
                "tickwork_database_up",
                "gauge",
                "1 when the database answered the last gauge read.",
                1,
            );
            let name = "tickwork_runs";
            let _ = writeln!(
                out,
                "# HELP {name} Runs scheduled today (the admin's default time zone) by state.\n# TYPE {name} gauge"
            );
            for state in RunState::ALL {
                let n = g
                    .runs_today
                    .iter()
                    .find(|(s, _)| s == state)
                    .map_or(0, |(_, n)| *n);
                let _ = writeln!(out, "{name}{{state=\"{state}\"}} {n}");
            }
            metric(
                &mut out,
                "tickwork_admin_nodes",
                "gauge",
                "Admin nodes with a heartbeat row.",
                g.nodes,
            );
            metric(
                &mut out,
                "tickwork_admin_nodes_live",
                "gauge",
                "Admin nodes whose heartbeat is recent.",
                g.nodes_live,
            );
            metric(
                &mut out,
                "tickwork_alarm_deliveries_pending",
                "gauge",
                "Alarm deliveries waiting to be sent or retried.",
                g.alarms_pending,
            );
            metric(
                &mut out,
                "tickwork_executors_live",
                "gauge",
                "Registered executors whose heartbeat is recent.",
                g.executors_live,
            );
        }
        Err(e) => {
            tracing::debug!(error = %e, "metrics: database gauges not read");
            metric(
                &mut out,
                "tickwork_database_up",
                "gauge",
                "1 when the database answered the last gauge read.",
                0,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_in_seconds() {
        let h = Histogram::default();
        for ms in [0, 1, 3, 7, 40_000, -5] {
            h.observe_ms(ms);
        }
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.001\"} 3\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.005\"} 4\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.010\"} 5\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"30.000\"} 5\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 6\n"), "{out}");
        assert!(out.contains("x_sum 40.011\nx_count 6\n"), "{out}");
    }

    #[test]
    fn trigger_failures_are_classified_by_the_client_phrases() {
        let client_phrase = |msg: &str| DispatchOutcome {
            run_id: 1,
            address: Some("http://e:1".into()),
            trigger_code: 500,
            trigger_msg: format!("run at http://e:1: code 500, {msg}"),
            held_back: false,
        };
        // The phrases of `executor_client`'s transport failures.
        for msg in [
            "http://e:1/run: executor unreachable",
            "http://e:1/run: executor answered a redirect (302)",
            "http://e:1/run: executor answered http status 404 Not Found",
            "http://e:1/run: executor answer over the 65536 byte limit",
            "http://e:1/run: executor answered an unreadable body",
        ] {
            assert_eq!(
                DispatchCause::of(&client_phrase(msg)),
                DispatchCause::Transport
            );
        }
        assert_eq!(
            DispatchCause::of(&client_phrase("job handler [x] not found")),
            DispatchCause::Refused
        );
        let none = DispatchOutcome {
            address: None,
            ..client_phrase("no executor")
        };
        assert_eq!(DispatchCause::of(&none), DispatchCause::NoExecutor);
    }
}
