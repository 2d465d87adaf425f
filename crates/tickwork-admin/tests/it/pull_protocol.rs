//! The admin's side of a pull connection, driven frame by frame by a hand-made executor: what a
//! hello must hold, and the reconciliation when an executor reconnects without runs it was
//! sent (each ended lost, once).

use crate::support;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{Api, Backend, InProcessAdmin, TestDb};
use tickwork_protocol::pull::Frame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn dial(admin: &InProcessAdmin, token: &str) -> Socket {
    let url = format!("{}/api/pull", admin.address.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request
        .headers_mut()
        .insert("XXL-JOB-ACCESS-TOKEN", token.parse().expect("header"));
    tokio_tungstenite::connect_async(request)
        .await
        .expect("the upgrade")
        .0
}

async fn send(socket: &mut Socket, frame: &Frame) {
    socket
        .send(Message::text(frame.to_text()))
        .await
        .expect("send");
}

/// The next frame, or the close reason as an error.
async fn next(socket: &mut Socket) -> Result<Frame, String> {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(30), socket.next())
            .await
            .expect("a message in time");
        match message {
            Some(Ok(Message::Text(text))) => {
                return Ok(Frame::from_text(text.as_str()).expect("a frame"));
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(frame
                    .map(|f| f.reason.as_str().to_owned())
                    .unwrap_or_default());
            }
            Some(Ok(_)) => continue,
            other => return Err(format!("{other:?}")),
        }
    }
}

fn hello(instance: &str, credits: u32, running: Vec<i64>) -> Frame {
    Frame::Hello {
        app: "hand".to_owned(),
        instance: instance.to_owned(),
        credits,
        running,
    }
}

/// Says hello and reads the welcome.
async fn connect(admin: &InProcessAdmin, token: &str, hello: Frame) -> Socket {
    let mut socket = dial(admin, token).await;
    send(&mut socket, &hello).await;
    match next(&mut socket).await {
        Ok(Frame::Welcome { address, .. }) => assert_eq!(address, "pull://hand-1"),
        other => panic!("no welcome: {other:?}"),
    }
    socket
}

/// Answers the next `/run` with success and returns its run id; beats are skipped.
async fn take_run(socket: &mut Socket) -> i64 {
    loop {
        match next(socket).await.expect("a frame") {
            Frame::Call { id, path, body } if path == "/run" => {
                let envelope = json!({ "code": 200, "msg": null });
                send(socket, &Frame::Answer { id, body: envelope }).await;
                return body["logId"].as_i64().expect("logId");
            }
            Frame::Call { id, .. } => {
                send(
                    socket,
                    &Frame::Answer {
                        id,
                        body: json!({ "code": 200 }),
                    },
                )
                .await;
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_hello_is_checked_and_a_bad_one_registers_nothing() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "node-a", "").await;
    let api = Api::new(&admin.address);
    let group = api.group("hand").await;
    let cases: [(Frame, &str); 4] = [
        (
            Frame::Beat { running: vec![] },
            "the first frame must be a hello",
        ),
        (hello("a/b", 1, vec![]), "instance"),
        (hello("", 1, vec![]), "instance"),
        (
            Frame::Hello {
                app: " ".to_owned(),
                instance: "ok".to_owned(),
                credits: 1,
                running: vec![],
            },
            "app",
        ),
    ];
    for (frame, says) in cases {
        let mut socket = dial(&admin, &db.token).await;
        send(&mut socket, &frame).await;
        let reason = next(&mut socket).await.expect_err("closed");
        assert!(reason.contains(says), "{frame:?}: {reason:?}");
    }
    let (_, body) = api.call("GET", &format!("groups/{group}"), None).await;
    assert_eq!(body["live_addresses"], json!([]), "{body}");
    admin.shutdown().await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_pull_executor_that_no_longer_holds_a_run_has_it_ended_lost_once() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "node-a", "").await;
    let api = Api::new(&admin.address);
    let group = api.group("hand").await;
    let job: Value = api
        .post(
            "jobs",
            json!({ "group_id": group, "schedule_type": "NONE", "handler": "h" }),
        )
        .await;
    let job = job["id"].as_i64().expect("job id");

    let mut socket = connect(&admin, &db.token, hello("hand-1", 2, vec![])).await;
    support::registered(admin.store.as_ref(), "pull://hand-1").await;
    let first = api.trigger(job).await;
    assert_eq!(take_run(&mut socket).await, first);
    let second = api.trigger(job).await;
    assert_eq!(take_run(&mut socket).await, second);
    for run in [first, second] {
        api.run_reaches(run, "dispatched").await;
    }
    drop(socket);

    // Back with the second only: the first ended without a result.
    let socket = connect(&admin, &db.token, hello("hand-1", 1, vec![second])).await;
    let lost = api.run_reaches(first, "lost").await;
    assert!(
        lost["handle_msg"]
            .as_str()
            .unwrap_or("")
            .contains("reconnected without"),
        "{lost}"
    );
    assert_eq!(api.run(second).await["state"], "dispatched");
    drop(socket);

    // Back with none: the second goes too; the first is not ended again.
    let socket = connect(&admin, &db.token, hello("hand-1", 2, vec![])).await;
    api.run_reaches(second, "lost").await;
    assert_eq!(api.run(first).await["handle_msg"], lost["handle_msg"]);
    drop(socket);
    admin.shutdown().await;
    db.drop_database().await;
}
