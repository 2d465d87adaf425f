//! A child process of a test: started in a process group of its own, its output (stdout and
//! stderr) kept for failure messages and copied to a log file when asked, waited on for a line
//! or a port, and killed with its whole group when dropped.
//!
//! Its own group means that a kill reaches whatever the process started (a browser's helper
//! processes, a script's children) and that a signal sent to the test's group (Ctrl-C) does
//! not. On Linux the child also gets SIGKILL when the thread that started it ends, so nothing
//! outlives a test that dies without running its destructors (a harness timeout): start
//! processes from the test's own code, not from a `spawn_blocking` thread, which ends when idle.
//!
//! Plain threads read the output and reap the process, so nothing depends on the test's
//! runtime still running, and a child never blocks on a full pipe. Its status is read when it
//! ends, but it is reaped only when its [`Process`] is dropped: until then its pid, which is
//! also its group's id, cannot be given to another process, so no signal of the test (the
//! drop's SIGKILL to the group among them) can reach a stranger that got the same number.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

use crate::wait::Wait;

/// How long a drop waits for the killed process to be reaped.
const REAP_DEADLINE: Duration = Duration::from_secs(10);
/// Lines of output shown when a wait on the process fails.
const FAILURE_LINES: usize = 100;
/// Lines of output printed when the process is dropped while the test panics.
const DEFAULT_TAIL_ON_PANIC: usize = 50;

/// How to start a [`Process`]: made by [`Process::builder`].
#[must_use = "a builder does nothing until `start` is called"]
pub struct ProcessBuilder {
    name: String,
    command: Command,
    log: Option<PathBuf>,
    tail_on_panic: usize,
}

impl ProcessBuilder {
    /// Also writes every line of output to `path` (created, or truncated), as it comes.
    pub fn log(mut self, path: impl Into<PathBuf>) -> ProcessBuilder {
        self.log = Some(path.into());
        self
    }

    /// Prints the last `lines` of output when the process is dropped while the test panics
    /// (0: nothing; the default is 50).
    pub fn tail_on_panic(mut self, lines: usize) -> ProcessBuilder {
        self.tail_on_panic = lines;
        self
    }

    /// Starts the process; panics, naming it, when it cannot be started.
    pub fn start(self) -> Process {
        let ProcessBuilder {
            name,
            mut command,
            log,
            tail_on_panic,
        } = self;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        #[cfg(target_os = "linux")]
        // SAFETY: prctl is async-signal-safe and touches nothing of the parent.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let log = log.map(|path| {
            let file = std::fs::File::create(&path)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
            Arc::new(Mutex::new(file))
        });
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let pid = Pid::from_raw(child.id() as i32);
        let stdin = child.stdin.take();
        let (changed, _) = watch::channel(());
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            reaped: Condvar::new(),
            changed,
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        for (pipe, stream) in [
            (Box::new(stdout) as Box<dyn Read + Send>, Stream::Stdout),
            (Box::new(stderr), Stream::Stderr),
        ] {
            let shared = shared.clone();
            let log = log.clone();
            std::thread::spawn(move || read_lines(pipe, stream, &shared, log.as_deref()));
        }
        let reaper = shared.clone();
        let (release, released) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let status = exit_status(pid);
            reaper.update(|state| state.status = Some(status));
            // Ended but not reaped until the `Process`, and its sender with it, is dropped.
            let _ = released.recv();
            let _ = child.wait();
            reaper.update(|state| state.reaped = true);
            reaper.reaped.notify_all();
        });
        Process {
            name,
            pid,
            stdin,
            shared,
            tail_on_panic,
            release: Some(release),
        }
    }
}

/// A running (or ended) child process. Dropping it kills its process group (SIGKILL) and
/// waits for it to be reaped, so that what it held (a port, a database connection) is free.
pub struct Process {
    name: String,
    pid: Pid,
    /// Held, so that a child that reads its input sees its end only when this is dropped (or
    /// [`Process::close_stdin`] is called).
    stdin: Option<ChildStdin>,
    shared: Arc<Shared>,
    tail_on_panic: usize,
    /// Dropped with the `Process`: the reaping thread then reaps it.
    release: Option<std::sync::mpsc::Sender<()>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// What the reading and reaping threads share with the [`Process`].
struct Shared {
    state: Mutex<State>,
    /// Signalled once the process is reaped (for the drop, which cannot await).
    reaped: Condvar,
    /// Bumped on every line and on the exit (for the async waits).
    changed: watch::Sender<()>,
}

#[derive(Default)]
struct State {
    lines: Vec<(Stream, String)>,
    stdout_closed: bool,
    status: Option<ExitStatus>,
    /// Its pid is free for the system to give again.
    reaped: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the lines intact.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.lock());
        self.changed.send_modify(|_| {});
    }
}

fn read_lines(
    pipe: Box<dyn Read + Send>,
    stream: Stream,
    shared: &Shared,
    log: Option<&Mutex<std::fs::File>>,
) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf)
            .trim_end_matches(['\n', '\r'])
            .to_owned();
        if let Some(log) = log {
            let _ = writeln!(log.lock().unwrap_or_else(|e| e.into_inner()), "{text}");
        }
        shared.update(|state| state.lines.push((stream, text)));
    }
    if stream == Stream::Stdout {
        shared.update(|state| state.stdout_closed = true);
    }
}

impl Process {
    /// How to start `command` as a process called `name` (in messages). Its stdin, stdout and
    /// stderr are taken over: stdin is a pipe held open, the output is kept.
    pub fn builder(name: impl Into<String>, command: Command) -> ProcessBuilder {
        ProcessBuilder {
            name: name.into(),
            command,
            log: None,
            tail_on_panic: DEFAULT_TAIL_ON_PANIC,
        }
    }

    /// Starts `command` as a process called `name`, with the defaults of [`Process::builder`].
    pub fn start(name: impl Into<String>, command: Command) -> Process {
        Process::builder(name, command).start()
    }

    /// Its name, as messages show it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its process id, which is also its process group's.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Its exit status, once it has ended.
    pub fn status(&self) -> Option<ExitStatus> {
        self.shared.lock().status
    }

    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        self.status().is_none()
    }

    /// Sends `signal` to the process itself (not its group), unless it has ended.
    pub fn signal(&self, signal: Signal) {
        if self.is_running() {
            let _ = kill(self.pid, signal);
        }
    }

    /// Sends `signal` to its whole process group.
    pub fn signal_group(&self, signal: Signal) {
        let _ = killpg(self.pid, signal);
    }

    /// Closes its stdin: a child that reads it sees its end.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to end; its status, or `None` when it still runs after `timeout`.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let mut changed = self.shared.changed.subscribe();
        let end = tokio::time::Instant::now() + timeout;
        loop {
            changed.borrow_and_update();
            if let Some(status) = self.status() {
                return Some(status);
            }
            if tokio::time::timeout_at(end, changed.changed())
                .await
                .is_err()
            {
                return self.status();
            }
        }
    }

    /// SIGTERM to the process, then its status within `timeout` (`None`: still running).
    pub async fn terminate(&self, timeout: Duration) -> Option<ExitStatus> {
        self.signal(Signal::SIGTERM);
        self.wait_exit(timeout).await
    }

    /// SIGKILL to its whole group (no cleanup at all), then its status once it has ended.
    pub async fn kill(&self) -> Option<ExitStatus> {
        self.signal_group(Signal::SIGKILL);
        self.wait_exit(REAP_DEADLINE).await
    }

    /// Its whole output so far, stdout and stderr interleaved as they came.
    pub fn output(&self) -> String {
        self.tail(usize::MAX)
    }

    /// The last `lines` lines of its output.
    pub fn tail(&self, lines: usize) -> String {
        let state = self.shared.lock();
        let from = state.lines.len().saturating_sub(lines);
        let mut out = String::new();
        for (_, line) in &state.lines[from..] {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// Waits for a line on its stdout (printed before the call or after) for which `find`
    /// gives a value, and returns that value. Panics with its output when the process closes
    /// its stdout (ends) first, or after `deadline`; `what` names the line in that message.
    pub async fn wait_for_line<T>(
        &self,
        what: &str,
        deadline: Duration,
        mut find: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let mut changed = self.shared.changed.subscribe();
        let end = tokio::time::Instant::now() + deadline;
        let mut next = 0;
        loop {
            changed.borrow_and_update();
            let closed = {
                let state = self.shared.lock();
                for (stream, line) in &state.lines[next..] {
                    if *stream == Stream::Stdout
                        && let Some(value) = find(line)
                    {
                        return value;
                    }
                }
                next = state.lines.len();
                state.stdout_closed
            };
            if closed {
                panic!(
                    "{} ended its output without printing {what} (exit status: {:?}); {}",
                    self.name,
                    self.status(),
                    self.failure_output()
                );
            }
            if tokio::time::timeout_at(end, changed.changed())
                .await
                .is_err()
            {
                panic!(
                    "{} did not print {what} within {deadline:?}; {}",
                    self.name,
                    self.failure_output()
                );
            }
        }
    }

    /// Waits until `addr` accepts TCP connections. Panics with its output when the process
    /// ends first, or after `deadline`.
    pub async fn wait_for_port(&self, addr: SocketAddr, deadline: Duration) {
        let what = format!("{} to listen on {addr}", self.name);
        let waited = Wait::new(what, deadline)
            .every(Duration::from_millis(50))
            .try_until(|| async {
                if let Some(status) = self.status() {
                    panic!(
                        "{} ended ({status}) before listening on {addr}; {}",
                        self.name,
                        self.failure_output()
                    );
                }
                tokio::net::TcpStream::connect(addr).await.map(drop)
            })
            .await;
        if let Err(timeout) = waited {
            panic!("{timeout}; {}", self.failure_output());
        }
    }

    fn failure_output(&self) -> String {
        format!(
            "its output (last {FAILURE_LINES} lines):\n{}",
            self.tail(FAILURE_LINES)
        )
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stdin.take();
        self.signal_group(Signal::SIGKILL);
        self.release.take();
        let state = self.shared.lock();
        let _ = self
            .shared
            .reaped
            .wait_timeout_while(state, REAP_DEADLINE, |s| !s.reaped);
        if self.tail_on_panic > 0 && std::thread::panicking() {
            eprintln!(
                "----- {} (last {} lines of its output) -----\n{}",
                self.name,
                self.tail_on_panic,
                self.tail(self.tail_on_panic)
            );
        }
    }
}

/// The status of child `pid` once it has ended, read without reaping it.
fn exit_status(pid: Pid) -> ExitStatus {
    use nix::errno::Errno;
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    use std::os::unix::process::ExitStatusExt;
    loop {
        // As `waitpid` encodes them: the code in the second byte, or the signal and a core flag.
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(WaitStatus::Exited(_, code)) => return ExitStatus::from_raw((code & 0xff) << 8),
            Ok(WaitStatus::Signaled(_, signal, core)) => {
                return ExitStatus::from_raw(signal as i32 | if core { 0x80 } else { 0 });
            }
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(e) => panic!("cannot wait for a child process: {e}"),
        }
    }
}

/// Whether process `pid` is gone: no `/proc` entry, or a zombie (it has exited; its parent,
/// maybe init, has yet to collect its status).
pub fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait::wait_until_sync;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    /// Reaped at its exit, a process's pid could be given to another process before the
    /// drop's SIGKILL to its group, which would then reach a stranger (another test).
    #[tokio::test]
    async fn an_ended_process_keeps_its_pid_until_it_is_dropped() {
        let p = Process::start("quick", sh("exit 3"));
        let status = p.wait_exit(Duration::from_secs(30)).await;
        assert_eq!(status.and_then(|s| s.code()), Some(3));
        let stat = format!("/proc/{}/stat", p.pid());
        assert!(std::fs::exists(&stat).unwrap(), "reaped before the drop");
        drop(p);
        assert!(!std::fs::exists(&stat).unwrap(), "the drop reaps it");
    }

    #[tokio::test]
    async fn its_group_is_killed_on_drop() {
        // The shell's background child is in the shell's group, not the test's.
        let p = Process::start("sleeper", sh("sleep 1000 & echo child $!; wait"));
        let child: i32 = p
            .wait_for_line("the child's pid", Duration::from_secs(30), |line| {
                line.strip_prefix("child ")?.parse().ok()
            })
            .await;
        let leader = p.pid().as_raw();
        assert!(!is_gone(child) && !is_gone(leader));
        assert_eq!(
            nix::unistd::getpgid(Some(Pid::from_raw(child))).expect("its group"),
            p.pid()
        );
        drop(p);
        assert!(
            is_gone(leader),
            "the drop waits for the process to be reaped"
        );
        wait_until_sync(
            "the background child to be gone",
            Duration::from_secs(30),
            || is_gone(child),
        )
        .await;
    }

    #[tokio::test]
    async fn output_is_kept_and_the_exit_status_known() {
        let mut p = Process::start("echo", sh("echo out; echo err >&2; read line; exit 3"));
        let seen = p
            .wait_for_line("out", Duration::from_secs(30), |line| {
                (line == "out").then_some(line.to_owned())
            })
            .await;
        assert_eq!(seen, "out");
        assert!(p.is_running(), "it waits for its input to end");
        p.close_stdin();
        let status = p.wait_exit(Duration::from_secs(30)).await.expect("ended");
        assert_eq!(status.code(), Some(3));
        // Both streams are read to their end before the pipes close; the exit may come first.
        wait_until_sync("both lines", Duration::from_secs(30), || {
            p.output().lines().count() == 2
        })
        .await;
        let output = p.output();
        assert!(
            output.contains("out\n") && output.contains("err\n"),
            "{output}"
        );
        assert_eq!(p.tail(1).lines().count(), 1);
    }

    #[tokio::test]
    #[should_panic(expected = "quiet ended its output without printing READY")]
    async fn a_line_never_printed_fails_with_the_output() {
        let p = Process::start("quiet", sh("echo something else"));
        p.wait_for_line("READY", Duration::from_secs(30), |line| {
            (line == "READY").then_some(())
        })
        .await;
    }

    #[tokio::test]
    async fn terminate_and_log_file() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let log = dir.path().join("p.log");
        let p = Process::builder(
            "trapper",
            sh("trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.05; done"),
        )
        .log(&log)
        .start();
        p.wait_for_line("up", Duration::from_secs(30), |l| (l == "up").then_some(()))
            .await;
        let status = p.terminate(Duration::from_secs(30)).await.expect("ended");
        assert!(status.success(), "{status}");
        wait_until_sync("the log file", Duration::from_secs(30), || {
            std::fs::read_to_string(&log).unwrap_or_default() == "up\nbye\n"
        })
        .await;
    }

    #[tokio::test]
    async fn a_port_is_awaited() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = listener.local_addr().expect("address");
        let p = Process::start("idle", sh("sleep 1000"));
        // Listening already (the test holds the socket): the wait ends at once.
        p.wait_for_port(addr, Duration::from_secs(30)).await;
        let killed = p.kill().await.expect("reaped");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&killed),
            Some(Signal::SIGKILL as i32)
        );
    }

    #[tokio::test]
    #[should_panic(expected = "ended (exit status: 0) before listening on")]
    async fn a_port_wait_ends_when_the_process_does() {
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let p = Process::start("short", sh("exit 0"));
        p.wait_for_port(free, Duration::from_secs(30)).await;
    }
}
