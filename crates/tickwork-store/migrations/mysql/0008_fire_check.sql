-- The ledger's check of scheduled fires (missed, late, doubled): each job's lateness budget,
-- the check's cursor (every fire at or before `position` is judged), one alert row per job and
-- kind per checked window (later windows add to it while it is recent), and alarm deliveries of those alerts next to those of failed runs:
-- `alert_id` is 0 for a run's alarm, so (run, channel) stays unique for those.

ALTER TABLE tw_jobs ADD COLUMN lateness_budget_ms BIGINT NOT NULL DEFAULT 1000;

CREATE TABLE tw_ledger_cursors (
    name       VARCHAR(64) NOT NULL PRIMARY KEY,
    position   BIGINT      NOT NULL,
    updated_at BIGINT      NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_fire_alerts (
    id            BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id        BIGINT      NOT NULL,
    kind          VARCHAR(16) NOT NULL,
    fires         BIGINT      NOT NULL,
    first_at      BIGINT      NOT NULL,
    last_at       BIGINT      NOT NULL,
    worst_late_ms BIGINT      NOT NULL,
    run_id        BIGINT      NOT NULL,
    created_at    BIGINT      NOT NULL,
    KEY tw_fire_alerts_created (created_at),
    KEY tw_fire_alerts_job (job_id, kind, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE tw_alarm_deliveries
    ADD COLUMN alert_id BIGINT NOT NULL DEFAULT 0,
    DROP INDEX tw_alarm_deliveries_run_channel,
    ADD UNIQUE KEY tw_alarm_deliveries_once (run_id, channel_id, alert_id);
