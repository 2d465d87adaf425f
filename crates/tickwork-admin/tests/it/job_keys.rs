//! Job keys in the console: the job form takes the stable key that export and import match
//! jobs by (checked as the REST API checks it), leaves it out of edits (it cannot change) and
//! empty in copies; an empty key is generated.

use axum::http::Method;

use crate::api::{Api, BUILTIN, FORM, Harness, location};

/// Posts the new-job form as an admin with `key`; status, `Location` and body.
async fn create(h: &Harness, group: i64, key: &str) -> (u16, String, String) {
    let (cookie, csrf) = h.console().await;
    let group = group.to_string();
    let form = [
        ("_csrf", csrf.as_str()),
        ("key", key),
        ("group_id", group.as_str()),
        ("description", "keyed"),
        ("schedule_type", "NONE"),
        ("glue_type", "BEAN"),
        ("handler", "demo"),
        ("route_strategy", "FIRST"),
        ("misfire_strategy", "DO_NOTHING"),
        ("block_strategy", "SERIAL_EXECUTION"),
        ("delivery", "AT_MOST_ONCE"),
    ];
    let resp = h
        .send(
            Method::POST,
            "/jobs/new",
            &[("cookie", &cookie), ("content-type", FORM)],
            Some(serde_urlencoded::to_string(form).unwrap()),
        )
        .await;
    (resp.status().as_u16(), location(&resp), resp.text())
}

fn job_id(location: &str) -> i64 {
    location
        .trim_start_matches("/jobs/")
        .split('?')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("not a job page: {location}"))
}

#[tokio::test]
async fn the_console_job_form_takes_a_key_checked_like_the_api() {
    let h = Harness::start().await;
    let g = h.group("keys").await;
    let (cookie, _) = h.console().await;
    let form = h.page("/jobs/new", &cookie).await.text();
    assert!(form.contains("id=\"f-key\""), "{form}");

    // A key: the job has it, and its page shows it.
    let (status, to, body) = create(&h, g, "  nightly-report ").await;
    assert_eq!(status, 303, "{body}");
    let id = job_id(&to);
    let job = h
        .get("/jobs/{id}", &format!("/jobs/{id}"), BUILTIN)
        .await
        .ok();
    assert_eq!(job["key"], "nightly-report");
    let page = h.page(&format!("/jobs/{id}"), &cookie).await.text();
    assert!(
        page.contains("<code id=\"job-key\">nightly-report</code>"),
        "{page}"
    );

    // A bad key and a taken one: said at the field or in the banner, nothing created.
    let (jobs, audit) = (h.job_count().await, h.audit_total().await);
    let (status, _, body) = create(&h, g, "has space").await;
    assert_eq!(status, 400);
    assert!(body.contains("id=\"err-key\""), "{body}");
    assert!(body.contains("letters, digits"), "{body}");
    assert!(body.contains("value=\"has space\""), "the input is kept");
    let (status, _, body) = create(&h, g, &"k".repeat(129)).await;
    assert_eq!(status, 400);
    assert!(body.contains("id=\"err-key\""), "{body}");
    let (status, _, body) = create(&h, g, "nightly-report").await;
    assert_eq!(status, 409);
    assert!(
        body.contains("job key &quot;nightly-report&quot; is taken")
            || body.contains("job key &#34;nightly-report&#34; is taken"),
        "{body}"
    );
    assert_eq!((h.job_count().await, h.audit_total().await), (jobs, audit));

    // No key: one is generated.
    let (status, to, _) = create(&h, g, "").await;
    assert_eq!(status, 303);
    let other = job_id(&to);
    let job = h
        .get("/jobs/{id}", &format!("/jobs/{other}"), BUILTIN)
        .await
        .ok();
    assert!(!job["key"].as_str().unwrap().is_empty(), "{job}");

    // The key cannot change: the edit form has none, a copy starts without one.
    let edit = h.page(&format!("/jobs/{id}/edit"), &cookie).await.text();
    assert!(!edit.contains("id=\"f-key\""), "{edit}");
    let copy = h.page(&format!("/jobs/{id}/copy"), &cookie).await.text();
    assert!(
        copy.contains("name=\"key\" id=\"f-key\" value=\"\""),
        "{copy}"
    );
    h.stop().await;
}
