//! Job workers: one per job id, each with a FIFO queue of runs, executing one run at a time.
//!
//! This is where `/run`, `/idleBeat` and `/kill` land: block policies, worker replacement when
//! a job's handler or script version changes, timeouts, kills, and idle workers ending.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tickwork_core::block::{self, BlockDecision, WorkerState as BlockState};
use tickwork_core::{BlockStrategy, GlueType};
use tickwork_protocol::{
    CODE_FAIL, CODE_SUCCESS, CODE_TIMEOUT, HandleCallbackParam, TriggerParam, msg,
};
use tokio::sync::Notify;
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accepted::{AcceptedRecord, now_ms};
use crate::callback::{CallbackQueue, truncate_message};
use crate::error::error_chain;
use crate::executor::Counters;
use crate::handler::{HandlerError, HandlerFuture, JobContext, JobHandler, JobOutcome};
use crate::runlog::RunLogs;
use crate::script::{ScriptEnv, ScriptSpec};

/// Extra time, beyond the kill grace, that the worker gives a cancelled run before dropping it:
/// a script's own TERM-then-KILL sequence takes the whole grace plus the reaping.
const CANCEL_SLACK: Duration = Duration::from_secs(1);

/// Kill reasons of XXL-JOB when a job's handler or script changed under a live worker.
const HANDLER_CHANGED: &str = "change handler or glue type, and terminate the old job thread.";
const SOURCE_CHANGED: &str = "change job source or glue type, and terminate the old job thread.";

/// What a worker runs.
#[derive(Clone)]
pub(crate) enum JobKind {
    Bean {
        name: String,
        handler: Arc<dyn JobHandler>,
    },
    Script(Arc<ScriptSpec>),
}

impl JobKind {
    /// Whether a worker built for `self` may take a run resolved to `other`.
    fn same(&self, other: &JobKind) -> bool {
        match (self, other) {
            (JobKind::Bean { name: a, .. }, JobKind::Bean { name: b, .. }) => a == b,
            (JobKind::Script(a), JobKind::Script(b)) => a.glue == b.glue && a.updated == b.updated,
            _ => false,
        }
    }

    fn replace_reason(&self) -> &'static str {
        match self {
            JobKind::Bean { .. } => HANDLER_CHANGED,
            JobKind::Script(_) => SOURCE_CHANGED,
        }
    }
}

struct Current {
    cancel: CancellationToken,
    kill_reason: Option<String>,
}

#[derive(Default)]
struct QueueState {
    queue: VecDeque<TriggerParam>,
    queued_ids: HashSet<i64>,
    current: Option<Current>,
    stopped: bool,
}

/// One job's worker.
pub(crate) struct Worker {
    job_id: i32,
    kind: JobKind,
    state: Mutex<QueueState>,
    wake: Notify,
}

impl Worker {
    fn state(&self) -> MutexGuard<'_, QueueState> {
        // State changes are single assignments; a panic elsewhere cannot leave them half done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn block_state(&self) -> BlockState {
        let st = self.state();
        BlockState {
            running: st.current.is_some(),
            queued: st.queue.len(),
        }
    }

    fn push(&self, trigger: TriggerParam) -> Result<(), String> {
        let mut st = self.state();
        if !st.queued_ids.insert(trigger.log_id) {
            return Err(msg::repeat_trigger(trigger.log_id));
        }
        st.queue.push_back(trigger);
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    /// Fails every queued run with `reason`; returns how many.
    fn drop_queued(&self, reason: &str, callbacks: &CallbackQueue) -> usize {
        let mut st = self.state();
        let dropped: Vec<TriggerParam> = st.queue.drain(..).collect();
        st.queued_ids.clear();
        drop(st);
        let message = block::killed_queued_message(reason);
        for trigger in &dropped {
            callbacks.push(HandleCallbackParam {
                log_id: trigger.log_id,
                log_date_time: trigger.log_date_time,
                handle_code: CODE_FAIL,
                handle_msg: Some(message.clone()),
            });
        }
        dropped.len()
    }

    /// Ends the worker: queued runs fail now, the running one is cancelled and reported with
    /// `reason` by the worker task. Returns whether a run was running.
    fn stop(&self, reason: &str, callbacks: &CallbackQueue) -> bool {
        self.state().stopped = true;
        self.drop_queued(reason, callbacks);
        let mut st = self.state();
        let running = match st.current.as_mut() {
            Some(current) => {
                current.kill_reason.get_or_insert_with(|| reason.to_owned());
                current.cancel.cancel();
                true
            }
            None => false,
        };
        drop(st);
        self.wake.notify_one();
        running
    }
}

struct WorkerMap {
    map: HashMap<i32, Arc<Worker>>,
    accepting: bool,
}

/// The live workers by job id, and a signal for whoever waits on their occupation.
pub(crate) struct Workers {
    map: Mutex<WorkerMap>,
    /// Notified whenever a run ends or a worker ends, for shutdown to re-check.
    changed: Notify,
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            map: Mutex::new(WorkerMap {
                map: HashMap::new(),
                accepting: true,
            }),
            changed: Notify::new(),
        }
    }
}

/// Everything the workers share: the executor's job-running half.
pub(crate) struct Runtime {
    pub(crate) workers: Workers,
    /// Run ids accepted on `/run`; written only under the workers' map lock.
    pub(crate) accepted: AcceptedRecord,
    pub(crate) handlers: HashMap<String, Arc<dyn JobHandler>>,
    pub(crate) scripts_enabled: bool,
    pub(crate) script_env: Arc<ScriptEnv>,
    pub(crate) logs: RunLogs,
    pub(crate) callbacks: CallbackQueue,
    pub(crate) idle_timeout: Duration,
    pub(crate) kill_grace: Duration,
    pub(crate) tracker: TaskTracker,
    pub(crate) counters: Arc<Counters>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("occupation", &self.occupation())
            .finish_non_exhaustive()
    }
}

/// A `/run` that was not refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Triggered {
    /// Queued on the job's worker (and recorded as accepted).
    Queued,
    /// Accepted before: not run again.
    Duplicate,
}

/// Occupation of the workers, for stats and shutdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Occupation {
    pub(crate) workers: usize,
    pub(crate) running: usize,
    pub(crate) queued: usize,
}

impl Runtime {
    fn map(&self) -> MutexGuard<'_, WorkerMap> {
        self.workers.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a run's handler is, or the `/run` refusal.
    fn resolve(&self, trigger: &TriggerParam) -> Result<JobKind, String> {
        let glue: GlueType = trigger
            .glue_type
            .parse()
            .map_err(|_| msg::glue_type_invalid(&trigger.glue_type))?;
        match glue {
            GlueType::Bean => match self.handlers.get(&trigger.executor_handler) {
                Some(handler) => Ok(JobKind::Bean {
                    name: trigger.executor_handler.clone(),
                    handler: Arc::clone(handler),
                }),
                None => Err(msg::handler_not_found(&trigger.executor_handler)),
            },
            GlueType::Groovy => Err(format!(
                "glue type {glue} is not supported by this executor: Java glue code runs only in a Java executor"
            )),
            script if self.scripts_enabled => Ok(JobKind::Script(Arc::new(ScriptSpec {
                job_id: trigger.job_id,
                glue: script,
                updated: trigger.glue_updatetime,
                source: trigger.glue_source.clone(),
            }))),
            script => Err(format!(
                "glue type {script} is refused: script jobs are not enabled on this executor"
            )),
        }
    }

    /// Queues a run (`/run`): `Ok` means accepted (now or before), `Err` is the refusal
    /// message. A run id accepted before is never run again, whatever the block strategy, and
    /// even while shutting down: the admin re-sends a run it lost track of, and the executor
    /// already has it.
    pub(crate) fn trigger(self: &Arc<Self>, trigger: TriggerParam) -> Result<Triggered, String> {
        if self.accepted.contains(trigger.log_id) {
            return Ok(Triggered::Duplicate);
        }
        let kind = self.resolve(&trigger)?;
        let strategy = BlockStrategy::parse_lenient(&trigger.executor_block_strategy);
        let mut map = self.map();
        // Again under the map lock, under which ids are recorded: two `/run` of one id at once
        // cannot both pass.
        if self.accepted.contains(trigger.log_id) {
            return Ok(Triggered::Duplicate);
        }
        if !map.accepting {
            return Err(crate::SHUTTING_DOWN_MESSAGE.to_owned());
        }
        let mut replace_reason = None;
        let mut reuse = None;
        if let Some(worker) = map.map.get(&trigger.job_id) {
            if worker.kind.same(&kind) {
                match block::decide(strategy, worker.block_state()) {
                    BlockDecision::Enqueue => reuse = Some(Arc::clone(worker)),
                    BlockDecision::Reject { message } => return Err(message.to_owned()),
                    BlockDecision::ReplaceRunning { reason } => replace_reason = Some(reason),
                }
            } else {
                replace_reason = Some(kind.replace_reason());
            }
        }
        let worker = match reuse {
            Some(worker) => worker,
            None => {
                if let Some(old) = map.map.remove(&trigger.job_id) {
                    let reason = replace_reason.unwrap_or(HANDLER_CHANGED);
                    old.stop(reason, &self.callbacks);
                }
                let worker = Arc::new(Worker {
                    job_id: trigger.job_id,
                    kind,
                    state: Mutex::new(QueueState::default()),
                    wake: Notify::new(),
                });
                map.map.insert(trigger.job_id, Arc::clone(&worker));
                self.tracker
                    .spawn(worker_loop(Arc::clone(self), Arc::clone(&worker)));
                worker
            }
        };
        let log_id = trigger.log_id;
        worker.push(trigger)?;
        self.accepted.insert(log_id, now_ms());
        Ok(Triggered::Queued)
    }

    /// `/idleBeat`: whether the job has a run going or waiting here.
    pub(crate) fn is_busy(&self, job_id: i32) -> bool {
        self.map()
            .map
            .get(&job_id)
            .is_some_and(|w| w.block_state().is_busy())
    }

    /// `/kill`: ends the job's worker; false when there is none.
    pub(crate) fn kill(&self, job_id: i32, reason: &str) -> bool {
        let removed = self.map().map.remove(&job_id);
        match removed {
            Some(worker) => {
                worker.stop(reason, &self.callbacks);
                self.workers.changed.notify_waiters();
                true
            }
            None => false,
        }
    }

    /// Refuses every later `/run` (shutdown).
    pub(crate) fn stop_accepting(&self) {
        self.map().accepting = false;
    }

    /// Fails every queued run with `reason`; returns how many.
    pub(crate) fn drop_all_queued(&self, reason: &str) -> usize {
        let workers: Vec<Arc<Worker>> = self.map().map.values().cloned().collect();
        let n = workers
            .iter()
            .map(|w| w.drop_queued(reason, &self.callbacks))
            .sum();
        self.workers.changed.notify_waiters();
        n
    }

    /// Ends every worker with `reason`; returns how many runs were running.
    pub(crate) fn kill_all(&self, reason: &str) -> usize {
        let workers: Vec<Arc<Worker>> = self.map().map.drain().map(|(_, w)| w).collect();
        let n = workers
            .iter()
            .filter(|w| w.stop(reason, &self.callbacks))
            .count();
        self.workers.changed.notify_waiters();
        n
    }

    pub(crate) fn occupation(&self) -> Occupation {
        let map = self.map();
        let mut occ = Occupation {
            workers: map.map.len(),
            ..Occupation::default()
        };
        for worker in map.map.values() {
            let st = worker.block_state();
            occ.running += usize::from(st.running);
            occ.queued += st.queued;
        }
        occ
    }

    /// Waits until `done(occupation)` holds or `deadline` passes; returns whether it holds.
    pub(crate) async fn wait_for(
        &self,
        done: impl Fn(Occupation) -> bool,
        deadline: tokio::time::Instant,
    ) -> bool {
        loop {
            let changed = self.workers.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between check and wait is not missed.
            changed.as_mut().enable();
            if done(self.occupation()) {
                return true;
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(deadline) => return done(self.occupation()),
            }
        }
    }

    /// Removes an idle worker from the map; true when the worker must end.
    fn reap(&self, worker: &Arc<Worker>) -> bool {
        let mut map = self.map();
        let mut st = worker.state();
        if st.stopped {
            return true;
        }
        if !st.queue.is_empty() || st.current.is_some() {
            return false;
        }
        st.stopped = true;
        if map
            .map
            .get(&worker.job_id)
            .is_some_and(|w| Arc::ptr_eq(w, worker))
        {
            map.map.remove(&worker.job_id);
        }
        true
    }
}

/// A worker's life: take runs in order, execute them, end when stopped or idle too long.
async fn worker_loop(rt: Arc<Runtime>, worker: Arc<Worker>) {
    loop {
        let next = {
            let mut st = worker.state();
            if st.stopped {
                break;
            }
            match st.queue.pop_front() {
                Some(trigger) => {
                    st.queued_ids.remove(&trigger.log_id);
                    let cancel = CancellationToken::new();
                    st.current = Some(Current {
                        cancel: cancel.clone(),
                        kill_reason: None,
                    });
                    Some((trigger, cancel))
                }
                None => None,
            }
        };
        match next {
            Some((trigger, cancel)) => {
                execute(&rt, &worker, trigger, cancel).await;
                worker.state().current = None;
                rt.workers.changed.notify_waiters();
            }
            None => {
                // `notify_one` leaves a permit when nobody waits, so a push between the check
                // above and this wait is not lost.
                let woken = tokio::time::timeout(rt.idle_timeout, worker.wake.notified()).await;
                if woken.is_err() && rt.reap(&worker) {
                    tracing::debug!(job_id = worker.job_id, "idle job worker ended");
                    break;
                }
            }
        }
    }
    rt.workers.changed.notify_waiters();
}

enum End {
    Finished(Result<Result<JobOutcome, HandlerError>, JoinError>),
    Killed,
    TimedOut,
}

/// Runs one trigger to its result and queues the callback.
async fn execute(
    rt: &Arc<Runtime>,
    worker: &Arc<Worker>,
    trigger: TriggerParam,
    cancel: CancellationToken,
) {
    let job_id = trigger.job_id;
    let log_id = trigger.log_id;
    rt.counters.runs_started.fetch_add(1, Ordering::Relaxed);
    let log = rt.logs.open(trigger.log_date_time, log_id);
    // Awaited: the run starts once its log exists, so that a script's output (written to the
    // file directly) comes after the start line.
    log.write(&format!(
        "<br>----------- tickwork job execute start -----------<br>----------- Param:{}",
        trigger.executor_params
    ))
    .await;
    let timeout = u64::try_from(trigger.executor_timeout)
        .ok()
        .filter(|&s| s > 0)
        .map(Duration::from_secs);
    let ctx = JobContext {
        job_id,
        log_id,
        log_date_time: trigger.log_date_time,
        params: trigger.executor_params,
        shard_index: trigger.broadcast_index,
        shard_total: trigger.broadcast_total,
        timeout,
        log: log.clone(),
        cancel: cancel.clone(),
    };
    let future: HandlerFuture = match &worker.kind {
        JobKind::Bean { handler, .. } => handler.run(ctx),
        JobKind::Script(spec) => Box::pin(crate::script::run(
            Arc::clone(spec),
            Arc::clone(&rt.script_env),
            ctx,
        )),
    };
    // Its own task: a panic stays in the run, and a handler that blocks its thread cannot stop
    // the timeout below from firing.
    let mut task = tokio::spawn(future);
    let expiry = async {
        match timeout {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let end = tokio::select! {
        biased;
        result = &mut task => End::Finished(result),
        _ = cancel.cancelled() => End::Killed,
        _ = expiry => End::TimedOut,
    };
    // A killed handler sees its cancellation and may return before the select notices the
    // kill: a run that ends after its token was cancelled was killed, whatever it returned.
    let finished = matches!(end, End::Finished(_));
    let end = match end {
        End::Finished(_) if cancel.is_cancelled() => End::Killed,
        other => other,
    };
    // A finished task must not be polled again.
    if !finished {
        cancel.cancel();
        if tokio::time::timeout(rt.kill_grace + CANCEL_SLACK, &mut task)
            .await
            .is_err()
        {
            task.abort();
            tracing::warn!(
                log_id,
                job_id,
                "cancelled run did not stop in time; dropped"
            );
        }
    }
    let (code, message) = match end {
        End::Finished(Ok(Ok(JobOutcome::Success(m)))) => (CODE_SUCCESS, m),
        End::Finished(Ok(Ok(JobOutcome::Failure(m)))) => (CODE_FAIL, Some(m)),
        End::Finished(Ok(Err(e))) => (CODE_FAIL, Some(error_chain(&*e))),
        End::Finished(Err(e)) => (CODE_FAIL, Some(panic_message(e))),
        End::Killed => {
            let reason = worker
                .state()
                .current
                .as_ref()
                .and_then(|c| c.kill_reason.clone())
                .unwrap_or_else(|| msg::KILLED_BY_ADMIN.to_owned());
            tracing::info!(log_id, job_id, %reason, "run killed");
            (CODE_FAIL, Some(block::killed_running_message(&reason)))
        }
        End::TimedOut => {
            tracing::warn!(log_id, job_id, "run timed out");
            log.append("<br>----------- tickwork job execute timeout");
            (CODE_TIMEOUT, Some(msg::TIMEOUT.to_owned()))
        }
    };
    let message = message.map(truncate_message);
    // Awaited: the log is complete when the admin learns the result.
    log.write(&format!(
        "<br>----------- tickwork job execute end(finish) -----------<br>----------- Result: handleCode={code}, handleMsg = {}",
        message.as_deref().unwrap_or("")
    ))
    .await;
    rt.counters.runs_finished.fetch_add(1, Ordering::Relaxed);
    rt.callbacks.push(HandleCallbackParam {
        log_id,
        log_date_time: trigger.log_date_time,
        handle_code: code,
        handle_msg: message,
    });
}

fn panic_message(e: JoinError) -> String {
    if !e.is_panic() {
        return "job handler was aborted".to_owned();
    }
    let payload = e.into_panic();
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    format!("job handler panicked: {text}")
}
