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
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(from = "LogParamWire")]
pub struct LogParam {
    /// Trigger time, epoch ms: `logDateTim` up to 3.4, `logDateTime` from 3.5 (written
    /// under both names, read from either).
    pub log_date_time: i64,
    pub log_id: i64,
    /// First line wanted, 1-based.
    pub from_line_num: i32,
}

/// What a `/log` body holds: the trigger time under either name, or both.
#[derive(Deserialize)]
struct LogParamWire {
    #[serde(rename = "logDateTim", default, deserialize_with = "lenient::int")]
    log_date_tim: i64,
    #[serde(rename = "logDateTime", default, deserialize_with = "lenient::int")]
    log_date_time: i64,
    #[serde(rename = "logId", default, deserialize_with = "lenient::int")]
    log_id: i64,
    #[serde(rename = "fromLineNum", default, deserialize_with = "lenient::int32")]
    from_line_num: i32,
}

impl From<LogParamWire> for LogParam {
    fn from(w: LogParamWire) -> Self {
        LogParam {
            log_date_time: if w.log_date_time != 0 {
                w.log_date_time
            } else {
                w.log_date_tim
            },
            log_id: w.log_id,
            from_line_num: w.from_line_num,
        }
    }
}

impl Serialize for LogParam {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4))?;
        // Java peers ignore the name they do not know, so every generation reads its own.
        map.serialize_entry("logDateTim", &self.log_date_time)?;
        map.serialize_entry("logDateTime", &self.log_date_time)?;
        map.serialize_entry("logId", &self.log_id)?;
        map.serialize_entry("fromLineNum", &self.from_line_num)?;
        map.end()
    }
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

/// A run's log as plain text: XXL-JOB executors (ours too) write `<br>` where they mean a line
/// break, for XXL-JOB's HTML console; people reading a log elsewhere want the break itself.
/// `<br>`, `<br/>` and `<br />` in any case become `\n`; nothing else changes.
pub fn log_text(content: &str) -> String {
    const BREAKS: [&str; 3] = ["<br>", "<br/>", "<br />"];
    let mut out = String::with_capacity(content.len());
    let mut rest = content;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let found = BREAKS.iter().find(|b| {
            tail.get(..b.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(b))
        });
        match found {
            Some(b) => {
                out.push('\n');
                rest = &tail[b.len()..];
            }
            None => {
                out.push('<');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
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
    /// The trigger's `logDateTime`: spelled `logDateTim` up to 3.4, `logDateTime` from 3.5.
    #[serde(
        rename = "logDateTim",
        alias = "logDateTime",
        default,
        deserialize_with = "lenient::int"
    )]
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

/// Reads a `POST /api/callback` body: a JSON array of results (XXL-JOB up to 3.4) or
/// `{"callbackList": [...]}` (3.5).
pub fn decode_callbacks(body: &[u8]) -> Result<Vec<HandleCallbackParam>, crate::Error> {
    #[derive(Deserialize)]
    struct Wrapped {
        #[serde(rename = "callbackList", default)]
        callback_list: Option<Vec<HandleCallbackParam>>,
    }
    // By the first byte, so that a bad item is reported as such, not as "no shape matched".
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(crate::decode::<Wrapped>(body)?
            .callback_list
            .unwrap_or_default()),
        _ => crate::decode(body),
    }
}

/// Most run ids one `POST /tickwork/accepted` may ask about.
pub const MAX_ACCEPTED_QUERY: usize = 10_000;

/// `POST /tickwork/accepted` body (a Tickwork extension, unknown to Java executors): which of
/// these runs did the executor accept on `/run`? Read strictly, unlike XXL-JOB's messages: the
/// answer decides whether a run is sent again, so a missing field, a non-integer or more than
/// [`MAX_ACCEPTED_QUERY`] ids are errors rather than defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedQuery {
    /// The run ids (`logId`) asked about.
    #[serde(rename = "logIds", deserialize_with = "bounded_ids")]
    pub log_ids: Vec<i64>,
}

/// The `/tickwork/accepted` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedRuns {
    /// The ids among those asked that the executor accepted, in the order asked, each once.
    pub accepted: Vec<i64>,
    /// Epoch ms from which the executor's record is complete: a run the executor accepted
    /// after this instant is listed if it was asked about. Before it (an executor restart, or
    /// ids evicted from its bounded record) the executor cannot tell.
    #[serde(rename = "recordSince")]
    pub record_since: i64,
}

/// The `/run` answer (code 200) of a Tickwork executor to a `logId` it accepted already: the
/// run is not started again.
pub fn duplicate_run_msg(log_id: i64) -> String {
    format!("duplicate run ignored: logId {log_id} was already accepted")
}

/// Reads the `logIds` array, refusing it as soon as it holds more than
/// [`MAX_ACCEPTED_QUERY`] ids (so a huge body is not collected first).
fn bounded_ids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
    struct Ids;
    impl<'de> serde::de::Visitor<'de> for Ids {
        type Value = Vec<i64>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "an array of at most {MAX_ACCEPTED_QUERY} integer run ids"
            )
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<i64>, A::Error> {
            let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_ACCEPTED_QUERY));
            while let Some(id) = seq.next_element::<i64>()? {
                if ids.len() == MAX_ACCEPTED_QUERY {
                    return Err(serde::de::Error::custom(format_args!(
                        "logIds holds more than {MAX_ACCEPTED_QUERY} run ids"
                    )));
                }
                ids.push(id);
            }
            Ok(ids)
        }
    }
    d.deserialize_seq(Ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_turns_html_breaks_into_new_lines() {
        for (log, text) in [
            ("", ""),
            ("plain\nlines\n", "plain\nlines\n"),
            ("a<br>b", "a\nb"),
            (
                "<br>----- start -----<br>----- Param:x\n",
                "\n----- start -----\n----- Param:x\n",
            ),
            ("a<BR>b<br/>c<Br />d", "a\nb\nc\nd"),
            (
                "x < y <b>bold</b> <brief> <br",
                "x < y <b>bold</b> <brief> <br",
            ),
            ("中文<br>文字", "中文\n文字"),
            ("<<br>>", "<\n>"),
        ] {
            assert_eq!(log_text(log), text, "{log:?}");
        }
    }

    #[test]
    fn accepted_messages_use_their_wire_names() {
        let q = AcceptedQuery {
            log_ids: vec![1, 2],
        };
        assert_eq!(crate::encode(&q), br#"{"logIds":[1,2]}"#);
        let r = AcceptedRuns {
            accepted: vec![2],
            record_since: 1_718_000_000_000,
        };
        assert_eq!(
            crate::encode(&r),
            br#"{"accepted":[2],"recordSince":1718000000000}"#
        );
        assert_eq!(
            crate::decode::<AcceptedRuns>(&crate::encode(&r)).unwrap(),
            r
        );
    }

    #[test]
    fn accepted_query_is_read_strictly() {
        let err = |body: &str| {
            crate::decode::<AcceptedQuery>(body.as_bytes())
                .unwrap_err()
                .to_string()
        };
        assert!(
            err("{}").contains("missing field `logIds`"),
            "{}",
            err("{}")
        );
        assert!(err(r#"{"logIds":null}"#).contains("invalid type: null"));
        assert!(err(r#"{"logIds":["1"]}"#).contains("invalid type: string"));
        assert!(err(r#"{"logIds":[1.5]}"#).contains("invalid type: floating point"));
        assert!(err("[1,2]").contains("invalid type"));
        let many = format!(
            r#"{{"logIds":[{}]}}"#,
            vec!["7"; MAX_ACCEPTED_QUERY + 1].join(",")
        );
        assert!(
            err(&many).contains("logIds holds more than 10000 run ids"),
            "{}",
            err(&many)
        );
        let most = format!(
            r#"{{"logIds":[{}]}}"#,
            vec!["7"; MAX_ACCEPTED_QUERY].join(",")
        );
        let q = crate::decode::<AcceptedQuery>(most.as_bytes()).unwrap();
        assert_eq!(q.log_ids.len(), MAX_ACCEPTED_QUERY);
    }
}
