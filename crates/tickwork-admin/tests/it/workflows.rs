//! Workflows end to end in one admin with a real executor, on SQLite, PostgreSQL and MariaDB:
//! a diamond runs its join once after both branches, a failure ends the instance or lets the
//! other branches go on as the workflow's policy says, a failure edge takes its error branch,
//! a fire past the cap is skipped, and bad definitions are refused with nothing saved.

use crate::support;

use std::time::Duration;

use support::{Backend, CountingExecutor, InProcessAdmin, TestDb};
use tickwork_admin::Principal;
use tickwork_core::TriggerType;
use tickwork_protocol::workflows::{
    Dag, Edge, EdgeOn, FailurePolicy, InstanceState, InstanceView, MisfireStrategy, Node,
    NodeState, Overflow, ScheduleType, WorkflowInput,
};
use tickwork_store::{AddressMode, GroupNew, JobNew, JobSpec, JobStatus, Store};
use tickwork_testkit::wait_until;

const WAIT: Duration = Duration::from_secs(30);
const APP: &str = "wf-exec";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_workflow_instances_are_stopped_resumed_marked_and_rerun() {
    operations(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_workflow_instances_are_stopped_resumed_marked_and_rerun() {
    operations(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_workflow_instances_are_stopped_resumed_marked_and_rerun() {
    operations(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_scheduled_workflow_fires_once_per_fire_until_disabled() {
    scheduled(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_scheduled_workflow_fires_once_per_fire_until_disabled() {
    scheduled(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_a_scheduled_workflow_fires_once_per_fire_until_disabled() {
    scheduled(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_java_executor_runs_a_node_with_the_context_in_its_params() {
    java_node(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_java_executor_runs_a_node_with_the_context_in_its_params() {
    java_node(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_a_java_executor_runs_a_node_with_the_context_in_its_params() {
    java_node(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_workflows_run_their_dags() {
    workflows_run_their_dags(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_workflows_run_their_dags() {
    workflows_run_their_dags(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_workflows_run_their_dags() {
    workflows_run_their_dags(Backend::MySql).await;
}

/// A job of the test group running `handler`, under `key`.
async fn job(store: &dyn Store, group_id: i64, key: &str, handler: &str) -> i64 {
    store
        .job_create(JobNew {
            key: key.to_owned(),
            spec: JobSpec::new(group_id, handler),
            status: JobStatus::Stopped,
            next_fire_at: None,
            now: support::now_ms(),
        })
        .await
        .expect("create job")
        .id
}

fn input(key: &str, nodes: &[(&str, &str)], edges: &[(&str, &str, EdgeOn)]) -> WorkflowInput {
    WorkflowInput {
        key: key.to_owned(),
        name: format!("workflow {key}"),
        group: APP.to_owned(),
        dag: Dag {
            nodes: nodes.iter().map(|(k, job)| Node::new(*k, *job)).collect(),
            edges: edges
                .iter()
                .map(|(f, t, on)| Edge::new(*f, *t, *on))
                .collect(),
        },
        failure_policy: FailurePolicy::End,
        max_instances: 1,
        overflow: Overflow::Skip,
        schedule_type: ScheduleType::None,
        schedule_conf: String::new(),
        time_zone: None,
        misfire_strategy: MisfireStrategy::DoNothing,
        enabled: true,
    }
}

/// Waits until instance `id` has ended; the instance.
async fn ended(admin: &InProcessAdmin, id: i64) -> InstanceView {
    let workflows = admin.admin.service.workflows();
    wait_until(&format!("instance {id} ended"), WAIT, || async move {
        let i = workflows.instance(id).await.expect("read instance");
        if matches!(
            i.state,
            InstanceState::Succeeded | InstanceState::Failed | InstanceState::Stopped
        ) {
            Some(i)
        } else {
            None
        }
    })
    .await
}

fn states(i: &InstanceView) -> Vec<(&str, NodeState)> {
    i.nodes.iter().map(|n| (n.key.as_str(), n.state)).collect()
}

/// An admin, an executor with every handler, and a job per handler in the executor's group
/// (`job-a`, `job-b`, `job-d`: count; `job-c`: slow; `job-f`: fail; `job-long`, `job-ctx`).
async fn setup(backend: Backend) -> Option<(TestDb, InProcessAdmin, CountingExecutor)> {
    let db = TestDb::create(backend).await?;
    let admin = InProcessAdmin::start(&db, "wf-1", "").await;
    let executor =
        CountingExecutor::start(APP, std::slice::from_ref(&admin.address), &db.token).await;
    let store = &*admin.store;
    let group = store
        .group_create(GroupNew {
            app_name: APP.to_owned(),
            title: APP.to_owned(),
            address_mode: AddressMode::Manual,
            addresses: vec![executor.address()],
            now: support::now_ms(),
        })
        .await
        .expect("create group");
    for (key, handler) in [
        ("a", "count"),
        ("b", "count"),
        ("c", "slow"),
        ("d", "count"),
        ("f", "fail"),
        ("long", "long"),
        ("ctx", "context"),
    ] {
        job(store, group.id, &format!("job-{key}"), handler).await;
    }
    Some((db, admin, executor))
}

async fn workflows_run_their_dags(backend: Backend) {
    let Some((_db, admin, executor)) = setup(backend).await else {
        return;
    };
    let store = &*admin.store;
    let workflows = admin.admin.service.workflows();
    let by = Principal::system();
    use EdgeOn::{Always, Failure, Success};

    // A diamond: D once, after B and after the slower C.
    let diamond = input(
        "diamond",
        &[
            ("A", "job-a"),
            ("B", "job-b"),
            ("C", "job-c"),
            ("D", "job-d"),
        ],
        &[
            ("A", "B", Success),
            ("A", "C", Success),
            ("B", "D", Success),
            ("C", "D", Success),
        ],
    );
    workflows
        .create(&by, diamond)
        .await
        .expect("create diamond");
    let started = workflows
        .run(&by, "diamond", "day=2026-11-28", TriggerType::Api)
        .await
        .expect("run diamond");
    assert_eq!(started.admitted.as_deref(), Some("started"));
    assert_eq!(started.nodes[0].state, NodeState::Running, "{started:?}");
    assert!(
        started.nodes[1..]
            .iter()
            .all(|n| n.state == NodeState::Waiting)
    );
    // One instance at a time: a second fire now is skipped, and says so.
    let skipped = workflows.run(&by, "diamond", "", TriggerType::Api).await;
    assert!(
        skipped
            .unwrap_err()
            .to_string()
            .contains("this fire is skipped"),
        "a fire past the cap"
    );
    let done = ended(&admin, started.id).await;
    assert_eq!(done.state, InstanceState::Succeeded, "{done:?}");
    assert_eq!(
        done.context.get("params").map(String::as_str),
        Some("day=2026-11-28")
    );
    let mut runs = Vec::new();
    for node in &done.nodes {
        assert_eq!(node.run_ids.len(), 1, "each node ran once: {done:?}");
        let run = store.run_get(node.run_ids[0]).await.expect("node run");
        assert_eq!(run.trigger_type, TriggerType::Workflow);
        assert_eq!(executor.count(run.id), 1, "run {} executed once", run.id);
        runs.push(run);
    }
    let (b, c, d) = (&runs[1], &runs[2], &runs[3]);
    let join = d.scheduled_at;
    for parent in [b, c] {
        assert!(
            parent.finished_at.expect("ended") <= join,
            "D was planned at {join} before a parent ended: {parent:?}"
        );
    }

    // END: the failed node ends the instance at once; CONTINUE: the other branch goes on.
    for (policy, other) in [
        (FailurePolicy::End, NodeState::Stopped),
        (FailurePolicy::Continue, NodeState::Succeeded),
    ] {
        let key = format!("fails-{policy}").to_lowercase();
        let mut wf = input(
            &key,
            &[
                ("A", "job-a"),
                ("F", "job-f"),
                ("after-f", "job-b"),
                ("S", "job-c"),
                ("after-s", "job-d"),
            ],
            &[
                ("A", "F", Success),
                ("F", "after-f", Success),
                ("A", "S", Success),
                ("S", "after-s", Success),
            ],
        );
        wf.failure_policy = policy;
        workflows.create(&by, wf).await.expect("create");
        let id = workflows
            .run(&by, &key, "", TriggerType::Api)
            .await
            .expect("run")
            .id;
        let done = ended(&admin, id).await;
        assert_eq!(done.state, InstanceState::Failed, "{done:?}");
        let got = states(&done);
        assert_eq!(got[1], ("F", NodeState::Failed), "{got:?}");
        assert_eq!(
            got[2].1,
            if policy == FailurePolicy::End {
                NodeState::Stopped
            } else {
                NodeState::Skipped
            },
            "{got:?}"
        );
        assert_eq!(got[4], ("after-s", other), "{got:?}");
    }

    // A failure edge takes the error branch, and the planned-for failure does not fail it.
    let recover = input(
        "recover",
        &[
            ("F", "job-f"),
            ("ok", "job-a"),
            ("fix", "job-b"),
            ("log", "job-d"),
        ],
        &[
            ("F", "ok", Success),
            ("F", "fix", Failure),
            ("F", "log", Always),
        ],
    );
    workflows
        .create(&by, recover)
        .await
        .expect("create recover");
    let id = workflows
        .run(&by, "recover", "", TriggerType::Api)
        .await
        .expect("run")
        .id;
    let done = ended(&admin, id).await;
    assert_eq!(done.state, InstanceState::Succeeded, "{done:?}");
    assert_eq!(
        states(&done),
        [
            ("F", NodeState::Failed),
            ("ok", NodeState::Skipped),
            ("fix", NodeState::Succeeded),
            ("log", NodeState::Succeeded),
        ]
    );

    // A node's own retries and timeout, over its job's (which has neither).
    let mut retried = input("retried", &[("F", "job-f")], &[]);
    retried.dag.nodes[0].retry_count = Some(1);
    retried.dag.nodes[0].retry_backoff_ms = Some(0);
    retried.dag.nodes[0].timeout_s = Some(7);
    workflows
        .create(&by, retried)
        .await
        .expect("create retried");
    let id = workflows
        .run(&by, "retried", "", TriggerType::Api)
        .await
        .expect("run")
        .id;
    let done = ended(&admin, id).await;
    assert_eq!(done.state, InstanceState::Failed, "{done:?}");
    assert_eq!(done.nodes[0].run_ids.len(), 2, "its retry ran: {done:?}");
    for (n, run_id) in done.nodes[0].run_ids.iter().enumerate() {
        let run = store.run_get(*run_id).await.expect("run");
        assert_eq!(run.timeout_s, Some(7), "{run:?}");
        assert_eq!(run.attempt, n as i32, "{run:?}");
        assert_eq!(executor.count(run.id), 1);
    }

    // Bad definitions: refused with the field named, nothing saved.
    let before = workflows.list().await.expect("list").len();
    let cases = [
        (
            input(
                "cycle",
                &[("A", "job-a"), ("B", "job-b")],
                &[("A", "B", Success), ("B", "A", Success)],
            ),
            "dag.edges",
            "cycle",
        ),
        (
            input("dangling", &[("A", "job-a")], &[("A", "Z", Success)]),
            "dag.edges",
            "no node \"Z\"",
        ),
        (
            input("nojob", &[("A", "job-gone")], &[]),
            "dag",
            "no job has the key \"job-gone\"",
        ),
        (
            input("bad key!", &[("A", "job-a")], &[]),
            "key",
            "workflow key",
        ),
        (input("diamond", &[("A", "job-a")], &[]), "", "taken"),
    ];
    for (wf, field, words) in cases {
        let e = workflows.create(&by, wf).await.unwrap_err().to_string();
        assert!(
            e.contains(field) && e.contains(words),
            "{e} lacks {field} / {words}"
        );
    }
    let mut overridden = input("overridden", &[("A", "job-a")], &[]);
    overridden.dag.nodes[0].retry_count = Some(101);
    let e = workflows
        .create(&by, overridden)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dag.nodes") && e.contains("retry_count 101 must be 0 to 100"),
        "{e}"
    );
    let mut other_group = input("elsewhere", &[("A", "job-a")], &[]);
    other_group.group = "no-such-app".to_owned();
    let e = workflows
        .create(&by, other_group)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no executor group"), "{e}");
    assert_eq!(workflows.list().await.expect("list").len(), before);

    assert!(executor.doubles().is_empty(), "{:?}", executor.doubles());
    admin.shutdown().await;
}

/// The runs of each node of `i`, as counts.
fn run_counts(i: &InstanceView) -> Vec<usize> {
    i.nodes.iter().map(|n| n.run_ids.len()).collect()
}

async fn operations(backend: Backend) {
    let Some((_db, admin, executor)) = setup(backend).await else {
        return;
    };
    let store = &*admin.store;
    let workflows = admin.admin.service.workflows();
    let by = Principal::system();
    use EdgeOn::Success;

    // The context: the trigger's params and what a node added, read by the next one's params.
    let mut ctx = input(
        "ctx",
        &[("load", "job-ctx"), ("report", "job-b")],
        &[("load", "report", Success)],
    );
    ctx.dag.nodes[1].params = Some("--rows ${ctx.rows} --day ${ctx.params} ${ctx.nope}".to_owned());
    workflows.create(&by, ctx).await.expect("create ctx");
    let id = workflows
        .run(&by, "ctx", "2026-11-28", TriggerType::Api)
        .await
        .expect("run")
        .id;
    let done = ended(&admin, id).await;
    assert_eq!(done.state, InstanceState::Succeeded, "{done:?}");
    assert_eq!(
        done.context.get("rows").map(String::as_str),
        Some("42"),
        "{done:?}"
    );
    let report = store.run_get(done.nodes[1].run_ids[0]).await.expect("run");
    assert_eq!(report.params, "--rows 42 --day 2026-11-28 ${ctx.nope}");

    // The snapshot: an instance keeps the DAG it fired with, whatever the edits meanwhile.
    let mut snap = input(
        "snap",
        &[("L", "job-long"), ("after", "job-a")],
        &[("L", "after", Success)],
    );
    workflows
        .create(&by, snap.clone())
        .await
        .expect("create snap");
    let id = workflows
        .run(&by, "snap", "", TriggerType::Api)
        .await
        .expect("run")
        .id;
    snap.dag.nodes[1].job = "job-b".to_owned();
    snap.dag.nodes.push(Node::new("extra", "job-d"));
    workflows.update(&by, "snap", snap).await.expect("edit");
    let during = workflows.instance(id).await.expect("read");
    assert_eq!(during.nodes.len(), 2, "{during:?}");
    assert_eq!(during.nodes[1].job, "job-a", "{during:?}");
    workflows.stop(&by, id).await.expect("stop");
    let next = workflows
        .run(&by, "snap", "", TriggerType::Api)
        .await
        .expect("run");
    assert_eq!(next.nodes.len(), 3, "a new instance takes the edit");
    workflows.stop(&by, next.id).await.expect("stop");

    // Stop: the running node's run is killed, the rest stopped.
    workflows
        .create(
            &by,
            input(
                "long",
                &[("L", "job-long"), ("after", "job-a")],
                &[("L", "after", Success)],
            ),
        )
        .await
        .expect("create long");
    let id = workflows
        .run(&by, "long", "", TriggerType::Api)
        .await
        .expect("run")
        .id;
    let run_id = wait_until("the long node dispatched", WAIT, || async {
        let i = workflows.instance(id).await.expect("read");
        let run = store.run_get(*i.nodes[0].run_ids.first()?).await.ok()?;
        (run.state == tickwork_store::RunState::Dispatched).then_some(run.id)
    })
    .await;
    let stopped = workflows.stop(&by, id).await.expect("stop");
    assert_eq!(stopped.state, InstanceState::Stopped);
    assert_eq!(
        states(&stopped),
        [("L", NodeState::Stopped), ("after", NodeState::Stopped)]
    );
    let killed = store.run_get(run_id).await.expect("run");
    assert_eq!(killed.state, tickwork_store::RunState::Killed, "{killed:?}");
    let again = workflows.stop(&by, id).await.unwrap_err().to_string();
    assert!(again.contains("not running"), "{again}");

    // Resume from failed keeps the succeeded node's run; mark succeeded unblocks the rest.
    workflows
        .create(
            &by,
            input(
                "flaky",
                &[("A", "job-a"), ("F", "job-f"), ("X", "job-d")],
                &[("A", "F", Success), ("F", "X", Success)],
            ),
        )
        .await
        .expect("create flaky");
    let id = workflows
        .run(&by, "flaky", "", TriggerType::Api)
        .await
        .expect("run")
        .id;
    let failed = ended(&admin, id).await;
    assert_eq!(failed.state, InstanceState::Failed);
    assert_eq!(run_counts(&failed), [1, 1, 0]);
    let resumed = workflows.resume(&by, id).await.expect("resume");
    assert_eq!(resumed.state, InstanceState::Running);
    assert_eq!(states(&resumed)[0], ("A", NodeState::Succeeded));
    let failed = ended(&admin, id).await;
    assert_eq!(failed.state, InstanceState::Failed, "F fails again");
    assert_eq!(run_counts(&failed), [1, 2, 0], "A was not run again");
    let marked = workflows.mark_succeeded(&by, id, "F").await.expect("mark");
    assert_eq!(
        marked.state,
        InstanceState::Failed,
        "an ended instance stays ended"
    );
    assert_eq!(states(&marked)[1], ("F", NodeState::Succeeded));
    workflows.resume(&by, id).await.expect("resume");
    let done = ended(&admin, id).await;
    assert_eq!(done.state, InstanceState::Succeeded, "{done:?}");
    assert_eq!(run_counts(&done), [1, 2, 1]);

    // Rerun one node of an ended instance.
    let rerun = workflows.rerun(&by, id, "A").await.expect("rerun");
    assert_eq!(rerun.state, InstanceState::Running);
    let done = ended(&admin, id).await;
    assert_eq!(done.state, InstanceState::Succeeded);
    assert_eq!(run_counts(&done), [2, 2, 1]);

    // A queued instance whose predecessor ended where no admin let it in (an admin that died
    // in between): the sweep lets it in.
    let mut queue = input("queue", &[("L", "job-long")], &[]);
    queue.overflow = Overflow::Queue;
    workflows.create(&by, queue).await.expect("create queue");
    let first = workflows
        .run(&by, "queue", "", TriggerType::Api)
        .await
        .expect("run");
    let second = workflows
        .run(&by, "queue", "", TriggerType::Api)
        .await
        .expect("run");
    assert_eq!(second.admitted.as_deref(), Some("queued"), "{second:?}");
    let read = store.workflow_instance_get(first.id).await.expect("read");
    store
        .workflow_instance_step(tickwork_store::InstanceStep {
            id: first.id,
            expected_version: read.instance.version,
            state: InstanceState::Stopped,
            nodes: vec![NodeState::Stopped],
            context: read.instance.context.clone(),
            ended_at: Some(support::now_ms()),
            runs: Vec::new(),
        })
        .await
        .expect("end the first behind the pipeline's back");
    wait_until("the queued instance let in", WAIT, || async {
        let i = workflows.instance(second.id).await.ok()?;
        (i.state == InstanceState::Running).then_some(())
    })
    .await;
    workflows.stop(&by, second.id).await.expect("stop");

    // Refused, nothing changed.
    let before = workflows.instance(id).await.expect("read");
    for (result, words) in [
        (
            workflows.resume(&by, id).await,
            "only a failed or stopped instance resumes",
        ),
        (
            workflows.mark_succeeded(&by, id, "nope").await,
            "no node \"nope\"",
        ),
        (
            workflows.mark_succeeded(&by, id, "A").await,
            "cannot be marked succeeded",
        ),
        (workflows.stop(&by, 999_999).await, "not found"),
    ] {
        let e = result.unwrap_err().to_string();
        assert!(e.contains(words), "{e} lacks {words}");
    }
    assert_eq!(workflows.instance(id).await.expect("read"), before);
    assert!(executor.doubles().is_empty(), "{:?}", executor.doubles());
    admin.shutdown().await;
}

async fn scheduled(backend: Backend) {
    let Some((_db, admin, executor)) = setup(backend).await else {
        return;
    };
    let store = &*admin.store;
    let workflows = admin.admin.service.workflows();
    let by = Principal::system();
    let mut every = input(
        "every-second",
        &[("A", "job-a"), ("B", "job-b")],
        &[("A", "B", EdgeOn::Success)],
    );
    every.schedule_type = ScheduleType::FixRate;
    every.schedule_conf = "1s".to_owned();
    let created = workflows.create(&by, every.clone()).await.expect("create");
    assert!(created.enabled);
    let first = created.next_fire_at.expect("a first fire");
    let query = |id| tickwork_store::InstancesQuery {
        workflow_id: Some(id),
        states: Vec::new(),
        limit: 100,
    };
    let fired = wait_until("three scheduled instances succeeded", WAIT, || async {
        let list = store
            .workflow_instances_list(query(created.id))
            .await
            .ok()?;
        let done = list
            .iter()
            .filter(|i| i.state == InstanceState::Succeeded)
            .count();
        (done >= 3).then_some(list)
    })
    .await;
    let mut keys: Vec<i64> = fired
        .iter()
        .map(|i| i.fire_key.expect("a scheduled fire"))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), fired.len(), "one instance per fire: {fired:?}");
    assert_eq!(keys[0], first);
    for w in keys.windows(2) {
        assert_eq!(w[1] - w[0], 1_000, "every fire, none skipped: {keys:?}");
    }
    assert!(fired.iter().all(|i| i.trigger_type == TriggerType::FixRate));
    // The loop says what it did.
    let stats = admin.admin.scheduler.stats();
    let ordering = std::sync::atomic::Ordering::SeqCst;
    assert!(stats.workflow_fires.load(ordering) >= 3);
    assert!(stats.workflow_steps.load(ordering) >= 3);

    // Disabled: no fire after the change.
    every.enabled = false;
    let disabled = workflows
        .update(&by, "every-second", every)
        .await
        .expect("disable");
    assert!(!disabled.enabled);
    assert_eq!(disabled.next_fire_at, None);
    let count = store
        .workflow_instances_list(query(created.id))
        .await
        .unwrap()
        .len();
    // A fire claimed before the change may still be starting: wait for the instances to end.
    wait_until("the last instances ended", WAIT, || async {
        let list = store
            .workflow_instances_list(query(created.id))
            .await
            .ok()?;
        list.iter().all(|i| i.state.is_final()).then_some(())
    })
    .await;
    let later = store
        .workflow_instances_list(query(created.id))
        .await
        .unwrap()
        .len();
    assert!(
        later <= count + 1,
        "fired after it was disabled: {count} -> {later}"
    );

    // A bad schedule: refused, nothing saved.
    let mut bad = input("bad-cron", &[("A", "job-a")], &[]);
    bad.schedule_type = ScheduleType::Cron;
    bad.schedule_conf = "0 0 25 * * ?".to_owned();
    let e = workflows.create(&by, bad).await.unwrap_err().to_string();
    assert!(e.contains("schedule_conf") && e.contains("hours"), "{e}");
    let mut delay = input("bad-kind", &[("A", "job-a")], &[]);
    delay.schedule_type = ScheduleType::FixDelay;
    delay.schedule_conf = "1s".to_owned();
    let e = workflows.create(&by, delay).await.unwrap_err().to_string();
    assert!(e.contains("schedule_type"), "{e}");
    assert!(workflows.get("bad-cron").await.is_err());
    assert!(executor.doubles().is_empty(), "{:?}", executor.doubles());
    admin.shutdown().await;
}

/// A Java XXL-JOB executor (one that answers as xxl-job-core does) runs the nodes of a
/// workflow: its `/run` carries the node's params with the context read into them, and its
/// callbacks end the nodes.
async fn java_node(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let admin = InProcessAdmin::start(&db, "wf-java", "").await;
    let java = support::java_like::JavaLikeExecutor::start(
        "wf-java",
        std::slice::from_ref(&admin.address),
        &db.token,
    )
    .await;
    let store = &*admin.store;
    let group = store
        .group_create(GroupNew {
            app_name: "wf-java".to_owned(),
            title: "java".to_owned(),
            address_mode: AddressMode::Manual,
            addresses: vec![java.address.clone()],
            now: support::now_ms(),
        })
        .await
        .expect("create group");
    job(store, group.id, "java-a", "demoJobHandler").await;
    job(store, group.id, "java-b", "demoJobHandler").await;
    let workflows = admin.admin.service.workflows();
    let by = Principal::system();
    let mut wf = input(
        "java",
        &[("first", "java-a"), ("second", "java-b")],
        &[("first", "second", EdgeOn::Success)],
    );
    wf.group = "wf-java".to_owned();
    wf.dag.nodes[0].params = Some("day=${ctx.params}".to_owned());
    wf.dag.nodes[1].params = Some("${ctx}".to_owned());
    workflows.create(&by, wf).await.expect("create");
    let id = workflows
        .run(&by, "java", "2026-11-28", TriggerType::Api)
        .await
        .expect("run")
        .id;
    let done = ended(&admin, id).await;
    assert_eq!(done.state, InstanceState::Succeeded, "{done:?}");
    let first = done.nodes[0].run_ids[0];
    let second = done.nodes[1].run_ids[0];
    assert_eq!(java.params_of(first).as_deref(), Some("day=2026-11-28"));
    assert_eq!(
        java.params_of(second).as_deref(),
        Some(r#"{"params":"2026-11-28"}"#),
        "the whole context as JSON"
    );
    assert!(java.doubles().is_empty(), "{:?}", java.doubles());
    admin.shutdown().await;
}
