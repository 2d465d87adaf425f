//! The OpenAPI 3.1 document of the REST API, served at `/openapi.json`. Written by hand from
//! one table of operations (no build-time generator); a test checks that it describes exactly
//! the routes of [`crate::http::API_ROUTES`] and that it validates.

mod schemas;
mod workflows;

use schemas::{reference, schemas};

use serde_json::{Map, Value, json};

/// One operation: method, path, summary, who may call it, path and query parameters, request
/// body schema and answer schema (component names, or `None`).
struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    roles: &'static str,
    query: &'static [(&'static str, &'static str, &'static str)],
    body: Option<&'static str>,
    answer: &'static str,
}

/// Every operation: the table below, then the workflows'.
fn all_ops() -> impl Iterator<Item = &'static Op> {
    OPS.iter().chain(workflows::OPS)
}

const READ: &str = "any role";
const GROUP: &str = "admin, or an operator of the job's group";
const ADMIN: &str = "admin";

const PAGE_QUERY: [(&str, &str, &str); 4] = [
    ("page", "integer", "page number, from 1"),
    ("size", "integer", "items per page, 1-1000 (default 50)"),
    ("offset", "integer", "items to skip (instead of page)"),
    ("limit", "integer", "items per page (instead of size)"),
];

const OPS: &[Op] = &[
    Op {
        method: "get",
        path: "/me",
        summary: "The caller: user, role and groups; the admin's default time zone",
        roles: READ,
        query: &[],
        body: None,
        answer: "Me",
    },
    Op {
        method: "get",
        path: "/groups",
        summary: "List executor groups with their live addresses",
        roles: READ,
        query: &[],
        body: None,
        answer: "GroupList",
    },
    Op {
        method: "post",
        path: "/groups",
        summary: "Create an executor group",
        roles: ADMIN,
        query: &[],
        body: Some("GroupInput"),
        answer: "Group",
    },
    Op {
        method: "get",
        path: "/groups/{id}",
        summary: "One executor group",
        roles: READ,
        query: &[],
        body: None,
        answer: "Group",
    },
    Op {
        method: "put",
        path: "/groups/{id}",
        summary: "Rewrite an executor group",
        roles: ADMIN,
        query: &[],
        body: Some("GroupInput"),
        answer: "Group",
    },
    Op {
        method: "delete",
        path: "/groups/{id}",
        summary: "Delete an executor group without jobs",
        roles: ADMIN,
        query: &[],
        body: None,
        answer: "Deleted",
    },
    Op {
        method: "get",
        path: "/groups/{id}/instances",
        summary: "Registered executor instances of a group and their last heartbeat",
        roles: READ,
        query: &[],
        body: None,
        answer: "InstanceList",
    },
    Op {
        method: "post",
        path: "/groups/{id}/token",
        summary: "Give the group a new executor access token (replacing its own, or the global \
                  token, at once); the token is shown only in this answer",
        roles: "admin, or an operator of the group",
        query: &[],
        body: None,
        answer: "GroupToken",
    },
    Op {
        method: "get",
        path: "/jobs",
        summary: "List jobs by group, status and text, sorted, each with its last run",
        roles: READ,
        query: &[
            ("group_id", "integer", "only this group"),
            ("status", "string", "running or stopped"),
            (
                "text",
                "string",
                "found in description, handler, key or owner",
            ),
            (
                "sort",
                "string",
                "id (default, also when empty), description, group, next_fire or last_run; jobs \
                 without a next fire or a run come last",
            ),
            ("order", "string", "asc (default, also when empty) or desc"),
            PAGE_QUERY[0],
            PAGE_QUERY[1],
            PAGE_QUERY[2],
            PAGE_QUERY[3],
        ],
        body: None,
        answer: "JobPage",
    },
    Op {
        method: "post",
        path: "/jobs",
        summary: "Create a job",
        roles: GROUP,
        query: &[],
        body: Some("JobInput"),
        answer: "Job",
    },
    Op {
        method: "post",
        path: "/jobs/bulk",
        summary: "Create up to 10,000 jobs in one transaction, all or none: every wrong job is \
                  answered by its index and field (errors), a key already taken is a conflict; \
                  one audit record per job. Body up to 32 MiB",
        roles: "admin, or an operator of every job's group",
        query: &[],
        body: Some("JobsBulkInput"),
        answer: "JobsBulkCreated",
    },
    Op {
        method: "post",
        path: "/jobs/actions",
        summary: "Start, stop, trigger (run once now, as routed) or delete up to 1,000 jobs, each \
                  checked as its own call would check it (its permission, its schedule) and \
                  audited; each refused job is answered with its code and message, and does not \
                  stop the others. Started, stopped and deleted jobs are written in one \
                  transaction",
        roles: "admin or operator (a viewer is refused as a whole); each job is refused unless \
                the caller is an admin or an operator of its group",
        query: &[],
        body: Some("JobsActionInput"),
        answer: "JobsActionResult",
    },
    Op {
        method: "get",
        path: "/jobs/{id}",
        summary: "One job",
        roles: READ,
        query: &[],
        body: None,
        answer: "Job",
    },
    Op {
        method: "put",
        path: "/jobs/{id}",
        summary: "Rewrite a job's definition",
        roles: GROUP,
        query: &[],
        body: Some("JobInput"),
        answer: "Job",
    },
    Op {
        method: "delete",
        path: "/jobs/{id}",
        summary: "Delete a job and its runs",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "Deleted",
    },
    Op {
        method: "post",
        path: "/jobs/{id}/start",
        summary: "Start a job: its next fire is computed from now",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "Job",
    },
    Op {
        method: "post",
        path: "/jobs/{id}/stop",
        summary: "Stop a job",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "Job",
    },
    Op {
        method: "post",
        path: "/jobs/{id}/trigger",
        summary: "Run a job once now (optional params and executor address)",
        roles: GROUP,
        query: &[],
        body: Some("TriggerInput"),
        answer: "Run",
    },
    Op {
        method: "post",
        path: "/jobs/{id}/copy",
        summary: "Copy a job into a new, stopped job",
        roles: GROUP,
        query: &[],
        body: Some("CopyInput"),
        answer: "Job",
    },
    Op {
        method: "put",
        path: "/jobs/{id}/script",
        summary: "Save a new version of a script job's source",
        roles: GROUP,
        query: &[],
        body: Some("ScriptInput"),
        answer: "ScriptVersion",
    },
    Op {
        method: "get",
        path: "/jobs/{id}/script/versions",
        summary: "A script job's versions, newest first",
        roles: READ,
        query: &[],
        body: None,
        answer: "ScriptVersionList",
    },
    Op {
        method: "get",
        path: "/jobs/{id}/script/diff",
        summary: "The changes from one version of a script job's source to another, line by line",
        roles: READ,
        query: &[
            ("from", "integer", "the old side's version (required)"),
            ("to", "integer", "the new side's version (required)"),
        ],
        body: None,
        answer: "ScriptDiff",
    },
    Op {
        method: "post",
        path: "/jobs/{id}/script/versions/{version}/restore",
        summary: "Make an old version the current script (as a new version)",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "ScriptVersion",
    },
    Op {
        method: "get",
        path: "/runs",
        summary: "List runs, newest first",
        roles: READ,
        query: &[
            ("job_id", "integer", "only this job"),
            ("group_id", "integer", "only this group"),
            (
                "state",
                "string",
                "planned, dispatched, succeeded, failed, timed_out, killed, lost, misfired or skipped",
            ),
            ("from", "integer", "scheduled at or after (epoch ms)"),
            ("to", "integer", "scheduled before (epoch ms)"),
            PAGE_QUERY[0],
            PAGE_QUERY[1],
            PAGE_QUERY[2],
            PAGE_QUERY[3],
        ],
        body: None,
        answer: "RunPage",
    },
    Op {
        method: "delete",
        path: "/runs",
        summary: "Clear final runs scheduled before an instant",
        roles: "admin; with job_id or group_id, an operator of that group",
        query: &[
            (
                "before",
                "integer",
                "runs scheduled before this instant (epoch ms); this or before_days is required",
            ),
            (
                "before_days",
                "integer",
                "runs scheduled more than this many days ago (1 to 36500)",
            ),
            ("job_id", "integer", "only this job's runs"),
            ("group_id", "integer", "only this group's runs"),
        ],
        body: None,
        answer: "Cleared",
    },
    Op {
        method: "get",
        path: "/runs/{id}",
        summary: "One run",
        roles: READ,
        query: &[],
        body: None,
        answer: "Run",
    },
    Op {
        method: "post",
        path: "/runs/{id}/kill",
        summary: "Kill a dispatched run",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "Run",
    },
    Op {
        method: "get",
        path: "/runs/{id}/log",
        summary: "A run's log from a line on, read from its executor",
        roles: READ,
        query: &[("from_line", "integer", "first line to read (default 1)")],
        body: None,
        answer: "RunLog",
    },
    Op {
        method: "get",
        path: "/schedule/preview",
        summary: "The next fire times of a schedule, before saving it",
        roles: READ,
        query: &[
            ("type", "string", "schedule type (default CRON)"),
            ("conf", "string", "the expression or interval"),
            ("tz", "string", "IANA time zone (default: the admin's)"),
            ("n", "integer", "how many fires, 1-100 (default 5)"),
        ],
        body: None,
        answer: "Fires",
    },
    Op {
        method: "post",
        path: "/schedule/preview",
        summary: "The next fire times of a schedule (JSON body)",
        roles: READ,
        query: &[],
        body: Some("PreviewInput"),
        answer: "Fires",
    },
    Op {
        method: "get",
        path: "/schedule/heatmap",
        summary: "Fires per bucket of every running job over a range (at most 7 days), by \
                  executor group, with the busiest buckets and the jobs colliding in them",
        roles: READ,
        query: &[
            (
                "from",
                "integer",
                "start of the range, epoch ms (default: this minute)",
            ),
            (
                "to",
                "integer",
                "end of the range, excluded, epoch ms (default: from + 24 h)",
            ),
            (
                "bucket",
                "string",
                "bucket size, whole minutes with a unit: 1m (default), 15m, 1h, 1d",
            ),
            (
                "group",
                "string",
                "only the jobs of this executor group (its app name)",
            ),
        ],
        body: None,
        answer: "Heatmap",
    },
    Op {
        method: "get",
        path: "/users",
        summary: "List users",
        roles: ADMIN,
        query: &[],
        body: None,
        answer: "UserList",
    },
    Op {
        method: "post",
        path: "/users",
        summary: "Create a user",
        roles: ADMIN,
        query: &[],
        body: Some("UserInput"),
        answer: "User",
    },
    Op {
        method: "get",
        path: "/users/{id}",
        summary: "One user",
        roles: "admin, or the user",
        query: &[],
        body: None,
        answer: "User",
    },
    Op {
        method: "put",
        path: "/users/{id}",
        summary: "Change a user's role, groups, locale or disabled flag",
        roles: ADMIN,
        query: &[],
        body: Some("UserUpdateInput"),
        answer: "User",
    },
    Op {
        method: "delete",
        path: "/users/{id}",
        summary: "Delete a user with their sessions and API tokens (not oneself, not the last admin)",
        roles: ADMIN,
        query: &[],
        body: None,
        answer: "Deleted",
    },
    Op {
        method: "put",
        path: "/users/{id}/password",
        summary: "Set a password (own: give the current one)",
        roles: "admin, or the user",
        query: &[],
        body: Some("PasswordInput"),
        answer: "PasswordChanged",
    },
    Op {
        method: "get",
        path: "/tokens",
        summary: "API tokens: the caller's, or everyone's for an admin",
        roles: READ,
        query: &[],
        body: None,
        answer: "TokenList",
    },
    Op {
        method: "post",
        path: "/tokens",
        summary: "Create an API token; its secret is shown only in this answer",
        roles: "any role (for another user: admin)",
        query: &[],
        body: Some("TokenInput"),
        answer: "TokenCreated",
    },
    Op {
        method: "delete",
        path: "/tokens/{id}",
        summary: "Revoke an API token",
        roles: "admin, or the token's user",
        query: &[],
        body: None,
        answer: "Token",
    },
    Op {
        method: "get",
        path: "/audit",
        summary: "The audit log, newest first",
        roles: ADMIN,
        query: &[
            ("actor", "string", "only changes by this user"),
            (
                "target_type",
                "string",
                "group, job, run, runs, user, api_token or alarm_channel",
            ),
            ("target_id", "string", "only this target"),
            ("from", "integer", "at or after (epoch ms)"),
            ("to", "integer", "before (epoch ms)"),
            PAGE_QUERY[0],
            PAGE_QUERY[1],
        ],
        body: None,
        answer: "AuditPage",
    },
    Op {
        method: "get",
        path: "/stats",
        summary: "Dashboard figures",
        roles: READ,
        query: &[],
        body: None,
        answer: "Stats",
    },
    Op {
        method: "get",
        path: "/alarm-channels",
        summary: "Alarm channels (secrets never shown)",
        roles: READ,
        query: &[],
        body: None,
        answer: "AlarmChannelList",
    },
    Op {
        method: "post",
        path: "/alarm-channels",
        summary: "Create an alarm channel: email, webhook, dingtalk, wecom, feishu or slack",
        roles: ADMIN,
        query: &[],
        body: Some("AlarmChannelInput"),
        answer: "AlarmChannel",
    },
    Op {
        method: "get",
        path: "/alarm-channels/{id}",
        summary: "One alarm channel",
        roles: READ,
        query: &[],
        body: None,
        answer: "AlarmChannel",
    },
    Op {
        method: "put",
        path: "/alarm-channels/{id}",
        summary: "Rewrite an alarm channel; a secret, password or URL left out is kept",
        roles: ADMIN,
        query: &[],
        body: Some("AlarmChannelInput"),
        answer: "AlarmChannel",
    },
    Op {
        method: "delete",
        path: "/alarm-channels/{id}",
        summary: "Delete an alarm channel no job lists",
        roles: ADMIN,
        query: &[],
        body: None,
        answer: "Deleted",
    },
    Op {
        method: "post",
        path: "/alarm-channels/{id}/test",
        summary: "Send a test message on a channel now",
        roles: ADMIN,
        query: &[],
        body: None,
        answer: "AlarmTestResult",
    },
    Op {
        method: "get",
        path: "/alarm-deliveries",
        summary: "Alarm deliveries, one per failed run (or group of a job's failed runs) and \
                  channel, with their attempts and errors",
        roles: READ,
        query: &[
            ("run_id", "integer", "only this run's deliveries"),
            ("job_id", "integer", "only this job's deliveries"),
            ("state", "string", "pending, sent or failed"),
            ("page", "integer", "page number, from 1"),
            ("limit", "integer", "items per page, 1-1000 (default 50)"),
        ],
        body: None,
        answer: "AlarmDeliveryPage",
    },
    Op {
        method: "post",
        path: "/submissions/{app}",
        summary: "Put up to 1,000 submissions of the group named app, each on its own, with a \
                  result per item",
        roles: GROUP,
        query: &[],
        body: Some("SubmissionsBatchInput"),
        answer: "SubmissionsBatchResult",
    },
    Op {
        method: "get",
        path: "/completions/{app}",
        summary: "How the runs of the group's submissions ended, oldest first, kept until \
                  acknowledged (at least once, in the order written)",
        roles: READ,
        query: &[
            ("after", "integer", "only completions after this id"),
            (
                "limit",
                "integer",
                "at most this many, 1-1000 (default 100)",
            ),
        ],
        body: None,
        answer: "Completions",
    },
    Op {
        method: "post",
        path: "/completions/{app}/ack",
        summary: "Acknowledge completions by id: they are not read again",
        roles: GROUP,
        query: &[],
        body: Some("CompletionsAck"),
        answer: "CompletionsAcked",
    },
    Op {
        method: "get",
        path: "/submissions/{app}/{key}",
        summary: "One submission by its group's app name and its key",
        roles: READ,
        query: &[],
        body: None,
        answer: "Submission",
    },
    Op {
        method: "put",
        path: "/submissions/{app}/{key}",
        summary: "Submit under a key of your own: once now or at an instant, a repeat (with a \
                  count or until cancelled) or a cron; a taken key is kept or replaced",
        roles: GROUP,
        query: &[],
        body: Some("SubmissionInput"),
        answer: "SubmissionPut",
    },
    Op {
        method: "delete",
        path: "/submissions/{app}/{key}",
        summary: "Cancel a submission: deleted with its job and runs; refused while a run is \
                  planned or running unless kill=true",
        roles: GROUP,
        query: &[(
            "kill",
            "boolean",
            "stop its job and kill its running runs first",
        )],
        body: None,
        answer: "Submission",
    },
];

/// Operations that call an executor while the client waits, and so can answer 502.
const EXECUTOR_CALLS: &[(&str, &str)] = &[
    ("get", "/runs/{id}/log"),
    ("post", "/runs/{id}/kill"),
    ("delete", "/submissions/{app}/{key}"),
];

/// An integer schema with the service's bounds. Every integer of the API is 64-bit.
pub(super) fn int_in(min: i64, max: i64) -> Value {
    json!({ "type": "integer", "format": "int64", "minimum": min, "maximum": max })
}

/// The schema of a query parameter, as strict as the service that reads it.
fn query_schema(name: &str, kind: &str) -> Value {
    if kind != "integer" {
        return match name {
            // Empty is the default, as a console form with nothing chosen sends it.
            "sort" => {
                let keys = [""].iter().chain(tickwork_protocol::api::JOB_SORT_KEYS);
                json!({ "type": kind, "enum": keys.collect::<Vec<_>>() })
            }
            "order" => json!({ "type": kind, "enum": ["", "asc", "desc"] }),
            _ => json!({ "type": kind }),
        };
    }
    match name {
        "page" => int_in(1, i64::MAX),
        "from_line" => int_in(1, i64::from(i32::MAX)),
        "size" | "limit" => int_in(1, 1000),
        "n" => int_in(1, 100),
        "offset" => int_in(0, i64::MAX),
        "before" => int_in(1, i64::MAX),
        // Ids in filters, and instants: any value; one that matches nothing lists nothing.
        _ => int_in(i64::MIN, i64::MAX),
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": reference("Error") } },
    })
}

fn operation(op: &Op) -> Value {
    let mut params = Vec::new();
    for segment in op.path.split('/') {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let schema = match name {
                "app" => json!({ "type": "string", "description": "the group's app name" }),
                "key" => json!({ "type": "string", "minLength": 1,
                    "maxLength": tickwork_core::submission::KEY_CHARS,
                    "pattern": "^[A-Za-z0-9._:-]+$" }),
                "workflow" | "node" => json!({ "type": "string", "minLength": 1,
                    "maxLength": tickwork_core::workflow::NODE_KEY_CHARS,
                    "pattern": "^[A-Za-z0-9._-]+$" }),
                _ => int_in(1, i64::MAX),
            };
            params.push(json!({ "name": name, "in": "path", "required": true, "schema": schema }));
        }
    }
    for (name, kind, description) in op.query {
        params.push(json!({
            "name": name, "in": "query", "required": false,
            "description": description, "schema": query_schema(name, kind),
        }));
    }
    let success = if op.method == "post" && matches!(op.path, "/tokens" | "/groups/{id}/token") {
        "201"
    } else {
        "200"
    };
    let mut responses = Map::new();
    responses.insert(
        success.to_owned(),
        json!({
            "description": "success",
            "content": { "application/json": { "schema": reference(op.answer) } },
        }),
    );
    responses.insert(
        "400".into(),
        error_response("invalid input (code invalid_input)"),
    );
    responses.insert(
        "401".into(),
        error_response("missing, wrong or revoked token"),
    );
    responses.insert(
        "403".into(),
        error_response("the caller's role may not do this"),
    );
    // `DELETE /runs` names a job or group in its query.
    if op.path.contains('{') || (op.method, op.path) == ("delete", "/runs") {
        responses.insert("404".into(), error_response("no such id"));
    }
    if op.method != "get" {
        responses.insert(
            "409".into(),
            error_response("conflicts with the current state"),
        );
    }
    if EXECUTOR_CALLS.contains(&(op.method, op.path)) {
        responses.insert(
            "502".into(),
            error_response("the executor could not be reached or refused (code executor_error)"),
        );
    }
    // Checking one's current password is limited as logins are.
    if (op.method, op.path) == ("put", "/users/{id}/password") {
        responses.insert(
            "429".into(),
            error_response("too many wrong current passwords (code rate_limited)"),
        );
    }
    responses.insert(
        "500".into(),
        error_response("internal error (details in the log)"),
    );
    responses.insert(
        "503".into(),
        error_response("the database did not answer in time (code unavailable)"),
    );
    let id = format!(
        "{}{}",
        op.method,
        op.path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                let s = s.trim_matches(|c| c == '{' || c == '}');
                let mut c = s.chars();
                c.next()
                    .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<String>()
    );
    let mut o = json!({
        "operationId": id,
        "summary": op.summary,
        "description": format!("Allowed: {}.", op.roles),
        "tags": [op.path.split('/').nth(1).unwrap_or("api")],
        "parameters": params,
        "responses": responses,
    });
    if let Some(body) = op.body {
        o["requestBody"] = json!({
            // Trigger, copy and a workflow's run take an empty body as "all defaults".
            "required": !matches!(body, "TriggerInput" | "CopyInput" | "WorkflowRunInput"),
            "content": { "application/json": { "schema": reference(body) } },
        });
    }
    o
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in all_ops() {
        let item = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        item[op.method] = operation(op);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Tickwork REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Jobs, runs, executor groups, scripts, users, API tokens and the audit log \
                of a Tickwork admin. Every call needs `Authorization: Bearer <token>`: a per-user \
                token (`tw_…`, acting with its user's role) or the admin's built-in API token. \
                Errors are `{\"code\", \"message\"}` with a stable code.",
        },
        "servers": [{ "url": "/openapi/v1" }],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas(),
        },
    })
}

/// Every (method, path) the document describes.
pub fn documented_routes() -> Vec<(&'static str, &'static str)> {
    all_ops().map(|o| (o.method, o.path)).collect()
}
