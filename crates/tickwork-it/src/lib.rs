//! End-to-end harness: each test gets a fresh database on one backend and starts real
//! `tickwork admin` and `tickwork executor` processes on it, then checks what they do through
//! the admin's HTTP APIs only.
//!
//! Everything is polled with generous deadlines ([`wait_until`], from `tickwork-testkit`): the
//! suite runs on loaded 2-core CI machines, where a fixed sleep would be either flaky or slow.
//!
//! Running: `cargo build -p tickwork && cargo nextest run -p tickwork-it`. The tests use the
//! `tickwork` binary of the same build profile. PostgreSQL and MySQL/MariaDB servers are taken
//! from `TICKWORK_TEST_POSTGRES` and `TICKWORK_TEST_MYSQL` (see [`TestDb`]).

mod api;
mod process;

use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;
use tickwork_testkit::Process;

pub use api::{Api, Reply, Run};
pub use process::{start_tickwork, start_tickwork_until, tickwork_bin};
pub use tickwork_testkit::{Backend, TestDb, now_ms, wait_until};

/// The usual deadline of a wait: far beyond what an idle machine needs.
pub const WAIT: Duration = Duration::from_secs(30);

/// An instant as RFC 3339 text (a `ONCE` schedule).
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .expect("instant in range")
        .to_string()
}

/// Scheduler settings written into the admin's TOML file. Short intervals keep tests fast.
#[derive(Debug, Clone, Copy)]
pub struct AdminSettings {
    pub lookahead_ms: u64,
    pub claim_interval_ms: u64,
    pub misfire_threshold_ms: u64,
    /// More of the admin's TOML file, after the `[scheduler]` section (other sections).
    pub extra_toml: &'static str,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            lookahead_ms: 1000,
            claim_interval_ms: 200,
            misfire_threshold_ms: 5000,
            extra_toml: "",
        }
    }
}

/// An executor started by [`Cluster::start_executor`].
#[derive(Debug, Clone)]
pub struct Executor {
    /// Index in the cluster's list.
    index: usize,
    /// The address it registers (`http://127.0.0.1:PORT/`).
    pub address: String,
    /// Its run logs and callback spool.
    pub logs: PathBuf,
}

/// One test's admin, executors, database and folder. Dropping it kills every process,
/// prints their logs when the test failed, and drops the database.
pub struct Cluster {
    pub backend: Backend,
    pub settings: AdminSettings,
    access_token: String,
    api_token: String,
    admin: Option<Process>,
    /// The admin's port, kept across restarts so executors find the new process.
    admin_port: u16,
    admin_starts: usize,
    executors: Vec<Process>,
    /// Processes that ended, kept for their logs.
    ended: Vec<Process>,
    db: Option<TestDb>,
    dir: Option<tempfile::TempDir>,
}

/// Runs `test` on a fresh database of `backend`; skips (returns) when the server is
/// unreachable outside CI.
pub async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(Cluster) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::Builder::new()
        .prefix("tickwork-it-")
        .tempdir()
        .expect("temporary folder");
    // The SQLite file lives in the test's folder, kept for inspection when the test fails.
    let Some(db) = TestDb::create_in(backend, "tw_it", dir.path()).await else {
        return;
    };
    let cluster = Cluster {
        backend,
        settings: AdminSettings::default(),
        access_token: format!("it-access-{:016x}", fastrand::u64(..)),
        api_token: format!("it-api-{:016x}", fastrand::u64(..)),
        admin: None,
        admin_port: 0,
        admin_starts: 0,
        executors: Vec::new(),
        ended: Vec::new(),
        db: Some(db),
        dir: Some(dir),
    };
    test(cluster).await;
}

impl Cluster {
    fn dir(&self) -> PathBuf {
        self.dir.as_ref().expect("test folder").path().to_owned()
    }

    /// The admin's base URL (`http://127.0.0.1:PORT`).
    pub fn admin_url(&self) -> String {
        assert!(self.admin_port != 0, "the admin has not been started");
        format!("http://127.0.0.1:{}", self.admin_port)
    }

    /// A client of the admin with the right tokens.
    pub fn api(&self) -> Api {
        Api::new(&self.admin_url(), &self.api_token, &self.access_token)
    }

    /// The JSON API's bearer token.
    pub fn api_token(&self) -> &str {
        &self.api_token
    }

    /// Runs `tickwork <command> --admin <url> --token <token> <rest>` against this cluster's
    /// admin (`args` = the command, then the rest): its exit code, stdout and stderr.
    pub async fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let (command, rest) = args.split_first().expect("a command");
        let url = self.admin_url();
        let mut all: Vec<&str> = vec![command, "--admin", &url, "--token", &self.api_token];
        all.extend_from_slice(rest);
        let out = tokio::process::Command::new(tickwork_bin())
            .args(&all)
            .kill_on_drop(true)
            .output()
            .await
            .expect("run tickwork");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Starts the admin with [`Cluster::settings`]; a restart keeps its port, node id, data
    /// folder and tokens, so it is the same node coming back.
    pub async fn start_admin(&mut self) -> Api {
        assert!(self.admin.is_none(), "the admin is already running");
        let dir = self.dir();
        let s = self.settings;
        let config = dir.join("admin.toml");
        let toml = format!(
            "[scheduler]\nlookahead_ms = {}\nclaim_interval_ms = {}\nmisfire_threshold_ms = {}\n{}",
            s.lookahead_ms, s.claim_interval_ms, s.misfire_threshold_ms, s.extra_toml
        );
        std::fs::write(&config, toml).expect("write admin.toml");
        self.admin_starts += 1;
        let n = self.admin_starts;
        let db = self.db.as_ref().expect("database").url().to_owned();
        let args: Vec<OsString> = vec![
            "admin".into(),
            "--listen".into(),
            format!("127.0.0.1:{}", self.admin_port).into(),
            "--db".into(),
            db.into(),
            "--token".into(),
            self.access_token.clone().into(),
            "--api-token".into(),
            self.api_token.clone().into(),
            "--data-dir".into(),
            dir.join("admin-data").into(),
            "--node-id".into(),
            "it-node-1".into(),
            "--config".into(),
            config.into(),
        ];
        let log = dir.join(format!("admin-{n}.log"));
        let (process, addr) = start_tickwork(&format!("admin #{n}"), &args, log).await;
        self.admin_port = addr.port();
        self.admin = Some(process);
        self.api()
    }

    /// Stops the admin with SIGTERM and waits for it to exit, which it must do promptly.
    pub async fn stop_admin(&mut self) {
        let admin = self.admin.take().expect("the admin is running");
        let status = admin.terminate(WAIT).await;
        let name = admin.name().to_owned();
        self.ended.push(admin);
        let status = status.unwrap_or_else(|| panic!("{name} did not exit on SIGTERM"));
        assert!(status.success(), "{name} exited with {status} on SIGTERM");
    }

    /// The next executor's index, the test's folder and the executor's logs folder.
    fn next_executor(&self) -> (usize, PathBuf, PathBuf) {
        let index = self.executors.len();
        let dir = self.dir();
        let logs = dir.join(format!("executor-{index}"));
        (index, dir, logs)
    }

    /// `tickwork executor` of `app` with `admin`, the access token, `logs`, scripts enabled,
    /// and `mode`'s flags.
    fn executor_args(
        &self,
        app: &str,
        admin: &str,
        logs: &std::path::Path,
        mode: &[&str],
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "executor".into(),
            "--app".into(),
            app.into(),
            "--admin".into(),
            admin.into(),
            "--token".into(),
            self.access_token.clone().into(),
            "--logs".into(),
            logs.into(),
            "--enable-scripts".into(),
            "--shutdown-timeout".into(),
            "30s".into(),
        ];
        args.extend(mode.iter().map(OsString::from));
        args
    }

    /// Starts an executor of `app` registering with the admin (scripts enabled).
    pub async fn start_executor(&mut self, app: &str) -> Executor {
        let (index, dir, logs) = self.next_executor();
        let admin = self.admin_url();
        let args = self.executor_args(app, &admin, &logs, &["--listen", "127.0.0.1:0"]);
        let log = dir.join(format!("executor-{index}.log"));
        let (process, addr) =
            start_tickwork(&format!("executor #{index} ({app})"), &args, log).await;
        let address = format!("http://{addr}/");
        self.executors.push(process);
        Executor {
            index,
            address,
            logs,
        }
    }

    /// Starts a pull executor of `app` (`--pull`: no port of its own; it dials the admin) with
    /// `extra` flags; its address is the one the admin registers it under.
    pub async fn start_pull_executor(&mut self, app: &str, extra: &[&str]) -> Executor {
        let admin = self.admin_url();
        self.start_pull_executor_at(app, &admin, extra, &[]).await
    }

    /// As [`Cluster::start_pull_executor`], dialling `admin` with `env` set.
    pub async fn start_pull_executor_at(
        &mut self,
        app: &str,
        admin: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Executor {
        let (index, dir, logs) = self.next_executor();
        let mut mode = vec!["--pull"];
        mode.extend_from_slice(extra);
        let mut cmd = std::process::Command::new(tickwork_bin());
        cmd.args(self.executor_args(app, admin, &logs, &mode));
        cmd.envs(env.iter().copied());
        let log = dir.join(format!("executor-{index}.log"));
        let (process, address) = start_tickwork_until(
            &format!("pull executor #{index} ({app})"),
            cmd,
            log,
            "its pulling line",
            |line| {
                let (_, address) = line.split_once(" pulling as ")?;
                Some(address.trim().to_owned())
            },
        )
        .await;
        self.executors.push(process);
        Executor {
            index,
            address,
            logs,
        }
    }

    /// The process id of an executor.
    pub fn executor_pid(&self, e: &Executor) -> i32 {
        self.executors[e.index].pid().as_raw()
    }

    /// Starts `n` executors of `app` and an auto group for them; waits until all are live.
    /// Returns the group id and the executors sorted by address (the admin's routing order).
    pub async fn executor_group(&mut self, app: &str, n: usize) -> (i64, Vec<Executor>) {
        let api = self.api();
        let group = api.create_group(app).await;
        let mut executors = Vec::new();
        for _ in 0..n {
            executors.push(self.start_executor(app).await);
        }
        executors.sort_by(|a, b| a.address.cmp(&b.address));
        let addresses: Vec<String> = executors.iter().map(|e| e.address.clone()).collect();
        api.wait_live(group, &addresses).await;
        (group, executors)
    }

    /// Sends `signal` to an executor.
    pub fn signal_executor(&mut self, e: &Executor, signal: Signal) {
        self.executors[e.index].signal(signal);
    }

    /// Waits for an executor to exit; its exit status.
    pub async fn wait_executor_exit(&mut self, e: &Executor) -> std::process::ExitStatus {
        let p = &self.executors[e.index];
        p.wait_exit(Duration::from_secs(60))
            .await
            .unwrap_or_else(|| panic!("{} did not exit", p.name()))
    }

    /// An executor's output (its log on stderr, and its stdout) so far.
    pub fn executor_log(&self, e: &Executor) -> String {
        self.executors[e.index].output()
    }

    /// Every process's log, for a failure report.
    fn dump_logs(&self) {
        let dir = self.dir();
        eprintln!(
            "\n===== {} test failed; logs of its processes (all kept in {}) =====",
            self.backend.name(),
            dir.display()
        );
        let all = self
            .ended
            .iter()
            .chain(self.admin.iter())
            .chain(self.executors.iter());
        for p in all {
            let log = p.output();
            // The end of a long log is what explains a failure.
            let lines: Vec<&str> = log.lines().collect();
            let from = lines.len().saturating_sub(300);
            eprintln!(
                "----- {} (last {} lines) -----",
                p.name(),
                lines.len() - from
            );
            for line in &lines[from..] {
                eprintln!("{line}");
            }
        }
        eprintln!("===== end of logs =====");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            self.dump_logs();
        }
        // Processes first (each is killed and reaped when dropped): the database is dropped
        // once nobody holds a connection to it.
        self.admin.take();
        self.executors.clear();
        self.ended.clear();
        self.db.take();
        // A failed test's folder (process logs, run logs, spool) stays for inspection.
        if let Some(dir) = self.dir.take()
            && failed
        {
            let _ = dir.keep();
        }
    }
}

/// Instantiates each listed test (an `async fn(Cluster)` of the test crate's root) once per
/// backend: `sqlite::name`, `postgres::name`, `mysql::name`.
#[macro_export]
macro_rules! e2e {
    ($($test:ident),+ $(,)?) => {
        $crate::e2e!(@backend sqlite, Sqlite, $($test),+);
        $crate::e2e!(@backend postgres, Postgres, $($test),+);
        $crate::e2e!(@backend mysql, MySql, $($test),+);
    };
    (@backend $module:ident, $variant:ident, $($test:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    $crate::run($crate::Backend::$variant, super::$test).await;
                }
            )+
        }
    };
}
