//! The one error type of the executor crate.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What can go wrong when starting or stopping an executor. Run failures are not errors here:
/// they travel to the admin as callbacks.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is missing or out of range; the message names it.
    #[error("invalid executor configuration: {0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A file or folder the executor needs could not be used.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The HTTP client towards the admins could not be built.
    #[error("cannot build the admin http client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// Every admin address refused or could not be reached; one reason per address.
    #[error("no admin accepted {method}: {reasons}")]
    Admin {
        method: &'static str,
        reasons: String,
    },
    /// A background task of the executor ended abnormally (a panic).
    #[error("executor task failed: {0}")]
    Task(String),
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// An error and its sources on one line ("error sending request: connection refused"), never
/// with a backtrace.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
