//! `--scenario executor-run`: an in-process executor with a no-op handler, driven over loopback
//! by keep-alive clients posting `/run`; counts accepted runs and completed runs (callbacks
//! received by a fake admin), and the memory of an executor holding 1,000 idle job workers.
//!
//! The clients and the admin speak raw HTTP/1.1 over sockets: a full HTTP client would cost
//! more CPU than the executor it measures on a 2-core machine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tickwork_executor::{Executor, JobContext, JobOutcome};
use tickwork_protocol::TriggerParam;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "bench-token";
const SUCCESS: &[u8] = br#"{"code":200,"msg":"Success"}"#;

/// Knobs of the scenario; the flags carry a `run-` prefix so that they can sit next to other
/// scenarios' flags in one command line.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ExecutorRunArgs {
    /// executor-run: how long the clients post `/run`, in seconds.
    #[arg(long = "run-seconds", default_value_t = 5)]
    pub seconds: u64,
    /// executor-run: concurrent keep-alive clients.
    #[arg(long = "run-clients", default_value_t = 8)]
    pub clients: usize,
    /// executor-run: distinct job ids the runs are spread over (one worker each).
    #[arg(long = "run-jobs", default_value_t = 100)]
    pub jobs: i32,
    /// executor-run: idle workers for the memory figure.
    #[arg(long = "run-idle-workers", default_value_t = 1000)]
    pub idle_workers: i32,
    /// executor-run: parent folder of the run logs (every run writes one file, so the file
    /// system counts) [default: the system's temporary folder].
    #[arg(long = "run-logs")]
    pub logs: Option<std::path::PathBuf>,
}

impl Default for ExecutorRunArgs {
    fn default() -> Self {
        ExecutorRunArgs {
            seconds: 5,
            clients: 8,
            jobs: 100,
            idle_workers: 1000,
            logs: None,
        }
    }
}

/// Runs the scenario and prints its figures, ending with a `RESULT scenario=executor-run` line.
pub(crate) async fn run(args: ExecutorRunArgs) -> anyhow::Result<()> {
    let completed = Arc::new(AtomicU64::new(0));
    let admin = start_admin(Arc::clone(&completed)).await?;
    let logs = args
        .logs
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("tickwork-bench-executor-{}", std::process::id()));
    println!("run logs in {}", logs.display());
    let executor = Executor::builder("bench")
        .admin_addresses(&format!("http://{admin}"))
        .access_token(TOKEN)
        .listen("127.0.0.1:0".parse()?)
        .log_folder(&logs)
        .handler("noop", |_ctx: JobContext| async {
            Ok(JobOutcome::success())
        })
        .start()
        .await?;
    let addr = executor.local_addr();
    let next_log_id = Arc::new(AtomicI64::new(1));

    // Memory first, on a fresh executor: 1,000 workers, each having run once and now idle.
    let rss_before = rss_mb();
    let mut client = Client::connect(addr).await?;
    for job in 0..args.idle_workers {
        let id = next_log_id.fetch_add(1, Ordering::Relaxed);
        client.run(1_000_000 + job, id).await?;
    }
    wait_for(&completed, args.idle_workers as u64).await?;
    let workers = executor.stats().workers;
    let rss_workers = rss_mb();
    println!(
        "idle workers: {workers}, rss {rss_workers:.1} MB (before: {rss_before:.1} MB, delta {:.1} MB)",
        rss_workers - rss_before
    );

    // Throughput: keep-alive clients posting as fast as answers come back.
    let start_completed = completed.load(Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let mut client = Client::connect(addr).await?;
        let (stop, accepted, refused, ids) = (
            Arc::clone(&stop),
            Arc::clone(&accepted),
            Arc::clone(&refused),
            Arc::clone(&next_log_id),
        );
        let jobs = args.jobs.max(1);
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let id = ids.fetch_add(1, Ordering::Relaxed);
                let job = (id % i64::from(jobs)) as i32;
                if client.run(job, id).await? {
                    accepted.fetch_add(1, Ordering::Relaxed);
                } else {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let window = t0.elapsed().as_secs_f64();
    let done_in_window = completed.load(Ordering::Relaxed) - start_completed;
    for task in tasks {
        task.await??;
    }
    let accepted = accepted.load(Ordering::Relaxed);
    let refused = refused.load(Ordering::Relaxed);
    let drain_start = Instant::now();
    wait_for(&completed, start_completed + accepted).await?;
    let drain = drain_start.elapsed().as_secs_f64();

    let accepted_per_s = accepted as f64 / window;
    let completed_per_s = done_in_window as f64 / window;
    println!(
        "{} clients, {} jobs, {window:.1} s: {accepted} runs accepted ({accepted_per_s:.0}/s), {refused} refused, \
         {done_in_window} completed in the window ({completed_per_s:.0}/s), the rest {:.2} s later",
        args.clients, args.jobs, drain
    );
    let report = executor.shutdown_and_wait().await?;
    let _ = std::fs::remove_dir_all(&logs);
    if !report.is_clean() {
        bail!("the executor did not drain cleanly: {report:?}");
    }
    println!(
        "RESULT scenario=executor-run run_accepted_per_s={accepted_per_s:.0} completed_per_s={completed_per_s:.0} rss_1000_workers_mb={rss_workers:.1}"
    );
    Ok(())
}

/// Waits until `counter` reaches `target` (callbacks arrive a few milliseconds after runs).
async fn wait_for(counter: &AtomicU64, target: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while counter.load(Ordering::Relaxed) < target {
        if Instant::now() > deadline {
            bail!(
                "only {} of {target} callbacks arrived",
                counter.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// The resident set size of this process, from /proc/self/status.
fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// One keep-alive connection to the executor.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    addr: SocketAddr,
}

impl Client {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            buf: Vec::with_capacity(4096),
            addr,
        })
    }

    /// Posts one `/run`; true when accepted.
    async fn run(&mut self, job_id: i32, log_id: i64) -> anyhow::Result<bool> {
        let body = tickwork_protocol::encode(&TriggerParam {
            job_id,
            executor_handler: "noop".into(),
            executor_block_strategy: "SERIAL_EXECUTION".into(),
            log_id,
            log_date_time: jiff::Timestamp::now().as_millisecond(),
            glue_type: "BEAN".into(),
            broadcast_total: 1,
            ..TriggerParam::default()
        });
        let mut request = format!(
            "POST /run HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json;charset=UTF-8\r\nXXL-JOB-ACCESS-TOKEN: {TOKEN}\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(&body);
        self.stream.write_all(&request).await?;
        let reply = read_message(&mut self.stream, &mut self.buf).await?;
        Ok(reply == SUCCESS)
    }
}

/// Reads one HTTP/1.1 message framed by Content-Length and returns its body; bytes of the next
/// message stay in `buf`.
async fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<Vec<u8>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).context("non-UTF-8 head")?;
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            let total = end + 4 + len;
            while buf.len() < total {
                fill(stream, buf).await?;
            }
            let body = buf[end + 4..total].to_vec();
            buf.drain(..total);
            return Ok(body);
        }
        fill(stream, buf).await?;
    }
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        bail!("connection closed");
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// A fake admin that accepts everything and counts callback items.
async fn start_admin(completed: Arc<AtomicU64>) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let completed = Arc::clone(&completed);
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(16 * 1024);
                while let Ok(body) = read_message(&mut stream, &mut buf).await {
                    let items = body.windows(8).filter(|w| w == b"\"logId\":").count();
                    completed.fetch_add(items as u64, Ordering::Relaxed);
                    let answer = br#"{"code":200,"msg":null}"#;
                    let mut reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        answer.len()
                    )
                    .into_bytes();
                    reply.extend_from_slice(answer);
                    if stream.write_all(&reply).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}
