-- Calls for pull executors whose connection another admin node holds: written by the node
-- that wants the call made, taken (once) by the node holding the executor's connection now,
-- answered, then collected and deleted by the writer. Rows live for seconds; stale ones are
-- deleted by the holders' takes.
CREATE TABLE tw_pull_calls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    address     TEXT NOT NULL,
    app         TEXT NOT NULL,
    path        TEXT NOT NULL,
    body        TEXT NOT NULL,
    rank_order  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    taken_at    BIGINT NULL,
    answer      TEXT NULL,
    answered_at BIGINT NULL
);
CREATE INDEX tw_pull_calls_to ON tw_pull_calls (address, taken_at);
