//! `GET /schedule/heatmap` through `service_router` one request at a time (answers held to the
//! OpenAPI document): the running jobs' fires per bucket and group in their own time zones, DST
//! days included, the peaks with the jobs in them, the group filter, the defaults, every role
//! reading it, and bad input refused with its field while nothing changes.

use axum::http::Method;
use serde_json::{Value, json};

use crate::api::{Api, BUILTIN, Harness, assert_field_error};

fn ms(rfc3339: &str) -> i64 {
    rfc3339.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

async fn job(h: &Harness, group: i64, key: &str, kind: &str, conf: &str, tz: &str, start: bool) {
    h.call(
        Method::POST,
        "/jobs",
        "/jobs",
        BUILTIN,
        Some(json!({
            "key": key, "group_id": group, "description": format!("the {key} job"),
            "schedule_type": kind, "schedule_conf": conf, "time_zone": tz, "handler": "demo",
            "start": start,
        })),
    )
    .await
    .ok();
}

async fn heatmap(h: &Harness, token: &str, query: &str) -> Value {
    h.get(
        "/schedule/heatmap",
        &format!("/schedule/heatmap{query}"),
        token,
    )
    .await
    .ok()
}

/// The buckets with fires, as (index, count).
fn nonzero(counts: &Value) -> Vec<(usize, u64)> {
    counts
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, n.as_u64()?)).filter(|(_, n)| *n > 0))
        .collect()
}

/// Two groups: nightly jobs in UTC, Berlin and New York, a job every second, and a stopped
/// job that must not count.
async fn two_groups(h: &Harness) -> (i64, i64) {
    let (a, b) = (h.group("heat-a").await, h.group("heat-b").await);
    job(h, a, "nightly-utc", "CRON", "0 0 0 * * ?", "UTC", true).await;
    job(
        h,
        a,
        "nightly-berlin",
        "CRON",
        "0 30 2 * * ?",
        "Europe/Berlin",
        true,
    )
    .await;
    job(h, b, "every-second", "FIX_RATE", "1s", "UTC", true).await;
    job(
        h,
        b,
        "nightly-ny",
        "CRON",
        "0 30 1 * * ?",
        "America/New_York",
        true,
    )
    .await;
    job(h, b, "stopped", "CRON", "0 0 0 * * ?", "UTC", false).await;
    (a, b)
}

#[tokio::test]
async fn heatmap_counts_running_jobs_by_group_in_their_own_zones() {
    let h = Harness::start().await;
    let (a, b) = two_groups(&h).await;

    // 28 March 2027: Berlin springs forward at 01:00Z, so its 02:30 fires at 03:00 CEST =
    // 01:00Z; New York is on EDT already, its 01:30 is 05:30Z. Minutes by default.
    let from = ms("2027-03-28T00:00:00Z");
    let to = from + 86_400_000;
    let map = heatmap(&h, BUILTIN, &format!("?from={from}&to={to}")).await;
    assert_eq!(
        (&map["from"], &map["to"], &map["bucket_ms"], &map["buckets"]),
        (&json!(from), &json!(to), &json!(60_000), &json!(1440))
    );
    assert_eq!(map["jobs"], 4, "the stopped job is not counted");
    assert_eq!(map["fires"], 86_403);
    assert_eq!(map["capped"], json!([]));
    let groups = map["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(
        (
            &groups[0]["group_id"],
            &groups[0]["app_name"],
            &groups[0]["fires"]
        ),
        (&json!(a), &json!("heat-a"), &json!(2))
    );
    assert_eq!(nonzero(&groups[0]["counts"]), vec![(0, 1), (60, 1)]);
    assert_eq!(
        (&groups[1]["group_id"], &groups[1]["fires"]),
        (&json!(b), &json!(86_401))
    );
    let counts = groups[1]["counts"].as_array().unwrap();
    assert!(counts.iter().all(|n| n == 60 || n == 61), "{counts:?}");
    assert_eq!(counts[330], 61, "05:30Z");
    // Three minutes with 61: the earliest first; the jobs colliding in them named.
    let peaks: Vec<(i64, u64)> = map["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                (p["start"].as_i64().unwrap() - from) / 60_000,
                p["fires"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(peaks[..4], [(0, 61), (60, 61), (330, 61), (1, 60)]);
    let at_one = &map["peaks"][1];
    let names: Vec<(&str, u64)> = at_one["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["key"].as_str().unwrap(), j["fires"].as_u64().unwrap()))
        .collect();
    assert_eq!(names, vec![("every-second", 60), ("nightly-berlin", 1)]);
    assert_eq!(
        at_one["jobs"][1]["first_fire"],
        ms("2027-03-28T03:00:00+02:00")
    );
    assert_eq!(at_one["jobs"][1]["description"], "the nightly-berlin job");

    // New York falls back on 7 November 2027: its day has 25 hours, and 01:30 fires once,
    // at 01:30 EDT (05:30Z), in the second hour.
    let from = ms("2027-11-07T00:00:00-04:00");
    let to = ms("2027-11-08T00:00:00-05:00");
    let map = heatmap(
        &h,
        BUILTIN,
        &format!("?from={from}&to={to}&bucket=1h&group=heat-b"),
    )
    .await;
    assert_eq!((&map["buckets"], &map["jobs"]), (&json!(25), &json!(2)));
    let groups = map["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "only the group asked for");
    let mut expected = vec![3600u64; 25];
    expected[1] += 1;
    assert_eq!(groups[0]["counts"], json!(expected));
    assert_eq!(map["totals"], json!(expected));
    h.stop().await;
}

#[tokio::test]
async fn every_role_reads_the_heatmap_and_it_defaults_to_a_day_of_minutes_from_now() {
    let h = Harness::start().await;
    two_groups(&h).await;
    let (_, viewer) = h.user_with_token("vic", "viewer", &[]).await;
    let minute = |ms: i64| ms - ms % 60_000;
    let before = minute(h.service().now_ms());
    let map = heatmap(&h, &viewer, "").await;
    let after = minute(h.service().now_ms());
    let from = map["from"].as_i64().unwrap();
    assert!(
        (before..=after).contains(&from),
        "from the current minute: {from}"
    );
    assert_eq!(map["to"].as_i64().unwrap() - from, 86_400_000);
    assert_eq!(map["bucket_ms"], 60_000);
    assert_eq!(map["jobs"], 4);
    // Any day holds every nightly job once and a job every second 86,400 times.
    assert_eq!(map["fires"], 86_403);
    h.stop().await;
}

#[tokio::test]
async fn bad_heatmap_input_is_refused_with_its_field_and_changes_nothing() {
    let h = Harness::start().await;
    two_groups(&h).await;
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();
    let from = ms("2027-03-28T00:00:00Z");
    let week = 7 * 86_400_000;
    let cases = [
        (format!("?from={from}&to={}", from - 1), "to"),
        (format!("?from={from}&to={from}"), "to"),
        (format!("?from={from}&to={}", from + week + 1), "to"),
        (format!("?from={}&to={}", i64::MIN, i64::MAX), "to"),
        ("?bucket=90s".to_owned(), "bucket"),
        ("?bucket=60".to_owned(), "bucket"),
        ("?bucket=0m".to_owned(), "bucket"),
        ("?bucket=8d".to_owned(), "bucket"),
        ("?group=no-such-app".to_owned(), "group"),
    ];
    for (query, field) in &cases {
        let a = h
            .get(
                "/schedule/heatmap",
                &format!("/schedule/heatmap{query}"),
                BUILTIN,
            )
            .await;
        assert_field_error(&a, field);
        assert!(
            a.body["message"].as_str().unwrap().starts_with(field),
            "{query}: {a:?}"
        );
    }
    // Not numbers, or a parameter it does not take: the query's own error.
    for query in ["?from=today", "?to=1.5", "?size=10"] {
        h.get(
            "/schedule/heatmap",
            &format!("/schedule/heatmap{query}"),
            BUILTIN,
        )
        .await
        .refused(400, "invalid_input");
    }
    assert_eq!(h.job_count().await, jobs);
    assert_eq!(h.audit_total().await, audit);
    assert_eq!(h.pipeline.take(), []);
    h.stop().await;
}

#[tokio::test]
async fn the_console_page_draws_the_heatmap_and_refuses_bad_input_with_a_message() {
    let h = Harness::start().await;
    two_groups(&h).await;
    let (cookie, _) = h.console().await;
    let page = h
        .page(
            "/schedule?from=2027-06-01T00:00&hours=24&bucket=1m",
            &cookie,
        )
        .await;
    assert_eq!(page.status(), 200);
    let html = page.text();
    assert!(html.contains("<svg class=\"chart heat\""), "{html}");
    assert!(html.contains("id=\"heatmap-fires\">86403<"), "{html}");
    assert!(html.contains("id=\"peaks-table\""), "{html}");
    assert!(html.contains(">every-second</a>"), "{html}");
    assert!(html.contains("href=\"/schedule?group=heat-a\""), "{html}");
    assert!(!html.contains("id=\"heatmap-error\""));
    let one = h
        .page("/schedule?group=heat-a&hours=6&bucket=15m", &cookie)
        .await
        .text();
    assert!(one.contains("id=\"heatmap-jobs\">2<"), "{one}");

    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();
    for (query, says) in [
        ("bucket=90s", "bucket"),
        ("bucket=60", "bucket"),
        ("hours=500", "Range"),
        ("from=yesterday", "From"),
        ("group=no-such-app", "group: no executor group has app name"),
    ] {
        let page = h.page(&format!("/schedule?{query}"), &cookie).await;
        assert_eq!(page.status(), 400, "{query}");
        let html = page.text();
        let banner = html
            .split("id=\"heatmap-error\">")
            .nth(1)
            .unwrap_or_else(|| panic!("{query}: no error shown: {html}"));
        assert!(banner.starts_with(says), "{query}: {banner}");
        assert!(!html.contains("<svg class=\"chart heat\""), "{query}");
        assert!(html.contains("id=\"heatmap-filter\""), "the form stays");
    }
    assert_eq!(h.job_count().await, jobs);
    assert_eq!(h.audit_total().await, audit);
    assert_eq!(h.pipeline.take(), []);
    h.stop().await;
}
