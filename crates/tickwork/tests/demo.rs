//! `tickwork demo` as a user runs it: one process on a fresh folder starts an admin and an
//! executor, its sample jobs run and succeed, and SIGTERM stops it cleanly.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads the demo's announcement: the admin URL and the API token.
fn announcement(child: &mut Child) -> (String, String) {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut url, mut token) = (None, None);
    while url.is_none() || token.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the demo announces itself within 60 s");
        if let Some(rest) = line.trim().strip_prefix("admin:") {
            url = Some(rest.trim().to_owned());
        }
        if let Some((_, rest)) = line.split_once("Bearer ") {
            token = Some(rest.trim_end_matches(')').trim().to_owned());
        }
    }
    (url.unwrap(), token.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_runs_its_sample_jobs_and_stops_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--executor-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("demo"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the tickwork binary starts");
    let mut demo = Demo(child);
    let (url, token) = announcement(&mut demo.0);

    // The echo job (every 5 s) and the shell job (every 10 s) both succeed.
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let body: serde_json::Value = http
            .get(format!("{url}/openapi/v1/runs?state=succeeded&limit=100"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let runs = body["items"].as_array().unwrap();
        let echo = runs
            .iter()
            .any(|r| r["handle_msg"] == "hello from Tickwork");
        let shell = runs.iter().any(|r| r["trigger_type"] == "CRON");
        if echo && shell {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sample jobs did not succeed in time: {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(demo.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = demo.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the demo did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "demo exited with {status}");
}
