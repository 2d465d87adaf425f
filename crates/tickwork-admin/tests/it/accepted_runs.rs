//! `ExecutorClient::accepted` over real HTTP: against a Tickwork executor in this process it
//! answers with the accepted runs (in parts past the per-call limit); against a server that
//! answers as a Java executor does to an unknown path it is an unknown call; against nothing
//! it is no answer; with a wrong token it is the executor's refusal.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use tickwork_admin::executor_client::{Answer, ExecutorClient};
use tickwork_executor::{Executor, JobContext, JobOutcome, RunningExecutor};
use tickwork_protocol::{MAX_ACCEPTED_QUERY, TriggerParam};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "accepted-runs-token";
const TIMEOUT: Duration = Duration::from_secs(10);

async fn executor(dir: &std::path::Path) -> RunningExecutor {
    Executor::builder("accepted-runs")
        .access_token(TOKEN)
        .listen("127.0.0.1:0".parse().expect("address"))
        .log_folder(dir)
        .handler("count", |_ctx: JobContext| async move {
            Ok(JobOutcome::success())
        })
        .start()
        .await
        .expect("executor start")
}

fn trigger(log_id: i64) -> TriggerParam {
    TriggerParam {
        job_id: 1,
        executor_handler: "count".into(),
        executor_block_strategy: "SERIAL_EXECUTION".into(),
        log_id,
        log_date_time: tickwork_testkit::now_ms(),
        glue_type: "BEAN".into(),
        broadcast_total: 1,
        ..TriggerParam::default()
    }
}

#[tokio::test]
async fn accepted_answers_from_a_tickwork_executor() {
    let dir = tempfile::tempdir().expect("folder");
    let before = tickwork_testkit::now_ms();
    let exec = executor(dir.path()).await;
    let address = exec.address().to_owned();
    let client = ExecutorClient::new(TOKEN, TIMEOUT);

    for id in [41, 43] {
        let run = client.run(&address, &trigger(id)).await;
        assert!(run.is_success(), "{run:?}");
    }
    // A re-send is accepted without running again.
    let again = client.run(&address, &trigger(41)).await;
    assert_eq!(
        (again.code, again.msg.as_deref()),
        (
            200,
            Some("duplicate run ignored: logId 41 was already accepted")
        )
    );

    let outcome = client.accepted(&address, &[40, 41, 42, 43]).await;
    assert_eq!(outcome.answer(), Answer::Answered, "{outcome:?}");
    assert!(outcome.is_success(), "{outcome:?}");
    let answer = outcome.payload.expect("payload");
    assert_eq!(answer.accepted, [41, 43]);
    assert!(
        (before..=tickwork_testkit::now_ms()).contains(&answer.record_since),
        "{answer:?}"
    );

    // More ids than one call may carry: asked in parts, answered as one.
    let mut many: Vec<i64> = (1_000_000..1_000_000 + MAX_ACCEPTED_QUERY as i64 + 5).collect();
    many.push(43);
    let outcome = client.accepted(&address, &many).await;
    assert!(outcome.is_success(), "{:?}", outcome.msg);
    assert_eq!(outcome.payload.expect("payload").accepted, [43]);

    // A wrong token: the executor answered, and refused.
    let outcome = ExecutorClient::new("wrong", TIMEOUT)
        .accepted(&address, &[41])
        .await;
    assert_eq!(outcome.answer(), Answer::Answered);
    assert_eq!(
        (outcome.code, outcome.msg.as_deref()),
        (500, Some("The access token is wrong."))
    );
    exec.shutdown_and_wait().await.expect("shutdown");
}

/// A server that answers every call as `xxl-job-core`'s embedded server answers a path it
/// does not map.
async fn java_like_executor(stop: CancellationToken) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let addr = listener.local_addr().expect("address");
    let app = axum::Router::new().fallback(|uri: axum::http::Uri| async move {
        let body = format!(
            r#"{{"code":500,"msg":"invalid request, uri-mapping({}) not found."}}"#,
            uri.path()
        );
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html;charset=UTF-8")],
            body,
        )
            .into_response()
    });
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
            .expect("serve");
    });
    addr
}

#[tokio::test]
async fn accepted_tells_an_unknown_call_from_no_answer() {
    let client = ExecutorClient::new(TOKEN, TIMEOUT);
    let stop = CancellationToken::new();
    let java = java_like_executor(stop.clone()).await;
    let outcome = client.accepted(&format!("http://{java}/"), &[1, 2]).await;
    assert_eq!(outcome.answer(), Answer::UnknownCall, "{outcome:?}");
    assert_eq!(
        (outcome.code, outcome.msg.as_deref()),
        (
            500,
            Some("invalid request, uri-mapping(/tickwork/accepted) not found.")
        )
    );
    assert!(outcome.payload.is_none());
    stop.cancel();

    // Nothing listening: no answer, which says nothing about the runs.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let dead = free.local_addr().expect("address");
    drop(free);
    let outcome = client.accepted(&format!("http://{dead}/"), &[1]).await;
    assert_eq!(outcome.answer(), Answer::NoAnswer, "{outcome:?}");
    assert!(!outcome.is_success());
}
