//! Script versions in the console: the script page with its editor bundle (an asset with a
//! hashed name, under the console's CSP), the changes between two versions (also in the REST
//! API), and loading an old version into the editor to save it as a new one; bad versions are
//! said and change nothing.

use axum::http::{Method, header};
use serde_json::json;

use crate::api::{Api, BUILTIN, FORM, Harness, location};

/// A shell job with versions 1 (`echo one`) and 2 (`echo one`, `echo two`); its id.
async fn job_with_two_versions(h: &Harness) -> i64 {
    let g = h.group("scripts").await;
    let j = h.shell_job(g, BUILTIN).await.ok()["id"].as_i64().unwrap();
    h.call(
        Method::PUT,
        "/jobs/{id}/script",
        &format!("/jobs/{j}/script"),
        BUILTIN,
        Some(json!({ "source": "echo one\necho two", "comment": "second" })),
    )
    .await
    .ok();
    j
}

/// The numbers of a job's script versions, newest first.
async fn versions(h: &Harness, j: i64) -> Vec<i64> {
    h.get(
        "/jobs/{id}/script/versions",
        &format!("/jobs/{j}/script/versions"),
        BUILTIN,
    )
    .await
    .ok()
    .as_array()
    .unwrap()
    .iter()
    .map(|v| v["version"].as_i64().unwrap())
    .collect()
}

/// What must stay as it is after a read or a refused request: versions, source, audit log.
async fn state(h: &Harness, j: i64) -> (Vec<i64>, String, u64) {
    let job = h
        .get("/jobs/{id}", &format!("/jobs/{j}"), BUILTIN)
        .await
        .ok();
    (
        versions(h, j).await,
        job["glue_source"].as_str().unwrap().to_owned(),
        h.audit_total().await,
    )
}

#[tokio::test]
async fn the_script_page_loads_its_editor_bundle_from_a_hashed_asset() {
    let h = Harness::start().await;
    let j = job_with_two_versions(&h).await;
    let (cookie, _) = h.console().await;
    let page = h.page(&format!("/jobs/{j}/script"), &cookie).await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let body = page.text();
    // The form still posts a plain textarea; the editor enhances it.
    assert!(
        body.contains("<textarea name=\"source\" id=\"script-source\""),
        "{body}"
    );
    assert!(body.contains("data-glue=\"GLUE_SHELL\""), "{body}");
    let src = body
        .split("<script src=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .find(|s| s.starts_with("/assets/editor-"))
        .unwrap_or_else(|| panic!("no editor bundle on the page: {body}"))
        .to_owned();
    assert!(src.ends_with(".js"), "{src}");
    // No inline script: every <script> names its file.
    assert_eq!(
        body.matches("<script").count(),
        body.matches("<script src=\"/assets/").count()
    );
    let js = h.page(&src, &cookie).await;
    assert_eq!(js.status(), 200);
    assert_eq!(
        js.headers()[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert!(
        js.headers()[header::CACHE_CONTROL]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    assert!(js.text().contains("CodeMirror"), "the bundle's banner");
    // Another name is no asset.
    let other = h.page("/assets/editor-0000000000000000.js", &cookie).await;
    assert_eq!(other.status(), 404);
    // The history offers the two newest versions to compare, and each version to load.
    assert!(body.contains("id=\"from-1\" aria-label"), "{body}");
    assert!(body.contains("value=\"1\" id=\"from-1\"") || body.contains("id=\"from-1\""));
    assert!(
        body.contains(&format!("href=\"/jobs/{j}/script?load=1\" id=\"load-1\"")),
        "{body}"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_console_shows_the_changes_between_two_versions() {
    let h = Harness::start().await;
    let j = job_with_two_versions(&h).await;
    let (cookie, _) = h.console().await;
    let before = state(&h, j).await;

    let page = h
        .page(&format!("/jobs/{j}/script/diff?from=1&to=2"), &cookie)
        .await;
    assert_eq!(page.status(), 200);
    let body = page.text();
    assert!(
        body.contains(
            "<tr class=\"same\">\n      <td class=\"no\">1</td>\n      <td class=\"no\">1</td>"
        ),
        "{body}"
    );
    assert!(body.contains("<tr class=\"added\">"), "{body}");
    assert!(body.contains("<td class=\"text\">echo two</td>"), "{body}");
    assert!(!body.contains("<tr class=\"removed\">"), "{body}");
    assert!(body.contains("+1</span> lines added"), "{body}");
    assert!(body.contains("−0</span> lines removed"), "{body}");

    // The other way round, the same line is removed.
    let body = h
        .page(&format!("/jobs/{j}/script/diff?from=2&to=1"), &cookie)
        .await
        .text();
    assert!(body.contains("<tr class=\"removed\">"), "{body}");
    assert!(!body.contains("<tr class=\"added\">"), "{body}");
    // A version against itself.
    let body = h
        .page(&format!("/jobs/{j}/script/diff?from=2&to=2"), &cookie)
        .await
        .text();
    assert!(
        body.contains("The two versions hold the same script."),
        "{body}"
    );

    // Bad input: said plainly, nothing changed.
    for (query, status, said) in [
        (
            "from=1&to=99",
            404,
            format!("job {j} has no script version 99"),
        ),
        (
            "from=0&to=2",
            404,
            format!("job {j} has no script version 0"),
        ),
        (
            "from=one&to=2",
            400,
            "Version: must be a whole number".to_owned(),
        ),
        ("to=2", 400, "Version: must be a whole number".to_owned()),
    ] {
        let page = h
            .page(&format!("/jobs/{j}/script/diff?{query}"), &cookie)
            .await;
        assert_eq!(page.status(), status, "{query}");
        let body = page.text();
        assert!(body.contains(&said), "{query}: {body}");
        assert!(
            body.contains(&format!("href=\"/jobs/{j}/script\"")),
            "{body}"
        );
    }
    let page = h.page("/jobs/999/script/diff?from=1&to=2", &cookie).await;
    assert_eq!(page.status(), 404);
    assert!(page.text().contains("job 999 not found"), "{}", page.text());
    assert_eq!(state(&h, j).await, before, "reading diffs changes nothing");

    // In Chinese.
    let zh = h
        .send(
            Method::GET,
            &format!("/jobs/{j}/script/diff?from=1&to=2"),
            &[("cookie", &format!("{cookie}; lang=zh"))],
            None,
        )
        .await
        .text();
    assert!(zh.contains("行新增"), "{zh}");
    h.stop().await;
}

#[tokio::test]
async fn an_old_version_loads_into_the_editor_and_saves_as_a_new_one() {
    let h = Harness::start().await;
    let j = job_with_two_versions(&h).await;
    let (cookie, csrf) = h.console().await;
    let before = state(&h, j).await;
    assert_eq!(before.0, [2, 1]);

    // Loading puts version 1 into the editor and changes nothing.
    let page = h.page(&format!("/jobs/{j}/script?load=1"), &cookie).await;
    assert_eq!(page.status(), 200);
    let body = page.text();
    assert!(body.contains("spellcheck=\"false\""), "{body}");
    assert!(
        body.contains(">echo one</textarea>"),
        "version 1 is in the editor: {body}"
    );
    assert!(body.contains("id=\"loaded\""), "{body}");
    assert!(body.contains("In the editor: version 1."), "{body}");
    assert!(body.contains("value=\"from version 1\""), "{body}");
    assert!(
        body.contains("<tr id=\"version-1\" class=\"loaded\">"),
        "{body}"
    );
    assert_eq!(state(&h, j).await, before, "loading changes nothing");

    // Saved (edited or not), it is the newest version, audited as a save.
    let audit = h.audit_total().await;
    let form = [
        ("_csrf", csrf.as_str()),
        ("source", "echo one\necho three"),
        ("comment", "from version 1"),
    ];
    let resp = h
        .send(
            Method::POST,
            &format!("/jobs/{j}/script"),
            &[("cookie", &cookie), ("content-type", FORM)],
            Some(serde_urlencoded::to_string(form).unwrap()),
        )
        .await;
    assert_eq!(resp.status(), 303);
    assert!(
        location(&resp).ends_with("ok=script_saved"),
        "{}",
        location(&resp)
    );
    let after = state(&h, j).await;
    assert_eq!(after.0, [3, 2, 1]);
    assert_eq!(after.1, "echo one\necho three");
    assert_eq!(after.2, audit + 1);
    let last = h.get("/audit", "/audit?size=1", BUILTIN).await.ok()["items"][0].clone();
    assert_eq!(last["action"], "script.save", "{last}");

    // Bad versions: said on a page that leads back, nothing changed.
    let before = state(&h, j).await;
    for (load, status, said) in [
        ("99", 404, format!("job {j} has no script version 99")),
        ("-1", 404, format!("job {j} has no script version -1")),
        ("x", 400, "Version: must be a whole number".to_owned()),
        ("", 400, "Version: must be a whole number".to_owned()),
    ] {
        let page = h
            .page(&format!("/jobs/{j}/script?load={load}"), &cookie)
            .await;
        assert_eq!(page.status(), status, "load={load}");
        let body = page.text();
        assert!(body.contains(&said), "load={load}: {body}");
        assert!(
            body.contains(&format!("href=\"/jobs/{j}/script\"")),
            "{body}"
        );
    }
    let page = h.page("/jobs/999/script?load=1", &cookie).await;
    assert_eq!(page.status(), 404);
    assert_eq!(state(&h, j).await, before, "refused loads change nothing");
    h.stop().await;
}

#[tokio::test]
async fn the_rest_api_answers_the_changes_between_two_versions() {
    let h = Harness::start().await;
    let j = job_with_two_versions(&h).await;
    let before = state(&h, j).await;
    let diff = h
        .get(
            "/jobs/{id}/script/diff",
            &format!("/jobs/{j}/script/diff?from=1&to=2"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(
        (
            diff["from"]["version"].as_i64(),
            diff["to"]["version"].as_i64()
        ),
        (Some(1), Some(2))
    );
    assert_eq!(
        (diff["added"].as_u64(), diff["removed"].as_u64()),
        (Some(1), Some(0)),
        "{diff}"
    );
    let lines = diff["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{diff}");
    assert_eq!(
        lines[0],
        json!({ "change": "same", "old_no": 1, "new_no": 1, "text": "echo one" })
    );
    assert_eq!(
        lines[1],
        json!({ "change": "added", "old_no": null, "new_no": 2, "text": "echo two" })
    );
    // The other way round, the line is removed.
    let back = h
        .get(
            "/jobs/{id}/script/diff",
            &format!("/jobs/{j}/script/diff?from=2&to=1"),
            BUILTIN,
        )
        .await
        .ok();
    assert_eq!(
        (back["added"].as_u64(), back["removed"].as_u64()),
        (Some(0), Some(1))
    );

    // Bad input: a clear error, nothing changed.
    for (query, status) in [
        ("from=1&to=9", 404),
        ("from=1", 400),
        ("from=one&to=2", 400),
        ("from=1&to=2&context=3", 400),
    ] {
        let a = h
            .get(
                "/jobs/{id}/script/diff",
                &format!("/jobs/{j}/script/diff?{query}"),
                BUILTIN,
            )
            .await;
        assert_eq!(a.status, status, "{query}: {a:?}");
        assert!(
            !a.body["message"].as_str().unwrap_or_default().is_empty(),
            "{a:?}"
        );
    }
    let missing = h
        .get(
            "/jobs/{id}/script/diff",
            "/jobs/424242/script/diff?from=1&to=2",
            BUILTIN,
        )
        .await;
    assert_eq!(missing.status, 404, "{missing:?}");
    assert_eq!(state(&h, j).await, before);
}
