-- The ledger's key (job, fire time) indexed fire time first. The key is the same, but new
-- fires now land at the end of the index instead of one place per job: a claim of 10,000
-- jobs dirtied about one index page per job, and those pages were most of what each commit
-- wrote. ON DUPLICATE KEY meets the same unique key.
ALTER TABLE tw_runs DROP INDEX tw_runs_fire, ADD UNIQUE KEY tw_runs_fire (fire_key, job_id);
