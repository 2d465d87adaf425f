//! Who is calling: console users (Argon2id passwords, server-side sessions, CSRF tokens, a
//! login rate limit), API tokens (per user, stored as digests) and the built-in API token of
//! the data folder. What a caller may do is decided by its [`Principal`], which every change
//! of the service layer takes; this module only establishes it.
//!
//! Secrets never reach the database: session ids and API tokens are stored as SHA-256
//! digests (they are 256-bit random values, so a fast digest is enough), passwords as
//! Argon2id PHC strings (hashed on the blocking pool, they take tens of milliseconds).
//!
//! Login rate limit: at most [`AuthConfig::login_max_failures`] failed logins per client IP
//! and username within [`AuthConfig::login_window`]; further attempts are refused without
//! checking the password until the oldest failure leaves the window. An attempt takes its
//! place in the count before its password is checked (and keeps it unless it succeeds), so
//! concurrent attempts cannot outrun the limit. At most
//! [`AuthConfig::max_concurrent_logins`] password checks run at once (each takes an Argon2id
//! buffer of 19 MiB); a login beyond that is refused at once. The counts are in memory, per
//! admin node, and start empty after a restart.
//!
//! Every secret (session ids, CSRF tokens, API and access tokens, generated passwords) comes
//! from the operating system's generator and carries at least 128 bits.

mod limiter;
mod secrets;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use tickwork_store::{
    AccountStore, ApiTokenTouch, AuditStore, Session, SessionPurge, SessionTouch, User, UserNew,
    UserRole,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{info, warn};

use crate::Error;
use crate::timer::now_ms;

/// The name of the console's session cookie.
pub const SESSION_COOKIE: &str = "tw_session";
/// The name of the cookie that holds the login form's CSRF token (before any session).
pub const LOGIN_CSRF_COOKIE: &str = "tw_login_csrf";
/// Every per-user API token starts with this, so that leaked tokens are easy to scan for.
pub const API_TOKEN_PREFIX: &str = "tw_";
/// The name of the first admin account.
pub const FIRST_ADMIN: &str = "admin";
/// The message of a login refused because [`AuthConfig::max_concurrent_logins`] password
/// checks are running.
pub const LOGINS_BUSY: &str = "too many logins at once; try again in a moment";
/// Shortest accepted password.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest accepted password, in characters (Argon2 takes any length; this bounds the work
/// per login).
pub const MAX_PASSWORD_CHARS: usize = 1024;
/// Length of a generated password: 24 characters of a 57-letter alphabet, 140 bits.
pub const GENERATED_PASSWORD_CHARS: usize = 24;

/// A `last_seen_at` or `last_used_at` younger than this is not written again, so that a busy
/// page or script does not write on every request.
const TOUCH_EVERY_MS: i64 = 60_000;

/// What a user or token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything, including users, everyone's tokens and the audit log.
    Admin,
    /// Changes jobs, scripts and runs of its executor groups; reads everything else.
    Operator,
    /// Reads; changes nothing but its own password, locale and tokens.
    Viewer,
}

impl Role {
    pub const fn as_str(self) -> &'static str {
        self.stored().as_str()
    }

    pub(crate) const fn stored(self) -> UserRole {
        match self {
            Role::Admin => UserRole::Admin,
            Role::Operator => UserRole::Operator,
            Role::Viewer => UserRole::Viewer,
        }
    }

    pub(crate) const fn from_stored(r: UserRole) -> Self {
        match r {
            UserRole::Admin => Role::Admin,
            UserRole::Operator => Role::Operator,
            UserRole::Viewer => Role::Viewer,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "admin" => Ok(Role::Admin),
            "operator" => Ok(Role::Operator),
            "viewer" => Ok(Role::Viewer),
            other => Err(Error::invalid_field(
                "role",
                format!("{other:?} is not one of admin operator viewer"),
            )),
        }
    }
}

/// The caller of an operation, as the service layer checks and records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user's id; 0 for the built-in API token and the system itself.
    pub user_id: i64,
    pub username: String,
    pub role: Role,
    /// The executor groups an operator may change.
    pub groups: Vec<i64>,
    pub locale: Option<String>,
}

impl Principal {
    /// Whether this caller may change jobs, scripts and runs of `group_id`.
    pub fn can_change_group(&self, group_id: i64) -> bool {
        match self.role {
            Role::Admin => true,
            Role::Operator => self.groups.contains(&group_id),
            Role::Viewer => false,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// The admin itself, for changes no person asked for (seeding the demo, first start).
    pub fn system() -> Self {
        Principal {
            user_id: 0,
            username: "system".to_owned(),
            role: Role::Admin,
            groups: Vec::new(),
            locale: None,
        }
    }

    /// The built-in API token of the data folder (or `api_token` setting): an admin.
    pub fn builtin_token() -> Self {
        Principal {
            user_id: 0,
            username: "api-token".to_owned(),
            role: Role::Admin,
            groups: Vec::new(),
            locale: None,
        }
    }

    pub(crate) fn from_user(u: &User) -> Self {
        Principal {
            user_id: u.id,
            username: u.username.clone(),
            role: Role::from_stored(u.role),
            groups: u.group_ids.clone(),
            locale: u.locale.clone(),
        }
    }

    /// `Forbidden` unless this caller is an admin.
    pub fn require_admin(&self) -> Result<(), Error> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "{} is {}; only an admin may do this",
                self.username, self.role
            )))
        }
    }

    /// `Forbidden` unless this caller may change `group_id`.
    pub fn require_group(&self, group_id: i64) -> Result<(), Error> {
        if self.can_change_group(group_id) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "{} ({}) may not change executor group {group_id}",
                self.username, self.role
            )))
        }
    }
}

/// A freshly opened session: the id goes into the [`SESSION_COOKIE`] cookie, never anywhere
/// else; the CSRF token goes into every form and `X-CSRF-Token` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub session_id: String,
    pub csrf_token: String,
    /// Absolute end of the session (epoch ms).
    pub expires_at: i64,
}

/// A live session: who it is, and the CSRF token its changes must present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub principal: Principal,
    pub csrf_token: String,
    pub expires_at: i64,
}

/// Sessions, logins and passwords settings.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// A session unused this long ends.
    pub session_idle: Duration,
    /// A session ends this long after login, whatever its use.
    pub session_max: Duration,
    /// Mark the cookie `Secure` (set when the console is served over HTTPS).
    pub secure_cookie: bool,
    /// Failed logins per client IP and username within `login_window` before refusing.
    pub login_max_failures: u32,
    pub login_window: Duration,
    /// Password checks of logins that may run at once; more are refused at once.
    pub max_concurrent_logins: usize,
    /// The first admin's password when no user exists yet; generated when `None`.
    pub initial_admin_password: Option<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            session_idle: Duration::from_secs(2 * 3600),
            session_max: Duration::from_secs(24 * 3600),
            secure_cookie: false,
            login_max_failures: 5,
            login_window: Duration::from_secs(300),
            max_concurrent_logins: 4,
            initial_admin_password: None,
        }
    }
}

/// Checks a session's CSRF token against the one presented with a change (form field or
/// `X-CSRF-Token` header), in constant time.
pub fn check_csrf(info: &SessionInfo, presented: &str) -> Result<(), Error> {
    let expected = info.csrf_token.as_bytes();
    if !presented.is_empty() && bool::from(expected.ct_eq(presented.as_bytes())) {
        Ok(())
    } else {
        Err(Error::Forbidden(
            "the form is stale or forged (csrf token mismatch); reload the page".into(),
        ))
    }
}

/// Checks the login form's CSRF token against the one of its cookie (double submit), in
/// constant time.
pub fn check_login_csrf(cookie: &str, presented: &str) -> Result<(), Error> {
    if !cookie.is_empty() && bool::from(cookie.as_bytes().ct_eq(presented.as_bytes())) {
        Ok(())
    } else {
        Err(Error::Forbidden(
            "the login form is stale or forged (csrf token mismatch); reload the page".into(),
        ))
    }
}

use limiter::{Checking, LoginLimiter};
use secrets::{HashMemory, check_password_max, verify_blocking};
pub(crate) use secrets::{digest, hash_password, random_hex};
pub use secrets::{generate_password, generate_token, validate_password};

/// Logins, sessions and API credentials. Reachable as `Admin::auth` and `AppState::auth`.
pub struct Auth {
    /// Users, sessions and tokens: all that authentication reads and writes.
    store: Arc<dyn AccountStore>,
    config: AuthConfig,
    /// The built-in API token: an admin credential, as before per-user tokens existed.
    builtin_token: String,
    limiter: LoginLimiter,
    /// One permit per password check of a login that may run at once.
    checks: Arc<Semaphore>,
    /// Password checks running now, and the most that ran at once.
    checks_running: Arc<AtomicUsize>,
    checks_peak: Arc<AtomicUsize>,
    /// Working memory of the password checks, reused.
    memory: Arc<HashMemory>,
}

impl Auth {
    pub fn new(store: Arc<dyn AccountStore>, config: AuthConfig, builtin_token: &str) -> Self {
        Auth {
            store,
            checks: Arc::new(Semaphore::new(config.max_concurrent_logins.max(1))),
            config,
            builtin_token: builtin_token.to_owned(),
            limiter: LoginLimiter::default(),
            checks_running: Arc::default(),
            checks_peak: Arc::default(),
            memory: Arc::default(),
        }
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The permits of password checks of logins: one is taken for each check while it runs
    /// (`available_permits` says how many more may start now).
    pub fn password_check_permits(&self) -> &Arc<Semaphore> {
        &self.checks
    }

    /// The most password checks of logins that ran at once since the start.
    /// Argon2 working buffers kept for login checks: never more than ran at once.
    pub fn password_check_buffers(&self) -> usize {
        self.memory
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    pub fn password_checks_peak(&self) -> usize {
        self.checks_peak.load(Ordering::SeqCst)
    }

    /// Opens a session for `username`. Rate limited per client IP and username; a wrong
    /// username, a wrong password and a disabled account give the same error. A password
    /// longer than [`MAX_PASSWORD_CHARS`] is refused as invalid input and counts nothing.
    pub async fn login(
        &self,
        username: &str,
        password: &str,
        client_ip: IpAddr,
    ) -> Result<NewSession, Error> {
        check_password_max(password)?;
        let key = (client_ip, username.trim().to_lowercase());
        let c = &self.config;
        let Some(attempt) = self
            .limiter
            .reserve(&key, c.login_max_failures, c.login_window)
        else {
            warn!(ip = %client_ip, user = %key.1, "login refused: too many failures");
            return Err(Error::RateLimited(format!(
                "too many failed logins; try again in {} minutes",
                c.login_window.as_secs().div_ceil(60)
            )));
        };
        let user = match self.check_password(username.trim(), password).await {
            Ok(user) => user,
            Err(e) => {
                // Nothing was checked: the attempt does not count.
                self.limiter.release(&key, attempt);
                return Err(e);
            }
        };
        // A failure keeps its place in the count.
        let Some(user) = user else {
            info!(ip = %client_ip, "failed login");
            return Err(Error::Unauthorized("wrong username or password".into()));
        };
        self.limiter.succeeded(&key);
        let now = now_ms();
        // Housekeeping on login keeps the table small without a timer of its own.
        if let Err(e) = self.store.sessions_purge_expired(self.purge_at(now)).await {
            warn!(error = ?e, "could not purge expired sessions");
        }
        let session_id = random_hex(32)?;
        let csrf_token = random_hex(32)?;
        let expires_at = now + c.session_max.as_millis() as i64;
        self.store
            .session_create(Session {
                id_hash: digest(&session_id),
                user_id: user.id,
                csrf_token: csrf_token.clone(),
                created_at: now,
                expires_at,
                last_seen_at: now,
            })
            .await?;
        info!(user = %user.username, ip = %client_ip, "login");
        Ok(NewSession {
            session_id,
            csrf_token,
            expires_at,
        })
    }

    /// The enabled user `username` if `password` is theirs, `None` otherwise. Refused at once
    /// with `RateLimited` when [`AuthConfig::max_concurrent_logins`] checks are running.
    async fn check_password(&self, username: &str, password: &str) -> Result<Option<User>, Error> {
        let permit: OwnedSemaphorePermit = self
            .checks
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::RateLimited(LOGINS_BUSY.into()))?;
        let user = match self.store.user_get_by_username(username).await {
            Ok(u) => Some(u),
            Err(tickwork_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let hash = user.as_ref().map(|u| u.password_hash.clone());
        let password = password.to_owned();
        let (running, peak) = (self.checks_running.clone(), self.checks_peak.clone());
        let memory = self.memory.clone();
        // The permit moves into the task: a caller that goes away does not free it while the
        // check still holds its memory.
        let matches = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let _checking = Checking::enter(&running, &peak);
            let mut buffer = memory.take();
            let matches = verify_blocking(&password, hash.as_deref(), &mut buffer);
            memory.give_back(buffer);
            matches
        })
        .await
        .map_err(|e| Error::Internal(format!("password check task failed: {e}")))?;
        Ok(user.filter(|u| matches && !u.disabled))
    }

    /// Whether `password` is `user`'s current one, asked before a user changes their own
    /// password. Limited as logins are, per user (whatever the client): a stolen session or
    /// token cannot try passwords faster than the login form allows.
    pub async fn check_current_password(&self, user: &User, password: &str) -> Result<bool, Error> {
        check_password_max(password)?;
        // The unspecified address is no client's, so these attempts never share a login's
        // count.
        let key = (
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            user.username.to_lowercase(),
        );
        let c = &self.config;
        let Some(attempt) = self
            .limiter
            .reserve(&key, c.login_max_failures, c.login_window)
        else {
            warn!(user = %key.1, "password change refused: too many wrong current passwords");
            return Err(Error::RateLimited(format!(
                "too many wrong current passwords; try again in {} minutes",
                c.login_window.as_secs().div_ceil(60)
            )));
        };
        match secrets::verify_password(password, &user.password_hash).await {
            Ok(true) => {
                self.limiter.succeeded(&key);
                Ok(true)
            }
            // A failure keeps its place in the count.
            Ok(false) => Ok(false),
            Err(e) => {
                self.limiter.release(&key, attempt);
                Err(e)
            }
        }
    }

    fn purge_at(&self, now: i64) -> SessionPurge {
        SessionPurge {
            now,
            idle_before: now - self.idle_limit_ms(),
        }
    }

    /// How often a session's `last_seen_at` is written while it is used: at most every
    /// minute, and often enough for short idle timeouts.
    fn session_touch_every_ms(&self) -> i64 {
        TOUCH_EVERY_MS.min(self.config.session_idle.as_millis() as i64 / 4)
    }

    /// Time since the written `last_seen_at` after which a session has been idle for at least
    /// `session_idle`: uses younger than the touch interval are not written, so the real last
    /// use may be up to that interval later than the stored one, and never earlier.
    fn idle_limit_ms(&self) -> i64 {
        self.config.session_idle.as_millis() as i64 + self.session_touch_every_ms()
    }

    /// The live session with this id, or `None` when it is unknown, expired (idle or
    /// absolute) or its user is disabled.
    pub async fn session(&self, session_id: &str) -> Result<Option<SessionInfo>, Error> {
        if session_id.is_empty() || session_id.len() > 128 {
            return Ok(None);
        }
        let id_hash = digest(session_id);
        let Some(s) = self.store.session_get(&id_hash).await? else {
            return Ok(None);
        };
        let now = now_ms();
        if now >= s.expires_at || now - s.last_seen_at >= self.idle_limit_ms() {
            self.store.session_delete(&id_hash).await?;
            return Ok(None);
        }
        let user = match self.store.user_get(s.user_id).await {
            Ok(u) if !u.disabled => u,
            Ok(_) | Err(tickwork_store::Error::NotFound { .. }) => {
                self.store.session_delete(&id_hash).await?;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        if now - s.last_seen_at >= self.session_touch_every_ms() {
            self.store
                .session_touch(SessionTouch { id_hash, now })
                .await?;
        }
        Ok(Some(SessionInfo {
            principal: Principal::from_user(&user),
            csrf_token: s.csrf_token,
            expires_at: s.expires_at,
        }))
    }

    /// Ends a session (unknown ids are fine: logging out twice is not an error).
    pub async fn logout(&self, session_id: &str) -> Result<(), Error> {
        if !session_id.is_empty() && session_id.len() <= 128 {
            self.store.session_delete(&digest(session_id)).await?;
        }
        Ok(())
    }

    /// The `Set-Cookie` value that stores a new session in the browser.
    pub fn session_cookie(&self, s: &NewSession) -> String {
        format!(
            "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{}",
            s.session_id,
            self.config.session_max.as_secs(),
            if self.config.secure_cookie {
                "; Secure"
            } else {
                ""
            }
        )
    }

    /// The `Set-Cookie` value that removes the session cookie.
    pub fn clear_session_cookie(&self) -> String {
        format!(
            "{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
            if self.config.secure_cookie {
                "; Secure"
            } else {
                ""
            }
        )
    }

    /// The caller of a `/openapi/v1` request from its bearer token: the built-in token is an
    /// admin; a `tw_` token acts as its user while neither is revoked or disabled.
    pub async fn api_principal(&self, bearer: Option<&str>) -> Result<Principal, Error> {
        let unauthorized = || {
            Error::Unauthorized(
                "the access token is wrong, missing or revoked (Authorization: Bearer <token>)"
                    .into(),
            )
        };
        let token = bearer
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(unauthorized)?;
        if !self.builtin_token.is_empty()
            && bool::from(token.as_bytes().ct_eq(self.builtin_token.as_bytes()))
        {
            return Ok(Principal::builtin_token());
        }
        if !token.starts_with(API_TOKEN_PREFIX) || token.len() > 128 {
            return Err(unauthorized());
        }
        let Some(t) = self.store.api_token_find(&digest(token)).await? else {
            return Err(unauthorized());
        };
        if t.revoked_at.is_some() {
            return Err(unauthorized());
        }
        let user = match self.store.user_get(t.user_id).await {
            Ok(u) if !u.disabled => u,
            Ok(_) | Err(tickwork_store::Error::NotFound { .. }) => return Err(unauthorized()),
            Err(e) => return Err(e.into()),
        };
        let now = now_ms();
        if t.last_used_at.is_none_or(|at| now - at >= TOUCH_EVERY_MS) {
            self.store
                .api_token_touch(ApiTokenTouch { id: t.id, now })
                .await?;
        }
        Ok(Principal::from_user(&user))
    }

    /// On a database without users, creates [`FIRST_ADMIN`] with the configured password, or
    /// a generated one, and records it in `audit`. Returns the generated password, to be shown
    /// once; `None` when users existed or the password was configured.
    pub async fn ensure_first_admin(
        &self,
        audit: &dyn AuditStore,
    ) -> Result<Option<String>, Error> {
        if self.store.users_count().await? > 0 {
            return Ok(None);
        }
        let (password, generated) = match &self.config.initial_admin_password {
            Some(p) if !p.is_empty() => {
                validate_password(p)
                    .map_err(|e| Error::invalid(format!("the first admin's {e}")))?;
                (p.clone(), false)
            }
            _ => (generate_password()?, true),
        };
        let now = now_ms();
        let created = self
            .store
            .user_create(UserNew {
                username: FIRST_ADMIN.to_owned(),
                password_hash: hash_password(&password).await?,
                role: UserRole::Admin,
                group_ids: Vec::new(),
                locale: None,
                now,
            })
            .await;
        match created {
            Ok(u) => {
                let after = serde_json::json!({ "username": u.username, "role": "admin" });
                audit
                    .audit_append(tickwork_store::AuditNew {
                        at: now,
                        actor_id: None,
                        actor: Principal::system().username,
                        action: "user.create".into(),
                        target_type: "user".into(),
                        target_id: u.id.to_string(),
                        before: None,
                        after: Some(after.to_string()),
                    })
                    .await?;
                info!("created the first admin account {FIRST_ADMIN:?}");
                Ok(generated.then_some(password))
            }
            // Another admin node created it at the same moment.
            Err(tickwork_store::Error::Conflict(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::secrets::PASSWORD_ALPHABET;
    use super::*;

    fn info(csrf: &str) -> SessionInfo {
        SessionInfo {
            principal: Principal::system(),
            csrf_token: csrf.to_owned(),
            expires_at: 0,
        }
    }

    #[test]
    fn csrf_must_match_exactly() {
        let i = info("abc123");
        assert!(check_csrf(&i, "abc123").is_ok());
        assert!(matches!(check_csrf(&i, "abc124"), Err(Error::Forbidden(_))));
        assert!(matches!(check_csrf(&i, ""), Err(Error::Forbidden(_))));
        assert!(matches!(
            check_csrf(&i, "abc1234"),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            check_csrf(&info(""), ""),
            Err(Error::Forbidden(_))
        ));
    }

    #[test]
    fn roles_and_groups() {
        let op = Principal {
            user_id: 5,
            username: "op".into(),
            role: Role::Operator,
            groups: vec![1, 3],
            locale: None,
        };
        assert!(op.can_change_group(1) && op.can_change_group(3));
        assert!(!op.can_change_group(2));
        assert!(!op.is_admin());
        assert!(matches!(op.require_admin(), Err(Error::Forbidden(_))));
        let viewer = Principal {
            role: Role::Viewer,
            ..op.clone()
        };
        assert!(!viewer.can_change_group(1));
        assert!(Principal::system().can_change_group(42));
        assert_eq!("operator".parse::<Role>().unwrap(), Role::Operator);
        assert!("root".parse::<Role>().is_err());
    }

    #[test]
    fn limiter_blocks_after_the_limit_per_ip_and_user() {
        let l = LoginLimiter::default();
        let ip: IpAddr = [10, 0, 0, 1].into();
        let key = (ip, "alice".to_owned());
        let w = Duration::from_secs(60);
        for _ in 0..5 {
            assert!(l.reserve(&key, 5, w).is_some());
        }
        assert!(l.reserve(&key, 5, w).is_none());
        assert!(l.reserve(&(ip, "bob".to_owned()), 5, w).is_some());
        assert!(
            l.reserve(&([10, 0, 0, 2].into(), "alice".to_owned()), 5, w)
                .is_some()
        );
        assert!(l.reserve(&key, 5, Duration::ZERO).is_some());
        // A released attempt gives its place back; a success clears the count.
        let other = (ip, "carol".to_owned());
        let first = l.reserve(&other, 1, w).unwrap();
        assert!(l.reserve(&other, 1, w).is_none());
        l.release(&other, first);
        assert!(l.reserve(&other, 1, w).is_some());
        l.succeeded(&other);
        assert!(l.reserve(&other, 1, w).is_some());
    }

    /// Bits of a secret drawn uniformly from an alphabet of `alphabet` letters.
    fn bits(chars: usize, alphabet: usize) -> f64 {
        chars as f64 * (alphabet as f64).log2()
    }

    #[test]
    fn tokens_come_from_the_os_generator_with_at_least_128_bits() {
        let is_hex = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        };
        let tokens: std::collections::HashSet<String> =
            (0..200).map(|_| generate_token().unwrap()).collect();
        assert_eq!(tokens.len(), 200, "tokens repeat");
        for t in &tokens {
            assert_eq!(t.len(), 64, "{t}");
            assert!(is_hex(t), "{t}");
            assert!(bits(t.len(), 16) >= 128.0);
        }
        // Session ids and CSRF tokens.
        let id = random_hex(32).unwrap();
        assert!(is_hex(&id) && bits(id.len(), 16) >= 128.0);
        assert_eq!(digest("x").len(), 64);

        let passwords: std::collections::HashSet<String> =
            (0..200).map(|_| generate_password().unwrap()).collect();
        assert_eq!(passwords.len(), 200, "passwords repeat");
        for p in &passwords {
            assert_eq!(p.chars().count(), GENERATED_PASSWORD_CHARS);
            assert!(p.bytes().all(|b| PASSWORD_ALPHABET.contains(&b)), "{p}");
            assert!(validate_password(p).is_ok());
        }
        assert!(bits(GENERATED_PASSWORD_CHARS, PASSWORD_ALPHABET.len()) >= 128.0);
        // Every letter is used: the draw is not stuck on part of the alphabet.
        let used: std::collections::HashSet<u8> =
            passwords.iter().flat_map(|p| p.bytes()).collect();
        assert_eq!(used.len(), PASSWORD_ALPHABET.len());
    }

    #[test]
    fn passwords_are_limited_in_characters_not_bytes() {
        // 1,024 characters, 1,034 bytes, a two-byte character across byte 1,024.
        let p = format!("{}{}é{}", "é".repeat(9), "a".repeat(1005), "a".repeat(9));
        assert_eq!((p.len(), p.chars().count()), (1034, 1024));
        assert!(!p.is_char_boundary(1024));
        assert!(validate_password(&p).is_ok());
        let longer = format!("{p}a");
        match validate_password(&longer) {
            Err(e @ Error::Invalid { .. }) => {
                assert_eq!(e.field(), Some("password"));
                assert!(e.to_string().contains("at most 1024 characters"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn passwords_hash_and_verify() {
        let h = hash_password("correct horse battery").await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(
            secrets::verify_password("correct horse battery", &h)
                .await
                .unwrap()
        );
        assert!(
            !secrets::verify_password("wrong horse battery", &h)
                .await
                .unwrap()
        );
    }
}
