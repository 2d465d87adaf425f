//! Bad input gets a clear error and changes nothing: every refused request is followed by a
//! look at groups, jobs and the registry, which must be exactly as before.

use reqwest::Method;
use serde_json::{Value, json};
use tickwork_it::{Api, Cluster, Reply, e2e};

e2e!(bad_input_is_refused_and_changes_nothing);

/// Everything a refused request could have changed, as the API shows it.
async fn snapshot(api: &Api) -> (Value, Value) {
    (api.get("/groups").await, api.get("/jobs?limit=1000").await)
}

/// Asserts an error answer: HTTP `status`, error `code`, and a message naming `mention`.
fn refused(r: &Reply, status: u16, code: &str, mention: &str, what: &str) {
    assert_eq!(r.status, status, "{what}: {:?}", r.body);
    assert_eq!(r.error_code(), code, "{what}: {:?}", r.body);
    assert!(
        r.error_message().contains(mention),
        "{what}: the message should mention {mention:?}: {:?}",
        r.body
    );
}

async fn bad_input_is_refused_and_changes_nothing(mut c: Cluster) {
    let api = c.start_admin().await;
    let group = api.create_group("it-app").await;
    let good = json!({
        "group_id": group, "schedule_type": "CRON", "schedule_conf": "0 0 3 * * ?",
        "handler": "echo",
    });
    let job = api.create_job(good.clone()).await;
    let job_id = job["id"].as_i64().unwrap();
    let before = snapshot(&api).await;

    let with = |field: &str, value: Value| {
        let mut j = good.clone();
        j[field] = value;
        j
    };
    let cases = [
        (
            "invalid cron",
            with("schedule_conf", json!("61 * * * * ?")),
            "schedule_conf",
        ),
        (
            "unknown group",
            with("group_id", json!(987_654)),
            "group_id",
        ),
        (
            "BEAN job without handler",
            with("handler", json!("")),
            "handler",
        ),
        (
            "negative timeout",
            with("timeout_s", json!(-1)),
            "timeout_s",
        ),
        ("unknown field", with("colour", json!("blue")), "colour"),
        (
            "wrong type",
            with("retry_count", json!("three")),
            "invalid type",
        ),
        (
            "unknown enum name",
            with("route_strategy", json!("NEAREST")),
            "NEAREST",
        ),
    ];
    for (what, body, mention) in &cases {
        let r = api.call(Method::POST, "/jobs", Some(body)).await;
        refused(&r, 400, "invalid_input", mention, what);
        // The same definition is no better as an update of an existing job.
        let r = api
            .call(Method::PUT, &format!("/jobs/{job_id}"), Some(body))
            .await;
        refused(&r, 400, "invalid_input", mention, what);
    }

    let token = Some(c.api_token());
    let raw = |body: &[u8]| Some(body.to_vec());
    let r = api
        .raw(
            Method::POST,
            "/jobs",
            raw(br#"{"group_id": 1, "handler": "#),
            token,
        )
        .await
        .unwrap();
    refused(&r, 400, "invalid_input", "invalid json", "malformed JSON");
    let r = api
        .raw(Method::POST, "/groups", raw(b"[1, 2"), token)
        .await
        .unwrap();
    refused(
        &r,
        400,
        "invalid_input",
        "invalid json",
        "malformed JSON group",
    );

    // A valid job whose body is just over the 2 MiB limit.
    let mut big = serde_json::to_vec(&with("params", json!(""))).unwrap();
    let pad = vec![b' '; 2 * 1024 * 1024];
    big.splice(1..1, pad);
    let r = oversized(&api, big, token).await;
    refused(&r, 400, "invalid_input", "larger than", "oversized body");

    let body = serde_json::to_vec(&good).unwrap();
    for bearer in [None, Some("wrong-token")] {
        let r = api
            .raw(Method::POST, "/jobs", Some(body.clone()), bearer)
            .await
            .unwrap();
        refused(&r, 401, "unauthorized", "", "wrong API token");
        let r = api.raw(Method::GET, "/jobs", None, bearer).await.unwrap();
        assert_eq!(r.status, 401, "reading with a wrong token: {:?}", r.body);
        let r = api
            .raw(
                Method::POST,
                &format!("/jobs/{job_id}/trigger"),
                None,
                bearer,
            )
            .await
            .unwrap();
        assert_eq!(r.status, 401, "triggering with a wrong token: {:?}", r.body);
    }
    let r = api.call(Method::GET, "/jobs/987654", None).await;
    refused(&r, 404, "not_found", "987654", "unknown job");
    let r = api.call(Method::DELETE, "/groups/987654", None).await;
    assert_eq!(r.status, 404, "unknown group: {:?}", r.body);

    assert_eq!(
        snapshot(&api).await,
        before,
        "a refused request changed something"
    );
    assert!(
        api.runs(job_id).await.is_empty(),
        "a refused trigger made a run"
    );

    // The executor API: a registration with a wrong or missing token is refused and the
    // executor does not become routable.
    let beat = json!({
        "registryGroup": "EXECUTOR", "registryKey": "it-app",
        "registryValue": "http://127.0.0.1:9/",
    });
    for token in [Some("wrong-token"), None] {
        let env = api.executor_call("registry", token, &beat).await;
        assert_eq!(env["code"], 500, "{env}");
        assert_eq!(env["msg"], "The access token is wrong.", "{env}");
    }
    assert!(api.live_addresses(group).await.is_empty());
    assert_eq!(snapshot(&api).await, before);

    // The same registration with the right token works, so the checks above could fail.
    let right = api.access_token().to_owned();
    let env = api.executor_call("registry", Some(&right), &beat).await;
    assert_eq!(env["code"], 200, "{env}");
    assert_eq!(api.live_addresses(group).await, ["http://127.0.0.1:9/"]);
}

/// Sends an oversized body. The server may close the connection before the client finished
/// sending, which loses its answer: such a transport error is retried, a wrong answer is not.
async fn oversized(api: &Api, body: Vec<u8>, token: Option<&str>) -> Reply {
    let mut last = None;
    for _ in 0..5 {
        match api
            .raw(Method::POST, "/jobs", Some(body.clone()), token)
            .await
        {
            Ok(r) => return r,
            Err(e) => last = Some(e),
        }
    }
    panic!("the oversized request never got an answer: {last:?}");
}
