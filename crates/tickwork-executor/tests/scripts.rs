//! Script jobs as real child processes: arguments, output into the run log, exit codes, cached
//! source files, and kills and timeouts that leave no process behind.

mod support;

use std::path::Path;

use serde_json::json;
use support::*;
use tickwork_testkit::process::is_gone;

async fn scripts_harness() -> Harness {
    Harness::start_with(|b| b.scripts_enabled(true)).await
}

/// Waits for a script to write its two pids (its own and its background child's) to `file`.
async fn pids_in(file: &Path) -> Vec<i32> {
    wait_until_sync("script pids", DEADLINE, || {
        let text = std::fs::read_to_string(file).ok()?;
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        (pids.len() == 2).then_some(pids)
    })
    .await
}

/// A script that starts a long `sleep` in the background, writes both pids, and waits.
const SLEEPER: &str = r#"sleep 1000 &
echo $! > "$1.tmp"
echo $$ >> "$1.tmp"
mv "$1.tmp" "$1"
wait
"#;

fn log_text(h: &Harness, t: &serde_json::Value) -> String {
    let ms = t["logDateTime"].as_i64().unwrap();
    let day = jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%Y-%m-%d")
        .to_string();
    let path = h
        .dir
        .path()
        .join(day)
        .join(format!("{}.log", t["logId"].as_i64().unwrap()));
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn shell_script_gets_params_and_shard_and_logs_its_output() {
    let h = scripts_harness().await;
    let source = "echo \"args: $1|$2|$3\"\necho \"to stderr\" >&2\n";
    let mut t = script_trigger(5, 501, "GLUE_SHELL", source, 1000);
    t["executorParams"] = json!("hello world");
    t["broadcastIndex"] = json!(1);
    t["broadcastTotal"] = json!(2);
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(501).await;
    assert_eq!((cb.handle_code, cb.handle_msg.as_deref()), (200, None));
    let log = log_text(&h, &t);
    assert!(log.contains("args: hello world|1|2\n"), "{log}");
    assert!(log.contains("to stderr\n"), "{log}");
    // The end line comes after the script's output.
    assert!(
        log.trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("handleCode=200"),
        "{log}"
    );
    let glue = h.dir.path().join("gluesource").join("5_1000.sh");
    assert_eq!(std::fs::read_to_string(glue).unwrap(), source);
}

#[tokio::test]
async fn nonzero_exit_fails_the_run() {
    let h = scripts_harness().await;
    let t = script_trigger(5, 502, "GLUE_SHELL", "echo failing\nexit 3\n", 1000);
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(502).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (500, Some("script exit value(3) is failed"))
    );
}

#[tokio::test]
async fn a_new_script_version_replaces_the_cached_file() {
    let h = scripts_harness().await;
    h.client
        .run_ok(&script_trigger(6, 601, "GLUE_SHELL", "echo v1", 1000))
        .await;
    h.admin.callback(601).await;
    let dir = h.dir.path().join("gluesource");
    assert!(dir.join("6_1000.sh").exists());
    let t = script_trigger(6, 602, "GLUE_SHELL", "echo v2", 2000);
    h.client.run_ok(&t).await;
    h.admin.callback(602).await;
    assert!(dir.join("6_2000.sh").exists());
    assert!(!dir.join("6_1000.sh").exists(), "older version removed");
    assert!(log_text(&h, &t).contains("v2\n"));
}

#[tokio::test]
async fn python_script_runs() {
    let h = scripts_harness().await;
    let mut t = script_trigger(
        7,
        701,
        "GLUE_PYTHON",
        "import sys\nprint('py', sys.argv[1:])\n",
        1,
    );
    t["executorParams"] = json!("p");
    h.client.run_ok(&t).await;
    let cb = h.admin.callback(701).await;
    assert_eq!(cb.handle_code, 200, "{cb:?}");
    assert!(log_text(&h, &t).contains("py ['p', '0', '1']"));
}

#[tokio::test]
async fn a_missing_interpreter_fails_clearly() {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("pwsh").exists()))
        .unwrap_or(false);
    if on_path {
        eprintln!("pwsh is installed here; nothing to test");
        return;
    }
    let h = scripts_harness().await;
    h.client
        .run_ok(&script_trigger(
            8,
            801,
            "GLUE_POWERSHELL",
            "Write-Output hi",
            1,
        ))
        .await;
    let cb = h.admin.callback(801).await;
    assert_eq!(cb.handle_code, 500);
    assert_eq!(
        cb.handle_msg.as_deref(),
        Some("script interpreter \"pwsh\" not found on this executor (glue type GLUE_POWERSHELL)")
    );
}

#[tokio::test]
async fn killing_a_running_script_leaves_no_process() {
    let h = scripts_harness().await;
    let pid_file = h.dir.path().join("pids");
    let mut t = script_trigger(9, 901, "GLUE_SHELL", SLEEPER, 1);
    t["executorParams"] = json!(pid_file.to_str().unwrap());
    h.client.run_ok(&t).await;
    let pids = pids_in(&pid_file).await;
    assert!(pids.iter().all(|&p| !is_gone(p)), "script running");
    assert_eq!(
        h.client.kill(9).await.text,
        r#"{"code":200,"msg":"Success"}"#
    );
    let cb = h.admin.callback(901).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (
            500,
            Some("scheduling center kill job. [job running, killed]")
        )
    );
    wait_until_sync("script processes gone", DEADLINE, || {
        pids.iter().all(|&p| is_gone(p)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_script_past_its_timeout_reports_502_and_leaves_no_process() {
    let h = scripts_harness().await;
    let pid_file = h.dir.path().join("pids");
    let mut t = script_trigger(10, 1001, "GLUE_SHELL", SLEEPER, 1);
    t["executorParams"] = json!(pid_file.to_str().unwrap());
    t["executorTimeout"] = json!(1);
    h.client.run_ok(&t).await;
    let pids = pids_in(&pid_file).await;
    let cb = h.admin.callback(1001).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_deref()),
        (502, Some("job execute timeout "))
    );
    wait_until_sync("script processes gone", DEADLINE, || {
        pids.iter().all(|&p| is_gone(p)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_script_ignoring_sigterm_is_killed_after_the_grace_period() {
    let h = scripts_harness().await;
    let pid_file = h.dir.path().join("pids");
    let source = format!("trap '' TERM\n{SLEEPER}");
    let mut t = script_trigger(11, 1101, "GLUE_SHELL", &source, 1);
    t["executorParams"] = json!(pid_file.to_str().unwrap());
    h.client.run_ok(&t).await;
    let pids = pids_in(&pid_file).await;
    h.client.kill(11).await;
    let cb = h.admin.callback(1101).await;
    assert_eq!(cb.handle_code, 500);
    wait_until_sync("script processes gone", DEADLINE, || {
        pids.iter().all(|&p| is_gone(p)).then_some(())
    })
    .await;
}
