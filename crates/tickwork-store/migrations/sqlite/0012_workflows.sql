-- Workflows: a DAG of jobs (JSON, nodes naming jobs by key) owned by an executor group, with
-- its failure policy and a cap on instances at once (the rest skipped or queued).
CREATE TABLE tw_workflows (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_key   TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    group_id       BIGINT  NOT NULL REFERENCES tw_groups (id),
    dag            TEXT    NOT NULL,
    failure_policy TEXT    NOT NULL,
    max_instances  BIGINT  NOT NULL,
    overflow       TEXT    NOT NULL,
    version        BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL
);
CREATE UNIQUE INDEX tw_workflows_key ON tw_workflows (workflow_key);

-- One fire of a workflow: a snapshot of its DAG (with each node's job id), its nodes' states
-- (JSON array, by node index), its context (JSON object). Changed only with its version
-- compared, so one writer wins each step.
CREATE TABLE tw_workflow_instances (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_id    BIGINT  NOT NULL,
    state          TEXT    NOT NULL,
    snapshot       TEXT    NOT NULL,
    nodes          TEXT    NOT NULL,
    context        TEXT    NOT NULL,
    trigger_type   TEXT    NOT NULL,
    version        BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    ended_at       BIGINT  NULL
);
CREATE INDEX tw_workflow_instances_of ON tw_workflow_instances (workflow_id, id);
CREATE INDEX tw_workflow_instances_state ON tw_workflow_instances (state, id);

-- The runs of an instance's nodes: each node's runs (a retry is linked to its parent's node
-- in the transaction that writes it); the node's current run is its newest.
CREATE TABLE tw_workflow_runs (
    run_id         BIGINT  NOT NULL PRIMARY KEY,
    instance_id    BIGINT  NOT NULL,
    node_index     BIGINT  NOT NULL
);
CREATE INDEX tw_workflow_runs_of ON tw_workflow_runs (instance_id);
