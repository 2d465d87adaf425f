//! The OpenAPI document's workflow part: its operations, and the schemas of a definition, an
//! instance and its nodes, as strict as the service that reads them.

use serde_json::{Value, json};
use tickwork_core::job::Limits;
use tickwork_core::workflow::step::{InstanceState, NodeState};
use tickwork_core::workflow::{
    EdgeOn, FailurePolicy, MAX_EDGES, MAX_NODES, NODE_KEY_CHARS, Overflow,
};
use tickwork_core::{MisfireStrategy, ScheduleType};

use super::schemas::{array_of, names, nullable, object, reference, str_max, t};
use super::{GROUP, Op, READ, int_in};

const JOB: Limits = Limits::STANDARD;

fn key_schema() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": NODE_KEY_CHARS,
        "pattern": "^[A-Za-z0-9._-]+$" })
}

fn enum_of<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Value {
    json!({ "type": "string", "enum": names(all, name) })
}

/// The schemas of workflows, merged into the document's.
pub(super) fn workflow_schemas() -> Value {
    let node = object(
        &[
            ("key", key_schema()),
            (
                "job",
                json!({ "type": "string", "minLength": 1, "description": "the job's key" }),
            ),
            (
                "params",
                json!({ "type": ["string", "null"], "maxLength": JOB.params_bytes,
                "description": "instead of the job's; ${ctx.NAME} reads the context" }),
            ),
            (
                "timeout_s",
                json!({ "type": ["integer", "null"], "minimum": 0 }),
            ),
            (
                "retry_count",
                json!({ "type": ["integer", "null"], "minimum": 0,
                "maximum": JOB.retry_count_max }),
            ),
            (
                "retry_backoff_ms",
                json!({ "type": ["integer", "null"], "minimum": 0,
                "maximum": JOB.retry_backoff_ms_max }),
            ),
            ("skip_when_failed", t("boolean")),
            ("enabled", t("boolean")),
        ],
        &["key", "job"],
        true,
    );
    let edge = object(
        &[
            ("from", t("string")),
            ("to", t("string")),
            ("on", enum_of(EdgeOn::ALL, EdgeOn::as_str)),
        ],
        &["from", "to"],
        true,
    );
    let dag = object(
        &[
            (
                "nodes",
                json!({ "type": "array", "items": reference("WorkflowNode"),
                "minItems": 1, "maxItems": MAX_NODES }),
            ),
            (
                "edges",
                json!({ "type": "array", "items": reference("WorkflowEdge"),
                "maxItems": MAX_EDGES }),
            ),
        ],
        &[],
        true,
    );
    let schedule_types = json!({ "type": "string", "enum": ["NONE", "CRON", "FIX_RATE", "ONCE"] });
    let input = object(
        &[
            ("key", key_schema()),
            (
                "name",
                json!({ "type": "string", "minLength": 1, "maxLength": 255 }),
            ),
            (
                "group",
                json!({ "type": "string", "description": "the owning group's app name" }),
            ),
            ("dag", reference("WorkflowDag")),
            (
                "failure_policy",
                enum_of(FailurePolicy::ALL, FailurePolicy::as_str),
            ),
            ("max_instances", int_in(1, 1000)),
            ("overflow", enum_of(Overflow::ALL, Overflow::as_str)),
            ("schedule_type", schedule_types),
            ("schedule_conf", str_max(JOB.schedule_conf_chars as u64)),
            ("time_zone", nullable("string")),
            (
                "misfire_strategy",
                enum_of(MisfireStrategy::ALL, MisfireStrategy::as_str),
            ),
            ("enabled", t("boolean")),
        ],
        &["key", "name", "group", "dag"],
        true,
    );
    let view_fields = [
        ("id", t("integer")),
        ("key", t("string")),
        ("name", t("string")),
        ("group", t("string")),
        (
            "dag",
            json!({ "type": "object", "description": "the DAG as written (a WorkflowDag)" }),
        ),
        (
            "failure_policy",
            enum_of(FailurePolicy::ALL, FailurePolicy::as_str),
        ),
        ("max_instances", t("integer")),
        ("overflow", enum_of(Overflow::ALL, Overflow::as_str)),
        (
            "schedule_type",
            enum_of(ScheduleType::ALL, ScheduleType::as_str),
        ),
        ("schedule_conf", t("string")),
        ("time_zone", t("string")),
        (
            "misfire_strategy",
            enum_of(MisfireStrategy::ALL, MisfireStrategy::as_str),
        ),
        ("enabled", t("boolean")),
        ("next_fire_at", nullable("integer")),
        ("version", t("integer")),
        ("created_at", t("integer")),
        ("updated_at", t("integer")),
    ];
    let view_required: Vec<&str> = view_fields.iter().map(|(k, _)| *k).collect();
    let state = enum_of(InstanceState::ALL, InstanceState::as_str);
    let instance_node = object(
        &[
            ("key", t("string")),
            ("job", t("string")),
            ("job_id", t("integer")),
            ("state", enum_of(NodeState::ALL, NodeState::as_str)),
            ("run_ids", json!({ "type": "array", "items": t("integer") })),
        ],
        &["key", "job", "job_id", "state", "run_ids"],
        false,
    );
    let instance_fields = [
        ("id", t("integer")),
        ("workflow_id", t("integer")),
        ("state", state.clone()),
        (
            "admitted",
            json!({ "type": ["string", "null"],
            "enum": ["started", "queued", "skipped", null] }),
        ),
        ("nodes", array_of("WorkflowInstanceNode")),
        ("edges", array_of("WorkflowEdge")),
        (
            "context",
            json!({ "type": "object", "additionalProperties": t("string") }),
        ),
        ("trigger_type", t("string")),
        ("fire_key", nullable("integer")),
        ("created_at", t("integer")),
        ("ended_at", nullable("integer")),
    ];
    let instance_required: Vec<&str> = instance_fields.iter().map(|(k, _)| *k).collect();
    let summary_fields = [
        ("id", t("integer")),
        ("workflow_id", t("integer")),
        ("state", state),
        ("trigger_type", t("string")),
        ("fire_key", nullable("integer")),
        ("created_at", t("integer")),
        ("ended_at", nullable("integer")),
    ];
    let summary_required: Vec<&str> = summary_fields.iter().map(|(k, _)| *k).collect();
    json!({
        "WorkflowNode": node,
        "WorkflowEdge": edge,
        "WorkflowDag": dag,
        "WorkflowInput": input,
        "Workflow": object(&view_fields, &view_required, false),
        "WorkflowList": array_of("Workflow"),
        "WorkflowRunInput": object(&[("params", t("string"))], &[], true),
        "WorkflowInstanceNode": instance_node,
        "WorkflowInstance": object(&instance_fields, &instance_required, false),
        "WorkflowInstanceSummary": object(&summary_fields, &summary_required, false),
        "WorkflowInstanceList": array_of("WorkflowInstanceSummary"),
    })
}

/// The operations on workflows and their instances.
pub(super) const OPS: &[Op] = &[
    Op {
        method: "get",
        path: "/workflows",
        summary: "Every workflow, by key",
        roles: READ,
        query: &[],
        body: None,
        answer: "WorkflowList",
    },
    Op {
        method: "post",
        path: "/workflows",
        summary: "Create a workflow: a DAG of jobs by key, checked whole (no cycle, known \
                  nodes, every job in a group you may change), with its schedule and cap",
        roles: GROUP,
        query: &[],
        body: Some("WorkflowInput"),
        answer: "Workflow",
    },
    Op {
        method: "get",
        path: "/workflows/{workflow}",
        summary: "One workflow by key",
        roles: READ,
        query: &[],
        body: None,
        answer: "Workflow",
    },
    Op {
        method: "put",
        path: "/workflows/{workflow}",
        summary: "Rewrite a workflow; running instances keep the DAG they started with",
        roles: GROUP,
        query: &[],
        body: Some("WorkflowInput"),
        answer: "Workflow",
    },
    Op {
        method: "delete",
        path: "/workflows/{workflow}",
        summary: "Delete a workflow with its ended instances (their runs stay); refused while \
                  an instance is running or queued",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "Workflow",
    },
    Op {
        method: "post",
        path: "/workflows/{workflow}/run",
        summary: "Run a workflow now with params (the context's params): an instance with its \
                  first nodes' runs, queued past its cap or refused (409) when it skips",
        roles: GROUP,
        query: &[],
        body: Some("WorkflowRunInput"),
        answer: "WorkflowInstance",
    },
    Op {
        method: "get",
        path: "/workflows/{workflow}/instances",
        summary: "A workflow's newest instances",
        roles: READ,
        query: &[("limit", "integer", "at most this many, 1-1000 (default 50)")],
        body: None,
        answer: "WorkflowInstanceList",
    },
    Op {
        method: "get",
        path: "/workflow-instances/{id}",
        summary: "One workflow instance, node by node, with its context",
        roles: READ,
        query: &[],
        body: None,
        answer: "WorkflowInstance",
    },
    Op {
        method: "post",
        path: "/workflow-instances/{id}/stop",
        summary: "Stop an instance: its running nodes' runs killed, the others stopped",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "WorkflowInstance",
    },
    Op {
        method: "post",
        path: "/workflow-instances/{id}/resume",
        summary: "Resume a failed or stopped instance: succeeded nodes kept, the rest run again",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "WorkflowInstance",
    },
    Op {
        method: "post",
        path: "/workflow-instances/{id}/nodes/{node}/mark-succeeded",
        summary: "Mark a failed, skipped or stopped node succeeded, which unblocks its children",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "WorkflowInstance",
    },
    Op {
        method: "post",
        path: "/workflow-instances/{id}/nodes/{node}/rerun",
        summary: "Run one node of an ended instance again; the nodes after it that did not \
                  succeed wait for it",
        roles: GROUP,
        query: &[],
        body: None,
        answer: "WorkflowInstance",
    },
];
