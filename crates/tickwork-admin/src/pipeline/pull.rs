//! A pull executor's connection on the admin's side: the hello that registers it under
//! `pull://<instance>`, then its frames (answers to the admin's calls, credits, beats,
//! results, its drain notice) until it closes, the admin stops, or it stays silent for three
//! beat intervals. The WebSocket itself stays in the HTTP layer, which hands over the text of
//! each message and writes the frames queued here.

use std::sync::Arc;
use std::time::Duration;

use tickwork_protocol::pull::{self, Frame};
use tickwork_protocol::{Envelope, RegistryParam, msg};
use tickwork_store::RunComplete;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::Scheduler;
use super::executor_api::ExecutorAuth;
use crate::Error;
use crate::pull_links::Link;

/// How long an executor has for its hello after the connection opened.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a pull executor beats. Each beat renews its registry row, as a push executor's
/// registration does every 30 s, and tells the admin it is alive.
pub(crate) const BEAT_INTERVAL: Duration = Duration::from_secs(10);

/// Why a pull connection ended, said to the executor in the close frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Goodbye(pub(crate) String);

/// Serves one pull connection: `incoming` is the text of each message the executor sent (it
/// ends when the connection does), `outgoing` the frames for the executor.
pub(crate) async fn serve(
    scheduler: Scheduler,
    auth: ExecutorAuth,
    app_header: String,
    mut incoming: mpsc::Receiver<String>,
    outgoing: mpsc::Sender<Frame>,
) -> Goodbye {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, incoming.recv()).await {
        Ok(Some(text)) => text,
        Ok(None) => return Goodbye("closed before its hello".into()),
        Err(_) => return Goodbye("no hello within 10 s".into()),
    };
    let link = match welcome(&scheduler, &auth, &app_header, &hello, &outgoing).await {
        Ok(link) => link,
        Err(e) => {
            debug!(error = %e, "pull connection refused");
            return Goodbye(told(&e));
        }
    };
    info!(app = %link.app, address = %link.address, "pull executor connected");
    let goodbye = frames(&scheduler, &auth, &link, &mut incoming, &outgoing).await;
    // A newer connection of the executor (here) keeps its registration.
    let current = scheduler.inner.client.pull_links().remove(&link);
    if current && !link.is_draining() {
        unregister(&scheduler, &auth, &link).await;
    }
    info!(app = %link.app, address = %link.address, reason = %goodbye.0, "pull executor disconnected");
    goodbye
}

/// Checks the hello, holds the link and registers its address, then says welcome.
async fn welcome(
    scheduler: &Scheduler,
    auth: &ExecutorAuth,
    app_header: &str,
    text: &str,
    outgoing: &mpsc::Sender<Frame>,
) -> Result<Arc<Link>, Error> {
    let hello_at = scheduler.inner.clock.now_ms();
    let Ok(Frame::Hello {
        app,
        instance,
        credits,
        running,
    }) = Frame::from_text(text)
    else {
        return Err(Error::invalid("the first frame must be a hello"));
    };
    let app = app.trim().to_owned();
    if app.is_empty() {
        return Err(Error::invalid_field("app", "must not be empty"));
    }
    if !app_header.is_empty() && app_header != app {
        return Err(Error::invalid_field(
            "app",
            format!("is {app:?}, but the connection's app name header says {app_header:?}"),
        ));
    }
    if let Some(e) = pull::instance_error(&instance) {
        return Err(Error::invalid_field("instance", e));
    }
    if !auth.stands_for_app(&app) {
        return Err(Error::Forbidden(msg::TOKEN_OR_APP_INVALID.into()));
    }
    let address = pull::pull_address(&instance);
    let link = Arc::new(Link::new(&app, &address, credits, outgoing.clone()));
    scheduler.inner.client.pull_links().insert(link.clone());
    let registered = scheduler
        .executor_api()
        .register(auth, RegistryParam::executor(&app, &address))
        .await;
    if let Err(e) = registered {
        scheduler.inner.client.pull_links().remove(&link);
        return Err(e);
    }
    let welcome = Frame::Welcome {
        address: address.clone(),
        beat_interval_ms: BEAT_INTERVAL.as_millis() as u64,
    };
    if outgoing.send(welcome).await.is_err() {
        scheduler.inner.client.pull_links().remove(&link);
        unregister(scheduler, auth, &link).await;
        return Err(Error::invalid("closed before the welcome"));
    }
    if let Err(e) = reconcile(scheduler, &address, &running, hello_at).await {
        warn!(%address, error = %e, "pull executor's runs not reconciled");
    }
    Ok(link)
}

/// Most runs one hello reconciles; the lost-run monitor takes any beyond.
const RECONCILE_LIMIT: u32 = 10_000;

/// Ends as lost the runs dispatched to `address` before the hello that the executor does not
/// hold any more (it lists the runs it queued or runs, and those whose results are on their
/// way): they ended without a result, or the executor forgot them. Each is ended once, by the
/// state machine.
async fn reconcile(
    scheduler: &Scheduler,
    address: &str,
    running: &[i64],
    hello_at: i64,
) -> Result<usize, Error> {
    let query = tickwork_store::DispatchedTo {
        address: address.to_owned(),
        dispatched_before: hello_at,
        limit: RECONCILE_LIMIT,
    };
    let dispatched = scheduler.inner.store.runs_dispatched_to(query).await?;
    let held: std::collections::HashSet<i64> = running.iter().copied().collect();
    let lost: Vec<RunComplete> = dispatched
        .iter()
        .filter(|r| !held.contains(&r.id))
        .map(|r| {
            warn!(run_id = r.id, job_id = r.job_id, %address, "run lost: the pull executor no longer holds it");
            let reason = format!("lost: the pull executor {address} reconnected without this run");
            RunComplete::lost(r.id, reason, hello_at)
        })
        .collect();
    super::complete::end_lost(scheduler, &lost).await
}

/// Reads the executor's frames until the connection ends.
async fn frames(
    scheduler: &Scheduler,
    auth: &ExecutorAuth,
    link: &Arc<Link>,
    incoming: &mut mpsc::Receiver<String>,
    outgoing: &mpsc::Sender<Frame>,
) -> Goodbye {
    let silence = BEAT_INTERVAL * 3;
    let stop = scheduler.inner.cluster_stop.clone();
    loop {
        let text = tokio::select! {
            _ = stop.cancelled() => return Goodbye("the admin is shutting down".into()),
            next = tokio::time::timeout(silence, incoming.recv()) => match next {
                Ok(Some(text)) => text,
                Ok(None) => return Goodbye("closed by the executor".into()),
                Err(_) => return Goodbye(format!("no frame for {} s", silence.as_secs())),
            },
        };
        let frame = match Frame::from_text(&text) {
            Ok(frame) => frame,
            Err(e) => return Goodbye(format!("unreadable frame: {e}")),
        };
        match frame {
            Frame::Answer { id, body } => link.answered(id, body),
            Frame::Credit { n } => link.grant(n),
            Frame::Beat { running } => {
                debug!(address = %link.address, running = running.len(), credits = link.credits(), "pull beat");
                if !link.is_draining() {
                    let beat = RegistryParam::executor(&link.app, &link.address);
                    if let Err(e) = scheduler.executor_api().register(auth, beat).await {
                        warn!(address = %link.address, error = %e, "pull executor's beat not recorded");
                    }
                }
            }
            Frame::Drain => {
                info!(address = %link.address, "pull executor drains");
                link.set_draining();
                unregister(scheduler, auth, link).await;
            }
            Frame::Call { id, path, body } => {
                // A result is recorded in a task of its own, so that answers to the admin's
                // calls are read meanwhile.
                let (scheduler, auth, outgoing) =
                    (scheduler.clone(), auth.clone(), outgoing.clone());
                tokio::spawn(async move {
                    let body = call(&scheduler, &auth, &path, body).await;
                    let _ = outgoing.send(Frame::Answer { id, body }).await;
                });
            }
            Frame::Hello { .. } | Frame::Welcome { .. } => {
                return Goodbye("a hello or welcome in the middle of a connection".into());
            }
        }
    }
}

/// One call of the executor: only `callback` (its results) is known.
async fn call(
    scheduler: &Scheduler,
    auth: &ExecutorAuth,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let envelope = if path != pull::CALLBACK_CALL {
        Envelope::<()>::fail(msg::uri_not_found(path))
    } else {
        let items = serde_json::to_vec(&body)
            .map_err(|e| Error::invalid(e.to_string()))
            .and_then(|bytes| {
                tickwork_protocol::decode_callbacks(&bytes)
                    .map_err(|e| Error::invalid(e.to_string()))
            });
        let recorded = match items {
            Ok(items) => {
                let n = items.len();
                let recorded = scheduler.executor_api().callbacks(auth, items).await;
                if recorded.is_ok() {
                    scheduler.inner.client.pull_links().count_results(n);
                }
                recorded
            }
            Err(e) => Err(e),
        };
        match recorded {
            Ok(()) => Envelope::success(),
            Err(e) => Envelope::fail(told(&e)),
        }
    };
    serde_json::to_value(&envelope).expect("an envelope is always serializable")
}

/// What the executor is told of an error (an internal cause is logged, not told).
fn told(e: &Error) -> String {
    e.client_message("pull executor")
        .unwrap_or_else(|| "the admin could not handle this; try again".to_owned())
}

async fn unregister(scheduler: &Scheduler, auth: &ExecutorAuth, link: &Link) {
    let key = RegistryParam::executor(&link.app, &link.address);
    if let Err(e) = scheduler.executor_api().registry_remove(auth, key).await {
        warn!(address = %link.address, error = %e, "pull executor not deregistered");
    }
}
