//! Sends one rendered alarm: SMTP through `lettre` (pooled connections per channel), HTTP
//! through `reqwest`. Every send is bounded by a timeout; errors come back as one line.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tickwork_store::{AlarmChannel, AlarmKind};

use super::{AlarmMessage, ChannelConfig, EmailConfig, TlsMode};

type Smtp = AsyncSmtpTransport<Tokio1Executor>;

/// The clients alarms go out through.
pub(crate) struct Senders {
    http: reqwest::Client,
    /// One pooled SMTP transport per email channel, rebuilt when the channel changes
    /// (keyed by its `updated_at`).
    smtp: Mutex<HashMap<i64, (i64, Smtp)>>,
}

/// The longest reply body quoted in an error.
const BODY_IN_ERROR: usize = 200;

impl Senders {
    pub(crate) fn new() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("tickwork/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Senders {
            http,
            smtp: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `message` on `channel`, within `timeout`.
    pub(crate) async fn send(
        &self,
        channel: &AlarmChannel,
        config: &ChannelConfig,
        message: &AlarmMessage,
        timeout: Duration,
    ) -> Result<(), String> {
        let send = async {
            match config {
                ChannelConfig::Email(c) => self.email(channel, c, message, timeout).await,
                _ => self.http(channel.kind, config, message, timeout).await,
            }
        };
        match tokio::time::timeout(timeout, send).await {
            Ok(result) => result,
            Err(_) => Err(format!("timed out after {} ms", timeout.as_millis())),
        }
    }

    fn transport(
        &self,
        channel: &AlarmChannel,
        c: &EmailConfig,
        timeout: Duration,
    ) -> Result<Smtp, String> {
        let mut cache = self.smtp.lock().expect("smtp lock");
        if let Some((version, transport)) = cache.get(&channel.id)
            && *version == channel.updated_at
        {
            return Ok(transport.clone());
        }
        let host = c.host.trim();
        let builder = match c.tls {
            TlsMode::None => Smtp::builder_dangerous(host),
            TlsMode::Starttls => Smtp::starttls_relay(host).map_err(|e| format!("smtp: {e}"))?,
            TlsMode::Tls => Smtp::relay(host).map_err(|e| format!("smtp: {e}"))?,
        };
        let mut builder = builder.port(c.port()).timeout(Some(timeout));
        if let (Some(user), Some(password)) = (&c.user, &c.password) {
            builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
        }
        let transport = builder.build();
        cache.insert(channel.id, (channel.updated_at, transport.clone()));
        Ok(transport)
    }

    async fn email(
        &self,
        channel: &AlarmChannel,
        c: &EmailConfig,
        message: &AlarmMessage,
        timeout: Duration,
    ) -> Result<(), String> {
        let mut mail = Message::builder()
            .from(c.from.parse().map_err(|e| format!("from: {e}"))?)
            .subject(message.title());
        for to in &c.to {
            mail = mail.to(to.parse().map_err(|e| format!("to {to}: {e}"))?);
        }
        let mail = mail
            .header(ContentType::TEXT_PLAIN)
            .body(message.text())
            .map_err(|e| format!("email: {e}"))?;
        let transport = self.transport(channel, c, timeout)?;
        match transport.send(mail).await {
            Ok(_) => Ok(()),
            Err(e) => {
                // A broken pooled connection must not poison the next attempt.
                self.smtp.lock().expect("smtp lock").remove(&channel.id);
                Err(format!("smtp {}:{}: {e}", c.host, c.port()))
            }
        }
    }

    async fn http(
        &self,
        kind: AlarmKind,
        config: &ChannelConfig,
        message: &AlarmMessage,
        timeout: Duration,
    ) -> Result<(), String> {
        let now = crate::timer::now_ms();
        let text = message.text();
        let (url, body, headers) = match config {
            ChannelConfig::Webhook(c) => {
                let body = message.json().to_string();
                let headers = signed_headers(c, now, &body, message.delivery_id);
                (c.url.clone(), body, headers)
            }
            ChannelConfig::DingTalk(c) => {
                let url = match &c.secret {
                    Some(secret) => {
                        super::dingtalk_url(&c.url, secret, now).map_err(|e| e.to_string())?
                    }
                    None => c.url.clone(),
                };
                (url, super::chat_body(kind, &text).to_string(), Vec::new())
            }
            ChannelConfig::Feishu(c) => {
                let mut body = super::chat_body(kind, &text);
                if let Some(secret) = &c.secret {
                    let ts = now / 1000;
                    body["timestamp"] = ts.to_string().into();
                    body["sign"] = super::feishu_sign(secret, ts).into();
                }
                (c.url.clone(), body.to_string(), Vec::new())
            }
            ChannelConfig::WeCom(c) | ChannelConfig::Slack(c) => (
                c.url.clone(),
                super::chat_body(kind, &text).to_string(),
                Vec::new(),
            ),
            ChannelConfig::Email(_) => return Err("not an http channel".to_owned()),
        };
        let reply = self.post(&url, body, headers, timeout).await?;
        if let Some(e) = super::robot_error(kind, &reply) {
            return Err(format!(
                "{} refused the message: {e}",
                super::mask_url(&url)
            ));
        }
        Ok(())
    }

    /// Posts `body` (JSON) to a webhook channel, signed as its alarms are, with `id` as the
    /// delivery id the receiver drops repeats by: how a submission's completion reaches its
    /// submitter.
    pub(crate) async fn post_signed(
        &self,
        channel: &super::SignedUrl,
        body: String,
        id: i64,
        timeout: Duration,
    ) -> Result<(), String> {
        let headers = signed_headers(channel, crate::timer::now_ms(), &body, Some(id));
        let post = self.post(&channel.url, body, headers, timeout);
        match tokio::time::timeout(timeout, post).await {
            Ok(result) => result.map(|_| ()),
            Err(_) => Err(format!("timed out after {} ms", timeout.as_millis())),
        }
    }

    /// Posts `body` as JSON with `headers`; the reply's text, or the error in one line.
    async fn post(
        &self,
        url: &str,
        body: String,
        headers: Vec<(&'static str, String)>,
        timeout: Duration,
    ) -> Result<String, String> {
        let mut request = self
            .http
            .post(url)
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        // Errors name the host only: robot URLs carry their token.
        let target = super::mask_url(url);
        let response = request
            .send()
            .await
            .map_err(|e| format!("{target}: {}", without_url(&e)))?;
        let status = response.status();
        let reply = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(format!(
                "{target} answered http status {status}: {}",
                clip(&reply)
            ));
        }
        Ok(reply)
    }
}

/// The generic webhook's headers: the timestamp (seconds), the signature of
/// `"<timestamp>.<body>"` with the channel's secret, and the delivery id when there is one.
fn signed_headers(
    c: &super::SignedUrl,
    now_ms: i64,
    body: &str,
    delivery: Option<i64>,
) -> Vec<(&'static str, String)> {
    let ts = now_ms / 1000;
    let secret = c.secret.as_deref().unwrap_or_default();
    let mut headers = vec![
        ("X-Tickwork-Timestamp", ts.to_string()),
        (
            "X-Tickwork-Signature",
            super::webhook_signature(secret, ts, body),
        ),
    ];
    if let Some(id) = delivery {
        headers.push(("X-Tickwork-Delivery", id.to_string()));
    }
    headers
}

/// A reqwest error's description without the URL it embeds.
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(BODY_IN_ERROR) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
