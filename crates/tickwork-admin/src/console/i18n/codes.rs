//! The labels of the codes the console shows (route, block and misfire strategies, schedule
//! and glue types, run states, trigger types, alarm statuses, ...) in English and Chinese: one
//! table per language, as the console's words, looked up by kind and code.
//!
//! People read the label; the code stays what forms post and the API takes, and pages show it
//! in the label's tooltip. A code the tables lack shows as itself. The Chinese labels are the
//! ones XXL-JOB's console uses, where it has one.

use tickwork_core::alarm::AlarmStatus;
use tickwork_core::run::RunState;
use tickwork_core::{
    BlockStrategy, Delivery, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType,
};

/// A value the console shows by its label: its kind (the tables' first column) and its code.
pub(in crate::console) trait Code {
    fn kind_code(&self) -> (&'static str, &'static str);
}

impl<T: Code> Code for &T {
    fn kind_code(&self) -> (&'static str, &'static str) {
        (**self).kind_code()
    }
}

/// An enumeration of codes: every value has a label in each language (a test checks it).
pub(in crate::console) trait Coded: Code + Copy + 'static {
    fn all() -> &'static [Self];
}

macro_rules! coded {
    ($($t:ty => $kind:literal),+ $(,)?) => {
        $(
            impl Code for $t {
                fn kind_code(&self) -> (&'static str, &'static str) {
                    ($kind, self.as_str())
                }
            }

            impl Coded for $t {
                fn all() -> &'static [Self] {
                    <$t>::ALL
                }
            }
        )+
    };
}

coded! {
    RouteStrategy => "route",
    BlockStrategy => "block",
    MisfireStrategy => "misfire",
    ScheduleType => "schedule",
    GlueType => "glue",
    RunState => "state",
    TriggerType => "trigger",
    AlarmStatus => "alarm",
    Delivery => "delivery",
}

/// The kinds of codes that are plain strings of the console, with every code of each: the
/// alarm deliveries' states, the alarm channels' kinds and their TLS modes.
pub(in crate::console) const TEXT_KINDS: &[(&str, &[&str])] = &[
    ("sent", &["pending", "sent", "failed"]),
    (
        "channel",
        &["email", "webhook", "dingtalk", "wecom", "feishu", "slack"],
    ),
    ("tls", &["none", "starttls", "tls"]),
];

/// The codes of text kind `kind` (empty for a kind that is not one).
pub(in crate::console) fn text_codes(kind: &str) -> &'static [&'static str] {
    TEXT_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, codes)| *codes)
        .unwrap_or(&[])
}

/// The label of `code` of `kind` in `table`, if it has one.
pub(super) fn find(
    table: &'static [(&str, &str, &str)],
    kind: &str,
    code: &str,
) -> Option<&'static str> {
    table
        .binary_search_by(|(k, c, _)| (*k, *c).cmp(&(kind, code)))
        .ok()
        .map(|i| table[i].2)
}

/// English, sorted by kind and code (a test checks it), so lookups are binary searches.
pub(super) static EN: &[(&str, &str, &str)] = &[
    ("alarm", "delivering", "Alarm sending"),
    ("alarm", "grouped", "In the job's grouped alarm"),
    ("alarm", "not_needed", "Not needed"),
    ("alarm", "queued", "Queued"),
    ("alarm", "send_failed", "Alarm failed"),
    ("alarm", "sent", "Alarm sent"),
    ("alarm", "undecided", "Default"),
    ("block", "COVER_EARLY", "Cover early"),
    ("block", "DISCARD_LATER", "Discard later"),
    ("block", "SERIAL_EXECUTION", "Serial execution"),
    ("channel", "dingtalk", "DingTalk"),
    ("channel", "email", "Email"),
    ("channel", "feishu", "Feishu"),
    ("channel", "slack", "Slack"),
    ("channel", "webhook", "Webhook"),
    ("channel", "wecom", "WeCom"),
    ("delivery", "AT_LEAST_ONCE", "At least once (sent again)"),
    ("delivery", "AT_MOST_ONCE", "At most once (never twice)"),
    ("glue", "BEAN", "Bean handler"),
    ("glue", "GLUE_GROOVY", "GLUE (Java)"),
    ("glue", "GLUE_NODEJS", "GLUE (Node.js)"),
    ("glue", "GLUE_PHP", "GLUE (PHP)"),
    ("glue", "GLUE_POWERSHELL", "GLUE (PowerShell)"),
    ("glue", "GLUE_PYTHON", "GLUE (Python)"),
    ("glue", "GLUE_PYTHON2", "GLUE (Python 2)"),
    ("glue", "GLUE_SHELL", "GLUE (Shell)"),
    ("misfire", "DO_NOTHING", "Do nothing"),
    ("misfire", "FIRE_ONCE_NOW", "Fire once now"),
    ("route", "BUSYOVER", "Busy over"),
    ("route", "CONSISTENT_HASH", "Consistent hash"),
    ("route", "FAILOVER", "Failover"),
    ("route", "FIRST", "First"),
    ("route", "LAST", "Last"),
    ("route", "LEAST_FREQUENTLY_USED", "Least frequently used"),
    ("route", "LEAST_RECENTLY_USED", "Least recently used"),
    ("route", "RANDOM", "Random"),
    ("route", "ROUND", "Round robin"),
    ("route", "SHARDING_BROADCAST", "Sharding broadcast"),
    ("schedule", "CRON", "Cron"),
    ("schedule", "CRON_AFTER_END", "Cron, after the previous run"),
    ("schedule", "FIX_DELAY", "Fixed delay"),
    ("schedule", "FIX_RATE", "Fixed rate"),
    ("schedule", "NONE", "None"),
    ("schedule", "ONCE", "Once"),
    ("sent", "failed", "Failed"),
    ("sent", "pending", "Pending"),
    ("sent", "sent", "Sent"),
    ("state", "dispatched", "Running"),
    ("state", "failed", "Failed"),
    ("state", "killed", "Killed"),
    ("state", "lost", "Lost"),
    ("state", "misfired", "Misfired"),
    ("state", "planned", "Planned"),
    ("state", "sending", "Sending"),
    ("state", "skipped", "Skipped"),
    ("state", "succeeded", "Succeeded"),
    ("state", "timed_out", "Timed out"),
    ("tls", "none", "None (plain)"),
    ("tls", "starttls", "STARTTLS"),
    ("tls", "tls", "TLS"),
    ("trigger", "API", "API"),
    ("trigger", "CRON", "Cron"),
    ("trigger", "FIX_DELAY", "Fixed delay"),
    ("trigger", "FIX_RATE", "Fixed rate"),
    ("trigger", "MANUAL", "Manual"),
    ("trigger", "MISFIRE", "Misfire compensation"),
    ("trigger", "ONCE", "Once"),
    ("trigger", "PARENT", "Parent job"),
    ("trigger", "RETRY", "Retry after failure"),
    ("trigger", "WORKFLOW", "Workflow"),
];

/// 简体中文. Same kinds and codes as [`EN`], sorted the same way.
pub(super) static ZH: &[(&str, &str, &str)] = &[
    ("alarm", "delivering", "告警发送中"),
    ("alarm", "grouped", "已并入任务的合并告警"),
    ("alarm", "not_needed", "无需告警"),
    ("alarm", "queued", "锁定"),
    ("alarm", "send_failed", "告警失败"),
    ("alarm", "sent", "告警成功"),
    ("alarm", "undecided", "默认"),
    ("block", "COVER_EARLY", "覆盖之前调度"),
    ("block", "DISCARD_LATER", "丢弃后续调度"),
    ("block", "SERIAL_EXECUTION", "单机串行"),
    ("channel", "dingtalk", "钉钉"),
    ("channel", "email", "邮件"),
    ("channel", "feishu", "飞书"),
    ("channel", "slack", "Slack"),
    ("channel", "webhook", "Webhook"),
    ("channel", "wecom", "企业微信"),
    ("delivery", "AT_LEAST_ONCE", "至少一次（重发）"),
    ("delivery", "AT_MOST_ONCE", "至多一次（不重发）"),
    ("glue", "BEAN", "BEAN"),
    ("glue", "GLUE_GROOVY", "GLUE(Java)"),
    ("glue", "GLUE_NODEJS", "GLUE(Nodejs)"),
    ("glue", "GLUE_PHP", "GLUE(PHP)"),
    ("glue", "GLUE_POWERSHELL", "GLUE(PowerShell)"),
    ("glue", "GLUE_PYTHON", "GLUE(Python)"),
    ("glue", "GLUE_PYTHON2", "GLUE(Python2)"),
    ("glue", "GLUE_SHELL", "GLUE(Shell)"),
    ("misfire", "DO_NOTHING", "忽略"),
    ("misfire", "FIRE_ONCE_NOW", "立即执行一次"),
    ("route", "BUSYOVER", "忙碌转移"),
    ("route", "CONSISTENT_HASH", "一致性HASH"),
    ("route", "FAILOVER", "故障转移"),
    ("route", "FIRST", "第一个"),
    ("route", "LAST", "最后一个"),
    ("route", "LEAST_FREQUENTLY_USED", "最不经常使用"),
    ("route", "LEAST_RECENTLY_USED", "最近最久未使用"),
    ("route", "RANDOM", "随机"),
    ("route", "ROUND", "轮询"),
    ("route", "SHARDING_BROADCAST", "分片广播"),
    ("schedule", "CRON", "CRON"),
    ("schedule", "CRON_AFTER_END", "CRON(等待上次运行结束)"),
    ("schedule", "FIX_DELAY", "固定延迟"),
    ("schedule", "FIX_RATE", "固定速度"),
    ("schedule", "NONE", "无"),
    ("schedule", "ONCE", "单次"),
    ("sent", "failed", "发送失败"),
    ("sent", "pending", "待发送"),
    ("sent", "sent", "已发送"),
    ("state", "dispatched", "运行中"),
    ("state", "failed", "失败"),
    ("state", "killed", "已终止"),
    ("state", "lost", "丢失"),
    ("state", "misfired", "调度过期"),
    ("state", "planned", "待调度"),
    ("state", "sending", "发送中"),
    ("state", "skipped", "已跳过"),
    ("state", "succeeded", "成功"),
    ("state", "timed_out", "超时"),
    ("tls", "none", "不加密"),
    ("tls", "starttls", "STARTTLS"),
    ("tls", "tls", "TLS"),
    ("trigger", "API", "API触发"),
    ("trigger", "CRON", "Cron触发"),
    ("trigger", "FIX_DELAY", "固定延迟触发"),
    ("trigger", "FIX_RATE", "固定速度触发"),
    ("trigger", "MANUAL", "手动触发"),
    ("trigger", "MISFIRE", "调度过期补偿"),
    ("trigger", "ONCE", "单次触发"),
    ("trigger", "PARENT", "父任务触发"),
    ("trigger", "RETRY", "失败重试"),
    ("trigger", "WORKFLOW", "工作流触发"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of `C` has a label in both tables.
    fn labelled<C: Coded>(
        missing: &mut Vec<String>,
        known: &mut Vec<(&'static str, &'static str)>,
    ) {
        for v in C::all() {
            let (kind, code) = v.kind_code();
            known.push((kind, code));
            for (lang, table) in [("en", EN), ("zh", ZH)] {
                if find(table, kind, code).is_none() {
                    missing.push(format!("{lang} {kind}.{code}"));
                }
            }
        }
    }

    #[test]
    fn every_code_has_an_english_and_a_chinese_label() {
        let mut missing = Vec::new();
        let mut known = Vec::new();
        labelled::<RouteStrategy>(&mut missing, &mut known);
        labelled::<BlockStrategy>(&mut missing, &mut known);
        labelled::<MisfireStrategy>(&mut missing, &mut known);
        labelled::<ScheduleType>(&mut missing, &mut known);
        labelled::<GlueType>(&mut missing, &mut known);
        labelled::<RunState>(&mut missing, &mut known);
        labelled::<TriggerType>(&mut missing, &mut known);
        labelled::<AlarmStatus>(&mut missing, &mut known);
        labelled::<Delivery>(&mut missing, &mut known);
        for (kind, codes) in TEXT_KINDS {
            for code in *codes {
                known.push((kind, code));
                for (lang, table) in [("en", EN), ("zh", ZH)] {
                    if find(table, kind, code).is_none() {
                        missing.push(format!("{lang} {kind}.{code}"));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "labels missing: {missing:?}");
        // And no label of a code that is none (a renamed or removed value).
        known.sort_unstable();
        let stale: Vec<_> = EN
            .iter()
            .map(|(k, c, _)| (*k, *c))
            .filter(|kc| known.binary_search(kc).is_err())
            .collect();
        assert!(stale.is_empty(), "labels of no code: {stale:?}");
    }

    #[test]
    fn both_tables_have_the_same_codes_in_order() {
        let en: Vec<(&str, &str)> = EN.iter().map(|(k, c, _)| (*k, *c)).collect();
        let zh: Vec<(&str, &str)> = ZH.iter().map(|(k, c, _)| (*k, *c)).collect();
        assert_eq!(en, zh);
        let mut sorted = en.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(en, sorted, "codes must be sorted and unique");
        for (k, c, label) in EN.iter().chain(ZH) {
            assert!(!label.trim().is_empty(), "{k}.{c} is empty");
        }
    }

    #[test]
    fn the_labels_are_the_ones_xxl_job_users_know() {
        assert_eq!(find(ZH, "route", "FIRST"), Some("第一个"));
        assert_eq!(
            find(ZH, "route", "LEAST_RECENTLY_USED"),
            Some("最近最久未使用")
        );
        assert_eq!(find(ZH, "block", "DISCARD_LATER"), Some("丢弃后续调度"));
        assert_eq!(find(ZH, "misfire", "FIRE_ONCE_NOW"), Some("立即执行一次"));
        assert_eq!(find(ZH, "trigger", "MISFIRE"), Some("调度过期补偿"));
        assert_eq!(
            find(EN, "route", "SHARDING_BROADCAST"),
            Some("Sharding broadcast")
        );
        assert_eq!(find(EN, "route", "NEAREST"), None);
    }
}
