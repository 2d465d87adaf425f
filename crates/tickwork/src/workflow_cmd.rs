//! `tickwork workflow`: workflows and their instances on an admin, through its REST API. A
//! workflow file holds `[[workflow]]` tables, the same as in `tickwork job export`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use serde::{Deserialize, Serialize};
use tickwork_client::Client;
use tickwork_protocol::workflows::{InstanceView, WorkflowInput, WorkflowView};

use crate::InputError;
use crate::remote::{Remote, cell, instant};

#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowCommand {
    /// List workflows.
    List,
    /// Show one workflow, in the file format.
    Show { key: String },
    /// Create or update the workflows of a TOML file (`[[workflow]]` tables), matched by key;
    /// each is checked whole by the admin, nothing saved of one that is refused.
    Apply { file: PathBuf },
    /// Delete a workflow with its ended instances.
    Delete { key: String },
    /// Run a workflow now.
    Run {
        key: String,
        /// The trigger's params: the context's `params`.
        #[arg(long, default_value = "")]
        params: String,
    },
    /// A workflow's newest instances.
    Instances {
        key: String,
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// One instance, node by node.
    Instance { id: i64 },
    /// Stop an instance: its running nodes killed, the others stopped.
    Stop { id: i64 },
    /// Resume a failed or stopped instance: succeeded nodes kept, the others run again.
    Resume { id: i64 },
    /// Mark a failed, skipped or stopped node succeeded.
    Mark { id: i64, node: String },
    /// Run one node of an ended instance again.
    Rerun { id: i64, node: String },
    /// Write every workflow as TOML (to stdout, or to --file).
    Export {
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

/// A file of workflows: `[[workflow]]` tables.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkflowFile {
    #[serde(default)]
    pub workflow: Vec<WorkflowInput>,
}

/// A stored workflow as its author writes it.
pub(crate) fn input_of(w: WorkflowView) -> WorkflowInput {
    WorkflowInput {
        key: w.key,
        name: w.name,
        group: w.group,
        dag: w.dag,
        failure_policy: w.failure_policy,
        max_instances: w.max_instances,
        overflow: w.overflow,
        schedule_type: w.schedule_type,
        schedule_conf: w.schedule_conf,
        time_zone: Some(w.time_zone),
        misfire_strategy: w.misfire_strategy,
        enabled: w.enabled,
    }
}

/// Creates or updates each workflow of `wanted` by key, leaving the ones already as written
/// alone; (created, updated, unchanged).
pub(crate) async fn apply(
    client: &Client,
    wanted: &[WorkflowInput],
) -> anyhow::Result<(usize, usize, usize)> {
    let existing = client.workflows().list().await?;
    let (mut created, mut updated, mut unchanged) = (0, 0, 0);
    for w in wanted {
        match existing.iter().find(|e| e.key == w.key) {
            None => {
                client
                    .workflows()
                    .create(w)
                    .await
                    .with_context(|| format!("workflow {:?}", w.key))?;
                created += 1;
            }
            Some(e) => {
                let mut current = input_of(e.clone());
                // A file without a zone means the admin's default, which the admin keeps.
                if w.time_zone.is_none() {
                    current.time_zone = None;
                }
                if &current == w {
                    unchanged += 1;
                } else {
                    client
                        .workflows()
                        .update(w)
                        .await
                        .with_context(|| format!("workflow {:?}", w.key))?;
                    updated += 1;
                }
            }
        }
    }
    Ok((created, updated, unchanged))
}

fn print_instance(i: &InstanceView) {
    println!(
        "instance {} of workflow {}: {} ({}, fired {}{})",
        i.id,
        i.workflow_id,
        i.state,
        i.trigger_type,
        instant(Some(i.created_at)),
        i.ended_at
            .map(|at| format!(", ended {}", instant(Some(at))))
            .unwrap_or_default()
    );
    println!("{:<24} {:<24} {:<10} RUNS", "NODE", "JOB", "STATE");
    for n in &i.nodes {
        let runs: Vec<String> = n.run_ids.iter().map(i64::to_string).collect();
        println!(
            "{:<24} {:<24} {:<10} {}",
            cell(&n.key, 24),
            cell(&n.job, 24),
            n.state,
            runs.join(",")
        );
    }
    if !i.context.is_empty() {
        println!(
            "context: {}",
            serde_json::to_string(&i.context).unwrap_or_default()
        );
    }
}

fn toml_of(file: &WorkflowFile) -> anyhow::Result<String> {
    toml::to_string_pretty(file).context("cannot write the workflows as TOML")
}

pub(crate) async fn run(remote: &Remote, command: WorkflowCommand) -> anyhow::Result<()> {
    let client = remote.client()?;
    let flows = client.workflows();
    match command {
        WorkflowCommand::List => {
            println!(
                "{:<24} {:<16} {:<9} {:<20} {:<8} {:<29} NAME",
                "KEY", "GROUP", "TYPE", "SCHEDULE", "ENABLED", "NEXT FIRE"
            );
            for w in flows.list().await? {
                println!(
                    "{:<24} {:<16} {:<9} {:<20} {:<8} {:<29} {}",
                    cell(&w.key, 24),
                    cell(&w.group, 16),
                    w.schedule_type.as_str(),
                    cell(&w.schedule_conf, 20),
                    w.enabled,
                    instant(w.next_fire_at),
                    cell(&w.name, 40)
                );
            }
        }
        WorkflowCommand::Show { key } => {
            let file = WorkflowFile {
                workflow: vec![input_of(flows.get(&key).await?)],
            };
            print!("{}", toml_of(&file)?);
        }
        WorkflowCommand::Apply { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let wanted: WorkflowFile = toml::from_str(&text)
                .map_err(|e| InputError(format!("{}: {e}", file.display())))?;
            let (created, updated, unchanged) = apply(&client, &wanted.workflow).await?;
            println!(
                "applied {} workflows: {created} created, {updated} updated, {unchanged} unchanged",
                wanted.workflow.len()
            );
        }
        WorkflowCommand::Delete { key } => {
            let w = flows.delete(&key).await?;
            println!("deleted workflow {} ({})", w.key, w.id);
        }
        WorkflowCommand::Run { key, params } => print_instance(&flows.run(&key, &params).await?),
        WorkflowCommand::Instances { key, limit } => {
            println!(
                "{:>8}  {:<10} {:<10} {:<29} ENDED",
                "ID", "STATE", "TRIGGER", "FIRED"
            );
            for i in flows.instances(&key, Some(limit)).await? {
                println!(
                    "{:>8}  {:<10} {:<10} {:<29} {}",
                    i.id,
                    i.state,
                    i.trigger_type,
                    instant(Some(i.created_at)),
                    instant(i.ended_at)
                );
            }
        }
        WorkflowCommand::Instance { id } => print_instance(&flows.instance(id).await?),
        WorkflowCommand::Stop { id } => print_instance(&flows.stop(id).await?),
        WorkflowCommand::Resume { id } => print_instance(&flows.resume(id).await?),
        WorkflowCommand::Mark { id, node } => {
            print_instance(&flows.mark_succeeded(id, &node).await?)
        }
        WorkflowCommand::Rerun { id, node } => print_instance(&flows.rerun(id, &node).await?),
        WorkflowCommand::Export { file } => {
            let mut all: Vec<WorkflowInput> =
                flows.list().await?.into_iter().map(input_of).collect();
            all.sort_by(|a, b| a.key.cmp(&b.key));
            let text = toml_of(&WorkflowFile { workflow: all })?;
            match file {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{text}"),
            }
        }
    }
    Ok(())
}
