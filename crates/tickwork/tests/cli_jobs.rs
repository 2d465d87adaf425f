//! `tickwork job` and `tickwork run` against a real `tickwork admin` process on SQLite: export,
//! delete and import give back the same jobs, importing what is already there changes nothing;
//! bad files are refused and change nothing; jobs are named by key or id; a run's log, from a
//! real `tickwork executor`, prints as lines.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tickwork_testkit::{wait_until, wait_until_sync};

mod cli_support;
use cli_support::{Admin, TOKEN, cli, create_group, ok, start_admin};

/// How long an executor may take to register, and a run to end.
const WAIT: Duration = Duration::from_secs(60);

const JOBS: &str = r#"
[[job]]
key = "nightly-report"
group = "alpha"
description = "the nightly report"
owner = "ops"
schedule_type = "CRON"
schedule_conf = "0 30 2 * * ?"
time_zone = "Europe/Berlin"
misfire_strategy = "FIRE_ONCE_NOW"
route_strategy = "ROUND"
handler = "echo"
params = "full"
block_strategy = "DISCARD_LATER"
timeout_s = 600
retry_count = 2
retry_backoff_ms = 1000
children = ["cleanup"]
priority = 5
glue_type = "BEAN"
status = "running"

[[job]]
key = "cleanup"
group = "beta"
description = "clean temp files"
schedule_type = "FIX_RATE"
schedule_conf = "15m"
time_zone = "UTC"
misfire_strategy = "DO_NOTHING"
route_strategy = "FIRST"
block_strategy = "SERIAL_EXECUTION"
glue_type = "GLUE_SHELL"
glue_source = "find /tmp -name '*.tmp' -mmin +60 -print\n"
status = "stopped"
"#;

fn job_ids(admin: &Admin) -> Vec<i64> {
    let list = ok(cli(admin, &["job", "list"]));
    list.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn export_delete_import_gives_back_the_same_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let admin = start_admin(&dir.path().join("data"));
    create_group(&admin, "alpha");
    create_group(&admin, "beta");
    let input = dir.path().join("jobs.toml");
    std::fs::write(&input, JOBS).unwrap();

    let out = ok(cli(&admin, &["job", "import", input.to_str().unwrap()]));
    assert!(out.contains("2 created, 0 updated"), "{out}");
    let first = ok(cli(&admin, &["job", "export"]));
    assert!(first.contains("children = [\"cleanup\"]"), "{first}");
    assert!(first.contains("status = \"running\""), "{first}");

    // Delete every job, import the export, export again: the same text.
    let ids = job_ids(&admin);
    assert_eq!(ids.len(), 2);
    for id in ids {
        ok(cli(&admin, &["job", "delete", &id.to_string()]));
    }
    assert!(job_ids(&admin).is_empty());
    let exported = dir.path().join("export.toml");
    std::fs::write(&exported, &first).unwrap();
    let out = ok(cli(&admin, &["job", "import", exported.to_str().unwrap()]));
    assert!(out.contains("2 created"), "{out}");
    let second = ok(cli(&admin, &["job", "export"]));
    assert_eq!(first, second);

    // Importing the same file again changes nothing: no new version, no audit record.
    let before = (versions(&admin), audit_total(&admin));
    let out = ok(cli(&admin, &["job", "import", exported.to_str().unwrap()]));
    assert!(out.contains("0 created, 0 updated, 2 unchanged"), "{out}");
    assert_eq!((versions(&admin), audit_total(&admin)), before);
    assert_eq!(ok(cli(&admin, &["job", "export"])), first);

    // One job changed in the file: only that one is written, once.
    let changed = first.replace("clean temp files", "clean old temp files");
    std::fs::write(&exported, &changed).unwrap();
    let out = ok(cli(&admin, &["job", "import", exported.to_str().unwrap()]));
    assert!(out.contains("0 created, 1 updated, 1 unchanged"), "{out}");
    let after = versions(&admin);
    assert_eq!(after["nightly-report"], before.0["nightly-report"]);
    assert_eq!(after["cleanup"], before.0["cleanup"] + 1);
    assert_eq!(audit_total(&admin), before.1 + 1);
    assert_eq!(ok(cli(&admin, &["job", "export"])), changed);
}

/// Each job's version, by key.
fn versions(admin: &Admin) -> std::collections::HashMap<String, i64> {
    let client = tickwork_client::Client::new(&admin.url, TOKEN).unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.jobs_all(None))
        .unwrap()
        .into_iter()
        .map(|j| (j.key, j.version))
        .collect()
}

/// How many audit records the admin holds.
fn audit_total(admin: &Admin) -> u64 {
    let client = tickwork_client::Client::new(&admin.url, TOKEN).unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.audit(1, 1))
        .unwrap()
        .total
}

#[test]
fn bad_import_files_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let admin = start_admin(&dir.path().join("data"));
    create_group(&admin, "alpha");
    create_group(&admin, "beta");
    let good = dir.path().join("jobs.toml");
    std::fs::write(&good, JOBS).unwrap();
    ok(cli(&admin, &["job", "import", good.to_str().unwrap()]));
    let before = ok(cli(&admin, &["job", "export"]));

    let cases = [
        (
            JOBS.replace("group = \"beta\"", "group = \"gamma\""),
            "\"gamma\" does not exist",
        ),
        (
            JOBS.replace("priority = 5", "priority = 5\ncolour = \"red\""),
            "unknown field",
        ),
        (
            JOBS.replace("children = [\"cleanup\"]", "children = [\"nope\"]"),
            "\"nope\"",
        ),
        (
            JOBS.replace("key = \"cleanup\"", "key = \"nightly-report\""),
            "appears twice",
        ),
        (
            JOBS.replace("status = \"stopped\"", "status = \"paused\""),
            "\"paused\"",
        ),
    ];
    for (text, message) in cases {
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, text).unwrap();
        let out = cli(&admin, &["job", "import", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{message}: {stderr}");
        assert!(stderr.contains(message), "expected {message:?} in {stderr}");
        assert_eq!(ok(cli(&admin, &["job", "export"])), before, "{message}");
    }
    // A schedule the admin refuses: the error names the field, and nothing changes.
    let bad = dir.path().join("bad-cron.toml");
    std::fs::write(&bad, JOBS.replace("0 30 2 * * ?", "0 30 25 * * ?")).unwrap();
    let out = cli(&admin, &["job", "import", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("hours: \"25\" is out of range 0-23"),
        "{stderr}"
    );
    assert_eq!(ok(cli(&admin, &["job", "export"])), before);
}

#[test]
fn add_edit_trigger_and_inspect_runs() {
    let dir = tempfile::tempdir().unwrap();
    let admin = start_admin(&dir.path().join("data"));
    create_group(&admin, "alpha");
    let out = ok(cli(
        &admin,
        &[
            "job",
            "add",
            "--group",
            "alpha",
            "--key",
            "hello",
            "--type",
            "CRON",
            "--schedule",
            "0 0 12 * * ?",
            "--handler",
            "echo",
            "--params",
            "hi",
        ],
    ));
    assert!(out.starts_with("created job "), "{out}");
    let id = job_ids(&admin)[0].to_string();
    ok(cli(
        &admin,
        &[
            "job",
            "edit",
            &id,
            "--params",
            "changed",
            "--tz",
            "Asia/Tokyo",
        ],
    ));
    let shown = ok(cli(&admin, &["job", "show", &id]));
    assert!(shown.contains("params = \"changed\""), "{shown}");
    assert!(shown.contains("time_zone = \"Asia/Tokyo\""), "{shown}");
    assert!(
        shown.contains("schedule_conf = \"0 0 12 * * ?\""),
        "{shown}"
    );

    let started = ok(cli(&admin, &["job", "start", &id]));
    assert!(started.contains("next fire"), "{started}");
    let bad = cli(&admin, &["job", "edit", &id, "--timeout", "-3"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("timeout_s: -3 is negative"));

    // No executor is registered: the run is recorded and ends as a trigger failure.
    let out = ok(cli(&admin, &["job", "trigger", &id, "--params", "once"]));
    let run_id = out.trim().rsplit(' ').next().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let shown = ok(cli(&admin, &["run", "show", &run_id]));
        if shown.contains("state:      failed") {
            assert!(shown.contains("no executor"), "{shown}");
            assert!(shown.contains("params:     once"), "{shown}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let runs = ok(cli(&admin, &["run", "list", "--job", &id]));
    assert!(runs.contains(&run_id) && runs.contains("failed"), "{runs}");

    let missing = cli(&admin, &["job", "show", "999999"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("job 999999 not found"));
    let wrong = Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(["job", "list", "--admin", &admin.url, "--token", "wrong"])
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("access token is wrong"));
}

/// `n` new jobs of group `alpha` in the export format: every fifth running, the rest stopped.
fn many_jobs(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let status = if i.is_multiple_of(5) {
            "running"
        } else {
            "stopped"
        };
        text.push_str(&format!(
            "[[job]]\nkey = \"bulk-{i:05}\"\ngroup = \"alpha\"\nschedule_type = \"CRON\"\n\
             schedule_conf = \"0 {} 3 * * ?\"\nhandler = \"echo\"\nstatus = \"{status}\"\n\n",
            i % 60
        ));
    }
    text
}

#[test]
fn importing_many_new_jobs_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let admin = start_admin(&dir.path().join("data"));
    create_group(&admin, "alpha");
    let file = dir.path().join("many.toml");
    let good = many_jobs(2500);

    // One wrong schedule among 2,500 new jobs: the admin names it and creates none.
    std::fs::write(
        &file,
        good.replace("schedule_conf = \"0 19 3 * * ?\"\nhandler = \"echo\"\nstatus = \"stopped\"\n\n[[job]]\nkey = \"bulk-02480\"",
            "schedule_conf = \"0 19 25 * * ?\"\nhandler = \"echo\"\nstatus = \"stopped\"\n\n[[job]]\nkey = \"bulk-02480\""),
    )
    .unwrap();
    let out = cli(&admin, &["job", "import", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("jobs[2479].schedule_conf: hours: \"25\" is out of range 0-23"),
        "{stderr}"
    );
    assert!(job_ids(&admin).is_empty(), "nothing was created");

    std::fs::write(&file, &good).unwrap();
    let out = ok(cli(&admin, &["job", "import", file.to_str().unwrap()]));
    assert!(
        out.contains("imported 2500 jobs: 2500 created, 0 updated"),
        "{out}"
    );
    let exported = ok(cli(&admin, &["job", "export"]));
    assert_eq!(exported.matches("[[job]]").count(), 2500);
    assert_eq!(exported.matches("status = \"running\"").count(), 500);
    let again = ok(cli(&admin, &["job", "import", file.to_str().unwrap()]));
    assert!(
        again.contains("0 created, 0 updated, 2500 unchanged"),
        "{again}"
    );
}

/// A `tickwork executor` of app `alpha` with scripts enabled, registered with `admin`.
struct Executor(Child);

impl Drop for Executor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_executor(admin: &Admin, logs: &Path) -> Executor {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickwork"))
        .args(["executor", "--app", "alpha", "--admin", &admin.url])
        .args([
            "--token",
            "exec-token",
            "--listen",
            "127.0.0.1:0",
            "--enable-scripts",
        ])
        .arg("--logs")
        .arg(logs)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the tickwork binary starts");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(
        first.starts_with("executor listening on "),
        "unexpected first line {first:?}"
    );
    // Keep reading so that the executor never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Executor(child)
}

/// Executors write `<br>` into run logs for XXL-JOB's HTML console; `tickwork run log`
/// printed it as is. It prints line breaks now.
#[test]
fn run_log_prints_lines_not_html_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let admin = start_admin(&dir.path().join("data"));
    create_group(&admin, "alpha");
    let _executor = start_executor(&admin, &dir.path().join("logs"));
    let script = dir.path().join("hello.sh");
    std::fs::write(&script, "echo first line\necho second line\n").unwrap();
    let script = script.to_str().unwrap();
    let out = ok(cli(
        &admin,
        &[
            "job",
            "add",
            "--group",
            "alpha",
            "--key",
            "hello",
            "--type",
            "NONE",
            "--glue-type",
            "GLUE_SHELL",
            "--script",
            script,
        ],
    ));
    let id = out.split_whitespace().nth(2).unwrap().to_owned();
    // The executor has registered once the group lists an instance.
    let client = tickwork_client::Client::new(&admin.url, TOKEN).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_until("registered executor", WAIT, || async {
        let groups = client.groups_list().await.ok()?;
        groups
            .iter()
            .any(|g| !g.live_addresses.is_empty())
            .then_some(())
    }));
    let out = ok(cli(&admin, &["job", "trigger", &id]));
    let run = out.trim().rsplit(' ').next().unwrap().to_owned();
    rt.block_on(wait_until_sync("succeeded run", WAIT, || {
        ok(cli(&admin, &["run", "show", &run]))
            .contains("state:      succeeded")
            .then_some(())
    }));
    let log = ok(cli(&admin, &["run", "log", &run]));
    assert!(!log.to_lowercase().contains("<br"), "{log}");
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("----------- tickwork job execute start")),
        "{log}"
    );
    assert!(
        lines.contains(&"first line") && lines.contains(&"second line"),
        "{log}"
    );
}

/// Every command that takes a job takes its key as well as its id; a key of digits only is
/// written `key:<key>`; a key nobody has is refused.
#[test]
fn jobs_are_named_by_key_or_id() {
    let dir = tempfile::tempdir().unwrap();
    let admin = start_admin(&dir.path().join("data"));
    create_group(&admin, "alpha");
    let add = |key: &str| {
        ok(cli(
            &admin,
            &[
                "job",
                "add",
                "--group",
                "alpha",
                "--key",
                key,
                "--type",
                "NONE",
                "--handler",
                "echo",
            ],
        ))
    };
    add("hello");
    let digits = add("123");
    let digits_id = digits.split_whitespace().nth(2).unwrap().to_owned();
    assert_ne!(digits_id, "123");

    let shown = ok(cli(&admin, &["job", "show", "hello"]));
    assert!(shown.contains("key = \"hello\""), "{shown}");
    ok(cli(&admin, &["job", "edit", "hello", "--params", "by key"]));
    assert!(ok(cli(&admin, &["job", "show", "hello"])).contains("params = \"by key\""));
    let by_key = ok(cli(&admin, &["job", "show", "key:123"]));
    assert!(by_key.contains("key = \"123\""), "{by_key}");
    let by_id = ok(cli(&admin, &["job", "show", &digits_id]));
    assert_eq!(by_id, by_key, "digits name the id");

    let out = ok(cli(&admin, &["job", "trigger", "hello"]));
    let run = out.trim().rsplit(' ').next().unwrap().to_owned();
    let runs = ok(cli(&admin, &["run", "list", "--job", "hello"]));
    assert!(runs.contains(&run), "{runs}");

    for args in [
        vec!["job", "show", "nope"],
        vec!["job", "start", "nope"],
        vec!["job", "trigger", "nope"],
        vec!["job", "delete", "nope"],
        vec!["run", "list", "--job", "nope"],
    ] {
        let out = cli(&admin, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("no job has the key \"nope\""), "{stderr}");
    }
    assert_eq!(job_ids(&admin).len(), 2, "nothing was deleted");
    ok(cli(&admin, &["job", "delete", "hello"]));
    ok(cli(&admin, &["job", "delete", "key:123"]));
    assert!(job_ids(&admin).is_empty());
}
