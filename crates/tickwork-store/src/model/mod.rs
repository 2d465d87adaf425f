//! The rows the store hands out and the parameters its operations take.
//!
//! Times are epoch milliseconds everywhere. Enumerations are the typed names of
//! `tickwork-core`; the store writes them by name and refuses to invent values.

/// Declares a two-or-more valued status stored by name, with `as_str` and `FromStr`.
macro_rules! stored_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// The stored name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::Error;

            fn from_str(s: &str) -> Result<Self, $crate::Error> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::Error::Invalid(format!(concat!($kind, " {:?} is unknown"), other))),
                }
            }
        }
    };
}

stored_enum! {
    /// Whether the scheduler fires a job.
    JobStatus, "job status" {
        /// Claimed and fired by the scheduler.
        Running = "running",
        /// Fires only by hand.
        Stopped = "stopped",
    }
}

stored_enum! {
    /// Where a group's executor addresses come from.
    AddressMode, "address mode" {
        /// From the registry (executors register themselves).
        Auto = "auto",
        /// From the group's own list.
        Manual = "manual",
    }
}

/// A page request: `limit` rows after skipping `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageReq {
    /// Rows to skip.
    pub offset: u64,
    /// Rows to return, 1 to [`PageReq::MAX_LIMIT`].
    pub limit: u64,
}

impl PageReq {
    /// The largest page the store serves.
    pub const MAX_LIMIT: u64 = 1000;

    /// The first `limit` rows.
    pub const fn first(limit: u64) -> Self {
        PageReq { offset: 0, limit }
    }
}

impl Default for PageReq {
    fn default() -> Self {
        PageReq::first(20)
    }
}

/// One page of a listing and the number of rows matching the filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paged<T> {
    /// The rows of this page.
    pub items: Vec<T>,
    /// All rows that match, on every page.
    pub total: u64,
}

/// A half-open time range `[from, to)`; an open end is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    /// Inclusive start.
    pub from: Option<i64>,
    /// Exclusive end.
    pub to: Option<i64>,
}

// The areas come after `stored_enum!`, which they use.
mod accounts;
mod alarms;
mod audit;
mod cluster;
mod fire_alerts;
mod groups;
mod jobs;
mod runs;
mod scripts;
mod submissions;
mod workflows;

pub use accounts::*;
pub use alarms::*;
pub use audit::*;
pub use cluster::*;
pub use fire_alerts::*;
pub use groups::*;
pub use jobs::*;
pub use runs::*;
pub use scripts::*;
pub use submissions::*;
pub use workflows::*;
