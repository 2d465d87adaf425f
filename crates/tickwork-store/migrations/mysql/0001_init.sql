-- Tickwork schema, MySQL 8 / MariaDB >= 10.6 flavour. Times are epoch milliseconds (BIGINT).
-- utf8mb4_bin everywhere: keys and names compare byte for byte, as on PostgreSQL and SQLite
-- (the default *_ci collations would make "Demo" and "demo" the same app_name).
-- TEXT columns carry no DEFAULT: MySQL before 8.0.13 refuses one.

CREATE TABLE tw_groups (
    id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    app_name     VARCHAR(64)  NOT NULL,
    title        VARCHAR(128) NOT NULL,
    address_mode VARCHAR(16)  NOT NULL,
    addresses    TEXT         NOT NULL,
    created_at   BIGINT       NOT NULL,
    updated_at   BIGINT       NOT NULL,
    UNIQUE KEY tw_groups_app_name (app_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_registry (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    app_name   VARCHAR(64)  NOT NULL,
    address    VARCHAR(255) NOT NULL,
    updated_at BIGINT       NOT NULL,
    UNIQUE KEY tw_registry_key (app_name, address),
    KEY tw_registry_updated (updated_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_jobs (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_key          VARCHAR(128) NOT NULL,
    group_id         BIGINT       NOT NULL,
    description      VARCHAR(255) NOT NULL,
    owner            VARCHAR(64)  NOT NULL,
    alarm_channels   TEXT         NOT NULL,
    schedule_type    VARCHAR(32)  NOT NULL,
    schedule_conf    VARCHAR(255) NOT NULL,
    time_zone        VARCHAR(64)  NOT NULL,
    misfire_strategy VARCHAR(32)  NOT NULL,
    route_strategy   VARCHAR(32)  NOT NULL,
    handler          VARCHAR(255) NOT NULL,
    params           TEXT         NOT NULL,
    block_strategy   VARCHAR(32)  NOT NULL,
    timeout_s        INT          NOT NULL,
    retry_count      INT          NOT NULL,
    retry_backoff_ms BIGINT       NOT NULL,
    child_job_ids    TEXT         NOT NULL,
    priority         INT          NOT NULL,
    glue_type        VARCHAR(32)  NOT NULL,
    glue_source      MEDIUMTEXT   NOT NULL,
    glue_updated_at  BIGINT       NOT NULL,
    status           VARCHAR(16)  NOT NULL,
    next_fire_at     BIGINT       NULL,
    last_fire_at     BIGINT       NULL,
    version          BIGINT       NOT NULL,
    created_at       BIGINT       NOT NULL,
    updated_at       BIGINT       NOT NULL,
    UNIQUE KEY tw_jobs_key (job_key),
    KEY tw_jobs_due (status, next_fire_at),
    KEY tw_jobs_group (group_id),
    CONSTRAINT tw_jobs_group_fk FOREIGN KEY (group_id) REFERENCES tw_groups (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_runs (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id           BIGINT       NOT NULL,
    group_id         BIGINT       NOT NULL,
    scheduled_at     BIGINT       NOT NULL,
    fire_key         BIGINT       NULL,
    trigger_type     VARCHAR(16)  NOT NULL,
    attempt          INT          NOT NULL DEFAULT 0,
    parent_run_id    BIGINT       NULL,
    executor_address VARCHAR(255) NULL,
    handler          VARCHAR(255) NOT NULL,
    params           TEXT         NOT NULL,
    shard_index      INT          NULL,
    shard_total      INT          NULL,
    state            VARCHAR(16)  NOT NULL,
    trigger_code     INT          NOT NULL DEFAULT 0,
    trigger_msg      TEXT         NULL,
    handle_code      INT          NOT NULL DEFAULT 0,
    handle_msg       TEXT         NULL,
    alarm_status     INT          NOT NULL DEFAULT 0,
    owner_node       VARCHAR(64)  NULL,
    priority         INT          NOT NULL DEFAULT 0,
    created_at       BIGINT       NOT NULL,
    dispatched_at    BIGINT       NULL,
    finished_at      BIGINT       NULL,
    -- The ledger: one row per scheduled fire. fire_key is NULL for manual, API, retry and
    -- parent runs, and NULLs never collide in a UNIQUE key.
    UNIQUE KEY tw_runs_fire (job_id, fire_key),
    KEY tw_runs_state_owner (state, owner_node),
    KEY tw_runs_job (job_id, id),
    KEY tw_runs_scheduled (scheduled_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_run_reports (
    day             BIGINT NOT NULL PRIMARY KEY,
    running_count   BIGINT NOT NULL,
    succeeded_count BIGINT NOT NULL,
    failed_count    BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_nodes (
    id           VARCHAR(64)  NOT NULL PRIMARY KEY,
    address      VARCHAR(255) NOT NULL,
    started_at   BIGINT       NOT NULL,
    heartbeat_at BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_leases (
    name       VARCHAR(64) NOT NULL PRIMARY KEY,
    holder     VARCHAR(64) NOT NULL,
    expires_at BIGINT      NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
