-- Calls for pull executors whose connection another admin node holds: written by the node
-- that wants the call made, taken (once) by the node holding the executor's connection now,
-- answered, then collected and deleted by the writer. Rows live for seconds; stale ones are
-- deleted by the holders' takes.
CREATE TABLE tw_pull_calls (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    address     VARCHAR(255) NOT NULL,
    app         VARCHAR(255) NOT NULL,
    path        VARCHAR(255) NOT NULL,
    body        LONGTEXT NOT NULL,
    rank_order  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    taken_at    BIGINT NULL,
    answer      LONGTEXT NULL,
    answered_at BIGINT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE INDEX tw_pull_calls_to ON tw_pull_calls (address, taken_at);
