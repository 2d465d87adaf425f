//! Submissions: written with their job in one transaction, kept or replaced under a taken key,
//! cancelled with their job and runs; a job's fires left counted down by the claim.

use super::*;

fn put(
    group_id: i64,
    key: &str,
    fires_left: Option<i64>,
    on_conflict: OnConflict,
) -> SubmissionPut {
    let mut job = job_new(group_id, &format!("sub-{group_id}-{key}"));
    job.spec.schedule_type = ScheduleType::FixRate;
    job.spec.schedule_conf = "1".to_owned();
    job.status = JobStatus::Running;
    job.next_fire_at = Some(NOW);
    SubmissionPut {
        group_id,
        key: key.to_owned(),
        schedule: r#"{"kind":"repeat","every_ms":1000}"#.to_owned(),
        job,
        fires_left,
        feedback_channel_id: None,
        on_conflict,
    }
}

async fn all_jobs(store: &dyn Store) -> Vec<Job> {
    let filter = JobFilter {
        page: PageReq::first(PageReq::MAX_LIMIT),
        ..JobFilter::default()
    };
    store.jobs_list(filter).await.unwrap().items
}

fn key(group_id: i64, key: &str) -> SubmissionKey {
    SubmissionKey {
        group_id,
        key: key.to_owned(),
    }
}

pub(crate) async fn submissions_are_created_kept_and_replaced_by_key(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "sub-app").await;
    let other = group(store, "sub-other").await;

    let created = store
        .submission_put(put(g.id, "order-1", Some(3), OnConflict::Ignore))
        .await
        .unwrap();
    assert_eq!(created.written, SubmissionWritten::Created);
    assert_eq!(created.job.fires_left, Some(3));
    assert_eq!(created.submission.job_id, created.job.id);
    assert_eq!(store.job_get(created.job.id).await.unwrap(), created.job);

    // Ignore: the same key again changes nothing, whatever the new definition says.
    let mut again = put(g.id, "order-1", None, OnConflict::Ignore);
    again.job.spec.params = "other params".to_owned();
    let kept = store.submission_put(again).await.unwrap();
    assert_eq!(kept.written, SubmissionWritten::Kept);
    assert_eq!(kept.submission, created.submission);
    assert_eq!(kept.job, created.job);

    // The same key in another group is another submission.
    let elsewhere = store
        .submission_put(put(other.id, "order-1", None, OnConflict::Ignore))
        .await
        .unwrap();
    assert_eq!(elsewhere.written, SubmissionWritten::Created);
    assert_ne!(elsewhere.job.id, created.job.id);

    // Replace: the job keeps its id and key, takes the new definition, moves its version.
    let mut replace = put(g.id, "order-1", Some(5), OnConflict::Replace);
    replace.job.spec.params = "new params".to_owned();
    replace.job.now = NOW + 10;
    replace.schedule = r#"{"kind":"now"}"#.to_owned();
    let replaced = store.submission_put(replace).await.unwrap();
    assert_eq!(replaced.written, SubmissionWritten::Replaced);
    assert_eq!(replaced.before.as_ref(), Some(&created.job));
    assert_eq!(replaced.job.id, created.job.id);
    assert_eq!(replaced.job.key, created.job.key);
    assert_eq!(replaced.job.spec.params, "new params");
    assert_eq!(replaced.job.fires_left, Some(5));
    assert_eq!(replaced.job.version, created.job.version + 1);
    let read = store.submission_get(key(g.id, "order-1")).await.unwrap();
    assert_eq!(read.submission.schedule, r#"{"kind":"now"}"#);
    assert_eq!(read.submission.updated_at, NOW + 10);
    assert_eq!(read.job, replaced.job);

    // Bad input changes nothing.
    let jobs_before = all_jobs(store).await;
    let mut long = put(g.id, &"k".repeat(101), None, OnConflict::Ignore);
    assert!(matches!(
        store.submission_put(long.clone()).await,
        Err(Error::Invalid(_))
    ));
    long.key = "fine".to_owned();
    long.group_id = other.id;
    assert!(matches!(
        store.submission_put(long).await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        store
            .submission_put(put(g.id + other.id + 100, "x", None, OnConflict::Ignore))
            .await,
        Err(Error::Invalid(_))
    ));
    assert_eq!(all_jobs(store).await, jobs_before);
    assert_not_found(store.submission_get(key(g.id, "fine")).await);
}

pub(crate) async fn a_submission_is_cancelled_with_its_job_and_runs_unless_one_is_live(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "sub-cancel").await;
    let made = store
        .submission_put(put(g.id, "nightly", None, OnConflict::Ignore))
        .await
        .unwrap();
    let job_id = made.job.id;
    let claimed = store
        .jobs_claim_due(claim("n1", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 1);
    let run = claimed.runs[0].id;

    // A planned run is live: the cancel is refused and nothing changes.
    let cancel = |with_live_runs| SubmissionCancel {
        key: key(g.id, "nightly"),
        with_live_runs,
    };
    assert!(matches!(
        store.submission_cancel(cancel(false)).await,
        Err(Error::Conflict(_))
    ));
    assert!(store.submission_get(key(g.id, "nightly")).await.is_ok());
    assert_eq!(store.run_get(run).await.unwrap().state, RunState::Planned);

    // Once it ended, the cancel goes through: submission, job and runs are gone.
    store
        .misfire_plain(MarkMisfired {
            node_id: "n1".to_owned(),
            run_ids: vec![run],
            reason: "too late".to_owned(),
            at: NOW + 5,
        })
        .await
        .unwrap();
    let gone = store.submission_cancel(cancel(false)).await.unwrap();
    assert_eq!(gone.job.id, job_id);
    assert_not_found(store.submission_get(key(g.id, "nightly")).await);
    assert_not_found(store.job_get(job_id).await);
    assert_not_found(store.run_get(run).await);
    assert_not_found(store.submission_cancel(cancel(true)).await);

    // With live runs allowed, a planned run goes with it; the key is free again.
    let made = store
        .submission_put(put(g.id, "nightly", None, OnConflict::Ignore))
        .await
        .unwrap();
    let claimed = store
        .jobs_claim_due(claim("n1", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 1);
    store.submission_cancel(cancel(true)).await.unwrap();
    assert_not_found(store.job_get(made.job.id).await);
    assert_not_found(store.run_get(claimed.runs[0].id).await);
}

pub(crate) async fn the_claim_counts_fires_left_down_and_stops_the_job_at_none(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "sub-count").await;
    let made = store
        .submission_put(put(g.id, "thrice", Some(3), OnConflict::Ignore))
        .await
        .unwrap();
    let plain = running_job(store, g.id, "plain", NOW).await;
    // A planner that stops a job with fires left after them, as the admin's does.
    let planner = |job: &Job, now: i64| {
        let mut plan = fixed_rate(1000, now)(job, now);
        if let Some(left) = job.fires_left {
            plan.fires.truncate(usize::try_from(left).unwrap());
            if plan.fires.len() as i64 == left {
                plan.next_fire_at = None;
            }
        }
        plan
    };
    let first = store
        .jobs_claim_due(claim("n1", NOW + 1000, 0, 10), &planner)
        .await
        .unwrap();
    assert_eq!(first.runs.len(), 4, "two fires of each job");
    let job = store.job_get(made.job.id).await.unwrap();
    assert_eq!(job.fires_left, Some(1));
    assert_eq!(job.status, JobStatus::Running);
    assert_eq!(store.job_get(plain.id).await.unwrap().fires_left, None);

    let second = store
        .jobs_claim_due(claim("n1", NOW + 5000, 0, 10), &planner)
        .await
        .unwrap();
    let of_it = second.runs.iter().filter(|r| r.job_id == job.id).count();
    assert_eq!(of_it, 1, "the last fire only");
    let job = store.job_get(made.job.id).await.unwrap();
    assert_eq!(job.fires_left, Some(0));
    assert_eq!(job.status, JobStatus::Stopped);
    assert_eq!(job.next_fire_at, None);
    assert_eq!(all_runs(store, Some(job.id)).await.len(), 3);
}

pub(crate) async fn each_end_of_a_submissions_run_is_kept_until_acknowledged(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "sub-ends").await;
    let other = group(store, "sub-ends-other").await;
    let made = store
        .submission_put(put(g.id, "feed", None, OnConflict::Ignore))
        .await
        .unwrap();
    store
        .submission_put(put(other.id, "elsewhere", None, OnConflict::Ignore))
        .await
        .unwrap();
    let plain = running_job(store, g.id, "not-a-submission", NOW).await;
    // Four fires of each of the three jobs.
    let claimed = store
        .jobs_claim_due(
            claim("n1", NOW + 3000, 0, 10),
            &fixed_rate(1000, NOW + 3000),
        )
        .await
        .unwrap();
    let of = |job: i64| -> Vec<i64> {
        claimed
            .runs
            .iter()
            .filter(|r| r.job_id == job)
            .map(|r| r.id)
            .collect()
    };
    let (mine, plain_runs) = (of(made.job.id), of(plain.id));
    assert_eq!(mine.len(), 4);

    // Each way a run ends: a result, a trigger failure, a misfire, a skip.
    complete(store, mine[0], RunState::Succeeded).await;
    begin_send(store, mine[1]).await;
    store
        .trigger_failed_plain(trigger_failed(mine[1], "n1", NOW + 1))
        .await
        .unwrap()
        .unwrap();
    store
        .misfire_plain(MarkMisfired {
            node_id: "n1".to_owned(),
            run_ids: vec![mine[2]],
            reason: "too late".to_owned(),
            at: NOW + 2,
        })
        .await
        .unwrap();
    store
        .run_skip(RunSkip {
            run_id: mine[3],
            node_id: "n1".to_owned(),
            reason: "stopped".to_owned(),
            at: NOW + 3,
        })
        .await
        .unwrap()
        .unwrap();
    complete(store, plain_runs[0], RunState::Succeeded).await;

    let read = |after: Option<i64>, limit: u64| SubmissionEndsQuery {
        group_id: g.id,
        after,
        limit,
    };
    let ends = store.submission_ends(read(None, 100)).await.unwrap();
    let got: Vec<(i64, RunState)> = ends.iter().map(|e| (e.run_id, e.state)).collect();
    assert_eq!(
        got,
        [
            (mine[0], RunState::Succeeded),
            (mine[1], RunState::Failed),
            (mine[2], RunState::Misfired),
            (mine[3], RunState::Skipped),
        ],
        "one end per run of the submission, in the order written, none of the plain job"
    );
    assert!(ends.iter().all(|e| e.key == "feed" && e.group_id == g.id));
    assert_eq!(ends[0].handle_code, 500);
    assert!(ends.windows(2).all(|w| w[0].id < w[1].id));
    // A reader pages forward by id without acknowledging.
    let page = store
        .submission_ends(read(Some(ends[1].id), 1))
        .await
        .unwrap();
    assert_eq!(page, [ends[2].clone()]);

    // Acknowledged ends go; another group's ack leaves them; repeating an ack is harmless.
    let wrong_group = SubmissionEndsAck {
        group_id: other.id,
        ids: vec![ends[0].id],
    };
    assert_eq!(store.submission_ends_ack(wrong_group).await.unwrap(), 0);
    let ack = SubmissionEndsAck {
        group_id: g.id,
        ids: vec![ends[0].id, ends[2].id],
    };
    assert_eq!(store.submission_ends_ack(ack.clone()).await.unwrap(), 2);
    assert_eq!(store.submission_ends_ack(ack).await.unwrap(), 0);
    let left = store.submission_ends(read(None, 100)).await.unwrap();
    assert_eq!(left, [ends[1].clone(), ends[3].clone()]);
    let theirs = SubmissionEndsQuery {
        group_id: other.id,
        after: None,
        limit: 100,
    };
    assert!(store.submission_ends(theirs).await.unwrap().is_empty());
}

pub(crate) async fn ends_with_a_channel_are_due_for_posting_and_retried(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "sub-post").await;
    let mut hooked = put(g.id, "hooked", None, OnConflict::Ignore);
    hooked.feedback_channel_id = Some(77);
    let hooked = store.submission_put(hooked).await.unwrap();
    assert_eq!(hooked.submission.feedback_channel_id, Some(77));
    store
        .submission_put(put(g.id, "read-only", None, OnConflict::Ignore))
        .await
        .unwrap();
    let claimed = store
        .jobs_claim_due(claim("n1", NOW, 0, 10), &fixed_rate(1000, NOW))
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 2);
    for run in &claimed.runs {
        complete(store, run.id, RunState::Succeeded).await;
    }
    let due = |now| SubmissionEndsDue { now, limit: 100 };
    let posts = store.submission_ends_due(due(NOW)).await.unwrap();
    assert_eq!(posts.len(), 1, "only the one with a channel: {posts:?}");
    let end = &posts[0];
    assert_eq!(
        (end.key.as_str(), end.channel_id, end.attempts),
        ("hooked", Some(77), 0)
    );
    assert!(
        store
            .submission_ends_due(due(NOW - 1))
            .await
            .unwrap()
            .is_empty()
    );

    store
        .submission_end_retry(SubmissionEndRetry {
            id: end.id,
            next_attempt_at: NOW + 500,
            error: "answered 500".to_owned(),
        })
        .await
        .unwrap();
    assert!(
        store
            .submission_ends_due(due(NOW + 499))
            .await
            .unwrap()
            .is_empty()
    );
    let again = store.submission_ends_due(due(NOW + 500)).await.unwrap();
    assert_eq!((again[0].id, again[0].attempts), (end.id, 1));
    // Both stay readable until acknowledged; taken, the posted one is gone from both.
    let all = SubmissionEndsQuery {
        group_id: g.id,
        after: None,
        limit: 100,
    };
    assert_eq!(store.submission_ends(all).await.unwrap().len(), 2);
    let ack = SubmissionEndsAck {
        group_id: g.id,
        ids: vec![end.id],
    };
    assert_eq!(store.submission_ends_ack(ack).await.unwrap(), 1);
    assert!(
        store
            .submission_ends_due(due(NOW + 500))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.submission_ends(all).await.unwrap().len(), 1);
}

pub(crate) async fn a_fire_the_claim_misfires_leaves_a_completion(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "sub-claim-misfire").await;
    let made = store
        .submission_put(put(g.id, "late", None, OnConflict::Ignore))
        .await
        .unwrap();
    let plain = running_job(store, g.id, "plain-late", NOW).await;
    // The first fire of each job too late to send: the claim writes it misfired.
    let late_first = |job: &Job, now: i64| {
        let mut plan = fixed_rate(1000, now)(job, now);
        let first = plan.fires[0].fire_key;
        plan.fires[0] = PlannedFire::misfired(first, TriggerType::FixRate);
        plan
    };
    let claimed = store
        .jobs_claim_due(claim("n1", NOW + 1000, 0, 10), &late_first)
        .await
        .unwrap();
    assert_eq!(claimed.misfired, 2, "{claimed:?}");
    let ends = store
        .submission_ends(SubmissionEndsQuery {
            group_id: g.id,
            after: None,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(
        ends.len(),
        1,
        "the submission's only, not the plain job's: {ends:?}"
    );
    let misfired = all_runs(store, Some(made.job.id))
        .await
        .into_iter()
        .find(|r| r.state == RunState::Misfired)
        .unwrap();
    assert_eq!(
        (
            ends[0].run_id,
            ends[0].state,
            ends[0].scheduled_at,
            ends[0].ended_at
        ),
        (misfired.id, RunState::Misfired, NOW, NOW + 1000)
    );
    assert!(all_runs(store, Some(plain.id)).await.len() == 2);
}
