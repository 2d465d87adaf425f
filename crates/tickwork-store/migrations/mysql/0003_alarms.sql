-- Alarm channels and one delivery row per (run, channel). The unique key on (run_id,
-- channel_id) makes a second alarm for the same run and channel impossible at the database;
-- claimed_by/claimed_until keep two admins from sending the same delivery at once.

CREATE TABLE tw_alarm_channels (
    id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name       VARCHAR(64) NOT NULL,
    kind       VARCHAR(16) NOT NULL,
    config     TEXT        NOT NULL,
    enabled    INT         NOT NULL,
    created_at BIGINT      NOT NULL,
    updated_at BIGINT      NOT NULL,
    UNIQUE KEY tw_alarm_channels_name (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_alarm_deliveries (
    id              BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    run_id          BIGINT      NOT NULL,
    channel_id      BIGINT      NOT NULL,
    channel_name    VARCHAR(64) NOT NULL,
    kind            VARCHAR(16) NOT NULL,
    state           VARCHAR(16) NOT NULL,
    attempts        INT         NOT NULL DEFAULT 0,
    next_attempt_at BIGINT      NOT NULL,
    last_error      TEXT        NULL,
    claimed_by      VARCHAR(64) NULL,
    claimed_until   BIGINT      NULL,
    sent_at         BIGINT      NULL,
    created_at      BIGINT      NOT NULL,
    updated_at      BIGINT      NOT NULL,
    UNIQUE KEY tw_alarm_deliveries_run_channel (run_id, channel_id),
    KEY tw_alarm_deliveries_due (state, next_attempt_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
