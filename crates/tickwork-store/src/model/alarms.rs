//! Alarm channels and deliveries.

use super::PageReq;

stored_enum! {
    /// How an alarm channel delivers.
    AlarmKind, "alarm channel kind" {
        /// Email over SMTP.
        Email = "email",
        /// A JSON POST signed with HMAC-SHA256.
        Webhook = "webhook",
        /// A DingTalk group robot.
        DingTalk = "dingtalk",
        /// A WeCom group robot.
        WeCom = "wecom",
        /// A Feishu (Lark) custom bot.
        Feishu = "feishu",
        /// A Slack incoming webhook.
        Slack = "slack",
    }
}

impl AlarmKind {
    /// Every kind, in the order the API lists them.
    pub const ALL: [AlarmKind; 6] = [
        AlarmKind::Email,
        AlarmKind::Webhook,
        AlarmKind::DingTalk,
        AlarmKind::WeCom,
        AlarmKind::Feishu,
        AlarmKind::Slack,
    ];
}

stored_enum! {
    /// Where an alarm delivery stands.
    DeliveryState, "alarm delivery state" {
        /// Waiting for its next attempt (or being sent by the node that claimed it).
        Pending = "pending",
        /// Delivered.
        Sent = "sent",
        /// Given up after the last attempt.
        Failed = "failed",
    }
}

/// A named place alarms go to. `config` is the kind's settings as JSON text; the store keeps
/// it as given (the admin validates it and hides its secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmChannel {
    pub id: i64,
    /// Unique; jobs list the names of their channels.
    pub name: String,
    pub kind: AlarmKind,
    pub config: String,
    /// A disabled channel gets no new deliveries.
    pub enabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A new alarm channel. A taken name is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmChannelNew {
    pub name: String,
    pub kind: AlarmKind,
    pub config: String,
    pub enabled: bool,
    pub now: i64,
}

/// Rewrites a channel. A rename of a channel that jobs use is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmChannelUpdate {
    pub id: i64,
    pub name: String,
    pub kind: AlarmKind,
    pub config: String,
    pub enabled: bool,
    pub now: i64,
}

/// One alarm on one channel: of a failed run, or of a fire alert (then `run_id` is the
/// alert's first run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmDelivery {
    pub id: i64,
    pub run_id: i64,
    /// The fire alert this delivers ([`crate::FireAlertRecord`]); `None` for a run's alarm.
    pub alert_id: Option<i64>,
    /// The job of `run_id`.
    pub job_id: i64,
    pub channel_id: i64,
    /// The channel's name and kind when the delivery was queued (kept if it goes).
    pub channel_name: String,
    pub kind: AlarmKind,
    pub state: DeliveryState,
    /// Attempts finished so far (sent or failed).
    pub attempts: i32,
    /// A pending delivery is due from this instant.
    pub next_attempt_at: i64,
    /// When it was first due: its window's start, from which the job's next alarm on the
    /// channel waits a window ([`tickwork_core::alarm::group`]).
    pub due_at: i64,
    /// Runs of the job that joined it after `run_id` failed ([`AlarmStatus::Grouped`]).
    pub grouped_runs: i32,
    /// The last of those runs.
    pub last_run_id: Option<i64>,
    pub last_error: Option<String>,
    /// The node sending it, until `claimed_until`.
    pub claimed_by: Option<String>,
    pub claimed_until: Option<i64>,
    pub sent_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The channels one queued run alarms on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAlarm {
    pub run_id: i64,
    /// Channel ids; empty when the job has none (the run then needs no alarm).
    pub channel_ids: Vec<i64>,
}

/// Queues the deliveries of runs waiting for an alarm ([`AlarmStatus::Queued`]): each run
/// joins its job's open delivery on a channel or gets its own, as
/// [`tickwork_core::alarm::group`] decides with `group_window_ms`. A run already queued
/// (by another node) is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmDeliveriesQueue {
    pub runs: Vec<RunAlarm>,
    pub now: i64,
    /// A job's alarms on a channel are at least this far apart; 0 sends one per run at once.
    pub group_window_ms: i64,
}

/// What [`AlarmDeliveriesQueue`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlarmDeliveriesQueued {
    /// Deliveries written.
    pub deliveries: u64,
    /// Runs carried by their job's open deliveries, with none of their own: now
    /// [`AlarmStatus::Grouped`].
    pub joined: u64,
}

/// Takes up to `limit` pending deliveries due at `now` for `node_id`, which has until
/// `now + hold_ms` to finish them before another node may take them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryClaim {
    pub node_id: String,
    pub now: i64,
    pub hold_ms: i64,
    pub limit: u32,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Delivered.
    Sent,
    /// Failed; try again at `next_attempt_at`.
    Retry { error: String, next_attempt_at: i64 },
    /// Failed for the last time.
    Failed { error: String },
}

/// Records the attempt `node_id` made on delivery `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFinish {
    pub id: i64,
    pub node_id: String,
    pub outcome: DeliveryOutcome,
    pub now: i64,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub run_id: Option<i64>,
    pub job_id: Option<i64>,
    pub state: Option<DeliveryState>,
    pub page: PageReq,
}
