//! Submissions from code end to end: a client's key in an executor group, each schedule kind
//! fired by a real admin to a real executor, idempotence under the key, both meanings of
//! `rely_on_prev_cycle`, cancel (refused while a run is live unless asked to kill), the batch
//! form, completions read until acknowledged (an admin restarted between) or posted signed to
//! a webhook channel until it takes them, the CLI, and bad input refused with nothing changed.

use reqwest::Method;
use serde_json::{Value, json};
use tickwork_it::{AdminSettings, Api, Cluster, Run, WAIT, e2e, now_ms, wait_until};

e2e!(
    a_repeat_with_a_count_fires_exactly_that_many_times_then_finishes,
    now_and_at_fire_once_and_cron_until_cancelled,
    relying_on_the_previous_cycle_counts_from_the_end_of_each_run,
    a_cron_relying_on_the_previous_cycle_fires_at_its_first_match_after_each_end,
    a_running_submission_is_cancelled_only_with_kill,
    bad_submissions_are_refused_and_change_nothing,
    the_cli_submits_shows_and_cancels_by_key,
    completions_are_read_until_acknowledged_across_an_admin_restart,
    completions_are_posted_signed_to_the_feedback_channel_until_taken,
);

const APP: &str = "sub-app";

fn path(key: &str) -> String {
    format!("/submissions/{APP}/{key}")
}

/// The scheduled runs of a job (not manual ones), by fire time.
fn scheduled(runs: &[Run]) -> Vec<&Run> {
    let mut s: Vec<&Run> = runs.iter().filter(|r| r.fire_key.is_some()).collect();
    s.sort_by_key(|r| r.fire_key);
    s
}

/// Waits until the submission at `key` has no fire to come; the submission.
async fn wait_finished(api: &Api, key: &str) -> Value {
    let what = format!("submission {key} finished");
    wait_until(&what, WAIT, || async move {
        let s = api.get(&path(key)).await;
        if s["state"] == "finished" {
            Ok(s)
        } else {
            Err(s)
        }
    })
    .await
}

async fn a_repeat_with_a_count_fires_exactly_that_many_times_then_finishes(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    let body = json!({
        "handler": "echo", "params": "thrice",
        "schedule": { "kind": "repeat", "every_ms": 300, "count": 3 },
    });
    let put = api.put(&path("thrice"), body.clone()).await;
    assert_eq!(put["outcome"], "created", "{put}");
    let s = &put["submission"];
    assert_eq!(s["fires_left"], 3, "{s}");
    assert_eq!(s["rely_on_prev_cycle"], false, "{s}");
    let job = s["job_id"].as_i64().unwrap();

    let done = wait_finished(&api, "thrice").await;
    assert_eq!(done["fires_left"], 0, "{done}");
    assert_eq!(done["next_fire_at"], Value::Null, "{done}");
    let runs = api.wait_runs_in(job, "succeeded", 3).await;
    let fires = scheduled(&runs);
    assert_eq!(fires.len(), 3, "exactly the count: {runs:#?}");
    for w in fires.windows(2) {
        assert_eq!(w[1].scheduled_at - w[0].scheduled_at, 300, "{fires:#?}");
    }
    assert_eq!(fires[0].trigger_type, "FIX_RATE");
    assert_eq!(fires[0].handle_msg(), "thrice");

    // The same key again, ignore by default: nothing changes, nothing fires again.
    let again = api.put(&path("thrice"), body).await;
    assert_eq!(again["outcome"], "kept", "{again}");
    assert_eq!(again["submission"]["job_id"], job);
    assert_eq!(again["submission"]["state"], "finished");

    // Replace: the same job takes the new schedule and fires it.
    let replaced = api
        .put(
            &path("thrice"),
            json!({
                "handler": "echo", "params": "replaced", "on_conflict": "replace",
                "schedule": { "kind": "repeat", "every_ms": 200, "count": 2 },
            }),
        )
        .await;
    assert_eq!(replaced["outcome"], "replaced", "{replaced}");
    assert_eq!(replaced["submission"]["job_id"], job);
    assert_eq!(replaced["submission"]["state"], "active");
    wait_finished(&api, "thrice").await;
    let runs = api.wait_runs_in(job, "succeeded", 5).await;
    assert_eq!(scheduled(&runs).len(), 5, "3 then 2: {runs:#?}");
    let new: Vec<&Run> = runs
        .iter()
        .filter(|r| r.handle_msg() == "replaced")
        .collect();
    assert_eq!(new.len(), 2, "{runs:#?}");
}

async fn now_and_at_fire_once_and_cron_until_cancelled(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    let now = api
        .put(
            &path("now"),
            json!({ "handler": "echo", "params": "at once", "schedule": { "kind": "now" } }),
        )
        .await;
    let now_job = now["submission"]["job_id"].as_i64().unwrap();
    // A whole second at least 1.5 s ahead, given in another zone's civil time.
    let at = (now_ms() + 2500) / 1000 * 1000;
    let civil = jiff::Timestamp::from_millisecond(at)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::get("Asia/Shanghai").unwrap())
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    let later = api
        .put(
            &path("later"),
            json!({
                "handler": "echo", "time_zone": "Asia/Shanghai",
                "schedule": { "kind": "at", "at": civil },
            }),
        )
        .await;
    assert_eq!(later["submission"]["next_fire_at"], at, "{later}");
    let later_job = later["submission"]["job_id"].as_i64().unwrap();
    let cron = api
        .put(
            &path("every-second"),
            json!({ "handler": "echo", "schedule": { "kind": "cron", "cron": "*/1 * * * * ?" } }),
        )
        .await;
    let cron_job = cron["submission"]["job_id"].as_i64().unwrap();

    let runs = api.wait_runs_in(now_job, "succeeded", 1).await;
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].trigger_type, "ONCE");
    let runs = api.wait_runs_in(later_job, "succeeded", 1).await;
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].scheduled_at, at);
    wait_finished(&api, "now").await;
    wait_finished(&api, "later").await;

    api.wait_runs_in(cron_job, "succeeded", 2).await;
    // Cancelled between two fires, or with kill should one be under way.
    let gone = api
        .call(
            Method::DELETE,
            &format!("{}?kill=true", path("every-second")),
            None,
        )
        .await;
    assert_eq!(gone.status, 200, "{}", gone.body);
    assert_eq!(gone.body["job_id"], cron_job);
    let after = api.call(Method::GET, &path("every-second"), None).await;
    assert_eq!(after.status, 404, "{}", after.body);
    assert_eq!(after.error_code(), "not_found");
    let job = api
        .call(Method::GET, &format!("/jobs/{cron_job}"), None)
        .await;
    assert_eq!(job.status, 404, "the job went with it");
}

async fn relying_on_the_previous_cycle_counts_from_the_end_of_each_run(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    // Each run takes 600 ms, three times the interval.
    let relying = api
        .put(
            &path("relying"),
            json!({
                "handler": "sleep", "params": "600ms", "rely_on_prev_cycle": true,
                "schedule": { "kind": "repeat", "every_ms": 200, "count": 3 },
            }),
        )
        .await;
    assert_eq!(relying["submission"]["rely_on_prev_cycle"], true);
    let independent = api
        .put(
            &path("independent"),
            json!({
                "handler": "sleep", "params": "600ms",
                "schedule": { "kind": "repeat", "every_ms": 200, "count": 3 },
            }),
        )
        .await;
    let (relying, independent) = (
        relying["submission"]["job_id"].as_i64().unwrap(),
        independent["submission"]["job_id"].as_i64().unwrap(),
    );

    wait_finished(&api, "relying").await;
    let runs = api.wait_runs_in(relying, "succeeded", 3).await;
    let fires = scheduled(&runs);
    assert_eq!(fires.len(), 3, "{runs:#?}");
    for w in fires.windows(2) {
        let finished = w[0].finished_at.expect("ended before the next fire");
        assert!(
            w[1].scheduled_at >= finished + 200,
            "a fire less than 200 ms after the previous run ended: {fires:#?}"
        );
    }

    // Independent fires keep the rate whatever the runs take.
    wait_finished(&api, "independent").await;
    let runs = api.wait_runs_in(independent, "succeeded", 3).await;
    let fires = scheduled(&runs);
    assert_eq!(fires.len(), 3, "{runs:#?}");
    for w in fires.windows(2) {
        assert_eq!(w[1].scheduled_at - w[0].scheduled_at, 200, "{fires:#?}");
    }
}

async fn a_cron_relying_on_the_previous_cycle_fires_at_its_first_match_after_each_end(
    mut c: Cluster,
) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    // Every second, each run taking 1.5 s: the matches it runs over are passed.
    let put = api
        .put(
            &path("nightly"),
            json!({
                "handler": "sleep", "params": "1500ms", "rely_on_prev_cycle": true,
                "schedule": { "kind": "cron", "cron": "* * * * * ?" },
            }),
        )
        .await;
    assert_eq!(put["outcome"], "created", "{put}");
    assert_eq!(put["submission"]["rely_on_prev_cycle"], true, "{put}");
    let job_id = put["submission"]["job_id"].as_i64().unwrap();
    let job = api.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(job["schedule_type"], "CRON_AFTER_END", "{job}");

    let runs = api.wait_runs_in(job_id, "succeeded", 3).await;
    let ended: Vec<&Run> = scheduled(&runs)
        .into_iter()
        .filter(|r| r.finished_at.is_some())
        .collect();
    assert!(ended.len() >= 3, "{runs:#?}");
    for w in ended.windows(2) {
        let finished = w[0].finished_at.unwrap();
        // The next fire is the first whole second after the end: never while a run is live,
        // and no match skipped beyond those it ran over.
        assert_eq!(w[1].scheduled_at % 1000, 0, "{ended:#?}");
        assert!(
            w[1].scheduled_at > finished && w[1].scheduled_at <= finished + 1000,
            "not the first match after the end: {ended:#?}"
        );
    }
    let live = runs
        .iter()
        .filter(|r| r.state == "dispatched" || r.state == "running")
        .count();
    assert!(live <= 1, "one live run at a time: {runs:#?}");

    let cancelled = api
        .call(
            Method::DELETE,
            &format!("{}?kill=true", path("nightly")),
            None,
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
}

async fn a_running_submission_is_cancelled_only_with_kill(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    let put = api
        .put(
            &path("long"),
            json!({ "handler": "sleep", "params": "60s", "schedule": { "kind": "now" } }),
        )
        .await;
    let job = put["submission"]["job_id"].as_i64().unwrap();
    let run = wait_until("the run dispatched", WAIT, || async {
        let runs = api.runs(job).await;
        match runs.into_iter().next() {
            Some(r) if r.state == "dispatched" => Ok(r),
            other => Err(other),
        }
    })
    .await;

    let refused = api.call(Method::DELETE, &path("long"), None).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.error_code(), "conflict");
    assert_eq!(api.run(run.id).await.state, "dispatched", "nothing changed");
    assert_eq!(api.get(&path("long")).await["job_id"], job);

    let killed = api
        .call(Method::DELETE, &format!("{}?kill=true", path("long")), None)
        .await;
    assert_eq!(killed.status, 200, "{}", killed.body);
    let gone = api
        .call(Method::GET, &format!("/runs/{}", run.id), None)
        .await;
    assert_eq!(gone.status, 404, "the run went with its job");
    let audit = api.get("/audit?size=100").await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    // (A one-shot's job stopped itself after its fire: no stop of its own to record.)
    for a in ["submission.create", "run.kill", "submission.cancel"] {
        assert!(actions.contains(&a), "no {a} in {actions:?}");
    }
}

async fn bad_submissions_are_refused_and_change_nothing(mut c: Cluster) {
    let api = c.start_admin().await;
    api.create_group(APP).await;
    let good = json!({ "handler": "echo", "schedule": { "kind": "now" } });
    let with = |field: &str, value: Value| {
        let mut b = good.clone();
        b[field] = value;
        b
    };
    let long_key = "k".repeat(101);
    let cases: Vec<(String, Value, u16, &str)> = vec![
        ("/submissions/no-such-app/k".into(), good.clone(), 404, ""),
        (
            path("k"),
            with(
                "schedule",
                json!({ "kind": "cron", "cron": "0 0 25 * * ?" }),
            ),
            400,
            "schedule.cron",
        ),
        (
            path("k"),
            with(
                "schedule",
                json!({ "kind": "repeat", "every_ms": 1000, "count": -1 }),
            ),
            400,
            "schedule.count",
        ),
        (
            path("k"),
            with("schedule", json!({ "kind": "repeat", "every_ms": 5 })),
            400,
            "schedule.every_ms",
        ),
        (
            path("k"),
            with("schedule", json!({ "kind": "at", "at": "soon" })),
            400,
            "schedule.at",
        ),
        (
            path("k"),
            with("schedule", json!({ "kind": "weekly" })),
            400,
            "",
        ),
        (
            path("k"),
            with("time_zone", json!("Mars/Olympus")),
            400,
            "time_zone",
        ),
        (path("k"), with("handler", json!(" ")), 400, "handler"),
        (path("k"), with("colour", json!("blue")), 400, ""),
        (path(&long_key), good.clone(), 400, "key"),
        (path("a%20b"), good.clone(), 400, "key"),
    ];
    for (at, body, status, field) in cases {
        let r = api.call(Method::PUT, &at, Some(&body)).await;
        assert_eq!(r.status, status, "{at} {body}: {}", r.body);
        if !field.is_empty() {
            assert_eq!(r.body["field"], field, "{at} {body}: {}", r.body);
        }
    }
    let jobs = api.get("/jobs").await;
    assert_eq!(jobs["total"], 0, "nothing was created: {jobs}");

    // A batch: each item on its own, a result per item in order.
    let batch = api
        .post(
            &format!("/submissions/{APP}"),
            json!({ "items": [
                { "key": "one", "submission": good },
                { "key": "two", "submission": with("schedule", json!({ "kind": "cron", "cron": "x" })) },
                { "key": "one", "submission": good },
            ] }),
        )
        .await;
    let results = batch["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{batch}");
    assert_eq!(results[0]["outcome"], "created", "{batch}");
    assert_eq!(results[1]["error"]["code"], "invalid_input", "{batch}");
    assert_eq!(results[2]["outcome"], "kept", "{batch}");
    assert_eq!(api.get("/jobs").await["total"], 1);
    let empty = api
        .call(
            Method::POST,
            &format!("/submissions/{APP}"),
            Some(&json!({ "items": [] })),
        )
        .await;
    assert_eq!(empty.status, 400, "{}", empty.body);
}

async fn the_cli_submits_shows_and_cancels_by_key(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    let cli = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let c = &c;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.cli(&args).await
        }
    };
    let submit = [
        "submit",
        APP,
        "cli-key",
        "--handler",
        "echo",
        "--params",
        "from the cli",
        "--every",
        "250ms",
        "--count",
        "2",
    ];
    let (code, out, err) = cli(&submit).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("created\n"), "{out}");
    assert!(out.contains("fires left 2"), "{out}");
    let (code, out, err) = cli(&submit).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("kept\n"), "{out}");

    let s = wait_finished(&api, "cli-key").await;
    let job = s["job_id"].as_i64().unwrap();
    assert_eq!(api.wait_runs_in(job, "succeeded", 2).await.len(), 2);
    let (code, out, _) = cli(&["submission", "show", APP, "cli-key"]).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("state      finished"), "{out}");

    // Bad input: a clear error and exit status 2 (clap's) or 1 (the admin's answer).
    let (code, _, err) = cli(&["submit", APP, "k", "--handler", "echo"]).await;
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = cli(&["submit", APP, "k", "--handler", "echo", "--every", "soon"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--every"), "{err}");
    let (code, _, err) = cli(&["submit", "nope", "k", "--handler", "echo", "--now"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not found"), "{err}");

    let (code, out, err) = cli(&["submission", "completions", APP, "--ack"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("acknowledged 2"), "{out}");
    assert_eq!(out.matches("from the cli").count(), 2, "{out}");
    let (code, out, _) = cli(&["submission", "completions", APP]).await;
    assert_eq!(code, Some(0));
    assert_eq!(out.lines().count(), 1, "only the header: {out}");

    let (code, out, err) = cli(&["submission", "cancel", APP, "cli-key"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.starts_with(&format!("cancelled {APP} cli-key (job {job})")),
        "{out}"
    );
    let after = api.call(Method::GET, &path("cli-key"), None).await;
    assert_eq!(after.status, 404);
}

async fn completions_are_read_until_acknowledged_across_an_admin_restart(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    api.put(
        &path("fed-back"),
        json!({
            "handler": "echo", "params": "done",
            "schedule": { "kind": "repeat", "every_ms": 200, "count": 3 },
        }),
    )
    .await;
    api.put(
        &path("failing"),
        json!({ "handler": "no-such-handler", "schedule": { "kind": "now" } }),
    )
    .await;
    let feed = format!("/completions/{APP}");
    let all = wait_until("four completions", WAIT, || async {
        let page = api.get(&feed).await;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 4 {
            Ok(items)
        } else {
            Err(page)
        }
    })
    .await;
    let of = |key: &str| -> Vec<&Value> { all.iter().filter(|c| c["key"] == key).collect() };
    assert_eq!(of("fed-back").len(), 3, "{all:?}");
    assert!(
        of("fed-back")
            .iter()
            .all(|c| c["state"] == "succeeded" && c["handle_msg"] == "done"),
        "{all:?}"
    );
    assert_eq!(of("failing")[0]["state"], "failed", "{all:?}");
    let ids: Vec<i64> = all.iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first: {ids:?}");

    // Read forward without acknowledging, then acknowledge the first two.
    let page = api.get(&format!("{feed}?after={}&limit=1", ids[1])).await;
    assert_eq!(page["items"][0]["id"], ids[2], "{page}");
    let acked = api
        .post(&format!("{feed}/ack"), json!({ "ids": [ids[0], ids[1]] }))
        .await;
    assert_eq!(acked["acked"], 2);

    // An admin restart loses nothing that was not acknowledged.
    c.stop_admin().await;
    let api = c.start_admin().await;
    let left = api.get(&feed).await;
    let left: Vec<i64> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(left, ids[2..], "the unacknowledged ones, again");
    let acked = api
        .post(&format!("{feed}/ack"), json!({ "ids": left }))
        .await;
    assert_eq!(acked["acked"], 2);
    assert_eq!(api.get(&feed).await["items"], json!([]));
    let bad = api
        .call(
            Method::POST,
            &format!("{feed}/ack"),
            Some(&json!({ "ids": [] })),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    let bad = api
        .call(Method::GET, &format!("{feed}?limit=0"), None)
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
}

async fn completions_are_posted_signed_to_the_feedback_channel_until_taken(mut c: Cluster) {
    use hmac::{Hmac, KeyInit, Mac};
    // Retries come quickly here: alarms' backoff (which completions share) of 200 ms.
    c.settings = AdminSettings {
        extra_toml: "[alarm]\nbackoff_ms = 200\n[monitor]\nalarm_interval_ms = 100\n",
        ..AdminSettings::default()
    };
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    let receiver = tickwork_testkit::webhook::Receiver::start().await;
    // The first post is refused, the second taken.
    receiver.script("/feedback", &[500, 200]);
    let secret = "whsec-submissions";
    api.post(
        "/alarm-channels",
        json!({ "name": "feedback", "kind": "webhook",
                "config": { "url": receiver.url("/feedback"), "secret": secret } }),
    )
    .await;
    api.post(
        "/alarm-channels",
        json!({ "name": "chat", "kind": "slack", "config": { "url": receiver.url("/chat") } }),
    )
    .await;
    for (channel, field) in [("nope", "feedback_channel"), ("chat", "feedback_channel")] {
        let refused = api
            .call(
                Method::PUT,
                &path("hooked"),
                Some(&json!({ "handler": "echo", "schedule": { "kind": "now" },
                              "feedback_channel": channel })),
            )
            .await;
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert_eq!(refused.body["field"], field, "{}", refused.body);
    }

    let put = api
        .put(
            &path("hooked"),
            json!({ "handler": "echo", "params": "posted", "schedule": { "kind": "now" },
                    "feedback_channel": "feedback" }),
        )
        .await;
    assert_eq!(put["submission"]["feedback_channel"], "feedback", "{put}");
    let got = receiver.wait_for("/feedback", 2, WAIT).await;
    let (first, second) = (&got[0], &got[1]);
    assert_eq!(first.body, second.body, "the same completion, posted again");
    let completion = &second.json()["completion"];
    assert_eq!(completion["key"], "hooked", "{completion}");
    assert_eq!(completion["state"], "succeeded", "{completion}");
    assert_eq!(completion["handle_msg"], "posted", "{completion}");
    for r in [first, second] {
        assert_eq!(
            r.headers["x-tickwork-delivery"],
            completion["id"].to_string(),
            "the completion's id, for the receiver to drop repeats"
        );
        let ts = &r.headers["x-tickwork-timestamp"];
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{ts}.{}", r.body).as_bytes());
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(r.headers["x-tickwork-signature"], format!("sha256={hex}"));
    }
    // Taken: acknowledged, so it is not read or posted again.
    let feed = format!("/completions/{APP}");
    wait_until("the completion acknowledged", WAIT, || async {
        let page = api.get(&feed).await;
        if page["items"] == json!([]) {
            Ok(())
        } else {
            Err(page)
        }
    })
    .await;
    assert_eq!(receiver.requests("/feedback").len(), 2);
}
