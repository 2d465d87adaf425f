//! The console in real headless Chromium: sign in, create a cron job (with its key) and see its
//! next fire times, start it, watch its runs appear, follow a live log (lines, not `<br>`), run
//! once ("Run started" once an executor took it), kill a long run (who killed it), edit a
//! script and restore an old version, a viewer who cannot change anything, and a form with bad
//! input that shows the error and saves nothing; an alarm channel created through its page;
//! passwords (one's own, set by an admin), a viewer's own API token and a deleted user; the
//! schedule heatmap with the jobs colliding at midnight; missed fires on the dashboard and a
//! job's lateness budget in its form; codes shown by their labels (lists, the run page, the job
//! form), the dashboard over a chosen period and a user's groups ticked by name; the script
//! editor (Tab indentation, line numbers, highlighting), the changes between two versions and an
//! old version loaded into the editor; a list of 125 jobs paged, sorted and acted on by ticked
//! rows; a workflow written as TOML, run and drawn node by node; in English and Chinese. Every
//! page visited is saved as a PNG.

use thirtyfour::prelude::*;
use tickwork_admin::Service;
use tickwork_console_tests::{ADMIN_PASSWORD, APP, Console};
use tickwork_protocol::api::{JobQuery, RunQuery};

/// Creates an executor group `app` with no executor (automatic addresses, none registered).
async fn empty_group(a: &Service, app: &str, title: &str) -> tickwork_protocol::api::GroupView {
    let input = tickwork_protocol::api::GroupInput {
        app_name: app.to_owned(),
        title: title.to_owned(),
        address_mode: None,
        addresses: Vec::new(),
    };
    a.groups()
        .create(&tickwork_admin::Principal::system(), input)
        .await
        .unwrap_or_else(|e| panic!("group {app}: {e}"))
}

async fn jobs_total(a: &Service) -> u64 {
    a.jobs()
        .list(JobQuery::default())
        .await
        .expect("jobs list")
        .total
}

/// Creates the executor group of the test executor through the groups page and waits until
/// the executor shows as a live instance.
async fn create_group(c: &mut Console) {
    c.open("/groups").await;
    c.fill("#f-app_name", APP).await;
    c.fill("#f-title", "Console test").await;
    c.submit("#create-group").await;
    c.wait_css("#flash-ok").await;
    c.wait_until("the executor to show up on the groups page", || async {
        c.open("/groups").await;
        c.text("#groups-table").await.contains("127.0.0.1")
    })
    .await;
    c.shot("groups").await;
}

/// Fills the job form's main fields; returns nothing, the caller saves.
async fn fill_job(c: &Console, description: &str, kind: &str, conf: &str, script: &str) {
    c.fill("#f-description", description).await;
    c.select("#f-schedule_type", kind).await;
    c.fill("#f-schedule_conf", conf).await;
    c.select("#f-glue_type", "GLUE_SHELL").await;
    c.fill("#f-glue_source", script).await;
}

/// The id of the job whose page is open.
async fn job_id_of_page(c: &Console) -> i64 {
    let url = c.driver.current_url().await.expect("url");
    url.path()
        .trim_start_matches("/jobs/")
        .split('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a job page: {url}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_runs_the_console() {
    let Some(mut c) = Console::start("admin").await else {
        return;
    };

    // Sign in.
    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.shot("login").await;
    c.login("admin", ADMIN_PASSWORD).await;
    c.shot("dashboard").await;

    create_group(&mut c).await;

    // A cron job: the next fire times follow the schedule as it is typed.
    c.open("/jobs/new").await;
    fill_job(
        &c,
        "every two seconds",
        "CRON",
        "*/2 * * * * ?",
        "echo hello from tickwork",
    )
    .await;
    c.wait_until("five preview times", || async {
        c.driver
            .find_all(By::Css("#preview-body ol.fires li"))
            .await
            .map(|v| v.len() == 5)
            .unwrap_or(false)
    })
    .await;
    c.fill("#f-schedule_conf", "*/2 * * * *  nonsense").await;
    c.wait_css("#preview-error").await;
    c.shot("job-form-preview-error").await;
    c.fill("#f-schedule_conf", "*/2 * * * * ?").await;
    c.wait_until("the preview to recover", || async {
        !c.exists("#preview-error").await && c.exists("#preview-body ol.fires li").await
    })
    .await;
    c.fill("#f-key", "every-two-seconds").await;
    c.shot("job-form").await;
    c.click("#save").await;
    c.wait_css("#job-fires").await;
    assert_eq!(c.text("#job-key").await, "every-two-seconds");
    let job_id = job_id_of_page(&c).await;
    let fires = c.driver.find_all(By::Css("#job-fires li")).await.unwrap();
    assert_eq!(fires.len(), 5, "the job page shows five next fire times");

    // Start it and watch its runs appear.
    c.click("#start-job").await;
    c.wait_css("#stop-job").await;
    c.shot("job-started").await;
    c.open(&format!("/runs?job_id={job_id}")).await;
    c.wait_until("a succeeded run of the cron job", || async {
        c.open(&format!("/runs?job_id={job_id}")).await;
        c.exists("tr.run-row[data-state='succeeded']").await
    })
    .await;
    c.shot("runs").await;

    // The log of one of its runs.
    c.click("tr.run-row[data-state='succeeded'] td a").await;
    c.wait_until("the run's log", || async {
        c.text("#log").await.contains("hello from tickwork")
    })
    .await;
    // The executor's `<br>` marks read as line breaks.
    let log = c.text("#log").await;
    assert!(!log.to_lowercase().contains("<br"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("----------- tickwork job execute start")),
        "{log}"
    );
    c.shot("run-log").await;

    // Stop the cron job again.
    c.open(&format!("/jobs/{job_id}")).await;
    c.click("#stop-job").await;
    c.wait_css("#start-job").await;

    // A long run: run once, follow its live log, kill it.
    c.open("/jobs/new").await;
    fill_job(
        &c,
        "long script",
        "NONE",
        "",
        "echo long run started\nfor i in $(seq 1 120); do echo tick $i; sleep 1; done",
    )
    .await;
    c.click("#save").await;
    c.wait_css("#trigger").await;
    let long_id = job_id_of_page(&c).await;
    c.fill("#trigger-params", "from the console").await;
    c.click("#trigger").await;
    c.wait_css("#log").await;
    // Said once the executor accepted the run.
    assert!(c.text("#flash-ok").await.contains("Run started"));
    c.wait_until("the live log of the long run", || async {
        c.text("#log").await.contains("tick 2")
    })
    .await;
    c.shot("run-live-log").await;
    // The page may have been rendered while the run was still planned, without a kill button
    // (the live log updates the state's badge, not the buttons): reload until it is there.
    c.wait_until("the kill button of the dispatched run", || async {
        c.driver.refresh().await.is_ok() && c.exists("#kill-run").await
    })
    .await;
    c.submit_confirmed("#kill-run").await;
    c.wait_css("#flash-ok").await;
    c.wait_until("the run to be killed", || async {
        attr(&c, "#run-state", "data-state").await == "killed"
    })
    .await;
    assert_eq!(c.text("#run-state").await, "Killed", "the state's label");
    assert!(c.text("#killed-by").await.starts_with("admin · "));
    c.shot("run-killed").await;
    switch_to(&c, "任务管理").await;
    c.wait_css("#killed-by").await;
    c.shot("run-killed-zh").await;
    switch_to(&c, "Jobs").await;

    // Bad input: the error is shown at its field, the input kept, nothing saved.
    let before = jobs_total(&c.admin).await;
    c.open("/jobs/new").await;
    fill_job(&c, "bad schedule", "CRON", "61 * * * * ?", "echo never").await;
    // The live preview says so first. Its answer grows the form and moves the save button: a
    // click while it rendered missed the button (the form stayed unsent).
    c.wait_css("#preview-error").await;
    c.submit("#save").await;
    c.wait_css("#err-schedule_conf").await;
    let kept = c
        .wait_css("#f-schedule_conf")
        .await
        .value()
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(kept, "61 * * * * ?", "the input is kept");
    assert_eq!(
        c.wait_css("#f-description")
            .await
            .value()
            .await
            .unwrap()
            .unwrap_or_default(),
        "bad schedule"
    );
    assert_eq!(jobs_total(&c.admin).await, before, "nothing was saved");
    c.shot("job-form-bad-input").await;

    // The other pages render.
    for (path, name) in [
        ("/jobs", "jobs"),
        ("/runs", "runs-all"),
        ("/", "dashboard-after"),
    ] {
        c.open(path).await;
        c.wait_css("main").await;
        c.shot(name).await;
    }
    let runs = c
        .admin
        .runs()
        .list(RunQuery::default())
        .await
        .expect("runs")
        .total;
    assert!(runs >= 2);

    // Edit the long job's script, then restore its first version.
    c.open(&format!("/jobs/{long_id}/script")).await;
    type_script(&c, "echo version two").await;
    c.fill("#script-comment", "second version").await;
    c.submit("#save-script").await;
    c.wait_css("#flash-ok").await;
    assert_eq!(editor_text(&c).await, "echo version two");
    c.shot("script-saved").await;
    c.submit("#restore-1").await;
    c.wait_css("#flash-ok").await;
    c.wait_until("the first version back in the editor", || async {
        editor_text(&c).await.contains("long run started")
    })
    .await;
    assert!(c.text("#versions").await.contains("restored version 1"));
    c.shot("script-restored").await;
    let job = c.admin.jobs().get(long_id).await.expect("job");
    assert!(job.spec.glue_source.contains("long run started"));

    // A viewer, created on the users page.
    c.open("/users").await;
    c.fill("#f-username", "viewer1").await;
    c.fill("#f-password", "viewer-password-1").await;
    c.select("#f-role", "viewer").await;
    c.submit("#create-user").await;
    c.wait_css("#flash-ok").await;
    c.shot("users").await;
    for (path, name) in [("/tokens", "tokens"), ("/audit", "audit")] {
        c.open(path).await;
        c.wait_css("main").await;
        c.shot(name).await;
    }

    // Chinese.
    c.click("#lang-switch").await;
    c.wait_until("the Chinese page", || async {
        c.text("nav").await.contains("任务管理")
    })
    .await;
    c.shot("dashboard-zh").await;
    c.open("/jobs/new").await;
    c.wait_css("#f-key").await;
    c.shot("job-form-zh").await;
    c.open(&format!("/jobs/{job_id}")).await;
    c.wait_css("#job-key").await;
    c.shot("job-zh").await;
    c.click("#lang-switch").await;

    c.logout().await;

    // The viewer sees everything and can change nothing.
    c.login("viewer1", "viewer-password-1").await;
    c.wait_css("#read-only").await;
    c.open("/jobs").await;
    c.wait_css("#jobs-table").await;
    assert!(!c.exists("#new-job").await, "no create button for a viewer");
    assert!(
        !c.exists("#jobs-table form").await,
        "no action buttons for a viewer"
    );
    c.shot("viewer-jobs").await;
    c.open(&format!("/jobs/{job_id}")).await;
    c.wait_css("#job-fires").await;
    for control in ["#start-job", "#edit-job", "#delete-job", "#trigger"] {
        assert!(
            !c.exists(control).await,
            "{control} is hidden from a viewer"
        );
    }
    c.shot("viewer-job").await;
    // The script in a read-only editor, still with its history to compare and load.
    c.open(&format!("/jobs/{long_id}/script")).await;
    in_editor(&c, ".cm-content[contenteditable='false']").await;
    assert!(!c.exists("#save-script").await, "no save for a viewer");
    assert!(c.exists("#compare").await && c.exists("#load-1").await);
    c.shot("viewer-script").await;
    // A forged form with the viewer's own valid CSRF token: the server refuses it.
    let forge = |action: &str, token: &str| {
        format!(
            "const f = document.createElement('form'); f.method = 'post'; f.action = '{action}';
             const i = document.createElement('input'); i.name = '_csrf';
             i.value = {token}; f.appendChild(i); document.body.appendChild(f); f.submit();"
        )
    };
    c.driver
        .execute(
            forge(
                &format!("/jobs/{job_id}/start"),
                "document.body.dataset.csrf",
            ),
            vec![],
        )
        .await
        .expect("forged start");
    c.wait_css("#flash-err").await;
    assert!(c.text("#flash-err").await.contains("not allowed"));
    c.shot("viewer-forbidden").await;
    let job = c.admin.jobs().get(job_id).await.expect("job");
    assert_eq!(job.status, "stopped", "the viewer's start changed nothing");
    // Without the CSRF token nothing happens either.
    c.driver
        .execute(forge(&format!("/jobs/{job_id}/delete"), "'wrong'"), vec![])
        .await
        .expect("forged delete");
    c.wait_css("#message").await;
    c.admin
        .jobs()
        .get(job_id)
        .await
        .expect("the job still exists");
    c.shot("viewer-bad-csrf").await;

    c.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_an_alarm_channel() {
    let Some(mut c) = Console::start("alarms").await else {
        return;
    };
    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;

    // A webhook without a URL: the form comes back with the error and nothing is saved.
    c.open("/alarms").await;
    c.wait_css("#channel-form").await;
    c.fill("#f-name", "ops-hook").await;
    c.select("#f-kind", "webhook").await;
    c.fill("#f-secret", "hook-secret").await;
    c.click("#create-channel").await;
    c.wait_css("#err-url").await;
    let kept = c.wait_css("#f-name").await.value().await.expect("value");
    assert_eq!(kept.as_deref(), Some("ops-hook"), "the input is kept");
    assert!(!c.text("#channels-table").await.contains("ops-hook"));
    c.shot("alarm-channel-bad-input").await;

    // With a URL it is created and listed with its URL masked.
    c.fill("#f-url", "https://hooks.example.invalid/tw/abc?token=xyz")
        .await;
    c.fill("#f-secret", "hook-secret").await;
    c.submit("#create-channel").await;
    c.wait_css("#flash-ok").await;
    let table = c.text("#channels-table").await;
    assert!(table.contains("ops-hook"), "listed: {table}");
    assert!(table.contains("token=***"), "masked: {table}");
    assert!(!table.contains("xyz") && !table.contains("hook-secret"));
    c.shot("alarm-channels").await;

    c.finish().await;
}

/// The attribute `name` of the element matching `css` ("" when it has none).
async fn attr(c: &Console, css: &str, name: &str) -> String {
    c.wait_css(css)
        .await
        .attr(name)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Switches the console's language with the top bar's link and waits for the page in it.
/// A job firing every second on an executor group with no executor: each fire fails at the
/// trigger, and the ledger's check (every 5 s, 10 s after a fire) reports them missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_missed_fires_and_the_form_takes_a_lateness_budget() {
    let Some(mut c) = Console::start("fires").await else {
        return;
    };
    let group = empty_group(&c.admin, "nobody-home", "Nobody home").await.id;
    running_job(&c.admin, group, "orphan-sync", "FIX_RATE", "1", "UTC").await;

    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;
    assert!(c.exists("#fire-alerts").await);
    c.wait_until("missed fires on the dashboard", || async {
        c.open("/").await;
        c.exists("#fire-alerts-table tr.fire-alert[data-kind=missed]")
            .await
    })
    .await;
    let totals = c.text("#fires-missed").await;
    assert!(totals.starts_with("Missed: "), "{totals}");
    assert!(!totals.starts_with("Missed: 0 "), "{totals}");
    assert!(c.text("#fires-late").await.starts_with("Late: 0 fires"));
    let row = c.text("#fire-alerts-table tbody tr:first-child").await;
    assert!(row.contains("the orphan-sync job"), "{row}");
    c.shot("dashboard-fire-alerts").await;
    scroll_to(&c, "#fire-alerts").await;
    c.shot("dashboard-fire-alerts-table").await;
    switch_to(&c, "任务管理").await;
    c.wait_css("#fire-alerts-table").await;
    assert!(c.text("#fire-alerts").await.contains("漏触发"));
    scroll_to(&c, "#fire-alerts").await;
    c.shot("dashboard-fire-alerts-zh").await;
    switch_to(&c, "Jobs").await;

    // The job form's lateness budget: a negative one is refused at its field, nothing saved;
    // a good one is kept.
    let before = jobs_total(&c.admin).await;
    c.open("/jobs/new").await;
    c.fill("#f-description", "budgeted").await;
    c.fill("#f-handler", "echo").await;
    c.select("#f-group_id", &group.to_string()).await;
    c.fill("#f-lateness_budget_ms", "-5").await;
    c.click("#save").await;
    c.wait_css("#err-lateness_budget_ms").await;
    assert_eq!(jobs_total(&c.admin).await, before, "nothing was saved");
    c.shot("job-form-lateness-bad").await;
    c.fill("#f-lateness_budget_ms", "2500").await;
    c.click("#save").await;
    c.wait_css("#job-key").await;
    let id = job_id_of_page(&c).await;
    let job = c.admin.jobs().get(id).await.expect("the saved job");
    assert_eq!(job.spec.lateness_budget_ms, 2_500);
    c.finish().await;
}

async fn switch_to(c: &Console, nav_word: &str) {
    c.click("#lang-switch").await;
    c.wait_until(&format!("the page with {nav_word}"), || async {
        c.text("nav").await.contains(nav_word)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_change_passwords_and_manage_their_tokens() {
    let Some(mut c) = Console::start("passwords").await else {
        return;
    };
    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;

    // A viewer, then her password set by the admin: the two new ones must agree.
    c.open("/users").await;
    c.fill("#f-username", "vera").await;
    c.fill("#f-password", "vera-first-password").await;
    c.select("#f-role", "viewer").await;
    c.submit("#create-user").await;
    c.wait_css("#flash-ok").await;
    c.shot("users").await;
    c.click("a[id^='reset-password-']").await;
    c.fill("#f-password", "vera-second-password").await;
    c.fill("#f-password2", "vera-second-passwork").await;
    c.click("#save-password").await;
    c.wait_css("#err-password2").await;
    c.shot("reset-password-mismatch").await;
    c.fill("#f-password", "vera-second-password").await;
    c.fill("#f-password2", "vera-second-password").await;
    c.submit("#save-password").await;
    c.wait_css("#flash-ok").await;
    assert!(c.text("#flash-ok").await.contains("Password set"));
    switch_to(&c, "任务管理").await;
    c.shot("users-zh").await;
    c.click("a[id^='reset-password-']").await;
    c.wait_css("#password-form").await;
    c.shot("reset-password-zh").await;
    switch_to(&c, "Jobs").await;
    c.logout().await;

    // Vera signs in with the password the admin set, makes herself a token.
    c.login("vera", "vera-second-password").await;
    c.open("/tokens").await;
    assert!(!c.exists("#read-only").await, "no read-only banner here");
    c.fill("#token-name", "laptop").await;
    c.click("#create-token").await;
    c.wait_css("#token-secret").await;
    assert!(c.text("#token-secret").await.starts_with("tw_"));
    assert!(c.text("#tokens-table").await.contains("laptop"));
    c.shot("viewer-token").await;

    // Her own password from the top bar: a wrong current one is refused at its field.
    c.click("#change-password").await;
    c.fill("#f-current_password", "not-my-password").await;
    c.fill("#f-password", "vera-third-password").await;
    c.fill("#f-password2", "vera-third-password").await;
    c.click("#save-password").await;
    c.wait_css("#err-current_password").await;
    c.shot("own-password-wrong").await;
    switch_to(&c, "任务管理").await;
    c.shot("own-password-zh").await;
    switch_to(&c, "Jobs").await;
    c.fill("#f-current_password", "vera-second-password").await;
    c.fill("#f-password", "vera-third-password").await;
    c.fill("#f-password2", "vera-third-password").await;
    c.click("#save-password").await;
    c.wait_css("#login-notice").await;
    c.shot("password-changed").await;
    c.login("vera", "vera-third-password").await;
    c.logout().await;

    // The admin deletes her.
    c.login("admin", ADMIN_PASSWORD).await;
    c.open("/users").await;
    c.submit_confirmed("button[id^='delete-user-']").await;
    c.wait_css("#flash-ok").await;
    assert!(!c.text("#users-table").await.contains("vera"));
    c.shot("user-deleted").await;
    c.finish().await;
}

/// A running job of `group` created through the service (the heatmap reads what is there).
async fn running_job(a: &Service, group: i64, key: &str, kind: &str, conf: &str, tz: &str) {
    let mut input = tickwork_protocol::api::JobInput::new(group);
    input.key = Some(key.to_owned());
    input.start = true;
    input.spec.description = format!("the {key} job");
    input.spec.schedule_type = kind.parse().expect("a schedule type");
    input.spec.schedule_conf = conf.to_owned();
    input.spec.time_zone = tz.to_owned();
    input.spec.handler = "echo".to_owned();
    a.jobs()
        .create(&tickwork_admin::Principal::system(), input)
        .await
        .unwrap_or_else(|e| panic!("job {key}: {e}"));
}

/// Scrolls the page to the element matching `css`.
async fn scroll_to(c: &Console, css: &str) {
    c.wait_css(css)
        .await
        .scroll_into_view()
        .await
        .unwrap_or_else(|e| panic!("scroll to {css}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_heatmap_names_the_jobs_that_collide() {
    let Some(mut c) = Console::start("schedule").await else {
        return;
    };
    let system = tickwork_admin::Principal::system();
    let mut groups = Vec::new();
    for (app, title) in [("billing", "Billing"), ("reports", "Reports")] {
        let g = c
            .admin
            .groups()
            .create(
                &system,
                tickwork_protocol::api::GroupInput {
                    app_name: app.to_owned(),
                    title: title.to_owned(),
                    address_mode: None,
                    addresses: Vec::new(),
                },
            )
            .await
            .expect("group");
        groups.push(g.id);
    }
    let (billing, reports) = (groups[0], groups[1]);
    // Four nightly jobs at midnight UTC: the collision the page must name.
    for key in ["invoices", "dunning", "ledger-close"] {
        running_job(&c.admin, billing, key, "CRON", "0 0 0 * * ?", "UTC").await;
    }
    running_job(
        &c.admin,
        reports,
        "daily-report",
        "CRON",
        "0 0 0 * * ?",
        "UTC",
    )
    .await;
    running_job(
        &c.admin,
        reports,
        "berlin-export",
        "CRON",
        "0 30 2 * * ?",
        "Europe/Berlin",
    )
    .await;
    running_job(
        &c.admin,
        reports,
        "quarter-sync",
        "CRON",
        "0 */15 * * * ?",
        "UTC",
    )
    .await;
    running_job(
        &c.admin,
        billing,
        "business-hours",
        "CRON",
        "0 */5 8-17 ? * MON-FRI",
        "America/New_York",
    )
    .await;
    running_job(&c.admin, billing, "heartbeat", "FIX_RATE", "10m", "UTC").await;

    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;
    // A Monday in June (UTC, the admin's zone): every row a whole hour.
    c.open("/schedule?from=2027-06-07T00:00&hours=24&bucket=1m")
        .await;
    c.wait_css("#heatmap-chart svg").await;
    let midnight = c.text("#peaks-table tbody tr:first-child").await;
    assert!(midnight.starts_with("2027-06-07 00:00"), "{midnight}");
    for key in [
        "invoices",
        "dunning",
        "ledger-close",
        "daily-report",
        "quarter-sync",
    ] {
        assert!(
            midnight.contains(key),
            "{key} collides at midnight: {midnight}"
        );
    }
    assert!(c.text("#heatmap-groups").await.contains("billing"));
    c.shot("schedule-heatmap").await;
    scroll_to(&c, "#peaks").await;
    c.shot("schedule-heatmap-peaks").await;

    switch_to(&c, "调度热力图").await;
    c.wait_css("#heatmap-chart svg").await;
    assert!(c.text("h1").await.contains("调度热力图"));
    assert!(c.text("#peaks-table").await.contains("首次触发于"));
    c.shot("schedule-heatmap-zh").await;
    scroll_to(&c, "#peaks").await;
    c.shot("schedule-heatmap-peaks-zh").await;
    switch_to(&c, "Heatmap").await;

    // One group over three days in quarter hours.
    c.select("#filter-group", "reports").await;
    c.select("#filter-hours", "72").await;
    c.select("#filter-bucket", "15m").await;
    c.click("#apply-heatmap").await;
    c.wait_until("the reports group alone", || async {
        c.text("#heatmap-groups").await.contains("reports")
            && !c.text("#heatmap-groups").await.contains("billing")
    })
    .await;
    c.shot("schedule-heatmap-group").await;

    // A start that is no time: said on the page, nothing drawn.
    c.open("/schedule?from=soon").await;
    c.wait_css("#heatmap-error").await;
    assert!(!c.exists("#heatmap-chart").await);
    c.shot("schedule-heatmap-bad-input").await;
    c.finish().await;
}

/// The HTML inside the element matching `css` (an SVG's text is not "visible text").
async fn html(c: &Console, css: &str) -> String {
    c.wait_css(css).await.inner_html().await.unwrap_or_default()
}

/// The text of the option chosen in the select matching `css`.
async fn chosen(c: &Console, css: &str) -> String {
    c.text(&format!("{css} option:checked")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_periods_and_group_ticks_read_in_english_and_chinese() {
    let Some(mut c) = Console::start("labels").await else {
        return;
    };
    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;
    create_group(&mut c).await;
    let system = tickwork_admin::Principal::system();
    let reports = empty_group(&c.admin, "reports", "Monthly reports").await.id;
    let groups = c.admin.groups().list().await.expect("groups");
    let own = groups.iter().find(|g| g.app_name == APP).expect("group").id;

    // A script job with strategies of every kind, through the form: the options read as labels.
    c.open("/jobs/new").await;
    fill_job(
        &c,
        "labelled job",
        "CRON",
        "0 0 3 * * ?",
        "echo labelled run",
    )
    .await;
    c.select("#f-route_strategy", "LEAST_RECENTLY_USED").await;
    c.select("#f-block_strategy", "DISCARD_LATER").await;
    c.select("#f-misfire_strategy", "FIRE_ONCE_NOW").await;
    assert_eq!(chosen(&c, "#f-route_strategy").await, "Least recently used");
    assert_eq!(chosen(&c, "#f-block_strategy").await, "Discard later");
    assert_eq!(chosen(&c, "#f-schedule_type").await, "Cron");
    assert_eq!(chosen(&c, "#f-glue_type").await, "GLUE (Shell)");
    c.shot("job-form").await;
    c.click("#save").await;
    c.wait_css("#job-fires").await;
    let job_id = job_id_of_page(&c).await;
    let job = c.admin.jobs().get(job_id).await.expect("job");
    assert_eq!(job.spec.route_strategy.as_str(), "LEAST_RECENTLY_USED");
    assert_eq!(c.text("#job-route").await, "Least recently used");
    assert_eq!(
        attr(&c, "#job-route .coded", "title").await,
        "LEAST_RECENTLY_USED",
        "the code is the tooltip"
    );
    c.shot("job").await;

    // Run it once: the run's page names its state and trigger.
    c.click("#trigger").await;
    c.wait_css("#log").await;
    c.wait_until("the run to succeed", || async {
        c.driver.refresh().await.is_ok()
            && attr(&c, "#run-state", "data-state").await == "succeeded"
    })
    .await;
    assert_eq!(c.text("#run-state").await, "Succeeded");
    assert_eq!(c.text("#run-trigger").await, "Manual");
    c.wait_until("the whole log", || async {
        c.text("#log").await.contains("labelled run")
    })
    .await;
    c.shot("run").await;
    let run_url = c.driver.current_url().await.expect("url").to_string();

    c.open("/jobs").await;
    c.wait_css("#jobs-table").await;
    assert!(c.text("#jobs-table").await.contains("GLUE (Shell)"));
    c.shot("jobs").await;

    // The dashboard over the last 24 hours.
    c.open("/").await;
    c.select("#period-range", "24h").await;
    c.click("#apply-period").await;
    c.wait_until("the dashboard over 24 hours", || async {
        c.driver
            .current_url()
            .await
            .map(|u| u.as_str().contains("range=24h"))
            .unwrap_or(false)
    })
    .await;
    assert_eq!(c.text("#chart-runs h3").await, "Runs by state");
    let svg = html(&c, "#chart-runs").await;
    assert!(svg.contains(">runs per hour</text>"), "{svg}");
    assert!(svg.contains(">hour (UTC)</text>"), "{svg}");
    assert!(
        svg.contains(": 1</title></rect>"),
        "the run is drawn: {svg}"
    );
    c.shot("dashboard-24h").await;
    // A period that does not read: said, nothing drawn.
    c.open("/?range=dates&from=2026-11-05&to=2026-11-01").await;
    c.wait_css("#period-error").await;
    assert!(
        c.text("#period-error")
            .await
            .contains("is after the end date")
    );
    assert!(!c.exists("#chart-runs").await);
    c.shot("dashboard-bad-period").await;

    // The new user's groups: a box per group, by name.
    c.open("/users").await;
    c.fill("#f-username", "olga").await;
    c.fill("#f-password", "olga-password-1").await;
    c.select("#f-role", "operator").await;
    c.click(&format!("#f-group_ids-{reports}")).await;
    c.click(&format!("#f-group_ids-{own}")).await;
    assert!(c.text("#f-group_ids").await.contains("Monthly reports"));
    scroll_to(&c, "#user-form").await;
    c.shot("user-form-ticks").await;
    c.submit("#create-user").await;
    c.wait_css("#flash-ok").await;
    let olga = c
        .admin
        .users()
        .list(&system)
        .await
        .expect("users")
        .into_iter()
        .find(|u| u.username == "olga")
        .expect("olga");
    let mut ticked = olga.group_ids.clone();
    ticked.sort_unstable();
    let mut want = vec![own, reports];
    want.sort_unstable();
    assert_eq!(ticked, want);
    let row_box = format!("#user-{}-group-{reports}", olga.id);
    assert!(
        c.wait_css(&row_box)
            .await
            .is_selected()
            .await
            .expect("ticked")
    );
    c.shot("users").await;

    // Chinese: the same pages.
    switch_to(&c, "任务管理").await;
    c.shot("users-zh").await;
    scroll_to(&c, "#user-form").await;
    c.click(&format!("#f-group_ids-{reports}")).await;
    c.shot("user-form-ticks-zh").await;
    c.open("/jobs").await;
    c.wait_css("#jobs-table").await;
    c.shot("jobs-zh").await;
    c.open(&format!("/jobs/{job_id}/edit")).await;
    c.wait_css("#f-route_strategy").await;
    assert_eq!(chosen(&c, "#f-route_strategy").await, "最近最久未使用");
    assert_eq!(chosen(&c, "#f-block_strategy").await, "丢弃后续调度");
    assert_eq!(chosen(&c, "#f-misfire_strategy").await, "立即执行一次");
    c.shot("job-form-zh").await;
    c.open(&format!("/jobs/{job_id}")).await;
    c.wait_css("#job-route").await;
    assert_eq!(c.text("#job-route").await, "最近最久未使用");
    c.shot("job-zh").await;
    c.driver.goto(&run_url).await.expect("the run's page");
    c.wait_css("#run-state").await;
    assert_eq!(c.text("#run-state").await, "成功");
    assert_eq!(c.text("#run-trigger").await, "手动触发");
    c.shot("run-zh").await;
    c.open("/?range=7d").await;
    c.wait_css("#chart-runs svg").await;
    assert_eq!(c.text("#chart-runs h3").await, "运行次数（按状态）");
    assert!(
        html(&c, "#chart-runs")
            .await
            .contains(">每日运行次数</text>")
    );
    c.shot("dashboard-7d-zh").await;
    switch_to(&c, "Jobs").await;
    c.finish().await;
}

/// The element matching `css` inside the script editor (CodeMirror draws in the shadow root of
/// `#script-editor`), waiting for it to appear.
async fn in_editor(c: &Console, css: &str) -> WebElement {
    let js = format!(
        "const h = document.getElementById('script-editor');
         return h && h.shadowRoot ? h.shadowRoot.querySelector({css:?}) : null;"
    );
    c.wait_until(&format!("{css} in the script editor"), || async {
        match c.driver.execute(&js, vec![]).await {
            Ok(found) => found.element().map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

/// The text in the script editor of the open page (the editor's own document, which the form
/// writes back into its textarea on submit).
async fn editor_text(c: &Console) -> String {
    in_editor(c, ".cm-content").await;
    let ret = c
        .driver
        .execute(
            "return document.getElementById('script-source').editorView.state.doc.toString();",
            vec![],
        )
        .await
        .expect("the editor's text");
    ret.json().as_str().unwrap_or_default().to_owned()
}

/// Keys as WebDriver types them (`Key`s are private-use characters).
fn keys(parts: &[Key]) -> String {
    parts.iter().map(|k| k.value()).collect()
}

/// Replaces the script editor's text by typing `text` (after select all, delete).
async fn type_script(c: &Console, text: &str) {
    let content = in_editor(c, ".cm-content").await;
    let (ctrl, release) = (keys(&[Key::Control]), keys(&[Key::Null, Key::Backspace]));
    content
        .send_keys(format!("{ctrl}a{release}"))
        .await
        .expect("clear the editor");
    content.send_keys(text).await.expect("type");
}

/// Types `typed` into the focused editor and waits until its text is `want`.
async fn type_and_expect(c: &Console, typed: &str, want: &str) {
    let content = in_editor(c, ".cm-content").await;
    content.send_keys(typed).await.expect("type");
    c.wait_until(&format!("the editor to hold {want:?}"), || async {
        let got = editor_text(c).await;
        if got == want { Ok(()) } else { Err(got) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_editor_indents_highlights_and_compares_versions() {
    let Some(mut c) = Console::start("editor").await else {
        return;
    };
    let system = tickwork_admin::Principal::system();
    let group = empty_group(&c.admin, "editor", "Editor").await;
    let mut input = tickwork_protocol::api::JobInput::new(group.id);
    input.spec.description = "python report".to_owned();
    input.spec.schedule_type = "NONE".parse().expect("a schedule type");
    input.spec.glue_type = "GLUE_PYTHON".parse().expect("a glue type");
    input.spec.glue_source = "print('version one')".to_owned();
    let job = c
        .admin
        .jobs()
        .create(&system, input)
        .await
        .expect("python job")
        .id;

    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;
    c.open(&format!("/jobs/{job}/script")).await;
    // The editor replaced the textarea, which stays the form's field.
    in_editor(&c, ".cm-lineNumbers").await;
    assert!(
        !c.wait_css("#script-source")
            .await
            .is_displayed()
            .await
            .unwrap()
    );
    assert_eq!(editor_text(&c).await, "print('version one')");

    // Tab indents at the cursor, Shift-Tab takes a level off the line, Tab puts it back.
    type_script(&c, "").await;
    let enter = keys(&[Key::Enter]);
    type_and_expect(&c, &format!("import os{enter}"), "import os\n").await;
    // The new line of a block may come indented: Shift-Tab first, so Tab alone indents.
    let shift_tab = keys(&[Key::Shift, Key::Tab, Key::Null]);
    let tab = keys(&[Key::Tab]);
    type_and_expect(
        &c,
        &format!("if os.name:{enter}{shift_tab}{tab}print(os.name){enter}{shift_tab}{shift_tab}"),
        "import os\nif os.name:\n    print(os.name)\n",
    )
    .await;
    type_and_expect(
        &c,
        &format!("{tab}x = 1"),
        "import os\nif os.name:\n    print(os.name)\n    x = 1",
    )
    .await;
    type_and_expect(
        &c,
        &shift_tab,
        "import os\nif os.name:\n    print(os.name)\nx = 1",
    )
    .await;
    // Inside a line, Tab pads with spaces to the next stop (column 8).
    type_and_expect(
        &c,
        &tab,
        "import os\nif os.name:\n    print(os.name)\nx = 1   ",
    )
    .await;
    let back = keys(&[Key::Backspace, Key::Backspace, Key::Backspace]);
    type_and_expect(
        &c,
        &format!("{back}{enter}print('done'){enter}"),
        "import os\nif os.name:\n    print(os.name)\nx = 1\nprint('done')\n",
    )
    .await;
    let text = editor_text(&c).await;

    // Escape, then Tab leaves the editor (to the comment) and types nothing.
    in_editor(&c, ".cm-content")
        .await
        .send_keys(keys(&[Key::Escape, Key::Tab]))
        .await
        .expect("escape, tab");
    c.wait_until("the focus to leave the editor", || async {
        let id = c
            .driver
            .execute("return document.activeElement.id;", vec![])
            .await
            .map(|r| r.json().as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        if id == "script-comment" {
            Ok(())
        } else {
            Err(id)
        }
    })
    .await;
    assert_eq!(editor_text(&c).await, text);

    // Line numbers, and highlighted tokens drawn in their own colour (the highlighting's
    // styles apply under the console's CSP, which allows no inline style element).
    let seen = c
        .driver
        .execute(
            "const root = document.getElementById('script-editor').shadowRoot;
             const numbers = [...root.querySelectorAll('.cm-lineNumbers .cm-gutterElement')]
                 .map((n) => n.textContent);
             const spans = [...root.querySelectorAll('.cm-line span')];
             const colour = (text) => {
                 const s = spans.find((s) => s.textContent === text);
                 return s ? getComputedStyle(s).color : null;
             };
             const plain = getComputedStyle(root.querySelector('.cm-content')).color;
             return [numbers, colour('import'), colour(\"'done'\"), plain];",
            vec![],
        )
        .await
        .expect("line numbers and token colours");
    let (numbers, keyword, string, plain): (Vec<String>, Option<String>, Option<String>, String) =
        seen.convert().expect("numbers and colours");
    for n in ["1", "2", "3", "4", "5", "6"] {
        assert!(
            numbers.iter().any(|s| s == n),
            "line number {n}: {numbers:?}"
        );
    }
    for (what, colour) in [("the keyword", keyword), ("the string", string)] {
        let colour = colour.unwrap_or_else(|| panic!("{what} is a token span"));
        assert_ne!(colour, plain, "{what} is highlighted");
    }
    c.fill("#script-comment", "indented").await;
    c.shot("script-editor-typed").await;
    c.submit("#save-script").await;
    c.wait_css("#flash-ok").await;
    assert_eq!(editor_text(&c).await, text);
    let saved = c.admin.jobs().get(job).await.expect("job");
    assert_eq!(saved.spec.glue_source, text, "what was typed was saved");
    c.shot("script-editor-saved").await;
    scroll_to(&c, "#history").await;
    c.shot("script-history").await;

    // The changes from version 1 to 2 (the two newest are picked).
    c.click("#compare").await;
    c.wait_css("#diff").await;
    let removed = c.text("#diff tr.removed").await;
    assert!(removed.contains("print('version one')"), "{removed}");
    let added = c.text("#diff").await;
    assert!(added.contains("print(os.name)"), "{added}");
    assert!(c.exists("#diff tr.added").await);
    assert!(c.text("#diff-summary").await.contains("lines added"));
    c.shot("script-diff").await;

    // Version 1 into the editor, edited, saved as version 3.
    c.click("#load-old").await;
    c.wait_css("#loaded").await;
    c.wait_until("version 1 in the editor", || async {
        editor_text(&c).await == "print('version one')"
    })
    .await;
    let comment = c
        .wait_css("#script-comment")
        .await
        .value()
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(comment, "from version 1");
    c.shot("script-loaded").await;
    let end = keys(&[Key::Control, Key::End, Key::Null]);
    type_and_expect(
        &c,
        &format!("{end}{enter}print('again')"),
        "print('version one')\nprint('again')",
    )
    .await;
    c.submit("#save-script").await;
    c.wait_css("#flash-ok").await;
    assert!(c.text("#versions").await.contains("from version 1"));
    let versions = c.admin.scripts().versions(job).await.expect("versions");
    assert_eq!(versions.len(), 3);
    assert_eq!(versions[0].source, "print('version one')\nprint('again')");

    // In Chinese: the editor's page, a comparison and a loaded version.
    switch_to(&c, "任务管理").await;
    in_editor(&c, ".cm-lineNumbers").await;
    assert!(c.text("#editor-hint").await.contains("缩进"));
    c.shot("script-editor-zh").await;
    c.open(&format!("/jobs/{job}/script/diff?from=2&to=3"))
        .await;
    c.wait_css("#diff").await;
    assert!(c.text("#diff-summary").await.contains("行新增"));
    c.shot("script-diff-zh").await;
    c.click("#load-old").await;
    c.wait_css("#loaded").await;
    assert!(c.text("#loaded").await.contains("编辑器中载入的是版本 2。"));
    c.shot("script-loaded-zh").await;
    switch_to(&c, "Jobs").await;

    // A version that does not exist: said, nothing changed.
    c.open(&format!("/jobs/{job}/script?load=42")).await;
    c.wait_css("#message").await;
    assert!(
        c.text("#message")
            .await
            .contains("has no script version 42")
    );
    c.shot("script-load-unknown").await;
    assert_eq!(c.admin.scripts().versions(job).await.unwrap().len(), 3);
    c.finish().await;
}

/// The ids of the job list's rows, top to bottom.
async fn row_ids(c: &Console) -> Vec<i64> {
    let mut ids = Vec::new();
    for row in c
        .driver
        .find_all(By::Css("#jobs-table tbody tr[id^='job-']"))
        .await
        .expect("rows")
    {
        let id = row.id().await.expect("row id").unwrap_or_default();
        ids.push(id.trim_start_matches("job-").parse().expect("a job row"));
    }
    ids
}

/// Ticks the rows of `ids` and waits for the count to say so.
async fn tick(c: &Console, ids: &[i64]) {
    for id in ids {
        c.click(&format!("#tick-{id}")).await;
    }
    let n = ids.len().to_string();
    c.wait_until("the ticked count", || async {
        c.text("#ticked-count").await == n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_with_many_jobs_pages_sorts_and_acts_on_ticked_rows() {
    let Some(mut c) = Console::start("jobs-at-scale").await else {
        return;
    };
    let system = tickwork_admin::Principal::system();
    let group = empty_group(&c.admin, "batch", "Batch").await;
    // 125 running jobs (due once a year), their descriptions not in id order.
    let inputs = (0..125)
        .map(|i| {
            let mut input = tickwork_protocol::api::JobInput::new(group.id);
            input.start = true;
            input.spec.description = format!("export {:03}", (i * 37) % 125);
            input.spec.schedule_type = "CRON".parse().expect("a schedule type");
            input.spec.schedule_conf = "0 0 3 1 1 ?".to_owned();
            input.spec.handler = "export".to_owned();
            input
        })
        .collect();
    let created = c
        .admin
        .jobs()
        .create_many(&system, inputs)
        .await
        .expect("jobs");
    let ids: Vec<i64> = created.jobs.iter().map(|j| j.id).collect();
    // Three of page 2 run once; no executor serves their group, so each ends failed.
    for &id in &ids[50..53] {
        c.admin
            .jobs()
            .trigger(
                &system,
                id,
                Default::default(),
                "MANUAL".parse().expect("a trigger type"),
            )
            .await
            .expect("trigger");
    }

    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;
    c.open("/jobs").await;
    c.select("#page-size", "50").await;
    c.wait_until("page 1 of 3", || async {
        c.text("#page-of").await.ends_with("1 / 3")
    })
    .await;
    assert_eq!(c.text("#jobs-total").await, "125");
    c.click("#next-page").await;
    c.wait_until("page 2 of 3", || async {
        c.text("#page-of").await.ends_with("2 / 3")
    })
    .await;
    assert_eq!(row_ids(&c).await, ids[50..100]);
    c.wait_until("the failed last runs of the jobs run once", || async {
        c.driver.refresh().await.is_ok()
            && c.text(&format!("#last-{}", ids[52]))
                .await
                .contains("Failed")
    })
    .await;
    c.shot("jobs-page-2-of-50").await;

    // Sorted by description, then the other way round: back on page 1, the size kept.
    c.click("#sort-description").await;
    c.wait_until("sorted by description", || async {
        c.text("#sort-description").await.contains('▲')
    })
    .await;
    assert!(c.text("#jobs-table tbody tr").await.contains("export 000"));
    c.click("#sort-description").await;
    c.wait_until("sorted by description, descending", || async {
        c.text("#sort-description").await.contains('▼')
    })
    .await;
    assert!(c.text("#jobs-table tbody tr").await.contains("export 124"));
    assert_eq!(row_ids(&c).await.len(), 50);
    c.click("#sort-last_run").await;
    c.wait_until("sorted by last run", || async {
        c.text("#sort-last_run").await.contains('▲')
    })
    .await;
    let by_last = row_ids(&c).await;
    assert!(
        ids[50..53].iter().all(|id| by_last[..3].contains(id)),
        "{by_last:?}"
    );
    c.shot("jobs-sorted-by-last-run").await;

    // Three ticked rows stopped in one go.
    c.click("#sort-id").await;
    c.wait_until("sorted by id", || async {
        c.text("#sort-id").await.contains('▲')
    })
    .await;
    let three = [ids[0], ids[2], ids[4]];
    tick(&c, &three).await;
    c.shot("jobs-three-ticked").await;
    c.click("#bulk-stop").await;
    c.wait_css("#bulk-done").await;
    assert_eq!(c.text("#bulk-done").await, "3 stopped");
    for id in three {
        assert_eq!(c.text(&format!("#status-{id}")).await, "Stopped");
    }
    assert_eq!(c.text(&format!("#status-{}", ids[1])).await, "Started");
    assert_eq!(c.text("#ticked-count").await, "0");
    c.shot("jobs-three-stopped").await;

    // "Tick all on this page" ticks every row of the page, and only those.
    c.click("#tick-all").await;
    c.wait_until("every row ticked", || async {
        c.text("#ticked-count").await == "50"
    })
    .await;
    c.click("#tick-all").await;

    // In Chinese: three others stopped, then started again; one deleted after confirming.
    switch_to(&c, "任务管理").await;
    assert!(c.text("#jobs-table thead").await.contains("最近一次执行"));
    let others = [ids[6], ids[7], ids[8]];
    tick(&c, &others).await;
    c.click("#bulk-stop").await;
    // The page before the click already shows the English stop's flash in Chinese (its address
    // carries it), so wait for the rows' new state, not for the flash to appear.
    c.wait_until("three others stopped", || async {
        let mut stopped = c.text("#bulk-done").await == "已停止 3 个任务";
        for id in others {
            stopped &= c.text(&format!("#status-{id}")).await == "已停止";
        }
        stopped
    })
    .await;
    c.shot("jobs-three-stopped-zh").await;
    tick(&c, &others).await;
    c.click("#bulk-start").await;
    c.wait_until("started again", || async {
        c.text("#bulk-done").await == "已启动 3 个任务"
    })
    .await;
    tick(&c, &[ids[9]]).await;
    c.click_confirmed("#bulk-delete").await;
    c.wait_until("one deleted", || async {
        c.text("#bulk-done").await == "已删除 1 个任务"
    })
    .await;
    assert_eq!(c.text("#jobs-total").await, "124");
    c.open("/jobs?size=50&page=2").await;
    c.wait_css("#page-of").await;
    c.shot("jobs-page-2-zh").await;
    switch_to(&c, "Jobs").await;
    c.finish().await;
}

/// A stopped shell-script job of `group` under `key` running `script`.
async fn node_job(a: &Service, group: i64, key: &str, script: &str) {
    let mut input = tickwork_protocol::api::JobInput::new(group);
    input.key = Some(key.to_owned());
    input.spec.glue_type = "GLUE_SHELL".parse().expect("a glue type");
    input.spec.glue_source = format!("#!/bin/sh\n{script}\n");
    a.jobs()
        .create(&tickwork_admin::Principal::system(), input)
        .await
        .unwrap_or_else(|e| panic!("job {key}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_written_run_and_drawn_node_by_node() {
    let Some(mut c) = Console::start("workflows").await else {
        return;
    };
    let group = c
        .admin
        .groups()
        .create(
            &tickwork_admin::Principal::system(),
            tickwork_protocol::api::GroupInput {
                app_name: APP.to_owned(),
                title: "Console test".to_owned(),
                address_mode: None,
                addresses: Vec::new(),
            },
        )
        .await
        .expect("group")
        .id;
    node_job(&c.admin, group, "wf-load", "echo loaded").await;
    node_job(&c.admin, group, "wf-report", "echo \"reported $1\"").await;
    // Its run fails.
    node_job(&c.admin, group, "wf-broken", "exit 3").await;

    c.open("/").await;
    c.wait_css("#login-submit").await;
    c.login("admin", ADMIN_PASSWORD).await;
    c.wait_until("the executor registered", || async {
        c.open("/groups").await;
        c.text("#groups-table").await.contains("127.0.0.1")
    })
    .await;

    // A DAG with a cycle: the form comes back with the error, nothing saved.
    c.open("/workflows").await;
    c.wait_css("#workflow-form").await;
    c.fill("#f-key", "nightly").await;
    c.fill("#f-name", "Nightly load").await;
    c.select("#f-group", APP).await;
    c.select("#f-failure_policy", "CONTINUE").await;
    let cycle = "[[nodes]]\nkey = \"load\"\njob = \"wf-load\"\n[[nodes]]\nkey = \"report\"\njob = \"wf-report\"\n[[edges]]\nfrom = \"load\"\nto = \"report\"\n[[edges]]\nfrom = \"report\"\nto = \"load\"\n";
    c.fill("#f-dag", cycle).await;
    c.click("#create-workflow").await;
    c.wait_until("the cycle refused", || async {
        c.text("body").await.contains("cycle")
    })
    .await;
    assert!(!c.text("#workflows-table").await.contains("nightly"));
    c.shot("workflow-refused").await;

    let dag = "[[nodes]]\nkey = \"load\"\njob = \"wf-load\"\n[[nodes]]\nkey = \"report\"\njob = \"wf-report\"\nparams = \"day=${ctx.params}\"\n[[nodes]]\nkey = \"broken\"\njob = \"wf-broken\"\n[[edges]]\nfrom = \"load\"\nto = \"report\"\n[[edges]]\nfrom = \"load\"\nto = \"broken\"\n";
    c.fill("#f-dag", dag).await;
    c.submit("#create-workflow").await;
    c.wait_css("#flash-ok").await;
    c.wait_css("#dag #node-report").await;
    c.shot("workflow").await;

    // Run it: the instance page draws each node in its state and refreshes until it ends.
    c.fill("#run-params", "2026-11-28").await;
    c.click("#run-workflow").await;
    c.wait_css("#instance-state").await;
    c.wait_until("the instance ended", || async {
        let state = attr(&c, "#instance-state", "data-state").await;
        if state == "FAILED" {
            Ok(())
        } else {
            Err(state)
        }
    })
    .await;
    for (node, state) in [
        ("load", "SUCCEEDED"),
        ("report", "SUCCEEDED"),
        ("broken", "FAILED"),
    ] {
        assert_eq!(
            attr(&c, &format!("#node-{node}"), "data-state").await,
            state,
            "{node}"
        );
    }
    // Each node links to its run.
    assert!(c.exists("a[href^='/runs/'] #node-report").await);
    let context = c.text("#instance-context").await;
    assert!(context.contains("2026-11-28"), "{context}");
    c.shot("workflow-instance").await;

    // Mark the failed node succeeded: the instance stays ended, the node shows it.
    c.submit("#mark-broken").await;
    c.wait_css("#flash-ok").await;
    assert_eq!(attr(&c, "#node-broken", "data-state").await, "SUCCEEDED");
    assert_eq!(attr(&c, "#instance-state", "data-state").await, "FAILED");

    switch_to(&c, "工作流").await;
    let page = c.text("body").await;
    assert!(
        page.contains("工作流实例") && page.contains("失败"),
        "{page}"
    );
    c.shot("workflow-instance-zh").await;
    c.finish().await;
}
