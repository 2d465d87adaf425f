//! Round trips over every JSON example of the reference captures of real XXL-JOB executors
//! (3.4.2 and 2.4.2) and the protocol reference: each decodes to the expected values, and what
//! we write decodes back to the same message with the same wire names.

use serde_json::{Value, json};
use tickwork_protocol::{
    Envelope, HandleCallbackParam, IdleBeatParam, KillParam, LogParam, LogResult, RegistryParam,
    TriggerParam, decode, encode,
};

/// Decodes `text`, re-encodes it, decodes again: both decodings must be equal.
fn round_trip<T>(text: &str) -> T
where
    T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let first: T = decode(text.as_bytes()).expect("capture decodes");
    let again: T = decode(&encode(&first)).expect("our encoding decodes");
    assert_eq!(first, again, "round trip of {text}");
    first
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn registry_body_from_a_3_4_2_executor() {
    let text = r#"{"registryGroup":"EXECUTOR","registryKey":"xxl-job-executor-sample","registryValue":"http://127.0.0.1:9999/"}"#;
    let p: RegistryParam = round_trip(text);
    assert_eq!(
        p,
        RegistryParam::executor("xxl-job-executor-sample", "http://127.0.0.1:9999/")
    );
    assert!(p.is_complete());
    // What we write is byte for byte what the Java executor writes.
    assert_eq!(String::from_utf8(encode(&p)).unwrap(), text);
}

#[test]
fn registry_body_with_a_blank_field_is_incomplete() {
    let p: RegistryParam =
        decode(br#"{"registryGroup":"EXECUTOR","registryKey":" ","registryValue":"x"}"#).unwrap();
    assert!(!p.is_complete());
    let p: RegistryParam = decode(br#"{"registryGroup":"EXECUTOR"}"#).unwrap();
    assert!(!p.is_complete());
}

#[test]
fn callback_array_with_and_without_handle_msg() {
    let text =
        r#"[{"logId":1001,"logDateTim":1795244933764,"handleCode":200,"handleMsg":"demo ok"}]"#;
    let v: Vec<HandleCallbackParam> = round_trip(text);
    assert_eq!(
        v,
        vec![HandleCallbackParam {
            log_id: 1001,
            log_date_time: 1795244933764,
            handle_code: 200,
            handle_msg: Some("demo ok".into()),
        }]
    );
    assert_eq!(String::from_utf8(encode(&v)).unwrap(), text);

    // A null handleMsg is omitted entirely, both by Java and by us.
    let text = r#"[{"logId":15001,"logDateTim":1795244933764,"handleCode":200}]"#;
    let v: Vec<HandleCallbackParam> = round_trip(text);
    assert_eq!(v[0].handle_msg, None);
    assert_eq!(String::from_utf8(encode(&v)).unwrap(), text);
}

#[test]
fn callback_array_from_the_protocol_reference() {
    let text = r#"[{"logId":1024,"logDateTim":1718000000123,"handleCode":200,"handleMsg":"ok"},
 {"logId":1025,"logDateTim":1718000001000,"handleCode":500,"handleMsg":"java.lang.RuntimeException: boom ..."}]"#;
    let v: Vec<HandleCallbackParam> = round_trip(text);
    assert_eq!(v.len(), 2);
    assert_eq!(v[1].handle_code, 500);
    assert_eq!(v[1].log_date_time, 1718000001000);
}

#[test]
fn trigger_param_from_the_protocol_reference() {
    let text = r#"{"jobId":1,"executorHandler":"demoJobHandler","executorParams":"a=1","executorBlockStrategy":"SERIAL_EXECUTION",
 "executorTimeout":0,"logId":1024,"logDateTime":1718000000123,"glueType":"BEAN","glueSource":"",
 "glueUpdatetime":1717990000000,"broadcastIndex":0,"broadcastTotal":1}"#;
    let p: TriggerParam = round_trip(text);
    assert_eq!(p.job_id, 1);
    assert_eq!(p.executor_handler, "demoJobHandler");
    assert_eq!(p.executor_params, "a=1");
    assert_eq!(p.executor_block_strategy, "SERIAL_EXECUTION");
    assert_eq!(p.log_id, 1024);
    assert_eq!(p.log_date_time, 1718000000123);
    assert_eq!(p.glue_type, "BEAN");
    assert_eq!(p.glue_updatetime, 1717990000000);
    assert_eq!(p.broadcast_total, 1);
    // Every field keeps its Java name, irregular ones included.
    let written: Value = serde_json::from_slice(&encode(&p)).unwrap();
    let original: Value = serde_json::from_str(text).unwrap();
    assert_eq!(written, original);
}

#[test]
fn string_job_id_and_unknown_fields_are_accepted() {
    let p: IdleBeatParam = decode(br#"{"jobId":"4","somethingNew":[1,2]}"#).unwrap();
    assert_eq!(p.job_id, 4);
    let p: KillParam = decode(br#"{"jobId":1}"#).unwrap();
    assert_eq!(p.job_id, 1);
    assert_eq!(encode(&p), br#"{"jobId":1}"#);
}

#[test]
fn absent_and_null_fields_take_defaults() {
    let p: TriggerParam =
        decode(br#"{"jobId":7,"executorHandler":null,"glueSource":null}"#).unwrap();
    assert_eq!(p.job_id, 7);
    assert_eq!(p.executor_handler, "");
    assert_eq!(p.broadcast_total, 0);
    assert_eq!(p.log_id, 0);
}

#[test]
fn wrong_types_and_bad_json_are_errors_without_internals() {
    let err = decode::<TriggerParam>(br#"{"jobId":"four"}"#)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("invalid json: "), "{err}");
    assert!(err.contains("four"), "{err}");
    let err = decode::<TriggerParam>(br#"{"jobId":1"#)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("invalid json: "), "{err}");
    let err = decode::<TriggerParam>(b"  ").unwrap_err().to_string();
    assert_eq!(err, "request body is empty");
    let err = decode::<IdleBeatParam>(br#"{"jobId":3000000000}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("32-bit"), "{err}");
}

#[test]
fn log_request_uses_log_date_tim() {
    let text = r#"{"logDateTim":1795244933764,"logId":1001,"fromLineNum":1}"#;
    let p: LogParam = round_trip(text);
    assert_eq!(
        p,
        LogParam {
            log_date_time: 1795244933764,
            log_id: 1001,
            from_line_num: 1
        }
    );
    // Written under both names: a 3.4 executor reads the first, a 3.5 one the second.
    assert_eq!(
        String::from_utf8(encode(&p)).unwrap(),
        r#"{"logDateTim":1795244933764,"logDateTime":1795244933764,"logId":1001,"fromLineNum":1}"#
    );
}

#[test]
fn executor_replies_of_3_4_2() {
    let text = r#"{"code":200,"msg":"Success"}"#;
    let e: Envelope = round_trip(text);
    assert!(e.is_success());
    assert_eq!(e.msg.as_deref(), Some("Success"));
    assert_eq!(e.payload, None);
    assert_eq!(String::from_utf8(encode(&e)).unwrap(), text);
    let busy: Envelope =
        round_trip(r#"{"code":500,"msg":"job thread is running or has trigger queue."}"#);
    assert!(!busy.is_success());
    assert_eq!(busy.msg.as_deref(), Some(tickwork_protocol::msg::JOB_BUSY));

    let killed: Envelope<String> =
        round_trip(r#"{"code":200,"msg":"Success","data":"job thread already killed."}"#);
    assert_eq!(
        killed.payload.as_deref(),
        Some(tickwork_protocol::msg::JOB_ALREADY_KILLED)
    );
}

#[test]
fn log_reply_of_3_4_2_under_data() {
    let text = r#"{"code":200,"msg":"Success","data":{"fromLineNum":1,"toLineNum":5,"logContent":"2026-11-21 07:08:53 [...JobThread#run]-[127]-[...] <br>----------- xxl-job job execute start ...\n...","isEnd":false}}"#;
    let e: Envelope<LogResult> = round_trip(text);
    let r = e.payload.clone().unwrap();
    assert_eq!((r.from_line_num, r.to_line_num, r.is_end), (1, 5, false));
    assert!(
        r.log_content
            .contains("<br>----------- xxl-job job execute start")
    );
    // We write the payload under both keys.
    let written: Value = serde_json::from_slice(&encode(&e)).unwrap();
    assert_eq!(keys(&written), ["code", "content", "data", "msg"]);
    assert_eq!(written["content"], written["data"]);
    assert_eq!(written["data"]["isEnd"], json!(false));

    let past_end: Envelope<LogResult> = round_trip(
        r#"{"code":200,"msg":"Success","data":{"fromLineNum":6,"toLineNum":0,"logContent":"","isEnd":false}}"#,
    );
    let r = past_end.payload.unwrap();
    assert!(r.from_line_num > r.to_line_num, "nothing new");
}

#[test]
fn log_reply_of_2_4_2_under_content_with_escaped_html() {
    // Gson <= 3.1 escapes HTML characters; they decode as usual.
    let text = r#"{"code":200,"content":{"fromLineNum":1,"toLineNum":3,"logContent":"l1 \u003cbr\u003e \u003d \u0027\nl2\nl3\n","isEnd":false}}"#;
    let e: Envelope<LogResult> = round_trip(text);
    assert_eq!(e.msg, None);
    let r = e.payload.unwrap();
    assert_eq!(r.log_content, "l1 <br> = '\nl2\nl3\n");
    assert_eq!(r.to_line_num, 3);

    // 2.4.2: success carries no msg; past the end, toLineNum is the total line count.
    let e: Envelope = round_trip(r#"{"code":200}"#);
    assert!(e.is_success() && e.msg.is_none());
    let e: Envelope<LogResult> = round_trip(
        r#"{"code":200,"content":{"fromLineNum":6,"toLineNum":5,"logContent":"","isEnd":false}}"#,
    );
    let r = e.payload.unwrap();
    assert!(r.from_line_num > r.to_line_num);
    let e: Envelope = round_trip(r#"{"code":200,"msg":"job thread already killed."}"#);
    assert_eq!(e.msg.as_deref(), Some("job thread already killed."));
}

#[test]
fn log_reply_for_a_missing_file() {
    let e: Envelope<LogResult> = round_trip(
        r#"{"code":200,"msg":"Success","data":{"fromLineNum":1,"toLineNum":0,"logContent":"readLog fail, logFile not exists","isEnd":true}}"#,
    );
    let r = e.payload.unwrap();
    assert!(r.is_end);
    assert_eq!(r.log_content, tickwork_protocol::msg::LOG_FILE_MISSING);
}

#[test]
fn admin_answers_are_accepted_in_every_form() {
    for text in [
        r#"{"code":200,"msg":null}"#,
        r#"{"code":200,"msg":null,"content":null}"#,
        r#"{"code":200,"msg":"Success","data":null}"#,
    ] {
        let e: Envelope = round_trip(text);
        assert!(e.is_success(), "{text}");
        assert_eq!(e.payload, None);
    }
}

#[test]
fn bad_input_replies_of_the_captures() {
    for (text, msg) in [
        (
            r#"{"code":500,"msg":"The access token is wrong."}"#,
            tickwork_protocol::msg::WRONG_TOKEN.to_owned(),
        ),
        (
            r#"{"code":500,"msg":"invalid request, HttpMethod not support."}"#,
            tickwork_protocol::msg::METHOD_NOT_SUPPORTED.to_owned(),
        ),
        (
            r#"{"code":500,"msg":"invalid request, uri-mapping(/beat?x=1) not found."}"#,
            tickwork_protocol::msg::uri_not_found("/beat?x=1"),
        ),
        (
            r#"{"code":500,"msg":"job handler [noSuchHandler] not found."}"#,
            tickwork_protocol::msg::handler_not_found("noSuchHandler"),
        ),
        (
            r#"{"code":500,"msg":"glueType[WHATEVER] is not valid."}"#,
            tickwork_protocol::msg::glue_type_invalid("WHATEVER"),
        ),
        (
            r#"{"code":500,"msg":"repeat trigger job, logId:6005"}"#,
            tickwork_protocol::msg::repeat_trigger(6005),
        ),
        (
            r#"{"code":500,"msg":"block strategy effect：Discard Later"}"#,
            "block strategy effect：Discard Later".to_owned(),
        ),
    ] {
        let e: Envelope = round_trip(text);
        assert_eq!(e.code, 500);
        assert_eq!(e.msg.as_deref(), Some(msg.as_str()), "{text}");
        // Our own failure envelope writes the same bytes.
        assert_eq!(
            String::from_utf8(encode(&Envelope::<Value>::fail(msg))).unwrap(),
            text
        );
    }
}

#[test]
fn envelope_reads_data_before_content() {
    let e: Envelope<String> = decode(br#"{"code":200,"content":"old","data":"new"}"#).unwrap();
    assert_eq!(e.payload.as_deref(), Some("new"));
    let e: Envelope<String> = decode(br#"{"code":200,"content":"old","data":null}"#).unwrap();
    assert_eq!(e.payload.as_deref(), Some("old"));
}

// XXL-JOB 3.5 (xxl-job-core 3.5.0-SNAPSHOT with xxl-tool 2.5.0, observed on loopback): its
// calls carry `XXL-JOB-APPNAME` beside the token, its callbacks are wrapped in
// `callbackList` and spell `logDateTime` in full.

#[test]
fn callback_list_of_a_3_5_executor() {
    let text = r#"{"callbackList":[{"logId":1001,"logDateTime":1795714715404,"handleCode":200,"handleMsg":"demo ok"}]}"#;
    let v = tickwork_protocol::decode_callbacks(text.as_bytes()).expect("decodes");
    assert_eq!(
        v,
        vec![HandleCallbackParam {
            log_id: 1001,
            log_date_time: 1795714715404,
            handle_code: 200,
            handle_msg: Some("demo ok".into()),
        }]
    );
    let killed = r#"{"callbackList":[{"logId":1002,"logDateTime":1795714715404,"handleCode":500,"handleMsg":"scheduling center kill job. [job running, killed]"}]}"#;
    let v = tickwork_protocol::decode_callbacks(killed.as_bytes()).expect("decodes");
    assert_eq!(v[0].handle_code, 500);
    assert!(
        v[0].handle_msg
            .as_deref()
            .unwrap_or("")
            .starts_with(tickwork_protocol::msg::KILLED_BY_ADMIN)
    );
}

#[test]
fn callbacks_read_both_shapes_and_refuse_others_by_name() {
    let old = r#"[{"logId":1,"logDateTim":5,"handleCode":200}]"#;
    assert_eq!(
        tickwork_protocol::decode_callbacks(old.as_bytes()).expect("array")[0].log_date_time,
        5
    );
    assert!(
        tickwork_protocol::decode_callbacks(br#"{"callbackList":null}"#)
            .expect("empty list")
            .is_empty()
    );
    for bad in [
        &b"42"[..],
        b"\"x\"",
        br#"{"callbackList":[{"logId":"x"}]}"#,
        b"   ",
    ] {
        let e = tickwork_protocol::decode_callbacks(bad).expect_err("refused");
        assert!(!e.to_string().contains("variant"), "{e}");
    }
}

#[test]
fn log_request_of_a_3_5_admin_spells_log_date_time_in_full() {
    let p: LogParam =
        decode(br#"{"logId":1001,"logDateTime":1795714715404,"fromLineNum":1}"#).expect("decodes");
    assert_eq!(p.log_date_time, 1795714715404);
    assert_eq!(p.log_id, 1001);
}

#[test]
fn executor_replies_of_3_5() {
    let log: Envelope<LogResult> = round_trip(
        r#"{"code":200,"msg":"Success","data":{"fromLineNum":1,"toLineNum":0,"logContent":"readLog fail, logFile not exists","isEnd":true}}"#,
    );
    let page = log.payload.expect("a log page");
    assert!(page.is_end);
    assert_eq!(page.log_content, tickwork_protocol::msg::LOG_FILE_MISSING);
    for refusal in [
        tickwork_protocol::msg::TOKEN_OR_APP_EMPTY,
        tickwork_protocol::msg::TOKEN_OR_APP_INVALID,
    ] {
        let text = format!(r#"{{"code":500,"msg":"{refusal}"}}"#);
        let e: Envelope = round_trip(&text);
        assert!(!e.is_success());
        assert_eq!(e.msg.as_deref(), Some(refusal));
    }
}
