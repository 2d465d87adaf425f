-- The ledger's key (job, fire time) indexed fire time first. The key is the same, but new
-- fires now land at the end of the index instead of one place per job: a claim of 10,000
-- jobs dirtied about one index page per job, and those pages were most of what each commit
-- wrote to the write-ahead log. ON CONFLICT (job_id, fire_key) names the same unique index.
DROP INDEX tw_runs_fire;
CREATE UNIQUE INDEX tw_runs_fire ON tw_runs (fire_key, job_id);
