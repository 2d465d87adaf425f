//! The one error type of `tickwork-admin` and its one mapping to stable codes and HTTP
//! statuses ([`ErrorCode`]). The REST API (`http::ApiError`), the console and the executor
//! API's envelope all answer from it; internal causes are logged where they surface, never
//! shown to clients.

use axum::http::StatusCode;

/// What went wrong in an admin operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or refers to something that cannot be used. `field` names
    /// the input that is wrong, when one is; the text reads `field: message`.
    #[error("{}", invalid_text(.field.as_deref(), .message))]
    Invalid {
        field: Option<String>,
        message: String,
    },
    /// Items of the list input `list` are wrong, each named by its index (and field); nothing
    /// was changed.
    #[error("{}", items_text(.list, .items))]
    InvalidItems {
        list: &'static str,
        items: Vec<tickwork_protocol::api::ItemError>,
    },
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

fn invalid_text(field: Option<&str>, message: &str) -> String {
    match field {
        Some(f) => format!("{f}: {message}"),
        None => message.to_owned(),
    }
}

/// "2 of the jobs are wrong, nothing was written: jobs[3].schedule_conf: ...; jobs[7]: ...",
/// the first few named (the answer lists them all).
fn items_text(list: &str, items: &[tickwork_protocol::api::ItemError]) -> String {
    const NAMED: usize = 10;
    let mut text = format!(
        "{} of the {list} are wrong, nothing was written: ",
        items.len()
    );
    for (n, item) in items.iter().take(NAMED).enumerate() {
        if n > 0 {
            text.push_str("; ");
        }
        text.push_str(&format!("{list}[{}]", item.index));
        if let Some(field) = &item.field {
            text.push_str(&format!(".{field}"));
        }
        text.push_str(&format!(": {}", item.message));
    }
    if items.len() > NAMED {
        text.push_str(&format!("; and {} more", items.len() - NAMED));
    }
    text
}

/// The stable code of an error, as clients see it, and its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidInput,
    NotFound,
    Conflict,
    Unauthorized,
    Forbidden,
    RateLimited,
    ExecutorError,
    Unavailable,
    Internal,
}

impl ErrorCode {
    /// Every code, in the order the API documents them.
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::InvalidInput,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::RateLimited,
        ErrorCode::ExecutorError,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    /// The code on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::ExecutorError => "executor_error",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    /// The code of an XXL-JOB envelope that answers with this error: 502 when the caller
    /// should slow down (as XXL-JOB 3.5's job API answers), otherwise 500.
    pub fn envelope_code(self) -> i32 {
        match self {
            ErrorCode::RateLimited => tickwork_protocol::CODE_TOO_MANY_REQUESTS,
            _ => tickwork_protocol::CODE_FAIL,
        }
    }

    /// The HTTP status of an answer with this code.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::Conflict => StatusCode::CONFLICT,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::ExecutorError => StatusCode::BAD_GATEWAY,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl Error {
    /// An input error that names no field.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid {
            field: None,
            message: message.into(),
        }
    }

    /// An input error of `field`: reads `field: message`.
    pub fn invalid_field(field: impl Into<String>, message: impl std::fmt::Display) -> Error {
        Error::Invalid {
            field: Some(field.into()),
            message: message.to_string(),
        }
    }

    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid { .. } | Error::InvalidItems { .. } => ErrorCode::InvalidInput,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::Unauthorized(_) => ErrorCode::Unauthorized,
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::RateLimited(_) => ErrorCode::RateLimited,
            Error::Executor(_) => ErrorCode::ExecutorError,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::Store(_) | Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The input field an input error names.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Invalid { field, .. } => field.as_deref(),
            Error::InvalidItems { list, .. } => Some(list),
            _ => None,
        }
    }

    /// What a client may be told of this error: its text, or `None` for an internal failure,
    /// whose cause is logged here (with `surface`, where it came out) and never sent.
    pub fn client_message(&self, surface: &'static str) -> Option<String> {
        match self {
            Error::Store(cause) => {
                tracing::error!(error = ?cause, surface, "database error");
                None
            }
            Error::Internal(cause) => {
                tracing::error!(error = %cause, surface, "internal error");
                None
            }
            other => Some(other.to_string()),
        }
    }
}

impl From<tickwork_store::Error> for Error {
    fn from(e: tickwork_store::Error) -> Self {
        match e {
            tickwork_store::Error::NotFound { what, id } => {
                Error::NotFound(format!("{what} {id} not found"))
            }
            tickwork_store::Error::Conflict(m) => Error::Conflict(m),
            // The store's input errors are sentences that name no API field.
            tickwork_store::Error::Invalid(m) => Error::invalid(m),
            other => Error::Store(other),
        }
    }
}

impl From<tickwork_core::Error> for Error {
    fn from(e: tickwork_core::Error) -> Self {
        match e {
            // A job's validation names the API's own input field.
            tickwork_core::Error::Invalid { field, message } => {
                Error::invalid_field(field, message)
            }
            // Other core errors name core's parts (a cron field, a time zone), not the API's
            // inputs: callers that know the input wrap them with `Error::invalid_field`.
            other => Error::invalid(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_status_and_wire_name() {
        let table = [
            (ErrorCode::InvalidInput, 400, "invalid_input"),
            (ErrorCode::NotFound, 404, "not_found"),
            (ErrorCode::Conflict, 409, "conflict"),
            (ErrorCode::Unauthorized, 401, "unauthorized"),
            (ErrorCode::Forbidden, 403, "forbidden"),
            (ErrorCode::RateLimited, 429, "rate_limited"),
            (ErrorCode::ExecutorError, 502, "executor_error"),
            (ErrorCode::Unavailable, 503, "unavailable"),
            (ErrorCode::Internal, 500, "internal"),
        ];
        assert_eq!(table.len(), ErrorCode::ALL.len());
        for ((code, status, name), listed) in table.into_iter().zip(ErrorCode::ALL) {
            assert_eq!(code, listed, "ALL keeps the documented order");
            assert_eq!(code.status().as_u16(), status, "{name}");
            assert_eq!(code.as_str(), name);
        }
    }

    #[test]
    fn every_error_has_its_code() {
        let store = tickwork_store::Error::Conflict("taken".into());
        let table = [
            (Error::invalid("x"), ErrorCode::InvalidInput),
            (
                Error::invalid_field("name", "is empty"),
                ErrorCode::InvalidInput,
            ),
            (
                Error::NotFound("job 1 not found".into()),
                ErrorCode::NotFound,
            ),
            (Error::Conflict("taken".into()), ErrorCode::Conflict),
            (Error::from(store), ErrorCode::Conflict),
            (Error::Unauthorized("no".into()), ErrorCode::Unauthorized),
            (Error::Forbidden("no".into()), ErrorCode::Forbidden),
            (Error::RateLimited("later".into()), ErrorCode::RateLimited),
            (Error::Executor("refused".into()), ErrorCode::ExecutorError),
            (Error::Unavailable("slow".into()), ErrorCode::Unavailable),
            (Error::Internal("panic".into()), ErrorCode::Internal),
        ];
        for (e, code) in table {
            assert_eq!(e.code(), code, "{e}");
        }
    }

    #[test]
    fn an_input_error_reads_field_then_problem() {
        let e = Error::invalid_field("schedule_conf", "bad cron");
        assert_eq!(e.to_string(), "schedule_conf: bad cron");
        assert_eq!(e.field(), Some("schedule_conf"));
        let e = Error::invalid("request body is too large");
        assert_eq!(e.to_string(), "request body is too large");
        assert_eq!(e.field(), None);
    }

    #[test]
    fn internal_causes_are_not_told() {
        assert_eq!(
            Error::Internal("secret".into()).client_message("test"),
            None
        );
        assert_eq!(
            Error::Conflict("app_name is taken".into()).client_message("test"),
            Some("app_name is taken".into())
        );
    }
}
