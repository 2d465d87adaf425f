//! The server loop over real sockets: half-sent requests are closed after the header-read
//! timeout, the connection cap holds new connections until a slot frees (or the connection
//! idle the longest makes room, once it has been idle a while), handlers see the client's
//! address, and a stop lets requests in flight finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::routing;
use tickwork_serve::{Limits, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Generous: the machine running the tests may be loaded.
const DEADLINE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

async fn held(State(gate): State<Arc<Gate>>) -> &'static str {
    gate.entered.notify_one();
    gate.release.notified().await;
    "done"
}

struct Server {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
    gate: Arc<Gate>,
}

/// A server with these limits; a connection idle for 100 ms makes room at the cap, so that
/// the tests of making room run fast.
async fn start(header_read_timeout: Duration, max_connections: usize) -> Server {
    start_with(Limits {
        header_read_timeout,
        max_connections,
        idle_before_close: Duration::from_millis(100),
    })
    .await
}

async fn start_with(limits: Limits) -> Server {
    let gate = Arc::new(Gate::default());
    let router = Router::new()
        .route("/", routing::get(|| async { "ok" }))
        .route(
            "/ip",
            routing::get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                peer.ip().to_string()
            }),
        )
        .route("/held", routing::get(held))
        .with_state(Arc::clone(&gate));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(listener, router, limits, stop.clone()));
    Server {
        addr,
        stop,
        task,
        gate,
    }
}

/// A GET on a fresh connection; the body, or `None` when nothing came within `wait`.
async fn get_within(addr: SocketAddr, path: &str, wait: Duration) -> Option<String> {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        s.write_all(head.as_bytes()).await.unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).await.unwrap();
        reply
    };
    let reply = tokio::time::timeout(wait, exchange).await.ok()?;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    Some(reply.split_once("\r\n\r\n").unwrap().1.to_owned())
}

async fn get(addr: SocketAddr, path: &str) -> String {
    get_within(addr, path, DEADLINE)
        .await
        .unwrap_or_else(|| panic!("no answer to GET {path}"))
}

/// A connection that sent one keep-alive request and read its whole answer, left open.
async fn kept_alive(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ask_again(&mut s).await, "ok");
    s
}

/// `GET /` on an open keep-alive connection: the body of the answer, read by its length.
async fn ask_again(s: &mut TcpStream) -> String {
    let exchange = async {
        s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while !reply.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut byte).await.unwrap(), 1, "closed mid-answer");
            reply.push(byte[0]);
        }
        let head = String::from_utf8(reply).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            .expect("a content length")
            .parse()
            .unwrap();
        let mut body = vec![0u8; length];
        s.read_exact(&mut body).await.unwrap();
        String::from_utf8(body).unwrap()
    };
    tokio::time::timeout(DEADLINE, exchange)
        .await
        .expect("an answer on the kept-alive connection")
}

/// A connection that sent part of a request head and then nothing more.
async fn half_sent(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n")
        .await
        .unwrap();
    s
}

/// Reads until the server closes the connection; fails the test if it stays open.
async fn closed_by_server(mut s: TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    match tokio::time::timeout(DEADLINE, s.read_to_end(&mut rest)).await {
        Ok(Ok(_)) => rest,
        // A reset is a close too.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => rest,
        Ok(Err(e)) => panic!("reading the slow connection failed: {e}"),
        Err(_) => panic!("the server kept a half-sent request open"),
    }
}

#[tokio::test]
async fn half_sent_request_is_closed_after_the_header_read_timeout() {
    let timeout = Duration::from_millis(300);
    let server = start(timeout, 16).await;
    let started = tokio::time::Instant::now();
    let slow = half_sent(server.addr).await;
    let rest = closed_by_server(slow).await;
    assert!(started.elapsed() >= timeout, "closed before the timeout");
    assert!(
        !String::from_utf8_lossy(&rest).contains(" 200 "),
        "a half-sent request got an answer"
    );
    // An idle connection (nothing sent at all) is closed the same way.
    let idle = TcpStream::connect(server.addr).await.unwrap();
    closed_by_server(idle).await;
    // And the server still answers.
    assert_eq!(get(server.addr, "/").await, "ok");
}

#[tokio::test]
async fn slow_connections_below_the_cap_do_not_delay_answers() {
    // A timeout long enough that the slow connections stay open throughout.
    let server = start(Duration::from_secs(600), 8).await;
    let mut slow = Vec::new();
    for _ in 0..7 {
        slow.push(half_sent(server.addr).await);
    }
    assert_eq!(get(server.addr, "/").await, "ok");
    assert_eq!(get(server.addr, "/ip").await, "127.0.0.1");
}

#[tokio::test]
async fn at_the_cap_new_connections_wait_for_a_free_slot() {
    let server = start(Duration::from_secs(600), 3).await;
    let mut slow = Vec::new();
    for _ in 0..3 {
        slow.push(half_sent(server.addr).await);
    }
    // Every slot is taken by a slow client: a new request is not served...
    let waiting = tokio::spawn(get_within(server.addr, "/", DEADLINE));
    assert_eq!(
        get_within(server.addr, "/", Duration::from_millis(300)).await,
        None,
        "served past the connection cap"
    );
    // ...until one of them goes away.
    drop(slow.pop());
    assert_eq!(waiting.await.unwrap().as_deref(), Some("ok"));
}

/// A burst of callbacks from one executor left hundreds of kept-alive connections open: at
/// the cap an operator's request waited up to the header-read timeout (30 s) for a slot.
#[tokio::test]
async fn idle_keep_alive_connections_at_the_cap_make_room_for_a_new_one() {
    let server = start(Duration::from_secs(600), 3).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(kept_alive(server.addr).await);
    }
    // Served long before the idle connections' timeout...
    assert_eq!(get(server.addr, "/").await, "ok");
    // ...in the slot of the one idle the longest, which the server closed.
    let mut idle = idle.into_iter();
    closed_by_server(idle.next().unwrap()).await;
    // The others stay open and usable.
    for mut s in idle {
        assert_eq!(ask_again(&mut s).await, "ok");
    }
}

/// At the cap the server closed the connection idle the longest even when it had only just
/// been answered: a client sending its requests one after another on one connection (a test's
/// stop of 200 jobs, while an executor's callbacks held the other slots) saw its next POST end
/// unanswered.
#[tokio::test]
async fn at_the_cap_a_client_between_two_requests_keeps_its_connection() {
    let server = start_with(Limits {
        header_read_timeout: Duration::from_secs(600),
        max_connections: 2,
        idle_before_close: Duration::from_secs(600),
    })
    .await;
    let entered = server.gate.entered.notified();
    let in_flight = tokio::spawn(get_within(server.addr, "/held", DEADLINE));
    entered.await;
    let mut client = kept_alive(server.addr).await;
    // A new connection at the cap, while the only idle one has just been answered: it waits.
    let mut waiting = tokio::spawn(get_within(server.addr, "/", DEADLINE));
    let served = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
    assert!(
        served.is_err(),
        "served at the cap by closing a connection just answered"
    );
    // The client goes on with its next requests on the same connection...
    for _ in 0..3 {
        assert_eq!(ask_again(&mut client).await, "ok");
    }
    // ...and the waiting one is served once a slot frees.
    drop(client);
    assert_eq!(waiting.await.unwrap().as_deref(), Some("ok"));
    server.gate.release.notify_one();
    assert_eq!(in_flight.await.unwrap().as_deref(), Some("done"));
}

#[tokio::test]
async fn at_the_cap_a_request_in_flight_is_not_cut_to_make_room() {
    let server = start(Duration::from_secs(600), 2).await;
    let entered = server.gate.entered.notified();
    let in_flight = tokio::spawn(get_within(server.addr, "/held", DEADLINE));
    entered.await;
    // A connection that has not sent its first request is not idle either.
    let fresh = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(
        get_within(server.addr, "/", Duration::from_millis(300)).await,
        None,
        "served past the connection cap"
    );
    let waiting = tokio::spawn(get_within(server.addr, "/", DEADLINE));
    server.gate.release.notify_one();
    assert_eq!(in_flight.await.unwrap().as_deref(), Some("done"));
    assert_eq!(waiting.await.unwrap().as_deref(), Some("ok"));
    drop(fresh);
}

#[tokio::test]
async fn at_the_cap_slow_connections_time_out_and_answers_resume() {
    let server = start(Duration::from_millis(500), 2).await;
    let slow = [half_sent(server.addr).await, half_sent(server.addr).await];
    assert_eq!(get(server.addr, "/").await, "ok");
    for s in slow {
        closed_by_server(s).await;
    }
}

#[tokio::test]
async fn stop_finishes_requests_in_flight_then_returns() {
    let server = start(Duration::from_secs(600), 8).await;
    let entered = server.gate.entered.notified();
    let in_flight = tokio::spawn(get_within(server.addr, "/held", DEADLINE));
    entered.await;
    let idle = TcpStream::connect(server.addr).await.unwrap();
    server.stop.cancel();
    // The idle connection is closed at once, the request in flight is not cut.
    closed_by_server(idle).await;
    assert!(!in_flight.is_finished());
    server.gate.release.notify_one();
    assert_eq!(in_flight.await.unwrap().as_deref(), Some("done"));
    tokio::time::timeout(DEADLINE, server.task)
        .await
        .expect("serve returns after the stop")
        .unwrap()
        .unwrap();
    assert!(TcpStream::connect(server.addr).await.is_err());
}
