//! The server-side bounds of the store's sessions, on PostgreSQL and MariaDB/MySQL: a claimer
//! that goes silent inside its claim transaction (the due job locked) has the transaction
//! ended by the server within the idle bound, and another node then claims the job; a
//! statement that waits for a lock longer than the lock bound fails instead of waiting.
//!
//! The heartbeat and the lease have connections of their own: a node whose pool is taken
//! whole (here by a silent claim) still beats in time.
//!
//! The silent client is a claim whose planner, called inside the transaction, blocks until the
//! test releases it: the admin frozen mid-claim of the bug, with nothing sent to the server.

use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use tickwork_core::{ScheduleType, TriggerType};
use tickwork_store::*;
use tickwork_testkit::{Backend, TestDb, Wait};

/// A fixed "now": the store never reads the clock.
const NOW: i64 = 1_700_000_000_000;
/// How long a blocked planner waits for its release at most, so a failing test ends.
const FROZEN_AT_MOST: Duration = Duration::from_secs(120);

fn bounds(idle: u64, lock: u64) -> SessionBounds {
    let s = Duration::from_secs;
    SessionBounds::new(s(idle), s(lock), s(60)).expect("valid bounds")
}

async fn open(url: &str, session_bounds: SessionBounds) -> Arc<dyn Store> {
    let options = StoreOptions {
        session_bounds,
        ..StoreOptions::default()
    };
    tickwork_store::connect(url, &options)
        .await
        .expect("open the test database")
}

/// A running fixed-rate job due at [`NOW`].
async fn due_job(store: &dyn Store) -> Job {
    let group = store
        .group_create(GroupNew {
            app_name: "bounds".to_owned(),
            title: "bounds".to_owned(),
            address_mode: AddressMode::Auto,
            addresses: Vec::new(),
            now: NOW,
        })
        .await
        .expect("create group");
    let mut spec = JobSpec::new(group.id, "boundsHandler");
    spec.schedule_type = ScheduleType::FixRate;
    spec.schedule_conf = "60".to_owned();
    store
        .job_create(JobNew {
            key: "due".to_owned(),
            spec,
            status: JobStatus::Running,
            next_fire_at: Some(NOW),
            now: NOW,
        })
        .await
        .expect("create job")
}

fn claim_params(node: &str) -> ClaimParams {
    ClaimParams {
        node_id: node.to_owned(),
        now: NOW,
        lookahead_ms: 1_000,
        limit: 10,
    }
}

/// One fire at the job's next fire, the next a minute later.
fn one_fire(job: &Job, _now: i64) -> JobPlan {
    let at = job.next_fire_at.expect("a claimed job has a next fire");
    JobPlan {
        fires: vec![PlannedFire::on_time(at, TriggerType::FixRate)],
        next_fire_at: Some(at + 60_000),
    }
}

/// A claim that stopped inside its transaction: the due job is locked and its client says
/// nothing until [`Frozen::release`].
struct Frozen {
    release: mpsc::Sender<()>,
    claim: tokio::task::JoinHandle<Result<ClaimResult, Error>>,
}

impl Frozen {
    /// Starts a claim of `node` on `store` and returns once its planner runs, the due job
    /// locked by the claim's transaction.
    async fn start(store: Arc<dyn Store>, node: &str) -> Frozen {
        let (entered_tx, entered) = tokio::sync::oneshot::channel();
        let (release, released) = mpsc::channel::<()>();
        let entered_tx = Mutex::new(Some(entered_tx));
        let released = Mutex::new(released);
        let params = claim_params(node);
        let claim = tokio::spawn(async move {
            let planner = move |job: &Job, now: i64| {
                if let Some(tx) = entered_tx.lock().unwrap().take() {
                    let _ = tx.send(());
                    // Blocks, as a paused process would: nothing reaches the server. The
                    // runtime hands this thread's other tasks to the other workers first.
                    tokio::task::block_in_place(|| {
                        let _ = released.lock().unwrap().recv_timeout(FROZEN_AT_MOST);
                    });
                }
                one_fire(job, now)
            };
            store.jobs_claim_due(params, &planner).await
        });
        tokio::time::timeout(Duration::from_secs(30), entered)
            .await
            .expect("the claim reaches its planner")
            .expect("the planner signals");
        Frozen { release, claim }
    }

    /// Lets the planner return; what the claim then did.
    async fn release(self) -> Result<ClaimResult, Error> {
        let _ = self.release.send(());
        self.claim.await.expect("the claim task")
    }
}

async fn with_db<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(db) = TestDb::create(backend, "tw").await else {
        return;
    };
    test(db.url().to_owned()).await;
    db.drop_database().await;
}

/// The bug: an admin frozen inside its claim kept its due jobs locked, and the other admins
/// skipped them, until TCP gave up on it. Now the server ends the silent transaction after
/// the idle bound, and the job is another node's to claim.
async fn paused_claimer_holds_due_jobs_only_for_the_idle_bound(url: String) {
    let idle = Duration::from_secs(3);
    let silent = open(&url, bounds(3, 1)).await;
    let other = open(&url, SessionBounds::default()).await;
    let job = due_job(&*other).await;

    let frozen = Frozen::start(silent.clone(), "node-a").await;
    let locked_at = Instant::now();
    // The job is locked: the other node's claim skips it.
    let skipped = other
        .jobs_claim_due(claim_params("node-b"), &one_fire)
        .await
        .expect("claim while the job is locked");
    assert_eq!(skipped.jobs, 0, "{skipped:?}");
    assert!(
        locked_at.elapsed() < idle,
        "the check came too late to see the lock"
    );

    // The server ends the silent transaction; the other node's claim then locks the job.
    let claimed = Wait::new(
        "the other node to claim the job",
        idle + Duration::from_secs(10),
    )
    .until(|| async {
        let result = other
            .jobs_claim_due(claim_params("node-b"), &one_fire)
            .await;
        match result {
            Ok(r) if r.jobs == 1 => Ok(r),
            other => Err(other),
        }
    })
    .await;
    assert_eq!(claimed.runs.len(), 1);
    assert_eq!(claimed.runs[0].job_id, job.id);
    assert_eq!(claimed.runs[0].owner_node.as_deref(), Some("node-b"));

    // The frozen claim wakes to a session the server closed: nothing of it was written.
    let late = frozen.release().await;
    assert!(late.is_err(), "the silent claim must not commit: {late:?}");
    let runs = other
        .runs_list(RunFilter {
            job_id: Some(job.id),
            ..RunFilter::default()
        })
        .await
        .expect("list runs");
    let owners: Vec<Option<&str>> = runs.items.iter().map(|r| r.owner_node.as_deref()).collect();
    assert_eq!(owners, [Some("node-b")]);
    silent.close().await;
    other.close().await;
}

/// The audit record of a stop.
fn stop_record(_: usize, job: &Job) -> Result<AuditNew, Error> {
    Ok(AuditNew {
        at: NOW,
        actor_id: None,
        actor: "bounds".to_owned(),
        action: "job.status".to_owned(),
        target_type: "job".to_owned(),
        target_id: job.id.to_string(),
        before: None,
        after: Some(r#"{"status":"stopped"}"#.to_owned()),
    })
}

/// A statement that waits for a row lock gives up after the lock bound with an error, while
/// the holder (within its own idle bound) keeps its transaction and commits.
async fn lock_wait_past_the_lock_bound_fails_instead_of_waiting(url: String) {
    let holder = open(&url, SessionBounds::default()).await;
    let waiter = open(&url, bounds(30, 1)).await;
    let job = due_job(&*holder).await;
    let stop = JobsStatusChange {
        status: JobStatus::Stopped,
        jobs: vec![(job.id, None)],
        now: NOW,
    };

    let frozen = Frozen::start(holder.clone(), "node-a").await;
    let started = Instant::now();
    // Unbounded, this would wait for the holder, which waits for the test.
    let waited = tokio::time::timeout(
        Duration::from_secs(20),
        waiter.jobs_set_status(stop.clone(), &stop_record),
    )
    .await
    .expect("the lock wait ends on its own");
    assert!(
        matches!(waited, Err(Error::Database(_))),
        "a lock wait past the bound is an error: {waited:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "gave up before the lock bound: {:?}",
        started.elapsed()
    );

    // The holder was never idle past its own bound: its claim commits.
    let claimed = frozen.release().await.expect("the holder's claim commits");
    assert_eq!(claimed.jobs, 1);
    // With the lock gone the same change goes through.
    let stopped = waiter
        .jobs_set_status(stop, &stop_record)
        .await
        .expect("stop the job");
    assert_eq!(stopped[0].status, JobStatus::Stopped);
    holder.close().await;
    waiter.close().await;
}

/// The bug: the heartbeat waited for a connection of the node's one pool behind a burst's
/// writes, came late, closed the node's fence, and the node held its runs until they
/// misfired. Now the heartbeat and the lease go through connections of their own.
async fn heartbeat_and_lease_are_written_while_the_pool_is_taken_whole(url: String) {
    let options = StoreOptions {
        max_connections: Some(1),
        acquire_timeout: Duration::from_secs(3),
        session_bounds: bounds(60, 5),
        ..StoreOptions::default()
    };
    let store = tickwork_store::connect(&url, &options)
        .await
        .expect("open the test database");
    due_job(&*store).await;
    // The pool's only connection is inside the frozen claim's transaction.
    let frozen = Frozen::start(store.clone(), "node-a").await;
    let beat = NodeBeat {
        id: "node-a".to_owned(),
        address: "127.0.0.1:8080".to_owned(),
        now: NOW,
    };
    tokio::time::timeout(Duration::from_secs(2), store.node_heartbeat(beat))
        .await
        .expect("the heartbeat does not wait for the pool")
        .expect("the heartbeat is written");
    let lease = LeaseRequest {
        name: "maintenance".to_owned(),
        node: "node-a".to_owned(),
        ttl_ms: 5_000,
        now: NOW,
    };
    let held = tokio::time::timeout(Duration::from_secs(2), store.lease_acquire(lease))
        .await
        .expect("the lease does not wait for the pool")
        .expect("the lease is written");
    assert!(held, "a free lease is taken");
    let claimed = frozen.release().await.expect("the claim commits");
    assert_eq!(claimed.jobs, 1);
    let nodes = store.nodes_list().await.expect("nodes");
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].id, "node-a");
    store.close().await;
}

macro_rules! on_servers {
    ($($test:ident),+ $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    super::with_db(super::Backend::Postgres, super::$test).await;
                }
            )+
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    super::with_db(super::Backend::MySql, super::$test).await;
                }
            )+
        }
    };
}

on_servers!(
    paused_claimer_holds_due_jobs_only_for_the_idle_bound,
    lock_wait_past_the_lock_bound_fails_instead_of_waiting,
    heartbeat_and_lease_are_written_while_the_pool_is_taken_whole,
);

/// SQLite has no other sessions to bound: a store with short bounds opens and works as ever.
#[tokio::test]
async fn sqlite_ignores_the_session_bounds() {
    let Some(db) = TestDb::create(Backend::Sqlite, "tw").await else {
        return;
    };
    let store = open(db.url(), bounds(1, 1)).await;
    let job = due_job(&*store).await;
    let claimed = store
        .jobs_claim_due(claim_params("node-a"), &one_fire)
        .await
        .expect("claim");
    assert_eq!((claimed.jobs, claimed.runs[0].job_id), (1, job.id));
    store.close().await;
    db.drop_database().await;
}
