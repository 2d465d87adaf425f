//! `tickwork mcp` driven by a real MCP client, the official Python SDK (`pip install mcp`):
//! it starts the server over stdio against a real admin and executor, lists the tools, lists
//! jobs, triggers one and reads its run's log; a viewer's token may read but its trigger is a
//! tool error, and wrong arguments are a JSON-RPC error. The script prints what it saw as JSON
//! for the checks here. Runs on SQLite (the server only talks to the REST API); the Python
//! package missing skips the test loudly, or fails it when `CI` is set.

use serde_json::{Value, json};
use tickwork_it::{Cluster, tickwork_bin};

/// Connects with the SDK's `stdio_client` as the operator (the admin's token) and then as a
/// viewer, and prints one JSON object of what each call answered.
const CLIENT: &str = r#"
import asyncio, json, sys, time
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BIN, URL, OPERATOR, VIEWER, JOB = sys.argv[1:6]
FINAL = {"succeeded", "failed", "timed_out", "killed", "lost", "misfired", "skipped"}


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def error_code(e):
    inner = getattr(e, "error", None)
    return getattr(inner, "code", getattr(e, "code", None))


async def connect(token, work):
    params = StdioServerParameters(command=BIN, args=["mcp", "--admin", URL, "--token", token])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = dump(await session.initialize())
            return await work(session, init)


async def operator(session, init):
    out = {"protocol_version": init["protocolVersion"], "server": init["serverInfo"]["name"]}
    listed = await session.list_tools()
    out["tools"] = [t.name for t in listed.tools]
    out["schemas"] = {t.name: dump(t)["inputSchema"] for t in listed.tools}
    out["list_jobs"] = dump(await session.call_tool("list_jobs", {}))
    out["trigger_job"] = dump(await session.call_tool(
        "trigger_job", {"job": JOB, "params": "from an MCP client"}))
    run_id = out["trigger_job"]["structuredContent"]["id"]
    deadline = time.monotonic() + 60
    while True:
        run = dump(await session.call_tool("show_run", {"run_id": run_id}))
        if run["structuredContent"]["state"] in FINAL or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    out["show_run"] = run
    out["run_log"] = dump(await session.call_tool("run_log", {"run_id": run_id}))
    out["schedule_preview"] = dump(await session.call_tool(
        "schedule_preview", {"job": JOB, "n": 3}))
    heat = dump(await session.call_tool("schedule_heatmap", {"bucket": "1h"}))
    out["schedule_heatmap"] = {"isError": heat["isError"],
                               "buckets": heat["structuredContent"]["buckets"],
                               "text": heat["content"][0]["text"]}
    try:
        await session.call_tool("show_run", {"run_id": "not a number"})
        out["bad_arguments"] = None
    except Exception as e:
        out["bad_arguments"] = {"code": error_code(e), "message": str(e)}
    return out


async def viewer(session, init):
    return {
        "list_jobs": dump(await session.call_tool("list_jobs", {})),
        "trigger_job": dump(await session.call_tool("trigger_job", {"job": JOB})),
        "stop_job": dump(await session.call_tool("stop_job", {"job": JOB})),
    }


async def main():
    result = {"operator": await connect(OPERATOR, operator),
              "viewer": await connect(VIEWER, viewer)}
    print(json.dumps(result))


asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_mcp_client_drives_jobs_runs_and_logs_with_the_tokens_role() {
    let test = "a_python_mcp_client_drives_jobs_runs_and_logs_with_the_tokens_role";
    if !tickwork_testkit::python_module("mcp", "mcp", test) {
        return;
    }
    tickwork_it::run(tickwork_it::Backend::Sqlite, drive).await;
}

async fn drive(mut c: Cluster) {
    let api = c.start_admin().await;
    let (group, _) = c.executor_group("mcp-app", 1).await;
    api.create_job(json!({
        "key": "mcp-job", "group_id": group, "description": "said hello over MCP",
        "schedule_type": "CRON", "schedule_conf": "0 0 3 * * ?", "time_zone": "UTC",
        "glue_type": "GLUE_SHELL", "glue_source": "echo hello from tickwork\necho params: $1",
        "start": true,
    }))
    .await;
    let user = api
        .post(
            "/users",
            json!({"username": "vic", "password": "a-viewer-password", "role": "viewer"}),
        )
        .await;
    let viewer = api
        .post("/tokens", json!({"name": "mcp", "user_id": user["id"]}))
        .await["secret"]
        .as_str()
        .expect("the token's secret")
        .to_owned();

    let dir = tempfile::tempdir().expect("temporary folder");
    let script = dir.path().join("mcp_client.py");
    std::fs::write(&script, CLIENT).expect("write the client script");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(tickwork_bin())
        .args([&c.admin_url(), c.api_token(), &viewer, "mcp-job"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the client failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let seen: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    let op = &seen["operator"];

    // The handshake: this server's newest version (the SDK offers the same or a newer one).
    assert_eq!(op["protocol_version"], "2025-06-18", "{op}");
    assert_eq!(op["server"], "tickwork");
    assert_eq!(
        op["tools"],
        json!([
            "list_jobs",
            "show_job",
            "trigger_job",
            "start_job",
            "stop_job",
            "list_runs",
            "show_run",
            "run_log",
            "schedule_preview",
            "schedule_heatmap"
        ])
    );
    assert_eq!(op["schemas"]["trigger_job"]["required"], json!(["job"]));

    // Reads and a trigger, as the admin's token.
    let listed = &op["list_jobs"];
    assert_eq!(listed["isError"], false, "{listed}");
    assert_eq!(
        listed["structuredContent"]["items"][0]["key"], "mcp-job",
        "{listed}"
    );
    assert!(
        listed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("mcp-job")
    );
    let triggered = &op["trigger_job"];
    assert_eq!(triggered["isError"], false, "{triggered}");
    assert_eq!(
        triggered["structuredContent"]["params"],
        "from an MCP client"
    );
    assert_eq!(
        op["show_run"]["structuredContent"]["state"], "succeeded",
        "{}",
        op["show_run"]
    );
    let log = op["run_log"]["content"][0]["text"].as_str().unwrap();
    assert!(log.contains("hello from tickwork"), "{log}");
    assert!(log.contains("params: from an MCP client"), "{log}");
    assert_eq!(
        op["schedule_preview"]["structuredContent"]["fire_times"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "{}",
        op["schedule_preview"]
    );
    assert_eq!(op["schedule_heatmap"]["buckets"], 24);
    assert!(
        op["schedule_heatmap"]["text"]
            .as_str()
            .unwrap()
            .contains("running jobs from")
    );
    // Wrong arguments: the JSON-RPC error for invalid params.
    assert_eq!(op["bad_arguments"]["code"], -32602, "{op}");

    // A viewer reads, but its trigger and stop are tool errors naming the refusal.
    let v = &seen["viewer"];
    assert_eq!(v["list_jobs"]["isError"], false, "{v}");
    for tool in ["trigger_job", "stop_job"] {
        let refused = &v[tool];
        assert_eq!(refused["isError"], true, "{tool}: {refused}");
        let text = refused["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("forbidden") && text.contains("403"),
            "{tool}: {text}"
        );
    }
    let job = api.get("/jobs?text=mcp-job").await;
    assert_eq!(
        job["items"][0]["status"], "running",
        "the viewer stopped nothing"
    );
    let runs = api.get("/runs?limit=10").await;
    assert_eq!(runs["total"], 1, "the viewer triggered nothing: {runs}");
}
