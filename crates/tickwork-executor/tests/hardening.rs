//! The executor's defences: slow or half-sent requests cannot hold its HTTP server, scripts
//! never run for anyone without a token, XXL-JOB's well-known token is refused, and run logs
//! and script files are readable by the executor's user only.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection that sent part of a request head and then nothing more.
async fn half_sent(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /beat HTTP/1.1\r\nHost: executor\r\n")
        .await
        .unwrap();
    s
}

/// `/beat` on a fresh connection (closed after the answer, so it holds no slot afterwards).
async fn beat(addr: std::net::SocketAddr) -> String {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /beat HTTP/1.1\r\nHost: executor\r\nXXL-JOB-ACCESS-TOKEN: {TOKEN}\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).await.unwrap();
        reply
    };
    let reply = tokio::time::timeout(DEADLINE, exchange)
        .await
        .expect("the executor answers /beat");
    reply.split_once("\r\n\r\n").unwrap().1.to_owned()
}

const SUCCESS: &str = r#"{"code":200,"msg":"Success"}"#;

/// Reads until the executor closes the connection; fails the test if it stays open.
async fn closed_by_server(mut s: TcpStream) {
    let mut rest = Vec::new();
    match tokio::time::timeout(DEADLINE, s.read_to_end(&mut rest)).await {
        Ok(Ok(_)) => assert!(
            !String::from_utf8_lossy(&rest).contains("Success"),
            "a half-sent request was answered"
        ),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(Err(e)) => panic!("reading the slow connection failed: {e}"),
        Err(_) => panic!("the executor kept a half-sent request open"),
    }
}

#[tokio::test]
async fn half_sent_requests_are_closed_and_do_not_block_the_executor() {
    let timeout = Duration::from_millis(1000);
    let h = Harness::start_with(|b| b.header_read_timeout(timeout).max_connections(4)).await;
    let addr = h.executor.local_addr();
    let started = tokio::time::Instant::now();
    let mut slow = Vec::new();
    for _ in 0..3 {
        slow.push(half_sent(addr).await);
    }
    // Below the cap the slow clients delay nobody.
    assert_eq!(beat(addr).await, SUCCESS);
    // At the cap a new call waits for a slot, which the timeout frees.
    slow.push(half_sent(addr).await);
    assert_eq!(beat(addr).await, SUCCESS);
    for s in slow {
        closed_by_server(s).await;
    }
    assert!(started.elapsed() >= timeout, "closed before the timeout");
    h.executor.shutdown_and_wait().await.unwrap();
}

#[tokio::test]
async fn scripts_without_a_token_are_refused_unless_listening_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let err = test_builder("", dir.path())
        .access_token("")
        .scripts_enabled(true)
        .listen("0.0.0.0:0".parse().unwrap())
        .start()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("scripts are enabled without an access token while listening on 0.0.0.0:0"),
        "{err}"
    );
    // Without scripts, or with a token, or on loopback only, it starts.
    for builder in [
        test_builder("", dir.path())
            .access_token("")
            .listen("0.0.0.0:0".parse().unwrap()),
        test_builder("", dir.path())
            .scripts_enabled(true)
            .listen("0.0.0.0:0".parse().unwrap()),
        test_builder("", dir.path())
            .access_token("")
            .scripts_enabled(true),
    ] {
        builder
            .start()
            .await
            .unwrap()
            .shutdown_and_wait()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_well_known_default_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for token in ["default_token", " default_token "] {
        let err = test_builder("", dir.path())
            .access_token(token)
            .start()
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("\"default_token\" is XXL-JOB's well-known default"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn bad_http_limits_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = test_builder("", dir.path())
        .header_read_timeout(Duration::from_millis(1))
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("header read timeout"), "{err}");
    let err = test_builder("", dir.path())
        .max_connections(0)
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("max connections"), "{err}");
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn run_logs_and_script_files_are_readable_by_the_owner_only() {
    let admin = Admin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("executor-logs");
    let executor = test_builder(&admin.url(), &root)
        .scripts_enabled(true)
        .start()
        .await
        .unwrap();
    let client = Client::new(executor.local_addr(), Some(TOKEN));
    let t = script_trigger(8, 801, "GLUE_SHELL", "echo secret output", 1000);
    client.run_ok(&t).await;
    assert_eq!(admin.callback(801).await.handle_code, 200);
    assert_eq!(mode(&root), 0o700);
    let glue = root.join("gluesource");
    assert_eq!(mode(&glue), 0o700);
    assert_eq!(mode(&glue.join("8_1000.sh")), 0o600);
    let day = jiff::Timestamp::from_millisecond(t["logDateTime"].as_i64().unwrap())
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%Y-%m-%d")
        .to_string();
    assert_eq!(mode(&root.join(&day)), 0o700);
    assert_eq!(mode(&root.join(&day).join("801.log")), 0o600);
    executor.shutdown_and_wait().await.unwrap();
}
