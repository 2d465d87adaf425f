//! Many jobs in one transaction: `jobs_create` writes every job with its first script version
//! and its audit record, or nothing at all.

use super::*;

/// Jobs of a test batch: more than one statement's worth of rows on every backend.
const MANY: usize = 1500;

/// Job number `i` of a batch: every third a shell script, every fourth running.
fn bulk_job(group_id: i64, i: usize) -> JobCreate {
    let mut job = job_new(group_id, &format!("bulk-{i:05}"));
    let script = i.is_multiple_of(3);
    if script {
        job.spec.glue_type = GlueType::Shell;
        job.spec.glue_source = format!("echo {i} 'é'\n");
    }
    if i.is_multiple_of(4) {
        job.status = JobStatus::Running;
        job.next_fire_at = Some(NOW + i as i64);
    }
    JobCreate {
        job,
        first_script: script.then(|| FirstScript {
            author: "ann".to_owned(),
            comment: "created".to_owned(),
        }),
    }
}

/// The audit record the admin would write: what, who, and the job's key as its "after".
fn record(_: usize, job: &Job) -> Result<AuditNew, Error> {
    Ok(AuditNew {
        at: NOW,
        actor_id: Some(1),
        actor: "ann".to_owned(),
        action: "job.create".to_owned(),
        target_type: "job".to_owned(),
        target_id: job.id.to_string(),
        before: None,
        after: Some(format!(r#"{{"key":"{}"}}"#, job.key)),
    })
}

/// A maker of audit records.
type MakeRecord = fn(usize, &Job) -> Result<AuditNew, Error>;

/// `make`, but failing to make the record of job number `at`.
fn failing_at(make: MakeRecord, at: usize) -> impl Fn(usize, &Job) -> Result<AuditNew, Error> {
    move |i, job| {
        if i == at {
            Err(Error::Invalid("no record".to_owned()))
        } else {
            make(i, job)
        }
    }
}

/// `make`, but the record of job number `at` names no actor: the store refuses it.
fn unnamed_at(make: MakeRecord, at: usize) -> impl Fn(usize, &Job) -> Result<AuditNew, Error> {
    move |i, job| {
        let mut r = make(i, job)?;
        if i == at {
            r.actor = String::new();
        }
        Ok(r)
    }
}

/// A batch of [`MANY`] jobs of a new group, created.
async fn bulk_jobs(store: &dyn Store) -> Vec<Job> {
    let g = group(store, "bulk").await;
    let batch = (0..MANY).map(|i| bulk_job(g.id, i)).collect();
    store.jobs_create(batch, &record).await.unwrap()
}

async fn job_total(store: &dyn Store) -> u64 {
    let page = store
        .jobs_list(JobFilter {
            page: PageReq {
                offset: 0,
                limit: 1,
            },
            ..JobFilter::default()
        })
        .await
        .unwrap();
    page.total
}

async fn audit_total(store: &dyn Store) -> u64 {
    let page = store
        .audit_list(AuditFilter {
            page: PageReq {
                offset: 0,
                limit: 1,
            },
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    page.total
}

/// The audit records of job `id`.
async fn job_records(store: &dyn Store, id: i64) -> Paged<AuditEntry> {
    store
        .audit_list(AuditFilter {
            target_type: Some("job".to_owned()),
            target_id: Some(id.to_string()),
            ..AuditFilter::default()
        })
        .await
        .unwrap()
}

pub(crate) async fn jobs_create_writes_jobs_versions_and_records_together(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "bulk").await;
    let batch: Vec<JobCreate> = (0..MANY).map(|i| bulk_job(g.id, i)).collect();
    let created = store.jobs_create(batch.clone(), &record).await.unwrap();
    assert_eq!(created.len(), MANY);

    let ids: HashSet<i64> = created.iter().map(|j| j.id).collect();
    assert_eq!(ids.len(), MANY, "every job has an id of its own");
    for (c, job) in batch.iter().zip(&created) {
        assert_eq!(job.key, c.job.key, "in the order given");
        assert_eq!(job.spec, c.job.spec);
        assert_eq!(
            (job.status, job.next_fire_at),
            (c.job.status, c.job.next_fire_at)
        );
        assert_eq!(
            (job.version, job.created_at, job.glue_updated_at),
            (1, NOW, NOW)
        );
    }
    for i in [0, 1, 3, MANY / 2, MANY - 1] {
        let job = &created[i];
        assert_eq!(&store.job_get(job.id).await.unwrap(), job);
        assert_eq!(&store.job_get_by_key(&job.key).await.unwrap(), job);
        let versions = store.script_versions_list(job.id).await.unwrap();
        match &batch[i].first_script {
            Some(first) => {
                assert_eq!(versions.len(), 1, "job {i}");
                let v = &versions[0];
                assert_eq!(v.version, 1);
                assert_eq!(v.glue_type, GlueType::Shell);
                assert_eq!(v.source, job.spec.glue_source);
                assert_eq!((&v.author, &v.comment), (&first.author, &first.comment));
                assert_eq!(v.created_at, NOW);
            }
            None => assert!(versions.is_empty(), "job {i} has no script"),
        }
    }

    assert_eq!(audit_total(store).await, MANY as u64);
    let last = &created[MANY - 1];
    let records = job_records(store, last.id).await;
    assert_eq!(records.total, 1);
    let r = &records.items[0];
    assert_eq!((r.action.as_str(), r.actor.as_str()), ("job.create", "ann"));
    assert_eq!(
        r.after.as_deref(),
        Some(&*format!(r#"{{"key":"{}"}}"#, last.key))
    );

    // Running jobs are claimable like any other.
    let claimed = store
        .jobs_claim_due(claim("n1", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.jobs, 1, "bulk-00000 is due at NOW");
    assert!(
        store
            .jobs_create(Vec::new(), &record)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Two admins creating jobs on one database at once, in batches and one by one (PostgreSQL's
/// admins take ids from the sequence ahead of need): no id given twice, the ids of each
/// admin's batches increasing, every job found under its id, and every batch's records naming
/// their jobs. (A job created alone takes the sequence's next id at once, as the admin never
/// does: it creates every job in a batch.)
pub(crate) async fn jobs_created_by_two_admins_at_once_have_ids_of_their_own(ctx: Ctx) {
    let first = ctx.store.clone();
    let g = group(&*first, "bulk").await;
    let stores = [first, ctx.connect_again().await];
    let mut tasks = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            // (id, made in a batch, so with an audit record)
            let mut made = Vec::new();
            for round in 0..30 {
                let base = n * 10_000 + round * 100;
                if round % 5 == 4 {
                    let job = store.job_create(job_new(g.id, &format!("one-{base}")));
                    made.push((job.await.unwrap().id, false));
                    continue;
                }
                let batch = (0..=round % 7).map(|i| bulk_job(g.id, base + i)).collect();
                let created = store.jobs_create(batch, &record).await.unwrap();
                made.extend(created.iter().map(|j| (j.id, true)));
            }
            made
        }));
    }
    let mut all = HashSet::new();
    for task in tasks {
        let made = task.await.unwrap();
        let batched: Vec<i64> = made.iter().filter(|m| m.1).map(|m| m.0).collect();
        assert!(batched.is_sorted(), "one admin's ids increase: {batched:?}");
        for (id, in_batch) in made {
            assert!(all.insert(id), "id {id} given twice");
            assert_eq!(stores[0].job_get(id).await.unwrap().id, id);
            let records = job_records(&*stores[0], id).await;
            assert_eq!(records.total, u64::from(in_batch), "records of job {id}");
        }
    }
    assert_eq!(job_total(&*stores[0]).await, all.len() as u64);
    stores[1].close().await;
}

pub(crate) async fn jobs_create_is_all_or_nothing(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "bulk").await;
    let taken = store.job_create(job_new(g.id, "bulk-00700")).await.unwrap();
    let (jobs_before, audit_before) = (job_total(store).await, audit_total(store).await);
    let batch = || (0..MANY).map(|i| bulk_job(g.id, i)).collect::<Vec<_>>();
    let nothing_written = || async {
        assert_eq!(job_total(store).await, jobs_before);
        assert_eq!(audit_total(store).await, audit_before);
        assert_not_found(store.job_get_by_key("bulk-00000").await);
    };

    // A key taken on the database: a conflict naming it.
    match store.jobs_create(batch(), &record).await {
        Err(Error::Conflict(m)) => assert!(m.contains("\"bulk-00700\""), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    nothing_written().await;
    assert_eq!(store.job_get(taken.id).await.unwrap(), taken);

    // The same in a batch small enough for one statement, and a group missing there.
    let few = |keys: [usize; 3]| keys.map(|i| bulk_job(g.id, i)).to_vec();
    match store.jobs_create(few([1, 700, 2]), &record).await {
        Err(Error::Conflict(m)) => assert!(m.contains("\"bulk-00700\""), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    nothing_written().await;
    let mut orphan = few([1, 2, 3]);
    orphan[2].job.spec.group_id = g.id + 1000;
    match store.jobs_create(orphan, &record).await {
        Err(Error::Invalid(m)) => assert!(m.contains(&format!("group {}", g.id + 1000)), "{m}"),
        other => panic!("expected invalid, got {other:?}"),
    }
    nothing_written().await;

    // A key twice in the batch.
    let mut twice = batch();
    twice.retain(|c| c.job.key != "bulk-00700");
    twice[900].job.key = " bulk-00001 ".to_owned();
    match store.jobs_create(twice, &record).await {
        Err(Error::Conflict(m)) => assert!(m.contains("\"bulk-00001\""), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    nothing_written().await;

    let without_taken = || {
        let mut b = batch();
        b.retain(|c| c.job.key != "bulk-00700");
        b
    };
    // A group that does not exist, on the last job only.
    let mut orphan = without_taken();
    let last = orphan.len() - 1;
    orphan[last].job.spec.group_id = g.id + 1000;
    match store.jobs_create(orphan, &record).await {
        Err(Error::Invalid(m)) => assert!(m.contains(&format!("group {}", g.id + 1000)), "{m}"),
        other => panic!("expected invalid, got {other:?}"),
    }
    nothing_written().await;

    // A job the columns cannot hold.
    let mut long = without_taken();
    long[1200].job.spec.handler = "h".repeat(256);
    assert_invalid(store.jobs_create(long, &record).await);
    nothing_written().await;

    // An audit record that cannot be made or stored spoils the whole batch too.
    let failing = failing_at(record, 1000);
    assert_invalid(store.jobs_create(without_taken(), &failing).await);
    nothing_written().await;
    let unnamed = unnamed_at(record, 1400);
    assert_invalid(store.jobs_create(without_taken(), &unnamed).await);
    nothing_written().await;

    // And the same batch without its faults goes in whole.
    let created = store.jobs_create(without_taken(), &record).await.unwrap();
    assert_eq!(created.len(), MANY - 1);
    assert_eq!(job_total(store).await, jobs_before + MANY as u64 - 1);
    assert_eq!(audit_total(store).await, audit_before + MANY as u64 - 1);
}

/// The audit record of a job started, stopped or deleted by a batch: the job's status in it.
pub(crate) fn status_record(_: usize, job: &Job) -> Result<AuditNew, Error> {
    let mut r = record(0, job)?;
    r.action = "job.status".to_owned();
    r.after = Some(format!(r#"{{"status":"{}"}}"#, job.status.as_str()));
    Ok(r)
}

pub(crate) async fn jobs_set_status_changes_jobs_and_records_together(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "bulk").await;
    let stopped = |i: usize| {
        let mut c = bulk_job(g.id, i);
        c.job.status = JobStatus::Stopped;
        c.job.next_fire_at = None;
        c
    };
    let created = store
        .jobs_create((0..MANY).map(stopped).collect(), &record)
        .await
        .unwrap();
    let audit_before = audit_total(store).await;
    // Read at once: in id order, a repeated id once, a job that is not there left out.
    let gone = created[MANY - 1].id + 1000;
    let mut asked: Vec<i64> = created.iter().rev().map(|j| j.id).collect();
    asked.extend([gone, created[3].id]);
    assert_eq!(store.jobs_get(&asked).await.unwrap(), created);
    assert!(store.jobs_get(&[]).await.unwrap().is_empty());
    // Newest first, and one job that is not there.
    let mut order: Vec<i64> = created.iter().rev().map(|j| j.id).collect();
    order.insert(700, gone);
    let start = JobsStatusChange {
        status: JobStatus::Running,
        jobs: order.iter().map(|&id| (id, Some(NOW + id))).collect(),
        now: NOW + 5,
    };

    let started = store
        .jobs_set_status(start.clone(), &status_record)
        .await
        .unwrap();
    assert_eq!(started.len(), MANY, "the job that is not there is left out");
    let want: Vec<i64> = order.iter().copied().filter(|&id| id != gone).collect();
    assert_eq!(started.iter().map(|j| j.id).collect::<Vec<_>>(), want);
    for job in &started {
        assert_eq!(
            (job.status, job.next_fire_at, job.updated_at, job.version),
            (JobStatus::Running, Some(NOW + job.id), NOW + 5, 1),
        );
        assert_eq!(&store.job_get(job.id).await.unwrap(), job, "as stored");
    }
    assert_eq!(audit_total(store).await, audit_before + MANY as u64);
    let records = job_records(store, created[0].id).await;
    assert_eq!(records.total, 2, "created, then started");
    let status = records.items.iter().find(|r| r.action == "job.status");
    assert_eq!(
        status.and_then(|r| r.after.as_deref()),
        Some(r#"{"status":"running"}"#)
    );

    // Started jobs are claimed; stopped ones are not.
    let first = created[0].id;
    let claimed = store
        .jobs_claim_due(claim("n1", NOW + first, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.jobs, 1, "job {first} is due first");
    let stop = JobsStatusChange {
        status: JobStatus::Stopped,
        jobs: created.iter().map(|j| (j.id, None)).collect(),
        now: NOW + 6,
    };
    let stopped = store.jobs_set_status(stop, &status_record).await.unwrap();
    assert_eq!(stopped.len(), MANY);
    assert!(
        stopped
            .iter()
            .all(|j| j.status == JobStatus::Stopped && j.next_fire_at.is_none())
    );
    let claimed = store
        .jobs_claim_due(claim("n1", NOW + 1_000_000, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.jobs, 0, "no stopped job is claimed");
    assert_eq!(audit_total(store).await, audit_before + 2 * MANY as u64);
}

pub(crate) async fn jobs_set_status_and_delete_are_all_or_nothing(ctx: Ctx) {
    let store = &*ctx.store;
    let created = bulk_jobs(store).await;
    let ids: Vec<i64> = created.iter().map(|j| j.id).collect();
    let (jobs_before, audit_before) = (job_total(store).await, audit_total(store).await);
    let unchanged = || async {
        assert_eq!(job_total(store).await, jobs_before);
        assert_eq!(audit_total(store).await, audit_before);
        for i in [0, 1, 4, MANY - 1] {
            assert_eq!(store.job_get(created[i].id).await.unwrap(), created[i]);
        }
    };
    let stop = |ids: &[i64]| JobsStatusChange {
        status: JobStatus::Stopped,
        jobs: ids.iter().map(|&id| (id, None)).collect(),
        now: NOW + 9,
    };

    // A job named twice.
    let mut twice = ids.clone();
    twice.push(ids[900]);
    match store.jobs_set_status(stop(&twice), &status_record).await {
        Err(Error::Conflict(m)) => assert!(m.contains(&ids[900].to_string()), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    unchanged().await;
    match store.jobs_delete(&twice, &status_record).await {
        Err(Error::Conflict(m)) => assert!(m.contains(&ids[900].to_string()), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    unchanged().await;

    // An audit record that cannot be made, or cannot be stored.
    let failing = failing_at(status_record, 1000);
    let unnamed = unnamed_at(status_record, 1400);
    assert_invalid(store.jobs_set_status(stop(&ids), &failing).await);
    unchanged().await;
    assert_invalid(store.jobs_set_status(stop(&ids), &unnamed).await);
    unchanged().await;
    assert_invalid(store.jobs_delete(&ids, &failing).await);
    unchanged().await;
    assert_invalid(store.jobs_delete(&ids, &unnamed).await);
    unchanged().await;

    // Nothing asked, nothing written.
    assert!(
        store
            .jobs_set_status(stop(&[]), &status_record)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .jobs_delete(&[], &status_record)
            .await
            .unwrap()
            .is_empty()
    );
    unchanged().await;
}

pub(crate) async fn jobs_delete_removes_jobs_with_their_runs_together(ctx: Ctx) {
    let store = &*ctx.store;
    let created = bulk_jobs(store).await;
    // Every fourth job is running and due at NOW + i: a run each for the first eleven (0 to 40).
    let claimed = store
        .jobs_claim_due(claim("n1", NOW + 40, 0, 100), &fixed_rate(1000, NOW + 40))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 11);
    let manual = store
        .run_insert(RunNew::new(created[1].id, TriggerType::Manual, NOW))
        .await
        .unwrap();
    let (jobs_before, audit_before) = (job_total(store).await, audit_total(store).await);

    // The first 1,000 but job 4's, and one job that is not there.
    let gone = created[MANY - 1].id + 1000;
    let mut doomed: Vec<i64> = created[..1000].iter().map(|j| j.id).collect();
    doomed.retain(|&id| id != created[4].id);
    doomed.insert(10, gone);
    let deleted = store.jobs_delete(&doomed, &status_record).await.unwrap();
    assert_eq!(deleted.len(), 999);
    let want: Vec<i64> = doomed.iter().copied().filter(|&id| id != gone).collect();
    let ids: Vec<i64> = deleted.iter().map(|j| j.id).collect();
    assert!(ids == want, "in the order given");
    // As they were when deleted: job 0 claimed, its next fire moved on.
    assert_eq!(deleted[0].key, created[0].key);
    assert_eq!(deleted[0].last_fire_at, Some(NOW));
    assert_eq!(job_total(store).await, jobs_before - 999);
    assert_eq!(audit_total(store).await, audit_before + 999);
    assert_not_found(store.job_get(created[0].id).await);
    assert_not_found(store.run_get(manual.id).await);
    assert!(all_runs(store, Some(created[0].id)).await.is_empty());
    assert!(
        store
            .script_versions_list(created[3].id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        all_runs(store, Some(created[4].id)).await.len(),
        1,
        "job 4 kept its run"
    );
    assert_eq!(
        store.job_get(created[4].id).await.unwrap().key,
        created[4].key
    );
    assert_eq!(
        store.job_get(created[1000].id).await.unwrap(),
        created[1000]
    );
}
