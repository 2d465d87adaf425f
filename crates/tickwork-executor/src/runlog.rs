//! Per-run log files: `<logs>/<yyyy-MM-dd>/<logId>.log`, the date being the trigger time in the
//! executor's time zone (as XXL-JOB does, so the admin's `/log` request names the same file),
//! read by line range for `/log`, and deleted after a number of days.
//!
//! Every write goes through one writer thread: creating a file can take milliseconds on a busy
//! file system (ext4 right after a mass deletion manages about a thousand per second), and that
//! must not stall the async threads that answer the admin.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use tickwork_protocol::{LogParam, LogResult, msg};
use tokio::sync::{mpsc, oneshot};

/// Work for the writer thread.
enum Op {
    Append {
        log: Arc<RunLogInner>,
        line: String,
        done: Option<oneshot::Sender<()>>,
    },
    /// Answered once everything sent before it is written.
    Barrier(oneshot::Sender<()>),
}

/// The run log folders of one executor.
#[derive(Debug, Clone)]
pub(crate) struct RunLogs {
    root: PathBuf,
    tz: TimeZone,
    tx: mpsc::UnboundedSender<Op>,
}

impl RunLogs {
    /// Starts the writer thread; it ends when the last handle on it is dropped.
    pub(crate) fn new(root: PathBuf, tz: TimeZone) -> io::Result<Self> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Op>();
        std::thread::Builder::new()
            .name("tickwork-runlog".into())
            .spawn(move || {
                while let Some(op) = rx.blocking_recv() {
                    match op {
                        Op::Append { log, line, done } => {
                            if let Err(e) = log.write_line(&line) {
                                tracing::warn!(path = %log.path.display(), error = %e, "cannot write run log");
                            }
                            if let Some(done) = done {
                                let _ = done.send(());
                            }
                        }
                        Op::Barrier(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(RunLogs { root, tz, tx })
    }

    /// Waits until every line queued so far is written.
    pub(crate) async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Op::Barrier(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// The date folder name of a trigger time.
    fn date_dir(&self, log_date_time: i64) -> String {
        // An out-of-range time (garbage from a peer) still needs a file; the epoch is as good
        // as any and cannot collide with a real trigger's folder in practice.
        let ts = Timestamp::from_millisecond(log_date_time).unwrap_or(Timestamp::UNIX_EPOCH);
        ts.to_zoned(self.tz.clone())
            .strftime("%Y-%m-%d")
            .to_string()
    }

    pub(crate) fn path(&self, log_date_time: i64, log_id: i64) -> PathBuf {
        self.root
            .join(self.date_dir(log_date_time))
            .join(format!("{log_id}.log"))
    }

    pub(crate) fn open(&self, log_date_time: i64, log_id: i64) -> RunLog {
        RunLog {
            inner: Arc::new(RunLogInner {
                path: self.path(log_date_time, log_id),
                tz: self.tz.clone(),
                file: Mutex::new(None),
                tx: self.tx.clone(),
            }),
        }
    }

    /// Answers `/log`: the lines from `from_line_num` to the end of the file.
    pub(crate) async fn read(&self, param: &LogParam) -> LogResult {
        let path = self.path(param.log_date_time, param.log_id);
        match tokio::fs::read(&path).await {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let (to_line_num, log_content) = read_lines(&text, param.from_line_num);
                LogResult {
                    from_line_num: param.from_line_num,
                    to_line_num,
                    log_content,
                    is_end: false,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => LogResult {
                from_line_num: param.from_line_num,
                to_line_num: 0,
                log_content: msg::LOG_FILE_MISSING.to_owned(),
                is_end: true,
            },
            Err(e) => LogResult {
                from_line_num: param.from_line_num,
                to_line_num: 0,
                log_content: format!("readLog fail, {e}"),
                is_end: false,
            },
        }
    }

    /// Deletes the date folders at least `retention_days` old (relative to `today`); returns how
    /// many were deleted. Other entries (script sources, the callback spool) are left alone.
    pub(crate) fn cleanup(&self, retention_days: u32, today: Date) -> io::Result<usize> {
        let mut removed = 0;
        let entries = match fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(date) = Date::strptime("%Y-%m-%d", &name) else {
                continue;
            };
            let age_days = date
                .until(today)
                .map(|span| i64::from(span.get_days()))
                .unwrap_or(0);
            if age_days >= i64::from(retention_days) && entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    pub(crate) fn today(&self) -> Date {
        Timestamp::now().to_zoned(self.tz.clone()).date()
    }
}

/// Lines numbered from 1; returns the number of the last line at or after `from` and those
/// lines, each followed by a newline, or 0 and nothing when there is no such line (3.3+ style).
pub(crate) fn read_lines(text: &str, from: i32) -> (i32, String) {
    let mut to = 0;
    let mut content = String::new();
    let mut number: i32 = 0;
    let body = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return (0, content);
    }
    for line in body.split('\n') {
        number = number.saturating_add(1);
        if number >= from {
            content.push_str(line.strip_suffix('\r').unwrap_or(line));
            content.push('\n');
            to = number;
        }
    }
    (to, content)
}

/// The log file of one run. Cheap to clone; lines written through any clone go to the same
/// file in order, one whole line per write.
#[derive(Clone)]
pub struct RunLog {
    inner: Arc<RunLogInner>,
}

struct RunLogInner {
    path: PathBuf,
    tz: TimeZone,
    /// Opened and written by the writer thread only.
    file: Mutex<Option<File>>,
    tx: mpsc::UnboundedSender<Op>,
}

impl RunLogInner {
    fn write_line(&self, line: &str) -> io::Result<()> {
        // A poisoned lock only means a writer panicked mid-line; the file is still fine.
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            *file = Some(open_append(&self.path)?);
        }
        file.as_mut()
            .expect("opened above")
            .write_all(line.as_bytes())
    }
}

impl fmt::Debug for RunLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunLog")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl RunLog {
    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn stamp(&self, message: &str) -> String {
        let now = Timestamp::now().to_zoned(self.inner.tz.clone());
        format!("{} {message}\n", now.strftime("%Y-%m-%d %H:%M:%S"))
    }

    fn send(&self, message: &str, done: Option<oneshot::Sender<()>>) -> bool {
        let op = Op::Append {
            log: Arc::clone(&self.inner),
            line: self.stamp(message),
            done,
        };
        self.inner.tx.send(op).is_ok()
    }

    /// Appends `message` as a line stamped with the local time, without waiting for the disk.
    /// A write failure is logged and otherwise ignored: a run must not fail because its log
    /// could not be written.
    pub fn append(&self, message: &str) {
        self.send(message, None);
    }

    /// Appends a line and waits until it is written.
    pub async fn write(&self, message: &str) {
        let (done, wait) = oneshot::channel();
        if self.send(message, Some(done)) {
            let _ = wait.await;
        }
    }

    /// A separate append handle on the file, for a child process's stdout and stderr.
    pub(crate) async fn child_output(&self) -> io::Result<File> {
        let path = self.inner.path.clone();
        tokio::task::spawn_blocking(move || open_append(&path))
            .await
            .map_err(io::Error::other)?
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    let open = || OpenOptions::new().create(true).append(true).open(path);
    match open() {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            open()
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_follows_the_reference() {
        let text = "l1\nl2\r\nl3\n";
        assert_eq!(read_lines(text, 1), (3, "l1\nl2\nl3\n".to_owned()));
        assert_eq!(read_lines(text, 3), (3, "l3\n".to_owned()));
        assert_eq!(read_lines(text, 4), (0, String::new()));
        assert_eq!(read_lines("a\nb", 2), (2, "b\n".to_owned()));
        assert_eq!(read_lines("", 1), (0, String::new()));
        assert_eq!(read_lines("\n", 1), (1, "\n".to_owned()));
    }

    #[test]
    fn date_folder_uses_the_executor_zone() {
        let tz = TimeZone::get("Asia/Shanghai").unwrap();
        let logs = RunLogs::new(PathBuf::from("logs"), tz).unwrap();
        // 2024-06-10 16:00:00 UTC is 2024-06-11 00:00 in Shanghai.
        let p = logs.path(1_718_035_200_000, 7);
        assert_eq!(p, PathBuf::from("logs/2024-06-11/7.log"));
    }

    #[test]
    fn cleanup_removes_only_old_date_folders() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "2024-01-01",
            "2024-01-07",
            "2024-01-08",
            "gluesource",
            "callbacklogs",
        ] {
            fs::create_dir(dir.path().join(name)).unwrap();
        }
        let logs = RunLogs::new(dir.path().to_owned(), TimeZone::UTC).unwrap();
        let today = Date::constant(2024, 1, 10);
        assert_eq!(logs.cleanup(3, today).unwrap(), 2);
        assert!(dir.path().join("2024-01-08").exists());
        assert!(dir.path().join("gluesource").exists());
        assert!(!dir.path().join("2024-01-07").exists());
    }
}
