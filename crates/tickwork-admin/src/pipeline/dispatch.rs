//! Dispatch of one run: choose the executor (route strategy, probes), `POST /run`, and describe
//! the outcome for the ledger.
//!
//! Broadcast expansion (one run per executor) happens before this step, because it creates
//! runs; here every run goes to exactly one address.

use std::sync::Mutex;

use tickwork_core::RouteStrategy;
use tickwork_core::routing::{Probe, ProbeOutcome, Route, Router, pick_probed};
use tickwork_protocol::TriggerParam;
use tickwork_store::{Job, Run};

use crate::executor_client::{ExecutorClient, SendGate};

/// Everything the executor needs to run one run, plus how to pick its executor.
#[derive(Debug, Clone)]
pub(crate) struct DispatchRequest {
    /// The job's id at its full width (the body's is the 32 bits a Java executor takes).
    pub job_id: i64,
    pub route: RouteStrategy,
    /// A chosen address (manual trigger, broadcast shard): no routing.
    pub address: Option<String>,
    /// The `/run` body, built once: its strings are the only copies this call makes.
    pub body: TriggerParam,
    /// Its place among runs waiting for a busy executor's slot
    /// ([`tickwork_core::routing::slot_rank`]).
    pub rank: i64,
}

/// The result of a dispatch, as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DispatchOutcome {
    pub run_id: i64,
    /// The executor that was called (None when routing found none).
    pub address: Option<String>,
    /// 200 when the executor queued the run; anything else is a trigger failure.
    pub trigger_code: i32,
    /// What happened, for operators: probes, the address and the executor's answer.
    pub trigger_msg: String,
    /// Stopped by the send gate before `/run` left: not sent, the run is this node's to hold.
    pub held_back: bool,
}

impl DispatchOutcome {
    pub(crate) fn accepted(&self) -> bool {
        self.trigger_code == tickwork_protocol::CODE_SUCCESS
    }

    fn refused(run_id: i64, address: Option<String>, msg: String) -> Self {
        DispatchOutcome {
            run_id,
            address,
            trigger_code: tickwork_protocol::CODE_FAIL,
            trigger_msg: msg,
            held_back: false,
        }
    }
}

impl DispatchRequest {
    /// The request of `run`, a run of `job`.
    pub(crate) fn new(run: &Run, job: &Job) -> DispatchRequest {
        let spec = &job.spec;
        DispatchRequest {
            job_id: run.job_id,
            route: spec.route_strategy,
            address: run.executor_address.clone(),
            body: TriggerParam {
                // Job ids are 32-bit on Java executors; the admin never allocates larger ones.
                job_id: run.job_id as i32,
                executor_handler: spec.handler.clone(),
                executor_params: run.params.clone(),
                executor_block_strategy: spec.block_strategy.as_str().to_owned(),
                executor_timeout: run.timeout_s.unwrap_or(spec.timeout_s),
                log_id: run.id,
                // The executor files the run's log under the date it was due.
                log_date_time: run.scheduled_at,
                glue_type: spec.glue_type.as_str().to_owned(),
                glue_source: spec.glue_source.clone(),
                glue_updatetime: job.glue_updated_at,
                broadcast_index: run.shard_index.unwrap_or(0),
                broadcast_total: run.shard_total.unwrap_or(1).max(1),
            },
            rank: tickwork_core::routing::slot_rank(run.trigger_type, run.priority),
        }
    }

    /// The run's id: the body's `log_id`, under which the executor knows the run.
    pub(crate) fn run_id(&self) -> i64 {
        self.body.log_id
    }
}

/// Chooses the executor of `req` among `candidates`, then calls `/run` there, if `gate` still
/// lets the body leave.
pub(crate) async fn dispatch(
    client: &ExecutorClient,
    router: &Mutex<Router>,
    req: &DispatchRequest,
    candidates: &[String],
    now_ms: i64,
    gate: SendGate,
) -> DispatchOutcome {
    let mut report = String::new();
    let address = match &req.address {
        Some(a) => a.clone(),
        None => {
            let route = router
                .lock()
                .expect("router lock")
                .route(req.route, req.job_id, candidates, now_ms);
            match route {
                Err(e) => return DispatchOutcome::refused(req.run_id(), None, e.to_string()),
                Ok(Route::One(i)) => candidates[i].clone(),
                Ok(Route::Probe { probe, order }) => {
                    match probe_in_order(client, probe, req.job_id, candidates, &order).await {
                        Ok((index, probes)) => {
                            report = format!("{probes}; ");
                            candidates[index].clone()
                        }
                        Err(msg) => return DispatchOutcome::refused(req.run_id(), None, msg),
                    }
                }
                // Broadcast runs arrive here already expanded, each with its address; one
                // that does not is sent to the first executor as shard (0, 1).
                Ok(Route::Broadcast { .. }) => candidates[0].clone(),
            }
        }
    };
    let out = client.run_ranked(&address, &req.body, gate, req.rank).await;
    let answer = out.msg.as_deref().unwrap_or("");
    DispatchOutcome {
        run_id: req.run_id(),
        trigger_msg: format!("{report}run at {address}: code {}, {answer}", out.code),
        address: Some(address),
        trigger_code: out.code,
        held_back: out.held_back(),
    }
}

/// Probes candidates in order until one passes; returns its index and the probe report.
async fn probe_in_order(
    client: &ExecutorClient,
    probe: Probe,
    job_id: i64,
    candidates: &[String],
    order: &[usize],
) -> Result<(usize, String), String> {
    let mut outcomes = Vec::new();
    for &i in order {
        let out = match probe {
            Probe::Beat => client.beat(&candidates[i]).await,
            Probe::IdleBeat => client.idle_beat(&candidates[i], job_id as i32).await,
        };
        let ok = out.is_success();
        outcomes.push(ProbeOutcome::new(i, out.code, out.msg.unwrap_or_default()));
        if ok {
            break;
        }
    }
    pick_probed(probe, candidates, &outcomes)
        .map(|p| (p.index, p.report))
        .map_err(|e| e.to_string())
}
