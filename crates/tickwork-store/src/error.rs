//! The one error type of the store.

/// What a store operation can fail with.
///
/// `Display` never shows SQL or driver text: the admin turns these into HTTP answers in one
/// place and logs the source of [`Error::Database`] itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The addressed row does not exist.
    #[error("{what} {id} not found")]
    NotFound {
        /// The kind of row: "job", "group", "run".
        what: &'static str,
        /// Its id or key, as the caller gave it.
        id: String,
    },
    /// The change collides with the current state: a duplicate name or key, a stale version,
    /// a row still in use.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The input is unacceptable (too long, out of range, refers to a missing row).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The database failed or returned something unreadable.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// The database could not be opened at start: its URL, without the password, and the
    /// cause (connection refused, no such database, permission denied, ...).
    #[error("{url}: {cause}")]
    Open {
        /// The URL with its password replaced by `***`.
        url: String,
        /// What went wrong, secrets removed.
        cause: String,
    },
}

impl Error {
    pub(crate) fn not_found(what: &'static str, id: impl ToString) -> Self {
        Error::NotFound {
            what,
            id: id.to_string(),
        }
    }

    /// A row that holds a value the code cannot read: reported as a database error, since
    /// the input that wrote it is long gone.
    pub(crate) fn corrupt(what: String) -> Self {
        Error::Database(sqlx::Error::Decode(what.into()))
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Database(e)
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Error::Database(sqlx::Error::Migrate(Box::new(e)))
    }
}

/// The error of [`crate::connect`]: whatever failed, named, with the URL but never its
/// password (neither in the URL shown nor in the driver's text).
pub(crate) fn open_error(url: &str, e: Error) -> Error {
    let cause = match &e {
        Error::Database(e) => describe_open_failure(url, e),
        Error::Invalid(m) => m.clone(),
        other => other.to_string(),
    };
    let mut cause = cause;
    for secret in url_secrets(url) {
        cause = cause.replace(&secret, "***");
    }
    Error::Open {
        url: redact_url(url),
        cause,
    }
}

/// Names the cause of a failed open.
fn describe_open_failure(url: &str, e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => format!("connection refused ({io})"),
            std::io::ErrorKind::PermissionDenied => format!("permission denied ({io})"),
            std::io::ErrorKind::NotFound => format!("not found ({io})"),
            std::io::ErrorKind::TimedOut => format!("connection timed out ({io})"),
            _ => format!("cannot reach the database ({io})"),
        },
        sqlx::Error::Database(d) => {
            let mysql = d
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .map(|m| m.number());
            // SQLITE_CANTOPEN (14) and its extended codes: the file system says why.
            let sqlite_cantopen = url.starts_with("sqlite:")
                && d.code()
                    .and_then(|c| c.parse::<i32>().ok())
                    .is_some_and(|c| c & 0xff == 14);
            if sqlite_cantopen {
                return sqlite_open_failure(url, d.message());
            }
            let what = match (d.code().as_deref(), mysql) {
                // PostgreSQL invalid_catalog_name; MySQL ER_BAD_DB_ERROR.
                (Some("3D000"), _) | (_, Some(1049)) => "no such database",
                // PostgreSQL invalid_password / invalid_authorization_specification;
                // MySQL ER_ACCESS_DENIED_ERROR.
                (Some("28P01" | "28000"), _) | (_, Some(1045)) => "authentication failed",
                // PostgreSQL insufficient_privilege; MySQL ER_DBACCESS_DENIED_ERROR.
                (Some("42501"), _) | (_, Some(1044)) => "permission denied",
                _ => "the database refused",
            };
            format!("{what} ({})", d.message())
        }
        sqlx::Error::PoolTimedOut => "timed out connecting to the database".to_owned(),
        sqlx::Error::Tls(e) => format!("tls failed ({e})"),
        sqlx::Error::Configuration(e) => format!("the url is not valid ({e})"),
        sqlx::Error::Migrate(e) => format!("migrations failed ({e})"),
        other => other.to_string(),
    }
}

/// Why SQLite could not open its file: missing folder or file, or no permission.
fn sqlite_open_failure(url: &str, message: &str) -> String {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let path = std::path::Path::new(rest.split_once('?').map_or(rest, |(p, _)| p));
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !folder.is_dir() {
        return format!("no such folder {} ({message})", folder.display());
    }
    match std::fs::OpenOptions::new().read(true).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("no such database file {} ({message})", path.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            format!("permission denied on {} ({message})", path.display())
        }
        _ => format!(
            "cannot open {} for writing: permission denied on it or its folder ({message})",
            path.display()
        ),
    }
}

/// The URL with the password of its user part, and any `password=` query value, as `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if is_password_key(key) => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

fn is_password_key(key: &str) -> bool {
    key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword")
}

/// The passwords in a URL, as written and percent-decoded, to scrub from driver messages.
fn url_secrets(url: &str) -> Vec<String> {
    let mut raw = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some((userinfo, _)) = rest[..end].rsplit_once('@')
            && let Some((_, password)) = userinfo.split_once(':')
        {
            raw.push(password.to_owned());
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=')
                && is_password_key(key)
            {
                raw.push(value.to_owned());
            }
        }
    }
    let mut all: Vec<String> = raw.iter().map(|p| percent_decode(p)).collect();
    all.extend(raw);
    all.retain(|s| !s.is_empty());
    all
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The kinds of driver errors the store turns into something better than `Database`.
pub(crate) fn db_kind(e: &sqlx::Error) -> Option<sqlx::error::ErrorKind> {
    match e {
        sqlx::Error::Database(d) => Some(d.kind()),
        _ => None,
    }
}

pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(db_kind(e), Some(sqlx::error::ErrorKind::UniqueViolation))
}

pub(crate) fn is_foreign_key_violation(e: &sqlx::Error) -> bool {
    matches!(
        db_kind(e),
        Some(sqlx::error::ErrorKind::ForeignKeyViolation)
    )
}

/// Whether a transaction failed only because of another one and may simply be run again:
/// a deadlock, a serialization failure or a lock wait past the session's bound (SQLSTATE
/// 40001 on PostgreSQL and MySQL, 40P01 and 55P03 on PostgreSQL; MySQL's lock wait timeout
/// 1205 has the generic HY000).
pub(crate) fn is_retryable(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(d) = e else {
        return false;
    };
    if matches!(d.code().as_deref(), Some("40001" | "40P01" | "55P03")) {
        return true;
    }
    d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .is_some_and(|m| matches!(m.number(), 1205 | 1213))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_passwords() {
        for (url, want) in [
            (
                "postgres://tw:s3cr%21t@db:5432/tickwork",
                "postgres://tw:***@db:5432/tickwork",
            ),
            ("mysql://root@127.0.0.1/x", "mysql://root@127.0.0.1/x"),
            (
                "postgres://db/x?user=a&password=hunter2&sslmode=require",
                "postgres://db/x?user=a&password=***&sslmode=require",
            ),
            (
                "sqlite://data/tw.db?mode=rwc",
                "sqlite://data/tw.db?mode=rwc",
            ),
            ("sqlite::memory:", "sqlite::memory:"),
        ] {
            assert_eq!(redact_url(url), want);
        }
        assert_eq!(
            url_secrets("postgres://tw:s3cr%21t@db/x?password=p2"),
            vec!["s3cr!t", "p2", "s3cr%21t", "p2"]
        );
    }

    #[test]
    fn open_errors_name_the_cause_and_hide_the_password() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = open_error(
            "postgres://tw:hunter2@127.0.0.1:1/x",
            Error::Database(sqlx::Error::Io(refused)),
        );
        let text = e.to_string();
        assert!(
            text.starts_with("postgres://tw:***@127.0.0.1:1/x: connection refused"),
            "{text}"
        );
        // A driver message that repeats the password loses it too.
        let e = open_error(
            "postgres://tw:hunter2@db/x",
            Error::Invalid("bad password hunter2".into()),
        );
        assert_eq!(e.to_string(), "postgres://tw:***@db/x: bad password ***");
    }
}
