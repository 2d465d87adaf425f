//! `tickwork job …`: list, show, add, edit, start, stop, trigger, delete, export and import
//! jobs through the admin's JSON API. Export and import use a TOML file keyed by each job's
//! stable key, with groups and child jobs named by app name and key rather than database id,
//! so that jobs can live in git and move between admins.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::de::Error as _;
use serde::ser::{Error as _, SerializeMap};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tickwork_client::Client;
use tickwork_core::job::JobSpec;
use tickwork_core::{BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType};
use tickwork_protocol::api::{JOBS_BULK_MAX, JobInput, JobQuery, JobView, TriggerInput};

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
    Show {
        /// The job's key, or its id.
        job: String,
    },
    /// Create a job.
    Add(JobFields),
    /// Change fields of a job; the others keep their values.
    Edit {
        /// The job's key, or its id.
        job: String,
        #[command(flatten)]
        fields: JobFields,
    },
    /// Start a job: it fires from its next scheduled instant.
    Start {
        /// The job's key, or its id.
        job: String,
    },
    /// Stop a job.
    Stop {
        /// The job's key, or its id.
        job: String,
    },
    /// Fire a job once now.
    Trigger {
        /// The job's key, or its id.
        job: String,
        /// Params of this run (default: the job's own).
        #[arg(long)]
        params: Option<String>,
        /// Run on this executor instead of routing.
        #[arg(long)]
        address: Option<String>,
    },
    /// Delete a job and its runs.
    Delete {
        /// The job's key, or its id.
        job: String,
    },
    /// Write jobs as TOML (to stdout, or to --file).
    Export {
        /// Only jobs of this executor group (app name).
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Create or update jobs from a TOML file, matched by key. Everything is checked before
    /// anything changes; new jobs are created in bulk (10,000 per request, each request all
    /// or nothing).
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
    /// CRON, CRON_AFTER_END, FIX_RATE, FIX_DELAY, ONCE or NONE.
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

/// One job in an export file: its key, its group's app name, its definition with the API's
/// field names and its status. The file names the group (`group`) and the child jobs
/// (`children`, by key) where the API has `group_id` and `child_job_ids`, so those two of
/// `spec` are the admin's and never written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobEntry {
    pub key: String,
    /// The executor group's app name.
    pub group: String,
    pub spec: JobSpec,
    /// Keys of the jobs fired when a run of this one succeeds.
    pub children: Vec<String>,
    /// `running` or `stopped`.
    pub status: String,
}

/// The name in the file of a field of [`JobSpec`].
fn file_name(spec_field: &'static str) -> &'static str {
    match spec_field {
        "group_id" => "group",
        "child_job_ids" => "children",
        name => name,
    }
}

/// The fields of an entry in their order, for serde's "expected one of" message.
fn entry_fields() -> &'static [&'static str] {
    static FIELDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let spec = JobSpec::field_names().iter().map(|&f| file_name(f));
        ["key"].into_iter().chain(spec).chain(["status"]).collect()
    })
}

impl Serialize for JobEntry {
    /// `key`, the definition's fields in their order, `status`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let spec = toml::Table::try_from(&self.spec).map_err(S::Error::custom)?;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("key", &self.key)?;
        for &field in JobSpec::field_names() {
            match field {
                "group_id" => m.serialize_entry(file_name(field), &self.group)?,
                "child_job_ids" => m.serialize_entry(file_name(field), &self.children)?,
                _ => {
                    if let Some(v) = spec.get(field) {
                        m.serialize_entry(field, v)?;
                    }
                }
            }
        }
        m.serialize_entry("status", &self.status)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for JobEntry {
    /// Refuses unknown fields by name; the definition's fields take the API's defaults.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            key: String,
            group: String,
            #[serde(default)]
            children: Vec<String>,
            status: String,
            #[serde(flatten)]
            spec: toml::Table,
        }
        let mut w = Wire::deserialize(d)?;
        // The rest are the definition's fields, but for the two the file names otherwise.
        let known = |name: &str| {
            JobSpec::field_names()
                .iter()
                .any(|&f| f == name && file_name(f) == f)
        };
        if let Some(name) = w.spec.keys().find(|k| !known(k)) {
            return Err(D::Error::unknown_field(name, entry_fields()));
        }
        w.spec.insert("group_id".to_owned(), 0.into());
        let spec = toml::Value::Table(w.spec)
            .try_into()
            .map_err(D::Error::custom)?;
        Ok(JobEntry {
            key: w.key,
            group: w.group,
            spec,
            children: w.children,
            status: w.status,
        })
    }
}

/// An export file: `[[job]]` tables, then the workflows over them (`[[workflow]]`, nodes
/// naming jobs by key).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobFile {
    #[serde(default)]
    pub job: Vec<JobEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflow: Vec<tickwork_protocol::workflows::WorkflowInput>,
}

fn input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// The id of the job the command line names: digits are an id, anything else a key (a key of
/// digits only is written `key:<key>`).
pub(crate) async fn job_id(client: &Client, name: &str) -> anyhow::Result<i64> {
    let name = name.trim();
    let key = match name.strip_prefix("key:") {
        Some(key) => key,
        None if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) => {
            return name
                .parse()
                .map_err(|_| input(format!("job id {name} is out of range")));
        }
        None => name,
    };
    find_by_key(client, key)
        .await?
        .map(|j| j.id)
        .ok_or_else(|| input(format!("no job has the key {key:?}")))
}

/// The job with this exact key: the API's text filter finds the candidates (it also matches
/// descriptions, handlers and owners), read a page at a time.
async fn find_by_key(client: &Client, key: &str) -> anyhow::Result<Option<JobView>> {
    if key.is_empty() {
        return Ok(None);
    }
    let mut seen = 0;
    loop {
        let page = client
            .jobs_list(&JobQuery {
                text: Some(key.to_owned()),
                offset: Some(seen),
                limit: Some(1000),
                ..JobQuery::default()
            })
            .await?;
        if let Some(job) = page.items.iter().find(|j| j.key == key) {
            return Ok(Some(job.clone()));
        }
        let n = page.items.len() as u64;
        seen += n;
        if n == 0 || seen >= page.total {
            return Ok(None);
        }
    }
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
        group: apps.get(&job.spec.group_id).cloned().unwrap_or_default(),
        spec: job.spec.clone(),
        children: job
            .spec
            .child_job_ids
            .iter()
            .map(|id| keys.get(id).cloned().unwrap_or_else(|| id.to_string()))
            .collect(),
        status: job.status.clone(),
    }
}

/// The API input of an entry, children left out (they are set once every job exists).
fn entry_input(e: &JobEntry, group_id: i64) -> JobInput {
    JobInput {
        key: Some(e.key.clone()),
        spec: JobSpec {
            group_id,
            child_job_ids: Vec::new(),
            ..e.spec.clone()
        },
        start: false,
    }
}

/// Lays the fields given on the command line over `base`.
fn apply(f: &JobFields, base: &mut JobInput, groups: &HashMap<String, i64>) -> anyhow::Result<()> {
    let spec = &mut base.spec;
    if let Some(g) = &f.group {
        spec.group_id = group_id(groups, g)?;
    }
    let set = |slot: &mut String, v: &Option<String>| {
        if let Some(v) = v {
            slot.clone_from(v);
        }
    };
    set(&mut spec.description, &f.description);
    set(&mut spec.owner, &f.owner);
    set(&mut spec.schedule_conf, &f.schedule);
    set(&mut spec.time_zone, &f.tz);
    set(&mut spec.handler, &f.handler);
    set(&mut spec.params, &f.params);
    if let Some(v) = f.schedule_type {
        spec.schedule_type = v;
    }
    if let Some(v) = f.misfire {
        spec.misfire_strategy = v;
    }
    if let Some(v) = f.route {
        spec.route_strategy = v;
    }
    if let Some(v) = f.block {
        spec.block_strategy = v;
    }
    if let Some(v) = f.timeout {
        spec.timeout_s = v;
    }
    if let Some(v) = f.retries {
        spec.retry_count = v;
    }
    if let Some(v) = f.backoff_ms {
        spec.retry_backoff_ms = v;
    }
    if let Some(v) = f.glue_type {
        spec.glue_type = v;
    }
    if let Some(v) = f.priority {
        spec.priority = v;
    }
    if let Some(path) = &f.script {
        spec.glue_source = std::fs::read_to_string(path)
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
                    j.spec.schedule_type.as_str(),
                    cell(&j.spec.schedule_conf, 20),
                    instant(j.next_fire_at),
                    cell(&j.spec.description, 40)
                );
            }
            println!("({} of {} jobs)", page.items.len(), page.total);
        }
        JobCommand::Show { job } => {
            let job = client.job_get(job_id(&client, &job).await?).await?;
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
        JobCommand::Edit { job, fields } => {
            if fields.key.is_some() || fields.start {
                return Err(input("--key and --start apply to `job add` only"));
            }
            let id = job_id(&client, &job).await?;
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
        JobCommand::Start { job } => {
            let job = client.job_start(job_id(&client, &job).await?).await?;
            println!(
                "started job {}; next fire {}",
                job.id,
                instant(job.next_fire_at)
            );
        }
        JobCommand::Stop { job } => {
            let job = client.job_stop(job_id(&client, &job).await?).await?;
            println!("stopped job {}", job.id);
        }
        JobCommand::Trigger {
            job,
            params,
            address,
        } => {
            let id = job_id(&client, &job).await?;
            let run = client
                .job_trigger(id, &TriggerInput { params, address })
                .await?;
            println!("triggered job {}: run {}", run.job_id, run.id);
        }
        JobCommand::Delete { job } => {
            let id = job_id(&client, &job).await?;
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
            let mut out = export(&client, jobs).await?;
            let mut flows: Vec<_> = client
                .workflows()
                .list()
                .await?
                .into_iter()
                .filter(|w| group.as_ref().is_none_or(|g| &w.group == g))
                .map(crate::workflow_cmd::input_of)
                .collect();
            flows.sort_by(|a, b| a.key.cmp(&b.key));
            let w = flows.len();
            out.workflow = flows;
            print_toml(&out, file.as_ref())?;
            if file.is_some() {
                println!("exported {n} jobs and {w} workflows");
            }
        }
        JobCommand::Import { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let jobs: JobFile =
                toml::from_str(&text).map_err(|e| input(format!("{}: {e}", file.display())))?;
            let done = import(&client, &jobs).await?;
            println!(
                "imported {} jobs: {} created, {} updated, {} unchanged",
                jobs.job.len(),
                done.created,
                done.updated,
                done.unchanged
            );
            // After the jobs: the workflows' nodes name them.
            if !jobs.workflow.is_empty() {
                let (created, updated, unchanged) =
                    crate::workflow_cmd::apply(&client, &jobs.workflow).await?;
                println!(
                    "imported {} workflows: {created} created, {updated} updated, {unchanged} \
                     unchanged",
                    jobs.workflow.len()
                );
            }
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
        .flat_map(|j| j.spec.child_job_ids.clone())
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
        workflow: Vec::new(),
    })
}

/// What an import did, job by job.
struct Imported {
    created: usize,
    updated: usize,
    /// Jobs on the admin exactly as in the file: not written at all (no new version, no audit
    /// record).
    unchanged: usize,
}

/// Whether `current` on the admin has the definition of `wanted` in the file already: the same
/// group, fields and children (by key); the status is not compared. The file's definition is
/// read as the admin stores it: `zone` for no time zone, the schedule and handler trimmed.
fn same_definition(
    current: &JobView,
    wanted: &JobEntry,
    apps: &HashMap<i64, String>,
    keys: &HashMap<i64, String>,
    zone: &str,
) -> bool {
    // The file names group and children, so the ids of both are compared through those names.
    let plain = |mut e: JobEntry| {
        e.spec.group_id = 0;
        e.spec.child_job_ids.clear();
        e.status.clear();
        e
    };
    let mut wanted = wanted.clone();
    wanted.spec = entry_input(&wanted, 0).to_spec(zone);
    plain(entry(current, apps, keys)) == plain(wanted)
}

/// Creates or updates every job of `file` by key, leaving the jobs that already are as the
/// file has them alone. Groups, keys, children and statuses are checked before the first
/// change.
async fn import(client: &Client, file: &JobFile) -> anyhow::Result<Imported> {
    let groups = groups(client).await?;
    let existing: HashMap<String, JobView> = client
        .jobs_all(None)
        .await?
        .into_iter()
        .map(|j| (j.key.clone(), j))
        .collect();
    let apps: HashMap<i64, String> = groups.iter().map(|(app, id)| (*id, app.clone())).collect();
    let keys: HashMap<i64, String> = existing.values().map(|j| (j.id, j.key.clone())).collect();
    // An admin that does not say its default zone: jobs of the file without one read as changed.
    let me = client.me().await?;
    let zone = me["default_time_zone"].as_str().unwrap_or("");
    // Jobs whose definition is the file's already are not rewritten (a write is a new version
    // and an audit record); those whose status is the file's too are not touched at all.
    let same: HashSet<&str> = file
        .job
        .iter()
        .filter(|e| {
            existing
                .get(&e.key)
                .is_some_and(|current| same_definition(current, e, &apps, &keys, zone))
        })
        .map(|e| e.key.as_str())
        .collect();
    let unchanged = file
        .job
        .iter()
        .filter(|e| same.contains(e.key.as_str()) && existing[&e.key].status == e.status)
        .count();
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

    // New jobs first, in bulk: each request is all or nothing, checked whole by the admin.
    // A running job without children starts at once; the others wait for their children.
    let mut ids: HashMap<String, i64> = existing.iter().map(|(k, j)| (k.clone(), j.id)).collect();
    let mut status: HashMap<&str, &str> = HashMap::new();
    let new: Vec<&JobEntry> = file
        .job
        .iter()
        .filter(|e| !existing.contains_key(&e.key))
        .collect();
    for chunk in new.chunks(JOBS_BULK_MAX) {
        let inputs = chunk
            .iter()
            .map(|e| {
                let mut job = entry_input(e, group_id(&groups, &e.group)?);
                job.start = e.status == "running" && e.children.is_empty();
                Ok(job)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let done = client.jobs_create_bulk(&inputs).await?;
        for ((e, input), job) in chunk.iter().zip(&inputs).zip(done.jobs) {
            ids.insert(job.key, job.id);
            status.insert(&e.key, if input.start { "running" } else { "stopped" });
        }
    }
    let created = new.len();
    // Every job exists now: changed definitions are written once, children included (new jobs
    // were created without theirs, as their children may have been created with them).
    for e in &file.job {
        let current = existing.get(&e.key);
        if let Some(current) = current {
            status.insert(&e.key, &current.status);
        }
        let write = match current {
            Some(_) => !same.contains(e.key.as_str()),
            None => !e.children.is_empty(),
        };
        if write {
            let mut job = entry_input(e, group_id(&groups, &e.group)?);
            job.spec.child_job_ids = e.children.iter().map(|k| ids[k]).collect();
            client.job_update(ids[&e.key], &job).await?;
        }
    }
    for e in &file.job {
        let id = ids[&e.key];
        match (e.status.as_str(), status.get(e.key.as_str()).copied()) {
            ("running", Some("stopped")) => {
                client.job_start(id).await?;
            }
            ("stopped", Some("running")) => {
                client.job_stop(id).await?;
            }
            _ => {}
        }
    }
    Ok(Imported {
        created,
        updated: file.job.len() - created - unchanged,
        unchanged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry with every field, as `job export` has always written it.
    const NIGHTLY: &str = r#"[[job]]
key = "nightly-report"
group = "alpha"
description = "the nightly report – größer"
owner = "ops"
alarm_channels = "ops-hook"
schedule_type = "CRON"
schedule_conf = "0 30 2 * * ?"
time_zone = "Europe/Berlin"
misfire_strategy = "FIRE_ONCE_NOW"
route_strategy = "ROUND"
handler = "echo"
params = """
full "quoted"
second line"""
block_strategy = "DISCARD_LATER"
timeout_s = 600
retry_count = 2
retry_backoff_ms = 1000
children = [
    "cleanup",
    "other",
]
priority = -5
glue_type = "BEAN"
glue_source = ""
delivery = "AT_MOST_ONCE"
lateness_budget_ms = 1000
status = "running"
"#;

    fn nightly() -> JobEntry {
        JobEntry {
            key: "nightly-report".into(),
            group: "alpha".into(),
            spec: JobSpec {
                description: "the nightly report – größer".into(),
                owner: "ops".into(),
                alarm_channels: "ops-hook".into(),
                schedule_type: ScheduleType::Cron,
                schedule_conf: "0 30 2 * * ?".into(),
                time_zone: "Europe/Berlin".into(),
                misfire_strategy: MisfireStrategy::FireOnceNow,
                route_strategy: RouteStrategy::Round,
                handler: "echo".into(),
                params: "full \"quoted\"\nsecond line".into(),
                block_strategy: BlockStrategy::DiscardLater,
                timeout_s: 600,
                retry_count: 2,
                retry_backoff_ms: 1000,
                priority: -5,
                ..JobSpec::blank(0)
            },
            children: vec!["cleanup".into(), "other".into()],
            status: "running".into(),
        }
    }

    #[test]
    fn an_entry_writes_and_reads_the_export_format() {
        let file = JobFile {
            job: vec![nightly()],
            workflow: Vec::new(),
        };
        assert_eq!(toml::to_string_pretty(&file).unwrap(), NIGHTLY);
        let read: JobFile = toml::from_str(NIGHTLY).unwrap();
        assert_eq!(read.job, vec![nightly()]);
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        for (line, name) in [
            ("colour = \"red\"", "colour"),
            ("group_id = 3", "group_id"),
            ("child_job_ids = [1]", "child_job_ids"),
        ] {
            let text = NIGHTLY.replace("priority = -5", &format!("priority = -5\n{line}"));
            let e = toml::from_str::<JobFile>(&text).unwrap_err().to_string();
            let says = format!(
                "unknown field `{name}`, expected one of `key`, `group`, `description`, `owner`"
            );
            assert!(e.contains(&says), "{e}");
            assert!(
                e.contains("`glue_source`, `delivery`, `lateness_budget_ms`, `status`"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_missing_field_takes_the_apis_default() {
        let read: JobFile =
            toml::from_str("[[job]]\nkey = \"k\"\ngroup = \"g\"\nstatus = \"stopped\"\n").unwrap();
        assert_eq!(read.job[0].spec, JobSpec::blank(0));
        assert!(read.job[0].children.is_empty());
        let e = toml::from_str::<JobFile>("[[job]]\ngroup = \"g\"\nstatus = \"stopped\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `key`"), "{e}");
    }
}
