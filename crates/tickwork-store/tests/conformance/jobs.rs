//! Job definitions: create, edit, list, start and stop, delete.

use super::*;

fn full_spec(group_id: i64) -> JobSpec {
    JobSpec {
        group_id,
        description: "Nightly réconciliation ✓".to_owned(),
        owner: "ops-team".to_owned(),
        alarm_channels: "ops@example.com,pager".to_owned(),
        schedule_type: ScheduleType::Cron,
        schedule_conf: "0 0 2 * * ?".to_owned(),
        time_zone: "Asia/Shanghai".to_owned(),
        misfire_strategy: MisfireStrategy::FireOnceNow,
        route_strategy: RouteStrategy::ConsistentHash,
        handler: "reconcile".to_owned(),
        params: "{\"day\": \"yesterday\"}".to_owned(),
        block_strategy: BlockStrategy::DiscardLater,
        timeout_s: 300,
        retry_count: 3,
        retry_backoff_ms: 15_000,
        child_job_ids: vec![7, 11],
        priority: 5,
        glue_type: GlueType::Shell,
        glue_source: "#!/bin/bash\necho 'it''s ok'\n".to_owned(),
        // Not the default, so that the round trip shows it is stored.
        delivery: tickwork_core::Delivery::AtLeastOnce,
        lateness_budget_ms: 2_500,
    }
}

pub(crate) async fn job_crud_round_trips_every_field(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "jobs").await;
    let created = store
        .job_create(JobNew {
            key: "nightly-reconcile".to_owned(),
            spec: full_spec(g.id),
            status: JobStatus::Running,
            next_fire_at: Some(NOW + 1000),
            now: NOW,
        })
        .await
        .unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.spec, full_spec(g.id));
    assert_eq!(created.glue_updated_at, NOW);
    assert_eq!(created.last_fire_at, None);
    assert_eq!(store.job_get(created.id).await.unwrap(), created);
    assert_eq!(
        store.job_get_by_key("nightly-reconcile").await.unwrap(),
        created
    );

    // An edit that keeps the script keeps glue_updated_at.
    let mut spec = full_spec(g.id);
    spec.description = "Nightly".to_owned();
    spec.child_job_ids = Vec::new();
    spec.route_strategy = RouteStrategy::ShardingBroadcast;
    let updated = store
        .job_update(JobUpdate {
            id: created.id,
            expected_version: None,
            spec: spec.clone(),
            next_fire_at: Some(NOW + 2000),
            now: NOW + 10,
        })
        .await
        .unwrap();
    assert_eq!(updated.spec, spec);
    assert_eq!(updated.version, 2);
    assert_eq!(updated.next_fire_at, Some(NOW + 2000));
    assert_eq!(updated.glue_updated_at, NOW);
    assert_eq!((updated.created_at, updated.updated_at), (NOW, NOW + 10));
    assert_eq!(updated.status, JobStatus::Running);

    // An edit of the script moves it.
    spec.glue_source.push_str("echo more\n");
    let updated = store
        .job_update(JobUpdate {
            id: created.id,
            expected_version: None,
            spec,
            next_fire_at: None,
            now: NOW + 20,
        })
        .await
        .unwrap();
    assert_eq!(updated.glue_updated_at, NOW + 20);
    assert_eq!(updated.next_fire_at, None);
    assert_eq!(store.job_get(created.id).await.unwrap(), updated);

    store.job_delete(created.id).await.unwrap();
    assert_not_found(store.job_get(created.id).await);
    assert_not_found(store.job_get_by_key("nightly-reconcile").await);
    assert_not_found(store.job_delete(created.id).await);
}

pub(crate) async fn job_key_conflict_and_validation(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "jobs").await;
    let first = store.job_create(job_new(g.id, "unique")).await.unwrap();
    assert_conflict(store.job_create(job_new(g.id, "unique")).await);
    assert_invalid(store.job_create(job_new(g.id + 1000, "orphan")).await);
    assert_invalid(store.job_create(job_new(g.id, "")).await);
    assert_invalid(store.job_create(job_new(g.id, &"k".repeat(129))).await);
    let mut negative = job_new(g.id, "negative");
    negative.spec.retry_count = -1;
    assert_invalid(store.job_create(negative).await);
    let mut long_handler = job_new(g.id, "long-handler");
    long_handler.spec.handler = "h".repeat(256);
    assert_invalid(store.job_create(long_handler).await);

    let mut spec = first.spec.clone();
    spec.group_id = g.id + 1000;
    assert_invalid(
        store
            .job_update(JobUpdate {
                id: first.id,
                expected_version: None,
                spec: spec.clone(),
                next_fire_at: None,
                now: NOW,
            })
            .await,
    );
    assert_eq!(store.job_get(first.id).await.unwrap(), first);
    spec.group_id = g.id;
    assert_not_found(
        store
            .job_update(JobUpdate {
                id: first.id + 1000,
                expected_version: None,
                spec,
                next_fire_at: None,
                now: NOW,
            })
            .await,
    );
}

pub(crate) async fn job_update_is_optimistic_when_asked(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "jobs").await;
    let job = store.job_create(job_new(g.id, "edited")).await.unwrap();
    let edit = |version: Option<i64>, description: &str| JobUpdate {
        id: job.id,
        expected_version: version,
        spec: JobSpec {
            description: description.to_owned(),
            ..job.spec.clone()
        },
        next_fire_at: None,
        now: NOW + 1,
    };
    let first = store.job_update(edit(Some(1), "first")).await.unwrap();
    assert_eq!(first.version, 2);
    // A second editor who also read version 1 loses, and changes nothing.
    assert_conflict(store.job_update(edit(Some(1), "stale")).await);
    assert_eq!(store.job_get(job.id).await.unwrap(), first);
    let last = store
        .job_update(edit(None, "last write wins"))
        .await
        .unwrap();
    assert_eq!(
        (last.version, last.spec.description.as_str()),
        (3, "last write wins")
    );
}

pub(crate) async fn jobs_list_filters_and_paginates(ctx: Ctx) {
    let store = &*ctx.store;
    let a = group(store, "group-a").await;
    let b = group(store, "group-b").await;
    let mut ids = Vec::new();
    for i in 0..25 {
        let mut new = job_new(if i % 5 == 0 { b.id } else { a.id }, &format!("job-{i:02}"));
        if i % 2 == 0 {
            new.status = JobStatus::Running;
            new.next_fire_at = Some(NOW + i);
        }
        if i == 7 {
            new.spec.description = "Sends the WEEKLY 100%_report".to_owned();
        }
        ids.push(store.job_create(new).await.unwrap().id);
    }
    let list = |filter: JobFilter| store.jobs_list(filter);

    let page = list(JobFilter {
        page: PageReq {
            offset: 20,
            limit: 10,
        },
        ..JobFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(page.total, 25);
    assert_eq!(
        page.items.iter().map(|j| j.id).collect::<Vec<_>>(),
        ids[20..]
    );
    let first = list(JobFilter {
        page: PageReq::first(10),
        ..JobFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(
        first.items.iter().map(|j| j.id).collect::<Vec<_>>(),
        ids[..10]
    );

    let in_b = list(JobFilter {
        group_id: Some(b.id),
        ..JobFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(in_b.total, 5);
    assert!(in_b.items.iter().all(|j| j.spec.group_id == b.id));

    let running = list(JobFilter {
        status: Some(JobStatus::Running),
        group_id: Some(a.id),
        page: PageReq::first(100),
        ..JobFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(running.total, 10);
    assert!(
        running
            .items
            .iter()
            .all(|j| j.status == JobStatus::Running && j.spec.group_id == a.id)
    );

    // Text matches regardless of ASCII case, and wildcards in it are literal.
    for text in ["weekly", "WEEKLY 100%_", "100%_report"] {
        let found = list(JobFilter {
            text: Some(text.to_owned()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
        assert_eq!(
            found.items.iter().map(|j| j.id).collect::<Vec<_>>(),
            [ids[7]],
            "{text}"
        );
    }
    let none = list(JobFilter {
        text: Some("100%x".to_owned()),
        ..JobFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(none.total, 0);
    let by_key = list(JobFilter {
        text: Some("JOB-1".to_owned()),
        ..JobFilter::default()
    })
    .await
    .unwrap();
    assert_eq!(by_key.total, 10);

    assert_invalid(
        list(JobFilter {
            page: PageReq::first(0),
            ..JobFilter::default()
        })
        .await,
    );
    assert_invalid(
        list(JobFilter {
            page: PageReq::first(1001),
            ..JobFilter::default()
        })
        .await,
    );
}

pub(crate) async fn job_status_and_next_fire(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "jobs").await;
    let job = store.job_create(job_new(g.id, "toggled")).await.unwrap();
    let started = set_status(store, job.id, JobStatus::Running, Some(NOW + 500), NOW + 1)
        .await
        .expect("the job is there");
    assert_eq!(started.status, JobStatus::Running);
    assert_eq!(started.next_fire_at, Some(NOW + 500));
    assert_eq!(started.version, job.version, "a start is not an edit");
    assert_eq!(started.updated_at, NOW + 1);

    assert!(
        store
            .job_set_next_fire(JobNextFire {
                id: job.id,
                next_fire_at: Some(NOW + 900)
            })
            .await
            .unwrap()
    );
    assert_eq!(
        store.job_get(job.id).await.unwrap().next_fire_at,
        Some(NOW + 900)
    );

    let stopped = set_status(store, job.id, JobStatus::Stopped, None, NOW + 2)
        .await
        .expect("the job is there");
    assert_eq!(
        (stopped.status, stopped.next_fire_at),
        (JobStatus::Stopped, None)
    );
    // A late fixed-delay completion must not restart a stopped job.
    assert!(
        !store
            .job_set_next_fire(JobNextFire {
                id: job.id,
                next_fire_at: Some(NOW + 999)
            })
            .await
            .unwrap()
    );
    assert_eq!(store.job_get(job.id).await.unwrap().next_fire_at, None);
    assert!(
        !store
            .job_set_next_fire(JobNextFire {
                id: job.id + 99,
                next_fire_at: None
            })
            .await
            .unwrap()
    );
    assert_eq!(
        set_status(store, job.id + 99, JobStatus::Running, None, NOW).await,
        None,
        "a job that is not there is left out"
    );
}

pub(crate) async fn job_delete_removes_its_runs(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "jobs").await;
    let doomed = running_job(store, g.id, "doomed", NOW).await;
    let kept = running_job(store, g.id, "kept", NOW).await;
    let claimed = store
        .jobs_claim_due(claim("node-a", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 2);
    let manual = store
        .run_insert(RunNew::new(doomed.id, TriggerType::Manual, NOW))
        .await
        .unwrap();

    store.job_delete(doomed.id).await.unwrap();
    assert_not_found(store.run_get(manual.id).await);
    assert!(all_runs(store, Some(doomed.id)).await.is_empty());
    assert_eq!(all_runs(store, Some(kept.id)).await.len(), 1);
}
