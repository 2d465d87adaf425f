-- Workflows: a DAG of jobs (JSON, nodes naming jobs by key) owned by an executor group, with
-- its failure policy, a cap on instances at once (the rest skipped or queued), and a schedule
-- of its own (claimed by moving next_fire_at, as a job's).
CREATE TABLE tw_workflows (
    id             BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    workflow_key   VARCHAR(128) NOT NULL,
    name           VARCHAR(255) NOT NULL,
    group_id       BIGINT  NOT NULL,
    dag            LONGTEXT NOT NULL,
    failure_policy VARCHAR(32) NOT NULL,
    max_instances  BIGINT  NOT NULL,
    overflow       VARCHAR(32) NOT NULL,
    schedule_type  VARCHAR(32) NOT NULL,
    schedule_conf  VARCHAR(255) NOT NULL,
    time_zone      VARCHAR(64) NOT NULL,
    misfire_strategy VARCHAR(32) NOT NULL,
    status         VARCHAR(32) NOT NULL,
    next_fire_at   BIGINT  NULL,
    version        BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL,
    CONSTRAINT tw_workflows_group_fk FOREIGN KEY (group_id) REFERENCES tw_groups (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE UNIQUE INDEX tw_workflows_key ON tw_workflows (workflow_key);
CREATE INDEX tw_workflows_due ON tw_workflows (status, next_fire_at);

-- One fire of a workflow: a snapshot of its DAG (with each node's job id), its nodes' states
-- (JSON array, by node index), its context (JSON object), and the scheduled instant it fired
-- for (NULL: run by hand or API). Changed only with its version compared, so one writer wins
-- each step.
CREATE TABLE tw_workflow_instances (
    id             BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    workflow_id    BIGINT  NOT NULL,
    state          VARCHAR(32) NOT NULL,
    snapshot       LONGTEXT NOT NULL,
    nodes          LONGTEXT NOT NULL,
    context        LONGTEXT NOT NULL,
    trigger_type   VARCHAR(32) NOT NULL,
    fire_key       BIGINT  NULL,
    version        BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    ended_at       BIGINT  NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
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
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE INDEX tw_workflow_runs_of ON tw_workflow_runs (instance_id);

-- A run's own timeout over its job's: a workflow node's override, kept by its retries.
ALTER TABLE tw_runs ADD COLUMN timeout_s BIGINT NULL;
