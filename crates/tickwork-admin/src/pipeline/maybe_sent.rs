//! Runs a node left `sending` when it died: maybe sent. They are resolved, never guessed:
//! the executors that could have them are asked first, and only what they cannot answer for
//! follows the job's rule.

use tickwork_core::HANDLE_CODE_FAIL;
use tickwork_core::run::RunState;
use tickwork_store::{Run, RunComplete};
use tracing::{info, warn};

use super::cluster::Adoption;

impl Adoption {
    /// Resolves runs this node took over in the `sending` state (adopted from a dead node,
    /// or its own after a crash).
    pub(crate) async fn resolve_maybe_sent(&self, runs: Vec<Run>) {
        let now = self.inner.clock.now_ms();
        let lost: Vec<RunComplete> = runs
            .iter()
            .map(|run| RunComplete {
                run_id: run.id,
                handle_code: HANDLE_CODE_FAIL,
                handle_msg: Some(
                    "maybe sent: its admin stopped while sending it, and no executor could say \
                     whether it has it; not sent again (at most once)"
                        .to_owned(),
                ),
                state: RunState::Lost,
                at: now,
            })
            .collect();
        let n = lost.len();
        match self.scheduler().complete_many(&lost).await {
            Ok(ended) => info!(runs = n, ended, "maybe-sent runs ended as lost"),
            Err(e) => {
                warn!(error = %e, runs = n, "maybe-sent runs not resolved; they stay sending")
            }
        }
    }
}
