//! `tickwork admin` as a real process: it refuses XXL-JOB's well-known token, keeps its data
//! folder and files to its own user, names the cause of a database it cannot open without
//! ever showing the password, and its HTTP server closes half-sent requests; its first start
//! shows the generated login once, and its logs to a pipe are plain text.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

mod support;

use support::{DEADLINE, Process, start_listening, tickwork};
use tickwork_testkit::{Backend, server_execute, skip_or_fail, with_database, with_user};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

const PASSWORD: &str = "hunter2-not-to-be-shown";

fn admin(args: &[&str]) -> Command {
    let mut command = tickwork("admin");
    command.args(args);
    command
}

/// Runs an admin that is expected to fail at start; its output.
async fn failed_start(args: &[&str]) -> Output {
    let out = tokio::time::timeout(DEADLINE, admin(args).output())
        .await
        .expect("the admin gives up in time")
        .unwrap();
    assert!(!out.status.success(), "the admin started: {args:?}");
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn start(args: &[&str]) -> Process {
    start_listening(admin(args), "admin").await
}

impl Process {
    async fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().expect("running") as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the admin stops on SIGTERM")
            .unwrap();
        assert!(status.success(), "{}", self.stderr.lock().unwrap());
    }
}

#[tokio::test]
async fn the_well_known_default_token_is_refused_by_the_admin() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let out = failed_start(&[
        "--token",
        "default_token",
        "--data-dir",
        data,
        "--listen",
        "127.0.0.1:0",
    ])
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("\"default_token\" is XXL-JOB's well-known default"),
        "{}",
        text(&out)
    );
    // From the environment too; nothing was created.
    let mut command = admin(&["--data-dir", data, "--listen", "127.0.0.1:0"]);
    command.env("TICKWORK_TOKEN", "default_token");
    let out = command.output().await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!dir.path().join("tickwork.db").exists());
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn data_folder_and_its_files_are_readable_by_the_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let p = start(&[
        "--data-dir",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--admin-password",
        "a-long-enough-password",
    ])
    .await;
    assert_eq!(mode(&data), 0o700);
    for file in [
        "access_token",
        "api_token",
        "tickwork.db",
        "tickwork.db-wal",
        "tickwork.db-shm",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    p.stop().await;
}

/// Asserts that a failed start names `cause` and the URL without its password.
fn assert_names_cause(out: &Output, cause: &str, shown_url: &str) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("cannot open the database"), "{all}");
    assert!(all.contains(cause), "{cause:?} not in {all}");
    assert!(all.contains(shown_url), "{shown_url:?} not in {all}");
    assert!(!all.contains(PASSWORD), "the password was shown: {all}");
}

#[tokio::test]
async fn database_errors_name_the_cause_and_never_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let run = |url: String| {
        let data = data.to_owned();
        async move {
            failed_start(&["--db", &url, "--data-dir", &data, "--listen", "127.0.0.1:0"]).await
        }
    };

    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(format!(
        "postgres://tw:{PASSWORD}@127.0.0.1:{port}/tickwork"
    ))
    .await;
    assert_names_cause(
        &out,
        "connection refused",
        &format!("postgres://tw:***@127.0.0.1:{port}/tickwork"),
    );

    // SQLite: a folder or a file that does not exist (without mode=rwc nothing is created).
    let missing = dir.path().join("nowhere").join("tw.db");
    let out = run(format!("sqlite://{}", missing.display())).await;
    assert_names_cause(&out, "no such folder", "sqlite://");
    let missing = dir.path().join("absent.db");
    let out = run(format!("sqlite://{}", missing.display())).await;
    assert_names_cause(&out, "no such database file", "sqlite://");
    assert!(!missing.exists());

    // PostgreSQL and MariaDB: a database that does not exist.
    for backend in [Backend::Postgres, Backend::MySql] {
        let server = backend.server_url().unwrap();
        if let Err(e) = server_execute(backend, &server, "SELECT 1").await {
            skip_or_fail(backend, &server, &e);
            continue;
        }
        let url = with_database(&server, "tickwork_no_such_database");
        let out = run(url.clone()).await;
        assert_names_cause(&out, "no such database", &url);
        if backend == Backend::Postgres {
            // Trust authentication ignores the password: the database is still missing.
            let url = with_user(&url, "postgres", PASSWORD);
            let out = run(url).await;
            assert_names_cause(&out, "no such database", "postgres://postgres:***@");
        } else {
            // root has no password: a wrong one is refused.
            let url = with_user(&server, "root", PASSWORD);
            let out = run(url).await;
            assert_names_cause(&out, "authentication failed", "mysql://root:***@");
        }
    }
}

/// A connection that sent part of a request head and then nothing more.
async fn half_sent(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n")
        .await
        .unwrap();
    s
}

async fn healthz(addr: SocketAddr) -> String {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).await.unwrap();
        reply
    };
    tokio::time::timeout(DEADLINE, exchange)
        .await
        .expect("the admin answers /healthz")
}

#[tokio::test]
async fn half_sent_requests_are_closed_and_do_not_block_the_admin() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admin.toml");
    // The file sets the cap, a flag the timeout.
    std::fs::write(
        &config,
        "[http]\nmax_connections = 4\nheader_read_timeout_ms = 60000\n",
    )
    .unwrap();
    let p = start(&[
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--http-header-read-timeout-ms",
        "1000",
    ])
    .await;
    let started = tokio::time::Instant::now();
    let mut slow = Vec::new();
    for _ in 0..4 {
        slow.push(half_sent(p.addr).await);
    }
    // Every slot is held by a slow client; the timeout frees them, and the answer comes.
    assert!(healthz(p.addr).await.starts_with("HTTP/1.1 200"));
    for mut s in slow {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(DEADLINE, s.read_to_end(&mut rest))
            .await
            .expect("the admin closes a half-sent request");
        assert!(
            read.is_ok() || read.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset)
        );
        assert!(!String::from_utf8_lossy(&rest).contains(" 200 "));
    }
    assert!(started.elapsed() >= Duration::from_millis(1000));
    p.stop().await;

    // A bad value is an input error.
    let out = failed_start(&[
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
        "--http-max-connections",
        "0",
    ])
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("http.max_connections"),
        "{}",
        text(&out)
    );
}

/// The first start on an empty database creates `admin` with a generated password and shows
/// it once on stderr with the console's URL; logs to a pipe carry no colour codes.
#[tokio::test]
async fn first_start_shows_the_login_once_and_logs_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let args = ["--listen", "127.0.0.1:0", "--data-dir", data];
    let admin = start(&args).await;
    // Written before the address line, read from the pipe by another task.
    let first = stderr_once(&admin, "shown only this once").await;
    assert!(first.contains("Login:    admin"), "{first}");
    assert!(first.contains("Password: "), "{first}");
    assert!(
        first.contains(&format!("Console:  http://{}/", admin.addr)),
        "{first}"
    );
    assert!(first.contains("database ready"), "{first}");
    assert!(!first.contains('\u{1b}'), "colour codes in {first}");
    admin.stop().await;

    let again = start(&args).await;
    let second = stderr_once(&again, "console:").await;
    assert!(!second.contains("Password: "), "shown once: {second}");
    assert!(
        second.contains(&format!("console: http://{}/", again.addr)),
        "{second}"
    );
    again.stop().await;
}

/// The admin's stderr once it holds `text`.
async fn stderr_once(admin: &Process, text: &str) -> String {
    tickwork_testkit::wait_until_sync(format!("{text:?} on stderr"), DEADLINE, || {
        let err = admin.stderr.lock().unwrap().clone();
        err.contains(text).then_some(err)
    })
    .await
}
