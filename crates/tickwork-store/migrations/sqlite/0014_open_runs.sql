-- Partial indexes on the ledger. Runs are found by state and owner only while they are open,
-- and by alarm only once they ended in a state that calls for one; every other run stays out
-- of both. A run's end then deletes its entry from the first and adds none, and the planned
-- run adds none to the alarm index. SQLite uses a partial index only for a query carrying
-- its condition term for term: queries write these conditions as they are here (`OPEN_RUN`
-- and `ALARM_STATES` in the store).
DROP INDEX tw_runs_state_owner;
CREATE INDEX tw_runs_open ON tw_runs (state, owner_node)
    WHERE state IN ('planned', 'sending', 'dispatched');
DROP INDEX tw_runs_alarm;
CREATE INDEX tw_runs_alarm ON tw_runs (alarm_status, state)
    WHERE state IN ('failed', 'timed_out', 'lost');
