//! The ledger's check of fires: the windows it reads, its cursor, and its alerts with their
//! deliveries.

use tickwork_core::fire_check::{FireAlert, FireAlertKind};

use super::*;

/// Claims six fires of a job (one a second from `NOW`, lateness budget 1 s) on `node-a`.
async fn six_fires(store: &dyn Store, key: &str) -> (Job, Vec<Run>) {
    let g = group(store, key).await;
    let job = running_job(store, g.id, key, NOW).await;
    let claimed = store
        .jobs_claim_due(
            claim("node-a", NOW, 5000, 10),
            &fixed_rate(1000, NOW + 5000),
        )
        .await
        .unwrap();
    assert_eq!(claimed.runs.len(), 6);
    (job, claimed.runs)
}

pub(crate) async fn fires_to_check_reads_what_may_be_late_or_missed(ctx: Ctx) {
    let store = &*ctx.store;
    let (job, runs) = six_fires(store, "checked").await;
    assert_eq!(job.spec.lateness_budget_ms, 1000);
    // 0: on time and done; 1: sent 1.5 s late; 2: misfired; 3: refused at the trigger;
    // 4: still planned; 5: on time. A manual run of the same job is not a fire.
    dispatch(store, runs[0].id, "http://exec:1", NOW + 5).await;
    complete(store, runs[0].id, RunState::Succeeded).await;
    dispatch(store, runs[1].id, "http://exec:1", NOW + 2500).await;
    store
        .misfire_plain(MarkMisfired {
            node_id: "node-a".to_owned(),
            run_ids: vec![runs[2].id],
            reason: "too late".to_owned(),
            at: NOW + 9000,
        })
        .await
        .unwrap();
    begin_send(store, runs[3].id).await;
    store
        .trigger_failed_plain(trigger_failed(runs[3].id, "node-a", NOW + 3001))
        .await
        .unwrap()
        .expect("trigger failure");
    dispatch(store, runs[5].id, "http://exec:1", NOW + 5001).await;
    let manual = planned(store, job.id, Some("node-a"), NOW + 1000).await;

    let all = FireScan {
        after: NOW - 1,
        until: NOW + 5000,
        limit: None,
    };
    let fires = store.fires_to_check(all.clone()).await.unwrap();
    let ids: Vec<i64> = fires.iter().map(|f| f.run_id).collect();
    assert_eq!(ids, [runs[1].id, runs[2].id, runs[3].id, runs[4].id]);
    assert!(!ids.contains(&manual.id));
    let late = &fires[0];
    assert_eq!(
        (
            late.job_id,
            late.fire_key,
            late.scheduled_at,
            late.state,
            late.dispatched_at,
            late.lateness_budget_ms
        ),
        (
            job.id,
            NOW + 1000,
            NOW + 1000,
            RunState::Dispatched,
            Some(NOW + 2500),
            1000
        )
    );
    assert_eq!(
        (fires[2].state, fires[2].trigger_code),
        (RunState::Failed, 500)
    );
    assert_eq!(fires[3].state, RunState::Planned);

    // A limit, and a window that starts after an instant (exclusive) and ends at one.
    let first_two = store
        .fires_to_check(FireScan {
            limit: Some(2),
            ..all.clone()
        })
        .await
        .unwrap();
    assert_eq!(first_two, fires[..2]);
    let middle = store
        .fires_to_check(FireScan {
            after: NOW + 1000,
            until: NOW + 3000,
            limit: None,
        })
        .await
        .unwrap();
    assert_eq!(middle, fires[1..3]);
    assert_invalid(
        store
            .fires_to_check(FireScan {
                after: NOW,
                until: NOW - 1,
                limit: None,
            })
            .await,
    );

    // With no budget the late fire is not read; the ledger's unique key leaves no doubles.
    let mut spec = job.spec.clone();
    spec.lateness_budget_ms = 0;
    store
        .job_update(JobUpdate {
            id: job.id,
            spec,
            expected_version: None,
            next_fire_at: Some(NOW + 6000),
            now: NOW,
        })
        .await
        .unwrap();
    let fires = store.fires_to_check(all.clone()).await.unwrap();
    assert_eq!(fires.len(), 3);
    assert!(store.fires_doubled(all).await.unwrap().is_empty());

    // The next unclaimed instant of running jobs.
    assert_eq!(
        store.jobs_first_unclaimed_fire(NOW).await.unwrap(),
        Some(NOW + 6000)
    );
    assert_eq!(
        store.jobs_first_unclaimed_fire(NOW + 6001).await.unwrap(),
        None
    );
    set_status(store, job.id, JobStatus::Stopped, None, NOW)
        .await
        .expect("the job is there");
    assert_eq!(store.jobs_first_unclaimed_fire(NOW).await.unwrap(), None);
}

fn missed(job_id: i64, run_id: i64, fires: i64, first_at: i64, last_at: i64) -> FireAlert {
    FireAlert {
        job_id,
        kind: FireAlertKind::Missed,
        fires,
        first_at,
        last_at,
        worst_late_ms: 0,
        run_id,
    }
}

fn record(from: i64, until: i64, alerts: Vec<FireAlertNew>, now: i64) -> FireAlertsRecord {
    FireAlertsRecord {
        name: "fire-check".to_owned(),
        from,
        until,
        alerts,
        quiet_since: now - 600_000,
        now,
    }
}

pub(crate) async fn fire_alerts_move_the_cursor_once_and_join_recent_ones(ctx: Ctx) {
    let store = &*ctx.store;
    let (job, runs) = six_fires(store, "alerted").await;
    let open = |start| CursorOpen {
        name: "fire-check".to_owned(),
        start,
        now: NOW,
    };
    assert_eq!(store.fire_cursor_open(open(NOW)).await.unwrap(), NOW);
    assert_eq!(store.fire_cursor_open(open(NOW + 5)).await.unwrap(), NOW);
    let on = store
        .alarm_channel_create(AlarmChannelNew {
            name: "ops".to_owned(),
            kind: AlarmKind::Webhook,
            config: r#"{"url":"http://hooks.test/ops"}"#.to_owned(),
            enabled: true,
            now: NOW,
        })
        .await
        .unwrap();
    let off = store
        .alarm_channel_create(AlarmChannelNew {
            name: "muted".to_owned(),
            kind: AlarmKind::Webhook,
            config: r#"{"url":"http://hooks.test/muted"}"#.to_owned(),
            enabled: false,
            now: NOW,
        })
        .await
        .unwrap();

    let first = missed(job.id, runs[0].id, 2, NOW, NOW + 1000);
    let written = store
        .fire_alerts_record(record(
            NOW,
            NOW + 1000,
            vec![FireAlertNew {
                alert: first.clone(),
                channel_ids: vec![on.id, off.id, on.id, 999_999],
            }],
            NOW + 20_000,
        ))
        .await
        .unwrap()
        .expect("the cursor was at NOW");
    let [FireAlertWritten::New(alert)] = &written[..] else {
        panic!("one new alert: {written:?}");
    };
    assert_eq!((&alert.alert, alert.created_at), (&first, NOW + 20_000));
    assert_eq!(store.fire_alert_get(alert.id).await.unwrap(), *alert);
    // One delivery, on the enabled channel, carrying the alert.
    let deliveries = store
        .alarm_deliveries_list(DeliveryFilter {
            run_id: Some(runs[0].id),
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(deliveries.total, 1);
    let d = &deliveries.items[0];
    assert_eq!(
        (d.alert_id, d.channel_id, d.state),
        (Some(alert.id), on.id, DeliveryState::Pending)
    );
    assert_eq!(store.fire_cursor_open(open(NOW)).await.unwrap(), NOW + 1000);

    // A node that checked the same window too late writes nothing.
    let stale = store
        .fire_alerts_record(record(
            NOW,
            NOW + 1000,
            vec![FireAlertNew {
                alert: first.clone(),
                channel_ids: vec![on.id],
            }],
            NOW + 20_001,
        ))
        .await
        .unwrap();
    assert_eq!(stale, None);

    // The next window's fires of the same job and kind join the recent alert, sending
    // nothing more; another kind is an alert of its own.
    let more = missed(job.id, runs[3].id, 3, NOW + 3000, NOW + 5000);
    let late = FireAlert {
        kind: FireAlertKind::Late,
        worst_late_ms: 1500,
        ..missed(job.id, runs[1].id, 1, NOW + 1000, NOW + 1000)
    };
    let written = store
        .fire_alerts_record(record(
            NOW + 1000,
            NOW + 5000,
            vec![
                FireAlertNew {
                    alert: more.clone(),
                    channel_ids: vec![on.id],
                },
                FireAlertNew {
                    alert: late.clone(),
                    channel_ids: vec![on.id],
                },
            ],
            NOW + 25_000,
        ))
        .await
        .unwrap()
        .expect("the cursor was at NOW + 1000");
    assert!(
        matches!(&written[0], FireAlertWritten::Added { id, .. } if *id == alert.id),
        "{written:?}"
    );
    assert!(
        matches!(&written[1], FireAlertWritten::New(_)),
        "{written:?}"
    );
    let joined = store.fire_alert_get(alert.id).await.unwrap().alert;
    assert_eq!(
        (joined.fires, joined.first_at, joined.last_at, joined.run_id),
        (5, NOW, NOW + 5000, runs[0].id)
    );
    let range = TimeRange::default();
    let totals = store.fire_alerts_totals(range).await.unwrap();
    let totals: Vec<(FireAlertKind, u64, u64)> =
        totals.iter().map(|t| (t.kind, t.alerts, t.fires)).collect();
    assert_eq!(
        totals,
        [(FireAlertKind::Missed, 1, 5), (FireAlertKind::Late, 1, 1)]
    );
    let recent = store.fire_alerts_recent(range, 10).await.unwrap();
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0].alert.kind, FireAlertKind::Late);

    // A failure alarm of the alert's run on the same channel is a delivery of its own, and an
    // alert's delivery never moves the run's alarm status.
    complete(store, runs[0].id, RunState::Failed).await;
    store.runs_queue_alarms(10).await.unwrap();
    let failure = store
        .alarm_deliveries_queue(AlarmDeliveriesQueue {
            runs: vec![RunAlarm {
                run_id: runs[0].id,
                channel_ids: vec![on.id],
            }],
            now: NOW + 30_000,
            group_window_ms: 60_000,
        })
        .await
        .unwrap();
    assert_eq!(failure.deliveries, 1);
    let claimed = store
        .alarm_deliveries_claim_due(DeliveryClaim {
            node_id: "node-a".to_owned(),
            now: NOW + 30_000,
            hold_ms: 1000,
            limit: 10,
        })
        .await
        .unwrap();
    let alert_delivery = claimed
        .iter()
        .find(|d| d.alert_id == Some(alert.id))
        .expect("the alert's delivery is due");
    let before = store.run_get(runs[0].id).await.unwrap().alarm_status;
    assert!(
        store
            .alarm_delivery_finish(DeliveryFinish {
                id: alert_delivery.id,
                node_id: "node-a".to_owned(),
                outcome: DeliveryOutcome::Sent,
                now: NOW + 30_001,
            })
            .await
            .unwrap()
    );
    assert_eq!(
        store.run_get(runs[0].id).await.unwrap().alarm_status,
        before
    );

    // Bad input changes nothing; old alerts go with retention.
    assert_invalid(
        store
            .fire_alerts_record(record(NOW + 5000, NOW + 5000, Vec::new(), NOW + 40_000))
            .await,
    );
    assert_not_found(store.fire_alert_get(999_999).await);
    assert_eq!(store.fire_alerts_purge(NOW + 25_000).await.unwrap(), 1);
    assert_eq!(store.fire_alerts_recent(range, 10).await.unwrap().len(), 1);
}
