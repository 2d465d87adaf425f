//! `tickwork` child processes: the binary of the build the tests belong to, started as a
//! testkit [`Process`] (own process group, output kept and written to a log file, killed on
//! drop) until it prints the address it listens on.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tickwork_testkit::Process;

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

/// Starts `tickwork <args>` as `name`, its output also written to `log`, and waits for its
/// `... listening on IP:PORT` line; the process and that address. Panics with the process's
/// output when it ends or stays silent instead.
///
/// The process prints nothing of its own when a test fails: the [`crate::Cluster`] shows the
/// logs of all its processes together.
pub async fn start_tickwork(name: &str, args: &[OsString], log: PathBuf) -> (Process, SocketAddr) {
    let mut cmd = Command::new(tickwork_bin());
    cmd.args(args);
    start_tickwork_until(name, cmd, log, "its listening line", |line| {
        let (_, addr) = line.split_once(" listening on ")?;
        addr.trim().parse::<SocketAddr>().ok()
    })
    .await
}

/// As [`start_tickwork`] for a `tickwork` command made by the caller (its arguments and
/// environment), waiting for the first line `ready` makes something of (`what` names it in the
/// panic).
pub async fn start_tickwork_until<T>(
    name: &str,
    mut cmd: Command,
    log: PathBuf,
    what: &str,
    ready: impl FnMut(&str) -> Option<T>,
) -> (Process, T) {
    cmd.env("NO_COLOR", "1").env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or("info".into()),
    );
    let process = Process::builder(name, cmd)
        .log(log)
        .tail_on_panic(0)
        .start();
    let found = process.wait_for_line(what, START_DEADLINE, ready).await;
    (process, found)
}
