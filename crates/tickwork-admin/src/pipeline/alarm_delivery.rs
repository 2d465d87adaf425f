//! Delivery of alarms on the maintenance lease holder (the API's alarm operations are the
//! service's `alarms`).
//!
//! Runs queued for an alarm become one delivery row per channel of their job (written once:
//! a unique key on (run, channel)), or join their job's delivery on the channel not yet sent,
//! so a job's alarms on a channel are `alarm.group_window` apart. The delivery loop claims due
//! rows in the database, sends each with a timeout, and records the outcome: sent, tried again
//! after a backoff, or failed with its last error once the attempts are used up. A node sends only rows it claimed, so
//! two admins never send the same attempt. A send that succeeded but could not be recorded
//! (its node died mid-send, or the database went away in between) is sent again after the
//! claim's hold: at least once in that window, under the same delivery id for the receiver to
//! drop the repeat.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tickwork_store::{
    AlarmChannel, AlarmDeliveriesQueue, AlarmDelivery, DeliveryClaim, DeliveryFinish,
    DeliveryOutcome, RunAlarm, Store,
};
use tokio::task::JoinSet;
use tracing::{info, warn};

use super::monitor::Maintenance;
use crate::Error;
use crate::alarm::{AlarmMessage, ChannelConfig};

/// Runs turned into deliveries per statement.
const QUEUE_BATCH: u32 = 500;
/// Deliveries claimed (and sent at once) per round.
const SEND_BATCH: u32 = 32;

/// The wait before attempt `attempt + 1`, after `attempt` failed: the backoff doubled per
/// failed attempt, capped.
pub(crate) fn backoff_after(attempt: i32, base: Duration, max: Duration) -> Duration {
    let doublings = attempt.saturating_sub(1).clamp(0, 20) as u32;
    base.saturating_mul(1 << doublings).min(max)
}

/// Splits a job's `alarm_channels` into names.
pub(crate) fn channel_names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|n| !n.is_empty())
}

/// The alarm channels of jobs, for one round that queues alarms: the channels read once, each
/// job's list of channel names read once.
pub(crate) struct JobChannels {
    channels: HashMap<String, AlarmChannel>,
    lists: HashMap<i64, String>,
}

impl JobChannels {
    pub(crate) async fn load(store: &dyn Store) -> Result<JobChannels, Error> {
        let channels = store
            .alarm_channels_list()
            .await?
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect();
        Ok(JobChannels {
            channels,
            lists: HashMap::new(),
        })
    }

    /// The ids of the enabled channels job `job_id` lists (none for a deleted job), and the
    /// names it lists that are no channel.
    pub(crate) async fn of_job(
        &mut self,
        store: &dyn Store,
        job_id: i64,
    ) -> Result<(Vec<i64>, Vec<String>), Error> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.lists.entry(job_id) {
            let list = match store.job_get(job_id).await {
                Ok(job) => job.spec.alarm_channels,
                Err(tickwork_store::Error::NotFound { .. }) => String::new(),
                Err(e) => return Err(e.into()),
            };
            slot.insert(list);
        }
        let (mut ids, mut unknown) = (Vec::new(), Vec::new());
        for name in channel_names(&self.lists[&job_id]) {
            match self.channels.get(name) {
                Some(c) if c.enabled => ids.push(c.id),
                Some(_) => {}
                None => unknown.push(name.to_owned()),
            }
        }
        Ok((ids, unknown))
    }
}

impl Maintenance {
    /// Writes the deliveries of runs queued for an alarm: one per enabled channel of the job.
    /// How many were written.
    pub(crate) async fn queue_deliveries(&self) -> Result<u64, Error> {
        let store = &self.inner.store;
        let mut total = 0;
        loop {
            let runs = store.runs_awaiting_alarm(QUEUE_BATCH).await?;
            if runs.is_empty() {
                return Ok(total);
            }
            let mut of_jobs = JobChannels::load(store.as_ref()).await?;
            let mut queue = Vec::with_capacity(runs.len());
            for run in &runs {
                let (channel_ids, unknown) = of_jobs.of_job(store.as_ref(), run.job_id).await?;
                for name in unknown {
                    warn!(
                        run_id = run.id,
                        job_id = run.job_id,
                        channel = %name,
                        "alarm channel of the job does not exist; skipped"
                    );
                }
                queue.push(RunAlarm {
                    run_id: run.id,
                    channel_ids,
                });
            }
            let queued = store
                .alarm_deliveries_queue(AlarmDeliveriesQueue {
                    runs: queue,
                    now: self.inner.clock.now_ms(),
                    group_window_ms: self.inner.config.alarm.group_window.as_millis() as i64,
                })
                .await?;
            let n = queued.deliveries;
            total += n;
            let stats = &self.inner.stats;
            stats
                .alarm_deliveries_queued
                .fetch_add(n, Ordering::Relaxed);
            stats
                .alarm_runs_grouped
                .fetch_add(queued.joined, Ordering::Relaxed);
            if n > 0 {
                self.inner.alarm_wake.notify_one();
            }
            if runs.len() < QUEUE_BATCH as usize || self.inner.stop.is_cancelled() {
                return Ok(total);
            }
        }
    }

    /// Sends due alarm deliveries while this node holds the maintenance lease, every
    /// `alarm.poll_interval` or as soon as deliveries are queued.
    pub(crate) async fn alarm_loop(self) {
        let interval = self.inner.config.alarm.poll_interval;
        loop {
            tokio::select! {
                _ = self.inner.stop.cancelled() => return,
                _ = self.inner.clock.sleep(interval) => {}
                _ = self.inner.alarm_wake.notified() => {}
            }
            if !self.scheduler().is_lease_holder() {
                continue;
            }
            if let Err(e) = self.alarm_round().await {
                warn!(error = %e, "alarm delivery round failed");
            }
            self.inner
                .stats
                .alarm_rounds
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Claims and sends due deliveries until none is left; how many were attempted.
    pub(crate) async fn alarm_round(&self) -> Result<usize, Error> {
        let c = &self.inner.config.alarm;
        // The claim outlives the longest send, so a slow send is never taken over midway.
        let hold = c.send_timeout * 2 + Duration::from_secs(5);
        let mut total = 0;
        loop {
            let claimed = self
                .inner
                .store
                .alarm_deliveries_claim_due(DeliveryClaim {
                    node_id: self.inner.config.node_id.clone(),
                    now: self.inner.clock.now_ms(),
                    hold_ms: hold.as_millis() as i64,
                    limit: SEND_BATCH,
                })
                .await?;
            let n = claimed.len();
            let mut sends = JoinSet::new();
            for delivery in claimed {
                let admin = self.clone();
                sends.spawn(async move { admin.deliver(delivery).await });
            }
            while sends.join_next().await.is_some() {}
            total += n;
            if n < SEND_BATCH as usize || self.inner.stop.is_cancelled() {
                return Ok(total);
            }
        }
    }

    /// The message of a delivery, from its run (or fire alert) and job as they are now.
    async fn delivery_message(&self, d: &AlarmDelivery) -> Result<AlarmMessage, String> {
        let store = &self.inner.store;
        if let Some(alert_id) = d.alert_id {
            let alert = store
                .fire_alert_get(alert_id)
                .await
                .map_err(|e| format!("fire alert {alert_id}: {e}"))?
                .alert;
            let (key, description) = match store.job_get(alert.job_id).await {
                Ok(job) => (job.key, job.spec.description),
                Err(_) => (String::from("-"), String::from("(deleted job)")),
            };
            return Ok(AlarmMessage {
                job_id: alert.job_id,
                job_key: key,
                job_description: description,
                run_id: alert.run_id,
                attempt: 0,
                executor_address: None,
                state: alert.kind.to_string(),
                trigger_msg: None,
                handle_msg: None,
                scheduled_at: alert.first_at,
                admin_node: self.inner.config.node_id.clone(),
                delivery_id: Some(d.id),
                test: false,
                fire_alert: Some(alert),
                grouped_runs: 0,
                last_run_id: None,
            });
        }
        let run = store
            .run_get(d.run_id)
            .await
            .map_err(|e| format!("run {}: {e}", d.run_id))?;
        let (key, description) = match store.job_get(run.job_id).await {
            Ok(job) => (job.key, job.spec.description),
            Err(_) => (String::from("-"), String::from("(deleted job)")),
        };
        Ok(AlarmMessage {
            job_id: run.job_id,
            job_key: key,
            job_description: description,
            run_id: run.id,
            attempt: run.attempt,
            executor_address: run.executor_address,
            state: run.state.to_string(),
            trigger_msg: run.trigger_msg,
            handle_msg: run.handle_msg,
            scheduled_at: run.scheduled_at,
            admin_node: self.inner.config.node_id.clone(),
            delivery_id: Some(d.id),
            test: false,
            fire_alert: None,
            grouped_runs: d.grouped_runs,
            last_run_id: d.last_run_id,
        })
    }

    /// One attempt on a claimed delivery, and its record.
    async fn deliver(&self, d: AlarmDelivery) {
        let c = &self.inner.config.alarm;
        let attempt = d.attempts + 1;
        let sent = async {
            let channel = self
                .inner
                .store
                .alarm_channel_get(d.channel_id)
                .await
                .map_err(|e| e.to_string())?;
            if !channel.enabled {
                return Err(format!("alarm channel {} is disabled", channel.name));
            }
            let config = ChannelConfig::from_stored(channel.kind, &channel.config)
                .map_err(|e| e.to_string())?;
            let message = self.delivery_message(&d).await?;
            // The send's timeout bounds network IO: real time, whatever the clock.
            self.inner
                .senders
                .send(&channel, &config, &message, c.send_timeout)
                .await
        }
        .await;
        let (outcome, slot) = match &sent {
            Ok(()) => (DeliveryOutcome::Sent, 0),
            Err(error) if attempt < c.max_attempts as i32 => (
                DeliveryOutcome::Retry {
                    error: error.clone(),
                    next_attempt_at: self.inner.clock.now_ms()
                        + backoff_after(attempt, c.backoff, c.backoff_max).as_millis() as i64,
                },
                1,
            ),
            Err(error) => (
                DeliveryOutcome::Failed {
                    error: error.clone(),
                },
                2,
            ),
        };
        match &sent {
            Ok(()) => info!(
                run_id = d.run_id,
                channel = %d.channel_name,
                attempt,
                "alarm sent"
            ),
            Err(e) => warn!(
                run_id = d.run_id,
                channel = %d.channel_name,
                attempt,
                error = %e,
                "alarm send failed"
            ),
        }
        self.inner.metrics.alarm_send(d.kind, slot);
        let stats = &self.inner.stats;
        match slot {
            0 => stats.alarms_sent.fetch_add(1, Ordering::Relaxed),
            1 => stats.alarm_send_errors.fetch_add(1, Ordering::Relaxed),
            _ => {
                stats.alarm_send_errors.fetch_add(1, Ordering::Relaxed);
                stats.alarms_failed.fetch_add(1, Ordering::Relaxed)
            }
        };
        let finish = DeliveryFinish {
            id: d.id,
            node_id: self.inner.config.node_id.clone(),
            outcome,
            now: self.inner.clock.now_ms(),
        };
        match self.inner.store.alarm_delivery_finish(finish).await {
            Ok(true) => {}
            Ok(false) => warn!(
                delivery_id = d.id,
                "alarm delivery was taken over before its outcome was recorded"
            ),
            Err(e) => warn!(
                delivery_id = d.id,
                error = %e,
                "alarm delivery outcome not recorded; it is tried again after its hold"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let base = Duration::from_secs(10);
        let max = Duration::from_secs(60);
        let waits: Vec<u64> = (1..=5)
            .map(|a| backoff_after(a, base, max).as_secs())
            .collect();
        assert_eq!(waits, [10, 20, 40, 60, 60]);
        assert_eq!(backoff_after(1000, base, max), max);
    }
}
