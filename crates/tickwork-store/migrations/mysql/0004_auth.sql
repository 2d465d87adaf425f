-- Users, sessions, API tokens, the audit log and script versions (MySQL / MariaDB flavour).
-- Secrets are never stored: passwords as Argon2id PHC strings, session ids and API tokens as
-- SHA-256 hex digests.

CREATE TABLE tw_users (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    username      VARCHAR(64)  NOT NULL,
    password_hash VARCHAR(255) NOT NULL,
    role          VARCHAR(16)  NOT NULL,
    group_ids     TEXT         NOT NULL,
    locale        VARCHAR(16)  NULL,
    disabled      BIGINT       NOT NULL DEFAULT 0,
    created_at    BIGINT       NOT NULL,
    updated_at    BIGINT       NOT NULL,
    UNIQUE KEY tw_users_username (username)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_sessions (
    id_hash      CHAR(64)    NOT NULL PRIMARY KEY,
    user_id      BIGINT      NOT NULL,
    csrf_token   VARCHAR(64) NOT NULL,
    created_at   BIGINT      NOT NULL,
    expires_at   BIGINT      NOT NULL,
    last_seen_at BIGINT      NOT NULL,
    KEY tw_sessions_user (user_id),
    KEY tw_sessions_expires (expires_at),
    CONSTRAINT tw_sessions_user_fk FOREIGN KEY (user_id) REFERENCES tw_users (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_api_tokens (
    id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name         VARCHAR(128) NOT NULL,
    token_hash   CHAR(64)     NOT NULL,
    user_id      BIGINT       NOT NULL,
    created_at   BIGINT       NOT NULL,
    last_used_at BIGINT       NULL,
    revoked_at   BIGINT       NULL,
    UNIQUE KEY tw_api_tokens_hash (token_hash),
    KEY tw_api_tokens_user (user_id),
    CONSTRAINT tw_api_tokens_user_fk FOREIGN KEY (user_id) REFERENCES tw_users (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_audit (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at          BIGINT       NOT NULL,
    actor_id    BIGINT       NULL,
    actor       VARCHAR(64)  NOT NULL,
    action      VARCHAR(64)  NOT NULL,
    target_type VARCHAR(32)  NOT NULL,
    target_id   VARCHAR(128) NOT NULL,
    before_json MEDIUMTEXT   NULL,
    after_json  MEDIUMTEXT   NULL,
    KEY tw_audit_at (at),
    KEY tw_audit_target (target_type, target_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE tw_script_versions (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id     BIGINT       NOT NULL,
    version    BIGINT       NOT NULL,
    glue_type  VARCHAR(32)  NOT NULL,
    source     MEDIUMTEXT   NOT NULL,
    comment    VARCHAR(255) NOT NULL,
    author     VARCHAR(64)  NOT NULL,
    created_at BIGINT       NOT NULL,
    UNIQUE KEY tw_script_versions_key (job_id, version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
