//! `--scenario one-per-second` and `--scenario fire-rate`: the admin end to end, on real
//! processes. One or more `tickwork admin` children on a fresh database, one or more executors
//! (`--executor tickwork`: children, this binary again on the executor SDK with a no-op handler
//! that records when each run reached it; `--executor fake`: minimal executors inside this
//! process, see `fake.rs`), jobs created and started through the JSON API, all due on the same
//! whole seconds; after a warm-up, a window is measured: fires per second, lateness, missed and
//! duplicated fires (cross-checked in the run ledger), results recorded, the admin's peak RSS,
//! its CPU per 1,000 fires and the CPU split.

mod api;
mod api_writes;
pub(crate) mod child;
mod creates;
mod db;
mod executors;
mod fake;
mod floor;
mod health;
mod jobs_page;
mod probe;
mod procs;
mod report;
mod single;
mod stats;
mod workflow;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use db::BenchDb;
pub(crate) use db::DbKind;
use executors::{Executors, settle, wait_for_executors};
use health::{HealthFigures, HealthProbe};
use procs::{CpuSplit, ExecutorProc, Parts, Proc};
use report::{print_health, print_ledger, print_log_summary, print_seconds};
use stats::ms;

/// The handler name the jobs use and the executor children register.
const HANDLER: &str = "bench-noop";
/// Every second: the fire pattern of every job.
const EVERY_SECOND: &str = "* * * * * ?";
/// Longest time for creating the jobs, and for starting them: an overloaded admin answers
/// API calls slowly, and the run must end by itself.
const SETUP_MAX: Duration = Duration::from_secs(120);
/// Longest wait for the window's runs to leave `planned` after the window.
const DRAIN_MAX: Duration = Duration::from_secs(30);
/// Longest wait for arrivals to settle once the jobs are stopped.
const SETTLE_MAX: Duration = Duration::from_secs(30);
/// How long an executor gets to exit on SIGTERM (it drains and flushes its callbacks).
const EXECUTOR_EXIT_GRACE: Duration = Duration::from_secs(60);
/// How long an admin gets to exit on SIGTERM (an orchestrator's usual grace period); its
/// ledger is read after it is gone.
const ADMIN_EXIT_GRACE: Duration = Duration::from_secs(30);

/// Which executors receive the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExecutorKind {
    /// Minimal executors inside the bench process: `/run` answered at once, results posted
    /// back in batches. Measures the admin, not an executor SDK.
    Fake,
    /// Executor child processes on the Tickwork executor SDK.
    Tickwork,
}

impl ExecutorKind {
    fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Fake => "fake",
            ExecutorKind::Tickwork => "tickwork",
        }
    }
}

/// Which load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// One job firing every second: lateness at rest.
    OnePerSecond,
    /// `--jobs` jobs all due every second: throughput.
    FireRate,
    /// Fire-rate with more due than the admin can send (`--jobs` default 40,000), the jobs
    /// created started in bulk: what is not delivered must be recorded misfired, nothing
    /// doubled, memory bounded, and the health endpoints answering throughout.
    Overload,
    /// `--jobs` jobs created one request each, then 10,000 in one bulk request.
    CreateJobs,
    /// The jobs page with 500 jobs and 50,000 runs.
    JobsPage,
    /// `--jobs` workflows (default 100) of 10 nodes firing every 10 s: node lateness after
    /// its last parent, nothing missed or doubled.
    Workflow,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::OnePerSecond => "one-per-second",
            Load::FireRate => "fire-rate",
            Load::Overload => "overload",
            Load::CreateJobs => "create-jobs",
            Load::JobsPage => "jobs-page",
            Load::Workflow => "workflow",
        }
    }
}

/// Knobs of the admin load scenarios.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LoadArgs {
    /// fire-rate, overload, create-jobs: how many jobs, all due every second; workflow: how
    /// many workflows [default: 1000; workflow: 100;
    /// overload: 40000].
    // Its own id: executor-run's `--run-jobs` is `jobs` too.
    #[arg(id = "load_jobs", long = "jobs")]
    pub jobs: Option<usize>,
    /// The admin's database: a SQLite file, or a fresh database on the server.
    #[arg(long, value_enum, default_value_t = DbKind::Sqlite)]
    pub db: DbKind,
    /// Measured window in seconds [default: 60 for one-per-second and overload, 90 for
    /// fire-rate].
    #[arg(long, value_name = "SECS")]
    pub duration: Option<u64>,
    /// Seconds of firing before the window opens.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub warmup: u64,
    /// The `tickwork` binary [default: next to this executable].
    #[arg(long, value_name = "PATH")]
    pub tickwork_bin: Option<PathBuf>,
    /// Admin processes on the same database (SQLite: 1).
    #[arg(long, default_value_t = 1)]
    pub admins: usize,
    /// Which executors receive the runs.
    #[arg(long, value_enum, default_value_t = ExecutorKind::Fake)]
    pub executor: ExecutorKind,
    /// Executors (jobs are routed round robin over them when more than one).
    #[arg(long, default_value_t = 1)]
    pub executors: usize,
    /// API requests in flight during setup and stop.
    #[arg(long, default_value_t = 16)]
    pub api_concurrency: usize,
    /// PostgreSQL server on which `--db postgres` creates its database.
    #[arg(
        long,
        env = "TICKWORK_BENCH_POSTGRES",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pub postgres_url: String,
    /// MySQL/MariaDB server on which `--db mysql` creates its database.
    #[arg(
        long,
        env = "TICKWORK_BENCH_MYSQL",
        default_value = "mysql://root@127.0.0.1:3306/test"
    )]
    pub mysql_url: String,
    /// Parent folder of the executors' run log folders [default: the run's temporary folder].
    /// Every run creates one file there before its handler is invoked, so the file system
    /// is part of the measured lateness (a tmpfs takes it out).
    #[arg(long, value_name = "DIR")]
    pub executor_logs: Option<PathBuf>,
    /// Route `/run` through a pass-through proxy in each executor child that notes when the
    /// request leaves the admin's socket: splits lateness into the admin's and the executor's
    /// parts (adds one loopback hop).
    #[arg(long)]
    pub wire_probe: bool,
    /// Keep the run's temporary folder (admin and executor logs, records, SQLite file).
    #[arg(long)]
    pub keep: bool,
    /// send-floor: how the sender's calls travel.
    #[arg(long, value_enum, default_value_t = floor::FloorSender::Raw)]
    pub floor_sender: floor::FloorSender,
    /// `--executor fake` and send-floor: the fake executor's HTTP server.
    #[arg(long, value_enum, default_value_t = fake::FakeServer::Raw)]
    pub fake_server: fake::FakeServer,
}

/// Runs one admin load scenario and prints its figures, ending with one `RESULT` line.
pub(crate) fn run(load: Load, args: LoadArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run_async(load, args))
}

/// `--scenario send-floor`: see `floor.rs`.
pub(crate) fn send_floor(args: LoadArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(floor::run(args))
}

/// Epoch milliseconds from the wall clock (comparable between processes on one machine).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn sleep_until_ms(at: i64) {
    let wait = at - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

fn token() -> String {
    format!("{:08x}{:08x}", db::rand_u32(), db::rand_u32())
}

/// Everything fixed before the processes start.
struct Plan {
    load: Load,
    jobs: usize,
    duration: u64,
    args: LoadArgs,
    bin: PathBuf,
    dir: PathBuf,
}

async fn run_async(load: Load, args: LoadArgs) -> anyhow::Result<()> {
    let jobs = match load {
        Load::OnePerSecond => 1,
        Load::FireRate | Load::CreateJobs => args.jobs.unwrap_or(1000),
        Load::Overload => args.jobs.unwrap_or(40_000),
        Load::JobsPage => 500,
        Load::Workflow => args.jobs.unwrap_or(100),
    };
    let duration = args.duration.unwrap_or(match load {
        Load::OnePerSecond => 60,
        // Long enough for the results to come back and weigh on the admin during the window.
        Load::FireRate => 90,
        Load::Overload => 60,
        Load::CreateJobs | Load::JobsPage => 1,
        Load::Workflow => 60,
    });
    if jobs == 0 || duration == 0 || args.admins == 0 || args.executors == 0 {
        bail!("--jobs, --duration, --admins and --executors must be at least 1");
    }
    if args.wire_probe && args.executor == ExecutorKind::Fake {
        bail!("--wire-probe needs --executor tickwork");
    }
    if args.db == DbKind::Sqlite && args.admins > 1 {
        bail!("SQLite serves a single admin: use --db postgres or mysql with --admins > 1");
    }
    // reqwest is built without a default TLS provider (the workspace picks ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bin = match &args.tickwork_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("this binary has no folder")?
            .join("tickwork"),
    };
    if !bin.is_file() {
        bail!(
            "no tickwork binary at {} (build it: cargo build --release -p tickwork, or pass --tickwork-bin)",
            bin.display()
        );
    }
    let dir = std::env::temp_dir().join(format!(
        "tickwork-bench-{}-{:08x}",
        std::process::id(),
        db::rand_u32()
    ));
    std::fs::create_dir_all(&dir)?;
    println!(
        "scenario={} db={} executor={} jobs={jobs} admins={} executors={} warmup={}s \
         window={duration}s",
        load.name(),
        args.db.as_str(),
        args.executor.as_str(),
        args.admins,
        args.executors,
        args.warmup,
    );
    match args.executor {
        ExecutorKind::Tickwork => println!(
            "measured: lateness = wall-clock instant the executor SDK invokes the no-op handler \
             (after /run was accepted, the job's worker took the run and its run log file was \
             created) minus the run's scheduled instant (log_date_time = scheduled_at)"
        ),
        ExecutorKind::Fake => println!(
            "measured: lateness = wall-clock instant the fake executor's /run handler got the \
             request minus the run's scheduled instant (log_date_time = scheduled_at)"
        ),
    }
    let server = match args.db {
        DbKind::Postgres => args.postgres_url.as_str(),
        _ => args.mysql_url.as_str(),
    };
    preflight().await;
    let db = BenchDb::create(args.db, server, &dir).await?;
    println!("database {}", db.url);
    let plan = Plan {
        load,
        jobs,
        duration,
        args,
        bin,
        dir,
    };
    // On SIGINT or SIGTERM the scenario is dropped, which kills its children, and the
    // clean-up below still runs.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let outcome = tokio::select! {
        r = async {
            match plan.load {
                Load::CreateJobs => creates::drive(&plan, &db).await,
                Load::JobsPage => jobs_page::drive(&plan, &db).await,
                Load::Workflow => workflow::drive(&plan, &db).await,
                _ => drive(&plan, &db).await,
            }
        } => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        _ = term.recv() => Err(anyhow::anyhow!("terminated")),
    };
    if let Err(e) = db.drop_database().await {
        eprintln!("warning: the bench database was not dropped: {e:#}");
    }
    if plan.args.keep {
        println!("logs and records kept in {}", plan.dir.display());
        if let Some(p) = &plan.args.executor_logs {
            println!("run logs kept under {}", p.display());
        }
    } else {
        let dir = plan.dir.clone();
        let elsewhere = plan
            .args
            .executor_logs
            .as_ref()
            .and_then(|p| Some(p.join(dir.file_name()?)));
        // Executors write one run log file per run: hundreds of thousands at full load.
        let removed = tokio::task::spawn_blocking(move || {
            if let Some(logs) = elsewhere
                && logs.exists()
            {
                std::fs::remove_dir_all(logs)?;
            }
            if outcome.is_err() {
                // Keep the logs that explain the failure, drop the bulk.
                for entry in std::fs::read_dir(&dir)?.flatten() {
                    if entry.file_name().to_string_lossy().ends_with("-runlogs") {
                        std::fs::remove_dir_all(entry.path())?;
                    }
                }
                println!("logs kept in {}", dir.display());
            } else {
                std::fs::remove_dir_all(&dir)?;
            }
            std::io::Result::Ok(outcome)
        })
        .await?;
        return removed?;
    }
    outcome
}

/// Warns when the machine is already busy: other work on the cores skews every figure.
async fn preflight() {
    let a = procs::machine_ticks();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b = procs::machine_ticks();
    if let (Some((busy0, total0)), Some((busy1, total1))) = (a, b) {
        let cores = procs::cores() as f64;
        let busy = (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64 * 100.0 * cores;
        println!("machine busy before start: {busy:.0}% of one core ({cores} cores)");
        if busy > 20.0 {
            println!("warning: the machine is busy with other work; the figures will suffer");
        }
    }
}

/// The live sampler: the admins' peak RSS, and one line per second while `printing`.
struct Sampler {
    peak_kib: Arc<AtomicU64>,
    printing: Arc<AtomicBool>,
    window_start: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(parts: Parts, arrivals: Vec<Arc<AtomicU64>>) -> Sampler {
        let peak_kib = Arc::new(AtomicU64::new(0));
        let printing = Arc::new(AtomicBool::new(false));
        let window_start = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (peak, print, w0, halt) = (
            Arc::clone(&peak_kib),
            Arc::clone(&printing),
            Arc::clone(&window_start),
            Arc::clone(&stop),
        );
        let task = tokio::spawn(async move {
            let hz = procs::ticks_per_second();
            let total = || {
                arrivals
                    .iter()
                    .map(|a| a.load(Ordering::Relaxed))
                    .sum::<u64>()
            };
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            let (mut last_cpu, mut last_n, mut last_at) =
                (parts.snapshot(), total(), Instant::now());
            let mut ticks = 0u64;
            while !halt.load(Ordering::Relaxed) {
                tick.tick().await;
                let rss = parts.admin_rss_kib();
                peak.fetch_max(rss, Ordering::Relaxed);
                ticks += 1;
                if !ticks.is_multiple_of(4) {
                    continue;
                }
                let (cpu, n, at) = (parts.snapshot(), total(), Instant::now());
                if print.load(Ordering::Relaxed) {
                    let secs = at.duration_since(last_at).as_secs_f64();
                    let split = CpuSplit::between(&last_cpu, &cpu, secs, hz);
                    let w = w0.load(Ordering::Relaxed);
                    let t = if w == 0 {
                        "setup".to_owned()
                    } else {
                        format!("W{:+.0}s", (now_ms() - w) as f64 / 1000.0)
                    };
                    println!(
                        "live {t:>6}: arrivals {:>6.0}/s  admin_rss {:>6.1} MB  {split}",
                        n.saturating_sub(last_n) as f64 / secs,
                        rss as f64 / 1024.0,
                    );
                }
                (last_cpu, last_n, last_at) = (cpu, n, at);
            }
        });
        Sampler {
            peak_kib,
            printing,
            window_start,
            stop,
            task,
        }
    }

    /// Stops sampling; returns the peak admin RSS in KiB.
    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak_kib.load(Ordering::Relaxed)
    }
}

async fn drive(plan: &Plan, db: &BenchDb) -> anyhow::Result<()> {
    let args = &plan.args;
    let (token, api_token) = (token(), token());
    let started = Instant::now();

    // ---- admins: the first alone, since it migrates the database ----
    let mut admins: Vec<Proc> = Vec::new();
    let mut bases = Vec::new();
    let mut first_addr = None;
    for index in 0..args.admins {
        let (proc, addr) = procs::start_admin(procs::AdminSpec {
            bin: &plan.bin,
            index,
            db_url: &db.url,
            dir: &plan.dir,
            token: &token,
            api_token: &api_token,
            admin_password: None,
        })
        .await?;
        println!("admin-{index} pid {} listening on {addr}", proc.pid);
        admins.push(proc);
        bases.push(format!("http://{addr}"));
        first_addr.get_or_insert(addr);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_kib = admins
        .iter()
        .filter_map(|a| procs::rss_kib(a.pid))
        .max()
        .unwrap_or(0);
    println!(
        "admin idle rss {:.1} MB (started in {:.2} s)",
        idle_kib as f64 / 1024.0,
        started.elapsed().as_secs_f64() - 1.0
    );
    let health = HealthProbe::start(first_addr.context("no admin")?);

    // ---- executors ----
    let app = format!("tw-bench-{:06x}", db::rand_u32() & 0xff_ffff);
    let executors = match args.executor {
        ExecutorKind::Tickwork => {
            let mut children: Vec<ExecutorProc> = Vec::new();
            // A safety net only: the bench stops its executors itself.
            let run_logs = match &args.executor_logs {
                Some(parent) => parent.join(
                    plan.dir
                        .file_name()
                        .context("temporary folder has no name")?,
                ),
                None => plan.dir.clone(),
            };
            println!("executor run logs under {}", run_logs.display());
            let max_secs = plan.args.warmup + plan.duration + 2 * SETUP_MAX.as_secs() + 600;
            for index in 0..args.executors {
                let e = procs::start_executor(procs::ExecutorSpec {
                    index,
                    admins: &bases.join(","),
                    token: &token,
                    app: &app,
                    handler: HANDLER,
                    dir: &plan.dir,
                    run_logs: &run_logs,
                    max_secs,
                    wire_probe: args.wire_probe,
                })
                .await?;
                println!("executor-{index} pid {}", e.proc.pid);
                children.push(e);
            }
            Executors::Children(children)
        }
        ExecutorKind::Fake => {
            let mut fakes = Vec::new();
            for index in 0..args.executors {
                let f = fake::start(fake::FakeSpec {
                    index,
                    admins: &bases,
                    token: &token,
                    app: &app,
                    server: args.fake_server,
                })
                .await?;
                println!(
                    "{} in this process at {} (its CPU counts as bench)",
                    f.name, f.address
                );
                fakes.push(f);
            }
            Executors::Fake(fakes)
        }
    };
    let parts = Parts {
        admins: admins.iter().map(|a| a.pid).collect(),
        executors: executors.pids(),
        db_names: db.kind.process_names(),
    };
    // The first admin and executor: their CPU by thread says where the time goes.
    let thread_pids = [
        ("admin-0", admins[0].pid),
        match &executors {
            Executors::Children(c) => ("executor-0", c[0].proc.pid),
            Executors::Fake(_) => ("bench", std::process::id()),
        },
    ];
    let sampler = Sampler::start(parts.clone(), executors.counters());

    // ---- group and jobs through the JSON API ----
    let api = api::Api::new(bases.clone(), &api_token)?;
    let group = api
        .post(
            0,
            "/groups",
            &json!({ "app_name": app, "title": "bench", "address_mode": "auto" }),
        )
        .await?;
    let group_id = api::id_of(&group)?;
    wait_for_executors(&api, group_id, args.executors).await?;

    let route = if args.executors > 1 { "ROUND" } else { "FIRST" };
    let overload = plan.load == Load::Overload;
    let mut idle_ids = Vec::new();
    let (job_ids, create_jobs_per_s) = if overload {
        sampler.printing.store(true, Ordering::Relaxed);
        let ids = creates::bulk_started(&api, plan.jobs, group_id, &app, route).await?;
        idle_ids = api_writes::create_idle(&api, group_id, &app).await?;
        (ids, None)
    } else {
        let (ids, per_s) =
            creates::one_by_one(&api, plan.jobs, args.api_concurrency, group_id, &app, route)
                .await?;
        sampler.printing.store(true, Ordering::Relaxed);
        start_one_by_one(&api, &ids, args.api_concurrency).await;
        (ids, Some(per_s))
    };

    // ---- the window: whole seconds, after the warm-up ----
    let w0 = (now_ms() + plan.args.warmup as i64 * 1000).div_euclid(1000) * 1000 + 1000;
    let w1 = w0 + plan.duration as i64 * 1000;
    sampler.window_start.store(w0, Ordering::Relaxed);
    println!(
        "warm-up until the window opens at {w0} (in {:.1} s)",
        (w0 - now_ms()) as f64 / 1000.0
    );
    sleep_until_ms(w0).await;
    let (cpu0, at0) = (parts.snapshot(), Instant::now());
    let threads0: Vec<_> = thread_pids
        .iter()
        .map(|&(_, p)| procs::thread_ticks(p))
        .collect();
    let everyone0 = procs::all_ticks();
    let arrivals0 = executors.total();
    let mut mid = api_writes::MidWindow::none();
    if overload {
        sleep_until_ms(w0 + plan.duration as i64 * 500).await;
        mid = api_writes::MidWindow::measure(&api, &idle_ids).await;
    }
    sleep_until_ms(w1).await;
    let (cpu1, at1) = (parts.snapshot(), Instant::now());
    let threads1: Vec<_> = thread_pids
        .iter()
        .map(|&(_, p)| procs::thread_ticks(p))
        .collect();
    let everyone1 = procs::all_ticks();
    let arrivals1 = executors.total();
    let window_secs = at1.duration_since(at0).as_secs_f64();
    let hz = procs::ticks_per_second();
    let window_cpu = CpuSplit::between(&cpu0, &cpu1, window_secs, hz);
    println!("window closed: {window_cpu}");
    // CPU seconds of every admin process over the window.
    let admin_cpu_s = window_cpu.admins * window_secs / 100.0;
    let ours: Vec<u32> = parts
        .admins
        .iter()
        .chain(&parts.executors)
        .copied()
        .chain([std::process::id()])
        .collect();
    println!(
        "window closed: busiest other processes (database server included): {}",
        procs::top_others(&everyone0, &everyone1, &ours, window_secs, hz)
    );
    for (((name, _), a), b) in thread_pids.iter().zip(&threads0).zip(&threads1) {
        println!(
            "window closed: {name} threads: {}",
            procs::thread_split(a, b, window_secs, hz)
        );
    }
    println!(
        "window closed: executors counted {} arrivals during the window (live counter)",
        arrivals1 - arrivals0
    );

    // ---- drain: the jobs keep firing until every run of the window has left `planned` ----
    let t = Instant::now();
    if overload {
        // The claim runs far behind: first every fire of the window must be in the ledger
        // (no job's next fire before the window's end), or the jobs' stop would leave the
        // last ones unclaimed and unrecorded.
        wait_until_none(
            t,
            CLAIM_CATCH_UP_MAX,
            "the claim recorded every fire of the window",
            "jobs still unclaimed before the window's end",
            || db.jobs_unclaimed_before(group_id, w1),
        )
        .await;
    }
    let planned = format!("/runs?group_id={group_id}&state=planned&from={w0}&to={w1}&limit=1");
    wait_until_none(
        t,
        DRAIN_MAX,
        "every run of the window left `planned`",
        "runs of the window still planned",
        || async {
            let v = api.get_once(&planned, Duration::from_secs(5)).await?;
            v.get("total")
                .and_then(|t| t.as_i64())
                .context("no total in the runs page")
        },
    )
    .await;
    // Results recorded by now: whether the admin's callback path kept up with its dispatch.
    let callbacks_written = match db.final_runs(group_id, w0, w1).await {
        Ok(n) => {
            println!(
                "drain: {n} runs of the window in a final state (results recorded) of {} expected",
                plan.jobs as u64 * plan.duration
            );
            Some(n)
        }
        Err(e) => {
            println!("drain: final runs not counted: {e:#}");
            None
        }
    };

    // ---- stop the jobs, 1,000 per request, let the last runs arrive ----
    // One request per job stopped 100-360 jobs a second on an admin firing 10,000-20,000 a
    // second: cut off after 30 s, thousands of jobs went on firing (at an executor gone) while
    // the bulk import below was timed, and that was timed with them.
    let all = match overload {
        true => [job_ids.as_slice(), &idle_ids].concat(),
        false => job_ids.clone(),
    };
    let stopped = api_writes::stop_all(&api, &all).await;
    let stop_all_s = api_writes::secs_or_none("every job stopped, 1,000 per request", stopped);
    settle(&executors.counters()).await;
    sampler.printing.store(false, Ordering::Relaxed);

    // ---- executors first (their callbacks drain into the live admins), then admins ----
    let arrivals = executors.finish().await?;
    let peak_kib = sampler.finish().await;
    // After the window and the memory peak, so that its 10,000 jobs weigh on neither (and an
    // admin without the bulk endpoint is measured all the same).
    let bulk_import_10k_s = match overload {
        true => "none".to_owned(),
        false => match creates::bulk_import(&api, group_id, &app).await {
            Ok(s) => format!("{s:.2}"),
            Err(e) => {
                println!("bulk import: not measured: {e:#}");
                "none".to_owned()
            }
        },
    };
    let probes = health.finish();
    // Before any admin stops (a clean stop hands its runs over): runs adopted from a node
    // thought dead, and runs held by a closed fence, over the whole run.
    let counts = api.run_counts().await;
    // Its idle keep-alive connections would only slow the admins' graceful shutdown.
    drop(api);
    for a in admins {
        let name = a.name.clone();
        let log = a.log.clone();
        let status = a.terminate(ADMIN_EXIT_GRACE).await;
        println!("{name}: exit {status}");
        print_log_summary(&name, &log);
    }

    // ---- figures ----
    let figures = stats::window_figures(&arrivals, &job_ids, w0, w1);
    print_seconds(&figures);
    if let (Some(w), Some(e)) = (figures.wire, figures.executor_part) {
        println!(
            "wire probe: scheduled -> /run off the admin's socket: first {} ms, p50 {} ms, \
             p99 {} ms, max {} ms",
            ms(w.min),
            ms(w.p50),
            ms(w.p99),
            ms(w.max)
        );
        println!(
            "wire probe: socket -> handler invoked (executor SDK): p50 {} ms, p99 {} ms, max {} ms",
            ms(e.p50),
            ms(e.p99),
            ms(e.max)
        );
    }
    let ledger = db.ledger(group_id, w0, w1).await;
    match &ledger {
        Ok(l) => print_ledger(l, figures.expected),
        Err(e) => println!("ledger: not read: {e:#}"),
    }
    if figures.unexpected > 0 {
        println!(
            "warning: {} arrivals of the window were for unknown jobs or off-second instants",
            figures.unexpected
        );
    }
    let fires_per_s = figures.arrived_in_window as f64 / plan.duration as f64;
    let cpu_per_1k = match figures.arrived_in_window {
        0 => "none".to_owned(),
        n => format!("{:.3}", admin_cpu_s / (n as f64 / 1000.0)),
    };
    let callbacks_written = callbacks_written.map_or("none".to_owned(), |n| n.to_string());
    let (p50, p99, max) = match figures.lateness {
        Some(s) => (ms(s.p50), ms(s.p99), ms(s.max)),
        None => ("none".into(), "none".into(), "none".into()),
    };
    println!(
        "summary: expected {} fires, arrived {} of them ({} missed, {} duplicated); \
         peak admin rss {:.1} MB (idle {:.1} MB)",
        figures.expected,
        figures.expected - figures.missed,
        figures.missed,
        figures.duplicated,
        peak_kib as f64 / 1024.0,
        idle_kib as f64 / 1024.0
    );
    let window_health = HealthFigures::of(&probes, "/healthz", w0, w1);
    print_health(&probes, w0, w1);
    let (healthz_p99, healthz_max) = window_health
        .took
        .map_or(("none".into(), "none".into()), |t| (ms(t.p99), ms(t.max)));
    if overload {
        // Every fire of the window not delivered must be in the ledger as misfired.
        let (misfired, unaccounted) = match &ledger {
            Ok(l) => {
                let n = l.count_of("misfired");
                (n.to_string(), (figures.missed as i64 - n).to_string())
            }
            Err(_) => ("none".to_owned(), "none".to_owned()),
        };
        println!(
            "RESULT scenario=overload db={} executor={} jobs={} fires_per_s={fires_per_s:.1} \
             p50_ms={p50} p99_ms={p99} missed={} misfired={misfired} \
             missed_not_misfired={unaccounted} duplicated={} admin_rss_mb={:.1} \
             healthz_p99_ms={healthz_p99} healthz_max_ms={healthz_max} \
             healthz_slow={} healthz_failed={} admin_cpu_s_per_1k_fires={cpu_per_1k} \
             api_stop_1k_s={} api_start_1k_s={} api_one_job_p50_ms={} \
             api_one_job_max_ms={} stop_all_s={stop_all_s} {counts}",
            db.kind.as_str(),
            plan.args.executor.as_str(),
            plan.jobs,
            figures.missed,
            figures.duplicated,
            peak_kib as f64 / 1024.0,
            window_health.slow,
            window_health.failed,
            mid.stop_1k_s,
            mid.start_1k_s,
            mid.one_job_p50_ms,
            mid.one_job_max_ms,
        );
        return Ok(());
    }
    let create_jobs_per_s = create_jobs_per_s.map_or("none".to_owned(), |r| format!("{r:.0}"));
    println!(
        "RESULT scenario={} db={} executor={} jobs={} fires_per_s={fires_per_s:.1} \
         p50_ms={p50} p99_ms={p99} max_ms={max} missed={} duplicated={} admin_rss_mb={:.1} \
         admin_cpu_s_per_1k_fires={cpu_per_1k} callbacks_written={callbacks_written} \
         create_jobs_per_s={create_jobs_per_s} bulk_import_10k_s={bulk_import_10k_s} \
         healthz_p99_ms={healthz_p99} healthz_max_ms={healthz_max} {counts}",
        plan.load.name(),
        db.kind.as_str(),
        plan.args.executor.as_str(),
        plan.jobs,
        figures.missed,
        figures.duplicated,
        peak_kib as f64 / 1024.0
    );
    Ok(())
}

/// Starts `ids`, one `POST /jobs/{id}/start` each with `concurrency` in flight.
async fn start_one_by_one(api: &api::Api, ids: &[i64], concurrency: usize) {
    let t = Instant::now();
    let (done, failed, cut, first) = api.post_each(ids, "start", concurrency, SETUP_MAX).await;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "setup: started {done} jobs in {secs:.2} s ({:.0}/s)",
        done as f64 / secs
    );
    if done < ids.len() {
        // Measured anyway: the jobs that did not start count as missed.
        println!(
            "warning: {failed} starts failed and {cut} were cut off after {} s; first error: {}",
            SETUP_MAX.as_secs(),
            first.unwrap_or_default()
        );
    }
}

/// Longest wait for the claim of an overloaded admin to reach the window's end (it ran
/// 250 s behind at 40,000 jobs on PostgreSQL on a slow day).
const CLAIM_CATCH_UP_MAX: Duration = Duration::from_secs(400);

/// Asks `left` every 500 ms until it counts none or `max` has passed, and says which (with
/// the seconds since `since`, the window's end).
async fn wait_until_none<F, Fut>(since: Instant, max: Duration, done: &str, what: &str, left: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<i64>>,
{
    let t = Instant::now();
    loop {
        let n = match left().await {
            Ok(n) => n,
            Err(e) => {
                println!("drain: query failed: {e:#}");
                -1
            }
        };
        if n == 0 {
            println!(
                "drain: {done} {:.1} s after the window",
                since.elapsed().as_secs_f64()
            );
            return;
        }
        if t.elapsed() > max {
            println!("drain: {n} {what} after {} s; going on", max.as_secs());
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
