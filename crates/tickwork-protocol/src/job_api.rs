//! XXL-JOB 3.5's job API (`POST /api/addJob`, `updateJob`, `removeJob`, `startJob`,
//! `stopJob`, `triggerJob`): its request bodies, with XXL-JOB's field names, read as leniently
//! as Gson reads them (absent and `null` take the default, numbers may be strings, unknown
//! fields are ignored).

use serde::{Deserialize, Serialize};

use crate::lenient;

/// The job API's calls, by the last segment of their path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobCall {
    Add,
    Update,
    Remove,
    Start,
    Stop,
    Trigger,
}

impl JobCall {
    /// The call named by `/api/<name>`, if it is one of the job API's.
    pub fn from_path(name: &str) -> Option<Self> {
        Some(match name {
            "addJob" => JobCall::Add,
            "updateJob" => JobCall::Update,
            "removeJob" => JobCall::Remove,
            "startJob" => JobCall::Start,
            "stopJob" => JobCall::Stop,
            "triggerJob" => JobCall::Trigger,
            _ => return None,
        })
    }
}

/// The job's fields as `addJob` and `updateJob` take them (Java `JobAddRequest`,
/// `JobUpdateRequest`). Text fields left out are empty; enum names are XXL-JOB's
/// (`CRON`, `FIX_RATE`, `NONE`; `FIRST`, `ROUND`, ...; `SERIAL_EXECUTION`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFields {
    /// `updateJob` only: the job changed.
    #[serde(default, deserialize_with = "lenient::int")]
    pub id: i64,
    /// `addJob` only: the executor group's id.
    #[serde(default, deserialize_with = "lenient::int")]
    pub job_group: i64,
    /// The job's description (`name` in 3.5, `jobDesc` before).
    #[serde(default, alias = "jobDesc", deserialize_with = "lenient::string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub author: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub alarm_email: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub schedule_type: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub schedule_conf: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub misfire_strategy: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_route_strategy: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_handler: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_param: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub executor_block_strategy: String,
    /// Seconds; 0: none.
    #[serde(default, deserialize_with = "lenient::int32")]
    pub executor_timeout: i32,
    #[serde(default, deserialize_with = "lenient::int32")]
    pub executor_fail_retry_count: i32,
    #[serde(default, deserialize_with = "lenient::string")]
    pub glue_type: String,
    #[serde(default, deserialize_with = "lenient::string")]
    pub glue_source: String,
    /// The remark of the script's version (kept by XXL-JOB with each version).
    #[serde(default, deserialize_with = "lenient::string")]
    pub glue_remark: String,
}

/// `removeJob`, `startJob`, `stopJob` (Java `JobOperateRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobId {
    #[serde(default, deserialize_with = "lenient::int")]
    pub id: i64,
}

/// `triggerJob` (Java `JobTriggerRequest`): fire the job once now, with these params and on
/// these executors (comma-separated) instead of its own, when given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobTrigger {
    #[serde(default, deserialize_with = "lenient::int")]
    pub id: i64,
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub executor_param: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub address_list: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_job_reads_xxl_names_and_both_spellings_of_the_description() {
        let f: JobFields = crate::decode(
            br#"{"jobGroup":"2","name":"nightly","author":"ops","scheduleType":"CRON",
                "scheduleConf":"0 0 1 * * ?","executorHandler":"demo","executorTimeout":"30",
                "executorFailRetryCount":1,"glueType":"BEAN","alarmEmail":null,"extra":true}"#,
        )
        .expect("decodes");
        assert_eq!(f.job_group, 2);
        assert_eq!(f.name, "nightly");
        assert_eq!(f.executor_timeout, 30);
        assert_eq!(f.alarm_email, "");
        let old: JobFields = crate::decode(br#"{"jobDesc":"legacy"}"#).expect("decodes");
        assert_eq!(old.name, "legacy");
    }

    #[test]
    fn trigger_keeps_absent_params_apart_from_empty_ones() {
        let t: JobTrigger = crate::decode(br#"{"id":7}"#).expect("decodes");
        assert_eq!((t.id, t.executor_param, t.address_list), (7, None, None));
        let t: JobTrigger =
            crate::decode(br#"{"id":"7","executorParam":"","addressList":"http://h:1/"}"#)
                .expect("decodes");
        assert_eq!(t.executor_param.as_deref(), Some(""));
        assert_eq!(t.address_list.as_deref(), Some("http://h:1/"));
    }

    #[test]
    fn job_calls_are_named_by_their_path() {
        for (name, call) in [
            ("addJob", Some(JobCall::Add)),
            ("updateJob", Some(JobCall::Update)),
            ("removeJob", Some(JobCall::Remove)),
            ("startJob", Some(JobCall::Start)),
            ("stopJob", Some(JobCall::Stop)),
            ("triggerJob", Some(JobCall::Trigger)),
            ("callback", None),
            ("addjob", None),
        ] {
            assert_eq!(JobCall::from_path(name), call, "{name}");
        }
    }
}
