//! The child processes of the admin load scenarios (admins, executors) and what `/proc` tells
//! about them: resident memory and CPU time, for the admins, the executors, the database server
//! and the whole machine.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;

/// How long a child may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process; killed (SIGKILL) if dropped while still running.
pub(super) struct Proc {
    pub name: String,
    pub pid: u32,
    child: Child,
    /// Where its stderr goes.
    pub log: PathBuf,
}

impl Proc {
    /// Sends SIGTERM, waits up to `grace`, then SIGKILL. Returns the exit status text, with
    /// how long the process took to exit.
    pub(super) async fn terminate(mut self, grace: Duration) -> String {
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
        let sent = std::time::Instant::now();
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => format!("{status} after {:.1} s", sent.elapsed().as_secs_f64()),
            Ok(Err(e)) => format!("wait failed: {e}"),
            Err(_) => {
                let _ = self.child.start_kill();
                let _ = self.child.wait().await;
                format!(
                    "killed after {} s without exiting on SIGTERM",
                    grace.as_secs()
                )
            }
        }
    }
}

fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<(Proc, ChildStdout)> {
    let err = std::fs::File::create(log).with_context(|| format!("cannot create {log:?}"))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err))
        .kill_on_drop(true);
    // SAFETY: between fork and exec only prctl(2) runs, which is async-signal-safe. It kills
    // the child when the bench dies without cleaning up (SIGKILL, a crash), so that no admin
    // or executor is left behind firing jobs.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {name}"))?;
    let pid = child.id().context("child has no pid")?;
    let stdout = child.stdout.take().context("child has no stdout")?;
    Ok((
        Proc {
            name: name.to_owned(),
            pid,
            child,
            log: log.to_owned(),
        },
        stdout,
    ))
}

/// Forwards a child's stdout lines into a channel, so that the pipe never fills.
fn lines(stdout: ChildStdout) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                // Nobody listens any more: keep draining.
                while let Ok(Some(_)) = lines.next_line().await {}
                return;
            }
        }
    });
    rx
}

/// Waits for the line starting with `prefix`; returns the rest of it.
async fn ready_line(
    name: &str,
    rx: &mut mpsc::UnboundedReceiver<String>,
    prefix: &str,
    log: &Path,
) -> anyhow::Result<String> {
    let wait = async {
        while let Some(line) = rx.recv().await {
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.trim().to_owned());
            }
        }
        None
    };
    match tokio::time::timeout(START_TIMEOUT, wait).await {
        Ok(Some(rest)) => Ok(rest),
        Ok(None) => bail!("{name} exited before it was ready; see {}", log.display()),
        Err(_) => bail!(
            "{name} not ready after {} s; see {}",
            START_TIMEOUT.as_secs(),
            log.display()
        ),
    }
}

/// What starting an admin needs.
pub(super) struct AdminSpec<'a> {
    pub bin: &'a Path,
    pub index: usize,
    pub db_url: &'a str,
    pub dir: &'a Path,
    pub token: &'a str,
    pub api_token: &'a str,
    /// The console's first `admin` password, for scenarios that sign in.
    pub admin_password: Option<&'a str>,
}

/// Starts `tickwork admin` on a free loopback port; returns it with its address.
pub(super) async fn start_admin(spec: AdminSpec<'_>) -> anyhow::Result<(Proc, SocketAddr)> {
    let name = format!("admin-{}", spec.index);
    let data = spec.dir.join(&name);
    std::fs::create_dir_all(&data)?;
    let mut cmd = Command::new(spec.bin);
    cmd.arg("admin")
        .args(["--listen", "127.0.0.1:0"])
        .args(["--db", spec.db_url])
        .args(["--token", spec.token])
        .args(["--api-token", spec.api_token])
        .arg("--data-dir")
        .arg(&data)
        .args(["--node-id", &format!("bench-{name}")]);
    if let Some(p) = spec.admin_password {
        cmd.env("TICKWORK_ADMIN_PASSWORD", p);
    }
    let (proc, stdout) = spawn(&name, cmd, &spec.dir.join(format!("{name}.log")))?;
    let mut rx = lines(stdout);
    let addr = ready_line(&name, &mut rx, "admin listening on ", &proc.log).await?;
    let addr: SocketAddr = addr
        .parse()
        .with_context(|| format!("{name} printed an odd address {addr:?}"))?;
    Ok((proc, addr))
}

/// An executor child and the running count of runs it has seen.
pub(super) struct ExecutorProc {
    pub proc: Proc,
    pub arrivals: Arc<AtomicU64>,
    pub records: PathBuf,
}

/// What starting an executor child needs.
pub(super) struct ExecutorSpec<'a> {
    pub index: usize,
    pub admins: &'a str,
    pub token: &'a str,
    pub app: &'a str,
    pub handler: &'a str,
    pub dir: &'a Path,
    /// Parent of its run log folder.
    pub run_logs: &'a Path,
    pub max_secs: u64,
    pub wire_probe: bool,
}

/// Starts this binary as an executor child (see `child.rs`).
pub(super) async fn start_executor(spec: ExecutorSpec<'_>) -> anyhow::Result<ExecutorProc> {
    let name = format!("executor-{}", spec.index);
    let records = spec.dir.join(format!("{name}.records"));
    let mut cmd = Command::new(std::env::current_exe().context("cannot find this binary")?);
    cmd.arg(super::child::FLAG)
        .args(["--admins", spec.admins])
        .args(["--token", spec.token])
        .args(["--app", spec.app])
        .args(["--handler", spec.handler])
        .arg("--out")
        .arg(&records)
        .arg("--logs")
        .arg(spec.run_logs.join(format!("{name}-runlogs")))
        .args(["--max-secs", &spec.max_secs.to_string()]);
    if spec.wire_probe {
        cmd.arg("--wire-probe");
    }
    let (proc, stdout) = spawn(&name, cmd, &spec.dir.join(format!("{name}.log")))?;
    let mut rx = lines(stdout);
    ready_line(&name, &mut rx, "executor listening on ", &proc.log).await?;
    let arrivals = Arc::new(AtomicU64::new(0));
    let a = Arc::clone(&arrivals);
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            let n = line
                .strip_prefix("arrivals ")
                .or_else(|| line.strip_prefix("records "));
            if let Some(n) = n.and_then(|n| n.trim().parse().ok()) {
                a.store(n, Ordering::Relaxed);
            }
        }
    });
    Ok(ExecutorProc {
        proc,
        arrivals,
        records,
    })
}

// ---- /proc ----

/// Resident memory of a process in KiB (`VmRSS`).
pub(super) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU time of a process (all its threads), in clock ticks.
pub(super) fn cpu_ticks(pid: u32) -> Option<u64> {
    cpu_ticks_at(&format!("/proc/{pid}/stat"))
}

fn cpu_ticks_at(path: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name may hold spaces: the fields start after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU ticks of a process's threads, summed by thread name (digits masked, so that the
/// workers of one pool add up): where inside the process the time goes.
pub(super) fn thread_ticks(pid: u32) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for tid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")) else {
            continue;
        };
        let name: String = comm
            .trim()
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        if let Some(t) = cpu_ticks_at(&format!("/proc/{pid}/task/{tid}/stat")) {
            *out.entry(name).or_default() += t;
        }
    }
    out
}

/// Thread groups and their CPU between two [`thread_ticks`] readings, in percent of one core,
/// busiest first.
pub(super) fn thread_split(
    a: &HashMap<String, u64>,
    b: &HashMap<String, u64>,
    secs: f64,
    hz: u64,
) -> String {
    let mut v: Vec<(&String, f64)> = b
        .iter()
        .map(|(k, &t)| {
            let before = a.get(k).copied().unwrap_or(0);
            (
                k,
                t.saturating_sub(before) as f64 / hz as f64 / secs * 100.0,
            )
        })
        .filter(|(_, p)| *p >= 0.5)
        .collect();
    v.sort_by(|x, y| y.1.total_cmp(&x.1));
    v.iter()
        .map(|(k, p)| format!("{k}={p:.0}%"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Interrupt ticks of the whole machine (irq + softirq: loopback networking runs there, and
/// no process is charged for it).
pub(super) fn irq_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_ascii_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    Some(v.get(5)? + v.get(6)?)
}

/// The machine's cores (1 when it cannot tell).
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Busy and total ticks of the whole machine (`/proc/stat`, first line).
pub(super) fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_ascii_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle and iowait are fields 4 and 5.
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Processes whose command name is one of `names` (the database server's processes).
pub(super) fn pids_named(names: &[&str]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| names.contains(&c.trim()))
        })
        .collect()
}

/// CPU ticks of every process, by pid, with its command name: who else used the cores.
pub(super) fn all_ticks() -> HashMap<u32, (String, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some((pid, (comm.trim().to_owned(), cpu_ticks(pid)?)))
        })
        .collect()
}

/// The busiest processes between two [`all_ticks`] readings, by command name, leaving out
/// `exclude` (the benchmark's own): `name=pct%` in percent of one core.
pub(super) fn top_others(
    a: &HashMap<u32, (String, u64)>,
    b: &HashMap<u32, (String, u64)>,
    exclude: &[u32],
    secs: f64,
    hz: u64,
) -> String {
    let mut by_name: HashMap<&str, u64> = HashMap::new();
    for (pid, (name, t)) in b {
        if exclude.contains(pid) {
            continue;
        }
        let before = a.get(pid).map_or(0, |x| x.1);
        *by_name.entry(name.as_str()).or_default() += t.saturating_sub(before);
    }
    let mut v: Vec<(&str, f64)> = by_name
        .into_iter()
        .map(|(n, t)| (n, t as f64 / hz as f64 / secs * 100.0))
        .filter(|(_, p)| *p >= 1.0)
        .collect();
    v.sort_by(|x, y| y.1.total_cmp(&x.1));
    v.iter()
        .take(6)
        .map(|(n, p)| format!("{n}={p:.0}%"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Clock ticks per second of `/proc` CPU times.
pub(super) fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// CPU time of the parts of the benchmark at one instant, in ticks.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuSnapshot {
    pub admins: u64,
    pub executors: u64,
    pub db: u64,
    pub bench: u64,
    pub machine_busy: u64,
    pub machine_total: u64,
    pub machine_irq: u64,
}

/// Which processes make up each part.
#[derive(Debug, Clone, Default)]
pub(super) struct Parts {
    pub admins: Vec<u32>,
    pub executors: Vec<u32>,
    /// Command names of the database server's processes (empty for SQLite, which lives in
    /// the admin).
    pub db_names: Vec<&'static str>,
}

impl Parts {
    pub(super) fn snapshot(&self) -> CpuSnapshot {
        let sum = |pids: &[u32]| pids.iter().filter_map(|&p| cpu_ticks(p)).sum::<u64>();
        let db = if self.db_names.is_empty() {
            0
        } else {
            sum(&pids_named(&self.db_names))
        };
        let (machine_busy, machine_total) = machine_ticks().unwrap_or((0, 0));
        CpuSnapshot {
            admins: sum(&self.admins),
            executors: sum(&self.executors),
            db,
            bench: cpu_ticks(std::process::id()).unwrap_or(0),
            machine_busy,
            machine_total,
            machine_irq: irq_ticks().unwrap_or(0),
        }
    }

    /// Peak-relevant memory: the largest admin's RSS, in KiB.
    pub(super) fn admin_rss_kib(&self) -> u64 {
        self.admins
            .iter()
            .filter_map(|&p| rss_kib(p))
            .max()
            .unwrap_or(0)
    }
}

/// CPU use between two snapshots, in percent of one core (200 = both cores of a 2-core box).
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuSplit {
    pub admins: f64,
    pub executors: f64,
    pub db: f64,
    pub bench: f64,
    /// Interrupt handling (loopback networking), charged to no process.
    pub irq: f64,
    /// Everything else on the machine (other users of the cores skew the figures).
    pub other: f64,
    /// Whole machine busy, in percent of one core.
    pub machine: f64,
}

impl CpuSplit {
    pub(super) fn between(a: &CpuSnapshot, b: &CpuSnapshot, secs: f64, hz: u64) -> CpuSplit {
        let pct = |x: u64, y: u64| y.saturating_sub(x) as f64 / hz as f64 / secs * 100.0;
        let cores = cores() as f64;
        let machine_ticks = b.machine_total.saturating_sub(a.machine_total) as f64;
        let share = |x: u64, y: u64| {
            if machine_ticks > 0.0 {
                y.saturating_sub(x) as f64 / machine_ticks * 100.0 * cores
            } else {
                0.0
            }
        };
        let machine = share(a.machine_busy, b.machine_busy);
        let irq = share(a.machine_irq, b.machine_irq);
        let admins = pct(a.admins, b.admins);
        let executors = pct(a.executors, b.executors);
        let db = pct(a.db, b.db);
        let bench = pct(a.bench, b.bench);
        CpuSplit {
            admins,
            executors,
            db,
            bench,
            irq,
            other: (machine - admins - executors - db - bench - irq).max(0.0),
            machine,
        }
    }
}

impl std::fmt::Display for CpuSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cpu% admin={:.0} executor={:.0} db={:.0} bench={:.0} irq={:.0} other={:.0} \
             machine={:.0}",
            self.admins, self.executors, self.db, self.bench, self.irq, self.other, self.machine
        )
    }
}
