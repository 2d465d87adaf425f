-- Fires a job has left, counted down by the claim (a submission's repeat count); NULL: no bound.
ALTER TABLE tw_jobs ADD COLUMN fires_left INTEGER NULL;

-- Submissions from code: a client's key in an executor group, the job that carries it out, and
-- its schedule as the client wrote it (JSON). Deleted with the job.
CREATE TABLE tw_submissions (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id       INTEGER NOT NULL REFERENCES tw_groups (id),
    submission_key TEXT    NOT NULL,
    job_id         INTEGER NOT NULL REFERENCES tw_jobs (id),
    schedule       TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE UNIQUE INDEX tw_submissions_key ON tw_submissions (group_id, submission_key);
CREATE UNIQUE INDEX tw_submissions_job ON tw_submissions (job_id);
