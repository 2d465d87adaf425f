//! Jobs at scale, through `service_router` one request at a time (answers held to the
//! OpenAPI document): the job list sorted and paged by the store with each job's last run;
//! `POST /jobs/actions` and the console's ticked rows, each job checked as its own call
//! would check it (permission, schedule), an audit record per job done, each refusal
//! reported with its job, a thousand jobs in one request. The jobs page's speed
//! with 500 jobs and 50,000 runs is measured by `tickwork-bench --scenario jobs-page`.

use axum::http::Method;
use serde_json::{Value, json};

use tickwork_store::AuditFilter;

use crate::api::{Api, BUILTIN, Call, Harness};

/// Creates the job `body` describes; its id.
async fn create(h: &Harness, body: Value) -> i64 {
    h.call(Method::POST, "/jobs", "/jobs", BUILTIN, Some(body))
        .await
        .ok()["id"]
        .as_i64()
        .unwrap()
}

/// A BEAN job of `group` described `description`, started on a cron it will not reach in a
/// test (no pipeline runs here anyway); its id.
async fn job(h: &Harness, group: i64, description: &str) -> i64 {
    create(
        h,
        json!({
            "group_id": group, "description": description, "schedule_type": "CRON",
            "schedule_conf": "0 0 3 * * ?", "handler": "demo", "start": true,
        }),
    )
    .await
}

fn ids(page: &Value) -> Vec<i64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect()
}

async fn act(h: &Harness, token: &str, action: &str, ids: &[i64]) -> crate::api::Answer {
    h.call(
        Method::POST,
        "/jobs/actions",
        "/jobs/actions",
        token,
        Some(json!({ "action": action, "ids": ids })),
    )
    .await
}

#[tokio::test]
async fn the_job_list_sorts_pages_and_shows_each_jobs_last_run() {
    let h = Harness::start().await;
    let g = h.group("scale").await;
    let (c, a, b) = (
        job(&h, g, "charlie").await,
        job(&h, g, "Alpha").await,
        job(&h, g, "bravo").await,
    );
    // b ran (its dispatch failed), then was triggered again: the new run is still planned.
    let run = h.trigger(b, json!({})).await.ok()["id"].as_i64().unwrap();
    h.fail_dispatch(run).await;
    h.trigger(b, json!({})).await.ok();

    let list = |q: &'static str| h.get("/jobs", q, BUILTIN);
    let by_name = list("/jobs?sort=description&order=desc&page=1&size=2")
        .await
        .ok();
    assert_eq!(ids(&by_name), [c, b]);
    assert_eq!(
        (by_name["total"].as_u64(), by_name["size"].as_u64()),
        (Some(3), Some(2))
    );
    let second = list("/jobs?sort=description&order=desc&page=2&size=2")
        .await
        .ok();
    assert_eq!(ids(&second), [a]);
    assert_eq!(ids(&list("/jobs?sort=id&order=desc").await.ok()), [b, a, c]);
    // The last run is the one that happened, not the fire waiting to be sent; jobs that
    // never ran come last, whichever the order.
    let by_last = list("/jobs?sort=last_run&order=desc").await.ok();
    assert_eq!(ids(&by_last)[0], b);
    let last = &by_last["items"][0]["last_run"];
    assert_eq!(
        (last["id"].as_i64(), last["state"].as_str()),
        (Some(run), Some("failed"))
    );
    assert_eq!(by_last["items"][1]["last_run"], Value::Null);
    assert_eq!(ids(&list("/jobs?sort=last_run").await.ok())[0], b);

    // A wrong sort or order is an input error naming it.
    for (q, field) in [("/jobs?sort=owner", "sort"), ("/jobs?order=up", "order")] {
        let a = list(q).await;
        a.refused(400, "invalid_input");
        assert_eq!(a.body["field"], field, "{a:?}");
    }
    h.stop().await;
}

#[tokio::test]
async fn job_actions_do_each_job_as_its_own_call_and_report_each_refusal() {
    let h = Harness::start().await;
    let (ga, gb) = (h.group("act-a").await, h.group("act-b").await);
    let (a1, a2, b1) = (
        job(&h, ga, "a1").await,
        job(&h, ga, "a2").await,
        job(&h, gb, "b1").await,
    );
    let (_, op) = h.user_with_token("act-op", "operator", &[ga]).await;
    let (_, viewer) = h.user_with_token("act-viewer", "viewer", &[]).await;
    let audit = h.audit_total().await;

    // The operator stops its group's jobs; another group's job and an unknown one are
    // refused, each with the answer its own call gets, and the others are done anyway.
    let r = act(&h, &op, "stop", &[a1, b1, a2, a1, 999_999]).await.ok();
    assert_eq!(r["action"], "stop");
    assert_eq!(r["done"], json!([a1, a2]), "a repeated id counts once");
    let refused: Vec<(i64, &str)> = r["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["id"].as_i64().unwrap(), x["code"].as_str().unwrap()))
        .collect();
    assert_eq!(refused, [(b1, "forbidden"), (999_999, "not_found")]);
    for (id, status) in [(a1, "stopped"), (a2, "stopped"), (b1, "running")] {
        let j = h
            .get("/jobs/{id}", &format!("/jobs/{id}"), BUILTIN)
            .await
            .ok();
        assert_eq!(j["status"], status, "job {id}");
    }
    assert_eq!(
        h.audit_total().await,
        audit + 2,
        "one job.stop record per job done"
    );

    // A viewer is refused as a whole; bad input changes nothing.
    act(&h, &viewer, "stop", &[b1])
        .await
        .refused(403, "forbidden");
    act(&h, BUILTIN, "stop", &[])
        .await
        .refused(400, "invalid_input");
    act(&h, BUILTIN, "stop", &[0])
        .await
        .refused(400, "invalid_input");
    let too_many: Vec<i64> = (1..=1001).collect();
    act(&h, BUILTIN, "stop", &too_many)
        .await
        .refused(400, "invalid_input");
    h.call(
        Method::POST,
        "/jobs/actions",
        "/jobs/actions",
        BUILTIN,
        Some(json!({ "action": "pause", "ids": [b1] })),
    )
    .await
    .refused(400, "invalid_input");
    assert_eq!(h.audit_total().await, audit + 2);

    // Start, trigger (an API run per job, armed), delete.
    h.pipeline.take();
    let r = act(&h, BUILTIN, "start", &[a1, a2]).await.ok();
    assert_eq!(r["done"], json!([a1, a2]));
    assert_eq!(
        h.pipeline.take(),
        [Call::ForgetJob(a1), Call::ForgetJob(a2), Call::Wake],
        "the pipeline forgets each job started and claims again"
    );
    let records = h
        .store
        .audit_list(AuditFilter {
            target_type: Some("job".to_owned()),
            target_id: Some(a2.to_string()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let started = &records.items[0];
    assert_eq!(started.action, "job.start", "{records:?}");
    let status = |side: &Option<String>| {
        let v: Value = serde_json::from_str(side.as_deref().unwrap()).unwrap();
        v["status"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        (status(&started.before), status(&started.after)),
        ("stopped".to_owned(), "running".to_owned())
    );
    let r = act(&h, BUILTIN, "trigger", &[a1, b1]).await.ok();
    assert_eq!(r["done"], json!([a1, b1]));
    for id in [a1, b1] {
        let runs = h.runs_of(id).await;
        assert_eq!(runs.len(), 1, "job {id}");
        assert_eq!(runs[0]["trigger_type"], "API");
    }
    let r = act(&h, &op, "delete", &[a2, b1]).await.ok();
    assert_eq!(
        (r["done"].clone(), r["refused"][0]["id"].as_i64()),
        (json!([a2]), Some(b1))
    );
    h.get("/jobs/{id}", &format!("/jobs/{a2}"), BUILTIN)
        .await
        .refused(404, "not_found");
    h.stop().await;
}

#[tokio::test]
async fn a_thousand_jobs_are_stopped_and_started_in_one_request() {
    let h = Harness::start().await;
    let g = h.group("many").await;
    let jobs: Vec<Value> = (0..1000)
        .map(|i| {
            json!({
                "group_id": g, "description": format!("job {i}"), "schedule_type": "CRON",
                "schedule_conf": "0 0 3 * * ?", "handler": "demo", "start": true,
            })
        })
        .collect();
    let created = crate::jobs_bulk::bulk(&h, BUILTIN, jobs).await.ok();
    let mut ids: Vec<i64> = created["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    // One job that cannot start: schedule NONE, refused alone when starting.
    let none = create(
        &h,
        json!({
            "group_id": g, "description": "manual only", "schedule_type": "NONE",
            "handler": "demo",
        }),
    )
    .await;
    ids[500] = none;
    let audit = h.audit_total().await;

    let r = act(&h, BUILTIN, "stop", &ids).await.ok();
    assert_eq!(r["done"].as_array().unwrap().len(), 1000);
    assert_eq!(
        h.audit_total().await,
        audit + 1000,
        "a job.stop record per job"
    );
    let running = h.get("/jobs", "/jobs?status=running", BUILTIN).await.ok();
    assert_eq!(running["total"], 1, "only the job left out of the request");

    let r = act(&h, BUILTIN, "start", &ids).await.ok();
    assert_eq!(r["done"].as_array().unwrap().len(), 999);
    assert_eq!(r["refused"][0]["id"].as_i64(), Some(none));
    assert_eq!(r["refused"][0]["code"], "invalid_input");
    assert!(
        r["refused"][0]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be started"),
        "{r}"
    );
    assert_eq!(h.audit_total().await, audit + 1999);
    let running = h.get("/jobs", "/jobs?status=running", BUILTIN).await.ok();
    assert_eq!(running["total"], 1000);
    h.stop().await;
}

#[tokio::test]
async fn the_console_acts_on_ticked_jobs_and_says_what_became_of_each() {
    let h = Harness::start().await;
    let (ga, gb) = (h.group("tick-a").await, h.group("tick-b").await);
    let (a1, a2) = (job(&h, ga, "a1").await, job(&h, ga, "a2").await);
    let b1 = job(&h, gb, "b1").await;
    let back = "/jobs?sort=description&size=20&page=1&done=start&n=9";
    let (status, to) = h
        .console_post(
            "/jobs/bulk",
            &[
                ("_back", back),
                ("action", "stop"),
                ("ids", &a1.to_string()),
                ("ids", &a2.to_string()),
            ],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to, "/jobs?sort=description&size=20&page=1&done=stop&n=2");
    let (cookie, _) = h.console().await;
    let page = h.page(&to, &cookie).await.text();
    assert!(page.contains(r#"id="bulk-done">2 stopped<"#), "{page}");
    assert!(
        page.contains(r#"id="sort-description" href="/jobs?sort=description&#38;order=desc"#),
        "{page}"
    );

    // Bad input changes nothing and says why.
    let (status, to) = h
        .console_post(
            "/jobs/bulk",
            &[
                ("_back", "/jobs"),
                ("action", "bogus"),
                ("ids", &b1.to_string()),
            ],
        )
        .await;
    assert_eq!(status, 303);
    assert!(to.starts_with("/jobs?err=action"), "{to}");
    let (_, to) = h
        .console_post("/jobs/bulk", &[("_back", "/jobs"), ("action", "stop")])
        .await;
    assert!(to.starts_with("/jobs?err=Tick"), "{to}");
    let (_, to) = h
        .console_post(
            "/jobs/bulk",
            &[
                ("_back", "/jobs"),
                ("action", "start"),
                ("ids", &a1.to_string()),
                ("ids", "424242"),
            ],
        )
        .await;
    let err: Vec<(String, String)> =
        serde_urlencoded::from_str(to.split_once('?').unwrap().1).unwrap();
    assert_eq!(err[0].0, "err");
    assert!(
        err[0]
            .1
            .starts_with("1 started, 1 refused: Job 424242 (job 424242 not found)"),
        "{err:?}"
    );
    h.stop().await;
}

/// `POST /jobs/{id}/start` or `/stop` of job `id`.
async fn one(h: &Harness, action: &str, id: i64) -> crate::api::Answer {
    let route = format!("/jobs/{{id}}/{action}");
    h.call(
        Method::POST,
        &route,
        &format!("/jobs/{id}/{action}"),
        BUILTIN,
        None,
    )
    .await
}

/// Starts and stops sent at once share commits (group commit): each request still gets its
/// own answer, each change its own audit record, a job changed twice in one burst ends as its
/// last answer says, and a refused change (no such job, a schedule that cannot start)
/// changes nothing.
#[tokio::test]
async fn starts_and_stops_sent_at_once_each_get_their_answer_and_record() {
    let h = Harness::start().await;
    let g = h.group("burst").await;
    let mut ids = Vec::new();
    for i in 0..100 {
        ids.push(job(&h, g, &format!("job {i}")).await);
    }
    let manual = create(
        &h,
        json!({
            "group_id": g, "description": "manual only", "schedule_type": "NONE",
            "handler": "demo",
        }),
    )
    .await;
    let audit = h.audit_total().await;

    let stops = futures::future::join_all(ids.iter().map(|&id| one(&h, "stop", id))).await;
    for (id, answer) in ids.iter().zip(stops) {
        let job = answer.ok();
        assert_eq!(
            (job["id"].as_i64(), &job["status"]),
            (Some(*id), &json!("stopped"))
        );
    }
    assert_eq!(
        h.audit_total().await,
        audit + 100,
        "a job.stop record per job"
    );

    // Each job started twice at once, and two starts that are refused, in one burst.
    let calls = ids
        .iter()
        .chain(&ids)
        .map(|&id| one(&h, "start", id))
        .chain([one(&h, "start", 999_999), one(&h, "start", manual)]);
    let mut answers = futures::future::join_all(calls).await;
    answers.pop().unwrap().refused(400, "invalid_input");
    answers.pop().unwrap().refused(404, "not_found");
    for answer in answers {
        assert_eq!(answer.ok()["status"], "running");
    }
    assert_eq!(
        h.audit_total().await,
        audit + 300,
        "a job.start record per start"
    );
    let running = h.get("/jobs", "/jobs?status=running", BUILTIN).await.ok();
    assert_eq!(running["total"], 100, "all but the manual job");
    let records = h
        .store
        .audit_list(AuditFilter {
            target_type: Some("job".to_owned()),
            target_id: Some(ids[7].to_string()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let actions: Vec<&str> = records.items.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(
        actions,
        ["job.start", "job.start", "job.stop", "job.create"]
    );
    h.stop().await;
}
