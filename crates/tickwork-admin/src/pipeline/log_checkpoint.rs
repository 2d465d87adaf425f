//! The log checkpointer: copies SQLite's write-ahead log into the database file beside the
//! writes, so that no commit of the one writer pays for it (see `Store::log_checkpoint`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{debug, warn};

use super::Inner;

/// How often the log is copied. Database IO, so real time, not the scheduler's clock. Pages
/// written again within one interval are copied once.
const EVERY: Duration = Duration::from_millis(500);

/// Checkpoints the log every [`EVERY`] until the admin stops; counted in
/// `Stats::log_checkpoints`. A failure is logged once per run of failures and tried again
/// next round: meanwhile the writer's own backstop keeps the log bounded.
pub(super) async fn log_checkpoint_loop(inner: Arc<Inner>) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
        match inner.store.log_checkpoint().await {
            Ok(done) => {
                failing = false;
                inner.stats.log_checkpoints.fetch_add(1, Ordering::Relaxed);
                debug!(
                    frames = done.frames,
                    copied = done.copied,
                    "log checkpointed"
                );
            }
            Err(e) if !failing => {
                failing = true;
                warn!(error = %e, "log checkpoint failed");
            }
            Err(_) => {}
        }
    }
}
