//! `tickwork job …`: list, show, add, edit, start, stop, trigger, delete, export and import
//! jobs through the admin's JSON API. Export and import use a TOML file keyed by each job's
//! stable key, with groups and child jobs named by app name and key rather than database id,
//! so that jobs can live in git and move between admins.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use tickwork_client::Client;
use tickwork_core::{BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType};
use tickwork_protocol::api::{JobInput, JobQuery, JobView, TriggerInput};

use crate::InputError;
use crate::remote::{Remote, cell, instant};

#[derive(Debug, Subcommand)]
pub(crate) enum JobCommand {
    /// List jobs.
    List {
        /// Only jobs of this executor group (app name).
        #[arg(long)]
        group: Option<String>,
        /// Only `running` or `stopped` jobs.
        #[arg(long)]
        status: Option<String>,
        /// Text to find in description, handler, key or owner.
        #[arg(long)]
        text: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// Show one job, in the export format.
    Show { id: i64 },
    /// Create a job.
    Add(JobFields),
    /// Change fields of a job; the others keep their values.
    Edit {
        id: i64,
        #[command(flatten)]
        fields: JobFields,
    },
    /// Start a job: it fires from its next scheduled instant.
    Start { id: i64 },
    /// Stop a job.
    Stop { id: i64 },
    /// Fire a job once now.
    Trigger {
        id: i64,
        /// Params of this run (default: the job's own).
        #[arg(long)]
        params: Option<String>,
        /// Run on this executor instead of routing.
        #[arg(long)]
        address: Option<String>,
    },
    /// Delete a job and its runs.
    Delete { id: i64 },
    /// Write jobs as TOML (to stdout, or to --file).
    Export {
        /// Only jobs of this executor group (app name).
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Create or update jobs from a TOML file, matched by key. Everything is checked before
    /// anything changes.
    Import { file: PathBuf },
}

/// Job fields on the command line; on `edit`, the ones given replace the job's values.
#[derive(Debug, Default, Args)]
pub(crate) struct JobFields {
    /// Stable key (add only; generated when absent).
    #[arg(long)]
    key: Option<String>,
    /// Executor group (app name); required on add.
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    description: Option<String>,
    #[arg(long)]
    owner: Option<String>,
    /// CRON, FIX_RATE, FIX_DELAY, ONCE or NONE.
    #[arg(long = "type")]
    schedule_type: Option<ScheduleType>,
    /// Cron expression, interval (`30`, `500ms`, `5m`) or instant, per the type.
    #[arg(long)]
    schedule: Option<String>,
    /// IANA time zone of the schedule.
    #[arg(long)]
    tz: Option<String>,
    #[arg(long)]
    misfire: Option<MisfireStrategy>,
    #[arg(long)]
    route: Option<RouteStrategy>,
    /// Handler name (BEAN jobs).
    #[arg(long)]
    handler: Option<String>,
    #[arg(long)]
    params: Option<String>,
    #[arg(long)]
    block: Option<BlockStrategy>,
    /// Seconds; 0 = none.
    #[arg(long, allow_negative_numbers = true)]
    timeout: Option<i32>,
    #[arg(long, allow_negative_numbers = true)]
    retries: Option<i32>,
    /// Milliseconds before the first retry (doubling after).
    #[arg(long, allow_negative_numbers = true)]
    backoff_ms: Option<i64>,
    /// BEAN, GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP, GLUE_POWERSHELL, …
    #[arg(long)]
    glue_type: Option<GlueType>,
    /// A file holding the script of a script job.
    #[arg(long)]
    script: Option<PathBuf>,
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Start the job right away (add only).
    #[arg(long)]
    start: bool,
}

/// One job in an export file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobEntry {
    pub key: String,
    /// The executor group's app name.
    pub group: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub alarm_channels: String,
    pub schedule_type: ScheduleType,
    #[serde(default)]
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire_strategy: MisfireStrategy,
    pub route_strategy: RouteStrategy,
    #[serde(default)]
    pub handler: String,
    #[serde(default)]
    pub params: String,
    pub block_strategy: BlockStrategy,
    #[serde(default)]
    pub timeout_s: i32,
    #[serde(default)]
    pub retry_count: i32,
    #[serde(default)]
    pub retry_backoff_ms: i64,
    /// Keys of the jobs fired when a run of this one succeeds.
    #[serde(default)]
    pub children: Vec<String>,
    #[serde(default)]
    pub priority: i32,
    pub glue_type: GlueType,
    #[serde(default)]
    pub glue_source: String,
    /// `running` or `stopped`.
    pub status: String,
}

/// An export file: `[[job]]` tables.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobFile {
    #[serde(default)]
    pub job: Vec<JobEntry>,
}

fn input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// App name -> group id, and back.
async fn groups(client: &Client) -> anyhow::Result<HashMap<String, i64>> {
    Ok(client
        .groups_list()
        .await?
        .into_iter()
        .map(|g| (g.app_name, g.id))
        .collect())
}

fn group_id(groups: &HashMap<String, i64>, app: &str) -> anyhow::Result<i64> {
    groups.get(app).copied().ok_or_else(|| {
        input(format!(
            "executor group {app:?} does not exist on the admin; create it first"
        ))
    })
}

/// The export entry of `job`.
fn entry(job: &JobView, apps: &HashMap<i64, String>, keys: &HashMap<i64, String>) -> JobEntry {
    JobEntry {
        key: job.key.clone(),
        group: apps.get(&job.group_id).cloned().unwrap_or_default(),
        description: job.description.clone(),
        owner: job.owner.clone(),
        alarm_channels: job.alarm_channels.clone(),
        schedule_type: job.schedule_type,
        schedule_conf: job.schedule_conf.clone(),
        time_zone: job.time_zone.clone(),
        misfire_strategy: job.misfire_strategy,
        route_strategy: job.route_strategy,
        handler: job.handler.clone(),
        params: job.params.clone(),
        block_strategy: job.block_strategy,
        timeout_s: job.timeout_s,
        retry_count: job.retry_count,
        retry_backoff_ms: job.retry_backoff_ms,
        children: job
            .child_job_ids
            .iter()
            .map(|id| keys.get(id).cloned().unwrap_or_else(|| id.to_string()))
            .collect(),
        priority: job.priority,
        glue_type: job.glue_type,
        glue_source: job.glue_source.clone(),
        status: job.status.clone(),
    }
}

/// The API input of an entry, children left out (they are set once every job exists).
fn entry_input(e: &JobEntry, group_id: i64) -> JobInput {
    JobInput {
        key: Some(e.key.clone()),
        description: e.description.clone(),
        owner: e.owner.clone(),
        alarm_channels: e.alarm_channels.clone(),
        schedule_type: e.schedule_type,
        schedule_conf: e.schedule_conf.clone(),
        time_zone: Some(e.time_zone.clone()),
        misfire_strategy: e.misfire_strategy,
        route_strategy: e.route_strategy,
        handler: e.handler.clone(),
        params: e.params.clone(),
        block_strategy: e.block_strategy,
        timeout_s: e.timeout_s,
        retry_count: e.retry_count,
        retry_backoff_ms: e.retry_backoff_ms,
        priority: e.priority,
        glue_type: e.glue_type,
        glue_source: e.glue_source.clone(),
        ..JobInput::new(group_id)
    }
}

/// Lays the fields given on the command line over `base`.
fn apply(f: &JobFields, base: &mut JobInput, groups: &HashMap<String, i64>) -> anyhow::Result<()> {
    if let Some(g) = &f.group {
        base.group_id = group_id(groups, g)?;
    }
    let set = |slot: &mut String, v: &Option<String>| {
        if let Some(v) = v {
            slot.clone_from(v);
        }
    };
    set(&mut base.description, &f.description);
    set(&mut base.owner, &f.owner);
    set(&mut base.schedule_conf, &f.schedule);
    set(&mut base.handler, &f.handler);
    set(&mut base.params, &f.params);
    if let Some(v) = f.schedule_type {
        base.schedule_type = v;
    }
    if let Some(v) = &f.tz {
        base.time_zone = Some(v.clone());
    }
    if let Some(v) = f.misfire {
        base.misfire_strategy = v;
    }
    if let Some(v) = f.route {
        base.route_strategy = v;
    }
    if let Some(v) = f.block {
        base.block_strategy = v;
    }
    if let Some(v) = f.timeout {
        base.timeout_s = v;
    }
    if let Some(v) = f.retries {
        base.retry_count = v;
    }
    if let Some(v) = f.backoff_ms {
        base.retry_backoff_ms = v;
    }
    if let Some(v) = f.glue_type {
        base.glue_type = v;
    }
    if let Some(v) = f.priority {
        base.priority = v;
    }
    if let Some(path) = &f.script {
        base.glue_source = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the script {}", path.display()))?;
    }
    Ok(())
}

fn print_toml(file: &JobFile, out: Option<&PathBuf>) -> anyhow::Result<()> {
    let text = toml::to_string_pretty(file).context("cannot write the jobs as TOML")?;
    match out {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// Runs one `tickwork job` command.
pub(crate) async fn run(remote: &Remote, command: JobCommand) -> anyhow::Result<()> {
    let client = remote.client()?;
    match command {
        JobCommand::List {
            group,
            status,
            text,
            limit,
        } => {
            let groups = groups(&client).await?;
            let group_id = group.map(|g| group_id(&groups, &g)).transpose()?;
            let page = client
                .jobs_list(&JobQuery {
                    group_id,
                    status,
                    text,
                    limit: Some(limit),
                    ..JobQuery::default()
                })
                .await?;
            println!(
                "{:>6}  {:<24} {:<8} {:<9} {:<20} {:<29} DESCRIPTION",
                "ID", "KEY", "STATUS", "TYPE", "SCHEDULE", "NEXT FIRE"
            );
            for j in &page.items {
                println!(
                    "{:>6}  {:<24} {:<8} {:<9} {:<20} {:<29} {}",
                    j.id,
                    cell(&j.key, 24),
                    j.status,
                    j.schedule_type.as_str(),
                    cell(&j.schedule_conf, 20),
                    instant(j.next_fire_at),
                    cell(&j.description, 40)
                );
            }
            println!("({} of {} jobs)", page.items.len(), page.total);
        }
        JobCommand::Show { id } => {
            let job = client.job_get(id).await?;
            let file = export(&client, vec![job]).await?;
            print_toml(&file, None)?;
        }
        JobCommand::Add(fields) => {
            let groups = groups(&client).await?;
            let app = fields
                .group
                .clone()
                .ok_or_else(|| input("--group is required"))?;
            let mut job = JobInput {
                key: fields.key.clone(),
                start: fields.start,
                ..JobInput::new(group_id(&groups, &app)?)
            };
            apply(&fields, &mut job, &groups)?;
            let job = client.job_create(&job).await?;
            println!("created job {} ({}), {}", job.id, job.key, job.status);
        }
        JobCommand::Edit { id, fields } => {
            if fields.key.is_some() || fields.start {
                return Err(input("--key and --start apply to `job add` only"));
            }
            let groups = groups(&client).await?;
            let current = client.job_get(id).await?;
            let mut job = JobInput::from(&current);
            apply(&fields, &mut job, &groups)?;
            let job = client.job_update(id, &job).await?;
            println!(
                "updated job {} ({}), version {}",
                job.id, job.key, job.version
            );
        }
        JobCommand::Start { id } => {
            let job = client.job_start(id).await?;
            println!(
                "started job {}; next fire {}",
                job.id,
                instant(job.next_fire_at)
            );
        }
        JobCommand::Stop { id } => {
            let job = client.job_stop(id).await?;
            println!("stopped job {}", job.id);
        }
        JobCommand::Trigger {
            id,
            params,
            address,
        } => {
            let run = client
                .job_trigger(id, &TriggerInput { params, address })
                .await?;
            println!("triggered job {}: run {}", run.job_id, run.id);
        }
        JobCommand::Delete { id } => {
            client.job_delete(id).await?;
            println!("deleted job {id}");
        }
        JobCommand::Export { group, file } => {
            let group_id = match &group {
                Some(g) => Some(group_id(&groups(&client).await?, g)?),
                None => None,
            };
            let jobs = client.jobs_all(group_id).await?;
            let n = jobs.len();
            let out = export(&client, jobs).await?;
            print_toml(&out, file.as_ref())?;
            if file.is_some() {
                println!("exported {n} jobs");
            }
        }
        JobCommand::Import { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let jobs: JobFile =
                toml::from_str(&text).map_err(|e| input(format!("{}: {e}", file.display())))?;
            let (created, updated) = import(&client, &jobs).await?;
            println!(
                "imported {} jobs: {created} created, {updated} updated",
                jobs.job.len()
            );
        }
    }
    Ok(())
}

/// The export file of `jobs`, sorted by key so that the file is stable.
async fn export(client: &Client, mut jobs: Vec<JobView>) -> anyhow::Result<JobFile> {
    let apps: HashMap<i64, String> = groups(client)
        .await?
        .into_iter()
        .map(|(app, id)| (id, app))
        .collect();
    // Children may be outside the exported set: name them by key all the same.
    let mut keys: HashMap<i64, String> = jobs.iter().map(|j| (j.id, j.key.clone())).collect();
    for child in jobs
        .iter()
        .flat_map(|j| j.child_job_ids.clone())
        .collect::<Vec<_>>()
    {
        if let std::collections::hash_map::Entry::Vacant(slot) = keys.entry(child)
            && let Ok(j) = client.job_get(child).await
        {
            slot.insert(j.key);
        }
    }
    jobs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(JobFile {
        job: jobs.iter().map(|j| entry(j, &apps, &keys)).collect(),
    })
}

/// Creates or updates every job of `file` by key; returns (created, updated). Groups, keys,
/// children and statuses are checked before the first change.
async fn import(client: &Client, file: &JobFile) -> anyhow::Result<(usize, usize)> {
    let groups = groups(client).await?;
    let existing: HashMap<String, JobView> = client
        .jobs_all(None)
        .await?
        .into_iter()
        .map(|j| (j.key.clone(), j))
        .collect();
    let mut seen = HashSet::new();
    for e in &file.job {
        if !seen.insert(e.key.as_str()) {
            return Err(input(format!(
                "job key {:?} appears twice in the file",
                e.key
            )));
        }
        group_id(&groups, &e.group)?;
        if !matches!(e.status.as_str(), "running" | "stopped") {
            return Err(input(format!(
                "job {:?}: status {:?} is not one of running stopped",
                e.key, e.status
            )));
        }
    }
    for e in &file.job {
        for child in &e.children {
            if !seen.contains(child.as_str()) && !existing.contains_key(child) {
                return Err(input(format!(
                    "job {:?}: child job {child:?} is neither in the file nor on the admin",
                    e.key
                )));
            }
        }
    }

    let (mut created, mut updated) = (0, 0);
    let mut ids: HashMap<String, i64> = existing.iter().map(|(k, j)| (k.clone(), j.id)).collect();
    for e in &file.job {
        let job = entry_input(e, group_id(&groups, &e.group)?);
        match existing.get(&e.key) {
            Some(current) => {
                client.job_update(current.id, &job).await?;
                updated += 1;
            }
            None => {
                let new = client.job_create(&job).await?;
                ids.insert(e.key.clone(), new.id);
                created += 1;
            }
        }
    }
    for e in file.job.iter().filter(|e| !e.children.is_empty()) {
        let mut job = entry_input(e, group_id(&groups, &e.group)?);
        job.child_job_ids = e.children.iter().map(|k| ids[k]).collect();
        client.job_update(ids[&e.key], &job).await?;
    }
    for e in &file.job {
        let id = ids[&e.key];
        let now = client.job_get(id).await?;
        match (e.status.as_str(), now.status.as_str()) {
            ("running", "stopped") => {
                client.job_start(id).await?;
            }
            ("stopped", "running") => {
                client.job_stop(id).await?;
            }
            _ => {}
        }
    }
    Ok((created, updated))
}
