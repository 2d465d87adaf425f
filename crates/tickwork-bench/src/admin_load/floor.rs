//! `--scenario send-floor`: the lateness this machine gives `--jobs` `/run` calls due on the
//! same instant with no scheduler at all. A sender on a runtime of its own (as many threads as
//! the admin's) posts each second's calls to the fake executor with at most 64 in flight, as
//! the admin's dispatch does to one address, and the fake executor records their arrival as in
//! fire-rate. What fire-rate measures above this floor is the admin's own; below it no
//! scheduler on these cores can go. By default (`--floor-sender raw`) 64 tasks each own one
//! connection and write each request whole, as the admin's executor client sends; `owned`
//! drives each connection with hyper's connection API instead, and `pooled` sends a task per
//! call on hyper's pooled client, as the admin sent before.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use http_body::Body;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tickwork_protocol::{ACCESS_TOKEN_HEADER, TriggerParam};
use tokio::sync::Semaphore;

use super::fake::{self, FakeSpec};
use super::procs::{self, CpuSplit, Parts};
use super::stats::{Spread, ms, window_figures};
use super::{LoadArgs, now_ms, sleep_until_ms, token};

/// How `send-floor` sends its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FloorSender {
    /// A task per call on hyper's pooled client, as the admin sent before its own client: the
    /// request crosses to the task that drives its connection and the answer crosses back.
    Pooled,
    /// As many tasks as calls in flight, each owning one connection and driving it itself:
    /// no task per call and no hand-off between tasks.
    Owned,
    /// As `owned`, each task writing its request's bytes to its socket itself and reading the
    /// answer with `httparse`, without hyper: what hyper's own work costs a call.
    Raw,
}

impl FloorSender {
    fn as_str(self) -> &'static str {
        match self {
            FloorSender::Pooled => "pooled",
            FloorSender::Owned => "owned",
            FloorSender::Raw => "raw",
        }
    }
}

/// Calls in flight to the one executor address: the admin's bound per address.
const IN_FLIGHT: usize = 64;
/// Longest wait for one call's answer.
const CALL_MAX: Duration = Duration::from_secs(10);

/// Runs the scenario and prints its figures and RESULT line.
pub(super) async fn run(args: LoadArgs) -> anyhow::Result<()> {
    let jobs = args.jobs.unwrap_or(10_000);
    let duration = args.duration.unwrap_or(30);
    if jobs == 0 || duration == 0 || jobs > i32::MAX as usize {
        anyhow::bail!("--jobs and --duration must be at least 1 (--jobs at most 2^31 - 1)");
    }
    // The fake executor's reqwest client is built without a default TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = token();
    let executor = fake::start(FakeSpec {
        index: 0,
        admins: &[],
        token: &token,
        app: "send-floor",
        server: args.fake_server,
    })
    .await?;
    let how = args.floor_sender;
    println!(
        "scenario=send-floor jobs={jobs} in_flight={IN_FLIGHT} sender={} warmup={}s \
         window={duration}s",
        how.as_str(),
        args.warmup
    );
    println!(
        "measured: lateness = instant the fake executor's /run handler got the call minus the \
         whole second it was due; the sender runs on its own runtime, with nothing else to do"
    );
    let sender = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("send-floor")
        .build()
        .context("cannot build the sender's runtime")?;
    let url: hyper::Uri = format!("{}run", executor.address).parse()?;
    let first = (now_ms() / 1000 + 2) * 1000;
    let from_ms = first + 1000 * args.warmup as i64;
    let to_ms = from_ms + 1000 * duration as i64;
    let calls = Calls {
        url,
        token,
        jobs,
        first_ms: first,
        to_ms,
    };
    let seconds = match how {
        FloorSender::Pooled => sender.spawn(send_every_second(calls)),
        FloorSender::Owned => sender.spawn(send_owned(calls, false)),
        FloorSender::Raw => sender.spawn(send_owned(calls, true)),
    };
    // Read 50 ms before a burst at both ends, so that the window holds `duration` whole bursts.
    // No admin, executor process or database: the bench (sender and executor), interrupts and
    // the machine.
    let parts = Parts::default();
    sleep_until_ms(from_ms - 50).await;
    let (cpu0, at0) = (parts.snapshot(), std::time::Instant::now());
    sleep_until_ms(to_ms - 50).await;
    let (cpu1, at1) = (parts.snapshot(), std::time::Instant::now());
    let secs = (at1 - at0).as_secs_f64();
    let split = CpuSplit::between(&cpu0, &cpu1, secs, procs::ticks_per_second());
    let cores = procs::cores();
    let per_call = us_per_call(split.machine, secs, jobs * duration as usize);
    // Every call has its answer when the sender returns, and each was recorded before it.
    let failed = seconds.await.context("the sender panicked")??;
    sender.shutdown_background();
    let arrivals = executor.finish().await;
    let job_ids: Vec<i64> = (1..=jobs as i64).collect();
    let w = window_figures(&arrivals, &job_ids, from_ms, to_ms);
    for (i, s) in w.per_second.iter().enumerate() {
        if let Some(l) = &s.lateness {
            println!(
                "  s{i:<3} arrived {:>6}  p50 {:>9}  p99 {:>9}  max {:>9}",
                s.arrived,
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            );
        }
    }
    let l = w.lateness.unwrap_or(Spread {
        min: 0,
        p50: 0,
        p99: 0,
        max: 0,
        count: 0,
    });
    println!(
        "summary: expected {} calls, {} missed, {} duplicated, {failed} failed",
        w.expected, w.missed, w.duplicated
    );
    println!("window: {split}");
    println!(
        "machine: {:.1} us of CPU a call (sender, executor and kernel), {cores} cores: a burst of \
         {jobs} calls needs {:.1} ms with every core on it",
        per_call,
        burst_ms(per_call, jobs, cores)
    );
    println!(
        "RESULT scenario=send-floor jobs={jobs} in_flight={IN_FLIGHT} sender={} calls_per_s={:.1} \
         p50_ms={:.1} p99_ms={:.1} max_ms={:.1} missed={} failed={failed} \
         machine_cpu_us_per_call={:.1} burst_cpu_ms={:.1}",
        how.as_str(),
        (w.expected - w.missed) as f64 / duration as f64,
        l.p50 as f64 / 1000.0,
        l.p99 as f64 / 1000.0,
        l.max as f64 / 1000.0,
        w.missed,
        per_call,
        burst_ms(per_call, jobs, cores),
    );
    Ok(())
}

/// The whole machine's CPU per call, in microseconds: its busy share over `window_s` (percent
/// of one core, as [`CpuSplit`] gives it) spread over the `calls` sent in it; 0 for none.
fn us_per_call(machine_pct: f64, window_s: f64, calls: usize) -> f64 {
    if calls == 0 {
        return 0.0;
    }
    machine_pct / 100.0 * window_s * 1e6 / calls as f64
}

/// The shortest a burst of `calls`, `us_per_call` each, can be with all `cores` on it, in ms.
fn burst_ms(us_per_call: f64, calls: usize, cores: usize) -> f64 {
    calls as f64 * us_per_call / 1000.0 / cores.max(1) as f64
}

/// The calls a floor sends: `jobs` calls to `url` due at each whole second from `first_ms` to
/// `to_ms`.
#[derive(Clone)]
struct Calls {
    url: hyper::Uri,
    token: String,
    jobs: usize,
    first_ms: i64,
    to_ms: i64,
}

/// Posts `calls`, a task each, each body built at its send as the admin builds it; the calls
/// that failed.
async fn send_every_second(calls: Calls) -> anyhow::Result<u64> {
    let Calls {
        url,
        token,
        jobs,
        first_ms,
        to_ms,
    } = calls;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, String> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(IN_FLIGHT)
        .pool_idle_timeout(Duration::from_secs(20))
        .build(connector);
    let gate = Arc::new(Semaphore::new(IN_FLIGHT));
    let failed = Arc::new(AtomicU64::new(0));
    let mut log_id = 0_i64;
    let mut due = first_ms;
    while due < to_ms {
        sleep_until_ms(due).await;
        for job in 1..=jobs {
            log_id += 1;
            let permit = Arc::clone(&gate).acquire_owned().await?;
            let body = trigger_body(job, log_id, due)?;
            let request = hyper::Request::post(url.clone())
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(ACCESS_TOKEN_HEADER, token.as_str())
                .body(body)?;
            let (client, failed) = (client.clone(), Arc::clone(&failed));
            tokio::spawn(async move {
                let answered = tokio::time::timeout(CALL_MAX, async {
                    let answer = client.request(request).await?;
                    let ok = answer.status().is_success();
                    let mut body = answer.into_body();
                    while let Some(frame) =
                        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx))
                            .await
                    {
                        frame?;
                    }
                    Ok::<bool, anyhow::Error>(ok)
                })
                .await;
                if !matches!(answered, Ok(Ok(true))) {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
        }
        due += 1000;
    }
    // Every call has its answer once every permit is back.
    let _all = gate.acquire_many(IN_FLIGHT as u32).await?;
    Ok(failed.load(Ordering::Relaxed))
}

/// The `/run` body of call `log_id` to `job` due at `due`, built as the admin builds it.
fn trigger_body(job: usize, log_id: i64, due: i64) -> serde_json::Result<String> {
    serde_json::to_string(&TriggerParam {
        job_id: job as i32,
        executor_handler: "bench-noop".into(),
        executor_block_strategy: "SERIAL_EXECUTION".into(),
        log_id,
        log_date_time: due,
        glue_type: "BEAN".into(),
        broadcast_total: 1,
        ..TriggerParam::default()
    })
}

/// Posts `calls` from [`IN_FLIGHT`] tasks that each own one connection: a task takes the next
/// call (numbered across seconds), waits for its second, sends it and reads the answer while
/// driving the connection itself (with hyper, or `raw`: its own bytes); the calls that failed.
async fn send_owned(calls: Calls, raw: bool) -> anyhow::Result<u64> {
    let (released, _) = tokio::sync::watch::channel(0_i64);
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT {
        let call = OwnedCalls {
            calls: calls.clone(),
            next: Arc::clone(&next),
            released: released.subscribe(),
            failed: Arc::clone(&failed),
        };
        if raw {
            workers.spawn(call.run_raw());
        } else {
            workers.spawn(call.run());
        }
    }
    let mut due = calls.first_ms;
    while due < calls.to_ms {
        sleep_until_ms(due).await;
        released.send_replace(due);
        due += 1000;
    }
    while let Some(done) = workers.join_next().await {
        done.context("a sender task panicked")??;
    }
    Ok(failed.load(Ordering::Relaxed))
}

/// One task of [`send_owned`] with its share of the calls.
struct OwnedCalls {
    calls: Calls,
    next: Arc<AtomicU64>,
    released: tokio::sync::watch::Receiver<i64>,
    failed: Arc<AtomicU64>,
}

impl OwnedCalls {
    async fn run(mut self) -> anyhow::Result<()> {
        let calls = self.calls.clone();
        let jobs = calls.jobs as u64;
        let authority = calls.url.authority().context("no host in the url")?.clone();
        let stream = tokio::net::TcpStream::connect(authority.as_str()).await?;
        stream.set_nodelay(true)?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::pin!(conn);
        while let Some((k, due)) = self.next_call().await? {
            let body = trigger_body((k % jobs) as usize + 1, k as i64 + 1, due)?;
            let request = hyper::Request::post(calls.url.path())
                .header(hyper::header::HOST, authority.as_str())
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(ACCESS_TOKEN_HEADER, calls.token.as_str())
                .body(body)?;
            let call = async {
                std::future::poll_fn(|cx| send.poll_ready(cx)).await?;
                let answer = send.send_request(request).await?;
                let ok = answer.status().is_success();
                let mut body = answer.into_body();
                while let Some(frame) =
                    std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
                {
                    frame?;
                }
                Ok::<bool, anyhow::Error>(ok)
            };
            // The call and its connection in one task: nothing crosses to another.
            let answered = tokio::time::timeout(CALL_MAX, async {
                tokio::select! {
                    biased;
                    ok = call => ok,
                    closed = conn.as_mut() => {
                        Err(anyhow::anyhow!("the connection closed: {closed:?}"))
                    }
                }
            })
            .await;
            if !matches!(answered, Ok(Ok(true))) {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if !matches!(answered, Ok(Ok(false))) {
                    anyhow::bail!("a call on an owned connection failed: {answered:?}");
                }
            }
        }
        Ok(())
    }

    /// The next call of this task and its due instant, once released; `None` past the window.
    async fn next_call(&mut self) -> anyhow::Result<Option<(u64, i64)>> {
        let jobs = self.calls.jobs as u64;
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        let due = self.calls.first_ms + 1000 * (k / jobs) as i64;
        if due >= self.calls.to_ms {
            return Ok(None);
        }
        self.released.wait_for(|at| *at >= due).await?;
        Ok(Some((k, due)))
    }

    /// As [`OwnedCalls::run`] without hyper: each request written whole in one buffer, each
    /// answer's head parsed by `httparse` and its body read by its `Content-Length`.
    async fn run_raw(mut self) -> anyhow::Result<()> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let jobs = self.calls.jobs as u64;
        let authority = self.calls.url.authority().context("no host in the url")?;
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
             {ACCESS_TOKEN_HEADER}: {}\r\ncontent-length: ",
            self.calls.url.path(),
            self.calls.token
        );
        let mut stream = tokio::net::TcpStream::connect(authority.as_str()).await?;
        stream.set_nodelay(true)?;
        let mut out = Vec::with_capacity(1024);
        let mut answer = Vec::with_capacity(1024);
        while let Some((k, due)) = self.next_call().await? {
            let body = trigger_body((k % jobs) as usize + 1, k as i64 + 1, due)?;
            out.clear();
            out.extend_from_slice(head.as_bytes());
            out.extend_from_slice(format!("{}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body.as_bytes());
            let call = async {
                stream.write_all(&out).await?;
                answer.clear();
                loop {
                    if stream.read_buf(&mut answer).await? == 0 {
                        anyhow::bail!("the executor closed the connection");
                    }
                    let Some(AnswerHead { status, at, length }) = answer_head(&answer)? else {
                        continue;
                    };
                    let ok = status == 200;
                    while answer.len() < at + length {
                        if stream.read_buf(&mut answer).await? == 0 {
                            anyhow::bail!("the executor closed the connection mid-answer");
                        }
                    }
                    return Ok(ok);
                }
            };
            match tokio::time::timeout(CALL_MAX, call).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                }
                other => anyhow::bail!("a call on a raw connection failed: {other:?}"),
            }
        }
        Ok(())
    }
}

/// An answer's status, where its body starts and how long it is.
pub(super) struct AnswerHead {
    pub status: u16,
    pub at: usize,
    pub length: usize,
}

/// The head of the answer at the start of `buf`, once it is whole; an answer must give its
/// length.
pub(super) fn answer_head(buf: &[u8]) -> anyhow::Result<Option<AnswerHead>> {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut parsed = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(at) = parsed.parse(buf)? else {
        return Ok(None);
    };
    let length: usize = parsed
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .context("an answer without content-length")
        .and_then(|h| Ok(std::str::from_utf8(h.value)?.trim().parse()?))?;
    let status = parsed.code.context("an answer without a status")?;
    Ok(Some(AnswerHead { status, at, length }))
}

#[cfg(test)]
mod tests {
    use super::{burst_ms, us_per_call};

    #[test]
    fn a_burst_needs_its_calls_cpu_spread_over_every_core() {
        // (machine busy in % of one core, window s, calls, burst of, cores) -> us a call, ms.
        for (pct, window, calls, burst, cores, us, ms) in [
            // Both cores at 30% for 10 s (6 s busy) over 200,000 calls: 30 us a call, 150 ms
            // for 10,000.
            (60.0, 10.0, 200_000, 10_000, 2, 30.0, 150.0),
            (60.0, 10.0, 200_000, 10_000, 1, 30.0, 300.0),
            (37.0, 30.0, 30_000, 1_000, 2, 370.0, 185.0),
            // Nothing sent, or no core counted: no division by zero.
            (50.0, 10.0, 0, 10_000, 2, 0.0, 0.0),
            (50.0, 10.0, 1_000, 10_000, 0, 5_000.0, 50_000.0),
        ] {
            let got = us_per_call(pct, window, calls);
            assert!(
                (got - us).abs() < 1e-9,
                "{pct}% over {calls} calls: {got} us"
            );
            let got = burst_ms(us, burst, cores);
            assert!(
                (got - ms).abs() < 1e-9,
                "{burst} calls on {cores} cores: {got} ms"
            );
        }
    }
}
