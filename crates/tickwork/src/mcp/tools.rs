//! The MCP server's tools: their names, descriptions and input JSON Schemas, their arguments
//! read and checked ([`Call::parse`]), and what each does through the admin's REST API
//! ([`Call::run`]), so that the token's role decides what succeeds.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tickwork_client::Client;
use tickwork_protocol::api::{HeatmapQuery, JobQuery, RunQuery, TriggerInput};

/// What a tool answered: text for the model, and the same as a JSON value.
#[derive(Debug, PartialEq)]
pub(crate) struct Outcome {
    pub text: String,
    pub structured: Option<Value>,
}

/// A tool call with its arguments checked.
#[derive(Debug, PartialEq)]
pub(crate) enum Call {
    ListJobs {
        group: Option<String>,
        status: Option<String>,
        text: Option<String>,
        limit: u64,
    },
    ShowJob {
        job: String,
    },
    TriggerJob {
        job: String,
        params: Option<String>,
        address: Option<String>,
    },
    StartJob {
        job: String,
    },
    StopJob {
        job: String,
    },
    ListRuns {
        job: Option<String>,
        state: Option<String>,
        limit: u64,
    },
    ShowRun {
        run_id: i64,
    },
    RunLog {
        run_id: i64,
        from_line: i32,
    },
    SchedulePreview {
        job: String,
        n: usize,
    },
    ScheduleHeatmap(HeatmapQuery),
}

const JOB: &str = "the job's key, or its id (digits; a key made of digits is written key:123)";

/// Every tool: name, description, input schema.
pub(crate) fn definitions() -> Vec<Value> {
    let job = json!({ "type": "string", "description": JOB, "minLength": 1 });
    let run_id = json!({ "type": "integer", "minimum": 1, "description": "the run's id" });
    let tool = |name: &str, description: &str, props: Value, required: &[&str]| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {
                "type": "object", "properties": props, "required": required,
                "additionalProperties": false,
            },
        })
    };
    vec![
        tool(
            "list_jobs",
            "List jobs, optionally of one executor group (app name), by status or text.",
            json!({
                "group": { "type": "string", "description": "executor group app name" },
                "status": { "type": "string", "enum": ["running", "stopped"] },
                "text": { "type": "string", "description": "found in description, handler, key or owner" },
                "limit": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 50 },
            }),
            &[],
        ),
        tool(
            "show_job",
            "One job with its whole definition.",
            json!({ "job": job }),
            &["job"],
        ),
        tool(
            "trigger_job",
            "Run a job once now, with its own params or the ones given; the run as created.",
            json!({
                "job": job,
                "params": { "type": "string", "description": "params of this run only" },
                "address": { "type": "string", "description": "an executor of the job's group to send it to" },
            }),
            &["job"],
        ),
        tool(
            "start_job",
            "Start a job: it fires from its next scheduled instant.",
            json!({ "job": job }),
            &["job"],
        ),
        tool("stop_job", "Stop a job.", json!({ "job": job }), &["job"]),
        tool(
            "list_runs",
            "List runs, newest first, optionally of one job and in one state.",
            json!({
                "job": job,
                "state": { "type": "string", "enum": ["planned", "sending", "dispatched", "succeeded",
                    "failed", "timed_out", "killed", "lost", "misfired", "skipped"] },
                "limit": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 20 },
            }),
            &[],
        ),
        tool(
            "show_run",
            "One run: its state, times, executor and result.",
            json!({ "run_id": run_id }),
            &["run_id"],
        ),
        tool(
            "run_log",
            "A run's log from a line on, read from its executor; `end` once it is complete.",
            json!({
                "run_id": run_id,
                "from_line": { "type": "integer", "minimum": 1, "default": 1 },
            }),
            &["run_id"],
        ),
        tool(
            "schedule_preview",
            "The next fire times of a job's schedule, in its time zone.",
            json!({
                "job": job,
                "n": { "type": "integer", "minimum": 1, "maximum": 100, "default": 5 },
            }),
            &["job"],
        ),
        tool(
            "schedule_heatmap",
            "Fires per bucket of every running job over a range (24 hours from now by default, \
             at most 7 days), by executor group, with the peaks and the jobs colliding in them.",
            json!({
                "from": { "type": ["integer", "string"], "description": "start: epoch ms or RFC 3339 (default: this minute)" },
                "to": { "type": ["integer", "string"], "description": "end, excluded: epoch ms or RFC 3339 (default: from + 24 h)" },
                "bucket": { "type": "string", "description": "1m (default), 5m, 15m, 1h, 1d" },
                "group": { "type": "string", "description": "only this executor group (app name)" },
            }),
            &[],
        ),
    ]
}

/// `args` as `T`, or what is wrong with them.
fn args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, String> {
    serde_json::from_value(args).map_err(|e| format!("{tool}: invalid arguments: {e}"))
}

fn in_range(
    tool: &str,
    field: &str,
    v: Option<i64>,
    min: i64,
    max: i64,
    default: i64,
) -> Result<i64, String> {
    let v = v.unwrap_or(default);
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{tool}: {field} must be from {min} to {max}, not {v}"
        ))
    }
}

/// An instant given as epoch ms or RFC 3339.
#[derive(Deserialize)]
#[serde(untagged)]
enum Instant {
    Ms(i64),
    Text(String),
}

fn instant(tool: &str, field: &str, v: Option<Instant>) -> Result<Option<i64>, String> {
    match v {
        None => Ok(None),
        Some(Instant::Ms(ms)) => Ok(Some(ms)),
        Some(Instant::Text(t)) => t
            .trim()
            .parse::<jiff::Timestamp>()
            .map(|ts| Some(ts.as_millisecond()))
            .map_err(|_| format!("{tool}: {field} {t:?} is neither epoch ms nor RFC 3339")),
    }
}

impl Call {
    /// The call of tool `name` with `arguments`; an unknown tool or wrong arguments are the
    /// caller's error (answered as invalid params).
    pub(crate) fn parse(name: &str, arguments: Value) -> Result<Call, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct JobArg {
            job: String,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RunArg {
            run_id: i64,
            #[serde(default)]
            from_line: Option<i64>,
        }
        let job_of = |a: JobArg| -> Result<String, String> {
            let job = a.job.trim().to_owned();
            if job.is_empty() {
                return Err(format!("{name}: job is empty; give its key or id"));
            }
            Ok(job)
        };
        Ok(match name {
            "list_jobs" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    group: Option<String>,
                    status: Option<String>,
                    text: Option<String>,
                    limit: Option<i64>,
                }
                let a: A = args(name, arguments)?;
                if let Some(s) = a.status.as_deref()
                    && !matches!(s, "running" | "stopped")
                {
                    return Err(format!(
                        "{name}: status must be running or stopped, not {s:?}"
                    ));
                }
                Call::ListJobs {
                    group: a.group,
                    status: a.status,
                    text: a.text,
                    limit: in_range(name, "limit", a.limit, 1, 1000, 50)? as u64,
                }
            }
            "show_job" => Call::ShowJob {
                job: job_of(args(name, arguments)?)?,
            },
            "start_job" => Call::StartJob {
                job: job_of(args(name, arguments)?)?,
            },
            "stop_job" => Call::StopJob {
                job: job_of(args(name, arguments)?)?,
            },
            "trigger_job" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    job: String,
                    params: Option<String>,
                    address: Option<String>,
                }
                let a: A = args(name, arguments)?;
                Call::TriggerJob {
                    job: job_of(JobArg { job: a.job })?,
                    params: a.params,
                    address: a.address,
                }
            }
            "list_runs" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    job: Option<String>,
                    state: Option<String>,
                    limit: Option<i64>,
                }
                let a: A = args(name, arguments)?;
                Call::ListRuns {
                    job: a.job.filter(|j| !j.trim().is_empty()),
                    state: a.state,
                    limit: in_range(name, "limit", a.limit, 1, 1000, 20)? as u64,
                }
            }
            "show_run" | "run_log" => {
                let a: RunArg = args(name, arguments)?;
                if a.run_id < 1 {
                    return Err(format!("{name}: run_id must be positive"));
                }
                if name == "show_run" {
                    if a.from_line.is_some() {
                        return Err(format!(
                            "{name}: invalid arguments: unknown field `from_line`"
                        ));
                    }
                    Call::ShowRun { run_id: a.run_id }
                } else {
                    let from = in_range(name, "from_line", a.from_line, 1, i64::from(i32::MAX), 1)?;
                    Call::RunLog {
                        run_id: a.run_id,
                        from_line: from as i32,
                    }
                }
            }
            "schedule_preview" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    job: String,
                    n: Option<i64>,
                }
                let a: A = args(name, arguments)?;
                Call::SchedulePreview {
                    job: job_of(JobArg { job: a.job })?,
                    n: in_range(name, "n", a.n, 1, 100, 5)? as usize,
                }
            }
            "schedule_heatmap" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    from: Option<Instant>,
                    to: Option<Instant>,
                    bucket: Option<String>,
                    group: Option<String>,
                }
                let a: A = args(name, arguments)?;
                Call::ScheduleHeatmap(HeatmapQuery {
                    from: instant(name, "from", a.from)?,
                    to: instant(name, "to", a.to)?,
                    bucket: a.bucket,
                    group: a.group,
                })
            }
            other => return Err(format!("unknown tool {other:?}; tools/list names them")),
        })
    }

    /// Runs the call against the admin; a failure (a refusal, an unknown job, the admin out
    /// of reach) is the tool's error, said as the admin said it.
    pub(crate) async fn run(self, client: &Client) -> Result<Outcome, String> {
        self.run_inner(client).await.map_err(|e| format!("{e:#}"))
    }

    async fn run_inner(self, client: &Client) -> anyhow::Result<Outcome> {
        let job_id = |job: String| async move { crate::job_cmd::job_id(client, &job).await };
        Ok(match self {
            Call::ListJobs {
                group,
                status,
                text,
                limit,
            } => {
                let group_id = match group.as_deref().map(str::trim) {
                    None | Some("") => None,
                    Some(app) => Some(
                        client
                            .groups_list()
                            .await?
                            .into_iter()
                            .find(|g| g.app_name == app)
                            .map(|g| g.id)
                            .ok_or_else(|| {
                                anyhow::anyhow!("no executor group has app name {app:?}")
                            })?,
                    ),
                };
                let page = client
                    .jobs_list(&JobQuery {
                        group_id,
                        status,
                        text,
                        limit: Some(limit),
                        ..JobQuery::default()
                    })
                    .await?;
                json_outcome(&page)?
            }
            Call::ShowJob { job } => json_outcome(&client.job_get(job_id(job).await?).await?)?,
            Call::StartJob { job } => json_outcome(&client.job_start(job_id(job).await?).await?)?,
            Call::StopJob { job } => json_outcome(&client.job_stop(job_id(job).await?).await?)?,
            Call::TriggerJob {
                job,
                params,
                address,
            } => {
                let id = job_id(job).await?;
                json_outcome(
                    &client
                        .job_trigger(id, &TriggerInput { params, address })
                        .await?,
                )?
            }
            Call::ListRuns { job, state, limit } => {
                let job_id = match job {
                    Some(j) => Some(job_id(j).await?),
                    None => None,
                };
                let page = client
                    .runs_list(&RunQuery {
                        job_id,
                        state,
                        limit: Some(limit),
                        ..RunQuery::default()
                    })
                    .await?;
                json_outcome(&page)?
            }
            Call::ShowRun { run_id } => json_outcome(&client.run_get(run_id).await?)?,
            Call::RunLog { run_id, from_line } => {
                let log = client.run_log(run_id, from_line).await?;
                Outcome {
                    text: if log.content.is_empty() {
                        "(no log lines)".to_owned()
                    } else {
                        log.content.clone()
                    },
                    structured: Some(serde_json::to_value(&log)?),
                }
            }
            Call::SchedulePreview { job, n } => {
                let j = client.job_get(job_id(job).await?).await?;
                let s = &j.spec;
                let fires = client
                    .schedule_preview(s.schedule_type, &s.schedule_conf, Some(&s.time_zone), n)
                    .await?;
                let tz = tickwork_core::schedule::parse_time_zone(&s.time_zone)
                    .unwrap_or(jiff::tz::TimeZone::UTC);
                let times: Vec<String> = fires
                    .iter()
                    .filter_map(|&ms| jiff::Timestamp::from_millisecond(ms).ok())
                    .map(|t| {
                        t.to_zoned(tz.clone())
                            .strftime("%Y-%m-%dT%H:%M:%S%:z")
                            .to_string()
                    })
                    .collect();
                let value = json!({
                    "job_id": j.id, "key": j.key, "schedule_type": s.schedule_type,
                    "schedule_conf": s.schedule_conf, "time_zone": s.time_zone,
                    "fires": fires, "fire_times": times,
                });
                Outcome {
                    text: serde_json::to_string_pretty(&value)?,
                    structured: Some(value),
                }
            }
            Call::ScheduleHeatmap(q) => {
                let view = client.schedule_heatmap(&q).await?;
                Outcome {
                    text: crate::schedule_cmd::render(&view, &jiff::tz::TimeZone::UTC),
                    structured: Some(serde_json::to_value(&view)?),
                }
            }
        })
    }
}

/// A value as pretty JSON text and as itself.
fn json_outcome(v: &impl serde::Serialize) -> anyhow::Result<Outcome> {
    let value = serde_json::to_value(v)?;
    Ok(Outcome {
        text: serde_json::to_string_pretty(&value)?,
        structured: Some(value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_read_checked_and_defaulted() {
        #[rustfmt::skip]
        let ok: Vec<(&str, Value, Call)> = vec![
            ("list_jobs", json!({}), Call::ListJobs { group: None, status: None, text: None, limit: 50 }),
            ("list_jobs", json!({"group": "demo", "status": "running", "limit": 5}),
                Call::ListJobs { group: Some("demo".into()), status: Some("running".into()), text: None, limit: 5 }),
            ("show_job", json!({"job": " nightly "}), Call::ShowJob { job: "nightly".into() }),
            ("stop_job", json!({"job": "7"}), Call::StopJob { job: "7".into() }),
            ("list_runs", json!({"job": ""}), Call::ListRuns { job: None, state: None, limit: 20 }),
            ("run_log", json!({"run_id": 3}), Call::RunLog { run_id: 3, from_line: 1 }),
            ("run_log", json!({"run_id": 3, "from_line": 40}), Call::RunLog { run_id: 3, from_line: 40 }),
            ("schedule_preview", json!({"job": "k"}), Call::SchedulePreview { job: "k".into(), n: 5 }),
            ("schedule_heatmap", json!({"from": 1000, "to": "1970-01-01T00:01:00Z", "bucket": "1h"}),
                Call::ScheduleHeatmap(HeatmapQuery { from: Some(1000), to: Some(60_000),
                    bucket: Some("1h".into()), group: None })),
        ];
        for (name, a, expected) in ok {
            assert_eq!(Call::parse(name, a.clone()), Ok(expected), "{name} {a}");
        }
        #[rustfmt::skip]
        let bad: &[(&str, Value, &str)] = &[
            ("nope", json!({}), "unknown tool \"nope\""),
            ("show_job", json!({}), "show_job: invalid arguments: missing field `job`"),
            ("show_job", json!({"job": "  "}), "show_job: job is empty"),
            ("show_job", json!({"job": "a", "extra": 1}), "unknown field `extra`"),
            ("show_run", json!({"run_id": 0}), "show_run: run_id must be positive"),
            ("show_run", json!({"run_id": 1, "from_line": 2}), "unknown field `from_line`"),
            ("run_log", json!({"run_id": 1, "from_line": 0}), "from_line must be from 1"),
            ("list_jobs", json!({"limit": 5000}), "limit must be from 1 to 1000, not 5000"),
            ("list_jobs", json!({"status": "paused"}), "status must be running or stopped"),
            ("schedule_preview", json!({"job": "k", "n": 101}), "n must be from 1 to 100"),
            ("schedule_heatmap", json!({"from": "tomorrow"}), "from \"tomorrow\" is neither"),
            ("trigger_job", json!("nightly"), "trigger_job: invalid arguments"),
        ];
        for (name, a, says) in bad {
            let err = Call::parse(name, a.clone()).unwrap_err();
            assert!(err.contains(says), "{name} {a}: {err}");
        }
    }

    #[test]
    fn every_tool_has_a_closed_object_schema_naming_its_required_fields() {
        for t in definitions() {
            let schema = &t["inputSchema"];
            assert_eq!(schema["additionalProperties"], false, "{t}");
            for r in schema["required"].as_array().unwrap() {
                assert!(
                    schema["properties"].get(r.as_str().unwrap()).is_some(),
                    "{t}"
                );
            }
        }
    }
}
