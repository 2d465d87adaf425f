//! The executor endpoints against the observed replies of a real Java executor
//! (`xxl-job-captures.md`): normal replies, the bad-input table, block policies, kill, timeout,
//! sharding and `/log` paging.

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::json;
use support::*;
use tickwork_executor::JobContext;
use tickwork_executor::JobOutcome;

const SUCCESS: &str = r#"{"code":200,"msg":"Success"}"#;

#[tokio::test]
async fn beat_ignores_its_body_and_replies_like_java() {
    let h = Harness::start().await;
    for body in ["", "\"\"", "{\"anything\":1}"] {
        let reply = h.client.post("/beat", body).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.content_type, "text/html;charset=UTF-8");
        assert_eq!(reply.text, SUCCESS);
    }
}

#[tokio::test]
async fn token_is_required_when_configured() {
    let h = Harness::start().await;
    let wrong = r#"{"code":500,"msg":"The access token is wrong."}"#;
    let post = reqwest::Method::POST;
    let r = h
        .client
        .request(post.clone(), "/beat", "", Some("nope"))
        .await;
    assert_eq!((r.status, r.text.as_str()), (200, wrong));
    let r = h.client.request(post.clone(), "/beat", "", None).await;
    assert_eq!(r.text, wrong);
    // An empty header counts as absent.
    let r = h.client.request(post.clone(), "/beat", "", Some("")).await;
    assert_eq!(r.text, wrong);
    let r = h.client.request(post, "/beat", "", Some(TOKEN)).await;
    assert_eq!(r.text, SUCCESS);
}

#[tokio::test]
async fn no_token_configured_accepts_any_header() {
    let h = Harness::start_with(|b| b.access_token("")).await;
    let post = reqwest::Method::POST;
    for token in [None, Some(""), Some("whatever")] {
        let r = h.client.request(post.clone(), "/beat", "", token).await;
        assert_eq!(r.text, SUCCESS);
    }
}

#[tokio::test]
async fn checks_run_in_order_method_uri_token() {
    let h = Harness::start().await;
    let method = r#"{"code":500,"msg":"invalid request, HttpMethod not support."}"#;
    // A GET with a wrong token on an unknown path still gets the method answer first.
    let r = h
        .client
        .request(reqwest::Method::GET, "/nope", "", Some("bad"))
        .await;
    assert_eq!((r.status, r.text.as_str()), (200, method));
    let r = h
        .client
        .request(reqwest::Method::PUT, "/run", "", Some(TOKEN))
        .await;
    assert_eq!(r.text, method);
    // Then the exact URI, query string included, before the token.
    let r = h
        .client
        .request(reqwest::Method::POST, "/beat?x=1", "", Some("bad"))
        .await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"invalid request, uri-mapping(/beat?x=1) not found."}"#
    );
    let r = h.client.post("/xxl-job/run", "").await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"invalid request, uri-mapping(/xxl-job/run) not found."}"#
    );
    let r = h.client.post("/", "").await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"invalid request, uri-mapping(/) not found."}"#
    );
}

#[tokio::test]
async fn malformed_bodies_get_a_clear_error_without_stack_trace() {
    let h = Harness::start().await;
    for path in ["/run", "/idleBeat", "/kill", "/log"] {
        let r = h.client.post(path, "{\"jobId\":").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.code(), 500);
        let msg = r.msg();
        assert!(
            msg.starts_with("request error: invalid json: "),
            "{path}: {msg}"
        );
        assert!(
            !msg.contains("Exception") && !msg.contains("\tat "),
            "{msg}"
        );
    }
    let r = h.client.post("/run", "").await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"request error: request body is empty"}"#
    );
    let r = h.client.post("/run", "{\"jobId\":\"four\"}").await;
    assert!(
        r.msg().starts_with("request error: invalid json: "),
        "{}",
        r.msg()
    );
}

#[tokio::test]
async fn oversized_body_is_refused() {
    let h = Harness::start().await;
    let addr = h.executor.local_addr();
    // Only the head is sent: the server answers from the declared length without reading the
    // body, and a client still pushing megabytes would see the connection reset instead.
    let (_, body) = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let req = format!(
            "POST /run HTTP/1.1\r\nHost: x\r\nXXL-JOB-ACCESS-TOKEN: {TOKEN}\r\nContent-Length: {}\r\n\r\n",
            6 * 1024 * 1024
        );
        stream.write_all(req.as_bytes()).unwrap();
        read_response(&mut stream)
    })
    .await
    .unwrap();
    assert_eq!(
        body,
        r#"{"code":500,"msg":"request error: request body is larger than 5 MiB"}"#
    );
    // The server is still fine afterwards.
    assert_eq!(h.client.post("/beat", "").await.text, SUCCESS);
}

#[tokio::test]
async fn unknown_handler_and_glue_types_are_refused() {
    let h = Harness::start().await;
    let r = h.client.run(&trigger(1, 1, "noSuchHandler")).await;
    assert_eq!(
        r.text,
        r#"{"code":500,"msg":"job handler [noSuchHandler] not found."}"#
    );
    let mut t = trigger(1, 2, "ok");
    t["glueType"] = json!("WHATEVER");
    assert_eq!(
        h.client.run(&t).await.text,
        r#"{"code":500,"msg":"glueType[WHATEVER] is not valid."}"#
    );
    t["glueType"] = json!("GLUE_GROOVY");
    let r = h.client.run(&t).await;
    assert_eq!(r.code(), 500);
    assert!(
        r.msg()
            .contains("glue type GLUE_GROOVY is not supported by this executor"),
        "{}",
        r.msg()
    );
    // Scripts are off by default.
    let r = h
        .client
        .run(&script_trigger(1, 3, "GLUE_SHELL", "echo hi", 1))
        .await;
    assert_eq!(r.code(), 500);
    assert!(
        r.msg().contains("script jobs are not enabled"),
        "{}",
        r.msg()
    );
    assert_eq!(
        h.executor.stats().workers,
        0,
        "refused runs create no worker"
    );
}

#[tokio::test]
async fn run_is_accepted_and_the_result_called_back() {
    let h = Harness::start().await;
    let t = trigger(1, 1001, "ok");
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(1001).await;
    assert_eq!(cb.handle_code, 200);
    assert_eq!(cb.handle_msg.as_deref(), Some("ok"));
    assert_eq!(cb.log_date_time, t["logDateTime"].as_i64().unwrap());
    // The wire form: the trigger time under `logDateTim`, token sent, legacy context path.
    let req = h
        .admin
        .requests()
        .into_iter()
        .find(|r| r.method == "callback")
        .unwrap();
    assert_eq!(req.path, "/xxl-job-admin/api/callback");
    assert_eq!(req.token.as_deref(), Some(TOKEN));
    assert_eq!(
        req.body,
        format!(
            r#"[{{"logId":1001,"logDateTim":{},"handleCode":200,"handleMsg":"ok"}}]"#,
            t["logDateTime"]
        )
    );
    // A success without message omits handleMsg, as Gson does.
    h.client.run_ok(&trigger(2, 1002, "quiet")).await;
    h.admin.callback(1002).await;
    let raw = h
        .admin
        .requests()
        .into_iter()
        .filter(|r| r.method == "callback")
        .find(|r| r.body.contains("1002"))
        .unwrap();
    assert!(!raw.body.contains("handleMsg"), "{}", raw.body);
}

#[tokio::test]
async fn lenient_fields_are_accepted() {
    let h = Harness::start().await;
    let body = r#"{"jobId":"4","executorHandler":"shard","logId":"4001","logDateTime":1718000000123,
        "glueType":"BEAN","broadcastIndex":"1","broadcastTotal":2,"someFutureField":{"x":1}}"#;
    let r = h.client.post("/run", body).await;
    assert_eq!(r.text, SUCCESS);
    let cb = h.admin.callback(4001).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (200, Some("1/2"))
    );
    assert_eq!(cb.log_date_time, 1_718_000_000_123);
}

#[tokio::test]
async fn handler_failures_errors_and_panics_become_500() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 1, "fail")).await;
    h.client.run_ok(&trigger(2, 2, "err")).await;
    h.client.run_ok(&trigger(3, 3, "panic")).await;
    let cb = h.admin.callback(1).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (500, Some("it failed"))
    );
    let cb = h.admin.callback(2).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (500, Some("cannot write report: disk on fire"))
    );
    let cb = h.admin.callback(3).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (500, Some("job handler panicked: boom"))
    );
    // The worker that saw the panic keeps serving its job.
    let mut t = trigger(3, 4, "ok");
    t["executorHandler"] = json!("panic");
    h.client.run_ok(&t).await;
    assert_eq!(h.admin.callback(4).await.handle_code, 500);
}

#[tokio::test]
async fn idle_beat_reports_a_busy_job() {
    let h = Harness::start().await;
    let busy = r#"{"code":500,"msg":"job thread is running or has trigger queue."}"#;
    assert_eq!(h.client.idle_beat(1).await.text, SUCCESS);
    h.client.run_ok(&trigger(1, 11, "gate")).await;
    assert_eq!(h.gate.started().await, 11);
    assert_eq!(h.client.idle_beat(1).await.text, busy);
    // Another job is idle.
    assert_eq!(h.client.idle_beat(2).await.text, SUCCESS);
    h.client.run_ok(&trigger(1, 12, "gate")).await;
    h.gate.release(1);
    assert_eq!(h.gate.started().await, 12);
    // Running the queued one: still busy.
    assert_eq!(h.client.idle_beat(1).await.text, busy);
    h.gate.release(1);
    h.admin.callback(12).await;
    wait_until_sync("idle worker", DEADLINE, || {
        (h.executor.stats().running == 0).then_some(())
    })
    .await;
    assert_eq!(h.client.idle_beat(1).await.text, SUCCESS);
}

#[tokio::test]
async fn discard_later_refuses_while_busy() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 21, "gate")).await;
    h.gate.started().await;
    let mut t = trigger(1, 22, "gate");
    t["executorBlockStrategy"] = json!("DISCARD_LATER");
    assert_eq!(
        h.client.run(&t).await.text,
        r#"{"code":500,"msg":"block strategy effect：Discard Later"}"#
    );
    h.gate.release(1);
    assert_eq!(h.admin.callback(21).await.handle_code, 200);
    // Idle again: the same policy accepts.
    wait_until_sync("idle worker", DEADLINE, || {
        (h.executor.stats().running == 0).then_some(())
    })
    .await;
    t["logId"] = json!(23);
    h.client.run_ok(&t).await;
    h.gate.release(1);
    assert_eq!(h.admin.callback(23).await.handle_code, 200);
}

/// Unlike a Java executor, which runs a repeated `logId` again when it is running (and refuses
/// it while queued), the run is accepted once: the repeat answers 200 and runs nothing
/// (`accepted.rs` has the details).
#[tokio::test]
async fn repeated_log_id_is_accepted_once_whether_running_or_queued() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 6001, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(1, 6005, "gate")).await;
    for id in [6001, 6005] {
        assert_eq!(
            h.client.run(&trigger(1, id, "gate")).await.text,
            format!(
                r#"{{"code":200,"msg":"duplicate run ignored: logId {id} was already accepted"}}"#
            )
        );
    }
    h.gate.release(2);
    let all = h.admin.callback_count(2).await;
    let ids: Vec<i64> = all.iter().map(|c| c.log_id).collect();
    assert_eq!(ids, [6001, 6005]);
    assert_eq!(h.executor.stats().runs_started, 2);
}

#[tokio::test]
async fn cover_early_kills_the_running_and_queued_runs() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 31, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(1, 32, "gate")).await;
    let mut t = trigger(1, 33, "gate");
    t["executorBlockStrategy"] = json!("COVER_EARLY");
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(31).await;
    assert_eq!(cb.handle_code, 500);
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("block strategy effect：Cover Early [job running, killed]")
    );
    let cb = h.admin.callback(32).await;
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("block strategy effect：Cover Early [job not executed, in the job queue, killed.]")
    );
    assert_eq!(h.gate.started().await, 33);
    h.gate.release(1);
    assert_eq!(h.admin.callback(33).await.handle_code, 200);
}

#[tokio::test]
async fn a_changed_handler_replaces_the_worker() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 41, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(1, 42, "ok")).await;
    let cb = h.admin.callback(41).await;
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some(
            "change handler or glue type, and terminate the old job thread. [job running, killed]"
        )
    );
    assert_eq!(h.admin.callback(42).await.handle_code, 200);
}

#[tokio::test]
async fn kill_reports_running_and_queued_runs() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 51, "gate")).await;
    h.gate.started().await;
    h.client.run_ok(&trigger(1, 52, "gate")).await;
    assert_eq!(h.client.kill(1).await.text, SUCCESS);
    let cb = h.admin.callback(51).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (
            500,
            Some("scheduling center kill job. [job running, killed]")
        )
    );
    let cb = h.admin.callback(52).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (
            500,
            Some("scheduling center kill job. [job not executed, in the job queue, killed.]")
        )
    );
    assert_eq!(
        h.client.kill(1).await.text,
        r#"{"code":200,"msg":"Success","content":"job thread already killed.","data":"job thread already killed."}"#
    );
    // The job runs again afterwards on a new worker.
    h.client.run_ok(&trigger(1, 53, "ok")).await;
    assert_eq!(h.admin.callback(53).await.handle_code, 200);
}

#[tokio::test]
async fn kill_drops_a_handler_that_ignores_cancellation() {
    let h = Harness::start().await;
    h.client.run_ok(&trigger(1, 55, "stubborn")).await;
    wait_until_sync("run started", DEADLINE, || {
        (h.executor.stats().running == 1).then_some(())
    })
    .await;
    assert_eq!(h.client.kill(1).await.text, SUCCESS);
    let cb = h.admin.callback(55).await;
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("scheduling center kill job. [job running, killed]")
    );
}

#[tokio::test]
async fn timeout_reports_502_and_cancels_the_handler() {
    let h = Harness::start().await;
    let mut t = trigger(1, 61, "gate");
    t["executorTimeout"] = json!(1);
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(61).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (502, Some("job execute timeout "))
    );
    // Also when the handler ignores its cancellation signal.
    let mut t = trigger(2, 62, "stubborn");
    t["executorTimeout"] = json!(1);
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(62).await;
    assert_eq!(cb.handle_code, 502);
    let log = std::fs::read_to_string(log_path(&h, &t)).unwrap();
    assert!(log.contains("job execute timeout"), "{log}");
}

fn log_path(h: &Harness, t: &serde_json::Value) -> std::path::PathBuf {
    let ms = t["logDateTime"].as_i64().unwrap();
    let day = jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%Y-%m-%d")
        .to_string();
    h.dir
        .path()
        .join(day)
        .join(format!("{}.log", t["logId"].as_i64().unwrap()))
}

#[tokio::test]
async fn sharding_index_and_total_reach_the_handler() {
    let h = Harness::start().await;
    let mut t = trigger(1, 71, "shard");
    t["broadcastIndex"] = json!(2);
    t["broadcastTotal"] = json!(3);
    h.client.run_ok(&t).await;
    assert_eq!(
        h.admin.callback(71).await.handle_msg.as_deref(),
        Some("2/3")
    );
}

#[tokio::test]
async fn log_is_read_by_line_range() {
    let h = Harness::start().await;
    let mut t = trigger(1, 1001, "lines");
    t["executorParams"] = json!("a=1");
    let when = t["logDateTime"].as_i64().unwrap();
    h.client.run_ok(&t).await;
    h.admin.callback(1001).await;

    let r = h.client.log(when, 1001, 1).await;
    let v = r.json();
    assert_eq!(
        (v["code"].as_i64(), v["msg"].as_str()),
        (Some(200), Some("Success"))
    );
    // Both payload keys, for <= 3.2 and 3.3+ admins.
    assert_eq!(v["content"], v["data"]);
    let data = &v["data"];
    assert_eq!(data["fromLineNum"], 1);
    assert_eq!(data["toLineNum"], 4, "{data}");
    assert_eq!(data["isEnd"], false);
    let content = data["logContent"].as_str().unwrap();
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 4, "{content}");
    assert!(lines[0].contains("job execute start") && lines[0].contains("Param:a=1"));
    assert!(lines[1].ends_with("first handler line"));
    assert!(lines[2].ends_with("param=a=1"));
    assert!(lines[3].contains("Result: handleCode=200"));
    assert!(content.ends_with('\n'));

    let r = h.client.log(when, 1001, 3).await.json();
    assert_eq!(r["data"]["toLineNum"], 4);
    assert_eq!(r["data"]["logContent"].as_str().unwrap().lines().count(), 2);

    // Nothing new: 3.3+ style, toLineNum 0 and no content.
    let r = h.client.log(when, 1001, 5).await.json();
    assert_eq!(
        r["data"],
        json!({"fromLineNum":5,"toLineNum":0,"logContent":"","isEnd":false})
    );

    let r = h.client.log(when, 999_999, 1).await;
    assert_eq!(
        r.text,
        r#"{"code":200,"msg":"Success","content":{"fromLineNum":1,"toLineNum":0,"logContent":"readLog fail, logFile not exists","isEnd":true},"data":{"fromLineNum":1,"toLineNum":0,"logContent":"readLog fail, logFile not exists","isEnd":true}}"#
    );
}

#[tokio::test]
async fn replies_are_framed_by_content_length_on_a_kept_alive_connection() {
    let h = Harness::start().await;
    let addr = h.executor.local_addr();
    let replies = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut replies = Vec::new();
        for _ in 0..3 {
            let req = format!(
                "POST /beat HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nXXL-JOB-ACCESS-TOKEN: {TOKEN}\r\nContent-Length: 0\r\n\r\n"
            );
            stream.write_all(req.as_bytes()).unwrap();
            replies.push(read_response(&mut stream));
        }
        replies
    })
    .await
    .unwrap();
    for (head, body) in replies {
        let lower = head.to_ascii_lowercase();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(lower.contains("content-length: 28"), "{head}");
        assert!(
            lower.contains("content-type: text/html;charset=utf-8"),
            "{head}"
        );
        assert!(lower.contains("connection: keep-alive"), "{head}");
        assert_eq!(body, SUCCESS);
    }
}

fn read_response(stream: &mut std::net::TcpStream) -> (String, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().unwrap())
        })
        .expect("content-length");
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).unwrap();
    (head, String::from_utf8(body).unwrap())
}

#[tokio::test]
async fn handler_context_carries_the_run() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let record = seen.clone();
    let h = Harness::start_with(move |b| {
        b.handler("inspect", move |ctx: JobContext| {
            let record = record.clone();
            async move {
                *record.lock().unwrap() = Some((
                    ctx.job_id(),
                    ctx.log_id(),
                    ctx.params().to_owned(),
                    ctx.timeout(),
                    ctx.run_log().path().to_owned(),
                ));
                Ok(JobOutcome::success())
            }
        })
    })
    .await;
    let mut t = trigger(7, 81, "inspect");
    t["executorParams"] = json!("p");
    t["executorTimeout"] = json!(9);
    h.client.run_ok(&t).await;
    h.admin.callback(81).await;
    let (job, log, params, timeout, path) = seen.lock().unwrap().clone().unwrap();
    assert_eq!((job, log, params.as_str()), (7, 81, "p"));
    assert_eq!(timeout, Some(Duration::from_secs(9)));
    assert_eq!(path, log_path(&h, &t));
}
