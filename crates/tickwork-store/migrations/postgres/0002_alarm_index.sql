-- The alarm monitor looks for failed runs not yet queued for an alarm; successful runs keep
-- alarm_status 0 forever, so the state is part of the key.
CREATE INDEX tw_runs_alarm ON tw_runs (alarm_status, state);
