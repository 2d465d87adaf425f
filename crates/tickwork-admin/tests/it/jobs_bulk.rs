//! `POST /jobs/bulk` and the group commit of `POST /jobs`, through `service_router` one
//! request at a time (answers held to the OpenAPI document): all or nothing, every wrong job
//! by its index and field, keys taken in the batch and on the database, the size limit, the
//! permission of creating each job, one audit record per job; concurrent creates each with
//! their own answer.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, header};
use serde_json::{Value, json};
use tickwork_protocol::api::JOBS_BULK_MAX;
use tower_service::Service as _;

use crate::api::{
    Answer, Api, BUILTIN, Call, HOST, Harness, PEER, Reply, assert_field_error, hold_to_document,
};

fn job(group: i64, key: &str, cron: &str) -> Value {
    json!({
        "key": key, "group_id": group, "schedule_type": "CRON", "schedule_conf": cron,
        "handler": "demo",
    })
}

/// `POST /jobs/bulk` of `jobs` by the holder of `token`.
pub(crate) async fn bulk(h: &Harness, token: &str, jobs: Vec<Value>) -> Answer {
    h.call(
        Method::POST,
        "/jobs/bulk",
        "/jobs/bulk",
        token,
        Some(json!({ "jobs": jobs })),
    )
    .await
}

/// The `errors` of a refused bulk create as (index, field).
fn item_errors(a: &Answer) -> Vec<(u64, String)> {
    a.body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {a:?}"))
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["field"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// What a refused bulk create must leave: the same jobs, the same audit log, and nothing
/// asked of the pipeline.
async fn nothing_changed(h: &Harness, jobs: u64, audit: u64) {
    assert_eq!(h.job_count().await, jobs, "no job was written");
    assert_eq!(h.audit_total().await, audit, "no audit record was written");
    assert_eq!(h.pipeline.take(), []);
}

#[tokio::test]
async fn bulk_create_writes_every_job_with_its_audit_record() {
    let h = Harness::start().await;
    let g = h.group("bulk").await;
    let audit_before = h.audit_total().await;
    h.pipeline.take();
    let mut script = job(g, "b-script", "0 0 3 * * ?");
    script["glue_type"] = "GLUE_SHELL".into();
    script["glue_source"] = "echo bulk".into();
    let mut running = job(g, "b-running", "0 0 4 * * ?");
    running["start"] = true.into();
    let mut unkeyed = job(g, "", "0 0 5 * * ?");
    unkeyed.as_object_mut().unwrap().remove("key");
    let created = bulk(&h, BUILTIN, vec![script, running, unkeyed]).await.ok();
    assert_eq!(created["created"], 3);
    let jobs = created["jobs"].as_array().unwrap();
    assert_eq!(
        (jobs[0]["key"].as_str(), jobs[1]["key"].as_str()),
        (Some("b-script"), Some("b-running"))
    );
    assert!(
        jobs[2]["key"].as_str().unwrap().starts_with("job-"),
        "{created}"
    );
    assert_eq!(
        h.pipeline.take(),
        [Call::Wake],
        "one wake for the started job"
    );

    let id = |n: usize| jobs[n]["id"].as_i64().unwrap();
    let running = h
        .get("/jobs/{id}", &format!("/jobs/{}", id(1)), BUILTIN)
        .await
        .ok();
    assert_eq!(running["status"], "running");
    assert!(running["next_fire_at"].as_i64().is_some());
    let versions = h
        .get(
            "/jobs/{id}/script/versions",
            &format!("/jobs/{}/script/versions", id(0)),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
    assert_eq!(versions[0]["version"], 1);
    assert_eq!(versions[0]["source"], "echo bulk");
    assert_eq!(versions[0]["comment"], "created");

    // One `job.create` record per job, with the job as it was created.
    assert_eq!(h.audit_total().await, audit_before + 3);
    for job in jobs {
        let records = h
            .get(
                "/audit",
                &format!("/audit?target_type=job&target_id={}", job["id"]),
                BUILTIN,
            )
            .await
            .ok();
        assert_eq!(records["total"], 1, "{records}");
        let r = &records["items"][0];
        assert_eq!(
            (r["action"].as_str(), r["actor"].as_str()),
            (Some("job.create"), Some("api-token"))
        );
        assert_eq!(r["after"]["key"], job["key"]);
        assert_eq!(r["after"]["id"], job["id"]);
    }
    h.stop().await;
}

#[tokio::test]
async fn bulk_create_with_wrong_jobs_writes_none_and_names_each() {
    let h = Harness::start().await;
    let g = h.group("bulk").await;
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();
    let mut batch: Vec<Value> = (0..6)
        .map(|i| job(g, &format!("k{i}"), "0 0 3 * * ?"))
        .collect();
    batch[1]["schedule_conf"] = "not a cron".into();
    batch[3]["group_id"] = (g + 100).into();
    batch[4]["retry_count"] = (-1).into();
    let refused = bulk(&h, BUILTIN, batch).await;
    assert_field_error(&refused, "jobs");
    assert_eq!(
        item_errors(&refused),
        [
            (1, "schedule_conf".to_owned()),
            (3, "group_id".to_owned()),
            (4, "retry_count".to_owned())
        ]
    );
    let message = refused.body["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("3 of the jobs are wrong, nothing was written: jobs[1].schedule_conf: "),
        "{message}"
    );
    nothing_changed(&h, jobs, audit).await;

    // A key twice in the batch: the second is wrong.
    let batch = vec![
        job(g, "same", "0 0 3 * * ?"),
        job(g, "other", "0 0 3 * * ?"),
        job(g, " same ", "0 0 4 * * ?"),
    ];
    let refused = bulk(&h, BUILTIN, batch).await;
    assert_field_error(&refused, "jobs");
    assert_eq!(item_errors(&refused), [(2, "key".to_owned())]);
    assert!(
        refused.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("jobs[0]"),
        "{refused:?}"
    );
    nothing_changed(&h, jobs, audit).await;

    // A job that cannot start (NONE) is wrong too.
    let mut never = job(g, "never", "");
    never["schedule_type"] = "NONE".into();
    never["start"] = true.into();
    let refused = bulk(&h, BUILTIN, vec![job(g, "fine", "0 0 3 * * ?"), never]).await;
    assert_eq!(item_errors(&refused), [(1, "schedule_type".to_owned())]);
    nothing_changed(&h, jobs, audit).await;

    // Not a list of jobs, or an unknown field in one.
    let raw = h
        .raw(
            Method::POST,
            "/jobs/bulk",
            "/jobs/bulk",
            Some(BUILTIN),
            Some(r#"{"jobs": {}}"#),
        )
        .await;
    raw.refused(400, "invalid_input");
    let unknown = bulk(&h, BUILTIN, vec![json!({ "group_id": g, "colour": "red" })]).await;
    unknown.refused(400, "invalid_input");
    assert!(
        unknown.body["message"].as_str().unwrap().contains("colour"),
        "{unknown:?}"
    );
    nothing_changed(&h, jobs, audit).await;
    h.stop().await;
}

#[tokio::test]
async fn bulk_create_with_a_key_taken_on_the_database_writes_none() {
    let h = Harness::start().await;
    let g = h.group("bulk").await;
    h.call(
        Method::POST,
        "/jobs",
        "/jobs",
        BUILTIN,
        Some(job(g, "taken", "0 0 3 * * ?")),
    )
    .await
    .ok();
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();
    let batch: Vec<Value> = ["a", "b", "taken", "c"]
        .iter()
        .map(|k| job(g, k, "0 0 3 * * ?"))
        .collect();
    let refused = bulk(&h, BUILTIN, batch).await;
    refused.refused(409, "conflict");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("\"taken\""),
        "{refused:?}"
    );
    nothing_changed(&h, jobs, audit).await;
    h.stop().await;
}

#[tokio::test]
async fn bulk_create_refuses_an_empty_or_oversized_list() {
    let h = Harness::start().await;
    let g = h.group("bulk").await;
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();
    assert_field_error(&bulk(&h, BUILTIN, Vec::new()).await, "jobs");
    let too_many: Vec<Value> = (0..=JOBS_BULK_MAX)
        .map(|i| json!({ "group_id": g, "key": format!("k{i}") }))
        .collect();
    let refused = bulk(&h, BUILTIN, too_many).await;
    assert_field_error(&refused, "jobs");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("10001 jobs"),
        "{refused:?}"
    );
    nothing_changed(&h, jobs, audit).await;
    h.stop().await;
}

#[tokio::test]
async fn bulk_create_needs_the_right_to_create_every_job() {
    let h = Harness::start().await;
    let a = h.group("group-a").await;
    let b = h.group("group-b").await;
    let (_, op) = h.user_with_token("olga", "operator", &[a]).await;
    let (_, viewer) = h.user_with_token("victor", "viewer", &[]).await;
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();

    let mixed = vec![
        job(a, "mine", "0 0 3 * * ?"),
        job(b, "theirs", "0 0 3 * * ?"),
    ];
    let refused = bulk(&h, &op, mixed).await;
    refused.refused(403, "forbidden");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .starts_with("jobs[1]: "),
        "{refused:?}"
    );
    bulk(&h, &viewer, vec![job(a, "v", "0 0 3 * * ?")])
        .await
        .refused(403, "forbidden");
    nothing_changed(&h, jobs, audit).await;

    // A child job in a group the operator may not change.
    let theirs = h.bean_job(b).await;
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    h.pipeline.take();
    let mut parent = job(a, "parent", "0 0 3 * * ?");
    parent["child_job_ids"] = json!([theirs]);
    bulk(&h, &op, vec![job(a, "first", "0 0 3 * * ?"), parent])
        .await
        .refused(403, "forbidden");
    nothing_changed(&h, jobs, audit).await;

    let own = bulk(&h, &op, vec![job(a, "mine", "0 0 3 * * ?")])
        .await
        .ok();
    assert_eq!(own["created"], 1);
    let record = h
        .get("/audit", "/audit?actor=olga&target_type=job", BUILTIN)
        .await
        .ok();
    assert_eq!(record["total"], 1);
    assert_eq!(record["items"][0]["action"], "job.create");
    h.stop().await;
}

/// `POST /jobs` with `body`, sent at once with the others, answered by the document.
async fn concurrent_creates(h: &Harness, bodies: Vec<Value>) -> Vec<Answer> {
    let mut tasks = tokio::task::JoinSet::new();
    for (n, body) in bodies.into_iter().enumerate() {
        let mut router = h.router.clone();
        let mut req = Request::builder()
            .method(Method::POST)
            .uri("/openapi/v1/jobs")
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, format!("Bearer {BUILTIN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        req.extensions_mut()
            .insert(ConnectInfo(PEER.parse::<std::net::SocketAddr>().unwrap()));
        tasks.spawn(async move {
            let resp = router.call(req).await.expect("infallible");
            let (parts, body) = resp.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            (n, Reply::new(parts.status, parts.headers, body.to_vec()))
        });
    }
    let mut answers: Vec<Option<Answer>> = (0..tasks.len()).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (n, reply) = done.expect("request task");
        hold_to_document(&Method::POST, "/openapi/v1/jobs", &reply);
        answers[n] = Some(Answer {
            status: reply.status().as_u16(),
            body: reply.json(),
        });
    }
    answers.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_each_get_their_own_answer() {
    let h = Harness::start().await;
    let g = h.group("commit").await;
    let audit = h.audit_total().await;
    let mut bodies: Vec<Value> = (0..40)
        .map(|i| job(g, &format!("c{i}"), "0 0 3 * * ?"))
        .collect();
    // Two creates of one key among them: whichever is written first wins, the other is a
    // conflict, and the rest are not affected.
    bodies[25]["key"] = "c7".into();
    bodies[30]["schedule_conf"] = "not a cron".into();
    let answers = concurrent_creates(&h, bodies).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_field_error(&answers[30], "schedule_conf");
    let dup: Vec<u16> = [7, 25].iter().map(|&n| statuses[n]).collect();
    assert!(dup == [200, 409] || dup == [409, 200], "{dup:?}");
    for (n, a) in answers.iter().enumerate() {
        if ![7, 25, 30].contains(&n) {
            assert_eq!(a.status, 200, "create {n}: {a:?}");
        }
        if a.status == 409 {
            assert!(
                a.body["message"].as_str().unwrap().contains("\"c7\""),
                "{a:?}"
            );
        }
    }
    assert_eq!(h.job_count().await, 38);
    assert_eq!(
        h.audit_total().await,
        audit + 38,
        "one record per job written"
    );
    let ids: std::collections::HashSet<i64> = answers
        .iter()
        .filter(|a| a.status == 200)
        .map(|a| a.body["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 38);
    h.stop().await;
}

#[tokio::test]
async fn a_job_in_a_group_deleted_since_its_last_job_is_refused_by_field() {
    let h = Harness::start().await;
    let g = h.group("short-lived").await;
    let first = h.bean_job(g).await;
    for (route, path) in [
        ("/jobs/{id}", format!("/jobs/{first}")),
        ("/groups/{id}", format!("/groups/{g}")),
    ] {
        h.call(Method::DELETE, route, &path, BUILTIN, None)
            .await
            .ok();
    }
    // The group is still remembered from the first job: the database refuses the write,
    // and the answer is the one of a group never seen.
    let refused = bulk(&h, BUILTIN, vec![job(g, "late", "0 0 3 * * ?")]).await;
    assert_eq!(item_errors(&refused), [(0, "group_id".to_owned())]);
    let g2 = h.group("short-lived-2").await;
    let second = h.bean_job(g2).await;
    for (route, path) in [
        ("/jobs/{id}", format!("/jobs/{second}")),
        ("/groups/{id}", format!("/groups/{g2}")),
    ] {
        h.call(Method::DELETE, route, &path, BUILTIN, None)
            .await
            .ok();
    }
    let refused = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(job(g2, "late", "0 0 3 * * ?")),
        )
        .await;
    assert_field_error(&refused, "group_id");
    assert_eq!(h.job_count().await, 0);
    h.stop().await;
}
