//! The ledger's check of scheduled fires, on the maintenance lease holder: every fire judged
//! once (rules in `tickwork_core::fire_check`), behind a cursor kept in the database, and the
//! missed, late and doubled ones turned into alerts on their job's alarm channels, metrics and
//! the dashboard's totals.
//!
//! The window of a round ends at the tolerance (`monitor.fire_missed_after`) before now, and
//! before the first instant a running job has not had claimed yet: fires before it are all in
//! the ledger, so a fire the claim writes late (an admin restarted after a stop, a claim that
//! fell behind) is still ahead of the cursor. It also ends before the first fire still in
//! flight, which a later round judges once it settled.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tickwork_core::fire_check::{self, FireAlertKind, Tolerance};
use tickwork_store::{CursorOpen, FireAlertNew, FireAlertWritten, FireAlertsRecord, FireScan};
use tracing::{debug, warn};

use super::alarm_delivery::JobChannels;
use super::monitor::Maintenance;
use crate::Error;

/// The cursor's name in the database.
const CURSOR: &str = "fire-check";
/// Fires read per statement.
const SCAN_LIMIT: u32 = 5_000;
/// A running job whose next fire is older than this is not waited for (a job the claim cannot
/// plan must not stop the check for every other job).
const STALE_CLAIM: Duration = Duration::from_secs(3_600);

impl Maintenance {
    /// Checks the fires behind the tolerance that no round judged yet; how many alerts were
    /// written or added to.
    pub(crate) async fn check_fires(&self) -> Result<usize, Error> {
        let inner = &self.inner;
        let store = &inner.store;
        let m = &inner.config.monitor;
        let now = inner.clock.now_ms();
        let tolerance = Tolerance {
            missed_after_ms: m.fire_missed_after.as_millis() as i64,
            sending_grace_ms: m.fire_sending_grace.as_millis() as i64,
        };
        let horizon = now - tolerance.missed_after_ms;
        let mut from = store
            .fire_cursor_open(CursorOpen {
                name: CURSOR.to_owned(),
                start: horizon,
                now,
            })
            .await?;
        let mut total = 0;
        loop {
            let mut until = horizon;
            let not_before = now - STALE_CLAIM.as_millis() as i64;
            if let Some(first) = store.jobs_first_unclaimed_fire(not_before).await? {
                until = until.min(first - 1);
            }
            if until <= from {
                break;
            }
            let scan = |until, limit| FireScan {
                after: from,
                until,
                limit,
            };
            let mut fires = store.fires_to_check(scan(until, Some(SCAN_LIMIT))).await?;
            if fires.len() == SCAN_LIMIT as usize {
                // Full: the window ends before the last instant read, unless that instant is
                // all there is, which is then read whole.
                let last = fires[fires.len() - 1].scheduled_at;
                if last - 1 > from {
                    until = last - 1;
                } else {
                    until = last;
                    fires = store.fires_to_check(scan(until, None)).await?;
                }
            }
            let doubled = store.fires_doubled(scan(until, None)).await?;
            let checked = fire_check::check(&fires, &doubled, from, until, now, tolerance);
            if checked.until <= from {
                break;
            }
            let alerts = self.with_channels(checked.alerts).await?;
            let record = FireAlertsRecord {
                name: CURSOR.to_owned(),
                from,
                until: checked.until,
                alerts,
                quiet_since: now - m.fire_alert_quiet.as_millis() as i64,
                now,
            };
            let Some(written) = store.fire_alerts_record(record).await? else {
                // Another node checked this window first.
                break;
            };
            let mut queued = false;
            for w in &written {
                let (alert, new) = match w {
                    FireAlertWritten::New(r) => (&r.alert, true),
                    FireAlertWritten::Added { alert, .. } => (alert, false),
                };
                let counter = match alert.kind {
                    FireAlertKind::Missed => &inner.stats.fires_missed,
                    FireAlertKind::Late => &inner.stats.fires_late,
                    FireAlertKind::Doubled => &inner.stats.fires_doubled,
                };
                counter.fetch_add(alert.fires as u64, Ordering::Relaxed);
                queued |= new;
                // A line per alarm; what is added to an alert within its quiet period is only
                // counted, or an overloaded admin writes a line per job every round.
                if new {
                    warn!(
                        job_id = alert.job_id,
                        kind = %alert.kind,
                        fires = alert.fires,
                        first_at = alert.first_at,
                        last_at = alert.last_at,
                        worst_late_ms = alert.worst_late_ms,
                        "fire alert"
                    );
                } else {
                    debug!(
                        job_id = alert.job_id,
                        kind = %alert.kind,
                        fires = alert.fires,
                        "fires added to an alert"
                    );
                }
            }
            total += written.len();
            if queued {
                inner.alarm_wake.notify_one();
            }
            from = checked.until;
            if checked.until < until || inner.stop.is_cancelled() {
                break;
            }
        }
        inner.stats.fire_checks.fetch_add(1, Ordering::Relaxed);
        Ok(total)
    }

    /// The alerts with the enabled channels of their jobs.
    async fn with_channels(
        &self,
        alerts: Vec<fire_check::FireAlert>,
    ) -> Result<Vec<FireAlertNew>, Error> {
        if alerts.is_empty() {
            return Ok(Vec::new());
        }
        let store = self.inner.store.as_ref();
        let mut of_jobs = JobChannels::load(store).await?;
        let mut out = Vec::with_capacity(alerts.len());
        for alert in alerts {
            let (channel_ids, _unknown) = of_jobs.of_job(store, alert.job_id).await?;
            out.push(FireAlertNew { channel_ids, alert });
        }
        Ok(out)
    }
}
