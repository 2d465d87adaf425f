//! The console's words in English and Chinese: one table per language, looked up by key.
//!
//! A key missing from a table shows the key itself (never a panic), and a unit test keeps both
//! tables on the same keys. The labels of codes (strategies, types, states) are tables of the
//! same kind in [`codes`], looked up by kind and code.

mod codes;

use axum::http::HeaderMap;

pub(super) use codes::{Code, Coded, text_codes};

/// A language of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    En,
    Zh,
}

impl Lang {
    /// The code used in the `lang` cookie, user locales and `<html lang>`.
    pub(super) fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh-CN",
        }
    }

    /// Reads a locale such as `zh`, `zh-CN`, `zh_Hans` or `en-US`; `None` for anything else.
    pub(super) fn parse(s: &str) -> Option<Lang> {
        let s = s.trim().to_ascii_lowercase();
        if s.starts_with("zh") {
            Some(Lang::Zh)
        } else if s.starts_with("en") {
            Some(Lang::En)
        } else {
            None
        }
    }

    /// The first language of an `Accept-Language` header we speak, by the client's order of
    /// preference (q values).
    pub(super) fn from_accept_language(headers: &HeaderMap) -> Option<Lang> {
        let value = headers
            .get(axum::http::header::ACCEPT_LANGUAGE)?
            .to_str()
            .ok()?;
        let mut choices: Vec<(f32, usize, Lang)> = Vec::new();
        for (i, part) in value.split(',').enumerate() {
            let mut bits = part.split(';');
            let Some(lang) = bits.next().and_then(Lang::parse) else {
                continue;
            };
            let q = bits
                .find_map(|b| b.trim().strip_prefix("q="))
                .and_then(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            choices.push((q, i, lang));
        }
        // Highest q first; the header's order breaks ties.
        choices.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        choices.first().map(|c| c.2)
    }

    /// The text of `key` in this language.
    pub(super) fn t(self, key: &str) -> &'static str {
        let table = match self {
            Lang::En => EN,
            Lang::Zh => ZH,
        };
        match table.binary_search_by(|(k, _)| (*k).cmp(key)) {
            Ok(i) => table[i].1,
            Err(_) => match EN.binary_search_by(|(k, _)| (*k).cmp(key)) {
                Ok(i) => EN[i].1,
                Err(_) => "??",
            },
        }
    }

    /// The label of a code (a route strategy, a run state, ...) in this language; the code
    /// itself when the tables have none.
    pub(super) fn label(self, c: impl Code) -> &'static str {
        let (kind, code) = c.kind_code();
        self.label_of(kind, code)
    }

    /// The label of `code` of `kind` (one of [`Code`]'s kinds or of [`codes::TEXT_KINDS`]):
    /// this language's, else the English one, else the code itself.
    pub(super) fn label_of<'a>(self, kind: &str, code: &'a str) -> &'a str {
        let table = match self {
            Lang::En => codes::EN,
            Lang::Zh => codes::ZH,
        };
        codes::find(table, kind, code)
            .or_else(|| codes::find(codes::EN, kind, code))
            .unwrap_or(code)
    }
}

/// English. Sorted by key (a test checks it), so lookups are binary searches.
static EN: &[(&str, &str)] = &[
    ("action", "Action"),
    ("actions", "Actions"),
    ("actor", "Actor"),
    ("add", "Add"),
    ("address", "Executor address"),
    (
        "address_hint",
        "optional, e.g. http://10.0.0.5:9999; empty routes as usual",
    ),
    ("address_mode", "Addresses"),
    ("addresses", "Manual addresses"),
    ("addresses_hint", "one per line, for manual groups"),
    ("admin", "Admin"),
    ("alarm_channels", "Alarm channels"),
    ("alerts_word", "alerts"),
    ("all", "All"),
    ("app_name", "App name"),
    ("apply", "Apply"),
    ("attempts", "Attempts"),
    ("audit", "Audit log"),
    ("auto", "Automatic"),
    ("avg", "average"),
    ("axis_day", "day"),
    ("axis_hour", "hour"),
    ("back", "Back"),
    ("bad_credentials", "Wrong username or password"),
    ("bad_date", "is not a date (YYYY-MM-DD)"),
    ("bad_hours", "must be a whole number of hours from 1 to 168"),
    ("bad_number", "must be a whole number"),
    ("bad_period", "is not one of the periods offered"),
    ("bad_time", "is not a date and time"),
    ("before_days", "Older than (days)"),
    ("block_strategy", "Block strategy"),
    ("bucket", "Bucket"),
    ("bulk_deleted", "{n} deleted"),
    ("bulk_none", "Tick at least one job first"),
    ("bulk_refused", "{n} refused"),
    ("bulk_started", "{n} started"),
    ("bulk_stopped", "{n} stopped"),
    ("bulk_triggered", "{n} triggered"),
    ("busiest", "Busiest bucket"),
    ("by_group", "By executor group"),
    ("cancel", "Cancel"),
    (
        "capped_note",
        "Some jobs fire too often to count every fire; their counts stop early and are lower bounds:",
    ),
    ("change", "Change"),
    ("change_password", "Change password"),
    (
        "change_password_help",
        "Give your current password and the new one twice. All your sessions end, this one too: then sign in with the new password.",
    ),
    ("channel", "Channel"),
    (
        "channel_name_hint",
        "letters, digits, '.', '_' or '-'; jobs list channels by name",
    ),
    ("chart_lateness", "Dispatch lateness: average and maximum"),
    ("chart_runs", "Runs by state"),
    ("child_job_ids", "Child jobs"),
    ("child_job_ids_hint", "job ids, separated by commas"),
    ("clear", "Clear"),
    ("clear_runs", "Clear old runs"),
    ("comment", "Comment"),
    ("compare", "Compare"),
    (
        "compare_hint",
        "Pick an old and a new version, then compare.",
    ),
    ("config", "Settings"),
    ("confirm", "Are you sure?"),
    ("copy", "Copy"),
    ("copy_of", "Copy of"),
    ("counted_until", "counted until"),
    ("create", "Create"),
    ("created", "Created"),
    (
        "csrf_failed",
        "The form expired; reload the page and try again",
    ),
    ("current_password", "Current password"),
    ("dashboard", "Dashboard"),
    ("delete", "Delete"),
    ("deleted", "Deleted"),
    ("deliveries", "Recent deliveries"),
    ("delivery", "If maybe sent"),
    ("description", "Description"),
    ("detail", "Detail"),
    ("diff_added", "lines added"),
    ("diff_new", "New"),
    ("diff_old", "Old"),
    ("diff_removed", "lines removed"),
    ("diff_same", "The two versions hold the same script."),
    ("disabled", "Disabled"),
    ("dispatch_failed", "No executor accepted the run"),
    ("dispatched_at", "Dispatched"),
    ("done", "Done"),
    ("edit", "Edit"),
    ("edit_channel", "Edit alarm channel"),
    ("edit_group", "Edit executor group"),
    ("edit_job", "Edit job"),
    (
        "editor_hint",
        "Tab indents, Shift-Tab dedents; Esc then Tab leaves the editor.",
    ),
    ("email_only", "email only"),
    ("empty", "Nothing here yet"),
    ("enabled", "Enabled"),
    ("error", "Error"),
    ("executor", "Executor"),
    ("executors", "Executors"),
    ("executors_live", "Live executors"),
    ("expires", "Expires"),
    ("fewer", "fewer"),
    ("filter", "Filter"),
    ("finished_at", "Finished"),
    ("fire_alerts", "Missed, late and doubled fires (last 24 h)"),
    ("fire_doubled", "Doubled"),
    ("fire_late", "Late"),
    ("fire_missed", "Missed"),
    ("fires", "Fires"),
    ("fires_from", "First fire"),
    ("fires_per_bucket", "Fires per bucket"),
    ("fires_to", "Last fire"),
    ("fires_word", "fires"),
    ("first_fire", "first at"),
    ("forbidden", "You are not allowed to do this"),
    ("from", "From"),
    ("from_version", "from version"),
    ("full_stop", ". "),
    ("glue_source", "Script"),
    ("glue_type", "Job type"),
    ("group", "Executor group"),
    (
        "group_ids_hint",
        "operators only: they change the jobs of the ticked groups",
    ),
    ("group_token", "Executor token"),
    (
        "group_token_once",
        "New executor access token of this group. Configure its executors with it now (access_token); it is not shown again, and the previous token no longer works.",
    ),
    ("groups", "Executor groups"),
    ("handle_msg", "Result"),
    ("handler", "Handler"),
    ("heartbeat", "Last heartbeat"),
    ("heatmap", "Heatmap"),
    ("history", "Version history"),
    ("id", "ID"),
    ("in_progress", "In progress"),
    ("job", "Job"),
    ("jobs", "Jobs"),
    ("key", "Key"),
    (
        "key_hint",
        "stable name for export and import: letters, digits, '.', '_' or '-'; empty: generated; cannot change later",
    ),
    ("kill", "Kill"),
    ("killed_by", "Killed by"),
    ("killed_ok", "The run was killed"),
    ("kind", "Kind"),
    ("language", "Language"),
    ("last_14d", "Last 14 days"),
    ("last_24h", "Last 24 hours"),
    ("last_30d", "Last 30 days"),
    ("last_7d", "Last 7 days"),
    ("last_error", "Last error"),
    ("last_fire", "Last fire"),
    ("last_run", "Last run"),
    ("last_used", "Last used"),
    ("lateness", "Lateness"),
    (
        "lateness_budget_hint",
        "a fire sent later than this after its instant raises a late-fire alert; 0: never",
    ),
    ("lateness_budget_ms", "Late after (ms)"),
    ("lateness_ms", "lateness (ms)"),
    ("live_log", "Log"),
    ("load", "Load into editor"),
    (
        "loaded_hint",
        "Nothing changes until you save; the save becomes the newest version.",
    ),
    ("loaded_version", "In the editor: version"),
    ("locale", "Language"),
    ("log_end", "End of log"),
    ("log_following", "Following the log…"),
    ("login", "Sign in"),
    (
        "login_busy",
        "Too many sign-ins at this moment; try again in a moment",
    ),
    (
        "login_cross_site",
        "Sign-in refused: the form was sent from another site. Open this page directly and sign in again",
    ),
    (
        "login_slow_down",
        "Too many attempts; wait a minute and try again",
    ),
    ("login_title", "Sign in to Tickwork"),
    ("logout", "Sign out"),
    ("mail_from", "Sender address"),
    ("mail_to", "Recipients"),
    ("mail_to_hint", "email only; addresses separated by commas"),
    ("manual", "Manual"),
    ("max", "maximum"),
    ("misfire_strategy", "Misfire"),
    ("more", "more"),
    ("more_jobs", "more jobs"),
    ("name", "Name"),
    ("never", "never"),
    ("new_channel", "New alarm channel"),
    ("new_group", "New executor group"),
    ("new_job", "New job"),
    ("new_password", "New password"),
    ("new_token", "New API token"),
    ("new_user", "New user"),
    ("next", "Next"),
    ("next_fire", "Next fire"),
    ("next_fires", "Next fire times"),
    ("no", "No"),
    (
        "no_fire_alerts",
        "No missed, late or doubled fire in the last 24 hours.",
    ),
    ("no_fires", "No running job fires in this range."),
    ("none", "none"),
    ("not_found", "Not found"),
    ("not_run", "Not run"),
    ("offline", "No live executor"),
    ("operator", "Operator"),
    ("owner", "Owner"),
    ("page", "Page"),
    ("page_size", "Per page"),
    ("params", "Params"),
    ("password", "Password"),
    (
        "password_changed",
        "Password changed; sign in with the new one",
    ),
    ("password_hint", "at least 10 characters"),
    (
        "password_keep_hint",
        "email only; empty keeps the stored password",
    ),
    ("password_set", "Password set; the user's sessions ended"),
    (
        "password_too_long",
        "The password is at most 1024 characters",
    ),
    ("passwords_differ", "the two new passwords differ"),
    ("peaks", "Peaks"),
    (
        "peaks_hint",
        "The busiest buckets and the jobs firing in them; jobs first firing at the same time collide.",
    ),
    ("period", "Period"),
    ("port", "Port"),
    ("port_hint", "email only; empty: 25, 587 or 465 by TLS mode"),
    ("prev", "Previous"),
    ("preview_hint", "Type a schedule to see its next fire times"),
    ("priority", "Priority"),
    ("range_dates", "From date to date"),
    ("range_future", "is after today"),
    ("range_hours", "Range"),
    ("range_order", "is after the end date"),
    ("range_too_long", "makes the period longer than {max} days"),
    (
        "read_only",
        "Read-only: your role cannot change anything here",
    ),
    ("repeat_password", "New password again"),
    ("reset_password", "Set password"),
    (
        "reset_password_help",
        "The new password takes effect at once and all the user's sessions end; their API tokens stay valid.",
    ),
    ("restore", "Restore"),
    ("restored", "Version restored"),
    ("retry_backoff_ms", "Retry backoff (ms)"),
    ("retry_count", "Retries"),
    ("revoke", "Revoke"),
    ("revoked", "Revoked"),
    ("role", "Role"),
    (
        "roles_help",
        "Admin: everything. Operator: changes jobs of the listed groups. Viewer: reads only.",
    ),
    ("rotate_token", "New token"),
    ("route_strategy", "Route strategy"),
    ("run", "Run"),
    ("run_not_sent", "The run was not sent"),
    ("run_once", "Run once"),
    (
        "run_queued",
        "Run queued: no executor has taken it yet; its page shows when one does",
    ),
    ("run_started", "Run started: an executor accepted it"),
    ("running_jobs", "Running jobs"),
    ("runs", "Runs"),
    ("runs_cleared", "Old runs cleared"),
    ("runs_per_day", "runs per day"),
    ("runs_per_hour", "runs per hour"),
    ("runs_today", "Runs today"),
    ("save", "Save"),
    ("saved", "Saved"),
    ("schedule", "Schedule"),
    ("schedule_ahead", "Schedule ahead"),
    ("schedule_conf", "Schedule"),
    ("schedule_type", "Schedule type"),
    ("scheduled_at", "Scheduled"),
    ("script", "Script"),
    ("script_diff", "Changes"),
    ("script_saved", "Script saved as a new version"),
    ("script_source", "Script source"),
    ("search", "Search"),
    ("secret", "Secret"),
    (
        "secret_hint",
        "signing secret: webhook (required), DingTalk, Feishu",
    ),
    (
        "secret_keep_hint",
        "webhook, DingTalk, Feishu; empty keeps the stored secret",
    ),
    ("send_test", "Send test"),
    ("smtp_host", "SMTP host"),
    ("smtp_user", "SMTP username"),
    ("start", "Start"),
    ("started", "Started"),
    ("state", "State"),
    ("status", "Status"),
    ("stop", "Stop"),
    ("stopped", "Stopped"),
    ("target", "Target"),
    ("test_failed", "Test message failed"),
    ("test_sent", "Test message sent"),
    ("tick_all", "Tick all on this page"),
    ("ticked_jobs", "Ticked jobs"),
    ("time", "Time"),
    ("time_zone", "Time zone"),
    ("timeout_s", "Timeout (s)"),
    ("title", "Title"),
    ("tls", "TLS"),
    ("to", "To"),
    ("token_global", "global token"),
    ("token_once", "Copy this token now; it is not shown again"),
    ("token_own", "own token"),
    ("tokens", "API tokens"),
    ("total", "Total"),
    ("trigger", "Trigger"),
    ("trigger_msg", "Dispatch"),
    ("url", "URL"),
    (
        "url_hint",
        "webhook and robot address (every kind but email)",
    ),
    (
        "url_keep_hint",
        "every kind but email; empty keeps the stored URL",
    ),
    ("user", "User"),
    ("username", "Username"),
    ("users", "Users"),
    ("version", "Version"),
    ("viewer", "Viewer"),
    ("when", "When"),
    ("worst_late_ms", "Worst lateness (ms)"),
    ("yes", "Yes"),
];

/// 简体中文. Same keys as [`EN`], sorted the same way.
static ZH: &[(&str, &str)] = &[
    ("action", "操作"),
    ("actions", "操作"),
    ("actor", "操作人"),
    ("add", "新增"),
    ("address", "执行器地址"),
    (
        "address_hint",
        "可选，例如 http://10.0.0.5:9999；留空则按路由策略",
    ),
    ("address_mode", "注册方式"),
    ("addresses", "手动地址"),
    ("addresses_hint", "每行一个，手动注册时填写"),
    ("admin", "管理员"),
    ("alarm_channels", "告警渠道"),
    ("alerts_word", "告警"),
    ("all", "全部"),
    ("app_name", "AppName"),
    ("apply", "应用"),
    ("attempts", "尝试次数"),
    ("audit", "审计日志"),
    ("auto", "自动注册"),
    ("avg", "平均"),
    ("axis_day", "日期"),
    ("axis_hour", "小时"),
    ("back", "返回"),
    ("bad_credentials", "用户名或密码错误"),
    ("bad_date", "不是有效日期（YYYY-MM-DD）"),
    ("bad_hours", "必须是 1 到 168 之间的整数小时"),
    ("bad_number", "必须是整数"),
    ("bad_period", "不是可选的时间范围"),
    ("bad_time", "不是有效的日期时间"),
    ("before_days", "早于（天）"),
    ("block_strategy", "阻塞处理策略"),
    ("bucket", "时间粒度"),
    ("bulk_deleted", "已删除 {n} 个任务"),
    ("bulk_none", "请先勾选至少一个任务"),
    ("bulk_refused", "{n} 个被拒绝"),
    ("bulk_started", "已启动 {n} 个任务"),
    ("bulk_stopped", "已停止 {n} 个任务"),
    ("bulk_triggered", "已触发 {n} 个任务"),
    ("busiest", "最繁忙时段"),
    ("by_group", "按执行器"),
    ("cancel", "取消"),
    (
        "capped_note",
        "部分任务触发过于频繁，未能逐次计数；其计数提前截止，仅为下限：",
    ),
    ("change", "修改"),
    ("change_password", "修改密码"),
    (
        "change_password_help",
        "输入当前密码和两次新密码。你的所有会话（包括当前会话）都会结束，之后请用新密码登录。",
    ),
    ("channel", "渠道"),
    (
        "channel_name_hint",
        "字母、数字、“.”、“_”或“-”；任务按名称引用渠道",
    ),
    ("chart_lateness", "调度延迟：平均值与最大值"),
    ("chart_runs", "运行次数（按状态）"),
    ("child_job_ids", "子任务"),
    ("child_job_ids_hint", "任务 ID，用逗号分隔"),
    ("clear", "清理"),
    ("clear_runs", "清理旧运行记录"),
    ("comment", "备注"),
    ("compare", "比较"),
    ("compare_hint", "选择旧版本和新版本，然后比较。"),
    ("config", "配置"),
    ("confirm", "确定吗？"),
    ("copy", "复制"),
    ("copy_of", "副本："),
    ("counted_until", "计数截至"),
    ("create", "创建"),
    ("created", "已创建"),
    ("csrf_failed", "表单已过期，请刷新页面后重试"),
    ("current_password", "当前密码"),
    ("dashboard", "运行报表"),
    ("delete", "删除"),
    ("deleted", "已删除"),
    ("deliveries", "最近投递"),
    ("delivery", "疑似已发送时"),
    ("description", "任务描述"),
    ("detail", "详情"),
    ("diff_added", "行新增"),
    ("diff_new", "新版本"),
    ("diff_old", "旧版本"),
    ("diff_removed", "行删除"),
    ("diff_same", "两个版本的脚本相同。"),
    ("disabled", "已禁用"),
    ("dispatch_failed", "没有执行器接收此运行"),
    ("dispatched_at", "调度时间"),
    ("done", "完成"),
    ("edit", "编辑"),
    ("edit_channel", "编辑告警渠道"),
    ("edit_group", "编辑执行器"),
    ("edit_job", "编辑任务"),
    (
        "editor_hint",
        "Tab 缩进，Shift-Tab 减少缩进；先按 Esc 再按 Tab 可离开编辑器。",
    ),
    ("email_only", "仅邮件"),
    ("empty", "暂无数据"),
    ("enabled", "启用"),
    ("error", "错误"),
    ("executor", "执行器"),
    ("executors", "执行器"),
    ("executors_live", "在线执行器"),
    ("expires", "过期时间"),
    ("fewer", "少"),
    ("filter", "筛选"),
    ("finished_at", "结束时间"),
    ("fire_alerts", "漏触发、延迟与重复触发（最近 24 小时）"),
    ("fire_doubled", "重复触发"),
    ("fire_late", "延迟"),
    ("fire_missed", "漏触发"),
    ("fires", "触发次数"),
    ("fires_from", "首次触发"),
    ("fires_per_bucket", "每个时间段的触发次数"),
    ("fires_to", "最后触发"),
    ("fires_word", "次触发"),
    ("first_fire", "首次触发于"),
    ("forbidden", "你没有执行此操作的权限"),
    ("from", "开始"),
    ("from_version", "来自版本"),
    ("full_stop", "。"),
    ("glue_source", "脚本"),
    ("glue_type", "运行模式"),
    ("group", "执行器"),
    ("group_ids_hint", "仅用于操作员：可修改所勾选执行器的任务"),
    ("group_token", "执行器令牌"),
    (
        "group_token_once",
        "此执行器的新访问令牌。请立即用它配置其执行器（access_token）；之后不会再显示，旧令牌已失效。",
    ),
    ("groups", "执行器管理"),
    ("handle_msg", "执行结果"),
    ("handler", "JobHandler"),
    ("heartbeat", "最近心跳"),
    ("heatmap", "调度热力图"),
    ("history", "版本历史"),
    ("id", "ID"),
    ("in_progress", "进行中"),
    ("job", "任务"),
    ("jobs", "任务管理"),
    ("key", "标识"),
    (
        "key_hint",
        "导出和导入所用的稳定名称：字母、数字、'.'、'_' 或 '-'；留空则自动生成；之后不能修改",
    ),
    ("kill", "终止"),
    ("killed_by", "终止者"),
    ("killed_ok", "运行已终止"),
    ("kind", "类型"),
    ("language", "语言"),
    ("last_14d", "最近 14 天"),
    ("last_24h", "最近 24 小时"),
    ("last_30d", "最近 30 天"),
    ("last_7d", "最近 7 天"),
    ("last_error", "最近错误"),
    ("last_fire", "上次触发"),
    ("last_run", "最近一次执行"),
    ("last_used", "最近使用"),
    ("lateness", "延迟"),
    (
        "lateness_budget_hint",
        "调度晚于计划时间超过此值即发出延迟告警；0 表示不告警",
    ),
    ("lateness_budget_ms", "延迟告警阈值(毫秒)"),
    ("lateness_ms", "延迟（毫秒）"),
    ("live_log", "日志"),
    ("load", "载入编辑器"),
    (
        "loaded_hint",
        "保存之前不会改动任何内容；保存后成为最新版本。",
    ),
    ("loaded_version", "编辑器中载入的是版本"),
    ("locale", "语言"),
    ("log_end", "日志结束"),
    ("log_following", "正在跟踪日志…"),
    ("login", "登录"),
    ("login_busy", "当前登录请求过多，请稍后再试"),
    (
        "login_cross_site",
        "登录被拒绝：表单来自其他网站。请直接打开本页面后重新登录",
    ),
    ("login_slow_down", "尝试次数过多，请稍等一分钟再试"),
    ("login_title", "登录 Tickwork"),
    ("logout", "退出"),
    ("mail_from", "发件人地址"),
    ("mail_to", "收件人"),
    ("mail_to_hint", "仅邮件；多个地址用逗号分隔"),
    ("manual", "手动录入"),
    ("max", "最大"),
    ("misfire_strategy", "调度过期策略"),
    ("more", "多"),
    ("more_jobs", "个其他任务"),
    ("name", "名称"),
    ("never", "从未"),
    ("new_channel", "新增告警渠道"),
    ("new_group", "新增执行器"),
    ("new_job", "新增任务"),
    ("new_password", "新密码"),
    ("new_token", "新建 API 令牌"),
    ("new_user", "新增用户"),
    ("next", "下一页"),
    ("next_fire", "下次触发"),
    ("next_fires", "下次触发时间"),
    ("no", "否"),
    ("no_fire_alerts", "最近 24 小时没有漏触发、延迟或重复触发。"),
    ("no_fires", "此时间范围内没有运行中的任务会触发。"),
    ("none", "无"),
    ("not_found", "未找到"),
    ("not_run", "未运行"),
    ("offline", "无在线执行器"),
    ("operator", "操作员"),
    ("owner", "负责人"),
    ("page", "页码"),
    ("page_size", "每页条数"),
    ("params", "任务参数"),
    ("password", "密码"),
    ("password_changed", "密码已修改，请用新密码登录"),
    ("password_hint", "至少 10 个字符"),
    ("password_keep_hint", "仅邮件；留空则保留已保存的密码"),
    ("password_set", "密码已设置，该用户的会话已结束"),
    ("password_too_long", "密码最多 1024 个字符"),
    ("passwords_differ", "两次输入的新密码不一致"),
    ("peaks", "触发高峰"),
    (
        "peaks_hint",
        "最繁忙的时段及其中触发的任务；首次触发时间相同的任务在同一时刻触发。",
    ),
    ("period", "时间范围"),
    ("port", "端口"),
    ("port_hint", "仅邮件；留空则按 TLS 模式使用 25、587 或 465"),
    ("prev", "上一页"),
    ("preview_hint", "输入调度配置即可查看下次触发时间"),
    ("priority", "优先级"),
    ("range_dates", "按日期（开始至结束）"),
    ("range_future", "晚于今天"),
    ("range_hours", "时长"),
    ("range_order", "晚于结束日期"),
    ("range_too_long", "使时间范围超过 {max} 天"),
    ("read_only", "只读：你的角色不能在此修改任何内容"),
    ("repeat_password", "再次输入新密码"),
    ("reset_password", "设置密码"),
    (
        "reset_password_help",
        "新密码立即生效，该用户的所有会话都会结束；其 API 令牌仍然有效。",
    ),
    ("restore", "恢复"),
    ("restored", "版本已恢复"),
    ("retry_backoff_ms", "重试间隔（毫秒）"),
    ("retry_count", "失败重试次数"),
    ("revoke", "吊销"),
    ("revoked", "已吊销"),
    ("role", "角色"),
    (
        "roles_help",
        "管理员：全部权限。操作员：修改所列执行器的任务。访客：只读。",
    ),
    ("rotate_token", "生成新令牌"),
    ("route_strategy", "路由策略"),
    ("run", "运行"),
    ("run_not_sent", "运行未发送"),
    ("run_once", "执行一次"),
    ("run_queued", "运行已排队：尚无执行器接收；接收后在此页显示"),
    ("run_started", "运行已开始：执行器已接收"),
    ("running_jobs", "运行中的任务"),
    ("runs", "调度日志"),
    ("runs_cleared", "旧运行记录已清理"),
    ("runs_per_day", "每日运行次数"),
    ("runs_per_hour", "每小时运行次数"),
    ("runs_today", "今日运行"),
    ("save", "保存"),
    ("saved", "已保存"),
    ("schedule", "调度"),
    ("schedule_ahead", "调度热力图"),
    ("schedule_conf", "调度配置"),
    ("schedule_type", "调度类型"),
    ("scheduled_at", "计划时间"),
    ("script", "脚本"),
    ("script_diff", "差异"),
    ("script_saved", "脚本已保存为新版本"),
    ("script_source", "脚本源码"),
    ("search", "搜索"),
    ("secret", "密钥"),
    ("secret_hint", "签名密钥：Webhook（必填）、钉钉、飞书"),
    (
        "secret_keep_hint",
        "Webhook、钉钉、飞书；留空则保留已保存的密钥",
    ),
    ("send_test", "发送测试"),
    ("smtp_host", "SMTP 服务器"),
    ("smtp_user", "SMTP 用户名"),
    ("start", "启动"),
    ("started", "已启动"),
    ("state", "状态"),
    ("status", "状态"),
    ("stop", "停止"),
    ("stopped", "已停止"),
    ("target", "对象"),
    ("test_failed", "测试消息发送失败"),
    ("test_sent", "测试消息已发送"),
    ("tick_all", "勾选本页全部"),
    ("ticked_jobs", "已勾选的任务"),
    ("time", "时间"),
    ("time_zone", "时区"),
    ("timeout_s", "超时（秒）"),
    ("title", "名称"),
    ("tls", "TLS"),
    ("to", "结束"),
    ("token_global", "全局令牌"),
    ("token_once", "请立即复制此令牌，之后不会再显示"),
    ("token_own", "独立令牌"),
    ("tokens", "API 令牌"),
    ("total", "总计"),
    ("trigger", "触发"),
    ("trigger_msg", "调度结果"),
    ("url", "URL"),
    ("url_hint", "Webhook 或机器人地址（邮件以外的类型）"),
    ("url_keep_hint", "邮件以外的类型；留空则保留已保存的 URL"),
    ("user", "用户"),
    ("username", "用户名"),
    ("users", "用户管理"),
    ("version", "版本"),
    ("viewer", "访客"),
    ("when", "时间"),
    ("worst_late_ms", "最大延迟（毫秒）"),
    ("yes", "是"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_languages_have_the_same_keys_in_order() {
        let en: Vec<&str> = EN.iter().map(|(k, _)| *k).collect();
        let zh: Vec<&str> = ZH.iter().map(|(k, _)| *k).collect();
        assert_eq!(en, zh);
        let mut sorted = en.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(en, sorted, "keys must be sorted and unique");
        for (k, v) in EN.iter().chain(ZH) {
            assert!(!v.trim().is_empty(), "{k} is empty");
        }
    }

    #[test]
    fn accept_language_follows_q_values() {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::ACCEPT_LANGUAGE,
            "fr-FR, en;q=0.5, zh-CN;q=0.8".parse().unwrap(),
        );
        assert_eq!(Lang::from_accept_language(&h), Some(Lang::Zh));
        h.insert(axum::http::header::ACCEPT_LANGUAGE, "de".parse().unwrap());
        assert_eq!(Lang::from_accept_language(&h), None);
        assert_eq!(Lang::Zh.t("jobs"), "任务管理");
        assert_eq!(Lang::En.t("no-such-key"), "??");
    }
}
