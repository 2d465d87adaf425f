//! Runs a node left `sending` when it died: maybe sent. They are resolved, never guessed: the
//! executors that could have them are asked first, and only what no executor can answer for
//! follows the rule for it.
//!
//! - A Tickwork executor answers from its record of the run ids it accepted
//!   (`/tickwork/accepted`), complete from the instant it gives.
//! - A Java executor has no such call. Its log file of a run exists once the run started
//!   (`/log`), so "it has a log" means accepted. "No log" with the job idle there (`/idleBeat`:
//!   no thread running it and nothing queued) means not accepted; "no log" with the job busy
//!   cannot be told apart from a run queued behind another one.
//! - Accepted somewhere: recorded as dispatched to that executor, whose callback ends it.
//!   Accepted nowhere, and every executor answered for it: never sent; it goes back to
//!   `planned` and fires under its misfire policy. Otherwise nobody can say, and the job's
//!   `delivery` decides: `AT_MOST_ONCE` (the default) ends it `lost` with an alarm,
//!   `AT_LEAST_ONCE` sends it again with the same run id.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;

use tickwork_core::Delivery;
use tickwork_core::run::RunState;
use tickwork_protocol::{CODE_SUCCESS, LogParam};
use tickwork_store::{Dispatched, MarkDispatched, Run, RunComplete, Unsend};
use tracing::{info, warn};

use super::cluster::{Adoption, Origin};
use crate::executor_client::{Answer, ExecutorClient};

/// What the executors said about one run.
#[derive(Debug, Default)]
struct Verdict {
    /// The executor that has it.
    accepted_by: Option<String>,
    /// Some executor could not say (no answer, busy, or its record starts too late).
    unknown: bool,
}

impl Adoption {
    /// Resolves runs this node took over in the `sending` state (adopted from a dead node, or
    /// its own after a crash).
    pub(crate) async fn resolve_maybe_sent(&self, runs: Vec<Run>) {
        let mut by_group: BTreeMap<i64, Vec<Run>> = BTreeMap::new();
        for run in runs {
            by_group.entry(run.group_id).or_default().push(run);
        }
        let mut accepted = Vec::new();
        let mut unsent = Vec::new();
        let mut unknown = Vec::new();
        for (group_id, runs) in by_group {
            let verdicts = match self.inner.addresses.executors(group_id).await {
                Ok((candidates, client)) => ask(&client, &candidates, &runs).await,
                Err(e) => {
                    warn!(group_id, error = %e, "executors not loaded: maybe-sent runs cannot be asked about");
                    HashMap::new()
                }
            };
            for run in runs {
                match verdicts.get(&run.id) {
                    Some(Verdict {
                        accepted_by: Some(address),
                        ..
                    }) => accepted.push((run, address.clone())),
                    Some(Verdict {
                        accepted_by: None,
                        unknown: false,
                    }) => unsent.push(run),
                    _ => unknown.push(run),
                }
            }
        }
        info!(
            accepted = accepted.len(),
            not_sent = unsent.len(),
            unknown = unknown.len(),
            "maybe-sent runs resolved by asking their executors"
        );
        self.record_accepted(accepted).await;
        self.fire_unsent(unsent).await;
        self.end_unknown(unknown).await;
    }

    async fn record_accepted(&self, runs: Vec<(Run, String)>) {
        if runs.is_empty() {
            return;
        }
        let at = self.inner.clock.now_ms();
        let batch = MarkDispatched {
            node_id: self.inner.config.node_id.clone(),
            runs: runs
                .into_iter()
                .map(|(run, address)| Dispatched {
                    run_id: run.id,
                    trigger_msg: Some(format!(
                        "maybe sent by a node that went away: {address} had accepted it"
                    )),
                    address,
                    trigger_code: CODE_SUCCESS,
                    at,
                })
                .collect(),
        };
        let n = batch.runs.len() as u64;
        match self.inner.store.runs_mark_dispatched(batch).await {
            Ok(_) => {
                self.inner
                    .stats
                    .runs_maybe_sent_accepted
                    .fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => warn!(error = %e, "accepted maybe-sent runs not recorded; they stay sending"),
        }
    }

    /// Runs no executor has: never sent. Back to `planned`, then fired under their misfire
    /// policy like any adopted run.
    async fn fire_unsent(&self, runs: Vec<Run>) {
        if runs.is_empty() {
            return;
        }
        let unsend = Unsend {
            node_id: self.inner.config.node_id.clone(),
            run_ids: runs.iter().map(|r| r.id).collect(),
        };
        match self.inner.store.runs_unsend(unsend).await {
            Ok(moved) => {
                let runs: Vec<Run> = runs
                    .into_iter()
                    .filter(|r| moved.binary_search(&r.id).is_ok())
                    .map(|r| Run {
                        state: RunState::Planned,
                        ..r
                    })
                    .collect();
                self.inner
                    .stats
                    .runs_maybe_sent_unsent
                    .fetch_add(runs.len() as u64, Ordering::Relaxed);
                Box::pin(self.take_over(runs, Origin::Adopted)).await;
            }
            Err(e) => warn!(error = %e, "unsent maybe-sent runs not given back; they stay sending"),
        }
    }

    /// Runs nobody can answer for follow their job's [`Delivery`]: at most once, they end
    /// `lost` (and alarm); at least once, they are sent again with the same run id.
    async fn end_unknown(&self, runs: Vec<Run>) {
        if runs.is_empty() {
            return;
        }
        let mut resend = Vec::new();
        let mut lose = Vec::new();
        for run in runs {
            match self.scheduler().job(run.job_id).await {
                Ok(c) if c.job.spec.delivery == Delivery::AtLeastOnce => resend.push(run),
                // A job that is gone or cannot be read: never twice.
                _ => lose.push(run),
            }
        }
        if !resend.is_empty() {
            warn!(
                runs = resend.len(),
                "maybe-sent runs nobody could answer for sent again (AT_LEAST_ONCE)"
            );
            self.inner
                .stats
                .runs_maybe_sent_resent
                .fetch_add(resend.len() as u64, Ordering::Relaxed);
            self.scheduler().arm_all(resend, 0);
        }
        self.lose(lose).await;
    }

    async fn lose(&self, runs: Vec<Run>) {
        if runs.is_empty() {
            return;
        }
        let now = self.inner.clock.now_ms();
        let lost: Vec<RunComplete> = runs
            .iter()
            .map(|run| {
                let reason = "maybe sent: its admin went away while sending it, and no executor \
                              could say whether it has it; not sent again (AT_MOST_ONCE)";
                RunComplete::lost(run.id, reason.to_owned(), now)
            })
            .collect();
        let n = lost.len();
        self.inner
            .stats
            .runs_maybe_sent_lost
            .fetch_add(n as u64, Ordering::Relaxed);
        match self.scheduler().complete_many(&lost, Vec::new()).await {
            Ok(ended) => warn!(
                runs = n,
                ended = ended.len(),
                "maybe-sent runs nobody could answer for ended as lost"
            ),
            Err(e) => {
                warn!(error = %e, runs = n, "maybe-sent runs not resolved; they stay sending")
            }
        }
    }
}

/// Asks every executor in `candidates` (or the run's own address, when it was sent to a chosen
/// one) about `runs`.
async fn ask(
    client: &ExecutorClient,
    candidates: &[String],
    runs: &[Run],
) -> HashMap<i64, Verdict> {
    let mut verdicts: HashMap<i64, Verdict> =
        runs.iter().map(|r| (r.id, Verdict::default())).collect();
    let mut addresses: Vec<String> = candidates.to_vec();
    for run in runs {
        if let Some(a) = &run.executor_address
            && !addresses.contains(a)
        {
            addresses.push(a.clone());
        }
    }
    if addresses.is_empty() {
        // No executor to ask: nobody can say.
        for v in verdicts.values_mut() {
            v.unknown = true;
        }
        return verdicts;
    }
    for address in &addresses {
        let mine: Vec<&Run> = runs
            .iter()
            .filter(|r| r.executor_address.as_deref().is_none_or(|a| a == address))
            .collect();
        let ids: Vec<i64> = mine.iter().map(|r| r.id).collect();
        let out = client.accepted(address, &ids).await;
        match (out.answer(), out.is_success(), out.payload) {
            (Answer::Answered, true, Some(record)) => {
                let has: HashSet<i64> = record.accepted.into_iter().collect();
                for run in mine {
                    let v = verdicts.get_mut(&run.id).expect("asked about");
                    if has.contains(&run.id) {
                        v.accepted_by = Some(address.clone());
                    } else if record.record_since > run.scheduled_at {
                        // Its record starts after the run could have arrived.
                        v.unknown = true;
                    }
                }
            }
            (Answer::UnknownCall, _, _) => {
                for run in mine {
                    let answer = ask_java(client, address, run).await;
                    let v = verdicts.get_mut(&run.id).expect("asked about");
                    match answer {
                        Some(true) => v.accepted_by = Some(address.clone()),
                        Some(false) => {}
                        None => v.unknown = true,
                    }
                }
            }
            _ => {
                warn!(address = %address, runs = ids.len(), msg = ?out.msg, "executor not asked about maybe-sent runs");
                for run in mine {
                    verdicts.get_mut(&run.id).expect("asked about").unknown = true;
                }
            }
        }
    }
    verdicts
}

/// A Java executor: `Some(true)` it has the run (its log exists), `Some(false)` it does not
/// (no log, and nothing of the job running or queued there), `None` it cannot tell.
async fn ask_java(client: &ExecutorClient, address: &str, run: &Run) -> Option<bool> {
    let param = LogParam {
        log_date_time: run.scheduled_at,
        log_id: run.id,
        from_line_num: 1,
    };
    let log = client.log(address, &param).await;
    if !log.is_success() {
        return None;
    }
    let result = log.payload?;
    if !result.is_end {
        return Some(true);
    }
    // Java executors' job ids are 32-bit, as on `/run`.
    let idle = client.idle_beat(address, run.job_id as i32).await;
    match idle.answer() {
        Answer::Answered if idle.is_success() => Some(false),
        _ => None,
    }
}
