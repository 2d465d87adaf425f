//! The REST API against its own OpenAPI document, driven by Schemathesis: a real admin and
//! executor with one of each resource, every operation called with generated valid and invalid
//! input. No answer may be a server error, have a status the document does not declare, or a
//! body that does not match its schema. Runs on SQLite (the API layer is the same on every
//! backend); Schemathesis missing skips the test loudly, or fails it when `CI` is set.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tickwork_it::{Cluster, wait_until};

/// Generated cases per operation and phase, and a time budget for the whole run: bounded so
/// that it takes a few minutes on a loaded 2-core machine.
const MAX_EXAMPLES: &str = "8";

/// Checks that hold for every answer. `positive_data_acceptance` is left out: the service
/// refuses schema-valid input that a schema cannot describe (a cron expression that never
/// fires, a group id that does not exist), and that refusal is right.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
response_headers_conformance,response_schema_conformance,negative_data_rejection,\
missing_required_header,unsupported_method,ignored_auth";

/// Path ids are those of the resources made first. A run's log and kill ask its executor while
/// the client waits, and an executor that refuses (the group's token was rotated under it by a
/// generated call) is answered 502 by design: a server error only for those two.
const SCHEMATHESIS_CONFIG: &str = r#"
[parameters]
"path.id" = 1
"path.version" = 1

[[operations]]
include-path-regex = '/runs/\{id\}/(log|kill)$'
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "502"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_api_conforms_to_its_openapi_document() {
    if !schemathesis_available().await {
        let line = "schemathesis is not installed (pip install schemathesis)";
        if std::env::var_os("CI").is_some() {
            panic!("{line}");
        }
        eprintln!("\n!!! SKIPPED rest_api_conforms_to_its_openapi_document: {line} !!!\n");
        return;
    }
    tickwork_it::run(tickwork_it::Backend::Sqlite, conformance).await;
}

async fn schemathesis_available() -> bool {
    tokio::process::Command::new("schemathesis")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

async fn conformance(mut c: Cluster) {
    let api = c.start_admin().await;
    // One of each resource with id 1, so that operations on `/{id}` reach their logic instead
    // of answering 404 to every generated id.
    let group = api.create_group("st-app").await;
    assert_eq!(group, 1, "the first group");
    let executor = c.start_executor("st-app").await;
    api.wait_live(group, std::slice::from_ref(&executor.address))
        .await;
    let job = api
        .create_job(json!({
            "group_id": group, "schedule_type": "NONE", "handler": "echo",
            "description": "conformance",
        }))
        .await;
    assert_eq!(job["id"], 1, "the first job");
    let run = api.trigger(1, Some("hello"), None).await;
    wait_until("the first run to finish", Duration::from_secs(30), || {
        let api = api.clone();
        async move { api.run(run.id).await.is_final().then_some(()) }
    })
    .await;
    api.post(
        "/alarm-channels",
        // A closed loopback port: a test send fails at once and goes nowhere.
        json!({"name": "st-hook", "kind": "webhook",
               "config": {"url": "http://127.0.0.1:9/hook", "secret": "st-secret"}}),
    )
    .await;
    // User 1 is the first admin, created at the first start.
    api.post("/tokens", json!({"name": "st-token", "user_id": 1}))
        .await;

    let dir = tempfile::tempdir().expect("temporary folder");
    let config = dir.path().join("schemathesis.toml");
    std::fs::write(&config, SCHEMATHESIS_CONFIG).expect("write the Schemathesis config");
    let out = tokio::process::Command::new("schemathesis")
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{}/openapi.json", api.base()))
        .args([
            "--header",
            &format!("Authorization: Bearer {}", c.api_token()),
        ])
        .args(["--checks", CHECKS])
        .args(["--max-examples", MAX_EXAMPLES])
        .args(["--workers", "1", "--seed", "20261123", "--no-color"])
        .args(["--request-timeout", "10", "--max-time", "240"])
        .current_dir(dir.path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().rev().take(40).collect::<Vec<_>>();
    eprintln!(
        "{}",
        summary.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    assert!(
        out.status.success(),
        "schemathesis found failures ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
