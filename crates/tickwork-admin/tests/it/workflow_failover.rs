//! A workflow's instances outlive the admin stepping them: three admins (real processes) on
//! one PostgreSQL or MariaDB database fire a fan-out workflow every second; the admin that
//! owns the most node runs is SIGKILLed mid-instance. The survivors adopt its runs and step
//! its instances: every instance ends, each node ran exactly once (counted at the executor),
//! and a join ran after all its parents.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Api, Backend, Child, CountingExecutor, TestDb};
use tickwork_core::TriggerType;
use tickwork_core::workflow::step::InstanceState;
use tickwork_store::{InstancesQuery, Store};
use tickwork_testkit::wait_until;

/// Fast beats, so that a departed node's runs are adopted within a second or two.
const ADMIN: &str = r#"
[cluster]
heartbeat_interval_ms = 200
node_dead_after_ms = 1000
lease_ttl_ms = 1000
adopt_interval_ms = 200
"#;

const APP: &str = "wf-chaos";
const WAIT: Duration = Duration::from_secs(60);
/// Parallel nodes between the root and the join.
const FAN: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_admin_killed_mid_workflow_runs_no_node_twice_and_forgets_none() {
    scenario(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_admin_killed_mid_workflow_runs_no_node_twice_and_forgets_none() {
    scenario(Backend::MySql).await;
}

/// The instances of workflow `id`, oldest first.
async fn instances(store: &dyn Store, id: i64) -> Vec<tickwork_store::Instance> {
    let mut list = store
        .workflow_instances_list(InstancesQuery {
            workflow_id: Some(id),
            states: Vec::new(),
            limit: 1000,
        })
        .await
        .expect("instances");
    list.reverse();
    list
}

async fn scenario(backend: Backend) {
    let _serial = support::serial().await;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let store = db.store().await;
    let logs = support::log_dir();
    let nodes = ["node-a", "node-b", "node-c"];
    let mut admins = Vec::new();
    for node in nodes {
        admins.push(Child::admin(&logs, node, &db, ADMIN).await);
    }
    let addresses: Vec<String> = admins.iter().map(|a| a.address.clone()).collect();
    let executor = CountingExecutor::start(APP, &addresses, &db.token).await;
    let api = Api::new(&admins[0].address);
    let group = api
        .post(
            "groups",
            json!({ "app_name": APP, "title": APP, "address_mode": "manual",
                    "addresses": [executor.address()] }),
        )
        .await["id"]
        .as_i64()
        .expect("group id");
    for (key, handler) in [
        ("wf-root", "count"),
        ("wf-slow", "slow"),
        ("wf-join", "count"),
    ] {
        api.post(
            "jobs",
            json!({ "group_id": group, "key": key, "handler": handler }),
        )
        .await;
    }
    let mut dag_nodes = vec![json!({ "key": "root", "job": "wf-root" })];
    let mut edges = Vec::new();
    for i in 0..FAN {
        let key = format!("slow-{i}");
        dag_nodes.push(json!({ "key": key, "job": "wf-slow" }));
        edges.push(json!({ "from": "root", "to": key }));
        edges.push(json!({ "from": key, "to": "join" }));
    }
    dag_nodes.push(json!({ "key": "join", "job": "wf-join" }));
    let mut wf = json!({
        "key": "fan", "name": "fan", "group": APP,
        "schedule_type": "FIX_RATE", "schedule_conf": "1s",
        "max_instances": 3, "overflow": "QUEUE",
        "dag": { "nodes": dag_nodes, "edges": edges },
    });
    let id = api.post("workflows", wf.clone()).await["id"]
        .as_i64()
        .expect("workflow id");

    // Two instances in, kill the admin that owns the most node runs still to end.
    wait_until("two instances fired", WAIT, || async {
        (instances(&*store, id).await.len() >= 2).then_some(())
    })
    .await;
    // The victim owns node runs not ended yet: it dies mid-instance.
    let victim = wait_until("an admin owning node runs", WAIT, || async {
        let mut owned = Vec::new();
        for node in nodes {
            let n = store
                .runs_pending_owned_by(node)
                .await
                .ok()?
                .iter()
                .filter(|r| r.trigger_type == TriggerType::Workflow)
                .count();
            owned.push(n);
        }
        (0..nodes.len())
            .max_by_key(|&i| owned[i])
            .filter(|&i| owned[i] > 0)
    })
    .await;
    admins[victim].kill().await;
    let killed_at = support::now_ms();
    let survivor = Api::new(&admins[(victim + 1) % nodes.len()].address);

    // Three more fires after the kill, then the schedule is paused.
    wait_until("three fires after the kill", WAIT, || async {
        let list = instances(&*store, id).await;
        (list.iter().filter(|i| i.created_at > killed_at).count() >= 3).then_some(())
    })
    .await;
    wf["enabled"] = json!(false);
    let (status, body) = survivor.call("PUT", "workflows/fan", Some(wf)).await;
    assert_eq!(status, 200, "{body}");

    // None forgotten: every instance ends.
    let all = wait_until("every instance ended", WAIT, || async {
        let list = instances(&*store, id).await;
        list.iter().all(|i| i.state.is_final()).then_some(list)
    })
    .await;
    assert!(all.len() >= 5, "{} instances", all.len());
    for instance in &all {
        let read = store
            .workflow_instance_get(instance.id)
            .await
            .expect("read");
        assert_eq!(
            instance.state,
            InstanceState::Succeeded,
            "instance {} ended {}: {:?}\nits runs: {:#?}\n{}",
            instance.id,
            instance.state,
            read.instance.nodes,
            read.runs,
            support::tails(&admins)
        );
        // Each node once: one run per node, each executed once.
        let mut per_node = vec![0; FAN + 2];
        for r in &read.runs {
            per_node[r.node] += 1;
            assert_eq!(
                executor.count(r.run.id),
                1,
                "run {} of instance {}",
                r.run.id,
                instance.id
            );
        }
        assert!(
            per_node.iter().all(|&n| n == 1),
            "instance {}: {per_node:?}",
            instance.id
        );
        // The join after every parent.
        let join = read
            .runs
            .iter()
            .find(|r| r.node == FAN + 1)
            .expect("the join's run");
        for r in read.runs.iter().filter(|r| (1..=FAN).contains(&r.node)) {
            let ended = r.run.finished_at.expect("a parent ended");
            assert!(
                ended <= join.run.scheduled_at,
                "the join before a parent ended"
            );
        }
    }
    assert!(executor.doubles().is_empty(), "{:?}", executor.doubles());
}
