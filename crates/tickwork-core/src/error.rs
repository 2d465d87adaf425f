//! The one error type of `tickwork-core`.

/// Everything that can be wrong with domain input. Messages name the offending field and say
/// what is wrong, lowercase and without a final period.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A cron expression is malformed; `field` is the cron field (`seconds`, `day-of-month`, ...)
    /// or `expression` when the problem is not tied to one field.
    #[error("{field}: {message}")]
    Cron {
        field: &'static str,
        message: String,
    },
    /// A schedule configuration other than cron is malformed.
    #[error("schedule: {0}")]
    Schedule(String),
    /// An IANA time zone name that the time zone database does not know.
    #[error("time zone: {0:?} is not a known IANA time zone")]
    TimeZone(String),
    /// A name that is not one of an enumeration's values.
    #[error("{kind}: {value:?} is not one of {expected}")]
    UnknownName {
        kind: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A route was asked for over an empty executor list.
    #[error("route: no executor address is registered")]
    NoExecutor,
    /// Failover or busy-over probed every executor and none answered ok; `report` lists each
    /// probe with its address, code and message.
    #[error("route: no executor passed the {probe} check: {report}")]
    ProbeFailed {
        probe: crate::routing::Probe,
        report: String,
    },
    /// A field of a job definition that breaks its limits or a rule; `field` is its JSON name.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// A run state change that the run state machine does not allow.
    #[error("run: cannot move from {from} to {to}")]
    RunTransition {
        from: crate::run::RunState,
        to: crate::run::RunState,
    },
}
