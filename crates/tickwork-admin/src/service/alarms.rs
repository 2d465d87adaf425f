//! The alarm operations of the API: channels (create, change, delete, test) and the
//! deliveries' listing.

use std::time::Instant;

use tickwork_protocol::api::{
    AlarmChannelInput, AlarmChannelView, AlarmDeliveryQuery, AlarmDeliveryView, AlarmTestResult,
    Page,
};
use tickwork_store::{
    AlarmChannel, AlarmChannelNew, AlarmChannelUpdate, AlarmDelivery, AlarmKind, DeliveryFilter,
    DeliveryState, PageReq,
};

use super::audit::Target;
use super::{Alarms, invalid};
use crate::Error;
use crate::alarm::merge_hidden;
use crate::alarm::{AlarmMessage, ChannelConfig};
use crate::auth::Principal;
use crate::pipeline::alarm_delivery::channel_names;
use crate::timer::now_ms;
use serde_json::{Map, Value};
use tracing::info;

/// Longest channel name.
const NAME_MAX: usize = 64;

fn kinds() -> String {
    AlarmKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A channel name: 1 to 64 letters, digits, `.`, `_` and `-` (jobs list names separated by
/// commas).
fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty()
        || name.len() > NAME_MAX
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(invalid(
            "name",
            format!("{name:?} must be 1 to {NAME_MAX} letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(())
}

fn parse_kind(kind: &str) -> Result<AlarmKind, Error> {
    kind.parse::<AlarmKind>()
        .map_err(|_| invalid("kind", format!("{kind:?} is not one of {}", kinds())))
}

fn channel_view(c: AlarmChannel) -> AlarmChannelView {
    let config = match ChannelConfig::from_stored(c.kind, &c.config) {
        Ok(parsed) => parsed.masked(),
        Err(_) => Value::Object(Map::new()),
    };
    AlarmChannelView {
        id: c.id,
        name: c.name,
        kind: c.kind.as_str().to_owned(),
        config,
        enabled: c.enabled,
        created_at: c.created_at,
        updated_at: c.updated_at,
    }
}

fn delivery_view(d: AlarmDelivery) -> AlarmDeliveryView {
    AlarmDeliveryView {
        id: d.id,
        run_id: d.run_id,
        job_id: d.job_id,
        grouped_runs: d.grouped_runs,
        last_run_id: d.last_run_id,
        due_at: d.due_at,
        fire_alert_id: d.alert_id,
        channel_id: d.channel_id,
        channel_name: d.channel_name,
        kind: d.kind.as_str().to_owned(),
        state: d.state.as_str().to_owned(),
        attempts: d.attempts,
        next_attempt_at: (d.state == DeliveryState::Pending).then_some(d.next_attempt_at),
        last_error: d.last_error,
        sent_at: d.sent_at,
        created_at: d.created_at,
        updated_at: d.updated_at,
    }
}

impl Alarms<'_> {
    pub async fn channels_list(self, _by: &Principal) -> Result<Vec<AlarmChannelView>, Error> {
        let channels = self.inner.store.alarm_channels_list().await?;
        Ok(channels.into_iter().map(channel_view).collect())
    }

    pub async fn channel_get(self, _by: &Principal, id: i64) -> Result<AlarmChannelView, Error> {
        Ok(channel_view(self.inner.store.alarm_channel_get(id).await?))
    }

    pub async fn channel_create(
        self,
        by: &Principal,
        input: AlarmChannelInput,
    ) -> Result<AlarmChannelView, Error> {
        by.require_admin()?;
        let name = input.name.trim().to_owned();
        check_name(&name)?;
        let kind = parse_kind(&input.kind)?;
        let config = ChannelConfig::parse(kind, &input.config)?;
        let channel = self
            .inner
            .store
            .alarm_channel_create(AlarmChannelNew {
                name,
                kind,
                config: config.to_stored(),
                enabled: input.enabled.unwrap_or(true),
                now: now_ms(),
            })
            .await?;
        info!(channel = %channel.name, kind = %channel.kind, "alarm channel created");
        let view = channel_view(channel);
        let target = Target::AlarmChannel(view.id);
        self.inner
            .audit(by, "alarm_channel.create", target, None::<&()>, Some(&view))
            .await?;
        Ok(view)
    }

    /// Rewrites a channel; a secret, password or URL the input leaves out is kept.
    pub async fn channel_update(
        self,
        by: &Principal,
        id: i64,
        input: AlarmChannelInput,
    ) -> Result<AlarmChannelView, Error> {
        by.require_admin()?;
        let old = self.inner.store.alarm_channel_get(id).await?;
        let name = input.name.trim().to_owned();
        check_name(&name)?;
        let kind = parse_kind(&input.kind)?;
        let mut config = input.config;
        if kind == old.kind
            && let Ok(Value::Object(stored)) = serde_json::from_str::<Value>(&old.config)
        {
            merge_hidden(&mut config, &stored);
        }
        let config = ChannelConfig::parse(kind, &config)?;
        let channel = self
            .inner
            .store
            .alarm_channel_update(AlarmChannelUpdate {
                id,
                name,
                kind,
                config: config.to_stored(),
                enabled: input.enabled.unwrap_or(old.enabled),
                now: now_ms(),
            })
            .await?;
        let (before, after) = (channel_view(old), channel_view(channel));
        let target = Target::AlarmChannel(id);
        self.inner
            .audit(
                by,
                "alarm_channel.update",
                target,
                Some(&before),
                Some(&after),
            )
            .await?;
        Ok(after)
    }

    pub async fn channel_delete(self, by: &Principal, id: i64) -> Result<(), Error> {
        by.require_admin()?;
        let before = channel_view(self.inner.store.alarm_channel_get(id).await?);
        self.inner.store.alarm_channel_delete(id, now_ms()).await?;
        let target = Target::AlarmChannel(id);
        self.inner
            .audit(
                by,
                "alarm_channel.delete",
                target,
                Some(&before),
                None::<&()>,
            )
            .await?;
        Ok(())
    }

    /// Sends a test message on a channel now, outside the delivery queue.
    pub async fn channel_test(self, by: &Principal, id: i64) -> Result<AlarmTestResult, Error> {
        by.require_admin()?;
        let channel = self.inner.store.alarm_channel_get(id).await?;
        let config = ChannelConfig::from_stored(channel.kind, &channel.config)?;
        let message = AlarmMessage {
            job_id: 0,
            job_key: "test".to_owned(),
            job_description: format!("test message of alarm channel {}", channel.name),
            run_id: 0,
            attempt: 0,
            executor_address: None,
            state: "test".to_owned(),
            trigger_msg: None,
            handle_msg: Some("none: this is a test".to_owned()),
            scheduled_at: now_ms(),
            admin_node: self.inner.config.node_id.clone(),
            delivery_id: None,
            test: true,
            fire_alert: None,
            grouped_runs: 0,
            last_run_id: None,
        };
        let started = Instant::now();
        let result = self
            .inner
            .senders
            .send(
                &channel,
                &config,
                &message,
                self.inner.config.alarm.send_timeout,
            )
            .await;
        self.inner
            .metrics
            .alarm_send(channel.kind, if result.is_ok() { 0 } else { 2 });
        let outcome = AlarmTestResult {
            ok: result.is_ok(),
            error: result.err(),
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        let target = Target::AlarmChannel(id);
        self.inner
            .audit(
                by,
                "alarm_channel.test",
                target,
                None::<&()>,
                Some(&outcome),
            )
            .await?;
        Ok(outcome)
    }

    pub async fn deliveries_list(
        self,
        _by: &Principal,
        q: AlarmDeliveryQuery,
    ) -> Result<Page<AlarmDeliveryView>, Error> {
        let state = match q.state.as_deref() {
            None | Some("") => None,
            Some(s) => Some(s.parse::<DeliveryState>().map_err(|_| {
                invalid("state", format!("{s:?} is not one of pending sent failed"))
            })?),
        };
        let limit = q.limit.unwrap_or(50);
        if !(1..=PageReq::MAX_LIMIT).contains(&limit) {
            return Err(invalid("limit", format!("{limit} is out of range 1-1000")));
        }
        let page = q.page.unwrap_or(1);
        if page == 0 {
            return Err(invalid("page", "pages count from 1"));
        }
        let offset = (page - 1)
            .checked_mul(limit)
            .ok_or_else(|| invalid("page", "is too large"))?;
        let p = self
            .inner
            .store
            .alarm_deliveries_list(DeliveryFilter {
                run_id: q.run_id,
                job_id: q.job_id,
                state,
                page: PageReq { offset, limit },
            })
            .await?;
        Ok(Page {
            items: p.items.into_iter().map(delivery_view).collect(),
            total: p.total,
            page,
            size: limit,
        })
    }

    /// Checks a job's alarm channel list: every name must be a channel. Returns it normalised
    /// (trimmed names, one comma between them).
    pub(crate) async fn check_alarm_channels(self, list: &str) -> Result<String, Error> {
        let names: Vec<&str> = channel_names(list).collect();
        if names.is_empty() {
            return Ok(String::new());
        }
        let known = self.inner.store.alarm_channels_list().await?;
        for name in &names {
            if !known.iter().any(|c| c.name == *name) {
                return Err(invalid(
                    "alarm_channels",
                    format!("alarm channel {name:?} does not exist"),
                ));
            }
        }
        Ok(names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_kinds_are_checked() {
        for ok in ["ops", "ops-mail.eu_1"] {
            check_name(ok).unwrap();
        }
        for bad in ["", "a,b", "with space", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_kind("feishu").unwrap(), AlarmKind::Feishu);
        let err = parse_kind("pager").unwrap_err().to_string();
        assert!(
            err.contains("email webhook dingtalk wecom feishu slack"),
            "{err}"
        );
        let names: Vec<&str> = channel_names(" a, ,b ,").collect();
        assert_eq!(names, ["a", "b"]);
    }
}
