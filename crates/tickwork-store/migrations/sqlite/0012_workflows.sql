-- Workflows: a DAG of jobs (JSON, nodes naming jobs by key) owned by an executor group, with
-- its failure policy, a cap on instances at once (the rest skipped or queued), and a schedule
-- of its own (claimed by moving next_fire_at, as a job's).
CREATE TABLE tw_workflows (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_key   TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    group_id       BIGINT  NOT NULL REFERENCES tw_groups (id),
    dag            TEXT    NOT NULL,
    failure_policy TEXT    NOT NULL,
    max_instances  BIGINT  NOT NULL,
    overflow       TEXT    NOT NULL,
    schedule_type  TEXT    NOT NULL,
    schedule_conf  TEXT    NOT NULL,
    time_zone      TEXT    NOT NULL,
    misfire_strategy TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    next_fire_at   BIGINT  NULL,
    version        BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL
);
CREATE UNIQUE INDEX tw_workflows_key ON tw_workflows (workflow_key);
CREATE INDEX tw_workflows_due ON tw_workflows (status, next_fire_at);

-- One fire of a workflow: a snapshot of its DAG (with each node's job id), its nodes' states
-- (JSON array, by node index), its context (JSON object), and the scheduled instant it fired
-- for (NULL: run by hand or API). Changed only with its version compared, so one writer wins
-- each step.
CREATE TABLE tw_workflow_instances (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_id    BIGINT  NOT NULL,
    state          TEXT    NOT NULL,
    snapshot       TEXT    NOT NULL,
    nodes          TEXT    NOT NULL,
    context        TEXT    NOT NULL,
    trigger_type   TEXT    NOT NULL,
    fire_key       BIGINT  NULL,
    version        BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    ended_at       BIGINT  NULL
);
CREATE INDEX tw_workflow_instances_of ON tw_workflow_instances (workflow_id, id);
-- One instance per scheduled fire, whichever admin claimed it.
CREATE UNIQUE INDEX tw_workflow_instances_fire ON tw_workflow_instances (workflow_id, fire_key);
CREATE INDEX tw_workflow_instances_state ON tw_workflow_instances (state, id);

-- The runs of an instance's nodes: each node's runs (a retry is linked to its parent's node
-- in the transaction that writes it); the node's current run is its newest.
CREATE TABLE tw_workflow_runs (
    run_id         BIGINT  NOT NULL PRIMARY KEY,
    instance_id    BIGINT  NOT NULL,
    node_index     BIGINT  NOT NULL
);
CREATE INDEX tw_workflow_runs_of ON tw_workflow_runs (instance_id);

-- A run's own timeout over its job's: a workflow node's override, kept by its retries.
ALTER TABLE tw_runs ADD COLUMN timeout_s BIGINT NULL;
