//! The request and payload messages of the protocol, with their exact Java field names.

use serde::{Deserialize, Serialize};

use crate::lenient;

/// `POST /run` body (Java `TriggerParam` / `TriggerRequest`): one execution to queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerParam {
    /// Job id; 32-bit on Java peers.
    #[serde(default, deserialize_with = "lenient::int32")]
    pub job_id: i32,
    /// Handler name (BEAN jobs); may be empty for script jobs.
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_handler: String,
    /// Job parameter text (plural name on this message only).
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_params: String,
    /// `SERIAL_EXECUTION`, `DISCARD_LATER` or `COVER_EARLY`; anything else reads as serial.
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_block_strategy: String,
    /// Timeout in seconds; > 0 enables it.
    #[serde(default, deserialize_with = "lenient::int32")]
    pub executor_timeout: i32,
    /// The run's id (the admin's run ledger id).
    #[serde(default, deserialize_with = "lenient::int")]
    pub log_id: i64,
    /// Trigger time, epoch ms; names the run log's date folder.
    #[serde(default, deserialize_with = "lenient::int")]
    pub log_date_time: i64,
    /// `BEAN`, `GLUE_SHELL`, ...
    #[serde(default, deserialize_with = "lenient::string")]
    pub glue_type: String,
    /// Script source of script jobs.
    #[serde(default, deserialize_with = "lenient::string")]
    pub glue_source: String,
    /// Epoch ms of the script's last edit: the version key of the cached script file.
    #[serde(default, deserialize_with = "lenient::int")]
    pub glue_updatetime: i64,
    /// Shard index, 0-based.
    #[serde(default, deserialize_with = "lenient::int32")]
    pub broadcast_index: i32,
    /// Shard total; 1 when not broadcasting.
    #[serde(default, deserialize_with = "lenient::int32")]
    pub broadcast_total: i32,
}

/// `POST /idleBeat` body: is this job busy here?
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleBeatParam {
    #[serde(default, deserialize_with = "lenient::int32")]
    pub job_id: i32,
}

/// `POST /kill` body: kill whatever the job's worker is doing and drop its queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KillParam {
    #[serde(default, deserialize_with = "lenient::int32")]
    pub job_id: i32,
}

/// `POST /log` body: read a run's log from a line on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogParam {
    /// Trigger time, epoch ms (spelled without the final "e" on the wire).
    #[serde(rename = "logDateTim", default, deserialize_with = "lenient::int")]
    pub log_date_time: i64,
    #[serde(rename = "logId", default, deserialize_with = "lenient::int")]
    pub log_id: i64,
    /// First line wanted, 1-based.
    #[serde(rename = "fromLineNum", default, deserialize_with = "lenient::int32")]
    pub from_line_num: i32,
}

/// The `/log` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogResult {
    #[serde(rename = "fromLineNum", default, deserialize_with = "lenient::int32")]
    pub from_line_num: i32,
    /// Number of the last line returned; less than `from_line_num` means nothing new.
    #[serde(rename = "toLineNum", default, deserialize_with = "lenient::int32")]
    pub to_line_num: i32,
    /// The lines, each followed by a newline.
    #[serde(rename = "logContent", default, deserialize_with = "lenient::string")]
    pub log_content: String,
    /// True only when the log file does not exist; the admin decides "end" from the run state.
    #[serde(rename = "isEnd", default, deserialize_with = "lenient::boolean")]
    pub is_end: bool,
}

/// `POST /api/registry` and `/api/registryRemove` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryParam {
    /// Always `EXECUTOR`.
    #[serde(default, deserialize_with = "lenient::string")]
    pub registry_group: String,
    /// The executor's app name.
    #[serde(default, deserialize_with = "lenient::string")]
    pub registry_key: String,
    /// The executor's own base URL, kept byte for byte.
    #[serde(default, deserialize_with = "lenient::string")]
    pub registry_value: String,
}

impl RegistryParam {
    /// The registration of an executor.
    pub fn executor(app_name: &str, address: &str) -> Self {
        RegistryParam {
            registry_group: crate::REGISTRY_GROUP_EXECUTOR.to_owned(),
            registry_key: app_name.to_owned(),
            registry_value: address.to_owned(),
        }
    }

    /// Whether every field is given, as the Java admin requires.
    pub fn is_complete(&self) -> bool {
        !self.registry_group.trim().is_empty()
            && !self.registry_key.trim().is_empty()
            && !self.registry_value.trim().is_empty()
    }
}

/// One element of the `POST /api/callback` array: the result of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandleCallbackParam {
    #[serde(rename = "logId", default, deserialize_with = "lenient::int")]
    pub log_id: i64,
    /// The trigger's `logDateTime` (spelled without the final "e").
    #[serde(rename = "logDateTim", default, deserialize_with = "lenient::int")]
    pub log_date_time: i64,
    /// 200 success, 500 failure, 502 timeout; never <= 0, which means "still running".
    #[serde(rename = "handleCode", default, deserialize_with = "lenient::int32")]
    pub handle_code: i32,
    /// Result text; omitted when absent, as Gson does.
    #[serde(
        rename = "handleMsg",
        default,
        deserialize_with = "lenient::opt_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub handle_msg: Option<String>,
}
