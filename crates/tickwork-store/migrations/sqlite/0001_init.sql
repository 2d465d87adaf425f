-- Tickwork schema, SQLite flavour. Times are epoch milliseconds (INTEGER).
-- AUTOINCREMENT: run ids are XXL logIds that executors name log files after, so an id must
-- never be handed out twice, even after the newest row is deleted.

CREATE TABLE tw_groups (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    app_name     TEXT    NOT NULL UNIQUE,
    title        TEXT    NOT NULL,
    address_mode TEXT    NOT NULL,
    addresses    TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

CREATE TABLE tw_registry (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    app_name   TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (app_name, address)
);
CREATE INDEX tw_registry_updated ON tw_registry (updated_at);

CREATE TABLE tw_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    job_key          TEXT    NOT NULL UNIQUE,
    group_id         INTEGER NOT NULL REFERENCES tw_groups (id),
    description      TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    alarm_channels   TEXT    NOT NULL,
    schedule_type    TEXT    NOT NULL,
    schedule_conf    TEXT    NOT NULL,
    time_zone        TEXT    NOT NULL,
    misfire_strategy TEXT    NOT NULL,
    route_strategy   TEXT    NOT NULL,
    handler          TEXT    NOT NULL,
    params           TEXT    NOT NULL,
    block_strategy   TEXT    NOT NULL,
    timeout_s        INTEGER NOT NULL,
    retry_count      INTEGER NOT NULL,
    retry_backoff_ms INTEGER NOT NULL,
    child_job_ids    TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    glue_type        TEXT    NOT NULL,
    glue_source      TEXT    NOT NULL,
    glue_updated_at  INTEGER NOT NULL,
    status           TEXT    NOT NULL,
    next_fire_at     INTEGER,
    last_fire_at     INTEGER,
    version          INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX tw_jobs_due ON tw_jobs (status, next_fire_at);
CREATE INDEX tw_jobs_group ON tw_jobs (group_id);

CREATE TABLE tw_runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id           INTEGER NOT NULL,
    group_id         INTEGER NOT NULL,
    scheduled_at     INTEGER NOT NULL,
    fire_key         INTEGER,
    trigger_type     TEXT    NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    parent_run_id    INTEGER,
    executor_address TEXT,
    handler          TEXT    NOT NULL,
    params           TEXT    NOT NULL,
    shard_index      INTEGER,
    shard_total      INTEGER,
    state            TEXT    NOT NULL,
    trigger_code     INTEGER NOT NULL DEFAULT 0,
    trigger_msg      TEXT,
    handle_code      INTEGER NOT NULL DEFAULT 0,
    handle_msg       TEXT,
    alarm_status     INTEGER NOT NULL DEFAULT 0,
    owner_node       TEXT,
    priority         INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    dispatched_at    INTEGER,
    finished_at      INTEGER
);
-- The ledger: one row per scheduled fire. fire_key is NULL for manual, API, retry and parent
-- runs, and NULLs never collide.
CREATE UNIQUE INDEX tw_runs_fire ON tw_runs (job_id, fire_key);
CREATE INDEX tw_runs_state_owner ON tw_runs (state, owner_node);
CREATE INDEX tw_runs_job ON tw_runs (job_id, id);
CREATE INDEX tw_runs_scheduled ON tw_runs (scheduled_at);

CREATE TABLE tw_run_reports (
    day             INTEGER PRIMARY KEY,
    running_count   INTEGER NOT NULL,
    succeeded_count INTEGER NOT NULL,
    failed_count    INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE TABLE tw_nodes (
    id           TEXT    PRIMARY KEY,
    address      TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

CREATE TABLE tw_leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
