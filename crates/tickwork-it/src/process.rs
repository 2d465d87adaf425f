//! Child processes of the `tickwork` binary: started with their stderr in a log file, their
//! listening address read from the line they print on stdout, signalled, and always killed on
//! drop.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a process may take to print its listening line (the admin runs migrations first).
const START_DEADLINE: Duration = Duration::from_secs(60);

/// The `tickwork` binary of the build the tests belong to: `target/<profile>/tickwork`, next to
/// the `deps` folder that holds the test executable.
pub fn tickwork_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let bin = profile_dir.join("tickwork");
    assert!(
        bin.is_file(),
        "the tickwork binary is missing at {}: build it first with `cargo build -p tickwork` \
         (same profile as the tests)",
        bin.display()
    );
    bin
}

/// A running (or ended) `tickwork` process.
pub struct Proc {
    pub name: String,
    child: Child,
    log: PathBuf,
    /// Where it listens, from its start-up line.
    pub addr: SocketAddr,
}

impl Proc {
    /// Starts `tickwork <args>` and waits for its `... listening on IP:PORT` line. Panics with
    /// the process's log when it ends or stays silent instead.
    pub async fn start(name: &str, args: &[OsString], log: PathBuf) -> Proc {
        let stderr = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let mut cmd = Command::new(tickwork_bin());
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .env("NO_COLOR", "1")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or("info".into()),
            );
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe and touches nothing of the parent. It makes the
            // kernel kill the child if the test dies without running its destructors (a
            // harness timeout), so no process outlives its test.
            unsafe {
                cmd.pre_exec(|| {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
                });
            }
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = tokio::sync::oneshot::channel();
        // A plain thread: it keeps reading (and discarding) stdout so the child never blocks
        // on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some((_, addr)) = line.split_once(" listening on ")
                    && let Ok(addr) = addr.trim().parse::<SocketAddr>()
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = match tokio::time::timeout(START_DEADLINE, rx).await {
            Ok(Ok(addr)) => addr,
            outcome => {
                let why = if outcome.is_ok() {
                    "it ended"
                } else {
                    "it printed no listening line in time"
                };
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "{name} did not start ({why}; {status:?}); its log:\n{}",
                    read_log(&log)
                );
            }
        };
        Proc {
            name: name.to_owned(),
            child,
            log,
            addr,
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Sends `signal`, unless the process has already ended.
    pub fn signal(&mut self, signal: Signal) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill(self.pid(), signal);
        }
    }

    /// Waits for the process to end; `None` when it is still running after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The whole stderr log so far.
    pub fn log(&self) -> String {
        read_log(&self.log)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_log(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("(log {} unreadable: {e})", path.display()),
    }
}
