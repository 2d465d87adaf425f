//! Posts the completions of submissions that name a webhook channel, on the maintenance lease
//! holder: each due completion is posted signed as the channel's alarms are (with its id as
//! the delivery id), acknowledged when the receiver answers 2xx, and tried again after the
//! alarm backoff otherwise, as long as it takes. At least once: a post that succeeded but
//! could not be acknowledged (the node died in between) is posted again, under the same id.

use std::collections::HashMap;

use tickwork_store::{SubmissionEnd, SubmissionEndRetry, SubmissionEndsAck, SubmissionEndsDue};
use tracing::{info, warn};

use super::alarm_delivery::backoff_after;
use super::monitor::Maintenance;
use crate::Error;
use crate::alarm::{ChannelConfig, SignedUrl};

/// Completions posted per round.
const POST_BATCH: u64 = 100;

impl Maintenance {
    /// Posts every completion due now; how many the receivers took.
    pub(super) async fn post_completions(&self) -> Result<usize, Error> {
        let now = self.inner.clock.now_ms();
        let due = self
            .inner
            .store
            .submission_ends_due(SubmissionEndsDue {
                now,
                limit: POST_BATCH,
            })
            .await?;
        let mut taken = 0;
        // Each channel is read once a round: the completions of one feedback channel come
        // together.
        let mut channels: HashMap<i64, Result<SignedUrl, String>> = HashMap::new();
        for end in due {
            if self.inner.stop.is_cancelled() {
                break;
            }
            let Some(channel_id) = end.channel_id else {
                continue;
            };
            if let std::collections::hash_map::Entry::Vacant(slot) = channels.entry(channel_id) {
                slot.insert(self.webhook(channel_id).await);
            }
            let posted = match &channels[&channel_id] {
                Ok(webhook) => self.post_completion(webhook, &end).await,
                Err(e) => Err(e.clone()),
            };
            match posted {
                Ok(()) => {
                    self.inner
                        .store
                        .submission_ends_ack(SubmissionEndsAck {
                            group_id: end.group_id,
                            ids: vec![end.id],
                        })
                        .await?;
                    info!(
                        completion = end.id,
                        run_id = end.run_id,
                        "completion posted"
                    );
                    taken += 1;
                }
                Err(error) => {
                    let c = &self.inner.config.alarm;
                    let wait = backoff_after(end.attempts + 1, c.backoff, c.backoff_max);
                    warn!(
                        completion = end.id,
                        run_id = end.run_id,
                        attempt = end.attempts + 1,
                        error = %error,
                        "completion not taken; tried again later"
                    );
                    self.inner
                        .store
                        .submission_end_retry(SubmissionEndRetry {
                            id: end.id,
                            next_attempt_at: self.inner.clock.now_ms()
                                + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2),
                            error,
                        })
                        .await?;
                }
            }
        }
        Ok(taken)
    }

    /// The webhook of channel `id`, which must be an enabled webhook channel.
    async fn webhook(&self, id: i64) -> Result<SignedUrl, String> {
        let channel = self
            .inner
            .store
            .alarm_channel_get(id)
            .await
            .map_err(|e| e.to_string())?;
        if !channel.enabled {
            return Err(format!("channel {} is disabled", channel.name));
        }
        match ChannelConfig::from_stored(channel.kind, &channel.config) {
            Ok(ChannelConfig::Webhook(webhook)) => Ok(webhook),
            Ok(_) => Err(format!("channel {} is not a webhook", channel.name)),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn post_completion(
        &self,
        webhook: &SignedUrl,
        end: &SubmissionEnd,
    ) -> Result<(), String> {
        let body = serde_json::json!({ "completion": crate::service::completion(end.clone()) })
            .to_string();
        self.inner
            .senders
            .post_signed(webhook, body, end.id, self.inner.config.alarm.send_timeout)
            .await
    }
}
