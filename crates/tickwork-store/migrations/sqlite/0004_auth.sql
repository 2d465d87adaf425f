-- Users, sessions, API tokens, the audit log and script versions (SQLite flavour).
-- Secrets are never stored: passwords as Argon2id PHC strings, session ids and API tokens as
-- SHA-256 hex digests.

CREATE TABLE tw_users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    username      TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    role          TEXT    NOT NULL,
    group_ids     TEXT    NOT NULL,
    locale        TEXT,
    disabled      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE tw_sessions (
    id_hash      TEXT    PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES tw_users (id) ON DELETE CASCADE,
    csrf_token   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);
CREATE INDEX tw_sessions_user ON tw_sessions (user_id);
CREATE INDEX tw_sessions_expires ON tw_sessions (expires_at);

CREATE TABLE tw_api_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,
    token_hash   TEXT    NOT NULL UNIQUE,
    user_id      INTEGER NOT NULL REFERENCES tw_users (id) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX tw_api_tokens_user ON tw_api_tokens (user_id);

CREATE TABLE tw_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    actor_id    INTEGER,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_type TEXT    NOT NULL,
    target_id   TEXT    NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX tw_audit_at ON tw_audit (at);
CREATE INDEX tw_audit_target ON tw_audit (target_type, target_id);

CREATE TABLE tw_script_versions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    glue_type  TEXT    NOT NULL,
    source     TEXT    NOT NULL,
    comment    TEXT    NOT NULL,
    author     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (job_id, version)
);
