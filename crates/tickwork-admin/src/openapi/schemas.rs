//! The OpenAPI document's component schemas, built from the API's types and limits.

use serde_json::{Map, Value, json};
use tickwork_core::fire_check::{FireAlertKind, MAX_LATENESS_BUDGET_MS};
use tickwork_core::job::{JobSpec, Limits};
use tickwork_core::run::RunState;
use tickwork_core::{
    BlockStrategy, Delivery, GlueType, MisfireStrategy, RouteStrategy, ScheduleType, TriggerType,
};
use tickwork_protocol::api::{JOBS_ACTION_MAX, JobAction};

use super::int_in;

pub(super) fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Value {
    Value::from(all.iter().map(|&v| name(v)).collect::<Vec<_>>())
}

pub(super) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

pub(super) fn array_of(name: &str) -> Value {
    json!({ "type": "array", "items": reference(name) })
}

pub(super) fn page_of(name: &str) -> Value {
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
pub(super) fn object(props: &[(&str, Value)], required: &[&str], closed: bool) -> Value {
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

pub(super) fn t(kind: &str) -> Value {
    json!({ "type": kind })
}

/// The job limits the schema states: the ones the service checks.
pub(super) const JOB: Limits = Limits::STANDARD;

/// A string of at most `n` characters.
pub(super) fn str_max(n: u64) -> Value {
    json!({ "type": "string", "maxLength": n })
}

pub(super) fn nullable(kind: &str) -> Value {
    json!({ "type": [kind, "null"] })
}

pub(super) fn ints() -> Value {
    json!({ "type": "array", "items": { "type": "integer" } })
}

pub(super) fn strings() -> Value {
    json!({ "type": "array", "items": { "type": "string" } })
}

/// The schemas of a job's definition ([`JobSpec`]) as inputs are checked: every field serde
/// reads, in its order, with its enum or limits where it has some, else the JSON type of its
/// blank value (so a new field is documented as it is written).
fn job_spec_fields() -> Vec<(&'static str, Value)> {
    let blank = serde_json::to_value(JobSpec::blank(1)).unwrap_or_default();
    let one_of = |names: Value| json!({ "type": "string", "enum": names });
    JobSpec::field_names()
        .iter()
        .map(|&name| {
            let schema = match name {
                "group_id" => int_in(1, i64::MAX),
                "description" => str_max(JOB.description_chars as u64),
                "owner" => str_max(JOB.owner_chars as u64),
                "schedule_type" => one_of(names(ScheduleType::ALL, ScheduleType::as_str)),
                // Absent, null or empty: the admin's default zone.
                "time_zone" => nullable("string"),
                "misfire_strategy" => one_of(names(MisfireStrategy::ALL, MisfireStrategy::as_str)),
                "route_strategy" => one_of(names(RouteStrategy::ALL, RouteStrategy::as_str)),
                "block_strategy" => one_of(names(BlockStrategy::ALL, BlockStrategy::as_str)),
                "timeout_s" => int_in(0, i64::from(i32::MAX)),
                "retry_count" => int_in(0, i64::from(JOB.retry_count_max)),
                "retry_backoff_ms" => int_in(0, JOB.retry_backoff_ms_max),
                "child_job_ids" => json!({ "type": "array", "items": int_in(1, i64::MAX) }),
                "priority" => int_in(i64::from(i32::MIN), i64::from(i32::MAX)),
                "glue_type" => one_of(names(GlueType::ALL, GlueType::as_str)),
                "delivery" => one_of(names(Delivery::ALL, Delivery::as_str)),
                "lateness_budget_ms" => int_in(0, MAX_LATENESS_BUDGET_MS),
                _ => match &blank[name] {
                    Value::String(_) => t("string"),
                    Value::Number(_) => t("integer"),
                    Value::Bool(_) => t("boolean"),
                    Value::Array(_) => t("array"),
                    _ => json!({}),
                },
            };
            (name, schema)
        })
        .collect()
}

/// `schema` with its types only, as views state them: no limits (a stored value may predate
/// one) and no `null` where an input may leave a value to the admin.
fn loose(mut schema: Value) -> Value {
    if let Value::Object(o) = &mut schema {
        for limit in ["format", "minimum", "maximum", "maxLength"] {
            o.remove(limit);
        }
        if let Some(Value::Array(kinds)) = o.get("type")
            && let [kind, null] = &kinds[..]
            && null == "null"
        {
            o.insert("type".to_owned(), kind.clone());
        }
        if let Some(items) = o.remove("items") {
            o.insert("items".to_owned(), loose(items));
        }
    }
    schema
}

pub(super) fn schemas() -> Value {
    let schedule =
        json!({ "type": "string", "enum": names(ScheduleType::ALL, ScheduleType::as_str) });
    let glue = json!({ "type": "string", "enum": names(GlueType::ALL, GlueType::as_str) });
    let trigger = json!({ "type": "string", "enum": names(TriggerType::ALL, TriggerType::as_str) });
    let state = json!({ "type": "string", "enum": names(RunState::ALL, RunState::as_str) });
    let role = json!({ "type": "string", "enum": ["admin", "operator", "viewer"] });
    let counts = json!({ "type": "object", "additionalProperties": { "type": "integer" } });
    let diff_line = object(
        &[
            (
                "change",
                json!({ "type": "string", "enum": ["same", "removed", "added"] }),
            ),
            ("old_no", nullable("integer")),
            ("new_no", nullable("integer")),
            ("text", t("string")),
        ],
        &["change", "text"],
        false,
    );
    let script_diff = object(
        &[
            ("from", reference("ScriptVersion")),
            ("to", reference("ScriptVersion")),
            ("added", t("integer")),
            ("removed", t("integer")),
            ("lines", json!({ "type": "array", "items": diff_line })),
        ],
        &["from", "to", "added", "removed", "lines"],
        false,
    );
    let fire_alert_kind =
        json!({ "type": "string", "enum": names(FireAlertKind::ALL, FireAlertKind::as_str) });
    // Built apart: one more entry in the document's `json!` would pass the macro's recursion
    // limit.
    #[rustfmt::skip]
    let stats = object(&[
        ("jobs", t("integer")), ("jobs_running", t("integer")), ("groups", t("integer")),
        ("executors", t("integer")), ("runs_today", counts.clone()),
        ("runs_per_day", json!({ "type": "array", "items": object(&[
            ("day", t("integer")), ("by_state", counts),
        ], &["day", "by_state"], false) })),
        ("lateness", json!({ "anyOf": [{ "type": "null" }, object(&[
            ("count", t("integer")), ("mean_ms", t("number")),
            ("p50_ms", nullable("integer")), ("p99_ms", nullable("integer")),
        ], &["count", "mean_ms"], false)] })),
        ("fire_alerts", json!({ "type": "array", "items": object(&[
            ("kind", fire_alert_kind),
            ("alerts", t("integer")), ("fires", t("integer")),
        ], &["kind", "alerts", "fires"], false) })),
    ], &["jobs", "jobs_running", "groups", "executors", "runs_today", "runs_per_day"], false);
    let job_input: Vec<(&str, Value)> = [("key", nullable("string"))]
        .into_iter()
        .chain(job_spec_fields())
        .chain([("start", t("boolean"))])
        .collect();
    let job_out: Vec<(&str, Value)> = [("key", t("string"))]
        .into_iter()
        .chain(job_spec_fields().into_iter().map(|(k, v)| (k, loose(v))))
        .chain([
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
        ])
        .collect();
    let job_required: Vec<&str> = job_out.iter().map(|(k, _)| *k).collect();
    // A job of a list: the job and its last run.
    let last_run = json!({
        "oneOf": [
            { "type": "null" },
            object(&[
                ("id", t("integer")), ("state", state.clone()),
                ("scheduled_at", t("integer")), ("finished_at", nullable("integer")),
            ], &["id", "state", "scheduled_at", "finished_at"], false),
        ],
        "description": "the newest run that left planned; null when the job has none",
    });
    let job_listed: Vec<(&str, Value)> = job_out
        .iter()
        .cloned()
        .chain([("last_run", last_run)])
        .collect();
    let job_listed_required: Vec<&str> = job_listed.iter().map(|(k, _)| *k).collect();
    let item_errors = json!({
        "type": "array",
        "description": "the wrong items of a list input, each with its index and field",
        "items": object(&[
            ("index", t("integer")), ("field", nullable("string")), ("message", t("string")),
        ], &["index", "message"], false),
    });
    let mut all = json!({
        "Error": object(&[
            ("code", json!({ "type": "string",
                "enum": crate::ErrorCode::ALL.map(crate::ErrorCode::as_str) })),
            ("message", t("string")),
            ("field", json!({ "type": "string", "description": "the input field an invalid_input names" })),
            ("error", object(&[("code", t("string")), ("message", t("string"))], &["code", "message"], false)),
            ("errors", item_errors),
        ], &["code", "message", "error"], false),
        "Me": object(&[
            ("user_id", t("integer")), ("username", t("string")), ("role", role.clone()),
            ("group_ids", ints()), ("locale", nullable("string")),
            // The zone of jobs that name none: clients compare definitions with it.
            ("default_time_zone", t("string")),
        ], &["user_id", "username", "role", "group_ids", "default_time_zone"], false),
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
        "JobInput": object(&job_input, &["group_id"], true),
        "Job": object(&job_out, &job_required, false),
        "JobPage": page_of("JobListItem"),
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
        "ScriptDiff": script_diff,
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
        "Stats": stats,
    });
    let Value::Object(all) = &mut all else {
        unreachable!("the schemas are an object")
    };
    // Here, not in the `json!` above: one more entry there passes the macro's recursion limit.
    all.insert(
        "JobListItem".to_owned(),
        object(&job_listed, &job_listed_required, false),
    );
    for part in [
        alarm_schemas(),
        bulk_schemas(),
        action_schemas(),
        heatmap_schemas(),
        submission_schemas(),
        super::workflows::workflow_schemas(),
    ] {
        if let Value::Object(part) = part {
            all.extend(part);
        }
    }
    Value::Object(std::mem::take(all))
}

/// The schemas of `POST /jobs/actions`, apart from [`schemas`] for the macro's recursion
/// limit.
fn action_schemas() -> Value {
    let action = json!({
        "type": "string",
        "enum": JobAction::ALL.map(JobAction::as_str),
    });
    json!({
        "JobsActionInput": object(&[
            ("action", action.clone()),
            ("ids", json!({
                "type": "array", "minItems": 1, "maxItems": JOBS_ACTION_MAX,
                "items": int_in(1, i64::MAX),
            })),
        ], &["action", "ids"], true),
        "JobsActionResult": object(&[
            ("action", action),
            ("done", ints()),
            ("refused", json!({
                "type": "array",
                "description": "each job refused, with the error its own call would have answered",
                "items": object(&[
                    ("id", t("integer")),
                    ("code", json!({ "type": "string",
                        "enum": crate::ErrorCode::ALL.map(crate::ErrorCode::as_str) })),
                    ("message", t("string")),
                ], &["id", "code", "message"], false),
            })),
        ], &["action", "done", "refused"], false),
    })
}

/// The schemas of submissions, apart from [`schemas`] for the macro's recursion limit.
fn submission_schemas() -> Value {
    use tickwork_core::schedule::{MAX_INTERVAL_MS, MIN_INTERVAL_MS};
    use tickwork_protocol::submissions::SUBMISSIONS_BATCH_MAX;
    let schedule = json!({ "oneOf": [
        object(&[("kind", json!({ "const": "now" }))], &["kind"], true),
        object(&[("kind", json!({ "const": "at" })), ("at", json!({ "type": "string",
            "description": "RFC 3339, or a date-time in the submission's time zone" }))],
            &["kind", "at"], true),
        object(&[("kind", json!({ "const": "repeat" })),
            ("every_ms", int_in(MIN_INTERVAL_MS, MAX_INTERVAL_MS)),
            ("count", json!({ "type": ["integer", "null"], "minimum": 1,
                "description": "fires in all; absent: until cancelled" }))],
            &["kind", "every_ms"], true),
        object(&[("kind", json!({ "const": "cron" })), ("cron", json!({ "type": "string",
            "description": "a Quartz expression" }))], &["kind", "cron"], true),
    ] });
    let outcome = json!({ "type": "string", "enum": ["created", "kept", "replaced"] });
    let input = object(
        &[
            ("handler", str_max(JOB.handler_chars as u64)),
            ("params", t("string")),
            ("schedule", schedule.clone()),
            ("time_zone", nullable("string")),
            ("rely_on_prev_cycle", t("boolean")),
            (
                "on_conflict",
                json!({ "type": "string", "enum": ["ignore", "replace"] }),
            ),
            ("priority", int_in(i64::from(i32::MIN), i64::from(i32::MAX))),
            ("retry_count", int_in(0, i64::from(JOB.retry_count_max))),
            ("retry_backoff_ms", int_in(0, JOB.retry_backoff_ms_max)),
            ("timeout_s", int_in(0, i64::from(i32::MAX))),
            (
                "route_strategy",
                json!({ "anyOf": [
            { "type": "string", "enum": names(RouteStrategy::ALL, RouteStrategy::as_str) },
            { "type": "null" },
        ] }),
            ),
            ("description", str_max(JOB.description_chars as u64)),
            ("feedback_channel", nullable("string")),
        ],
        &["handler", "schedule"],
        true,
    );
    let view = object(
        &[
            ("app_name", t("string")),
            ("key", t("string")),
            ("job_id", t("integer")),
            ("schedule", schedule),
            ("time_zone", t("string")),
            ("rely_on_prev_cycle", t("boolean")),
            (
                "state",
                json!({ "type": "string", "enum": ["active", "finished"] }),
            ),
            ("next_fire_at", nullable("integer")),
            ("fires_left", nullable("integer")),
            ("feedback_channel", nullable("string")),
            ("created_at", t("integer")),
            ("updated_at", t("integer")),
        ],
        &[
            "app_name",
            "key",
            "job_id",
            "schedule",
            "time_zone",
            "rely_on_prev_cycle",
            "state",
            "next_fire_at",
            "fires_left",
            "feedback_channel",
            "created_at",
            "updated_at",
        ],
        false,
    );
    let code = json!({ "type": "string",
        "enum": crate::ErrorCode::ALL.map(crate::ErrorCode::as_str) });
    json!({
        "SubmissionInput": input,
        "Submission": view,
        "SubmissionPut": object(&[("outcome", outcome.clone()), ("submission", reference("Submission"))],
            &["outcome", "submission"], false),
        "SubmissionsBatchInput": object(&[("items", json!({ "type": "array",
            "minItems": 1, "maxItems": SUBMISSIONS_BATCH_MAX,
            // Each item's key and submission are checked on their own, a bad one answered in
            // its result (200): the document does not hold them to `SubmissionInput`'s bounds,
            // which would make a batch with one bad item a bad request.
            "items": object(&[("key", t("string")), ("submission", json!({ "type": "object",
                "description": "a SubmissionInput, checked as its own put; its error is its result's" }))],
                &["key", "submission"], true) }))], &["items"], true),
        "Completions": object(&[("items", json!({ "type": "array", "items": object(&[
            ("id", t("integer")), ("key", t("string")), ("run_id", t("integer")),
            ("attempt", t("integer")),
            ("state", json!({ "type": "string", "enum": names(RunState::ALL, RunState::as_str) })),
            ("handle_code", t("integer")), ("handle_msg", nullable("string")),
            ("scheduled_at", t("integer")), ("ended_at", t("integer")),
        ], &["id", "key", "run_id", "attempt", "state", "handle_code", "handle_msg",
             "scheduled_at", "ended_at"], false) }))], &["items"], false),
        "CompletionsAck": object(&[("ids", json!({ "type": "array", "minItems": 1,
            "maxItems": SUBMISSIONS_BATCH_MAX, "items": t("integer") }))], &["ids"], true),
        "CompletionsAcked": object(&[("acked", t("integer"))], &["acked"], false),
        "SubmissionsBatchResult": object(&[("results", json!({ "type": "array",
            "items": object(&[
                ("key", t("string")), ("outcome", outcome),
                ("submission", reference("Submission")),
                ("error", object(&[("code", code), ("message", t("string"))],
                    &["code", "message"], false)),
            ], &["key"], false) }))], &["results"], false),
    })
}

/// The schemas of `POST /jobs/bulk`, apart from [`schemas`] for the macro's recursion limit.
fn bulk_schemas() -> Value {
    json!({
        "JobsBulkInput": object(&[
            ("jobs", json!({
                "type": "array", "items": reference("JobInput"),
                "minItems": 1, "maxItems": tickwork_protocol::api::JOBS_BULK_MAX,
            })),
        ], &["jobs"], true),
        "JobsBulkCreated": object(&[
            ("created", t("integer")),
            ("jobs", json!({ "type": "array", "items": object(&[
                ("id", t("integer")), ("key", t("string")),
            ], &["id", "key"], false) })),
        ], &["created", "jobs"], false),
    })
}

/// The schema of `GET /schedule/heatmap`, apart from [`schemas`] for the macro's recursion
/// limit.
fn heatmap_schemas() -> Value {
    let counts = json!({ "type": "array", "items": t("integer") });
    json!({
        "Heatmap": object(&[
            ("from", t("integer")), ("to", t("integer")), ("bucket_ms", t("integer")),
            ("buckets", t("integer")), ("jobs", t("integer")), ("fires", t("integer")),
            ("totals", counts.clone()),
            ("groups", json!({ "type": "array", "items": object(&[
                ("group_id", t("integer")), ("app_name", t("string")), ("title", t("string")),
                ("fires", t("integer")), ("counts", counts),
            ], &["group_id", "app_name", "title", "fires", "counts"], false) })),
            ("peaks", json!({ "type": "array", "items": object(&[
                ("start", t("integer")), ("end", t("integer")), ("fires", t("integer")),
                ("jobs", json!({ "type": "array", "items": object(&[
                    ("job_id", t("integer")), ("key", t("string")),
                    ("description", t("string")), ("group_id", t("integer")),
                    ("fires", t("integer")), ("first_fire", t("integer")),
                ], &["job_id", "key", "description", "group_id", "fires", "first_fire"], false) })),
                ("more_jobs", t("integer")),
            ], &["start", "end", "fires", "jobs", "more_jobs"], false) })),
            ("capped", json!({ "type": "array", "description": "jobs counted up to `until` \
                only (too many cron fires): their counts are lower bounds", "items": object(&[
                ("job_id", t("integer")), ("key", t("string")),
                ("counted", t("integer")), ("until", t("integer")),
            ], &["job_id", "key", "counted", "until"], false) })),
        ], &["from", "to", "bucket_ms", "buckets", "jobs", "fires", "totals", "groups", "peaks",
             "capped"], false),
    })
}

/// The schemas of alarm channels and deliveries, apart from [`schemas`]: one `json!` of
/// everything would pass the macro recursion limit.
pub(super) fn alarm_schemas() -> Value {
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
            ("id", t("integer")), ("run_id", t("integer")), ("job_id", t("integer")),
            ("grouped_runs", t("integer")), ("last_run_id", nullable("integer")),
            ("due_at", t("integer")),
            ("fire_alert_id", nullable("integer")), ("channel_id", t("integer")),
            ("channel_name", t("string")), ("kind", t("string")),
            ("state", delivery_state),
            ("attempts", t("integer")), ("next_attempt_at", nullable("integer")),
            ("last_error", nullable("string")), ("sent_at", nullable("integer")),
            ("created_at", t("integer")), ("updated_at", t("integer")),
        ], &["id", "run_id", "job_id", "grouped_runs", "due_at", "channel_id", "channel_name",
             "kind", "state", "attempts", "created_at", "updated_at"], false),
        "AlarmDeliveryPage": page_of("AlarmDelivery"),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use tickwork_protocol::api::{JobInput, JobView};

    use super::*;

    fn properties(schema: &Value) -> BTreeSet<String> {
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    fn written(value: impl serde::Serialize) -> BTreeSet<String> {
        let v = serde_json::to_value(value).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn job_schemas_name_exactly_the_fields_serde_writes() {
        let all = schemas();
        let (input, job) = (&all["JobInput"], &all["Job"]);
        assert_eq!(properties(input), written(JobInput::new(1)));
        assert_eq!(input["additionalProperties"], false);
        assert_eq!(input["required"], json!(["group_id"]));
        let view = JobView {
            id: 1,
            key: "k".into(),
            spec: JobSpec::new(1, "h"),
            glue_updated_at: 0,
            status: "stopped".into(),
            next_fire_at: None,
            last_fire_at: None,
            version: 1,
            created_at: 0,
            updated_at: 0,
        };
        assert_eq!(properties(job), written(&view));
        let required: BTreeSet<String> = serde_json::from_value(job["required"].clone()).unwrap();
        assert_eq!(required, properties(job));
    }

    #[test]
    fn the_view_states_the_inputs_types_without_limits() {
        let all = schemas();
        for &field in JobSpec::field_names() {
            let (input, view) = (
                &all["JobInput"]["properties"][field],
                &all["Job"]["properties"][field],
            );
            assert_eq!(*view, loose(input.clone()), "{field}");
            let text = view.to_string();
            assert!(
                !text.contains("maximum") && !text.contains("null"),
                "{field}: {text}"
            );
        }
        let input = &all["JobInput"]["properties"];
        assert_eq!(input["group_id"]["minimum"], 1);
        assert_eq!(input["retry_count"]["maximum"], JOB.retry_count_max);
        assert_eq!(input["time_zone"]["type"], json!(["string", "null"]));
        assert_eq!(
            all["Job"]["properties"]["time_zone"],
            json!({ "type": "string" })
        );
        assert_eq!(
            all["Job"]["properties"]["child_job_ids"],
            json!({ "type": "array", "items": { "type": "integer" } })
        );
    }
}
