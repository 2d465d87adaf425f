-- When an operator asked to kill a dispatched run (before /kill was sent): a failure the
-- executor reports after that is the kill, so the run ends killed, with no retry or alarm.
ALTER TABLE tw_runs ADD COLUMN kill_requested_at INTEGER;
