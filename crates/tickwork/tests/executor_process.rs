//! `tickwork executor` as a real process: start-up line, registration, runs, SIGTERM drains in
//! both modes, configuration errors, the HTTP handler's allow-list.
//!
//! The admin side is a tiny HTTP/1.1 receiver over a raw socket, and calls to the executor are
//! raw requests too, so that these tests need nothing beyond the binary's own dependencies.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod support;

use support::{DEADLINE, Process, start_listening, tickwork};
use tickwork_protocol::{HandleCallbackParam, RegistryParam, TriggerParam};
use tickwork_testkit::{wait_until, wait_until_sync};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;

/// One request received by the fake admin: `(path, body)`.
type Log = Arc<Mutex<Vec<(String, String)>>>;

/// Reads one HTTP/1.1 request (head and Content-Length body); `None` at end of stream.
async fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, String, String)> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut parts = head.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).await.ok()?;
    Some((method, path, String::from_utf8(body).unwrap()))
}

/// A fake admin answering every request with success and recording it.
async fn fake_admin() -> (SocketAddr, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let record = log.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let record = record.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                while let Some((_method, path, body)) = read_request(&mut reader).await {
                    record.lock().unwrap().push((path, body));
                    let answer = r#"{"code":200,"msg":null}"#;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if reader.get_mut().write_all(reply.as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, log)
}

fn callbacks(log: &Log) -> Vec<HandleCallbackParam> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.ends_with("/api/callback"))
        .flat_map(|(_, body)| {
            tickwork_protocol::decode::<Vec<HandleCallbackParam>>(body.as_bytes()).unwrap()
        })
        .collect()
}

async fn callback(log: &Log, log_id: i64) -> HandleCallbackParam {
    wait_until_sync(format!("callback {log_id}"), DEADLINE, || {
        callbacks(log).into_iter().find(|c| c.log_id == log_id)
    })
    .await
}

fn paths(log: &Log) -> Vec<String> {
    log.lock().unwrap().iter().map(|(p, _)| p.clone()).collect()
}

/// POSTs to the executor and returns the reply body.
async fn post(addr: SocketAddr, path: &str, token: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json;charset=UTF-8\r\nXXL-JOB-ACCESS-TOKEN: {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(DEADLINE, stream.read_to_string(&mut reply))
        .await
        .unwrap()
        .unwrap();
    reply.split_once("\r\n\r\n").unwrap().1.to_owned()
}

fn trigger(job_id: i32, log_id: i64, handler: &str, params: &str, when: i64) -> Vec<u8> {
    tickwork_protocol::encode(&TriggerParam {
        job_id,
        executor_handler: handler.into(),
        executor_params: params.into(),
        executor_block_strategy: "SERIAL_EXECUTION".into(),
        log_id,
        log_date_time: when,
        glue_type: "BEAN".into(),
        broadcast_total: 1,
        ..TriggerParam::default()
    })
}

const SUCCESS: &str = r#"{"code":200,"msg":"Success"}"#;

async fn start(args: &[&str], envs: &[(&str, &str)]) -> Process {
    let mut command = tickwork("executor");
    command.args(args).envs(envs.iter().copied());
    start_listening(command, "executor").await
}

impl Process {
    fn sigterm(&self) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn exit_code(&mut self) -> i32 {
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the executor exits")
            .unwrap();
        status.code().expect("exited normally, not by a signal")
    }
}

fn base_args<'a>(admin: &'a str, logs: &'a Path, mode: &'a str) -> Vec<&'a str> {
    vec![
        "--app",
        "it-app",
        "--admin",
        admin,
        "--token",
        "tok",
        "--listen",
        "127.0.0.1:0",
        "--logs",
        logs.to_str().unwrap(),
        "--shutdown",
        mode,
        "--shutdown-timeout",
        "40s",
    ]
}

/// Two jobs each with one run held by the `sleep` handler and one queued, then SIGTERM.
async fn sigterm_with_runs_in_flight(mode: &str) -> (Log, i32, String) {
    let (admin_addr, log) = fake_admin().await;
    let admin = format!("http://{admin_addr}/xxl-job-admin");
    let dir = tempfile::tempdir().unwrap();
    let mut p = start(&base_args(&admin, dir.path(), mode), &[]).await;
    wait_until_sync("registration", DEADLINE, || {
        paths(&log)
            .contains(&"/xxl-job-admin/api/registry".to_owned())
            .then_some(())
    })
    .await;
    let when = jiff::Timestamp::now().as_millisecond();
    for (job, log_id, params) in [(1, 1, "5s"), (2, 2, "5s"), (1, 3, "10ms"), (2, 4, "10ms")] {
        let body = trigger(job, log_id, "sleep", params, when);
        assert_eq!(post(p.addr, "/run", "tok", &body).await, SUCCESS);
    }
    // Both long runs have started (their logs have a first line); the short ones wait.
    for log_id in [1, 2] {
        let request = format!("{{\"logDateTim\":{when},\"logId\":{log_id},\"fromLineNum\":1}}");
        wait_until(format!("run {log_id} to start"), DEADLINE, || async {
            post(p.addr, "/log", "tok", request.as_bytes())
                .await
                .contains("execute start")
        })
        .await;
    }
    p.sigterm();
    let code = p.exit_code().await;
    let stderr = p.stderr.lock().unwrap().clone();
    (log, code, stderr)
}

fn assert_deregistered_first(log: &Log) {
    let paths = paths(log);
    let remove = paths
        .iter()
        .position(|p| p == "/xxl-job-admin/api/registryRemove")
        .expect("registryRemove sent");
    let first_callback = paths
        .iter()
        .position(|p| p.ends_with("/api/callback"))
        .expect("callbacks sent");
    assert!(remove < first_callback, "{paths:?}");
    let body = &log.lock().unwrap()[remove].1;
    let param: RegistryParam = tickwork_protocol::decode(body.as_bytes()).unwrap();
    assert_eq!(param.registry_key, "it-app");
}

#[tokio::test]
async fn sigterm_wait_all_finishes_queued_runs_and_exits_0() {
    let (log, code, stderr) = sigterm_with_runs_in_flight("wait-all").await;
    assert_eq!(code, 0, "{stderr}");
    assert_deregistered_first(&log);
    for id in 1..=4 {
        assert_eq!(callback(&log, id).await.handle_code, 200, "run {id}");
    }
}

#[tokio::test]
async fn sigterm_wait_running_fails_queued_runs_and_exits_0() {
    let (log, code, stderr) = sigterm_with_runs_in_flight("wait-running").await;
    assert_eq!(code, 0, "{stderr}");
    assert_deregistered_first(&log);
    for id in [1, 2] {
        assert_eq!(callback(&log, id).await.handle_code, 200, "run {id}");
    }
    for id in [3, 4] {
        let cb = callback(&log, id).await;
        assert_eq!(cb.handle_code, 500);
        assert_eq!(
            cb.handle_msg.as_deref(),
            Some("executor is shutting down [job not executed, in the job queue, killed.]")
        );
    }
}

#[tokio::test]
async fn environment_and_file_configure_the_executor() {
    let (admin_addr, log) = fake_admin().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("executor.toml");
    std::fs::write(
        &config,
        format!(
            "app = \"from-file\"\nadmin = [\"http://{admin_addr}\"]\ntoken = \"\"\nlisten = \"127.0.0.1:0\"\nlogs = {:?}\nhttp_allow = [\"127.0.0.1\"]\n",
            dir.path().join("logs")
        ),
    )
    .unwrap();
    let config_arg = config.to_str().unwrap();
    // The environment beats the file.
    let mut p = start(&["--config", config_arg], &[("TICKWORK_APP", "from-env")]).await;
    let registry = wait_until_sync("registration", DEADLINE, || {
        log.lock()
            .unwrap()
            .iter()
            .find(|(path, _)| path == "/api/registry")
            .map(|(_, body)| tickwork_protocol::decode::<RegistryParam>(body.as_bytes()).unwrap())
    })
    .await;
    assert_eq!(registry.registry_key, "from-env");
    assert_eq!(registry.registry_value, format!("http://{}/", p.addr));

    // The HTTP handler calls allowed hosts only.
    let allowed = format!("url: http://{admin_addr}/hello\nmethod: GET");
    post(
        p.addr,
        "/run",
        "",
        &trigger(1, 11, "httpJobHandler", &allowed, 0),
    )
    .await;
    let cb = callback(&log, 11).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (200, Some("http status 200"))
    );
    post(
        p.addr,
        "/run",
        "",
        &trigger(2, 12, "httpJobHandler", "url: http://localhost:1/x", 0),
    )
    .await;
    let cb = callback(&log, 12).await;
    assert_eq!(cb.handle_code, 500);
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("host \"localhost\" is not on this executor's http allow-list")
    );
    // Scripts are off unless enabled.
    let script = tickwork_protocol::encode(&TriggerParam {
        job_id: 3,
        log_id: 13,
        glue_type: "GLUE_SHELL".into(),
        glue_source: "echo hi".into(),
        ..TriggerParam::default()
    });
    let reply = post(p.addr, "/run", "", &script).await;
    assert!(reply.contains("script jobs are not enabled"), "{reply}");

    p.sigterm();
    assert_eq!(p.exit_code().await, 0);
    let stderr = p.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("access token is empty"),
        "warns about the empty token: {stderr}"
    );
}

#[tokio::test]
async fn scripts_run_when_enabled_by_flag() {
    let (admin_addr, log) = fake_admin().await;
    let admin = format!("http://{admin_addr}");
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args(&admin, dir.path(), "wait-all");
    args.push("--enable-scripts");
    let mut p = start(&args, &[]).await;
    let script = tickwork_protocol::encode(&TriggerParam {
        job_id: 3,
        log_id: 21,
        glue_type: "GLUE_SHELL".into(),
        glue_source: "echo \"shard $2 of $3\"\nexit 0\n".into(),
        glue_updatetime: 5,
        broadcast_index: 0,
        broadcast_total: 1,
        ..TriggerParam::default()
    });
    assert_eq!(post(p.addr, "/run", "tok", &script).await, SUCCESS);
    assert_eq!(callback(&log, 21).await.handle_code, 200);
    p.sigterm();
    assert_eq!(p.exit_code().await, 0);
}

#[tokio::test]
async fn configuration_errors_exit_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "app = \"x\"\nlisten_port = 9999\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(["executor", "--config", config.to_str().unwrap()])
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("listen_port"), "{stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(["executor", "--listen", "127.0.0.1:0"])
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("app name is required"));
}

/// Runs `tickwork executor` with `args`, expecting it to refuse to start; its exit code and
/// stderr.
async fn refused(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = tokio::time::timeout(
        DEADLINE,
        Command::new(env!("CARGO_BIN_EXE_tickwork"))
            .arg("executor")
            .args(args)
            .env_clear()
            .envs(envs.iter().copied())
            .output(),
    )
    .await
    .expect("the executor gives up in time")
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn scripts_without_a_token_on_all_interfaces_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().to_str().unwrap();
    let (code, stderr) = refused(
        &[
            "--app",
            "a",
            "--listen",
            "0.0.0.0:0",
            "--logs",
            logs,
            "--enable-scripts",
        ],
        &[],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("scripts are enabled without an access token while listening on 0.0.0.0:0"),
        "{stderr}"
    );
    // The same from the environment (an empty token is no token).
    let (code, stderr) = refused(
        &["--app", "a", "--logs", logs],
        &[("TICKWORK_ENABLE_SCRIPTS", "true"), ("TICKWORK_TOKEN", "")],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("without an access token"), "{stderr}");

    // On loopback only, it starts (with a warning).
    let mut p = start(
        &[
            "--app",
            "a",
            "--listen",
            "127.0.0.1:0",
            "--logs",
            logs,
            "--enable-scripts",
        ],
        &[],
    )
    .await;
    p.sigterm();
    assert_eq!(p.exit_code().await, 0);
    assert!(p.stderr.lock().unwrap().contains("access token is empty"));
}

#[tokio::test]
async fn the_well_known_default_token_is_refused_by_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().to_str().unwrap();
    let args = ["--app", "a", "--listen", "127.0.0.1:0", "--logs", logs];
    let mut with_flag = args.to_vec();
    with_flag.extend(["--token", "default_token"]);
    for (args, envs) in [
        (with_flag.as_slice(), &[][..]),
        (&args[..], &[("TICKWORK_TOKEN", "default_token")][..]),
    ] {
        let (code, stderr) = refused(args, envs).await;
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("\"default_token\" is XXL-JOB's well-known default"),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn half_sent_requests_are_closed_after_the_configured_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("executor.toml");
    std::fs::write(
        &config,
        "app = \"a\"\ntoken = \"tok\"\nlisten = \"127.0.0.1:0\"\nmax_connections = 2\nheader_read_timeout = \"1h\"\n",
    )
    .unwrap();
    let logs = dir.path().join("logs");
    // The flag beats the file's timeout; the file's cap applies.
    let mut p = start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--logs",
            logs.to_str().unwrap(),
            "--header-read-timeout",
            "1s",
        ],
        &[],
    )
    .await;
    let started = tokio::time::Instant::now();
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(b"POST /beat HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        slow.push(s);
    }
    // Both slots are held; the timeout frees them and the call is answered.
    assert_eq!(post(p.addr, "/beat", "tok", b"").await, SUCCESS);
    for mut s in slow {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(DEADLINE, s.read_to_end(&mut rest))
            .await
            .expect("the executor closes a half-sent request");
        assert!(
            read.is_ok() || read.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset)
        );
    }
    assert!(started.elapsed() >= Duration::from_secs(1));
    p.sigterm();
    assert_eq!(p.exit_code().await, 0);

    let (code, stderr) = refused(
        &[
            "--config",
            config.to_str().unwrap(),
            "--header-read-timeout",
            "5ms",
        ],
        &[],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("header read timeout"), "{stderr}");
}
