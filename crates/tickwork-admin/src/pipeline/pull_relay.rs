//! The holder's side of relayed pull calls: while this node holds pull connections, it takes
//! the calls other nodes wrote for them (when the database notifies one, PostgreSQL, or
//! polling every 100 ms), makes each over its connection
//! (a `/run` with one of the executor's credits, and never after the call's deadline) and
//! writes the answer back.

use serde_json::Value;
use tickwork_store::{PullCall, PullCallAnswer, PullCallsTake};
use tracing::{debug, warn};

use super::Scheduler;
use crate::pull_links::{LinkFailure, RelayAnswer, wall_ms};

/// Calls older than this are deleted by the takes (their writer died waiting).
const STALE_MS: i64 = 10 * 60 * 1000;

/// Hands the database's notifications of relayed calls to the links until the cluster stops.
pub(crate) async fn wake_loop(
    scheduler: Scheduler,
    mut wakes: tokio::sync::mpsc::Receiver<tickwork_store::PullWake>,
) {
    let stop = scheduler.inner.cluster_stop.clone();
    let links = scheduler.inner.client.pull_links().clone();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            wake = wakes.recv() => match wake {
                Some(wake) => links.wake(wake),
                None => return,
            },
        }
    }
}

/// Takes and makes relayed calls until the cluster stops.
pub(crate) async fn relay_loop(scheduler: Scheduler) {
    let stop = scheduler.inner.cluster_stop.clone();
    let links = scheduler.inner.client.pull_links().clone();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = links.calls_or_poll() => {}
        }
        // No connection here: no call can be for this node.
        let addresses = links.addresses();
        if addresses.is_empty() {
            continue;
        }
        let now = wall_ms();
        let take = PullCallsTake {
            addresses,
            now,
            stale_before: now - STALE_MS,
            limit: 1000,
        };
        let calls = match scheduler.inner.store.pull_calls_take(take).await {
            Ok(calls) => calls,
            Err(e) => {
                warn!(error = %e, "relayed pull calls not read");
                continue;
            }
        };
        for call in calls {
            tokio::spawn(make(scheduler.clone(), call));
        }
    }
}

/// Makes one relayed call and writes its answer.
async fn make(scheduler: Scheduler, call: PullCall) {
    let answer = match answer(&scheduler, &call).await {
        Ok(body) => RelayAnswer::Answer(body),
        Err(e) => RelayAnswer::Failure(e),
    };
    let text = serde_json::to_string(&answer).expect("an answer is always serializable");
    let write = PullCallAnswer {
        id: call.id,
        answer: text,
        now: wall_ms(),
    };
    if let Err(e) = scheduler.inner.store.pull_call_answer(write).await {
        warn!(call = call.id, error = %e, "relayed pull call's answer not written");
    }
}

async fn answer(scheduler: &Scheduler, call: &PullCall) -> Result<Value, LinkFailure> {
    let links = scheduler.inner.client.pull_links();
    let link = links
        .get(&call.address, Some(&call.app))
        .ok_or(LinkFailure::NotHere)?;
    let left = |now: i64| std::time::Duration::from_millis((call.deadline_at - now).max(0) as u64);
    let body: Value = serde_json::from_str(&call.body).map_err(|_| LinkFailure::Relay)?;
    if call.path == "/run" {
        link.take_credit(call.rank, left(wall_ms())).await?;
        // Past the deadline the writer may have given up, and another node may own the run.
        if wall_ms() >= call.deadline_at {
            link.return_credit();
            return Err(LinkFailure::NoCredit);
        }
        debug!(address = %call.address, call = call.id, "relayed run sent");
    }
    let wait = left(wall_ms()).max(std::time::Duration::from_millis(500));
    link.call(&call.path, body, wait).await
}
