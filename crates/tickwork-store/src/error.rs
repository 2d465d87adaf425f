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
/// a deadlock or a serialization failure (SQLSTATE 40001 on PostgreSQL and MySQL, 40P01 on
/// PostgreSQL; MySQL's lock wait timeout 1205 has the generic HY000).
pub(crate) fn is_retryable(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(d) = e else {
        return false;
    };
    if matches!(d.code().as_deref(), Some("40001" | "40P01")) {
        return true;
    }
    d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .is_some_and(|m| matches!(m.number(), 1205 | 1213))
}
