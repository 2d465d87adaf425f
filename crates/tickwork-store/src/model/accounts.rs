//! Users, sessions and API tokens.

stored_enum! {
    /// What a console user or API token may do.
    UserRole, "role" {
        /// Everything, including users and tokens of others.
        Admin = "admin",
        /// Changes jobs and runs of the executor groups in its `group_ids`; reads everything.
        Operator = "operator",
        /// Reads everything, changes nothing.
        Viewer = "viewer",
    }
}

/// A console user. `password_hash` is an Argon2id PHC string, never a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    /// Unique.
    pub username: String,
    pub password_hash: String,
    pub role: UserRole,
    /// The executor groups an operator may change (empty for other roles).
    pub group_ids: Vec<i64>,
    /// The console language the user chose, e.g. `en` or `zh-CN`.
    pub locale: Option<String>,
    pub disabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A user to create. A taken username is a `Conflict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserNew {
    pub username: String,
    pub password_hash: String,
    pub role: UserRole,
    pub group_ids: Vec<i64>,
    pub locale: Option<String>,
    pub now: i64,
}

/// The editable fields of a user (everything but name and password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserUpdate {
    pub id: i64,
    pub role: UserRole,
    pub group_ids: Vec<i64>,
    pub locale: Option<String>,
    pub disabled: bool,
    pub now: i64,
}

/// A new password hash for a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPassword {
    pub id: i64,
    pub password_hash: String,
    pub now: i64,
}

/// A console session. The session id itself is only in the browser's cookie; the store keeps
/// its SHA-256 digest, so a copy of the database cannot be used to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id_hash: String,
    pub user_id: i64,
    pub csrf_token: String,
    pub created_at: i64,
    /// Absolute end, whatever the activity.
    pub expires_at: i64,
    /// Last request; the idle timeout counts from here.
    pub last_seen_at: i64,
}

/// Moves a session's `last_seen_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionTouch {
    pub id_hash: String,
    pub now: i64,
}

/// Which sessions are over: past their absolute end at `now`, or unused since `idle_before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPurge {
    pub now: i64,
    pub idle_before: i64,
}

/// An API token. Only the SHA-256 digest of the secret is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub id: i64,
    pub name: String,
    pub token_hash: String,
    /// The token acts with this user's role.
    pub user_id: i64,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A token to create. A digest already stored is a `Conflict`; a missing user is `Invalid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTokenNew {
    pub name: String,
    pub token_hash: String,
    pub user_id: i64,
    pub now: i64,
}

/// Records that a token was used at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiTokenTouch {
    pub id: i64,
    pub now: i64,
}

/// Revokes a token at `now` (a revoked token stays revoked, with its first revocation time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiTokenRevoke {
    pub id: i64,
    pub now: i64,
}
