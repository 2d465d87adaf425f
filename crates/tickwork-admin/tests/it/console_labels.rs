//! The console shows codes by their labels in English and Chinese (the code in the tooltip,
//! the code still what forms post), draws the dashboard's charts over the period asked for
//! (and refuses one that does not read, drawing nothing), and asks which executor groups a
//! user may change with a box per group, by name.

use axum::http::Method;
use serde_json::json;

use crate::api::{Api, BUILTIN, FORM, Harness, Reply, location};

/// A console page in `lang` (`en` or `zh`) with the session `cookie`.
async fn page_in(h: &Harness, path: &str, cookie: &str, lang: &str) -> Reply {
    let cookies = format!("{cookie}; lang={lang}");
    h.send(Method::GET, path, &[("cookie", &cookies)], None)
        .await
}

/// Posts a console form (fields may repeat) as the admin of `session`; the answer.
async fn post(
    h: &Harness,
    session: &(String, String),
    path: &str,
    fields: &[(&str, &str)],
) -> Reply {
    let mut form = vec![("_csrf", session.1.as_str())];
    form.extend_from_slice(fields);
    h.send(
        Method::POST,
        path,
        &[("cookie", &session.0), ("content-type", FORM)],
        Some(serde_urlencoded::to_string(&form).unwrap()),
    )
    .await
}

/// `<span class="coded" title="CODE">label</span>`, as pages show a code.
fn coded(code: &str, label: &str) -> String {
    format!("<span class=\"coded\" title=\"{code}\">{label}</span>")
}

/// The end of a select's option of `code` (its value; `selected` may come between) with its
/// label as text.
fn option(code: &str, label: &str) -> String {
    format!(" title=\"{code}\">{label}</option>")
}

#[tokio::test]
async fn codes_are_shown_by_their_labels_in_english_and_chinese() {
    let h = Harness::start().await;
    let g = h.group("labels").await;
    let job = h
        .call(
            Method::POST,
            "/jobs",
            "/jobs",
            BUILTIN,
            Some(json!({
                "group_id": g, "description": "labelled", "schedule_type": "CRON",
                "schedule_conf": "0 0 3 * * ?", "handler": "demo",
                "route_strategy": "LEAST_RECENTLY_USED", "block_strategy": "DISCARD_LATER",
                "misfire_strategy": "FIRE_ONCE_NOW",
            })),
        )
        .await
        .ok()["id"]
        .as_i64()
        .unwrap();
    let (cookie, _) = h.console().await;

    // The list and the job's page: labels, each with its code as the tooltip.
    let list = page_in(&h, "/jobs", &cookie, "en").await.text();
    assert!(list.contains(&coded("CRON", "Cron")), "{list}");
    assert!(list.contains(&coded("BEAN", "Bean handler")), "{list}");
    let page = page_in(&h, &format!("/jobs/{job}"), &cookie, "en")
        .await
        .text();
    for (code, label) in [
        ("LEAST_RECENTLY_USED", "Least recently used"),
        ("DISCARD_LATER", "Discard later"),
        ("FIRE_ONCE_NOW", "Fire once now"),
    ] {
        assert!(page.contains(&coded(code, label)), "{code}: {page}");
    }
    // The schedule itself, which people type, is shown as typed.
    assert!(page.contains("<code>0 0 3 * * ?</code>"), "{page}");
    let page = page_in(&h, &format!("/jobs/{job}"), &cookie, "zh")
        .await
        .text();
    for (code, label) in [
        ("LEAST_RECENTLY_USED", "最近最久未使用"),
        ("DISCARD_LATER", "丢弃后续调度"),
        ("FIRE_ONCE_NOW", "立即执行一次"),
    ] {
        assert!(page.contains(&coded(code, label)), "{code}: {page}");
    }

    // The form: the option's text is the label, its value the code.
    let form = page_in(&h, "/jobs/new", &cookie, "en").await.text();
    assert!(form.contains(&option("BUSYOVER", "Busy over")), "{form}");
    assert!(
        form.contains(&option("SERIAL_EXECUTION", "Serial execution")),
        "{form}"
    );
    assert!(form.contains(&option("FIX_RATE", "Fixed rate")), "{form}");
    let form = page_in(&h, "/jobs/new", &cookie, "zh").await.text();
    for (code, label) in [
        ("FIRST", "第一个"),
        ("SHARDING_BROADCAST", "分片广播"),
        ("COVER_EARLY", "覆盖之前调度"),
        ("DO_NOTHING", "忽略"),
        ("GLUE_SHELL", "GLUE(Shell)"),
    ] {
        assert!(form.contains(&option(code, label)), "{code}: {form}");
    }

    // A run: its state and trigger type, on its page, in the list and in the filter.
    let run = h.trigger(job, json!({})).await.ok()["id"].as_i64().unwrap();
    let page = page_in(&h, &format!("/runs/{run}"), &cookie, "en")
        .await
        .text();
    assert!(
        page.contains("data-state=\"planned\" title=\"planned\">Planned</span>"),
        "{page}"
    );
    assert!(page.contains(&coded("API", "API")), "{page}");
    let page = page_in(&h, &format!("/runs/{run}"), &cookie, "zh")
        .await
        .text();
    assert!(page.contains(">待调度</span>"), "{page}");
    assert!(page.contains(&coded("API", "API触发")), "{page}");
    let runs = page_in(&h, "/runs", &cookie, "zh").await.text();
    assert!(runs.contains(&option("timed_out", "超时")), "{runs}");
    assert!(runs.contains(&option("misfired", "调度过期")), "{runs}");
    assert!(runs.contains("data-state=\"planned\""), "{runs}");
    // The filter still takes the code.
    let runs = page_in(&h, "/runs?state=planned", &cookie, "en")
        .await
        .text();
    assert!(runs.contains(&format!("id=\"run-{run}\"")), "{runs}");
    let runs = page_in(&h, "/runs?state=succeeded", &cookie, "en")
        .await
        .text();
    assert!(!runs.contains(&format!("id=\"run-{run}\"")), "{runs}");

    // The form posts codes, as before.
    let session = h.console().await;
    let saved = post(
        &h,
        &session,
        &format!("/jobs/{job}/edit"),
        &[
            ("group_id", &g.to_string()),
            ("description", "labelled"),
            ("schedule_type", "CRON"),
            ("schedule_conf", "0 0 3 * * ?"),
            ("glue_type", "BEAN"),
            ("handler", "demo"),
            ("route_strategy", "SHARDING_BROADCAST"),
            ("misfire_strategy", "DO_NOTHING"),
            ("block_strategy", "COVER_EARLY"),
            ("delivery", "AT_LEAST_ONCE"),
        ],
    )
    .await;
    assert_eq!(saved.status(), 303, "{}", saved.text());
    let view = h
        .get("/jobs/{id}", &format!("/jobs/{job}"), BUILTIN)
        .await
        .ok();
    assert_eq!(view["route_strategy"], "SHARDING_BROADCAST");
    assert_eq!(view["delivery"], "AT_LEAST_ONCE");
    let page = page_in(&h, &format!("/jobs/{job}"), &cookie, "zh")
        .await
        .text();
    assert!(
        page.contains(&coded("SHARDING_BROADCAST", "分片广播")),
        "{page}"
    );
    h.stop().await;
}

/// Today in the admin's zone, as `YYYY-MM-DD`, and `days` before it.
fn date(h: &Harness, days: i64) -> String {
    let tz = jiff::tz::TimeZone::get(&h.service().config().default_time_zone).unwrap();
    let today = jiff::Timestamp::from_millisecond(h.service().now_ms())
        .unwrap()
        .to_zoned(tz)
        .date();
    today
        .checked_sub(jiff::Span::new().days(days))
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn the_dashboard_draws_the_period_asked_for_and_refuses_one_that_does_not_read() {
    let h = Harness::start().await;
    let (cookie, _) = h.console().await;
    let zone = h.service().config().default_time_zone.clone();

    // Two weeks by the day when nothing is asked: titled charts, both axes named.
    let page = page_in(&h, "/", &cookie, "en").await;
    assert_eq!(page.status(), 200);
    let page = page.text();
    assert!(page.contains("<h3>Runs by state</h3>"), "{page}");
    assert!(
        page.contains("<h3>Dispatch lateness: average and maximum</h3>"),
        "{page}"
    );
    assert!(page.contains(">runs per day</text>"), "{page}");
    assert!(page.contains(">lateness (ms)</text>"), "{page}");
    assert!(page.contains(&format!(">day ({zone})</text>")), "{page}");
    assert!(page.contains("<option value=\"14d\" selected>"), "{page}");

    // The last 24 hours by the hour.
    let page = page_in(&h, "/?range=24h", &cookie, "en").await.text();
    assert!(page.contains(">runs per hour</text>"), "{page}");
    assert!(page.contains(&format!(">hour ({zone})</text>")), "{page}");
    assert!(page.contains("<option value=\"24h\" selected>"), "{page}");
    let page = page_in(&h, "/?range=24h", &cookie, "zh").await.text();
    assert!(page.contains(">每小时运行次数</text>"), "{page}");
    assert!(page.contains("<h3>运行次数（按状态）</h3>"), "{page}");

    // Dates, both included: a bar a day (the bars' tooltips name them).
    let (from, to) = (date(&h, 9), date(&h, 0));
    let page = page_in(&h, &format!("/?from={from}&to={to}"), &cookie, "en").await;
    assert_eq!(page.status(), 200);
    let page = page.text();
    assert!(page.contains("<option value=\"dates\" selected>"), "{page}");
    assert!(page.contains(&format!("value=\"{from}\"")), "{page}");
    assert!(page.contains(&format!("{from} 00:00 – ")), "{page}");
    assert!(page.contains(">runs per day</text>"), "{page}");

    // Periods that do not read: the reason, the input kept, no chart drawn.
    let yesterday = date(&h, 1);
    for (query, says) in [
        (
            "range=1y".to_owned(),
            "Period: \"1y\" is not one of the periods offered",
        ),
        (
            "range=dates&from=soon&to=".to_owned(),
            "From: \"soon\" is not a date (YYYY-MM-DD)",
        ),
        (
            format!("range=dates&from={to}&to={yesterday}"),
            "is after the end date",
        ),
        (
            format!("range=dates&from={from}&to=2999-01-01"),
            "To: \"2999-01-01\" is after today",
        ),
        (
            format!("range=dates&from=2000-01-01&to={to}"),
            "makes the period longer than 92 days",
        ),
    ] {
        let page = page_in(&h, &format!("/?{query}"), &cookie, "en").await;
        assert_eq!(page.status(), 400, "{query}");
        let page = page.text().replace("&quot;", "\"").replace("&#34;", "\"");
        assert!(page.contains("id=\"period-error\""), "{query}: {page}");
        assert!(page.contains(says), "{query}: {page}");
        assert!(
            !page.contains("id=\"chart-runs\""),
            "{query}: nothing drawn"
        );
        assert!(
            page.contains("id=\"tile-jobs\""),
            "the rest of the page is there"
        );
    }
    let page = page_in(
        &h,
        "/?range=dates&from=2026-02-30&to=2026-03-01",
        &cookie,
        "zh",
    )
    .await
    .text();
    assert!(page.contains("不是有效日期（YYYY-MM-DD）"), "{page}");
    h.stop().await;
}

#[tokio::test]
async fn a_users_groups_are_ticked_by_name() {
    let h = Harness::start().await;
    let billing = h.group("billing").await;
    let reports = h.group("reports").await;
    let session = h.console().await;
    let (b, r) = (billing.to_string(), reports.to_string());

    // The new user's form: a box per group, by name, and a hint that says what they are.
    let page = page_in(&h, "/users", &session.0, "en").await.text();
    for (id, name) in [(&b, "billing"), (&r, "reports")] {
        assert!(
            page.contains(&format!(
                "<input type=\"checkbox\" name=\"group_ids\" value=\"{id}\" id=\"f-group_ids-{id}\"> {name}</label>"
            )),
            "{page}"
        );
    }
    assert!(
        page.contains("they change the jobs of the ticked groups"),
        "{page}"
    );
    assert!(!page.contains("job ids"), "{page}");

    // An operator of both, from two ticked boxes.
    let created = post(
        &h,
        &session,
        "/users",
        &[
            ("username", "olga"),
            ("password", "olga-password-1"),
            ("role", "operator"),
            ("group_ids", &b),
            ("group_ids", &r),
        ],
    )
    .await;
    assert_eq!(created.status(), 303, "{}", created.text());
    let users = h.get("/users", "/users", BUILTIN).await.ok();
    let olga = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "olga")
        .unwrap()
        .clone();
    assert_eq!(olga["group_ids"], json!([billing, reports]));
    let id = olga["id"].as_i64().unwrap();

    // Her row shows them ticked; untick one.
    let page = page_in(&h, "/users", &session.0, "en").await.text();
    for g in [&b, &r] {
        assert!(
            page.contains(&format!("id=\"user-{id}-group-{g}\" checked>")),
            "{page}"
        );
    }
    let saved = post(
        &h,
        &session,
        &format!("/users/{id}"),
        &[("role", "operator"), ("group_ids", &r)],
    )
    .await;
    assert_eq!(
        (saved.status().as_u16(), location(&saved)),
        (303, "/users?ok=saved".to_owned())
    );
    let view = h.get("/users", "/users", BUILTIN).await.ok();
    let olga = view
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(olga["group_ids"], json!([reports]));

    // Bad input: said, and nothing changes.
    let audit = h.audit_total().await;
    let bad = post(
        &h,
        &session,
        "/users",
        &[
            ("username", "vik"),
            ("password", "vik-password-12"),
            ("role", "viewer"),
            ("group_ids", &b),
        ],
    )
    .await;
    assert_eq!(bad.status(), 400);
    let body = bad.text();
    assert!(body.contains("id=\"err-group_ids\""), "{body}");
    assert!(
        body.contains(&format!("id=\"f-group_ids-{b}\" checked>")),
        "the ticks are kept: {body}"
    );
    let bad = post(
        &h,
        &session,
        "/users",
        &[
            ("username", "vik"),
            ("password", "vik-password-12"),
            ("role", "operator"),
            ("group_ids", "billing"),
        ],
    )
    .await;
    assert_eq!(bad.status(), 400);
    assert!(bad.text().contains("id=\"err-group_ids\""));
    let bad = post(
        &h,
        &session,
        &format!("/users/{id}"),
        &[("role", "operator"), ("group_ids", "x")],
    )
    .await;
    assert!(
        location(&bad).starts_with("/users?err="),
        "{}",
        location(&bad)
    );
    assert_eq!(h.audit_total().await, audit, "nothing was changed");
    let view = h.get("/users", "/users", BUILTIN).await.ok();
    assert_eq!(view.as_array().unwrap().len(), 2, "admin and olga");
    h.stop().await;
}

#[tokio::test]
async fn the_tables_of_users_groups_and_tokens_align_numbers_right_and_end_with_actions() {
    let h = Harness::start().await;
    h.group("aligned").await;
    let (cookie, _) = h.console().await;
    let session = h.console().await;
    let made = post(&h, &session, "/tokens", &[("name", "laptop")]).await;
    assert_eq!(made.status(), 200);
    for (path, table) in [
        ("/users", "users-table"),
        ("/groups", "groups-table"),
        ("/tokens", "tokens-table"),
    ] {
        let page = page_in(&h, path, &cookie, "en").await.text();
        let at = page.find(&format!("id=\"{table}\"")).unwrap();
        let head = &page[at..at + page[at..].find("</thead>").unwrap()];
        assert!(head.contains("<th class=\"num\">ID</th>"), "{path}: {head}");
        // The last column is the actions'.
        assert_eq!(
            head.rfind("<th"),
            head.find("<th class=\"actions\">Actions</th>"),
            "{path}: {head}"
        );
        assert!(page[at..].contains("<td class=\"num\">"), "{path}");
        assert!(page[at..].contains("<td class=\"actions\">"), "{path}");
    }
    h.stop().await;
}
