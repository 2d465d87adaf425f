//! Workflows: definitions by key, fires admitted under the cap, steps written only at the
//! version they were computed from, node runs linked with their retries.

use tickwork_core::workflow::step::{Admit, InstanceState, NodeState};
use tickwork_core::workflow::{FailurePolicy, Overflow};

use super::*;

fn def(group_id: i64, key: &str, max_instances: i64, overflow: Overflow) -> WorkflowDef {
    WorkflowDef {
        key: key.to_owned(),
        name: format!("workflow {key}"),
        group_id,
        dag: r#"{"nodes":[{"key":"a","job":"j"}]}"#.to_owned(),
        failure_policy: FailurePolicy::End,
        max_instances,
        overflow,
        schedule_type: ScheduleType::None,
        schedule_conf: String::new(),
        time_zone: "UTC".to_owned(),
        misfire_strategy: MisfireStrategy::DoNothing,
    }
}

fn new_workflow(def: WorkflowDef) -> WorkflowNew {
    WorkflowNew {
        def,
        status: JobStatus::Stopped,
        next_fire_at: None,
        now: NOW,
    }
}

fn start(workflow_id: i64, job_id: i64) -> InstanceStart {
    InstanceStart {
        workflow_id,
        snapshot: "{}".to_owned(),
        nodes: vec![NodeState::Running, NodeState::Waiting],
        context: "{}".to_owned(),
        trigger_type: TriggerType::Manual,
        fire_key: None,
        runs: vec![NodeRunNew {
            node: 0,
            run: RunNew {
                owner_node: Some("n1".to_owned()),
                ..RunNew::new(job_id, TriggerType::Workflow, NOW)
            },
        }],
        now: NOW,
    }
}

pub(crate) async fn workflows_are_created_changed_and_deleted_by_key(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "wf-app").await;
    let created = store
        .workflow_create(new_workflow(def(g.id, "etl", 1, Overflow::Skip)))
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(store.workflow_get(created.id).await.unwrap(), created);
    assert_eq!(store.workflow_get_by_key("etl").await.unwrap(), created);
    assert_conflict(
        store
            .workflow_create(new_workflow(def(g.id, "etl", 1, Overflow::Skip)))
            .await,
    );
    assert_not_found(
        store
            .workflow_create(new_workflow(def(g.id + 1000, "orphan", 1, Overflow::Skip)))
            .await,
    );
    assert_invalid(
        store
            .workflow_create(new_workflow(def(g.id, "zero", 0, Overflow::Skip)))
            .await,
    );
    let mut changed = def(g.id, "etl", 2, Overflow::Queue);
    changed.name = "nightly etl".to_owned();
    let updated = store
        .workflow_update(WorkflowUpdate {
            id: created.id,
            expected_version: Some(1),
            def: changed.clone(),
            next_fire_at: None,
            now: NOW + 1,
        })
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(store.workflow_get(created.id).await.unwrap(), updated);
    // A stale version, or a new key: refused, nothing changed.
    assert_conflict(
        store
            .workflow_update(WorkflowUpdate {
                id: created.id,
                expected_version: Some(1),
                def: changed.clone(),
                next_fire_at: None,
                now: NOW + 2,
            })
            .await,
    );
    let mut rekeyed = changed;
    rekeyed.key = "other".to_owned();
    assert_invalid(
        store
            .workflow_update(WorkflowUpdate {
                id: created.id,
                expected_version: None,
                def: rekeyed,
                next_fire_at: None,
                now: NOW + 2,
            })
            .await,
    );
    assert_eq!(store.workflow_get(created.id).await.unwrap(), updated);
    assert_eq!(
        store.workflows_list().await.unwrap(),
        std::slice::from_ref(&updated)
    );

    // Refused while an instance lives; deleted with its ended instances once it ended.
    let job = store.job_create(job_new(g.id, "wf-job")).await.unwrap();
    let started = store
        .workflow_instance_start(start(created.id, job.id))
        .await
        .unwrap();
    let instance = started.instance.unwrap();
    assert_conflict(store.workflow_delete(created.id).await);
    store
        .workflow_instance_step(InstanceStep {
            id: instance.id,
            expected_version: instance.version,
            state: InstanceState::Stopped,
            nodes: vec![NodeState::Stopped, NodeState::Stopped],
            context: "{}".to_owned(),
            ended_at: Some(NOW + 5),
            runs: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(store.workflow_delete(created.id).await.unwrap(), updated);
    assert_not_found(store.workflow_get(created.id).await);
    assert_not_found(store.workflow_instance_get(instance.id).await);
    // The node's run stays in the ledger.
    assert_eq!(
        store.run_get(started.runs[0].id).await.unwrap().job_id,
        job.id
    );
}

pub(crate) async fn fires_are_admitted_under_the_cap_started_queued_or_skipped(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "wf-cap").await;
    let job = store.job_create(job_new(g.id, "wf-cap-job")).await.unwrap();
    for (key, overflow, second) in [
        ("skips", Overflow::Skip, Admit::Skip),
        ("queues", Overflow::Queue, Admit::Queue),
    ] {
        let wf = store
            .workflow_create(new_workflow(def(g.id, key, 1, overflow)))
            .await
            .unwrap();
        let first = store
            .workflow_instance_start(start(wf.id, job.id))
            .await
            .unwrap();
        assert_eq!(first.admitted, Admit::Start);
        let instance = first.instance.unwrap();
        assert_eq!(instance.state, InstanceState::Running);
        assert_eq!(first.runs.len(), 1);
        assert_eq!(first.runs[0].trigger_type, TriggerType::Workflow);
        assert_eq!(first.runs[0].owner_node.as_deref(), Some("n1"));

        let next = store
            .workflow_instance_start(start(wf.id, job.id))
            .await
            .unwrap();
        assert_eq!(next.admitted, second, "{key}");
        assert!(next.runs.is_empty(), "{key}: no run past the cap");
        let live = store
            .workflow_instances_list(InstancesQuery {
                workflow_id: Some(wf.id),
                states: vec![InstanceState::Running, InstanceState::Queued],
                limit: 10,
            })
            .await
            .unwrap();
        let states: Vec<InstanceState> = live.iter().map(|i| i.state).collect();
        match second {
            Admit::Queue => {
                assert_eq!(states, [InstanceState::Queued, InstanceState::Running]);
                // A queued instance has started nothing.
                assert_eq!(live[0].nodes, [NodeState::Waiting, NodeState::Waiting]);
            }
            _ => assert_eq!(states, [InstanceState::Running]),
        }
    }
    let unknown = store.workflow_instance_start(start(999_999, job.id)).await;
    assert_not_found(unknown);
}

pub(crate) async fn an_instance_steps_only_from_the_version_it_was_read_at(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "wf-step").await;
    let a = store.job_create(job_new(g.id, "wf-a")).await.unwrap();
    let b = store.job_create(job_new(g.id, "wf-b")).await.unwrap();
    let wf = store
        .workflow_create(new_workflow(def(g.id, "steps", 1, Overflow::Skip)))
        .await
        .unwrap();
    let started = store
        .workflow_instance_start(start(wf.id, a.id))
        .await
        .unwrap();
    let instance = started.instance.unwrap();
    let first_run = started.runs[0].id;
    assert_eq!(
        store
            .workflow_instances_of_runs(&[first_run, 12345])
            .await
            .unwrap(),
        [instance.id]
    );

    let step = |version: i64| InstanceStep {
        id: instance.id,
        expected_version: version,
        state: InstanceState::Running,
        nodes: vec![NodeState::Succeeded, NodeState::Running],
        context: r#"{"rows":"42"}"#.to_owned(),
        ended_at: None,
        runs: vec![NodeRunNew {
            node: 1,
            run: RunNew {
                params: Some("--rows 42".to_owned()),
                owner_node: Some("n1".to_owned()),
                ..RunNew::new(b.id, TriggerType::Workflow, NOW + 10)
            },
        }],
    };
    let stepped = store.workflow_instance_step(step(1)).await.unwrap();
    assert_eq!(stepped.instance.version, 2);
    assert_eq!(
        stepped.instance.nodes,
        [NodeState::Succeeded, NodeState::Running]
    );
    assert_eq!(stepped.instance.context, r#"{"rows":"42"}"#);
    assert_eq!(stepped.runs.len(), 1);
    assert_eq!(stepped.runs[0].params, "--rows 42");
    // The same step computed from version 1 again (another admin, late): refused, and its
    // run not written.
    assert_conflict(store.workflow_instance_step(step(1)).await);
    assert_eq!(all_runs(store, Some(b.id)).await.len(), 1);
    // A node of a job that is gone: refused, nothing written.
    let mut orphan = step(2);
    orphan.runs[0].run.job_id = 999_999;
    assert_not_found(store.workflow_instance_step(orphan).await);
    assert_eq!(
        store
            .workflow_instance_get(instance.id)
            .await
            .unwrap()
            .instance
            .version,
        2
    );

    let read = store.workflow_instance_get(instance.id).await.unwrap();
    let nodes: Vec<(usize, i64)> = read.runs.iter().map(|r| (r.node, r.run.job_id)).collect();
    assert_eq!(nodes, [(0, a.id), (1, b.id)]);
    assert_not_found(store.workflow_instance_get(999_999).await);
}

pub(crate) async fn a_retry_of_a_node_run_is_linked_to_the_same_node(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "wf-retry").await;
    let mut new = job_new(g.id, "wf-flaky");
    new.spec.retry_count = 1;
    let job = store.job_create(new).await.unwrap();
    let wf = store
        .workflow_create(new_workflow(def(g.id, "retries", 1, Overflow::Skip)))
        .await
        .unwrap();
    let started = store
        .workflow_instance_start(start(wf.id, job.id))
        .await
        .unwrap();
    let instance = started.instance.unwrap();
    let run = started.runs[0].id;
    dispatch(store, run, "http://exec:1", NOW).await;
    let retry = |r: &Run, _: &Job| FollowUpPlan {
        runs: vec![RunNew {
            attempt: r.attempt + 1,
            parent_run_id: Some(r.id),
            owner_node: Some("n1".to_owned()),
            ..RunNew::new(r.job_id, TriggerType::Retry, NOW + 1)
        }],
        next_fire_at: None,
    };
    let ended = store
        .run_complete(result(run, RunState::Failed, NOW + 1), &retry)
        .await
        .unwrap();
    assert_eq!(ended.follow_ups.len(), 1);
    let read = store.workflow_instance_get(instance.id).await.unwrap();
    let linked: Vec<(usize, i64)> = read.runs.iter().map(|r| (r.node, r.run.id)).collect();
    assert_eq!(linked, [(0, run), (0, ended.follow_ups[0].id)]);
    // A retry of a run outside any workflow is linked to nothing.
    let plain = planned(store, job.id, Some("n1"), NOW).await;
    dispatch(store, plain.id, "http://exec:1", NOW).await;
    let ended = store
        .run_complete(result(plain.id, RunState::Failed, NOW + 1), &retry)
        .await
        .unwrap();
    assert!(
        store
            .workflow_instances_of_runs(&[plain.id, ended.follow_ups[0].id])
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn a_scheduled_fire_is_claimed_once_with_its_instance(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "wf-fire").await;
    let job = store
        .job_create(job_new(g.id, "wf-fire-job"))
        .await
        .unwrap();
    let mut d = def(g.id, "every-10s", 5, Overflow::Skip);
    d.schedule_type = ScheduleType::FixRate;
    d.schedule_conf = "10s".to_owned();
    let wf = store
        .workflow_create(WorkflowNew {
            def: d,
            status: JobStatus::Running,
            next_fire_at: Some(NOW),
            now: NOW,
        })
        .await
        .unwrap();
    let stopped = store
        .workflow_create(new_workflow(def(g.id, "stopped", 1, Overflow::Skip)))
        .await
        .unwrap();
    let due = store
        .workflows_due(WorkflowsDue {
            now: NOW,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(due.iter().map(|w| w.id).collect::<Vec<_>>(), [wf.id]);
    assert!(
        store
            .workflows_due(WorkflowsDue {
                now: NOW - 1,
                limit: 10
            })
            .await
            .unwrap()
            .is_empty()
    );
    let fire = |next: Option<i64>| WorkflowFire {
        workflow_id: wf.id,
        seen: NOW,
        next_fire_at: next,
        start: Some(InstanceStart {
            fire_key: Some(NOW),
            trigger_type: TriggerType::FixRate,
            ..start(wf.id, job.id)
        }),
        now: NOW,
    };
    let first = store.workflow_fire(fire(Some(NOW + 10_000))).await.unwrap();
    let started = first.expect("the first claim wins");
    let instance = started.instance.unwrap();
    assert_eq!(instance.fire_key, Some(NOW));
    assert_eq!(started.runs.len(), 1);
    // The same fire claimed again (another admin, from the same read): nothing written.
    assert_eq!(
        store.workflow_fire(fire(Some(NOW + 10_000))).await.unwrap(),
        None
    );
    assert_eq!(
        store.workflow_get(wf.id).await.unwrap().next_fire_at,
        Some(NOW + 10_000)
    );
    let all = store
        .workflow_instances_list(InstancesQuery {
            workflow_id: Some(wf.id),
            states: Vec::new(),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    // A misfire skipped: the schedule moves on, no instance; the last fire stops it.
    let skipped = store
        .workflow_fire(WorkflowFire {
            workflow_id: wf.id,
            seen: NOW + 10_000,
            next_fire_at: None,
            start: None,
            now: NOW,
        })
        .await
        .unwrap()
        .expect("claimed");
    assert!(skipped.instance.is_none());
    let after = store.workflow_get(wf.id).await.unwrap();
    assert_eq!(
        (after.status, after.next_fire_at),
        (JobStatus::Stopped, None)
    );
    // Started again by hand: its schedule's first fire.
    let restarted = store
        .workflow_set_status(WorkflowStatusChange {
            id: stopped.id,
            status: JobStatus::Running,
            next_fire_at: Some(NOW + 5),
            now: NOW,
        })
        .await
        .unwrap();
    assert_eq!(store.workflow_get(stopped.id).await.unwrap(), restarted);
    assert_eq!(restarted.next_fire_at, Some(NOW + 5));
}
