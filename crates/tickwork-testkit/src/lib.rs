//! Test support shared by Tickwork's suites: a fresh database per test on every backend
//! ([`db`]), waiting until a condition holds ([`wait`]), child processes in process groups of
//! their own ([`process`]), database outages ([`outage`]), a webhook receiver ([`webhook`]) and
//! the wall clock in epoch milliseconds ([`clock`]), answers held to an OpenAPI document
//! ([`openapi`]), and Python packages a test drives ([`python_module`]).
//!
//! Test code only: crates use it as a dev-dependency, except the crates that are test suites as
//! a whole (`tickwork-it`, `tickwork-console-tests`), whose harness is their library
//! (checked by `only_test_suites_depend_on_testkit`).

use std::time::Duration;

pub mod clock;
pub mod db;
pub mod openapi;
pub mod outage;
pub mod process;
pub mod wait;
pub mod webhook;

pub use clock::now_ms;
pub use db::{
    Backend, MYSQL_DEFAULT, POSTGRES_DEFAULT, TestDb, server_execute, skip_or_fail, with_database,
    with_user,
};
pub use outage::Outage;
pub use process::Process;
pub use wait::{Wait, wait_until, wait_until_sync};
pub use webhook::{Received, Receiver};

/// Whether Python 3 can import `module` (installed with `pip install {package}`). When it
/// cannot, the test fails under `CI` (a missing package must not pass as a skip there) and
/// otherwise prints a banner that is hard to miss, and the caller skips the test.
pub fn python_module(module: &str, package: &str, test: &str) -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let what = format!("Python's {module} is not installed (pip install {package})");
        if std::env::var_os("CI").is_some() {
            panic!("{test}: {what} (CI is set, so this is a failure)");
        }
        let bar = "!".repeat(78);
        let banner = format!("\n{bar}\nSKIPPED {test}: {what}\n{bar}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), banner.as_bytes());
    }
    found
}

/// What a wait of this crate reports when it gives up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The awaited condition did not hold by the deadline; `last` is what the last check saw,
    /// when it said.
    #[error("timed out after {deadline:?} waiting for {what}{}", seen(last))]
    TimedOut {
        what: String,
        deadline: Duration,
        last: Option<String>,
    },
}

fn seen(last: &Option<String>) -> String {
    last.as_ref()
        .map(|l| format!("; last seen: {l}"))
        .unwrap_or_default()
}
