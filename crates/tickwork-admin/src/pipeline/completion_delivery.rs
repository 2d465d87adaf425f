//! Posts the completions of submissions that name a webhook channel, on the maintenance lease
//! holder: each due completion is posted signed as the channel's alarms are (with its id as
//! the delivery id), acknowledged when the receiver answers 2xx, and tried again after the
//! alarm backoff otherwise, as long as it takes. At least once: a post that succeeded but
//! could not be acknowledged (the node died in between) is posted again, under the same id.

use tickwork_store::{SubmissionEnd, SubmissionEndRetry, SubmissionEndsAck, SubmissionEndsDue};
use tracing::{info, warn};

use super::alarm_delivery::backoff_after;
use super::monitor::Maintenance;
use crate::Error;
use crate::alarm::ChannelConfig;

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
        for end in due {
            if self.inner.stop.is_cancelled() {
                break;
            }
            match self.post_completion(&end).await {
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

    async fn post_completion(&self, end: &SubmissionEnd) -> Result<(), String> {
        let Some(channel_id) = end.channel_id else {
            return Err("no channel".to_owned());
        };
        let channel = self
            .inner
            .store
            .alarm_channel_get(channel_id)
            .await
            .map_err(|e| e.to_string())?;
        if !channel.enabled {
            return Err(format!("channel {} is disabled", channel.name));
        }
        let ChannelConfig::Webhook(webhook) =
            ChannelConfig::from_stored(channel.kind, &channel.config).map_err(|e| e.to_string())?
        else {
            return Err(format!("channel {} is not a webhook", channel.name));
        };
        let body = serde_json::json!({ "completion": crate::service::completion(end.clone()) })
            .to_string();
        self.inner
            .senders
            .post_signed(&webhook, body, end.id, self.inner.config.alarm.send_timeout)
            .await
    }
}
