//! The one error type of `tickwork-admin`. The HTTP layer maps it to status codes in one place
//! (`http::ApiError`); internal causes are logged there, never shown to clients.

/// What went wrong in an admin operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or refers to something that cannot be used.
    #[error("{0}")]
    Invalid(String),
    /// The addressed thing does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The change collides with the current state (duplicate key, job in use, stale version).
    #[error("{0}")]
    Conflict(String),
    /// No or a wrong credential (token, session, username or password).
    #[error("{0}")]
    Unauthorized(String),
    /// The credential is good but its role may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Too many failed attempts; try again later.
    #[error("{0}")]
    RateLimited(String),
    /// The database failed; the cause is logged, clients see a generic message.
    #[error("database error")]
    Store(#[source] tickwork_store::Error),
    /// An executor could not be reached or refused (kill, log).
    #[error("{0}")]
    Executor(String),
    /// The database did not answer in time.
    #[error("{0}")]
    Unavailable(String),
    /// Something inside the admin failed (a task panicked, hashing failed); the cause is
    /// logged, clients see a generic message.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<tickwork_store::Error> for Error {
    fn from(e: tickwork_store::Error) -> Self {
        match e {
            tickwork_store::Error::NotFound { what, id } => {
                Error::NotFound(format!("{what} {id} not found"))
            }
            tickwork_store::Error::Conflict(m) => Error::Conflict(m),
            tickwork_store::Error::Invalid(m) => Error::Invalid(m),
            other => Error::Store(other),
        }
    }
}

impl From<tickwork_core::Error> for Error {
    fn from(e: tickwork_core::Error) -> Self {
        Error::Invalid(e.to_string())
    }
}
