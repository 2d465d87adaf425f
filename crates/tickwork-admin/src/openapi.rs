//! The OpenAPI 3.1 document of the REST API, served at `/openapi.json`. Written by hand from
//! one table of operations (no build-time generator); a test checks that it describes exactly
//! the routes of [`crate::http::API_ROUTES`] and that it validates.

use serde_json::{Map, Value, json};
use tickwork_core::job::Limits;
use tickwork_core::run::RunState;
use tickwork_core::{
    BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType,
};

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
        summary: "The caller: user, role and groups",
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
        summary: "List jobs by group, status and text",
        roles: READ,
        query: &[
            ("group_id", "integer", "only this group"),
            ("status", "string", "running or stopped"),
            (
                "text",
                "string",
                "found in description, handler, key or owner",
            ),
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
        summary: "Alarm deliveries, one per failed run and channel, with their attempts and errors",
        roles: READ,
        query: &[
            ("run_id", "integer", "only this run's deliveries"),
            ("state", "string", "pending, sent or failed"),
            ("page", "integer", "page number, from 1"),
            ("limit", "integer", "items per page, 1-1000 (default 50)"),
        ],
        body: None,
        answer: "AlarmDeliveryPage",
    },
];

fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Value {
    Value::from(all.iter().map(|&v| name(v)).collect::<Vec<_>>())
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn array_of(name: &str) -> Value {
    json!({ "type": "array", "items": reference(name) })
}

fn page_of(name: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items", "total", "page", "size"],
        "properties": {
            "items": array_of(name),
            "total": { "type": "integer", "description": "items matching, on every page" },
            "page": { "type": "integer" },
            "size": { "type": "integer" },
        },
    })
}

/// An object schema: `(name, schema)` properties, the required ones listed; `closed` refuses
/// other properties (inputs do).
fn object(props: &[(&str, Value)], required: &[&str], closed: bool) -> Value {
    let mut p = Map::new();
    for (k, v) in props {
        p.insert((*k).to_owned(), v.clone());
    }
    let mut o = json!({ "type": "object", "properties": p, "required": required });
    if closed {
        o["additionalProperties"] = false.into();
    }
    o
}

fn t(kind: &str) -> Value {
    json!({ "type": kind })
}

/// The job limits the schema states: the ones the service checks.
const JOB: Limits = Limits::STANDARD;

/// A string of at most `n` characters.
fn str_max(n: u64) -> Value {
    json!({ "type": "string", "maxLength": n })
}

fn nullable(kind: &str) -> Value {
    json!({ "type": [kind, "null"] })
}

fn ints() -> Value {
    json!({ "type": "array", "items": { "type": "integer" } })
}

fn strings() -> Value {
    json!({ "type": "array", "items": { "type": "string" } })
}

fn schemas() -> Value {
    let schedule =
        json!({ "type": "string", "enum": names(ScheduleType::ALL, ScheduleType::as_str) });
    let misfire =
        json!({ "type": "string", "enum": names(MisfireStrategy::ALL, MisfireStrategy::as_str) });
    let route =
        json!({ "type": "string", "enum": names(RouteStrategy::ALL, RouteStrategy::as_str) });
    let block =
        json!({ "type": "string", "enum": names(BlockStrategy::ALL, BlockStrategy::as_str) });
    let glue = json!({ "type": "string", "enum": names(GlueType::ALL, GlueType::as_str) });
    let trigger = json!({ "type": "string", "enum": names(TriggerType::ALL, TriggerType::as_str) });
    let state = json!({ "type": "string", "enum": names(RunState::ALL, RunState::as_str) });
    let role = json!({ "type": "string", "enum": ["admin", "operator", "viewer"] });
    let counts = json!({ "type": "object", "additionalProperties": { "type": "integer" } });
    let job_fields = |input: bool| {
        let mut v = vec![
            (
                "key",
                if input {
                    nullable("string")
                } else {
                    t("string")
                },
            ),
            (
                "group_id",
                if input {
                    int_in(1, i64::MAX)
                } else {
                    t("integer")
                },
            ),
            (
                "description",
                if input {
                    str_max(JOB.description_chars as u64)
                } else {
                    t("string")
                },
            ),
            (
                "owner",
                if input {
                    str_max(JOB.owner_chars as u64)
                } else {
                    t("string")
                },
            ),
            ("alarm_channels", t("string")),
            ("schedule_type", schedule.clone()),
            ("schedule_conf", t("string")),
            (
                "time_zone",
                if input {
                    nullable("string")
                } else {
                    t("string")
                },
            ),
            ("misfire_strategy", misfire.clone()),
            ("route_strategy", route.clone()),
            ("handler", t("string")),
            ("params", t("string")),
            ("block_strategy", block.clone()),
            (
                "timeout_s",
                if input {
                    int_in(0, i64::from(i32::MAX))
                } else {
                    t("integer")
                },
            ),
            (
                "retry_count",
                if input {
                    int_in(0, i64::from(JOB.retry_count_max))
                } else {
                    t("integer")
                },
            ),
            (
                "retry_backoff_ms",
                if input {
                    int_in(0, JOB.retry_backoff_ms_max)
                } else {
                    t("integer")
                },
            ),
            (
                "child_job_ids",
                if input {
                    json!({ "type": "array", "items": int_in(1, i64::MAX) })
                } else {
                    ints()
                },
            ),
            (
                "priority",
                if input {
                    int_in(i64::from(i32::MIN), i64::from(i32::MAX))
                } else {
                    t("integer")
                },
            ),
            ("glue_type", glue.clone()),
            ("glue_source", t("string")),
        ];
        if input {
            v.push(("start", t("boolean")));
        } else {
            v.extend([
                ("id", t("integer")),
                ("glue_updated_at", t("integer")),
                (
                    "status",
                    json!({ "type": "string", "enum": ["running", "stopped"] }),
                ),
                ("next_fire_at", nullable("integer")),
                ("last_fire_at", nullable("integer")),
                ("version", t("integer")),
                ("created_at", t("integer")),
                ("updated_at", t("integer")),
            ]);
        }
        v
    };
    let job_out = job_fields(false);
    let job_required: Vec<&str> = job_out.iter().map(|(k, _)| *k).collect();
    let mut all = json!({
        "Error": object(&[
            ("code", json!({ "type": "string",
                "enum": crate::ErrorCode::ALL.map(crate::ErrorCode::as_str) })),
            ("message", t("string")),
            ("field", json!({ "type": "string", "description": "the input field an invalid_input names" })),
            ("error", object(&[("code", t("string")), ("message", t("string"))], &["code", "message"], false)),
        ], &["code", "message", "error"], false),
        "Me": object(&[
            ("user_id", t("integer")), ("username", t("string")), ("role", role.clone()),
            ("group_ids", ints()), ("locale", nullable("string")),
        ], &["user_id", "username", "role", "group_ids"], false),
        "GroupInput": object(&[
            ("app_name", t("string")), ("title", t("string")),
            ("address_mode", json!({ "type": ["string", "null"], "enum": ["auto", "manual", null] })),
            ("addresses", strings()),
        ], &["app_name"], true),
        "Group": object(&[
            ("id", t("integer")), ("app_name", t("string")), ("title", t("string")),
            ("address_mode", t("string")), ("addresses", strings()),
            ("live_addresses", strings()),
            ("has_token", json!({
                "type": "boolean",
                "description": "the group has its own executor access token (else the global one applies)",
            })),
            ("updated_at", t("integer")),
        ], &["id", "app_name", "title", "address_mode", "addresses", "live_addresses", "has_token", "updated_at"], false),
        "GroupList": array_of("Group"),
        "GroupToken": object(&[
            ("group_id", t("integer")),
            ("token", json!({
                "type": "string",
                "description": "twg_…; executors of the group send it in XXL-JOB-ACCESS-TOKEN; shown only here",
            })),
        ], &["group_id", "token"], false),
        "Instance": object(&[
            ("address", t("string")), ("last_heartbeat", t("integer")), ("alive", t("boolean")),
        ], &["address", "last_heartbeat", "alive"], false),
        "InstanceList": array_of("Instance"),
        "JobInput": object(&job_fields(true), &["group_id"], true),
        "Job": object(&job_out, &job_required, false),
        "JobPage": page_of("Job"),
        "TriggerInput": object(&[
            ("params", nullable("string")), ("address", nullable("string")),
        ], &[], true),
        "CopyInput": object(&[("description", nullable("string"))], &[], true),
        "Run": object(&[
            ("id", t("integer")), ("job_id", t("integer")), ("group_id", t("integer")),
            ("scheduled_at", t("integer")), ("fire_key", nullable("integer")),
            ("trigger_type", trigger), ("attempt", t("integer")),
            ("parent_run_id", nullable("integer")), ("executor_address", nullable("string")),
            ("handler", t("string")), ("params", t("string")),
            ("shard_index", nullable("integer")), ("shard_total", nullable("integer")),
            ("state", state), ("trigger_code", t("integer")), ("trigger_msg", nullable("string")),
            ("handle_code", t("integer")), ("handle_msg", nullable("string")),
            ("owner_node", nullable("string")), ("created_at", t("integer")),
            ("dispatched_at", nullable("integer")), ("finished_at", nullable("integer")),
        ], &["id", "job_id", "group_id", "scheduled_at", "trigger_type", "state"], false),
        "RunPage": page_of("Run"),
        "RunLog": object(&[
            ("from_line", t("integer")), ("to_line", t("integer")),
            ("content", t("string")), ("end", t("boolean")),
        ], &["from_line", "to_line", "content", "end"], false),
        "Cleared": object(&[("deleted", t("integer"))], &["deleted"], false),
        "Deleted": object(&[("deleted", t("integer"))], &["deleted"], false),
        "PreviewInput": object(&[
            ("schedule_type", schedule.clone()), ("schedule_conf", t("string")),
            ("time_zone", nullable("string")), ("n", nullable("integer")),
        ], &["schedule_type", "schedule_conf"], true),
        "Fires": object(&[("fires", ints())], &["fires"], false),
        "ScriptInput": object(&[
            ("glue_type", json!({ "anyOf": [glue.clone(), { "type": "null" }] })),
            ("source", t("string")), ("comment", t("string")),
        ], &["source"], true),
        "ScriptVersion": object(&[
            ("version", t("integer")), ("glue_type", glue), ("source", t("string")),
            ("comment", t("string")), ("author", t("string")), ("created_at", t("integer")),
        ], &["version", "glue_type", "source", "comment", "author", "created_at"], false),
        "ScriptVersionList": array_of("ScriptVersion"),
        "UserInput": object(&[
            ("username", t("string")), ("password", t("string")), ("role", role.clone()),
            ("group_ids", ints()), ("locale", nullable("string")),
        ], &["username", "password", "role"], true),
        "UserUpdateInput": object(&[
            ("role", role.clone()), ("group_ids", ints()), ("locale", nullable("string")),
            ("disabled", t("boolean")),
        ], &["role"], true),
        "User": object(&[
            ("id", t("integer")), ("username", t("string")), ("role", role),
            ("group_ids", ints()), ("locale", nullable("string")), ("disabled", t("boolean")),
            ("created_at", t("integer")), ("updated_at", t("integer")),
        ], &["id", "username", "role", "group_ids", "disabled", "created_at", "updated_at"], false),
        "UserList": array_of("User"),
        "PasswordInput": object(&[
            ("current_password", nullable("string")), ("password", t("string")),
        ], &["password"], true),
        "PasswordChanged": object(&[("changed", t("integer"))], &["changed"], false),
        "TokenInput": object(&[("name", t("string")), ("user_id", nullable("integer"))], &["name"], true),
        "Token": object(&[
            ("id", t("integer")), ("name", t("string")), ("user_id", t("integer")),
            ("created_at", t("integer")), ("last_used_at", nullable("integer")),
            ("revoked_at", nullable("integer")),
        ], &["id", "name", "user_id", "created_at"], false),
        "TokenList": array_of("Token"),
        "TokenCreated": object(&[
            ("token", reference("Token")),
            ("secret", json!({ "type": "string", "description": "tw_…; shown only here" })),
        ], &["token", "secret"], false),
        "Audit": object(&[
            ("id", t("integer")), ("at", t("integer")), ("actor_id", nullable("integer")),
            ("actor", t("string")), ("action", t("string")), ("target_type", t("string")),
            ("target_id", t("string")), ("before", json!({})), ("after", json!({})),
        ], &["id", "at", "actor", "action", "target_type", "target_id"], false),
        "AuditPage": page_of("Audit"),
        "Stats": object(&[
            ("jobs", t("integer")), ("jobs_running", t("integer")), ("groups", t("integer")),
            ("executors", t("integer")), ("runs_today", counts.clone()),
            ("runs_per_day", json!({ "type": "array", "items": object(&[
                ("day", t("integer")), ("by_state", counts),
            ], &["day", "by_state"], false) })),
            ("lateness", json!({ "anyOf": [{ "type": "null" }, object(&[
                ("count", t("integer")), ("mean_ms", t("number")),
                ("p50_ms", nullable("integer")), ("p99_ms", nullable("integer")),
            ], &["count", "mean_ms"], false)] })),
        ], &["jobs", "jobs_running", "groups", "executors", "runs_today", "runs_per_day"], false),
    });
    let Value::Object(all) = &mut all else {
        unreachable!("the schemas are an object")
    };
    if let Value::Object(alarms) = alarm_schemas() {
        all.extend(alarms);
    }
    Value::Object(std::mem::take(all))
}

/// The schemas of alarm channels and deliveries, apart from [`schemas`]: one `json!` of
/// everything would pass the macro recursion limit.
fn alarm_schemas() -> Value {
    let alarm_kind = json!({ "type": "string",
        "enum": ["email", "webhook", "dingtalk", "wecom", "feishu", "slack"] });
    let channel_config = json!({ "type": "object", "description": "per kind: email (host, \
        port, tls, username, password, from, to), webhook (url, secret), dingtalk and feishu \
        (url, secret), wecom and slack (url)" });
    let delivery_state = json!({ "type": "string", "enum": ["pending", "sent", "failed"] });
    json!({
        "AlarmChannelInput": object(&[
            ("name", t("string")),
            ("kind", alarm_kind),
            ("config", channel_config),
            ("enabled", nullable("boolean")),
        ], &["name", "kind"], true),
        "AlarmChannel": object(&[
            ("id", t("integer")), ("name", t("string")), ("kind", t("string")),
            ("config", t("object")), ("enabled", t("boolean")),
            ("created_at", t("integer")), ("updated_at", t("integer")),
        ], &["id", "name", "kind", "config", "enabled", "created_at", "updated_at"], false),
        "AlarmChannelList": array_of("AlarmChannel"),
        "AlarmTestResult": object(&[
            ("ok", t("boolean")), ("error", nullable("string")), ("elapsed_ms", t("integer")),
        ], &["ok", "elapsed_ms"], false),
        "AlarmDelivery": object(&[
            ("id", t("integer")), ("run_id", t("integer")), ("channel_id", t("integer")),
            ("channel_name", t("string")), ("kind", t("string")),
            ("state", delivery_state),
            ("attempts", t("integer")), ("next_attempt_at", nullable("integer")),
            ("last_error", nullable("string")), ("sent_at", nullable("integer")),
            ("created_at", t("integer")), ("updated_at", t("integer")),
        ], &["id", "run_id", "channel_id", "channel_name", "kind", "state", "attempts",
             "created_at", "updated_at"], false),
        "AlarmDeliveryPage": page_of("AlarmDelivery"),
    })
}

/// Operations that call an executor while the client waits, and so can answer 502.
const EXECUTOR_CALLS: &[(&str, &str)] = &[("get", "/runs/{id}/log"), ("post", "/runs/{id}/kill")];

/// An integer schema with the service's bounds. Every integer of the API is 64-bit.
fn int_in(min: i64, max: i64) -> Value {
    json!({ "type": "integer", "format": "int64", "minimum": min, "maximum": max })
}

/// The schema of a query parameter, as strict as the service that reads it.
fn query_schema(name: &str, kind: &str) -> Value {
    if kind != "integer" {
        return json!({ "type": kind });
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
            params.push(json!({
                "name": name, "in": "path", "required": true,
                "schema": int_in(1, i64::MAX),
            }));
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
            // Trigger and copy take an empty body as "all defaults".
            "required": !matches!(body, "TriggerInput" | "CopyInput"),
            "content": { "application/json": { "schema": reference(body) } },
        });
    }
    o
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in OPS {
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
    OPS.iter().map(|o| (o.method, o.path)).collect()
}
