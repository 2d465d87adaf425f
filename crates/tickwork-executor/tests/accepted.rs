//! The record of accepted runs: a `/run` of a `logId` accepted before runs nothing and answers
//! 200 under every block strategy, `/tickwork/accepted` lists exactly the accepted ids among
//! those asked with the instant its record is complete from, the bound evicts the oldest ids
//! and moves that instant, and bad or unauthorised queries get clear errors and change nothing.

mod support;

use serde_json::{Value, json};
use support::*;

const ACCEPTED: &str = "/tickwork/accepted";

fn duplicate(log_id: i64) -> String {
    format!(r#"{{"code":200,"msg":"duplicate run ignored: logId {log_id} was already accepted"}}"#)
}

/// Asks `/tickwork/accepted` about `ids`; returns the accepted ids and `recordSince`.
async fn accepted(client: &Client, ids: &[i64]) -> (Vec<i64>, i64) {
    let reply = client.post_json(ACCEPTED, &json!({ "logIds": ids })).await;
    let v = reply.json();
    assert_eq!(
        (v["code"].as_i64(), v["msg"].as_str()),
        (Some(200), Some("Success")),
        "{}",
        reply.text
    );
    assert_eq!(v["content"], v["data"], "both payload keys");
    let ids = v["data"]["accepted"]
        .as_array()
        .unwrap_or_else(|| panic!("accepted: {}", reply.text))
        .iter()
        .map(|id| id.as_i64().unwrap())
        .collect();
    (ids, v["data"]["recordSince"].as_i64().unwrap())
}

fn with_strategy(mut t: Value, strategy: &str) -> Value {
    t["executorBlockStrategy"] = json!(strategy);
    t
}

#[tokio::test]
async fn duplicate_run_runs_the_handler_once_and_answers_200() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 7001, "gate")).await;
    assert_eq!(h.gate.started().await, 7001);
    // Repeated while running, then after its end.
    assert_eq!(
        h.client.run(&trigger(1, 7001, "gate")).await.text,
        duplicate(7001)
    );
    h.gate.release(1);
    assert_eq!(h.admin.callback(7001).await.handle_code, 200);
    assert_eq!(
        h.client.run(&trigger(1, 7001, "gate")).await.text,
        duplicate(7001)
    );
    // A later run of the same job comes after anything a repeat could have queued.
    h.client.run_ok(&trigger(1, 7002, "ok")).await;
    h.admin.callback(7002).await;
    let ids: Vec<i64> = h.admin.callbacks().iter().map(|c| c.log_id).collect();
    assert_eq!(ids, [7001, 7002]);
    let stats = h.executor.stats();
    assert_eq!((stats.runs_started, stats.runs_duplicate), (2, 2));
}

#[tokio::test]
async fn duplicate_run_is_ignored_before_every_block_strategy() {
    let h = Harness::start().await;
    for (job, strategy) in [
        (1, "SERIAL_EXECUTION"),
        (2, "DISCARD_LATER"),
        (3, "COVER_EARLY"),
    ] {
        let running = i64::from(job) * 100;
        h.client
            .run_ok(&with_strategy(trigger(job, running, "gate"), strategy))
            .await;
        assert_eq!(h.gate.started().await, running);
        // Discard-later would refuse it and cover-early would kill the running one.
        let repeat = with_strategy(trigger(job, running, "gate"), strategy);
        assert_eq!(
            h.client.run(&repeat).await.text,
            duplicate(running),
            "{strategy}"
        );
        h.gate.release(1);
        let cb = h.admin.callback(running).await;
        assert_eq!(
            (cb.handle_code, cb.handle_msg.as_deref()),
            (200, Some("released")),
            "{strategy}"
        );
    }
    // A queued run repeated: a Java executor refuses it ("repeat trigger job"); here it is
    // accepted, once.
    h.client.run_ok(&trigger(4, 401, "gate")).await;
    assert_eq!(h.gate.started().await, 401);
    h.client.run_ok(&trigger(4, 402, "gate")).await;
    assert_eq!(
        h.client.run(&trigger(4, 402, "gate")).await.text,
        duplicate(402)
    );
    h.gate.release(2);
    h.admin.callback(402).await;
    let stats = h.executor.stats();
    assert_eq!((stats.runs_started, stats.runs_duplicate), (5, 4));
}

#[tokio::test]
async fn duplicate_runs_sent_at_once_run_once() {
    let h = Harness::start().await;
    let client = std::sync::Arc::new(h.client);
    let sends: Vec<_> = (0..16)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.run(&trigger(1, 7501, "ok")).await.text })
        })
        .collect();
    let mut answers = Vec::new();
    for send in sends {
        answers.push(send.await.unwrap());
    }
    let queued = answers
        .iter()
        .filter(|a| *a == r#"{"code":200,"msg":"Success"}"#)
        .count();
    let repeats = answers.iter().filter(|a| **a == duplicate(7501)).count();
    assert_eq!((queued, repeats), (1, 15), "{answers:?}");
    h.admin.callback(7501).await;
    assert_eq!(h.executor.stats().runs_started, 1);
}

#[tokio::test]
async fn accepted_lists_exactly_the_accepted_ids() {
    let before = now_ms();
    let h = Harness::start().await;
    let after = now_ms();
    let (none, since) = accepted(&h.client, &[1, 2]).await;
    assert!(none.is_empty());
    assert!(
        (before..=after).contains(&since),
        "record since the start: {before} <= {since} <= {after}"
    );
    h.client.run_ok(&trigger(1, 101, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(2, 102, "ok")).await;
    // Refused runs are not accepted: an unknown handler, discard-later on a busy job.
    assert_eq!(h.client.run(&trigger(3, 103, "nope")).await.code(), 500);
    let discarded = with_strategy(trigger(1, 104, "gate"), "DISCARD_LATER");
    assert_eq!(h.client.run(&discarded).await.code(), 500);
    // Asked in any order, repeats answered once, unknown ids left out.
    assert_eq!(
        accepted(&h.client, &[999, 104, 102, 103, 101, 102]).await,
        (vec![102, 101], since)
    );
    // Finished runs stay accepted.
    h.gate.release(1);
    h.admin.callback(101).await;
    assert_eq!(accepted(&h.client, &[101]).await, (vec![101], since));
    assert_eq!(accepted(&h.client, &[]).await, (vec![], since));
    // The wire form.
    let text = h.client.post(ACCEPTED, r#"{"logIds":[102,5]}"#).await.text;
    assert_eq!(
        text,
        format!(
            r#"{{"code":200,"msg":"Success","content":{{"accepted":[102],"recordSince":{since}}},"data":{{"accepted":[102],"recordSince":{since}}}}}"#
        )
    );
}

#[tokio::test]
async fn accepted_record_evicts_the_oldest_and_moves_record_since() {
    let h = Harness::start_with(|b| b.accepted_runs_capacity(2)).await;
    let (_, start) = accepted(&h.client, &[]).await;
    let before = now_ms();
    h.client.run_ok(&trigger(1, 1, "ok")).await;
    let after = now_ms();
    h.client.run_ok(&trigger(1, 2, "ok")).await;
    assert_eq!(accepted(&h.client, &[1, 2, 3]).await, (vec![1, 2], start));
    h.client.run_ok(&trigger(1, 3, "ok")).await;
    let (ids, since) = accepted(&h.client, &[1, 2, 3]).await;
    assert_eq!(ids, [2, 3]);
    assert!(
        (before..=after).contains(&since) && since >= start,
        "record since run 1's acceptance: {before} <= {since} <= {after}"
    );
    // Forgotten, so accepted (and run) again: the admin learns it from `recordSince`.
    h.admin.callback_count(3).await;
    h.client.run_ok(&trigger(1, 1, "ok")).await;
    wait_until_sync("run 1 twice", DEADLINE, || {
        let n = h.admin.callbacks().iter().filter(|c| c.log_id == 1).count();
        (n == 2).then_some(())
    })
    .await;
    let (ids, _) = accepted(&h.client, &[1, 2, 3]).await;
    assert_eq!(ids, [1, 3]);
}

#[tokio::test]
async fn accepted_bad_inputs_get_clear_errors_and_change_nothing() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 11, "ok")).await;
    let known = accepted(&h.client, &[11, 12]).await;
    let too_many = format!(
        r#"{{"logIds":[{}]}}"#,
        vec!["1"; tickwork_protocol::MAX_ACCEPTED_QUERY + 1].join(",")
    );
    let cases: [(&str, &str); 8] = [
        ("", "request error: request body is empty"),
        ("hello", "request error: invalid json: expected value"),
        ("{}", "request error: invalid json: missing field `logIds`"),
        (
            r#"{"logIds":null}"#,
            "request error: invalid json: invalid type: null",
        ),
        (
            r#"{"logIds":[1,"2"]}"#,
            "request error: invalid json: invalid type: string \"2\"",
        ),
        (
            r#"{"logIds":[1.5]}"#,
            "request error: invalid json: invalid type: floating point",
        ),
        (
            r#"{"logIds":[1,2"#,
            "request error: invalid json: EOF while parsing",
        ),
        (
            &too_many,
            "request error: invalid json: logIds holds more than 10000 run ids",
        ),
    ];
    for (body, wanted) in cases {
        let reply = h.client.post(ACCEPTED, body.to_owned()).await;
        assert_eq!((reply.status, reply.code()), (200, 500), "{body:.40}");
        assert!(
            reply.msg().starts_with(wanted),
            "{body:.40}: {}",
            reply.msg()
        );
        assert!(reply.json().get("data").is_none(), "{}", reply.text);
    }
    assert_eq!(accepted(&h.client, &[11, 12]).await, known);
    assert_eq!(h.executor.stats().runs_started, 1);
}

#[tokio::test]
async fn accepted_refuses_a_wrong_token_and_inexact_uris() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 21, "ok")).await;
    let wrong = r#"{"code":500,"msg":"The access token is wrong."}"#;
    let body = r#"{"logIds":[21]}"#;
    let post = reqwest::Method::POST;
    for token in [Some("nope"), Some(""), None] {
        let r = h.client.request(post.clone(), ACCEPTED, body, token).await;
        assert_eq!((r.status, r.text.as_str()), (200, wrong), "{token:?}");
    }
    let r = h
        .client
        .request(post.clone(), "/tickwork/accepted?x=1", body, Some(TOKEN))
        .await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"invalid request, uri-mapping(/tickwork/accepted?x=1) not found."}"#
    );
    let r = h
        .client
        .request(reqwest::Method::GET, ACCEPTED, "", Some(TOKEN))
        .await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"invalid request, HttpMethod not support."}"#
    );
    assert_eq!(accepted(&h.client, &[21]).await.0, [21]);
}
