//! Alarms: queueing, channels, deliveries.

use super::*;

pub(crate) async fn alarms_are_queued_once(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "alarms").await;
    let job = running_job(store, g.id, "alarms", NOW).await;
    let mut expected = Vec::new();
    for state in [
        RunState::Succeeded,
        RunState::Failed,
        RunState::TimedOut,
        RunState::Killed,
        RunState::Lost,
    ] {
        let run = planned(store, job.id, Some("n"), NOW).await;
        complete(store, run.id, state).await;
        if matches!(
            state,
            RunState::Failed | RunState::TimedOut | RunState::Lost
        ) {
            expected.push(run.id);
        }
    }
    // A trigger failure: the run was being sent.
    let failed = planned(store, job.id, Some("n"), NOW).await;
    begin_send(store, failed.id).await;
    store
        .trigger_failed_plain(trigger_failed(failed.id, "n", NOW))
        .await
        .unwrap()
        .expect("trigger failure");
    expected.push(failed.id);
    planned(store, job.id, Some("n"), NOW).await;

    let first = store.runs_queue_alarms(2).await.unwrap();
    let rest = store.runs_queue_alarms(100).await.unwrap();
    assert_eq!(first.len(), 2);
    let queued: Vec<i64> = first.iter().chain(&rest).map(|r| r.id).collect();
    assert_eq!(queued, expected);
    for run in first.iter().chain(&rest) {
        assert_eq!(run.alarm_status, AlarmStatus::Queued);
        assert_eq!(
            store.run_get(run.id).await.unwrap().alarm_status,
            AlarmStatus::Queued
        );
    }
    assert!(store.runs_queue_alarms(100).await.unwrap().is_empty());

    // Two queuers at once never queue the same run.
    for _ in 0..40 {
        let run = planned(store, job.id, Some("n"), NOW).await;
        complete(store, run.id, RunState::Lost).await;
    }
    let stores = [ctx.store.clone(), ctx.connect_again().await];
    let mut tasks = Vec::new();
    for store in &stores {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = store.runs_queue_alarms(3).await.expect("queue alarms");
                if batch.is_empty() {
                    break mine;
                }
                mine.extend(batch.into_iter().map(|r| r.id));
            }
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(seen.insert(id), "run {id} queued twice");
        }
    }
    assert_eq!(seen.len(), 40);
    stores[1].close().await;
}

fn channel_new(name: &str, kind: AlarmKind) -> AlarmChannelNew {
    AlarmChannelNew {
        name: name.to_owned(),
        kind,
        config: format!(r#"{{"url":"http://hooks.test/{name}"}}"#),
        enabled: true,
        now: NOW,
    }
}

/// Channel `a` (a webhook) and channel `b` (Slack).
async fn channels_a_and_b(store: &dyn Store) -> (AlarmChannel, AlarmChannel) {
    let a = store
        .alarm_channel_create(channel_new("a", AlarmKind::Webhook))
        .await
        .unwrap();
    let b = store
        .alarm_channel_create(channel_new("b", AlarmKind::Slack))
        .await
        .unwrap();
    (a, b)
}

/// A new job of group `g` alarming on `channels`.
async fn job_alarming_on(store: &dyn Store, g: &Group, key: &str, channels: &str) -> Job {
    let mut new = job_new(g.id, key);
    new.spec.alarm_channels = channels.to_owned();
    store.job_create(new).await.expect("create job")
}

/// A job alarming on `channels` with one failed run queued for an alarm.
async fn failed_run_queued(store: &dyn Store, g: &Group, key: &str, channels: &str) -> Run {
    let job = job_alarming_on(store, g, key, channels).await;
    let run = planned(store, job.id, Some("n"), NOW).await;
    complete(store, run.id, RunState::Failed).await;
    let queued = store.runs_queue_alarms(1000).await.unwrap();
    assert!(queued.iter().any(|r| r.id == run.id));
    run
}

pub(crate) async fn alarm_channel_crud(ctx: Ctx) {
    let store = &*ctx.store;
    let hook = store
        .alarm_channel_create(channel_new("ops-hook", AlarmKind::Webhook))
        .await
        .unwrap();
    assert_eq!(hook.name, "ops-hook");
    assert_eq!(hook.kind, AlarmKind::Webhook);
    assert!(hook.enabled);
    assert_eq!(store.alarm_channel_get(hook.id).await.unwrap(), hook);
    let mut mail = channel_new("ops-mail", AlarmKind::Email);
    mail.enabled = false;
    let mail = store.alarm_channel_create(mail).await.unwrap();
    assert!(!mail.enabled);
    assert_eq!(
        store.alarm_channels_list().await.unwrap(),
        vec![hook.clone(), mail.clone()]
    );

    assert_conflict(
        store
            .alarm_channel_create(channel_new("ops-hook", AlarmKind::Slack))
            .await,
    );
    assert_invalid(
        store
            .alarm_channel_create(channel_new("a,b", AlarmKind::Slack))
            .await,
    );
    assert_invalid(
        store
            .alarm_channel_create(channel_new(" ", AlarmKind::Slack))
            .await,
    );
    assert_invalid(
        store
            .alarm_channel_create(channel_new(&"x".repeat(65), AlarmKind::Slack))
            .await,
    );

    let update = |id: i64, name: &str| AlarmChannelUpdate {
        id,
        name: name.to_owned(),
        kind: AlarmKind::DingTalk,
        config: "{}".to_owned(),
        enabled: false,
        now: NOW + 1,
    };
    let renamed = store
        .alarm_channel_update(update(hook.id, "ops-ding"))
        .await
        .unwrap();
    assert_eq!(
        (renamed.name.as_str(), renamed.kind, renamed.enabled),
        ("ops-ding", AlarmKind::DingTalk, false)
    );
    assert_eq!((renamed.created_at, renamed.updated_at), (NOW, NOW + 1));
    assert_conflict(
        store
            .alarm_channel_update(update(hook.id, "ops-mail"))
            .await,
    );
    assert_not_found(store.alarm_channel_update(update(9999, "x")).await);

    // A channel a job lists can be neither renamed nor deleted.
    let g = group(store, "alarming").await;
    let mut job = job_new(g.id, "alarming");
    job.spec.alarm_channels = "other,ops-ding".to_owned();
    let job = store.job_create(job).await.unwrap();
    assert_conflict(store.alarm_channel_update(update(hook.id, "renamed")).await);
    assert_conflict(store.alarm_channel_delete(hook.id, NOW).await);
    // A name that only contains another one is not a use of it.
    let ding = store
        .alarm_channel_create(channel_new("ding", AlarmKind::DingTalk))
        .await
        .unwrap();
    store.alarm_channel_delete(ding.id, NOW).await.unwrap();
    store.job_delete(job.id).await.unwrap();
    store.alarm_channel_delete(hook.id, NOW).await.unwrap();
    assert_not_found(store.alarm_channel_get(hook.id).await);
    assert_not_found(store.alarm_channel_delete(hook.id, NOW).await);
    assert_eq!(store.alarm_channels_list().await.unwrap(), vec![mail]);
}

pub(crate) async fn alarm_deliveries_are_queued_once_per_run_and_channel(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "deliveries").await;
    let (a, b) = channels_a_and_b(store).await;
    let run = failed_run_queued(store, &g, "two-channels", "a,b").await;
    let quiet = failed_run_queued(store, &g, "no-channel", "").await;
    let awaiting: Vec<i64> = store
        .runs_awaiting_alarm(100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(awaiting, [run.id, quiet.id]);

    let queue = AlarmDeliveriesQueue {
        runs: vec![
            RunAlarm {
                run_id: run.id,
                channel_ids: vec![a.id, b.id, a.id, 424_242],
            },
            RunAlarm {
                run_id: quiet.id,
                channel_ids: Vec::new(),
            },
        ],
        now: NOW,
        group_window_ms: 0,
    };
    assert_eq!(
        store.alarm_deliveries_queue(queue.clone()).await.unwrap(),
        AlarmDeliveriesQueued {
            deliveries: 2,
            joined: 0
        }
    );
    // Queued again (a second admin, a retried round): nothing new.
    assert_eq!(
        store.alarm_deliveries_queue(queue).await.unwrap(),
        AlarmDeliveriesQueued::default()
    );
    assert!(store.runs_awaiting_alarm(100).await.unwrap().is_empty());
    assert_eq!(
        store.run_get(run.id).await.unwrap().alarm_status,
        AlarmStatus::Delivering
    );
    assert_eq!(
        store.run_get(quiet.id).await.unwrap().alarm_status,
        AlarmStatus::NotNeeded
    );

    let page = store
        .alarm_deliveries_list(DeliveryFilter {
            run_id: Some(run.id),
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 2);
    let mut names: Vec<(&str, AlarmKind)> = page
        .items
        .iter()
        .map(|d| (d.channel_name.as_str(), d.kind))
        .collect();
    names.sort_by_key(|(n, _)| *n);
    assert_eq!(names, [("a", AlarmKind::Webhook), ("b", AlarmKind::Slack)]);
    for d in &page.items {
        assert_eq!(
            (
                d.state,
                d.attempts,
                d.next_attempt_at,
                d.claimed_by.as_deref()
            ),
            (DeliveryState::Pending, 0, NOW, None)
        );
        assert_eq!(store.alarm_delivery_get(d.id).await.unwrap(), *d);
    }
    let none = store
        .alarm_deliveries_list(DeliveryFilter {
            state: Some(DeliveryState::Sent),
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(none.total, 0);

    // Deleting the job takes its deliveries along.
    store.job_delete(run.job_id).await.unwrap();
    let gone = store
        .alarm_deliveries_list(DeliveryFilter::default())
        .await
        .unwrap();
    assert_eq!(gone.total, 0);
}

/// Node `node`'s outcome of delivery `id`.
fn finish(id: i64, node: &str, outcome: DeliveryOutcome, now: i64) -> DeliveryFinish {
    DeliveryFinish {
        id,
        node_id: node.to_owned(),
        outcome,
        now,
    }
}

fn claim_of(node: &str, now: i64, limit: u32) -> DeliveryClaim {
    DeliveryClaim {
        node_id: node.to_owned(),
        now,
        hold_ms: 10_000,
        limit,
    }
}

pub(crate) async fn alarm_delivery_claim_retry_and_finish(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "claims").await;
    let hook = store
        .alarm_channel_create(channel_new("hook", AlarmKind::Webhook))
        .await
        .unwrap();
    let mail = store
        .alarm_channel_create(channel_new("mail", AlarmKind::Email))
        .await
        .unwrap();
    let run = failed_run_queued(store, &g, "claims", "hook,mail").await;
    store
        .alarm_deliveries_queue(AlarmDeliveriesQueue {
            runs: vec![RunAlarm {
                run_id: run.id,
                channel_ids: vec![hook.id, mail.id],
            }],
            now: NOW,
            group_window_ms: 0,
        })
        .await
        .unwrap();

    // Nothing is due before its instant.
    assert!(
        store
            .alarm_deliveries_claim_due(claim_of("n1", NOW - 1, 10))
            .await
            .unwrap()
            .is_empty()
    );
    let claimed = store
        .alarm_deliveries_claim_due(claim_of("n1", NOW, 10))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    for d in &claimed {
        assert_eq!(d.claimed_by.as_deref(), Some("n1"));
        assert_eq!(d.claimed_until, Some(NOW + 10_000));
    }
    // Held: nobody else gets them until the hold ends; then another node may.
    assert!(
        store
            .alarm_deliveries_claim_due(claim_of("n2", NOW + 9_999, 10))
            .await
            .unwrap()
            .is_empty()
    );
    let taken = store
        .alarm_deliveries_claim_due(claim_of("n2", NOW + 10_000, 1))
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    let (first, second) = if taken[0].id == claimed[0].id {
        (&claimed[0], &claimed[1])
    } else {
        (&claimed[1], &claimed[0])
    };
    // n1 lost `first` to n2: its result is refused.
    assert!(
        !store
            .alarm_delivery_finish(finish(first.id, "n1", DeliveryOutcome::Sent, NOW + 10_001))
            .await
            .unwrap()
    );
    // A retry puts it back with its error, due later.
    let retry = DeliveryOutcome::Retry {
        error: "http status 500".to_owned(),
        next_attempt_at: NOW + 20_000,
    };
    assert!(
        store
            .alarm_delivery_finish(finish(first.id, "n2", retry, NOW + 10_001))
            .await
            .unwrap()
    );
    let d = store.alarm_delivery_get(first.id).await.unwrap();
    assert_eq!(
        (
            d.state,
            d.attempts,
            d.next_attempt_at,
            d.claimed_by.as_deref()
        ),
        (DeliveryState::Pending, 1, NOW + 20_000, None)
    );
    assert_eq!(d.last_error.as_deref(), Some("http status 500"));
    // Not yet due again; `second`, whose hold by n1 ran out, is taken over instead.
    let ids = |v: Vec<AlarmDelivery>| v.into_iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .alarm_deliveries_claim_due(claim_of("n2", NOW + 19_999, 10))
            .await
            .unwrap()),
        [second.id]
    );
    assert_eq!(
        ids(store
            .alarm_deliveries_claim_due(claim_of("n2", NOW + 20_000, 10))
            .await
            .unwrap()),
        [first.id]
    );
    assert!(
        store
            .alarm_delivery_finish(finish(first.id, "n2", DeliveryOutcome::Sent, NOW + 20_001))
            .await
            .unwrap()
    );
    let d = store.alarm_delivery_get(first.id).await.unwrap();
    assert_eq!(
        (d.state, d.attempts, d.sent_at),
        (DeliveryState::Sent, 2, Some(NOW + 20_001))
    );
    assert_eq!(
        store.run_get(run.id).await.unwrap().alarm_status,
        AlarmStatus::Sent
    );
    // A final delivery never changes again.
    assert!(
        !store
            .alarm_delivery_finish(finish(first.id, "n2", DeliveryOutcome::Sent, NOW + 20_002))
            .await
            .unwrap()
    );

    // The other one fails for good: the run shows the failure, and keeps showing it.
    let failed = DeliveryOutcome::Failed {
        error: "smtp: connection refused".to_owned(),
    };
    assert!(
        store
            .alarm_delivery_finish(finish(second.id, "n2", failed, NOW + 20_003))
            .await
            .unwrap()
    );
    let d = store.alarm_delivery_get(second.id).await.unwrap();
    assert_eq!((d.state, d.attempts), (DeliveryState::Failed, 1));
    assert_eq!(d.last_error.as_deref(), Some("smtp: connection refused"));
    assert_eq!(
        store.run_get(run.id).await.unwrap().alarm_status,
        AlarmStatus::SendFailed
    );
    let failed = store
        .alarm_deliveries_list(DeliveryFilter {
            state: Some(DeliveryState::Failed),
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.items.len(), 1);

    // Deleting a channel fails its pending deliveries and keeps the history.
    let spare = store
        .alarm_channel_create(channel_new("spare", AlarmKind::Slack))
        .await
        .unwrap();
    let run2 = failed_run_queued(store, &g, "claims-2", "").await;
    store
        .alarm_deliveries_queue(AlarmDeliveriesQueue {
            runs: vec![RunAlarm {
                run_id: run2.id,
                channel_ids: vec![spare.id],
            }],
            now: NOW,
            group_window_ms: 0,
        })
        .await
        .unwrap();
    store.alarm_channel_delete(spare.id, NOW + 1).await.unwrap();
    let page = store
        .alarm_deliveries_list(DeliveryFilter {
            run_id: Some(run2.id),
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].state, DeliveryState::Failed);
    assert_eq!(page.items[0].channel_name, "spare");
}

pub(crate) async fn alarm_delivery_claimers_never_share_a_delivery(ctx: Ctx) {
    let store = &*ctx.store;
    let g = group(store, "racing").await;
    let hook = store
        .alarm_channel_create(channel_new("race", AlarmKind::Webhook))
        .await
        .unwrap();
    let job = job_alarming_on(store, &g, "racing", "race").await;
    let mut runs = Vec::new();
    for _ in 0..60 {
        let run = planned(store, job.id, Some("n"), NOW).await;
        complete(store, run.id, RunState::Lost).await;
        runs.push(RunAlarm {
            run_id: run.id,
            channel_ids: vec![hook.id],
        });
    }
    store.runs_queue_alarms(1000).await.unwrap();
    let written = store
        .alarm_deliveries_queue(AlarmDeliveriesQueue {
            runs,
            now: NOW,
            group_window_ms: 0,
        })
        .await
        .unwrap();
    assert_eq!(written.deliveries, 60);

    let stores = [ctx.store.clone(), ctx.connect_again().await];
    let mut tasks = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("claimer-{i}");
            let mut mine = Vec::new();
            loop {
                let batch = store
                    .alarm_deliveries_claim_due(claim_of(&node, NOW, 3))
                    .await
                    .expect("claim deliveries");
                if batch.is_empty() {
                    break mine;
                }
                for d in &batch {
                    assert_eq!(d.claimed_by.as_deref(), Some(node.as_str()));
                }
                mine.extend(batch.into_iter().map(|d| d.id));
            }
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(seen.insert(id), "delivery {id} claimed twice");
        }
    }
    assert_eq!(seen.len(), 60);
    stores[1].close().await;
}

/// A failed run of `job` queued for its alarm.
async fn queued_failure(store: &dyn Store, job: i64) -> Run {
    let run = planned(store, job, Some("n"), NOW).await;
    complete(store, run.id, RunState::Failed).await;
    let queued = store.runs_queue_alarms(1000).await.unwrap();
    assert!(queued.iter().any(|r| r.id == run.id));
    run
}

async fn alarm_status(store: &dyn Store, run: &Run) -> AlarmStatus {
    store.run_get(run.id).await.unwrap().alarm_status
}

/// The deliveries of `job`, oldest first, as (run, channel, due_at, grouped runs, last run).
async fn job_deliveries(store: &dyn Store, job: i64) -> Vec<(i64, i64, i64, i32, Option<i64>)> {
    let mut page = store
        .alarm_deliveries_list(DeliveryFilter {
            job_id: Some(job),
            ..DeliveryFilter::default()
        })
        .await
        .unwrap()
        .items;
    page.sort_by_key(|d| d.id);
    page.iter()
        .map(|d| {
            assert_eq!(d.job_id, job);
            (
                d.run_id,
                d.channel_id,
                d.due_at,
                d.grouped_runs,
                d.last_run_id,
            )
        })
        .collect()
}

pub(crate) async fn alarms_of_a_job_are_grouped_per_channel_a_window_apart(ctx: Ctx) {
    const WINDOW: i64 = 60_000;
    let store = &*ctx.store;
    let g = group(store, "grouped").await;
    let (a, b) = channels_a_and_b(store).await;
    let flaky = job_alarming_on(store, &g, "flaky", "a,b").await;
    let other = job_alarming_on(store, &g, "other", "a").await;
    let queue = |runs: &[(&Run, &[i64])], now, group_window_ms| AlarmDeliveriesQueue {
        runs: runs
            .iter()
            .map(|(run, channels)| RunAlarm {
                run_id: run.id,
                channel_ids: channels.to_vec(),
            })
            .collect(),
        now,
        group_window_ms,
    };
    let both = [a.id, b.id];

    // The first failure alarms at once on both channels.
    let r1 = queued_failure(store, flaky.id).await;
    let done = store
        .alarm_deliveries_queue(queue(&[(&r1, &both)], NOW, WINDOW))
        .await
        .unwrap();
    assert_eq!((done.deliveries, done.joined), (2, 0));
    assert_eq!(alarm_status(store, &r1).await, AlarmStatus::Delivering);

    // The next one, before those are sent, joins them; another job's is its own.
    let r2 = queued_failure(store, flaky.id).await;
    let o1 = queued_failure(store, other.id).await;
    let done = store
        .alarm_deliveries_queue(queue(&[(&r2, &both), (&o1, &[a.id])], NOW + 10, WINDOW))
        .await
        .unwrap();
    assert_eq!((done.deliveries, done.joined), (1, 1));
    assert_eq!(alarm_status(store, &r2).await, AlarmStatus::Grouped);
    assert_eq!(alarm_status(store, &o1).await, AlarmStatus::Delivering);
    assert_eq!(
        job_deliveries(store, flaky.id).await,
        [
            (r1.id, a.id, NOW, 1, Some(r2.id)),
            (r1.id, b.id, NOW, 1, Some(r2.id))
        ]
    );
    assert_eq!(
        job_deliveries(store, other.id).await,
        [(o1.id, a.id, NOW + 10, 0, None)]
    );

    // Once they are taken (one sent, one still sending), the next failure waits a window
    // from the first, and the one after it joins that.
    let claimed = store
        .alarm_deliveries_claim_due(claim_of("n1", NOW + 20, 10))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    let on_a = claimed
        .iter()
        .find(|d| d.run_id == r1.id && d.channel_id == a.id)
        .unwrap();
    assert!(
        store
            .alarm_delivery_finish(finish(on_a.id, "n1", DeliveryOutcome::Sent, NOW + 25))
            .await
            .unwrap()
    );
    let r3 = queued_failure(store, flaky.id).await;
    let r4 = queued_failure(store, flaky.id).await;
    store
        .alarm_deliveries_queue(queue(&[(&r3, &both)], NOW + 30, WINDOW))
        .await
        .unwrap();
    let done = store
        .alarm_deliveries_queue(queue(&[(&r4, &both)], NOW + 40, WINDOW))
        .await
        .unwrap();
    assert_eq!((done.deliveries, done.joined), (0, 1));
    assert_eq!(alarm_status(store, &r3).await, AlarmStatus::Delivering);
    assert_eq!(alarm_status(store, &r4).await, AlarmStatus::Grouped);
    assert_eq!(
        job_deliveries(store, flaky.id).await[2..],
        [
            (r3.id, a.id, NOW + WINDOW, 1, Some(r4.id)),
            (r3.id, b.id, NOW + WINDOW, 1, Some(r4.id))
        ]
    );
    for d in claimed.iter().filter(|d| d.id != on_a.id) {
        let sent = finish(d.id, "n1", DeliveryOutcome::Sent, NOW + 50);
        assert!(store.alarm_delivery_finish(sent).await.unwrap());
    }
    assert!(
        store
            .alarm_deliveries_claim_due(claim_of("n1", NOW + WINDOW - 1, 10))
            .await
            .unwrap()
            .is_empty()
    );
    let later = store
        .alarm_deliveries_claim_due(claim_of("n1", NOW + WINDOW, 10))
        .await
        .unwrap();
    let mut runs: Vec<(i64, i32)> = later.iter().map(|d| (d.run_id, d.grouped_runs)).collect();
    runs.sort_unstable();
    assert_eq!(runs, [(r3.id, 1), (r3.id, 1)]);
    for d in &later {
        let sent = finish(d.id, "n1", DeliveryOutcome::Sent, NOW + WINDOW + 1);
        assert!(store.alarm_delivery_finish(sent).await.unwrap());
    }
    // The carrier's run moves with its deliveries; the carried one stays grouped.
    assert_eq!(alarm_status(store, &r3).await, AlarmStatus::Sent);
    assert_eq!(alarm_status(store, &r4).await, AlarmStatus::Grouped);

    // A window of 0: every run its own alarm at once, even beside one not yet sent.
    let r5 = queued_failure(store, flaky.id).await;
    let r6 = queued_failure(store, flaky.id).await;
    for (run, at) in [(&r5, NOW + WINDOW + 5), (&r6, NOW + WINDOW + 6)] {
        let done = store
            .alarm_deliveries_queue(queue(&[(run, &[a.id])], at, 0))
            .await
            .unwrap();
        assert_eq!((done.deliveries, done.joined), (1, 0));
        assert_eq!(alarm_status(store, run).await, AlarmStatus::Delivering);
    }
    assert_eq!(
        job_deliveries(store, flaky.id).await[4..],
        [
            (r5.id, a.id, NOW + WINDOW + 5, 0, None),
            (r6.id, a.id, NOW + WINDOW + 6, 0, None)
        ]
    );

    // A run already queued is left alone; a negative window is refused and changes nothing.
    let again = store
        .alarm_deliveries_queue(queue(&[(&r2, &both)], NOW + WINDOW + 7, WINDOW))
        .await
        .unwrap();
    assert_eq!(again, AlarmDeliveriesQueued::default());
    let r7 = queued_failure(store, flaky.id).await;
    assert_invalid(
        store
            .alarm_deliveries_queue(queue(&[(&r7, &both)], NOW + WINDOW + 8, -1))
            .await,
    );
    assert_eq!(alarm_status(store, &r7).await, AlarmStatus::Queued);
    assert_eq!(job_deliveries(store, flaky.id).await.len(), 6);
}
