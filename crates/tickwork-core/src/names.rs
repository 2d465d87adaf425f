//! The enumerations that travel by name (on the wire, in the database and in job files), with
//! the exact XXL-JOB spellings.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// Declares an enum whose values are written as fixed strings, with `as_str`, `Display`,
/// `FromStr` (an unknown name is an [`Error::UnknownName`]) and serde by name.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $kind:literal { $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value's canonical name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;

            fn from_str(s: &str) -> Result<Self, Error> {
                match s.trim() {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::UnknownName {
                        kind: $kind,
                        value: other.to_owned(),
                        expected: concat!($($text, " "),+).trim_ascii_end(),
                    }),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

named_enum! {
    /// How a job is scheduled.
    ScheduleType, "schedule type" {
        /// Never scheduled: fires only by hand or by API.
        None = "NONE",
        /// A Quartz cron expression evaluated in the job's time zone.
        Cron = "CRON",
        /// A fixed interval of real time between fires.
        FixRate = "FIX_RATE",
        /// A fixed delay counted from the completion of the previous run.
        FixDelay = "FIX_DELAY",
        /// One instant.
        Once = "ONCE",
        /// A cron expression whose next fire is its first match after the previous run ended:
        /// one run at a time, the matches passed while it ran skipped (LTS's
        /// `relyOnPrevCycle`).
        CronAfterEnd = "CRON_AFTER_END",
    }
}

named_enum! {
    /// What happens to a run its admin may have sent before it went away, when no executor
    /// can say whether it has the run (see the admin's maybe-sent resolution).
    Delivery, "delivery" {
        /// Not sent again: the run ends `lost`, with an alarm. Never twice.
        AtMostOnce = "AT_MOST_ONCE",
        /// Sent again with the same run id (`logId`). Never missed; a Tickwork executor drops
        /// a second `/run` of a run it accepted, a Java executor may run it twice.
        AtLeastOnce = "AT_LEAST_ONCE",
    }
}

named_enum! {
    /// What to do with fires that are too late.
    MisfireStrategy, "misfire strategy" {
        /// Skip late fires.
        DoNothing = "DO_NOTHING",
        /// Fire once now in place of all the late fires.
        FireOnceNow = "FIRE_ONCE_NOW",
    }
}

named_enum! {
    /// How the admin picks the executor of a run.
    RouteStrategy, "route strategy" {
        First = "FIRST",
        Last = "LAST",
        Round = "ROUND",
        Random = "RANDOM",
        ConsistentHash = "CONSISTENT_HASH",
        LeastFrequentlyUsed = "LEAST_FREQUENTLY_USED",
        LeastRecentlyUsed = "LEAST_RECENTLY_USED",
        Failover = "FAILOVER",
        Busyover = "BUSYOVER",
        ShardingBroadcast = "SHARDING_BROADCAST",
    }
}

named_enum! {
    /// What an executor does with a run of a job that is already running.
    BlockStrategy, "block strategy" {
        /// Queue it behind the running one.
        SerialExecution = "SERIAL_EXECUTION",
        /// Refuse it.
        DiscardLater = "DISCARD_LATER",
        /// Kill the running one and its queue, then run it.
        CoverEarly = "COVER_EARLY",
    }
}

impl BlockStrategy {
    /// Reads a block strategy as an XXL-JOB executor does: unknown or empty means serial.
    pub fn parse_lenient(s: &str) -> Self {
        s.parse().unwrap_or(BlockStrategy::SerialExecution)
    }
}

named_enum! {
    /// What an executor runs: a registered handler (`BEAN`) or a script of some language.
    GlueType, "glue type" {
        Bean = "BEAN",
        /// Java source compiled in the JVM: not supported outside Java.
        Groovy = "GLUE_GROOVY",
        Shell = "GLUE_SHELL",
        Python = "GLUE_PYTHON",
        Python2 = "GLUE_PYTHON2",
        NodeJs = "GLUE_NODEJS",
        PowerShell = "GLUE_POWERSHELL",
        Php = "GLUE_PHP",
    }
}

impl GlueType {
    /// Whether this glue type is a script run as a child process.
    pub const fn is_script(self) -> bool {
        !matches!(self, GlueType::Bean | GlueType::Groovy)
    }

    /// The interpreter command and the script file suffix of a script type.
    pub const fn interpreter(self) -> Option<(&'static str, &'static str)> {
        match self {
            GlueType::Shell => Some(("bash", ".sh")),
            GlueType::Python => Some(("python3", ".py")),
            GlueType::Python2 => Some(("python", ".py")),
            GlueType::NodeJs => Some(("node", ".js")),
            GlueType::PowerShell => Some(("pwsh", ".ps1")),
            GlueType::Php => Some(("php", ".php")),
            GlueType::Bean | GlueType::Groovy => None,
        }
    }
}

named_enum! {
    /// Why a run exists.
    TriggerType, "trigger type" {
        Manual = "MANUAL",
        Cron = "CRON",
        FixRate = "FIX_RATE",
        FixDelay = "FIX_DELAY",
        Once = "ONCE",
        Api = "API",
        Retry = "RETRY",
        Parent = "PARENT",
        Misfire = "MISFIRE",
        /// A node of a workflow instance.
        Workflow = "WORKFLOW",
    }
}

impl ScheduleType {
    /// The trigger type a job's own schedule gives its runs.
    pub const fn trigger_type(self) -> TriggerType {
        match self {
            ScheduleType::Cron | ScheduleType::CronAfterEnd => TriggerType::Cron,
            ScheduleType::FixRate => TriggerType::FixRate,
            ScheduleType::FixDelay => TriggerType::FixDelay,
            ScheduleType::Once => TriggerType::Once,
            // A job with no schedule is never claimed; if it is, it fires nothing.
            ScheduleType::None => TriggerType::Manual,
        }
    }

    /// Whether the next fire is counted from the end of the previous run: the job has one
    /// scheduled run live at a time and waits for it.
    pub const fn waits_for_end(self) -> bool {
        matches!(self, ScheduleType::FixDelay | ScheduleType::CronAfterEnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in RouteStrategy::ALL {
            assert_eq!(v.as_str().parse::<RouteStrategy>().unwrap(), *v);
        }
        for v in GlueType::ALL {
            assert_eq!(v.as_str().parse::<GlueType>().unwrap(), *v);
        }
    }

    #[test]
    fn unknown_name_lists_the_expected_values() {
        let err = "SOMETIMES".parse::<MisfireStrategy>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"misfire strategy: "SOMETIMES" is not one of DO_NOTHING FIRE_ONCE_NOW"#
        );
    }

    #[test]
    fn unknown_block_strategy_is_serial_on_executors() {
        assert_eq!(
            BlockStrategy::parse_lenient(""),
            BlockStrategy::SerialExecution
        );
        assert_eq!(
            BlockStrategy::parse_lenient("COVER_EARLY"),
            BlockStrategy::CoverEarly
        );
    }
}
