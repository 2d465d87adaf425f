//! The JSON of a job in the REST API, pinned: `JobInput` and `JobView` write and read exactly
//! these texts (names, order, defaults, nulls), and inputs refuse unknown fields by name.

use tickwork_protocol::api::{JobInput, JobListItem, JobView};

/// A job with every field set, as the admin answers it.
const VIEW: &str = r#"{"id":1,"key":"nightly-report","group_id":1,"description":"the nightly report – größer","owner":"ops","alarm_channels":"ops-hook","schedule_type":"CRON","schedule_conf":"0 30 2 * * ?","time_zone":"Europe/Berlin","misfire_strategy":"FIRE_ONCE_NOW","route_strategy":"ROUND","handler":"echo","params":"full \"quoted\"\nsecond line","block_strategy":"DISCARD_LATER","timeout_s":600,"retry_count":2,"retry_backoff_ms":1000,"child_job_ids":[2,3],"priority":-5,"glue_type":"GLUE_SHELL","glue_source":"echo hi\n","delivery":"AT_LEAST_ONCE","lateness_budget_ms":2500,"glue_updated_at":1795453042023,"status":"running","next_fire_at":1795483800000,"last_fire_at":null,"version":2,"created_at":1795453042023,"updated_at":1795453042033}"#;

/// The same job as a client writes it back (`From<&JobView>`).
const INPUT: &str = r#"{"key":"nightly-report","group_id":1,"description":"the nightly report – größer","owner":"ops","alarm_channels":"ops-hook","schedule_type":"CRON","schedule_conf":"0 30 2 * * ?","time_zone":"Europe/Berlin","misfire_strategy":"FIRE_ONCE_NOW","route_strategy":"ROUND","handler":"echo","params":"full \"quoted\"\nsecond line","block_strategy":"DISCARD_LATER","timeout_s":600,"retry_count":2,"retry_backoff_ms":1000,"child_job_ids":[2,3],"priority":-5,"glue_type":"GLUE_SHELL","glue_source":"echo hi\n","delivery":"AT_LEAST_ONCE","lateness_budget_ms":2500,"start":false}"#;

/// An input naming only its group: every default, the zone and key `null`.
const BLANK: &str = r#"{"key":null,"group_id":7,"description":"","owner":"","alarm_channels":"","schedule_type":"NONE","schedule_conf":"","time_zone":null,"misfire_strategy":"DO_NOTHING","route_strategy":"FIRST","handler":"","params":"","block_strategy":"SERIAL_EXECUTION","timeout_s":0,"retry_count":0,"retry_backoff_ms":0,"child_job_ids":[],"priority":0,"glue_type":"BEAN","glue_source":"","delivery":"AT_MOST_ONCE","lateness_budget_ms":1000,"start":false}"#;

#[test]
fn a_full_job_reads_and_writes_the_same_json() {
    let view: JobView = serde_json::from_str(VIEW).unwrap();
    assert_eq!(serde_json::to_string(&view).unwrap(), VIEW);
    let input = JobInput::from(&view);
    assert_eq!(serde_json::to_string(&input).unwrap(), INPUT);
    let read: JobInput = serde_json::from_str(INPUT).unwrap();
    assert_eq!(read, input);
    let started: JobInput =
        serde_json::from_str(&INPUT.replace(r#""start":false"#, r#""start":true"#)).unwrap();
    assert!(started.start);
}

#[test]
fn a_listed_job_is_the_job_and_its_last_run() {
    let ran =
        r#","last_run":{"id":9,"state":"failed","scheduled_at":1795453042023,"finished_at":null}}"#;
    let listed = format!("{}{ran}", VIEW.trim_end_matches('}'));
    let item: JobListItem = serde_json::from_str(&listed).unwrap();
    assert_eq!(serde_json::to_string(&item).unwrap(), listed);
    assert_eq!(item.last_run.as_ref().map(|r| r.id), Some(9));
    // Clients that read a list as plain jobs (`tickwork job list`) still do.
    let view: JobView = serde_json::from_str(&listed).unwrap();
    assert_eq!(view, item.job);
    let never = format!("{}{}", VIEW.trim_end_matches('}'), r#","last_run":null}"#);
    let item: JobListItem = serde_json::from_str(&never).unwrap();
    assert_eq!(item.last_run, None);
}

#[test]
fn a_missing_field_takes_its_default() {
    assert_eq!(serde_json::to_string(&JobInput::new(7)).unwrap(), BLANK);
    for text in [r#"{"group_id": 7}"#, BLANK] {
        let read: JobInput = serde_json::from_str(text).unwrap();
        assert_eq!(read, JobInput::new(7), "{text}");
    }
    // An empty zone is the admin's default, like an absent or null one.
    let read: JobInput = serde_json::from_str(r#"{"group_id": 7, "time_zone": ""}"#).unwrap();
    assert_eq!(read, JobInput::new(7));
    let e = serde_json::from_str::<JobInput>(r#"{"handler": "h"}"#).unwrap_err();
    assert!(e.to_string().contains("missing field `group_id`"), "{e}");
}

#[test]
fn unknown_fields_are_refused_by_name() {
    let e = serde_json::from_str::<JobInput>(r#"{"group_id": 1, "colour": "red"}"#)
        .unwrap_err()
        .to_string();
    let expected = "unknown field `colour`, expected one of `key`, `group_id`, `description`, \
        `owner`, `alarm_channels`, `schedule_type`, `schedule_conf`, `time_zone`, \
        `misfire_strategy`, `route_strategy`, `handler`, `params`, `block_strategy`, \
        `timeout_s`, `retry_count`, `retry_backoff_ms`, `child_job_ids`, `priority`, \
        `glue_type`, `glue_source`, `delivery`, `lateness_budget_ms`, `start`";
    assert!(e.starts_with(expected), "{e}");
    // Fields of the view are not fields of the input.
    let e = serde_json::from_str::<JobInput>(r#"{"group_id": 1, "status": "running"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("unknown field `status`"), "{e}");
}

#[test]
fn wrong_types_are_refused() {
    for (text, says) in [
        (r#"{"group_id": "one"}"#, "invalid type: string \"one\""),
        (
            r#"{"group_id": 1, "retry_count": "three"}"#,
            "invalid type: string \"three\"",
        ),
        (
            r#"{"group_id": 1, "timeout_s": 3000000000}"#,
            "invalid value: integer `3000000000`",
        ),
        (
            r#"{"group_id": 1, "route_strategy": "NEAREST"}"#,
            "\"NEAREST\" is not one of",
        ),
        (r#"{"group_id": 1, "key": 5}"#, "invalid type: integer `5`"),
        (
            r#"{"group_id": 1, "start": "yes"}"#,
            "invalid type: string \"yes\"",
        ),
    ] {
        let e = serde_json::from_str::<JobInput>(text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
}
