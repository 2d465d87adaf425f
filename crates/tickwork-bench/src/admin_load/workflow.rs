//! `--scenario workflow`: workflows on one admin with the fake executor. `--jobs` workflows
//! (default 100) of 10 nodes each (a root, eight nodes after it, a join after all eight) fire
//! every 10 s for the window; then their schedules are paused and every instance is waited
//! for. From the ledger: each node's lateness after its last parent (its dispatch minus the
//! latest end of its parents; a root's, minus its instance's scheduled instant), p50 and p99;
//! fires missed (an instance per scheduled instant of the window, but its last second, is
//! expected), nodes run twice
//! (in the ledger, or at the executor), instances not succeeded. Prints the `RESULT` line.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::db::BenchDb;
use super::stats::Spread;
use super::{ADMIN_EXIT_GRACE, HANDLER, Plan, fake};

/// Nodes between the root and the join.
const FAN: usize = 8;
/// Every workflow fires this often.
const EVERY_MS: i64 = 10_000;
/// How long the instances of the window may take to end once the schedules are paused.
const SETTLE: Duration = Duration::from_secs(120);

/// One node's run as the ledger holds it.
struct NodeRun {
    instance: i64,
    node: usize,
    dispatched_at: Option<i64>,
    finished_at: Option<i64>,
}

pub(super) async fn drive(plan: &Plan, db: &BenchDb) -> anyhow::Result<()> {
    let super::single::Single {
        admin,
        base,
        api,
        token,
        app,
        group_id,
        ..
    } = super::single::start(plan, db, None).await?;
    let executor = fake::start(fake::FakeSpec {
        index: 0,
        admins: &[base],
        token: &token,
        app: &app,
        server: plan.args.fake_server,
    })
    .await?;
    super::executors::wait_for_executors(&api, group_id, 1).await?;
    let job = format!("{app}-node");
    api.post(
        0,
        "/jobs",
        &json!({ "group_id": group_id, "key": job, "handler": HANDLER }),
    )
    .await?;

    // The workflows, their first fires spread over the 10 s as created.
    let t = Instant::now();
    let mut keys = Vec::with_capacity(plan.jobs);
    for w in 0..plan.jobs {
        let key = format!("wf-{w}");
        api.post(0, "/workflows", &definition(&key, &app, &job))
            .await?;
        keys.push(key);
    }
    let window_from = super::now_ms();
    println!(
        "setup: {} workflows of {} nodes created in {:.2} s",
        keys.len(),
        FAN + 2,
        t.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(plan.duration)).await;
    let window_to = super::now_ms();
    for key in &keys {
        let mut paused = definition(key, &app, &job);
        paused["enabled"] = json!(false);
        api.call(
            0,
            reqwest::Method::PUT,
            &format!("/workflows/{key}"),
            Some(&paused),
        )
        .await?;
    }
    let t = Instant::now();
    loop {
        let live = db
            .count_of(
                "SELECT COUNT(*) FROM tw_workflow_instances WHERE state IN ('RUNNING', 'QUEUED')",
            )
            .await?;
        if live == 0 {
            break;
        }
        if t.elapsed() > SETTLE {
            bail!(
                "{live} instances still running {} s after the window",
                SETTLE.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let arrivals = executor.finish().await;
    let log = admin.log.clone();
    let status = admin.terminate(ADMIN_EXIT_GRACE).await;
    println!("admin-0: exit {status}");
    super::report::print_log_summary("admin-0", &log);

    // ---- what the ledger says ----
    let instances = db.workflow_instances().await?;
    let runs: Vec<NodeRun> = db
        .workflow_node_runs()
        .await?
        .into_iter()
        .map(
            |(instance, node, _run, dispatched_at, finished_at)| NodeRun {
                instance,
                node: usize::try_from(node).unwrap_or(usize::MAX),
                dispatched_at,
                finished_at,
            },
        )
        .collect();
    let fired: HashMap<i64, i64> = instances
        .iter()
        .filter_map(|(id, _, _, fire_key)| fire_key.map(|k| (*id, k)))
        .collect();
    // A fire due just before the pause may be paused before it is claimed (the claim looks
    // every 200 ms): the window counted ends a second before it.
    let window_to = window_to - 1_000;
    // Fires expected in the window: each workflow's instants every 10 s from its first.
    let mut first_fire: HashMap<i64, i64> = HashMap::new();
    for (_, workflow, _, fire_key) in &instances {
        if let Some(k) = fire_key {
            let e = first_fire.entry(*workflow).or_insert(*k);
            *e = (*e).min(*k);
        }
    }
    let expected: i64 = first_fire
        .values()
        .map(|&first| {
            let first = first.max(window_from);
            if first >= window_to {
                0
            } else {
                (window_to - 1 - first) / EVERY_MS + 1
            }
        })
        .sum();
    let in_window = instances
        .iter()
        .filter(|(_, _, _, k)| k.is_some_and(|k| (window_from..window_to).contains(&k)))
        .count() as i64;
    let not_succeeded = instances
        .iter()
        .filter(|(_, _, state, _)| state != "SUCCEEDED")
        .count();
    let mut per_node: HashMap<(i64, usize), Vec<&NodeRun>> = HashMap::new();
    for r in &runs {
        per_node.entry((r.instance, r.node)).or_default().push(r);
    }
    let doubled_ledger = per_node.values().filter(|v| v.len() > 1).count();
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for a in &arrivals {
        *seen.entry(a.log_id).or_default() += 1;
    }
    let doubled_executor = seen.values().filter(|&&n| n > 1).count();
    // Lateness after the last parent, in µs for the spread's printing.
    let mut lateness = Vec::with_capacity(runs.len());
    for r in &runs {
        let Some(dispatched) = r.dispatched_at else {
            continue;
        };
        let after = if r.node == 0 {
            fired.get(&r.instance).copied()
        } else {
            let parents: Vec<usize> = if r.node == FAN + 1 {
                (1..=FAN).collect()
            } else {
                vec![0]
            };
            parents
                .iter()
                .filter_map(|p| per_node.get(&(r.instance, *p)))
                .filter_map(|v| v.iter().filter_map(|x| x.finished_at).max())
                .max()
        };
        if let Some(after) = after {
            lateness.push((dispatched - after) * 1000);
        }
    }
    let spread = Spread::of(lateness).context("no node ran")?;
    let missed = (expected - in_window).max(0);
    println!(
        "window: {} fires expected, {} instances fired in it, {} instances in all, {} node runs",
        expected,
        in_window,
        instances.len(),
        runs.len()
    );
    println!(
        "node lateness after its last parent: p50 {} ms, p99 {} ms, max {} ms ({} nodes)",
        super::stats::ms(spread.p50),
        super::stats::ms(spread.p99),
        super::stats::ms(spread.max),
        spread.count
    );
    println!(
        "RESULT scenario=workflow db={} workflows={} nodes_per_workflow={} instances={} \
         node_runs={} node_p50_ms={} node_p99_ms={} node_max_ms={} missed={missed} \
         doubled={} not_succeeded={not_succeeded}",
        db.kind.as_str(),
        keys.len(),
        FAN + 2,
        instances.len(),
        runs.len(),
        super::stats::ms(spread.p50),
        super::stats::ms(spread.p99),
        super::stats::ms(spread.max),
        doubled_ledger + doubled_executor,
    );
    Ok(())
}

/// A fan-out and fan-in workflow of `FAN` + 2 nodes on `job`, every 10 s.
fn definition(key: &str, app: &str, job: &str) -> Value {
    let mut nodes = vec![json!({ "key": "root", "job": job })];
    let mut edges = Vec::new();
    for i in 0..FAN {
        let k = format!("n{i}");
        nodes.push(json!({ "key": k, "job": job }));
        edges.push(json!({ "from": "root", "to": k }));
        edges.push(json!({ "from": k, "to": "join" }));
    }
    nodes.push(json!({ "key": "join", "job": job }));
    json!({
        "key": key, "name": key, "group": app,
        "schedule_type": "FIX_RATE", "schedule_conf": format!("{EVERY_MS}ms"),
        "dag": { "nodes": nodes, "edges": edges },
    })
}
