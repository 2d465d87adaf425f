//! `tickwork demo` as a user runs it: one process on a fresh folder starts an admin and an
//! executor, announces the console's login with its URL, starts its sample jobs once the
//! executor has registered, they run and succeed, SIGTERM stops it cleanly, and its logs in a
//! file hold no colour codes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The demo's process and the file its logs go to.
struct Demo {
    child: Child,
    logs: std::path::PathBuf,
}

impl Drop for Demo {
    /// Stops the demo; when the test failed, shows how the demo had ended and what it
    /// logged, which the failure alone does not say (a refused login is the demo's story).
    fn drop(&mut self) {
        let ended = self.child.try_wait();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let ended = match ended {
                Ok(Some(status)) => format!("had ended ({status})"),
                Ok(None) => "was running".to_owned(),
                Err(e) => format!("could not be asked ({e})"),
            };
            let logged = std::fs::read_to_string(&self.logs).unwrap_or_else(|e| e.to_string());
            eprintln!("the demo {ended} when the test failed; its logs:\n{logged}");
        }
    }
}

/// What the demo announces on stdout: the admin URL, the API token, the console's login line
/// and the executor's address.
struct Announcement {
    url: String,
    token: String,
    console: String,
    executor: String,
}

/// Reads the demo's announcement.
fn announcement(child: &mut Child) -> Announcement {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut url, mut token, mut console, mut executor) = (None, None, None, None);
    while url.is_none() || token.is_none() || console.is_none() || executor.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the demo announces itself within 60 s");
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("admin:") {
            url = Some(rest.trim().to_owned());
        }
        if let Some(rest) = line.strip_prefix("console:") {
            console = Some(rest.trim().to_owned());
        }
        if let Some(rest) = line.strip_prefix("executor:") {
            executor = rest.split_whitespace().next().map(str::to_owned);
        }
        if let Some((_, rest)) = line.split_once("Bearer ") {
            token = Some(rest.trim_end_matches(')').trim().to_owned());
        }
    }
    Announcement {
        url: url.unwrap(),
        token: token.unwrap(),
        console: console.unwrap(),
        executor: executor.unwrap(),
    }
}

/// Signs in to the console at `url` as a browser does; whether the login was accepted.
async fn console_login(url: &str, user: &str, password: &str) -> bool {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let form = http.get(format!("{url}/login")).send().await.unwrap();
    let csrf = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("tw_login_csrf="))
        .and_then(|c| c.split(';').next())
        .expect("the login form's csrf cookie")
        .to_owned();
    let answer = http
        .post(format!("{url}/login"))
        .header("cookie", format!("tw_login_csrf={csrf}"))
        .header("origin", url)
        .header("content-type", "application/x-www-form-urlencoded")
        // Every value here is letters and digits: nothing to escape.
        .body(format!(
            "_csrf={csrf}&username={user}&password={password}&next=%2F"
        ))
        .send()
        .await
        .unwrap();
    answer.status() == 303
        && answer
            .headers()
            .get_all("set-cookie")
            .iter()
            .any(|c| c.to_str().unwrap_or("").starts_with("tw_session="))
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_runs_its_sample_jobs_and_stops_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("demo.log");
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
        .stderr(std::fs::File::create(&logs).unwrap())
        .spawn()
        .expect("the tickwork binary starts");
    let mut demo = Demo {
        child,
        logs: logs.clone(),
    };
    let Announcement {
        url,
        token,
        console,
        executor,
    } = announcement(&mut demo.child);

    // The first start's generated password is announced with the console's URL, and works.
    let password = console
        .split_once("password ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no password in the console line {console:?}"));
    assert!(console.contains("user admin"), "{console}");
    assert!(console_login(&url, "admin", password).await, "{console}");

    // The sample jobs were started once the executor had registered: it is a live instance
    // of the demo's group by the time the demo says it runs.
    let http = reqwest::Client::new();
    let groups = get_json(&http, &format!("{url}/openapi/v1/groups"), &token).await;
    let demo_group = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["app_name"] == "tickwork-demo")
        .unwrap_or_else(|| panic!("no demo group: {groups}"));
    let bare = |a: &str| a.trim_end_matches('/').to_owned();
    assert!(
        demo_group["live_addresses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| bare(a.as_str().unwrap()) == bare(&executor)),
        "{executor} not live in {demo_group}"
    );

    // The echo job (every 5 s) and the shell job (every 10 s) both succeed.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let body = get_json(
            &http,
            &format!("{url}/openapi/v1/runs?state=succeeded&limit=100"),
            &token,
        )
        .await;
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
        nix::unistd::Pid::from_raw(demo.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the demo did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "demo exited with {status}");

    // Logs written to a file are plain text: no colour codes.
    let logged = std::fs::read_to_string(&logs).unwrap();
    assert!(logged.contains("database ready"), "{logged}");
    assert!(!logged.contains('\u{1b}'), "colour codes in {logged}");
}

/// `GET url` with the API token, the answer's JSON.
async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> serde_json::Value {
    http.get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}
