//! Workflows end to end through the command line, with a real admin and a real executor
//! process: jobs and a workflow over them imported from one TOML file, the workflow run with
//! params, the context passed from one node to the next through its result message, the
//! export read back unchanged, and bad files refused with a clear error.

use serde_json::Value;
use tickwork_it::{Cluster, WAIT, e2e, wait_until};

e2e!(the_cli_imports_runs_and_exports_a_workflow_with_its_jobs);

const APP: &str = "wf-cli";

const FILE: &str = r#"
[[job]]
key = "wf-extract"
group = "wf-cli"
handler = "echo"
params = 'tickwork-context: {"rows": "7"}'
status = "stopped"

[[job]]
key = "wf-report"
group = "wf-cli"
handler = "echo"
status = "stopped"

[[workflow]]
key = "cli-etl"
name = "CLI ETL"
group = "wf-cli"

[[workflow.dag.nodes]]
key = "extract"
job = "wf-extract"

[[workflow.dag.nodes]]
key = "report"
job = "wf-report"
params = "rows=${ctx.rows} day=${ctx.params}"

[[workflow.dag.edges]]
from = "extract"
to = "report"
"#;

async fn the_cli_imports_runs_and_exports_a_workflow_with_its_jobs(mut c: Cluster) {
    let api = c.start_admin().await;
    c.executor_group(APP, 1).await;
    let dir = tempfile::tempdir().expect("a folder");
    let cli = |args: Vec<String>| {
        let c = &c;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.cli(&args).await
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

    let file = dir.path().join("etl.toml");
    std::fs::write(&file, FILE).expect("write the file");
    let path = file.to_str().expect("a UTF-8 path");
    let (code, out, err) = cli(args(&["job", "import", path])).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("imported 2 jobs: 2 created"), "{out}");
    assert!(
        out.contains("imported 1 workflows: 1 created, 0 updated, 0 unchanged"),
        "{out}"
    );

    let (code, out, err) = cli(args(&[
        "workflow",
        "run",
        "cli-etl",
        "--params",
        "2026-11-28",
    ]))
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    let id: i64 = out
        .strip_prefix("instance ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no instance id in {out}"));
    let done: Value = wait_until("the instance succeeded", WAIT, || async {
        let i = api.get(&format!("/workflow-instances/{id}")).await;
        if i["state"] == "SUCCEEDED" {
            Ok(i)
        } else {
            Err(i["state"].clone())
        }
    })
    .await;
    assert_eq!(done["context"]["rows"], "7", "{done}");
    let report = done["nodes"][1]["run_ids"][0]
        .as_i64()
        .expect("the report's run");
    let run = api.get(&format!("/runs/{report}")).await;
    assert_eq!(run["params"], "rows=7 day=2026-11-28", "{run}");
    assert_eq!(run["trigger_type"], "WORKFLOW", "{run}");
    let (code, out, _) = cli(args(&["workflow", "instance", &id.to_string()])).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("SUCCEEDED"), "{out}");
    assert!(out.contains("report"), "{out}");

    // The export holds the workflow; imported again, nothing changes.
    let export = dir.path().join("export.toml");
    let export_path = export.to_str().expect("a UTF-8 path");
    let (code, out, err) = cli(args(&[
        "job",
        "export",
        "--group",
        APP,
        "--file",
        export_path,
    ]))
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("exported 2 jobs and 1 workflows"), "{out}");
    let text = std::fs::read_to_string(&export).expect("the export");
    assert!(
        text.contains("[[workflow]]") && text.contains("key = \"cli-etl\""),
        "{text}"
    );
    let (code, out, err) = cli(args(&["job", "import", export_path])).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("imported 1 workflows: 0 created, 0 updated, 1 unchanged"),
        "{out}"
    );

    // Bad files: a clear error, nothing changed.
    let cycle = dir.path().join("cycle.toml");
    let workflow = &FILE[FILE.find("[[workflow]]").expect("a workflow")..];
    let with_cycle = format!(
        "{}\n[[workflow.dag.edges]]\nfrom = \"report\"\nto = \"extract\"\n",
        workflow.replace("cli-etl", "cli-cycle")
    );
    std::fs::write(&cycle, with_cycle).expect("write");
    let (code, out, err) = cli(args(&[
        "workflow",
        "apply",
        cycle.to_str().expect("a UTF-8 path"),
    ]))
    .await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("cycle"), "{err}");
    let unknown = dir.path().join("unknown.toml");
    std::fs::write(&unknown, "[[workflow]]\nkey = \"x\"\nnmae = \"typo\"\n").expect("write");
    let (code, _, err) = cli(args(&[
        "workflow",
        "apply",
        unknown.to_str().expect("a UTF-8 path"),
    ]))
    .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nmae"), "{err}");
    let (code, out, _) = cli(args(&["workflow", "list"])).await;
    assert_eq!(code, Some(0));
    assert!(
        out.contains("cli-etl") && !out.contains("cli-cycle"),
        "{out}"
    );
}
