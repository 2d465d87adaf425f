//! The admin's client of executors: `/run` (`/trigger` for XXL-JOB 3.5), `/beat`,
//! `/idleBeat`, `/kill` and `/log` over HTTP with the access token and the group's app name,
//! any executor generation (Java 2.3 to 3.5, Tickwork), and Tickwork's `/tickwork/accepted`;
//! the same calls down a pull executor's own connection when its address is `pull://`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use tickwork_protocol::pull::is_pull_address;
use tickwork_protocol::{
    ACCEPTED_PATH, AcceptedQuery, AcceptedRuns, Envelope, IdleBeatParam, KillParam, LogParam,
    LogResult, MAX_ACCEPTED_QUERY, TriggerParam,
};
use tracing::{debug, warn};

use crate::pull_links::{LinkFailure, PullLinks};
use transport::{CallBody, CallFailure, CallHeaders, GatedBody, Transport};

mod http1;
mod transport;

/// The outcome of one call: the executor's envelope code and message, or a transport failure
/// (unreachable, redirect, non-200 status, over-size or unreadable body), which counts as
/// code 500. [`CallOutcome::answer`] tells which, and also an executor that does not know the
/// call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome<T = serde_json::Value> {
    pub code: i32,
    pub msg: Option<String>,
    pub payload: Option<T>,
    /// No (usable) answer: the code and message were made here, not by the executor.
    transport: bool,
    /// Stopped by its [`SendGate`] before its body left: the executor got no `/run`.
    held_back: bool,
}

/// Asked the moment a `/run` body is about to be written (after the connection was chosen and
/// the request built): `false` stops the request there, so that a node that froze on its way
/// to the executor, and lost the run to another node meanwhile, does not send it after all.
pub type SendGate = Arc<dyn Fn() -> bool + Send + Sync>;

/// What kind of answer a call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The executor answered the call: success or refusal, see the code.
    Answered,
    /// The executor answered that it does not know the call (`invalid request,
    /// uri-mapping(<path>) not found.`): a Java executor, or a Tickwork executor older than
    /// the call. Asking again will not help.
    UnknownCall,
    /// No usable answer: unreachable, timeout, redirect, non-200 status, over-size or
    /// unreadable body. The executor may or may not have seen the call.
    NoAnswer,
}

impl<T> CallOutcome<T> {
    pub fn is_success(&self) -> bool {
        self.code == tickwork_protocol::CODE_SUCCESS
    }

    /// Whether the executor answered, answered that it does not know the call, or did not
    /// answer at all.
    pub fn answer(&self) -> Answer {
        let unknown =
            |m: &str| m.starts_with("invalid request, uri-mapping(") && m.ends_with(") not found.");
        if self.transport {
            Answer::NoAnswer
        } else if !self.is_success() && self.msg.as_deref().is_some_and(unknown) {
            Answer::UnknownCall
        } else {
            Answer::Answered
        }
    }

    fn transport(msg: String) -> Self {
        CallOutcome {
            code: tickwork_protocol::CODE_FAIL,
            msg: Some(msg),
            payload: None,
            transport: true,
            held_back: false,
        }
    }

    /// The request was stopped by its [`SendGate`]: nothing reached the executor.
    pub fn held_back(&self) -> bool {
        self.held_back
    }
}

/// The path that queues a run: `run` up to XXL-JOB 3.4 (and on Tickwork executors), `trigger`
/// from 3.5, which knows no other.
const RUN_PATHS: [&str; 2] = ["run", "trigger"];

/// Most executor addresses whose run path is remembered; past it the record starts over (an
/// address forgotten costs one more call that the executor answers "not found").
const RUN_PATHS_KEPT: usize = 10_000;

/// Which of [`RUN_PATHS`] each executor address answered, learned from answers: an executor
/// that does not know the path it was sent (`uri-mapping(/run) not found.`) ran nothing, so
/// the run is sent to the other path at once and that one is kept for the address.
#[derive(Default)]
struct RunPaths(Mutex<HashMap<String, usize>>);

impl RunPaths {
    fn get(&self, address: &str) -> usize {
        let known = self.0.lock().expect("run paths lock");
        known.get(address).copied().unwrap_or(0)
    }

    fn set(&self, address: &str, path: usize) {
        let mut known = self.0.lock().expect("run paths lock");
        if known.len() >= RUN_PATHS_KEPT && !known.contains_key(address) {
            known.clear();
        }
        known.insert(address.to_owned(), path);
    }
}

/// Calls executors. Cheap to clone: connections are pooled and kept alive.
#[derive(Clone)]
pub struct ExecutorClient {
    transport: Transport,
    token: String,
    /// The app name of the group called, sent as `XXL-JOB-APPNAME` (3.5 executors refuse a
    /// call without their own); older executors ignore it.
    app_name: Option<String>,
    run_paths: Arc<RunPaths>,
    /// Calls in flight per executor address, shared by every clone.
    in_flight: Arc<InFlight>,
    /// How long a call may take (the transport's is the same).
    timeout: Duration,
    /// The pull executors connected to this admin, shared by every clone.
    pull: Arc<PullLinks>,
}

/// Most calls in flight to one executor address from this admin, and so most connections
/// open to it: the idle pool keeps as many, so a burst of due runs reuses them instead of
/// opening new ones (with 64 idle for 288 in flight, 1,500 new connections a second at 10,000
/// fires a second), and three admins stay well within a Tickwork executor's cap of 512.
const CALLS_PER_ADDRESS: usize = 64;

/// One semaphore per executor address with calls in flight.
#[derive(Default)]
struct InFlight {
    addresses: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Semaphore>>>,
}

impl InFlight {
    async fn acquire(self: &Arc<Self>, address: &str) -> CallSlot {
        // The address is copied only when it enters the map: a call on a hot path allocates
        // nothing here.
        let (address, semaphore) = {
            let mut addresses = self.addresses.lock().expect("in-flight lock");
            match addresses.get_key_value(address) {
                Some((key, semaphore)) => (key.clone(), semaphore.clone()),
                None => {
                    let key: Arc<str> = Arc::from(address);
                    let semaphore = Arc::new(tokio::sync::Semaphore::new(CALLS_PER_ADDRESS));
                    addresses.insert(key.clone(), semaphore.clone());
                    (key, semaphore)
                }
            }
        };
        let permit = semaphore
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        CallSlot {
            in_flight: self.clone(),
            address,
            semaphore,
            permit: Some(permit),
        }
    }
}

/// A call's place among its address's calls in flight; given back on drop.
struct CallSlot {
    in_flight: Arc<InFlight>,
    address: Arc<str>,
    semaphore: Arc<tokio::sync::Semaphore>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        drop(self.permit.take());
        // An address nobody calls any more (an executor gone) leaves the map.
        let mut addresses = self.in_flight.addresses.lock().expect("in-flight lock");
        if self.semaphore.available_permits() == CALLS_PER_ADDRESS
            && Arc::strong_count(&self.semaphore) == 2
        {
            addresses.remove(&self.address);
        }
    }
}

impl ExecutorClient {
    /// A client that sends `token` (when not empty) and gives up on a call after `timeout`
    /// (XXL-JOB's default is 3 s: a slow `/run` answer is a trigger failure).
    pub fn new(token: &str, timeout: Duration) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // As many idle connections as may be in flight (see `CALLS_PER_ADDRESS`). Not more
        // than that bound: idle connections count against an executor's connection cap, and
        // three admins each keeping a burst's worth filled a Tickwork executor's 512; a `/run`
        // then waited in the executor's accept queue past its timeout, and ran after it was
        // recorded as failed.
        let transport = Transport::new(timeout, CALLS_PER_ADDRESS);
        ExecutorClient {
            transport,
            token: token.to_owned(),
            app_name: None,
            run_paths: Arc::default(),
            in_flight: Arc::default(),
            timeout,
            pull: Arc::default(),
        }
    }

    /// The pull executors connected to this admin, which calls to `pull://` addresses reach.
    pub(crate) fn pull_links(&self) -> &Arc<PullLinks> {
        &self.pull
    }

    /// The same client (same connections) sending `token` instead: the token of the executor
    /// group being called.
    pub fn with_token(&self, token: &str) -> Self {
        let mut c = self.clone();
        c.token = token.to_owned();
        c
    }

    /// The same client sending `app_name` as the called executors' app name.
    pub fn with_app_name(&self, app_name: &str) -> Self {
        let mut c = self.clone();
        c.app_name = Some(app_name.to_owned());
        c
    }

    /// The client that calls `group`'s executors: with the group's own token, or this one's
    /// (the global token) when it has none, and the group's app name.
    pub(crate) fn for_group(&self, group: &tickwork_store::Group) -> Self {
        let c = match &group.access_token {
            Some(token) => self.with_token(token),
            None => self.clone(),
        };
        c.with_app_name(&group.app_name)
    }

    /// `POST <address>/run` (`/trigger` to an XXL-JOB 3.5 executor): code 200 means queued,
    /// not done.
    pub async fn run(&self, address: &str, param: &TriggerParam) -> CallOutcome {
        self.run_gated(address, param, Arc::new(|| true)).await
    }

    /// As [`ExecutorClient::run`], asking `gate` the moment the body is about to leave; a
    /// closed gate gives an outcome that [`CallOutcome::held_back`].
    pub async fn run_gated(
        &self,
        address: &str,
        param: &TriggerParam,
        gate: SendGate,
    ) -> CallOutcome {
        self.run_ranked(address, param, gate, 0).await
    }

    /// As [`ExecutorClient::run_gated`]; a pull executor out of credits takes the waiting
    /// runs by `rank` ([`tickwork_core::routing::slot_rank`]).
    pub async fn run_ranked(
        &self,
        address: &str,
        param: &TriggerParam,
        gate: SendGate,
        rank: i64,
    ) -> CallOutcome {
        if is_pull_address(address) {
            return self.pull_run(address, param, &gate, rank).await;
        }
        let body = Bytes::from(tickwork_protocol::encode(param));
        let path = self.run_paths.get(address);
        let out = self
            .run_at(address, RUN_PATHS[path], body.clone(), &gate)
            .await;
        if out.answer() != Answer::UnknownCall {
            return out;
        }
        // Not run: the executor does not know the path. Another generation, maybe upgraded
        // at the same address since its last run here.
        let other = 1 - path;
        let again = self.run_at(address, RUN_PATHS[other], body, &gate).await;
        if again.answer() == Answer::UnknownCall {
            return out;
        }
        debug!(
            address,
            path = RUN_PATHS[other],
            "executor runs jobs on this path"
        );
        self.run_paths.set(address, other);
        again
    }

    async fn run_at(
        &self,
        address: &str,
        path: &str,
        bytes: Bytes,
        gate: &SendGate,
    ) -> CallOutcome {
        let held_back = Arc::new(AtomicBool::new(false));
        let body = GatedBody {
            bytes: Some(bytes),
            gate: gate.clone(),
            held_back: held_back.clone(),
        };
        let mut out: CallOutcome = self.call_with(address, path, CallBody::Gated(body)).await;
        if held_back.load(Ordering::SeqCst) {
            out = CallOutcome::transport(format!(
                "{}: held back before sending (this node may no longer send the run)",
                join(address, path)
            ));
            out.held_back = true;
        }
        out
    }

    /// `POST <address>/beat` with no body: is the executor alive?
    pub async fn beat(&self, address: &str) -> CallOutcome {
        self.call(address, "beat", None).await
    }

    /// `POST <address>/idleBeat`: is the job idle there?
    pub async fn idle_beat(&self, address: &str, job_id: i32) -> CallOutcome {
        let body = tickwork_protocol::encode(&IdleBeatParam { job_id });
        self.call(address, "idleBeat", Some(body)).await
    }

    /// `POST <address>/kill`: kill what the job's worker runs and drop its queue.
    pub async fn kill(&self, address: &str, job_id: i32) -> CallOutcome {
        let body = tickwork_protocol::encode(&KillParam { job_id });
        self.call(address, "kill", Some(body)).await
    }

    /// `POST <address>/log`: read a run's log from a line on.
    pub async fn log(&self, address: &str, param: &LogParam) -> CallOutcome<LogResult> {
        self.call(address, "log", Some(tickwork_protocol::encode(param)))
            .await
    }

    /// `POST <address>/tickwork/accepted`: which of `run_ids` the executor accepted on `/run`,
    /// and since when its record is complete. Asked in parts of at most
    /// [`MAX_ACCEPTED_QUERY`] ids (always at least one call, so an empty list tells whether
    /// the executor knows the call); the first part that fails is the outcome, otherwise the
    /// answers are merged, with the latest `record_since`.
    ///
    /// Only Tickwork executors know this call. Tell the outcomes apart with
    /// [`CallOutcome::answer`]: [`Answer::UnknownCall`] is an executor that cannot say (a Java
    /// `xxl-job-core` executor answers `invalid request, uri-mapping(/tickwork/accepted) not
    /// found.`), [`Answer::NoAnswer`] a transport failure (ask again later), and
    /// [`Answer::Answered`] with a success code carries the answer.
    pub async fn accepted(&self, address: &str, run_ids: &[i64]) -> CallOutcome<AcceptedRuns> {
        let method = ACCEPTED_PATH.trim_start_matches('/');
        let parts: Vec<&[i64]> = if run_ids.is_empty() {
            vec![run_ids]
        } else {
            run_ids.chunks(MAX_ACCEPTED_QUERY).collect()
        };
        let mut merged = AcceptedRuns::default();
        let mut msg = None;
        for part in parts {
            let body = tickwork_protocol::encode(&AcceptedQuery {
                log_ids: part.to_vec(),
            });
            let outcome = self.call::<AcceptedRuns>(address, method, Some(body)).await;
            if !outcome.is_success() {
                return outcome;
            }
            let Some(answer) = outcome.payload else {
                return CallOutcome::transport(format!(
                    "{}: executor answered an unreadable body",
                    join(address, method)
                ));
            };
            merged.accepted.extend(answer.accepted);
            merged.record_since = merged.record_since.max(answer.record_since);
            msg = outcome.msg;
        }
        CallOutcome {
            code: tickwork_protocol::CODE_SUCCESS,
            msg,
            payload: Some(merged),
            transport: false,
            held_back: false,
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        address: &str,
        method: &str,
        body: Option<Vec<u8>>,
    ) -> CallOutcome<T> {
        if is_pull_address(address) {
            let body = match body {
                Some(bytes) => serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
                None => serde_json::Value::Null,
            };
            return self.pull_call(address, method, body).await;
        }
        self.call_with(address, method, CallBody::Bytes(body.map(Bytes::from)))
            .await
    }

    /// `/run` down a pull executor's connection: one of its credits first (waiting at most
    /// the call's timeout), then the gate, then the call.
    async fn pull_run(
        &self,
        address: &str,
        param: &TriggerParam,
        gate: &SendGate,
        rank: i64,
    ) -> CallOutcome {
        let url = join(address, "run");
        let body = serde_json::to_value(param).expect("a trigger param is always serializable");
        let Some(link) = self.pull.get(address, self.app_name.as_deref()) else {
            // Held by another node: the gate is asked before the call is written there.
            if !gate() {
                return pull_held_back(&url);
            }
            let relayed = self
                .pull
                .relay(
                    address,
                    self.app_name.as_deref(),
                    "/run",
                    body,
                    (self.timeout, rank),
                )
                .await;
            return pull_outcome(&url, relayed);
        };
        if let Err(e) = link.take_credit(rank, self.timeout).await {
            return pull_failure(&url, e);
        }
        if !gate() {
            link.return_credit();
            return pull_held_back(&url);
        }
        pull_outcome(&url, link.call("/run", body, self.timeout).await)
    }

    /// Any other call down a pull executor's connection.
    async fn pull_call<T: DeserializeOwned>(
        &self,
        address: &str,
        method: &str,
        body: serde_json::Value,
    ) -> CallOutcome<T> {
        let url = join(address, method);
        let path = format!("/{method}");
        let answer = match self.pull.get(address, self.app_name.as_deref()) {
            Some(link) => link.call(&path, body, self.timeout).await,
            None => {
                self.pull
                    .relay(
                        address,
                        self.app_name.as_deref(),
                        &path,
                        body,
                        (self.timeout, 0),
                    )
                    .await
            }
        };
        pull_outcome(&url, answer)
    }

    async fn call_with<T: DeserializeOwned>(
        &self,
        address: &str,
        method: &str,
        body: CallBody,
    ) -> CallOutcome<T> {
        let url = join(address, method);
        // Held until the answer is read (or the call gives up).
        let _slot = self.in_flight.acquire(address).await;
        let headers = CallHeaders {
            token: &self.token,
            app_name: self.app_name.as_deref(),
        };
        let limit = answer_limit(method);
        match self.transport.post(&url, headers, body, limit).await {
            Ok(bytes) => outcome_of(&url, &bytes),
            // What the caller sees says only that there was no answer: whether the host
            // refused, timed out or reset would tell an open port from a closed one. The
            // cause is logged.
            Err(CallFailure::Unreachable { cause, error }) => {
                warn!(url, cause, error, "executor call failed");
                CallOutcome::transport(format!("{url}: executor unreachable"))
            }
            // Never followed: that would resend the run and the token to another host.
            Err(CallFailure::Redirect(status)) => CallOutcome::transport(format!(
                "{url}: executor answered a redirect ({})",
                status.as_u16()
            )),
            Err(CallFailure::Status(status)) => {
                CallOutcome::transport(format!("{url}: executor answered http status {status}"))
            }
            Err(CallFailure::TooLarge) => CallOutcome::transport(format!(
                "{url}: executor answer over the {limit} byte limit"
            )),
        }
    }
}

/// The outcome an executor's answer `bytes` (its envelope) gives a call to `url`.
fn outcome_of<T: DeserializeOwned>(url: &str, bytes: &[u8]) -> CallOutcome<T> {
    match tickwork_protocol::decode::<Envelope<T>>(bytes) {
        Ok(env) => CallOutcome {
            code: env.code,
            msg: env.msg,
            payload: env.payload,
            transport: false,
            held_back: false,
        },
        Err(e) => {
            debug!(url = %url, error = %e, "unreadable executor answer");
            CallOutcome::transport(format!("{url}: executor answered an unreadable body"))
        }
    }
}

/// The phrases of the transport failures above (metrics tell them from executor refusals).
pub(crate) const TRANSPORT_PHRASES: [&str; 5] = [
    ": executor unreachable",
    ": executor answered a redirect",
    ": executor answered http status ",
    ": executor answer over the ",
    ": executor answered an unreadable body",
];

/// The most the admin reads of an answer to `method`: a log page can be large, the other
/// answers are a few fields.
fn answer_limit(method: &str) -> usize {
    match method {
        "log" => LOG_ANSWER_LIMIT,
        m if m == ACCEPTED_PATH.trim_start_matches('/') => ACCEPTED_ANSWER_LIMIT,
        _ => SMALL_ANSWER_LIMIT,
    }
}

/// The most the admin reads of a `/tickwork/accepted` answer: up to [`MAX_ACCEPTED_QUERY`]
/// ids of up to 20 characters, written twice (under `content` and `data`).
pub const ACCEPTED_ANSWER_LIMIT: usize = 1024 * 1024;

/// The most the admin reads of a `/log` answer.
pub const LOG_ANSWER_LIMIT: usize = 4 * 1024 * 1024;
/// The most the admin reads of a `/run`, `/kill`, `/beat` or `/idleBeat` answer.
pub const SMALL_ANSWER_LIMIT: usize = 64 * 1024;

/// `<address>/<method>`, stripping one trailing slash of the registered address (which is
/// kept byte for byte elsewhere).
pub fn join(address: &str, method: &str) -> String {
    let base = address.trim();
    let base = base.strip_suffix('/').unwrap_or(base);
    format!("{base}/{method}")
}

/// The outcome of a call down a pull connection: the executor's envelope, or why none came.
fn pull_outcome<T: DeserializeOwned>(
    url: &str,
    answer: Result<serde_json::Value, LinkFailure>,
) -> CallOutcome<T> {
    match answer {
        Ok(body) => outcome_of(url, &serde_json::to_vec(&body).unwrap_or_default()),
        Err(e) => pull_failure(url, e),
    }
}

/// A call down a pull connection that got no answer; the reason is the admin's own, so it is
/// shown in full.
fn pull_failure<T>(url: &str, e: LinkFailure) -> CallOutcome<T> {
    debug!(url, error = %e, "pull executor call failed");
    CallOutcome::transport(format!("{url}: executor unreachable ({e})"))
}

/// A `/run` for a pull executor stopped by its gate.
fn pull_held_back<T>(url: &str) -> CallOutcome<T> {
    let mut out = CallOutcome::transport(format!(
        "{url}: held back before sending (this node may no longer send the run)"
    ));
    out.held_back = true;
    out
}

#[cfg(test)]
mod tests {
    use super::join;
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A socket on a free loopback port for the executor a test plays, and its address
    /// (`http://host:port`, no slash).
    async fn executor_socket() -> (tokio::net::TcpListener, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        (listener, address)
    }

    /// An executor that takes the request and never answers, or answers its head and then
    /// nothing: the call gives up at its deadline, as no answer, whichever part was missing.
    #[tokio::test]
    async fn a_call_without_a_whole_answer_gives_up_at_its_deadline() {
        use tokio::io::AsyncWriteExt;
        for head_only in [false, true] {
            let (listener, address) = executor_socket().await;
            let server = tokio::spawn(async move {
                let (mut socket, _) = listener.accept().await.expect("accept");
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = socket.read(&mut buf).await.expect("read");
                    request.extend_from_slice(&buf[..n]);
                }
                if head_only {
                    let head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{";
                    socket.write_all(head.as_bytes()).await.expect("write");
                }
                // Held open, silent, until the test ends.
                std::future::pending::<()>().await;
            });
            let client = ExecutorClient::new("", Duration::from_millis(300));
            let started = std::time::Instant::now();
            let outcome = client.beat(&address).await;
            let took = started.elapsed();
            assert!(outcome.transport, "head only: {head_only}");
            assert_eq!(
                outcome.msg.as_deref(),
                Some(format!("{address}/beat: executor unreachable").as_str())
            );
            assert!(
                took >= Duration::from_millis(300) && took < Duration::from_secs(5),
                "gave up after {took:?} (head only: {head_only})"
            );
            server.abort();
        }
    }

    /// Three admins each keeping a burst's worth of connections to one executor filled its
    /// connection cap, and runs it ran were recorded as failed: one admin's client has at most
    /// `CALLS_PER_ADDRESS` calls to an address in flight, and keeps no more connections open
    /// than that once a burst is over. (A call gives its connection back before it returns;
    /// one that comes back to a full idle list is closed.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_to_one_executor_never_hold_more_connections_than_the_bound() {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::AsyncWriteExt;
        let (listener, base) = executor_socket().await;
        let address = format!("{base}/");
        // An executor that holds every request until the test lets go, then answers each on
        // its connection, kept alive.
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let closed_one = Arc::new(tokio::sync::Notify::new());
        let held = Arc::new(AtomicUsize::new(0));
        let held_more = Arc::new(tokio::sync::Notify::new());
        let (release, released) = tokio::sync::watch::channel(false);
        let server = tokio::spawn({
            let (accepted, open, closed_one, held, held_more) = (
                accepted.clone(),
                open.clone(),
                closed_one.clone(),
                held.clone(),
                held_more.clone(),
            );
            async move {
                while let Ok((mut socket, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    open.fetch_add(1, Ordering::SeqCst);
                    let (open, closed_one, held, held_more, mut released) = (
                        open.clone(),
                        closed_one.clone(),
                        held.clone(),
                        held_more.clone(),
                        released.clone(),
                    );
                    tokio::spawn(async move {
                        let mut request = Vec::new();
                        let mut buf = [0u8; 1024];
                        loop {
                            let n = socket.read(&mut buf).await.unwrap_or(0);
                            if n == 0 {
                                open.fetch_sub(1, Ordering::SeqCst);
                                closed_one.notify_one();
                                return;
                            }
                            request.extend_from_slice(&buf[..n]);
                            if !request.windows(4).any(|w| w == b"\r\n\r\n") {
                                continue;
                            }
                            request.clear();
                            held.fetch_add(1, Ordering::SeqCst);
                            held_more.notify_one();
                            let _ = released.wait_for(|go| *go).await;
                            let body = br#"{"code":200,"msg":null}"#;
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\n\r\n",
                                body.len()
                            );
                            if socket.write_all(head.as_bytes()).await.is_err()
                                || socket.write_all(body).await.is_err()
                            {
                                return;
                            }
                        }
                    });
                }
            }
        });
        let client = ExecutorClient::new("", Duration::from_secs(30));
        let calls = CALLS_PER_ADDRESS * 2 + 10;
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..calls {
            let (client, address) = (client.clone(), address.clone());
            all.spawn(async move { client.beat(&address).await });
        }
        // The first calls reach the executor and wait there; the others wait their turn.
        while held.load(Ordering::SeqCst) < CALLS_PER_ADDRESS {
            held_more.notified().await;
        }
        // Nothing has come back yet: exactly the bound's worth of connections.
        assert_eq!(accepted.load(Ordering::SeqCst), CALLS_PER_ADDRESS);
        release.send(true).expect("the executor listens");
        while let Some(outcome) = all.join_next().await {
            let outcome = outcome.expect("call");
            assert!(!outcome.transport, "{:?}", outcome.msg);
        }
        assert_eq!(held.load(Ordering::SeqCst), calls);
        // Every slot went back, and the address left the map.
        assert!(client.in_flight.addresses.lock().unwrap().is_empty());
        // The burst's extra connections, if any, are closed; the bound's worth stay open.
        let settled = async {
            loop {
                let closing = closed_one.notified();
                if open.load(Ordering::SeqCst) <= CALLS_PER_ADDRESS {
                    return;
                }
                closing.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), settled)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} connections still open after the burst",
                    open.load(Ordering::SeqCst)
                )
            });
        server.abort();
    }

    #[tokio::test]
    async fn a_closed_gate_keeps_the_run_from_leaving() {
        let (listener, base) = executor_socket().await;
        let address = format!("{base}/");
        // Everything the executor's socket ever receives, until the admin closes it.
        let executor = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut got = Vec::new();
            let _ = socket.read_to_end(&mut got).await;
            String::from_utf8_lossy(&got).into_owned()
        });
        let client = ExecutorClient::new("", Duration::from_secs(10));
        let param = TriggerParam {
            log_id: 424_242,
            ..TriggerParam::default()
        };
        let out = client.run_gated(&address, &param, Arc::new(|| false)).await;
        assert!(out.held_back(), "{out:?}");
        assert_eq!(out.answer(), Answer::NoAnswer);
        drop(client);
        let got = tokio::time::timeout(Duration::from_secs(30), executor)
            .await
            .expect("the admin closed the connection")
            .expect("the executor task");
        assert!(!got.contains("424242"), "the run left: {got}");
    }

    #[test]
    fn joins_with_and_without_trailing_slash() {
        assert_eq!(join("http://h:9999/", "run"), "http://h:9999/run");
        assert_eq!(join("http://h:9999", "run"), "http://h:9999/run");
        assert_eq!(
            join(" http://h:9999/ctx/ ", "beat"),
            "http://h:9999/ctx/beat"
        );
    }
}
