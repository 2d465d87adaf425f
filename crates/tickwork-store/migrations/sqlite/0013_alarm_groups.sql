-- Alarms grouped per job and channel: a delivery records its job, when it was first due (its
-- window's start) and the runs of its job that joined it after its own run (how many, and the
-- last one). The index finds a job's newest delivery on a channel.
ALTER TABLE tw_alarm_deliveries ADD COLUMN job_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tw_alarm_deliveries ADD COLUMN due_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tw_alarm_deliveries ADD COLUMN grouped_runs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tw_alarm_deliveries ADD COLUMN last_run_id BIGINT;
UPDATE tw_alarm_deliveries SET due_at = created_at;
UPDATE tw_alarm_deliveries SET job_id = COALESCE(
    (SELECT r.job_id FROM tw_runs r WHERE r.id = tw_alarm_deliveries.run_id), 0);
CREATE INDEX tw_alarm_deliveries_job ON tw_alarm_deliveries (job_id, channel_id, due_at);
