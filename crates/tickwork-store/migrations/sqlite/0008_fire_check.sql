-- The ledger's check of scheduled fires (missed, late, doubled): each job's lateness budget,
-- the check's cursor (every fire at or before `position` is judged), one alert row per job and
-- kind per checked window (later windows add to it while it is recent), and alarm deliveries of those alerts next to those of failed runs:
-- `alert_id` is 0 for a run's alarm, so (run, channel) stays unique for those.

ALTER TABLE tw_jobs ADD COLUMN lateness_budget_ms INTEGER NOT NULL DEFAULT 1000;

CREATE TABLE tw_ledger_cursors (
    name       TEXT    PRIMARY KEY,
    position   INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tw_fire_alerts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id        INTEGER NOT NULL,
    kind          TEXT    NOT NULL,
    fires         INTEGER NOT NULL,
    first_at      INTEGER NOT NULL,
    last_at       INTEGER NOT NULL,
    worst_late_ms INTEGER NOT NULL,
    run_id        INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE INDEX tw_fire_alerts_created ON tw_fire_alerts (created_at);
CREATE INDEX tw_fire_alerts_job ON tw_fire_alerts (job_id, kind, created_at);

-- SQLite cannot drop a table's own UNIQUE constraint: the table is rebuilt with the new one.
CREATE TABLE tw_alarm_deliveries_next (
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
    alert_id        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, channel_id, alert_id)
);
INSERT INTO tw_alarm_deliveries_next (id, run_id, channel_id, channel_name, kind, state,
    attempts, next_attempt_at, last_error, claimed_by, claimed_until, sent_at, created_at,
    updated_at, alert_id)
SELECT id, run_id, channel_id, channel_name, kind, state, attempts, next_attempt_at,
    last_error, claimed_by, claimed_until, sent_at, created_at, updated_at, 0
FROM tw_alarm_deliveries;
DROP TABLE tw_alarm_deliveries;
ALTER TABLE tw_alarm_deliveries_next RENAME TO tw_alarm_deliveries;
CREATE INDEX tw_alarm_deliveries_due ON tw_alarm_deliveries (state, next_attempt_at);
