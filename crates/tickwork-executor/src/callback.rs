//! Run results to the admin: queued, posted in batches to `/api/callback`, and when no admin
//! accepts a batch, spooled to `<logs>/callbacklogs/*.json` and resent with backoff (also by
//! the next executor started on the same folder). A spool file is deleted only after an admin
//! accepted its batch, so no result is lost short of losing the disk.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tickwork_protocol::HandleCallbackParam;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::admin::AdminClient;
use crate::executor::Counters;

/// Java truncates result messages at this many characters.
const MAX_MESSAGE_CHARS: usize = 50_000;

/// Cuts a result message as XXL-JOB does: at 50 000 characters, followed by `...`.
pub(crate) fn truncate_message(msg: String) -> String {
    match msg.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}...", &msg[..cut]),
        None => msg,
    }
}

/// The queue that workers put results into. Never blocks: results are small and a worker must
/// not stall behind a slow admin.
#[derive(Debug, Clone)]
pub(crate) struct CallbackQueue {
    tx: mpsc::UnboundedSender<HandleCallbackParam>,
    counters: Arc<Counters>,
    /// Told the run id of each result (a pull executor gives the admin a credit back).
    ended: Option<mpsc::UnboundedSender<i64>>,
}

impl CallbackQueue {
    pub(crate) fn new(
        counters: Arc<Counters>,
        ended: Option<mpsc::UnboundedSender<i64>>,
    ) -> (Self, mpsc::UnboundedReceiver<HandleCallbackParam>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            CallbackQueue {
                tx,
                counters,
                ended,
            },
            rx,
        )
    }

    pub(crate) fn push(&self, callback: HandleCallbackParam) {
        self.counters.result_queued(callback.log_id);
        if let Some(ended) = &self.ended {
            let _ = ended.send(callback.log_id);
        }
        if self.tx.send(callback).is_err() {
            // Only after the sender has been stopped, which shutdown does once every worker
            // has ended: reaching this is a bug, and the log line keeps the result.
            tracing::error!("callback queue closed; result dropped");
        }
    }
}

/// The on-disk spool of undelivered batches.
pub(crate) struct Spool {
    dir: PathBuf,
    seq: AtomicU64,
    /// Set when a batch could not be delivered; new batches then go straight to the spool
    /// instead of each waiting for the admin timeout. Cleared by a successful resend.
    admin_down: AtomicBool,
    /// Wakes the resend loop when a batch was spooled.
    spooled: Notify,
    /// Batches that could not even be written to disk (disk full...), kept for the resend loop.
    memory: Mutex<Vec<Vec<HandleCallbackParam>>>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Spool {
    /// Opens the spool folder, creating it, and recovers batches whose write was interrupted
    /// after the data reached the disk but before the rename.
    pub(crate) fn open(dir: PathBuf) -> io::Result<Self> {
        fs::create_dir_all(&dir)?;
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Some(final_name) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) {
                match read_batch(&path) {
                    Ok(_) => fs::rename(&path, dir.join(final_name))?,
                    Err(_) => fs::remove_file(&path)?,
                }
            }
        }
        Ok(Spool {
            dir,
            seq: AtomicU64::new(0),
            admin_down: AtomicBool::new(false),
            spooled: Notify::new(),
            memory: Mutex::new(Vec::new()),
        })
    }

    /// Writes a batch durably: temp file, fsync, rename, fsync of the folder.
    fn write(&self, batch: &[HandleCallbackParam]) -> io::Result<PathBuf> {
        let millis = jiff::Timestamp::now().as_millisecond();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let name = format!("callback-{millis:013}-{}-{seq:06}.json", std::process::id());
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let path = self.dir.join(&name);
        let mut file = File::create(&tmp)?;
        file.write_all(&tickwork_protocol::encode(&batch))?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &path)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(path)
    }

    /// Spool files, oldest first.
    fn files(&self) -> io::Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('.') && n.ends_with(".json"))
            })
            .collect();
        files.sort();
        Ok(files)
    }

    /// How many batches wait in the spool (files and in-memory leftovers).
    pub(crate) fn pending(&self) -> usize {
        let memory = self.memory.lock().map(|m| m.len()).unwrap_or(0);
        self.files().map(|f| f.len()).unwrap_or(0) + memory
    }

    /// Keeps an undelivered batch: on disk, or in memory when the disk refuses.
    async fn keep(self: &Arc<Self>, batch: Vec<HandleCallbackParam>, counters: &Counters) {
        let n = batch.len() as u64;
        let spool = Arc::clone(self);
        let outcome = tokio::task::spawn_blocking(move || match spool.write(&batch) {
            Ok(path) => Ok(path),
            Err(e) => Err((e, batch)),
        })
        .await;
        match outcome {
            Ok(Ok(path)) => {
                counters.callbacks_spooled.fetch_add(n, Ordering::Relaxed);
                tracing::info!(path = %path.display(), count = n, "callbacks spooled");
            }
            Ok(Err((e, batch))) => {
                let ids: Vec<i64> = batch.iter().map(|c| c.log_id).collect();
                tracing::error!(error = %e, ?ids, "cannot spool callbacks; kept in memory");
                self.memory
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(batch);
            }
            Err(e) => tracing::error!(error = %e, "callback spool task failed"),
        }
        self.admin_down.store(true, Ordering::Relaxed);
        self.spooled.notify_one();
    }
}

fn read_batch(path: &Path) -> io::Result<Vec<HandleCallbackParam>> {
    let bytes = fs::read(path)?;
    tickwork_protocol::decode(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Posts a batch, or spools it when no admin accepts it.
async fn deliver(
    admin: &AdminClient,
    spool: &Arc<Spool>,
    batch: Vec<HandleCallbackParam>,
    counters: &Counters,
) {
    if batch.is_empty() {
        return;
    }
    if spool.admin_down.load(Ordering::Relaxed) {
        spool.keep(batch, counters).await;
        return;
    }
    let body = Bytes::from(tickwork_protocol::encode(&batch));
    match admin.call("callback", body).await {
        Ok(_) => counters.results_delivered(&batch),
        Err(e) => {
            tracing::warn!(error = %e, count = batch.len(), "callback not accepted; spooling");
            spool.keep(batch, counters).await;
        }
    }
}

/// How many callback requests one executor has open at once.
const MAX_IN_FLIGHT: usize = 4;

/// Takes results off the queue and posts them in batches until `stop`, then drains the queue
/// (spooling what no admin takes) and returns.
pub(crate) async fn sender_loop(
    mut rx: mpsc::UnboundedReceiver<HandleCallbackParam>,
    admin: Arc<AdminClient>,
    spool: Arc<Spool>,
    batch_size: usize,
    linger: Duration,
    stop: CancellationToken,
    counters: Arc<Counters>,
) {
    // Batches go out concurrently: one request at a time caps completions at one batch per
    // admin round trip, which a busy executor outruns.
    let mut in_flight = tokio::task::JoinSet::new();
    loop {
        let mut batch = Vec::with_capacity(batch_size);
        tokio::select! {
            biased;
            n = rx.recv_many(&mut batch, batch_size) => {
                if n == 0 {
                    break;
                }
            }
            _ = stop.cancelled() => break,
        }
        if batch.len() < batch_size && !linger.is_zero() {
            // A short wait turns a burst of completions into one request.
            tokio::select! {
                _ = tokio::time::sleep(linger) => {}
                _ = stop.cancelled() => {}
            }
            while batch.len() < batch_size {
                match rx.try_recv() {
                    Ok(c) => batch.push(c),
                    Err(_) => break,
                }
            }
        }
        while in_flight.len() >= MAX_IN_FLIGHT {
            in_flight.join_next().await;
        }
        let (admin, spool, counters) = (admin.clone(), spool.clone(), counters.clone());
        in_flight.spawn(async move { deliver(&admin, &spool, batch, &counters).await });
    }
    while in_flight.join_next().await.is_some() {}
    // Final flush: everything still queued goes out (or to the spool) before shutdown ends.
    loop {
        let mut batch = Vec::with_capacity(batch_size);
        while batch.len() < batch_size {
            match rx.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            break;
        }
        deliver(&admin, &spool, batch, &counters).await;
    }
}

/// Resends spooled batches: once at start (the previous process's leftovers), then after each
/// spooling with a delay doubling from `min` to `max` while the admin refuses, and every `max`
/// anyway to pick up files left by others.
pub(crate) async fn resend_loop(
    admin: Arc<AdminClient>,
    spool: Arc<Spool>,
    min: Duration,
    max: Duration,
    stop: CancellationToken,
    counters: Arc<Counters>,
) {
    let mut delay = Duration::ZERO;
    let mut idle = false;
    loop {
        if idle {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = spool.spooled.notified() => delay = min,
                _ = tokio::time::sleep(max) => delay = Duration::ZERO,
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        let delivered_all = tokio::select! {
            _ = stop.cancelled() => return,
            ok = resend_pass(&admin, &spool, &counters) => ok,
        };
        if delivered_all {
            spool.admin_down.store(false, Ordering::Relaxed);
            idle = true;
        } else {
            idle = false;
            delay = (delay * 2).clamp(min, max);
        }
    }
}

/// One pass over the spool; true when nothing is left.
async fn resend_pass(admin: &AdminClient, spool: &Arc<Spool>, counters: &Counters) -> bool {
    let leftovers = std::mem::take(&mut *spool.memory.lock().unwrap_or_else(|e| e.into_inner()));
    for (i, batch) in leftovers.iter().enumerate() {
        let body = Bytes::from(tickwork_protocol::encode(batch));
        if let Err(e) = admin.call("callback", body).await {
            tracing::debug!(error = %e, "callback resend refused");
            let mut memory = spool.memory.lock().unwrap_or_else(|e| e.into_inner());
            memory.extend(leftovers.into_iter().skip(i));
            return false;
        }
        counters.results_delivered(batch);
    }
    let files = match spool.files() {
        Ok(files) => files,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the callback spool");
            return false;
        }
    };
    for path in files {
        let batch = match read_batch(&path) {
            Ok(batch) => batch,
            Err(e) => {
                // Keep the bytes for a human, out of the way of the resend loop.
                let aside = path.with_extension("json.corrupt");
                tracing::error!(path = %path.display(), error = %e, "unreadable spool file set aside");
                let _ = fs::rename(&path, aside);
                continue;
            }
        };
        let body = Bytes::from(tickwork_protocol::encode(&batch));
        if let Err(e) = admin.call("callback", body).await {
            tracing::debug!(error = %e, "callback resend refused");
            return false;
        }
        counters.results_delivered(&batch);
        if let Err(e) = fs::remove_file(&path) {
            // Sending the batch again later is harmless: the admin ignores repeat callbacks.
            tracing::warn!(path = %path.display(), error = %e, "cannot delete a resent spool file");
        }
        tracing::info!(path = %path.display(), count = batch.len(), "spooled callbacks resent");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cb(id: i64) -> HandleCallbackParam {
        HandleCallbackParam {
            log_id: id,
            log_date_time: 1,
            handle_code: 200,
            handle_msg: None,
        }
    }

    #[test]
    fn spool_writes_atomically_and_recovers_finished_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path().join("callbacklogs")).unwrap();
        let path = spool.write(&[cb(1), cb(2)]).unwrap();
        assert_eq!(read_batch(&path).unwrap(), vec![cb(1), cb(2)]);
        // A complete temp file (crash before rename) is recovered; a torn one is dropped.
        let folder = dir.path().join("callbacklogs");
        fs::write(
            folder.join(".callback-x.json.tmp"),
            tickwork_protocol::encode(&[cb(3)]),
        )
        .unwrap();
        fs::write(folder.join(".callback-y.json.tmp"), b"[{\"logId\":").unwrap();
        let spool = Spool::open(folder.clone()).unwrap();
        let files = spool.files().unwrap();
        assert_eq!(files.len(), 2);
        assert!(folder.join("callback-x.json").exists());
        assert!(!folder.join(".callback-y.json.tmp").exists());
    }

    #[test]
    fn long_messages_are_cut_like_java() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let cut = truncate_message(long);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS + 3);
        assert!(cut.ends_with("..."));
        assert_eq!(truncate_message("short".into()), "short");
    }
}
