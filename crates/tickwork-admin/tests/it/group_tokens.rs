//! Executor groups with their own access tokens, end to end: a real admin process and real
//! SDK executor processes. An executor configured with its group's token registers, and its
//! runs are dispatched (after a `/beat` probe), logged, killed and completed with that token;
//! one with the global token is refused; a rotation locks the old token out at once.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Api, Backend, Child, TestDb};
use tickwork_testkit::wait_until;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn executor_with_its_group_token_registers_and_completes_runs_end_to_end() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let logs = support::log_dir();
    let admin = Child::admin(&logs, "node-tokens", &db, "").await;
    let api = Api::new(&admin.address);
    let group = api.group("tokens-e2e").await;
    let token = api.post(&format!("groups/{group}/token"), json!({})).await["token"]
        .as_str()
        .expect("token")
        .to_owned();

    // An executor still on the global token is refused by this group.
    let stale = Child::executor(&logs, "stale", "tokens-e2e", &admin.address, &db.token).await;
    wait_until("the global token to be refused", WAIT, || async {
        stale.tail(50).contains("may not register").then_some(())
    })
    .await;

    let executor = Child::executor(&logs, "own", "tokens-e2e", &admin.address, &token).await;
    wait_until("the executor to register", WAIT, || async {
        let (_, list) = api
            .call("GET", &format!("groups/{group}/instances"), None)
            .await;
        let list = list.as_array()?.clone();
        let addresses: Vec<&str> = list.iter().filter_map(|i| i["address"].as_str()).collect();
        (addresses == [executor.address.as_str()]).then_some(())
    })
    .await;

    // Dispatch (with a /beat probe first), callback and log, all with the group's token.
    let count = api
        .post(
            "jobs",
            json!({ "group_id": group, "handler": "count", "route_strategy": "FAILOVER" }),
        )
        .await["id"]
        .as_i64()
        .expect("job id");
    let run = api.trigger(count).await;
    let done = api.run_reaches(run, "succeeded").await;
    assert_eq!(done["executor_address"], executor.address.as_str());
    let (status, log) = api.call("GET", &format!("runs/{run}/log"), None).await;
    assert_eq!(
        status, 200,
        "the log was not read with the group's token: {log}"
    );

    // Kill with the group's token.
    let slow = api
        .post(
            "jobs",
            json!({ "group_id": group, "handler": "slow", "params": "120s" }),
        )
        .await["id"]
        .as_i64()
        .expect("job id");
    let long = api.trigger(slow).await;
    api.run_reaches(long, "dispatched").await;
    let (status, killed) = api.call("POST", &format!("runs/{long}/kill"), None).await;
    assert_eq!(status, 200, "{killed}");
    assert_eq!(killed["state"], "killed");

    // A rotation locks the executor's token out at once: the admin now sends the new token,
    // which the executor refuses, and the run fails instead of running.
    api.post(&format!("groups/{group}/token"), json!({})).await;
    let refused = api.trigger(count).await;
    let failed = api.run_reaches(refused, "failed").await;
    assert!(
        failed["trigger_msg"]
            .as_str()
            .unwrap_or("")
            .contains("access token"),
        "{failed}"
    );
    drop(executor);
    drop(stale);
    drop(admin);
    db.drop_database().await;
}
