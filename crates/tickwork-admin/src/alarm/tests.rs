//! Tests of the alarm model: channel checks, messages, signatures and masking.

use super::*;

fn map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

fn message() -> AlarmMessage {
    AlarmMessage {
        job_id: 7,
        job_key: "nightly-report".into(),
        job_description: "Nightly report".into(),
        run_id: 4242,
        attempt: 1,
        executor_address: Some("http://10.0.0.5:9999".into()),
        state: "lost".into(),
        trigger_msg: Some("route FAILOVER".into()),
        handle_msg: Some("lost: executor stopped beating".into()),
        scheduled_at: 1_700_000_000_000,
        admin_node: "admin-1".into(),
        delivery_id: Some(99),
        test: false,
        fire_alert: None,
        grouped_runs: 0,
        last_run_id: None,
    }
}

#[test]
fn hmac_matches_the_rfc_4231_vector() {
    assert_eq!(
        hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn signatures_of_each_format() {
    let secret = "SEC000example";
    for (got, want) in [
        (
            webhook_signature("whsec", 1_700_000_000, r#"{"a":1}"#),
            "sha256=8ad37ba156048ae0e0a5533c75cdf26fee88b07f93cb57ee4c80adb053012032",
        ),
        (
            dingtalk_sign(secret, 1_700_000_000_000),
            "xyAXnOeEx8mcnUUlZoyxvRe/La8u0eqZaWsTXunfdkQ=",
        ),
        (
            feishu_sign(secret, 1_700_000_000),
            "OGl+fhrIPe4RmLlF1qBjjfXJQqEJxZ80bMC8hc460wY=",
        ),
    ] {
        assert_eq!(got, want);
    }
    assert_eq!(
        dingtalk_url(
            "https://oapi.dingtalk.com/robot/send?access_token=t",
            secret,
            1_700_000_000_000
        )
        .unwrap(),
        "https://oapi.dingtalk.com/robot/send?access_token=t&timestamp=1700000000000\
         &sign=xyAXnOeEx8mcnUUlZoyxvRe%2FLa8u0eqZaWsTXunfdkQ%3D"
    );
}

#[test]
fn chat_bodies_per_format() {
    for (kind, want) in [
        (
            AlarmKind::DingTalk,
            json!({"msgtype": "text", "text": {"content": "hi"}}),
        ),
        (
            AlarmKind::WeCom,
            json!({"msgtype": "text", "text": {"content": "hi"}}),
        ),
        (
            AlarmKind::Feishu,
            json!({"msg_type": "text", "content": {"text": "hi"}}),
        ),
        (AlarmKind::Slack, json!({"text": "hi"})),
    ] {
        assert_eq!(chat_body(kind, "hi"), want, "{kind}");
    }
}

#[test]
fn robot_answers_are_read_per_format() {
    for (kind, body, want) in [
        (AlarmKind::DingTalk, r#"{"errcode":0,"errmsg":"ok"}"#, None),
        (
            AlarmKind::DingTalk,
            r#"{"errcode":310000,"errmsg":"sign not match"}"#,
            Some("errcode 310000: sign not match"),
        ),
        (
            AlarmKind::WeCom,
            r#"{"errcode":93000,"errmsg":"invalid webhook url"}"#,
            Some("errcode 93000: invalid webhook url"),
        ),
        (AlarmKind::Feishu, r#"{"code":0,"msg":"success"}"#, None),
        (
            AlarmKind::Feishu,
            r#"{"code":19021,"msg":"sign match fail"}"#,
            Some("code 19021: sign match fail"),
        ),
        (AlarmKind::Feishu, r#"{"StatusCode":0}"#, None),
        (AlarmKind::Slack, r#"{"errcode":5}"#, None),
        (AlarmKind::WeCom, "not json", None),
    ] {
        assert_eq!(robot_error(kind, body).as_deref(), want, "{kind} {body}");
    }
}

#[test]
fn the_message_names_job_run_executor_and_failure() {
    let text = message().text();
    for part in [
        "job 7 (nightly-report) run 4242 lost",
        "job: 7 nightly-report (Nightly report)",
        "run: 4242 attempt 1",
        "executor: http://10.0.0.5:9999",
        "scheduled at: 2023-11-14T22:13:20Z",
        "failure: lost: executor stopped beating",
        "admin node: admin-1",
    ] {
        assert!(text.contains(part), "{part:?} missing in {text}");
    }
    let doc = message().json();
    assert_eq!(doc["event"], "run_failed");
    assert_eq!(doc["run"]["id"], 4242);
    assert_eq!(doc["run"]["executor_address"], "http://10.0.0.5:9999");
    assert_eq!(doc["job"]["key"], "nightly-report");
    assert_eq!(doc["delivery_id"], 99);
    let test = AlarmMessage {
        delivery_id: None,
        test: true,
        ..message()
    };
    assert!(test.title().starts_with("[test] "));
    assert_eq!(test.json()["event"], "test");
    assert!(test.json()["delivery_id"].is_null());
    assert_eq!(message().json()["grouped_runs"], 0);
}

#[test]
fn a_grouped_alarm_counts_the_runs_it_carries() {
    let grouped = |n, last| AlarmMessage {
        grouped_runs: n,
        last_run_id: last,
        ..message()
    };
    let one = grouped(1, Some(4250));
    assert_eq!(
        one.title(),
        "Tickwork alarm: job 7 (nightly-report) run 4242 lost and 1 more run"
    );
    let many = grouped(37, Some(4301));
    assert!(many.title().ends_with("run 4242 lost and 37 more runs"));
    assert!(
        many.text().ends_with(
            "\nmore runs: 37 more of this job failed, timed out or were lost after it; \
             the last: run 4301"
        ),
        "{}",
        many.text()
    );
    assert_eq!(many.json()["grouped_runs"], 37);
    assert_eq!(many.json()["last_run_id"], 4301);
    assert!(!message().text().contains("more runs"));
}

#[test]
fn a_fire_alert_names_its_fires_and_their_instants() {
    let alert = |kind, fires, worst_late_ms| AlarmMessage {
        fire_alert: Some(FireAlert {
            job_id: 7,
            kind,
            fires,
            first_at: 1_700_000_000_000,
            last_at: 1_700_000_011_000,
            worst_late_ms,
            run_id: 4242,
        }),
        ..message()
    };
    let missed = alert(FireAlertKind::Missed, 12, 0);
    assert_eq!(
        missed.title(),
        "Tickwork alarm: job 7 (nightly-report) 12 fires missed"
    );
    let text = missed.text();
    for part in [
        "job: 7 nightly-report (Nightly report)",
        "fires: 12 fires missed: no executor had them",
        "instants: 2023-11-14T22:13:20Z to 2023-11-14T22:13:31Z",
        "first run: 4242",
        "admin node: admin-1",
    ] {
        assert!(text.contains(part), "{part:?} missing in {text}");
    }
    assert!(!text.contains("latest"), "{text}");
    let doc = missed.json();
    assert_eq!(doc["event"], "fires_missed");
    assert_eq!(doc["alert"]["fires"], 12);
    assert_eq!(doc["alert"]["first_at"], 1_700_000_000_000i64);
    assert_eq!(doc["delivery_id"], 99);

    let late = alert(FireAlertKind::Late, 1, 2_345);
    assert!(late.title().ends_with("1 fire late"), "{}", late.title());
    assert!(late.text().contains("latest: 2345 ms after its instant"));
    assert_eq!(late.json()["event"], "fires_late");
    assert_eq!(late.json()["alert"]["worst_late_ms"], 2_345);
    let doubled = alert(FireAlertKind::Doubled, 2, 0);
    assert_eq!(doubled.json()["event"], "fires_doubled");
}
#[test]
fn configs_are_checked_per_kind() {
    let ok = [
        (
            AlarmKind::Email,
            json!({"host": "smtp.example.com", "from": "tw@example.com", "to": ["ops@example.com"]}),
        ),
        (
            AlarmKind::Webhook,
            json!({"url": "https://hooks.example.com/x", "secret": "s"}),
        ),
        (
            AlarmKind::DingTalk,
            json!({"url": "https://oapi.dingtalk.com/robot/send?access_token=t"}),
        ),
        (
            AlarmKind::WeCom,
            json!({"url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k"}),
        ),
        (
            AlarmKind::Feishu,
            json!({"url": "https://open.feishu.cn/open-apis/bot/v2/hook/x", "secret": "s"}),
        ),
        (
            AlarmKind::Slack,
            json!({"url": "https://hooks.slack.com/services/T/B/X"}),
        ),
    ];
    for (kind, config) in ok {
        let parsed = ChannelConfig::parse(kind, &map(config)).unwrap();
        assert_eq!(
            ChannelConfig::from_stored(kind, &parsed.to_stored()).unwrap(),
            parsed
        );
    }
    let bad = [
        (
            AlarmKind::Email,
            json!({"from": "a@b.c", "to": ["x@y.z"]}),
            "host",
        ),
        (
            AlarmKind::Email,
            json!({"host": " ", "from": "a@b.c", "to": ["x@y.z"]}),
            "SMTP host",
        ),
        (
            AlarmKind::Email,
            json!({"host": "h", "from": "a@b.c", "to": []}),
            "recipient",
        ),
        (
            AlarmKind::Email,
            json!({"host": "h", "from": "a@b.c", "to": ["nope"]}),
            "not an email address",
        ),
        (
            AlarmKind::Email,
            json!({"host": "h", "from": "a@b.c", "to": ["x@y.z"], "tls": "ssl"}),
            "unknown variant",
        ),
        (
            AlarmKind::Email,
            json!({"host": "h", "from": "a@b.c", "to": ["x@y.z"], "user": "u"}),
            "together",
        ),
        (AlarmKind::Webhook, json!({"url": "https://h/x"}), "secret"),
        (
            AlarmKind::Webhook,
            json!({"url": "ftp://h/x", "secret": "s"}),
            "http",
        ),
        (AlarmKind::Slack, json!({"url": "not a url"}), "url"),
        (
            AlarmKind::Slack,
            json!({"url": "https://h/x", "channel": "#ops"}),
            "unknown field",
        ),
        (
            AlarmKind::WeCom,
            json!({"url": "https://h/x", "secret": "s"}),
            "unknown field",
        ),
    ];
    for (kind, config, want) in bad {
        let err = ChannelConfig::parse(kind, &map(config.clone()))
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{kind} {config}: {err}");
    }
}

#[test]
fn secrets_are_masked_and_kept_on_update() {
    let stored = map(json!({
        "url": "https://oapi.dingtalk.com/robot/send?access_token=abcdef",
        "secret": "SECret",
    }));
    let c = ChannelConfig::parse(AlarmKind::DingTalk, &stored).unwrap();
    let shown = c.masked();
    assert_eq!(
        shown,
        json!({"url": "https://oapi.dingtalk.com/robot/***?access_token=***", "secret_set": true})
    );
    assert!(!shown.to_string().contains("abcdef"));
    let mut update = Map::new();
    merge_hidden(&mut update, &stored);
    assert_eq!(update, stored);
    let mut cleared = map(json!({"secret": ""}));
    merge_hidden(&mut cleared, &stored);
    let c = ChannelConfig::parse(AlarmKind::DingTalk, &cleared).unwrap();
    assert_eq!(c.masked()["secret_set"], false);

    let mail = ChannelConfig::parse(
        AlarmKind::Email,
        &map(json!({"host": "h", "user": "u", "password": "pw", "from": "a@b.c", "to": ["x@y.z"]})),
    )
    .unwrap();
    let shown = mail.masked();
    assert_eq!(shown["password_set"], true);
    assert_eq!(shown["port"], 587);
    assert!(shown.get("password").is_none());
    assert_eq!(
        mask_url("https://hooks.slack.com/services/T0/B0/XYZ"),
        "https://hooks.slack.com/services/***"
    );
    assert_eq!(mask_url("http://127.0.0.1:8080/"), "http://127.0.0.1:8080");
}
