-- Alarm channels and one delivery row per (run, channel). The unique key on (run_id,
-- channel_id) makes a second alarm for the same run and channel impossible at the database;
-- claimed_by/claimed_until keep two admins from sending the same delivery at once.

CREATE TABLE tw_alarm_channels (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE,
    kind       TEXT    NOT NULL,
    config     TEXT    NOT NULL,
    enabled    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tw_alarm_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id          INTEGER NOT NULL,
    channel_id      INTEGER NOT NULL,
    channel_name    TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT,
    claimed_by      TEXT,
    claimed_until   INTEGER,
    sent_at         INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (run_id, channel_id)
);
CREATE INDEX tw_alarm_deliveries_due ON tw_alarm_deliveries (state, next_attempt_at);
