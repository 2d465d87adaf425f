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
    feedback_channel_id INTEGER NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE UNIQUE INDEX tw_submissions_key ON tw_submissions (group_id, submission_key);
CREATE UNIQUE INDEX tw_submissions_job ON tw_submissions (job_id);

-- How each run of a submission ended, written in the transaction that ends the run and kept
-- until the submitter acknowledges it (then deleted): its feedback, read oldest first, or
-- posted to the submission's webhook channel (channel_id), tried again until it answers 2xx.
CREATE TABLE tw_submission_ends (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id       INTEGER NOT NULL,
    submission_key TEXT NOT NULL,
    run_id         INTEGER NOT NULL,
    attempt        INTEGER NOT NULL,
    state          TEXT NOT NULL,
    handle_code    INTEGER NOT NULL,
    handle_msg     TEXT NULL,
    scheduled_at   INTEGER NOT NULL,
    ended_at       INTEGER NOT NULL,
    channel_id     INTEGER NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NULL,
    last_error     TEXT NULL
);
CREATE INDEX tw_submission_ends_group ON tw_submission_ends (group_id, id);
CREATE INDEX tw_submission_ends_due ON tw_submission_ends (next_attempt_at);
