-- Fires a job has left, counted down by the claim (a submission's repeat count); NULL: no bound.
ALTER TABLE tw_jobs ADD COLUMN fires_left BIGINT NULL;

-- Submissions from code: a client's key in an executor group, the job that carries it out, and
-- its schedule as the client wrote it (JSON). Deleted with the job.
CREATE TABLE tw_submissions (
    id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    group_id       BIGINT       NOT NULL,
    submission_key VARCHAR(100) NOT NULL,
    job_id         BIGINT       NOT NULL,
    schedule       TEXT         NOT NULL,
    feedback_channel_id BIGINT  NULL,
    created_at     BIGINT       NOT NULL,
    updated_at     BIGINT       NOT NULL,
    UNIQUE KEY tw_submissions_key (group_id, submission_key),
    UNIQUE KEY tw_submissions_job (job_id),
    CONSTRAINT tw_submissions_group_fk FOREIGN KEY (group_id) REFERENCES tw_groups (id),
    CONSTRAINT tw_submissions_job_fk FOREIGN KEY (job_id) REFERENCES tw_jobs (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- How each run of a submission ended, written in the transaction that ends the run and kept
-- until the submitter acknowledges it (then deleted): its feedback, read oldest first, or
-- posted to the submission's webhook channel (channel_id), tried again until it answers 2xx.
CREATE TABLE tw_submission_ends (
    id             BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    group_id       BIGINT NOT NULL,
    submission_key VARCHAR(100) NOT NULL,
    run_id         BIGINT NOT NULL,
    attempt        BIGINT NOT NULL,
    state          VARCHAR(16) NOT NULL,
    handle_code    BIGINT NOT NULL,
    handle_msg     TEXT NULL,
    scheduled_at   BIGINT NOT NULL,
    ended_at       BIGINT NOT NULL,
    channel_id     BIGINT NULL,
    attempts       BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NULL,
    last_error     TEXT NULL,
    KEY tw_submission_ends_group (group_id, id),
    KEY tw_submission_ends_due (next_attempt_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
