//! What the process tests share: `tickwork <command>` as a child process with a clean
//! environment, started until it prints the address it listens on, its stderr kept for the
//! assertions.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a process may take to start, answer or exit on a loaded machine.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

/// `tickwork <command>` with no stray `TICKWORK_*` settings from the environment running the
/// tests, and no stdin.
pub(crate) fn tickwork(command: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tickwork"));
    c.arg(command)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// A running process, the address it listens on and its stderr so far.
pub(crate) struct Process {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: Arc<Mutex<String>>,
}

/// Starts `command` and waits for its line `<what> listening on <address>`.
pub(crate) async fn start_listening(mut command: Command, what: &str) -> Process {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tickwork binary starts");
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = err_lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    let prefix = format!("{what} listening on ");
    let mut out_lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = out_lines.next_line().await.unwrap() {
            if let Some(addr) = line.strip_prefix(prefix.as_str()) {
                return addr.trim().parse::<SocketAddr>().unwrap();
            }
        }
        panic!(
            "the {what} exited before listening: {}",
            stderr.lock().unwrap()
        );
    })
    .await
    .unwrap_or_else(|_| panic!("the {what} prints its address"));
    // Keep draining stdout so the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = out_lines.next_line().await {} });
    Process {
        child,
        addr,
        stderr,
    }
}
