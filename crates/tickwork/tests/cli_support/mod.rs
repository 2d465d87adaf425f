//! What the command-line tests share: a `tickwork admin` process on SQLite in a folder of the
//! test, `tickwork <args>` run against it, and groups made through the client.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

pub(crate) const TOKEN: &str = "cli-test-api-token";

pub(crate) struct Admin {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Admin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start_admin(dir: &Path) -> Admin {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(["admin", "--listen", "127.0.0.1:0", "--token", "exec-token"])
        .args(["--api-token", TOKEN])
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the tickwork binary starts");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("admin listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Admin {
        child,
        url: format!("http://{addr}"),
    }
}

/// Runs `tickwork <args>` against the admin.
pub(crate) fn cli(admin: &Admin, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(args)
        .args(["--admin", &admin.url, "--token", TOKEN])
        .output()
        .expect("the tickwork binary runs")
}

pub(crate) fn ok(out: Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "command failed: {}\nstdout: {text}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

pub(crate) fn create_group(admin: &Admin, app: &str) {
    let client = tickwork_client::Client::new(&admin.url, TOKEN).unwrap();
    let input = tickwork_protocol::api::GroupInput {
        app_name: app.to_owned(),
        title: app.to_owned(),
        address_mode: None,
        addresses: Vec::new(),
    };
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.group_create(&input))
        .unwrap_or_else(|e| panic!("group {app} not created: {e}"));
}
