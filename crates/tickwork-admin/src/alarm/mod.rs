//! Alarms: channels (email over SMTP, a signed JSON webhook, DingTalk, WeCom, Feishu and
//! Slack robots), the one message model every channel renders, and their delivery.
//!
//! `mod.rs` holds the pure part: channel settings and their validation, masking for the API,
//! rendering and signing, all plain functions tested with tables. `send` talks to the outside
//! world. The lease holder's delivery loop is the pipeline's `alarm_delivery`; the API
//! operations are the service's `alarms`.
//!
//! Invariant: each (run, channel) has one delivery row (a unique key; each fire alert of the
//! ledger's check has its own), and a row is sent only by the node that claimed it in the
//! database, so an alarm goes out at most once per attempt, whatever the admins do.

mod send;

pub(crate) use send::Senders;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Sha256;
use tickwork_core::fire_check::{FireAlert, FireAlertKind};
use tickwork_store::AlarmKind;

use crate::Error;

/// Keys of a channel config that are never shown, and kept on an update that leaves them out.
const HIDDEN_KEYS: [&str; 3] = ["secret", "password", "url"];

/// How an email channel secures its SMTP connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TlsMode {
    /// Plain SMTP (a relay on a trusted network).
    None,
    /// Plain connection upgraded with STARTTLS, required.
    #[default]
    Starttls,
    /// TLS from the first byte (SMTPS).
    Tls,
}

impl TlsMode {
    fn default_port(self) -> u16 {
        match self {
            TlsMode::None => 25,
            TlsMode::Starttls => 587,
            TlsMode::Tls => 465,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EmailConfig {
    pub(crate) host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) port: Option<u16>,
    #[serde(default)]
    pub(crate) tls: TlsMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) password: Option<String>,
    pub(crate) from: String,
    pub(crate) to: Vec<String>,
}

impl EmailConfig {
    pub(crate) fn port(&self) -> u16 {
        self.port.unwrap_or_else(|| self.tls.default_port())
    }
}

/// A robot or webhook URL with an optional signing secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignedUrl {
    pub(crate) url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<String>,
}

/// A robot URL whose token is part of the URL itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlainUrl {
    pub(crate) url: String,
}

/// A channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChannelConfig {
    Email(EmailConfig),
    Webhook(SignedUrl),
    DingTalk(SignedUrl),
    WeCom(PlainUrl),
    Feishu(SignedUrl),
    Slack(PlainUrl),
}

fn invalid(msg: impl std::fmt::Display) -> Error {
    Error::invalid_field("config", msg)
}

/// An empty secret means none.
fn no_empty(secret: &mut Option<String>) {
    if secret.as_deref().is_some_and(|s| s.is_empty()) {
        *secret = None;
    }
}

fn check_url(url: &str) -> Result<(), Error> {
    let parsed = url::Url::parse(url).map_err(|e| invalid(format!("url {url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(invalid(format!(
            "url {url:?} must be an http:// or https:// address"
        )));
    }
    Ok(())
}

fn check_mailbox(field: &str, address: &str) -> Result<(), Error> {
    address
        .parse::<lettre::message::Mailbox>()
        .map(drop)
        .map_err(|e| {
            invalid(format!(
                "{field}: {address:?} is not an email address ({e})"
            ))
        })
}

impl ChannelConfig {
    /// Reads and checks the settings of a `kind` channel; unknown keys are errors.
    pub(crate) fn parse(kind: AlarmKind, config: &Map<String, Value>) -> Result<Self, Error> {
        fn read<T: serde::de::DeserializeOwned>(config: &Map<String, Value>) -> Result<T, Error> {
            serde_json::from_value(Value::Object(config.clone())).map_err(invalid)
        }
        let parsed = match kind {
            AlarmKind::Email => {
                let mut c: EmailConfig = read(config)?;
                no_empty(&mut c.password);
                if c.host.trim().is_empty() {
                    return Err(invalid("host: an email channel needs an SMTP host"));
                }
                if c.port == Some(0) {
                    return Err(invalid("port: 0 is not a port"));
                }
                if c.user.is_some() != c.password.is_some() {
                    return Err(invalid("user and password go together"));
                }
                check_mailbox("from", &c.from)?;
                if c.to.is_empty() {
                    return Err(invalid("to: at least one recipient is needed"));
                }
                for to in &c.to {
                    check_mailbox("to", to)?;
                }
                ChannelConfig::Email(c)
            }
            AlarmKind::Webhook => {
                let c: SignedUrl = read(config)?;
                if c.secret.as_deref().is_none_or(str::is_empty) {
                    return Err(invalid("secret: a webhook channel signs with a secret"));
                }
                check_url(&c.url)?;
                ChannelConfig::Webhook(c)
            }
            AlarmKind::DingTalk | AlarmKind::Feishu => {
                let mut c: SignedUrl = read(config)?;
                no_empty(&mut c.secret);
                check_url(&c.url)?;
                if kind == AlarmKind::DingTalk {
                    ChannelConfig::DingTalk(c)
                } else {
                    ChannelConfig::Feishu(c)
                }
            }
            AlarmKind::WeCom | AlarmKind::Slack => {
                let c: PlainUrl = read(config)?;
                check_url(&c.url)?;
                if kind == AlarmKind::WeCom {
                    ChannelConfig::WeCom(c)
                } else {
                    ChannelConfig::Slack(c)
                }
            }
        };
        Ok(parsed)
    }

    /// Reads a stored config (written by [`ChannelConfig::to_stored`]).
    pub(crate) fn from_stored(kind: AlarmKind, stored: &str) -> Result<Self, Error> {
        match serde_json::from_str::<Value>(stored) {
            Ok(Value::Object(map)) => Self::parse(kind, &map),
            _ => Err(invalid("the stored config is not a JSON object")),
        }
    }

    pub(crate) fn to_stored(&self) -> String {
        let value = match self {
            ChannelConfig::Email(c) => serde_json::to_value(c),
            ChannelConfig::Webhook(c) | ChannelConfig::DingTalk(c) | ChannelConfig::Feishu(c) => {
                serde_json::to_value(c)
            }
            ChannelConfig::WeCom(c) | ChannelConfig::Slack(c) => serde_json::to_value(c),
        };
        value.map(|v| v.to_string()).unwrap_or_default()
    }

    /// The config as the API shows it: no secret or password, URLs with their tokens masked.
    pub(crate) fn masked(&self) -> Value {
        let mut value = serde_json::from_str::<Value>(&self.to_stored()).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            if let Some(url) = map.get("url").and_then(Value::as_str) {
                let masked = mask_url(url);
                map.insert("url".into(), Value::String(masked));
            }
            match self {
                ChannelConfig::Email(c) => {
                    map.remove("password");
                    map.insert("password_set".into(), Value::Bool(c.password.is_some()));
                    map.insert("port".into(), json!(c.port()));
                }
                ChannelConfig::Webhook(c)
                | ChannelConfig::DingTalk(c)
                | ChannelConfig::Feishu(c) => {
                    map.remove("secret");
                    map.insert("secret_set".into(), Value::Bool(c.secret.is_some()));
                }
                ChannelConfig::WeCom(_) | ChannelConfig::Slack(_) => {}
            }
        }
        value
    }
}

/// An update's config: the hidden keys it leaves out keep their stored values.
pub(crate) fn merge_hidden(new: &mut Map<String, Value>, old: &Map<String, Value>) {
    for key in HIDDEN_KEYS {
        if !new.contains_key(key)
            && let Some(v) = old.get(key)
        {
            new.insert(key.to_owned(), v.clone());
        }
    }
}

/// `https://host/first/***?token=***`: enough to recognise a URL, not enough to use it (robot
/// URLs carry their access token in the path or the query).
pub(crate) fn mask_url(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else {
        return "***".to_owned();
    };
    let mut out = format!("{}://{}", parsed.scheme(), parsed.host_str().unwrap_or(""));
    if let Some(port) = parsed.port() {
        out.push_str(&format!(":{port}"));
    }
    let mut segments = parsed.path_segments().into_iter().flatten();
    if let Some(first) = segments.next().filter(|s| !s.is_empty()) {
        out.push('/');
        out.push_str(first);
        if segments.next().is_some() {
            out.push_str("/***");
        }
    }
    let keys: Vec<String> = parsed
        .query_pairs()
        .map(|(k, _)| format!("{k}=***"))
        .collect();
    if !keys.is_empty() {
        out.push('?');
        out.push_str(&keys.join("&"));
    }
    out
}

// ---- the message ----

/// What an alarm says, whatever the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AlarmMessage {
    pub(crate) job_id: i64,
    pub(crate) job_key: String,
    pub(crate) job_description: String,
    pub(crate) run_id: i64,
    pub(crate) attempt: i32,
    pub(crate) executor_address: Option<String>,
    pub(crate) state: String,
    pub(crate) trigger_msg: Option<String>,
    pub(crate) handle_msg: Option<String>,
    pub(crate) scheduled_at: i64,
    pub(crate) admin_node: String,
    /// The delivery this message is an attempt of: the same on every attempt and on a resend
    /// by another admin, so a receiver can drop a repeat. None for a test message.
    pub(crate) delivery_id: Option<i64>,
    /// A test message sent from the API, not a real failure.
    pub(crate) test: bool,
    /// The ledger's alert this message is about (`run_id` is then its first run); `None`
    /// for a failed run.
    pub(crate) fire_alert: Option<FireAlert>,
    /// Runs of the job that failed after `run_id` and joined this alarm, and the last of them.
    pub(crate) grouped_runs: i32,
    pub(crate) last_run_id: Option<i64>,
}

fn instant(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// What a fire alert says in one line: `12 fires missed`.
fn fires_phrase(alert: &FireAlert) -> String {
    let what = match alert.kind {
        FireAlertKind::Missed => "missed",
        FireAlertKind::Late => "late",
        FireAlertKind::Doubled => "doubled",
    };
    let fires = if alert.fires == 1 { "fire" } else { "fires" };
    format!("{} {fires} {what}", alert.fires)
}

impl AlarmMessage {
    /// One line: the email subject, the first line of chat messages.
    pub(crate) fn title(&self) -> String {
        let test = if self.test { "[test] " } else { "" };
        match &self.fire_alert {
            Some(alert) => format!(
                "{test}Tickwork alarm: job {} ({}) {}",
                self.job_id,
                self.job_key,
                fires_phrase(alert)
            ),
            None => format!(
                "{test}Tickwork alarm: job {} ({}) run {} {}{}",
                self.job_id,
                self.job_key,
                self.run_id,
                self.state,
                match self.grouped_runs {
                    0 => String::new(),
                    1 => " and 1 more run".to_owned(),
                    n => format!(" and {n} more runs"),
                }
            ),
        }
    }

    /// The whole message as text (email body, chat robots).
    pub(crate) fn text(&self) -> String {
        let none = "-";
        let mut out = self.title();
        out.push('\n');
        if let Some(alert) = &self.fire_alert {
            let description = if self.job_description.is_empty() {
                none
            } else {
                &self.job_description
            };
            let why = match alert.kind {
                FireAlertKind::Missed => "no executor had them by their instant plus the tolerance",
                FireAlertKind::Late => {
                    "they reached their executor later than the job's lateness budget"
                }
                FireAlertKind::Doubled => "more than one run holds each of them in the ledger",
            };
            let mut lines = vec![
                (
                    "job",
                    format!("{} {} ({description})", self.job_id, self.job_key),
                ),
                ("fires", format!("{}: {why}", fires_phrase(alert))),
                (
                    "instants",
                    format!("{} to {}", instant(alert.first_at), instant(alert.last_at)),
                ),
                ("first run", alert.run_id.to_string()),
            ];
            if alert.kind == FireAlertKind::Late {
                lines.push((
                    "latest",
                    format!("{} ms after its instant", alert.worst_late_ms),
                ));
            }
            lines.push(("admin node", self.admin_node.clone()));
            for (label, value) in lines {
                out.push_str(&format!("\n{label}: {}", value.trim()));
            }
            return out;
        }
        let description = if self.job_description.is_empty() {
            none
        } else {
            &self.job_description
        };
        for (label, value) in [
            (
                "job",
                format!("{} {} ({description})", self.job_id, self.job_key),
            ),
            ("run", format!("{} attempt {}", self.run_id, self.attempt)),
            ("state", self.state.clone()),
            (
                "executor",
                self.executor_address.clone().unwrap_or_else(|| none.into()),
            ),
            ("scheduled at", instant(self.scheduled_at)),
            (
                "trigger",
                self.trigger_msg.clone().unwrap_or_else(|| none.into()),
            ),
            (
                "failure",
                self.handle_msg.clone().unwrap_or_else(|| none.into()),
            ),
            ("admin node", self.admin_node.clone()),
        ] {
            out.push_str(&format!("\n{label}: {}", value.trim()));
        }
        if let (n @ 1.., Some(last)) = (self.grouped_runs, self.last_run_id) {
            out.push_str(&format!(
                "\nmore runs: {n} more of this job failed, timed out or were lost after it; \
                 the last: run {last}"
            ));
        }
        out
    }

    /// The generic webhook's JSON document.
    pub(crate) fn json(&self) -> Value {
        if let Some(alert) = &self.fire_alert {
            return json!({
                "event": format!("fires_{}", alert.kind),
                "title": self.title(),
                "text": self.text(),
                "job": {
                    "id": self.job_id,
                    "key": self.job_key,
                    "description": self.job_description,
                },
                "alert": {
                    "kind": alert.kind.as_str(),
                    "fires": alert.fires,
                    "first_at": alert.first_at,
                    "last_at": alert.last_at,
                    "worst_late_ms": alert.worst_late_ms,
                    "run_id": alert.run_id,
                },
                "admin_node": self.admin_node,
                "delivery_id": self.delivery_id,
            });
        }
        json!({
            "event": if self.test { "test" } else { "run_failed" },
            "title": self.title(),
            "text": self.text(),
            "job": {
                "id": self.job_id,
                "key": self.job_key,
                "description": self.job_description,
            },
            "run": {
                "id": self.run_id,
                "attempt": self.attempt,
                "state": self.state,
                "executor_address": self.executor_address,
                "scheduled_at": self.scheduled_at,
                "trigger_msg": self.trigger_msg,
                "handle_msg": self.handle_msg,
            },
            "grouped_runs": self.grouped_runs,
            "last_run_id": self.last_run_id,
            "admin_node": self.admin_node,
            "delivery_id": self.delivery_id,
        })
    }
}

/// The JSON body a chat robot takes.
pub(crate) fn chat_body(kind: AlarmKind, text: &str) -> Value {
    match kind {
        AlarmKind::Feishu => json!({ "msg_type": "text", "content": { "text": text } }),
        AlarmKind::Slack => json!({ "text": text }),
        _ => json!({ "msgtype": "text", "text": { "content": text } }),
    }
}

// ---- signing ----

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The generic webhook's signature header value: `sha256=<hex HMAC-SHA256 of
/// "<timestamp>.<body>">` keyed by the channel secret.
pub(crate) fn webhook_signature(secret: &str, timestamp: i64, body: &str) -> String {
    let mac = hmac_sha256(secret.as_bytes(), format!("{timestamp}.{body}").as_bytes());
    format!("sha256={}", hex(&mac))
}

/// DingTalk's `sign`: base64 of HMAC-SHA256 of `"<timestamp ms>\n<secret>"` keyed by the
/// secret (sent URL-encoded as a query parameter with `timestamp`).
pub(crate) fn dingtalk_sign(secret: &str, timestamp_ms: i64) -> String {
    let data = format!("{timestamp_ms}\n{secret}");
    BASE64.encode(hmac_sha256(secret.as_bytes(), data.as_bytes()))
}

/// The DingTalk robot URL with `timestamp` and `sign` added.
pub(crate) fn dingtalk_url(url: &str, secret: &str, timestamp_ms: i64) -> Result<String, Error> {
    let mut parsed = url::Url::parse(url).map_err(|e| invalid(format!("url: {e}")))?;
    parsed
        .query_pairs_mut()
        .append_pair("timestamp", &timestamp_ms.to_string())
        .append_pair("sign", &dingtalk_sign(secret, timestamp_ms));
    Ok(parsed.into())
}

/// Feishu's `sign`: base64 of HMAC-SHA256 of empty data keyed by `"<timestamp s>\n<secret>"`.
pub(crate) fn feishu_sign(secret: &str, timestamp_s: i64) -> String {
    let key = format!("{timestamp_s}\n{secret}");
    BASE64.encode(hmac_sha256(key.as_bytes(), b""))
}

/// Reads a chat robot's answer: DingTalk and WeCom report failures as a non-zero `errcode`,
/// Feishu as a non-zero `code` (older bots: `StatusCode`), all with HTTP 200.
pub(crate) fn robot_error(kind: AlarmKind, body: &str) -> Option<String> {
    let keys: &[(&str, &str)] = match kind {
        AlarmKind::DingTalk | AlarmKind::WeCom => &[("errcode", "errmsg")],
        AlarmKind::Feishu => &[("code", "msg"), ("StatusCode", "StatusMessage")],
        _ => return None,
    };
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    for (code_key, msg_key) in keys {
        if let Some(code) = map.get(*code_key).and_then(Value::as_i64)
            && code != 0
        {
            let msg = map.get(*msg_key).and_then(Value::as_str).unwrap_or("");
            return Some(format!("{code_key} {code}: {msg}"));
        }
    }
    None
}

#[cfg(test)]
mod tests;
