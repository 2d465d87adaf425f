//! Per-run log files: `<logs>/<yyyy-MM-dd>/<logId>.log`, the date being the trigger time in the
//! executor's time zone (as XXL-JOB does, so the admin's `/log` request names the same file),
//! read by line range for `/log`, and deleted after a number of days. A `/log` page is read
//! from the file line by line and holds at most [`PAGE_MAX_LINES`] lines and about
//! [`PAGE_MAX_BYTES`] bytes, so a huge log is never loaded whole. Logs are readable by the
//! executor's user only (files 0600, folders 0700): scripts print what they like into them.
//!
//! Every write goes through one writer thread: creating a file can take milliseconds on a busy
//! file system (ext4 right after a mass deletion manages about a thousand per second), and that
//! must not stall the async threads that answer the admin.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use tickwork_protocol::{LogParam, LogResult, msg};
use tokio::sync::{mpsc, oneshot};

/// Most lines in one `/log` page; the reader asks again from the next line.
pub(crate) const PAGE_MAX_LINES: usize = 2000;
/// Most bytes of content in one `/log` page (a longer first line is cut to this).
pub(crate) const PAGE_MAX_BYTES: usize = 1024 * 1024;

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

    /// Answers `/log`: one page of lines from `from_line_num` on (see [`read_page`]).
    pub(crate) async fn read(&self, param: &LogParam) -> LogResult {
        let path = self.path(param.log_date_time, param.log_id);
        let from = param.from_line_num;
        let page = tokio::task::spawn_blocking(move || {
            let file = File::open(&path)?;
            read_page(BufReader::new(file), from, PAGE_MAX_LINES, PAGE_MAX_BYTES)
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)));
        match page {
            Ok((to_line_num, log_content)) => LogResult {
                from_line_num: from,
                to_line_num,
                log_content,
                is_end: false,
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => LogResult {
                from_line_num: from,
                to_line_num: 0,
                log_content: msg::LOG_FILE_MISSING.to_owned(),
                is_end: true,
            },
            Err(e) => LogResult {
                from_line_num: from,
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

/// One page of a log: lines numbered from 1, starting at `from` (at least 1), at most
/// `max_lines` of them and no more than `max_bytes` of content (a first line longer than that
/// is cut, and counts as read). Returns the number of the last line returned and the lines,
/// each followed by a newline (a `\r` before it dropped), or 0 and nothing when there is no
/// line at `from` (3.3+ style).
///
/// Only the page is kept in memory: the lines before `from` are skipped as they are read, and
/// reading stops at the end of the page, whatever the size of the file.
pub(crate) fn read_page(
    mut reader: impl BufRead,
    from: i32,
    max_lines: usize,
    max_bytes: usize,
) -> io::Result<(i32, String)> {
    let from = from.max(1);
    let mut number: i32 = 0;
    while number < from - 1 {
        if reader.skip_until(b'\n')? == 0 {
            return Ok((0, String::new()));
        }
        number += 1;
    }
    let mut content = String::new();
    let mut to = 0;
    let mut line = Vec::new();
    for index in 0..max_lines {
        let budget = max_bytes.saturating_sub(content.len());
        line.clear();
        let (read, whole) = read_line_capped(&mut reader, &mut line, budget)?;
        if read == 0 {
            break;
        }
        // A later line that does not fit waits for the next page; a first one is cut.
        if !whole && index > 0 {
            break;
        }
        number = number.saturating_add(1);
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        content.push_str(&String::from_utf8_lossy(&line));
        content.push('\n');
        to = number;
        if !whole || content.len() >= max_bytes {
            break;
        }
    }
    Ok((to, content))
}

/// Reads one line (through its `\n`, or to the end of the input), keeping at most `cap`
/// bytes of it in `out` and skipping the rest. Returns the bytes consumed (0 at the end of
/// the input) and whether the whole line was kept.
fn read_line_capped(
    reader: &mut impl BufRead,
    out: &mut Vec<u8>,
    cap: usize,
) -> io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut whole = true;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((consumed, whole));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = cap.saturating_sub(out.len());
        if chunk.len() > room {
            // The newline itself needs no room: it is dropped from the page anyway.
            let content = chunk.strip_suffix(b"\n").unwrap_or(chunk);
            if content.len() > room {
                whole = false;
            }
            out.extend_from_slice(&content[..content.len().min(room)]);
        } else {
            out.extend_from_slice(chunk);
        }
        let n = chunk.len();
        reader.consume(n);
        consumed += n;
        if done {
            return Ok((consumed, whole));
        }
    }
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
    let open = || {
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
    };
    match open() {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                create_private_dir(dir)?;
            }
            open()
        }
        Err(e) => Err(e),
    }
}

/// Creates `dir` and its missing parents readable by the owner only (0700).
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn page(text: &str, from: i32) -> (i32, String) {
        read_page(text.as_bytes(), from, 1000, 1 << 20).unwrap()
    }

    #[test]
    fn paging_follows_the_reference() {
        let text = "l1\nl2\r\nl3\n";
        assert_eq!(page(text, 1), (3, "l1\nl2\nl3\n".to_owned()));
        assert_eq!(page(text, 0), (3, "l1\nl2\nl3\n".to_owned()));
        assert_eq!(page(text, 3), (3, "l3\n".to_owned()));
        assert_eq!(page(text, 4), (0, String::new()));
        assert_eq!(page("a\nb", 2), (2, "b\n".to_owned()));
        assert_eq!(page("", 1), (0, String::new()));
        assert_eq!(page("\n", 1), (1, "\n".to_owned()));
        assert_eq!(page("a\n\nb\n", 2), (3, "\nb\n".to_owned()));
    }

    /// An endless log, "line 1", "line 2", ..., counting the bytes handed out.
    struct Endless {
        next: u64,
        pending: Vec<u8>,
        handed_out: Arc<AtomicU64>,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pending.is_empty() {
                self.next += 1;
                self.pending = format!("line {}\n", self.next).into_bytes();
            }
            let n = buf.len().min(self.pending.len());
            buf[..n].copy_from_slice(&self.pending[..n]);
            self.pending.drain(..n);
            self.handed_out.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
    }

    #[test]
    fn log_page_reads_only_its_lines_not_the_whole_file() {
        // The file never ends: a reader that wanted all of it would never return.
        let handed_out = Arc::new(AtomicU64::new(0));
        let endless = Endless {
            next: 0,
            pending: Vec::new(),
            handed_out: Arc::clone(&handed_out),
        };
        let (to, content) =
            read_page(BufReader::with_capacity(4096, endless), 50, 100, 1 << 20).unwrap();
        assert_eq!(to, 149);
        let lines: Vec<&str> = content.lines().collect();
        assert_eq!(lines.len(), 100);
        assert_eq!((lines[0], lines[99]), ("line 50", "line 149"));
        // What was read: the skipped lines, the page, at most one buffer more.
        let wanted: usize = (1..=149).map(|n| format!("line {n}\n").len()).sum();
        assert!(handed_out.load(Ordering::Relaxed) <= (wanted + 4096) as u64);
    }

    #[test]
    fn log_page_bytes_are_capped_and_long_lines_cut() {
        let long = "x".repeat(5000);
        let text = format!("{long}\nshort\n{long}\nend\n");
        // A first line over the cap is cut and counts as read.
        assert_eq!(
            read_page(text.as_bytes(), 1, 10, 100).unwrap(),
            (1, format!("{}\n", &long[..100]))
        );
        // A later line that does not fit waits for the next page.
        assert_eq!(
            read_page(text.as_bytes(), 2, 10, 100).unwrap(),
            (2, "short\n".to_owned())
        );
        assert_eq!(
            read_page(text.as_bytes(), 2, 10, 10_000).unwrap(),
            (4, format!("short\n{long}\nend\n"))
        );
        // The line cap.
        assert_eq!(
            read_page("a\nb\nc\n".as_bytes(), 1, 2, 100).unwrap(),
            (2, "a\nb\n".to_owned())
        );
    }

    #[tokio::test]
    async fn log_page_of_a_large_file_is_bounded_and_pages_continue() {
        let dir = tempfile::tempdir().unwrap();
        let logs = RunLogs::new(dir.path().to_owned(), TimeZone::UTC).unwrap();
        let path = logs.path(0, 9);
        create_private_dir(path.parent().unwrap()).unwrap();
        let total = PAGE_MAX_LINES * 3 + 5;
        let text: String = (1..=total).map(|n| format!("line {n}\n")).collect();
        fs::write(&path, text).unwrap();
        let mut from = 1;
        let mut seen = 0;
        loop {
            let page = logs
                .read(&LogParam {
                    log_date_time: 0,
                    log_id: 9,
                    from_line_num: from,
                })
                .await;
            assert!(!page.is_end, "an existing file is never the end by itself");
            if page.to_line_num < from {
                assert_eq!((page.to_line_num, page.log_content.as_str()), (0, ""));
                break;
            }
            let lines = page.log_content.lines().count();
            assert!(lines <= PAGE_MAX_LINES, "a page of {lines} lines");
            assert_eq!(page.to_line_num, from + lines as i32 - 1);
            assert_eq!(
                page.log_content.lines().next().unwrap(),
                format!("line {from}")
            );
            seen += lines;
            from = page.to_line_num + 1;
        }
        assert_eq!(seen, total);
    }

    #[tokio::test]
    async fn run_logs_are_readable_by_their_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("logs");
        let logs = RunLogs::new(root.clone(), TimeZone::UTC).unwrap();
        let log = logs.open(0, 3);
        log.write("secret output").await;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(log.path()), 0o600);
        assert_eq!(mode(log.path().parent().unwrap()), 0o700);
        let child = log.child_output().await.unwrap();
        drop(child);
        assert_eq!(mode(log.path()), 0o600);
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
