//! Script jobs: the source is written once to `<logs>/gluesource/<jobId>_<glueUpdatetime><suffix>`
//! and run as `<interpreter> <file> <params> <shardIndex> <shardTotal>` in its own process
//! group, with stdout and stderr appended to the run log. A kill or timeout ends the whole
//! group (SIGTERM, then SIGKILL after the grace period) and the child is always reaped.
//! Script files are readable by the executor's user only (0600, their folder 0700).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tickwork_core::GlueType;
use tokio::process::{Child, Command};
use tokio_util::task::TaskTracker;

use crate::handler::{HandlerResult, JobContext, JobOutcome};

/// A script job version: one worker runs one of these.
#[derive(Debug)]
pub(crate) struct ScriptSpec {
    pub(crate) job_id: i32,
    pub(crate) glue: GlueType,
    pub(crate) updated: i64,
    pub(crate) source: String,
}

/// Where scripts go and how they are stopped.
#[derive(Debug)]
pub(crate) struct ScriptEnv {
    pub(crate) dir: PathBuf,
    pub(crate) kill_grace: Duration,
    /// Tracks clean-ups that outlive a dropped run, so that shutdown waits for them.
    pub(crate) tracker: TaskTracker,
}

/// Runs one execution of a script job.
pub(crate) async fn run(
    spec: Arc<ScriptSpec>,
    env: Arc<ScriptEnv>,
    ctx: JobContext,
) -> HandlerResult {
    let Some((interpreter, suffix)) = spec.glue.interpreter() else {
        return Ok(JobOutcome::failure(format!(
            "glue type {} is not a script",
            spec.glue
        )));
    };
    let file = env
        .dir
        .join(format!("{}_{}{suffix}", spec.job_id, spec.updated));
    {
        let (dir, target, spec) = (env.dir.clone(), file.clone(), Arc::clone(&spec));
        tokio::task::spawn_blocking(move || write_source(&dir, &target, &spec))
            .await
            .map_err(|e| format!("cannot write the script file: {e}"))?
            .map_err(|e| format!("cannot write the script file {}: {e}", file.display()))?;
    }
    // Written before the child starts, since the child writes to the file directly.
    ctx.run_log()
        .write(&format!("----------- script file: {}", file.display()))
        .await;
    let output = ctx
        .run_log()
        .child_output()
        .await
        .map_err(|e| format!("cannot open the run log for the script output: {e}"))?;
    let mut command = Command::new(interpreter);
    command
        .arg(&file)
        .arg(ctx.params())
        .arg(ctx.shard_index().to_string())
        .arg(ctx.shard_total().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(output.try_clone()?))
        .stderr(Stdio::from(output))
        // Its own group, so that a kill reaches everything the script started.
        .process_group(0);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(JobOutcome::failure(format!(
                "script interpreter {interpreter:?} not found on this executor (glue type {})",
                spec.glue
            )));
        }
        Err(e) => {
            return Ok(JobOutcome::failure(format!(
                "cannot start script interpreter {interpreter:?}: {e}"
            )));
        }
    };
    let mut group = GroupGuard::new(child, env.kill_grace, env.tracker.clone());
    let status = tokio::select! {
        status = group.wait() => status?,
        _ = ctx.cancelled() => {
            group.terminate().await;
            return Ok(JobOutcome::failure("script killed"));
        }
    };
    let code = exit_code(status);
    if code == 0 {
        Ok(JobOutcome::success())
    } else {
        Ok(JobOutcome::failure(format!(
            "script exit value({code}) is failed"
        )))
    }
}

/// The exit code as a shell reports it (128 + signal for a killed process).
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// Writes the script file unless this version is already there, removing the job's older
/// versions first. Written to a temporary name and renamed, so a crash leaves no torn script.
fn write_source(dir: &Path, file: &Path, spec: &ScriptSpec) -> io::Result<()> {
    if file.exists() {
        return Ok(());
    }
    crate::runlog::create_private_dir(dir)?;
    let prefix = format!("{}_", spec.job_id);
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let is_older = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&prefix));
        if is_older {
            // A running older version keeps its open file; only the name goes.
            let _ = fs::remove_file(&path);
        }
    }
    let tmp = dir.join(format!(".{}_{}.tmp", spec.job_id, spec.updated));
    // A leftover from a crash may have other permissions: start afresh.
    let _ = fs::remove_file(&tmp);
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    out.write_all(spec.source.as_bytes())?;
    drop(out);
    fs::rename(&tmp, file)
}

/// A spawned script and its process group. Whatever happens to the run, the group is signalled
/// and the child reaped: by [`GroupGuard::terminate`], or on drop by a tracked clean-up task.
struct GroupGuard {
    child: Option<Child>,
    pgid: Option<Pid>,
    grace: Duration,
    tracker: TaskTracker,
}

impl GroupGuard {
    fn new(child: Child, grace: Duration, tracker: TaskTracker) -> Self {
        // With process_group(0) the group id is the child's pid.
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        GroupGuard {
            child: Some(child),
            pgid,
            grace,
            tracker,
        }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        let child = self.child.as_mut().expect("child present until reaped");
        let status = child.wait().await?;
        // Reaped: nothing left to clean up for this guard.
        self.child = None;
        Ok(status)
    }

    /// SIGTERM to the group, SIGKILL after the grace period, then reap.
    async fn terminate(&mut self) {
        if let Some(child) = self.child.take() {
            stop_group(child, self.pgid, self.grace).await;
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let Some(child) = self.child.take() else {
            return;
        };
        let pgid = self.pgid;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                signal_group(pgid, Signal::SIGTERM);
                let grace = self.grace;
                self.tracker
                    .spawn_on(stop_group(child, pgid, grace), &handle);
            }
            // No runtime left to wait in: kill outright; tokio's orphan queue reaps the child.
            Err(_) => signal_group(pgid, Signal::SIGKILL),
        }
    }
}

async fn stop_group(mut child: Child, pgid: Option<Pid>, grace: Duration) {
    signal_group(pgid, Signal::SIGTERM);
    let _ = tokio::time::timeout(grace, child.wait()).await;
    // Whether or not the leader left in time, members that ignored SIGTERM may remain.
    signal_group(pgid, Signal::SIGKILL);
    if let Err(e) = child.wait().await {
        tracing::warn!(error = %e, "cannot reap a script process");
    }
}

fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid
        && let Err(e) = killpg(pgid, signal)
        && e != nix::errno::Errno::ESRCH
    {
        tracing::warn!(pgid = pgid.as_raw(), %signal, error = %e, "cannot signal a script process group");
    }
}
