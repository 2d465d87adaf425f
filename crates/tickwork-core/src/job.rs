//! A job's definition ([`JobSpec`]) and its limits ([`Limits`]): one type, one validation.
//!
//! The admin checks every definition with [`JobSpec::validate`] before it writes it, and the
//! store refuses values longer than the same [`Limits::STANDARD`], so whatever the admin
//! accepts the store stores. Text limits are counted in characters where the column is a
//! `VARCHAR(n)` (which counts characters on every backend) and in bytes where it is a `TEXT`
//! (MySQL's `TEXT` holds 65,535 bytes).

use serde::de::Visitor;
use serde::{Deserialize, Serialize};

use crate::schedule::Schedule;
use crate::{
    BlockStrategy, Delivery, Error, GlueType, MisfireStrategy, RouteStrategy, ScheduleType,
};

/// How long and how large a job's fields may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A job key, in characters (ASCII only, so also in bytes).
    pub key_chars: usize,
    pub description_chars: usize,
    pub owner_chars: usize,
    pub schedule_conf_chars: usize,
    pub time_zone_chars: usize,
    pub handler_chars: usize,
    /// The alarm channel list, in bytes.
    pub alarm_channels_bytes: usize,
    /// Params, in bytes: a job's own and a trigger's.
    pub params_bytes: usize,
    /// A script's source, in bytes.
    pub glue_source_bytes: usize,
    /// Most retries after a failed run.
    pub retry_count_max: i32,
    /// Longest delay before a retry, in milliseconds.
    pub retry_backoff_ms_max: i64,
}

impl Limits {
    /// The limits of the stored columns (see the migrations), which the admin enforces.
    pub const STANDARD: Limits = Limits {
        key_chars: 128,
        description_chars: 255,
        owner_chars: 64,
        schedule_conf_chars: 255,
        time_zone_chars: 64,
        handler_chars: 255,
        alarm_channels_bytes: 65_535,
        params_bytes: 65_535,
        glue_source_bytes: 1024 * 1024,
        retry_count_max: 100,
        retry_backoff_ms_max: 86_400_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::STANDARD
    }
}

/// The editable definition of a job: what the admin validates and the store writes, and
/// (with serde) the job's fields in the REST API's JSON, the CLI's export file and the
/// console's form. Every field but `group_id` has a default: the JSON API's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub group_id: i64,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub owner: String,
    /// Where alarms go; the alarm component owns the format (XXL: comma-separated e-mails).
    #[serde(default)]
    pub alarm_channels: String,
    #[serde(default = "never")]
    pub schedule_type: ScheduleType,
    /// Cron text, interval, instant: whatever `schedule_type` reads.
    #[serde(default)]
    pub schedule_conf: String,
    /// IANA name of the zone the schedule is read in. Empty in an input: the admin's default
    /// zone, written `null` on the wire (where `null` and absent mean the same).
    #[serde(default, with = "empty_as_null")]
    pub time_zone: String,
    #[serde(default = "do_nothing")]
    pub misfire_strategy: MisfireStrategy,
    #[serde(default = "first")]
    pub route_strategy: RouteStrategy,
    #[serde(default)]
    pub handler: String,
    #[serde(default)]
    pub params: String,
    #[serde(default = "serial")]
    pub block_strategy: BlockStrategy,
    /// Run timeout in seconds; 0 = none.
    #[serde(default)]
    pub timeout_s: i32,
    /// Retries after a failed run.
    #[serde(default)]
    pub retry_count: i32,
    /// Delay before a retry, in milliseconds.
    #[serde(default)]
    pub retry_backoff_ms: i64,
    /// Jobs fired when a run of this one succeeds.
    #[serde(default)]
    pub child_job_ids: Vec<i64>,
    /// Higher fires first when several runs are due at the same millisecond.
    #[serde(default)]
    pub priority: i32,
    #[serde(default = "bean")]
    pub glue_type: GlueType,
    #[serde(default)]
    pub glue_source: String,
    /// A run its admin may have sent before going away, that no executor can answer for:
    /// lost (`AT_MOST_ONCE`) or sent again (`AT_LEAST_ONCE`).
    #[serde(default = "at_most_once")]
    pub delivery: Delivery,
    /// A fire that reaches its executor later than this after its instant is late (an alert
    /// on the job's channels); 0: never late.
    #[serde(default = "lateness_budget")]
    pub lateness_budget_ms: i64,
}

// The defaults of the enum fields: XXL-JOB's.
fn never() -> ScheduleType {
    ScheduleType::None
}
fn do_nothing() -> MisfireStrategy {
    MisfireStrategy::DoNothing
}
fn first() -> RouteStrategy {
    RouteStrategy::First
}
fn serial() -> BlockStrategy {
    BlockStrategy::SerialExecution
}
fn bean() -> GlueType {
    GlueType::Bean
}
fn at_most_once() -> Delivery {
    Delivery::AtMostOnce
}
fn lateness_budget() -> i64 {
    crate::fire_check::DEFAULT_LATENESS_BUDGET_MS
}

/// An empty string as `null`, and `null` as an empty string.
mod empty_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(s: &str, to: S) -> Result<S::Ok, S::Error> {
        match s {
            "" => to.serialize_none(),
            s => to.serialize_some(s),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<String, D::Error> {
        Ok(Option::<String>::deserialize(from)?.unwrap_or_default())
    }
}

/// Captures the field names a derived `Deserialize` passes to `deserialize_struct`, then
/// stops: serde's own list of a struct's fields, in order.
struct FieldNames(&'static [&'static str]);

impl<'de> serde::Deserializer<'de> for &mut FieldNames {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = fields;
        Err(serde::de::Error::custom("only the field names were wanted"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        message: message.into(),
    }
}

fn at_most_chars(field: &'static str, value: &str, max: usize) -> Result<(), Error> {
    if value.chars().count() > max {
        return Err(invalid(field, format!("must be at most {max} characters")));
    }
    Ok(())
}

fn at_most_bytes(field: &'static str, value: &str, max: usize) -> Result<(), Error> {
    if value.len() > max {
        return Err(invalid(field, format!("must be at most {max} bytes")));
    }
    Ok(())
}

/// Whether jobs of this glue type carry their source: every one but BEAN.
pub fn has_source(t: GlueType) -> bool {
    t != GlueType::Bean
}

/// Checks params given to one run (a trigger's own params) against `limits`.
pub fn validate_params(params: &str, limits: &Limits) -> Result<(), Error> {
    at_most_bytes("params", params, limits.params_bytes)
}

/// Checks a job key: 1 to `limits.key_chars` letters, digits, `.`, `_` and `-`.
pub fn validate_key(key: &str, limits: &Limits) -> Result<(), Error> {
    let max = limits.key_chars;
    if key.is_empty()
        || key.len() > max
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(invalid(
            "key",
            format!("{key:?} must be 1 to {max} letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(())
}

impl JobSpec {
    /// A bean job of `group_id` running `handler`, never scheduled, with XXL-JOB's defaults
    /// for everything else (UTC, first route, serial execution).
    pub fn new(group_id: i64, handler: impl Into<String>) -> Self {
        JobSpec {
            handler: handler.into(),
            time_zone: "UTC".to_owned(),
            ..JobSpec::blank(group_id)
        }
    }

    /// A job of `group_id` with every other field at its serde default, as an input naming
    /// only its group reads: never scheduled, a BEAN job without a handler, XXL-JOB's
    /// strategies, the admin's default zone (empty).
    pub fn blank(group_id: i64) -> Self {
        use serde::de::value::{Error, MapDeserializer};
        let only_group = MapDeserializer::<_, Error>::new(std::iter::once(("group_id", group_id)));
        JobSpec::deserialize(only_group).expect("every field but group_id has a default")
    }

    /// The names of the fields in the API's JSON and the export file, in their order.
    pub fn field_names() -> &'static [&'static str] {
        let mut names = FieldNames(&[]);
        let _ = JobSpec::deserialize(&mut names);
        names.0
    }

    /// The definition as it is stored: schedule and handler trimmed, and a shell script
    /// without `\r` (scripts written on Windows would fail on it; XXL-JOB strips it too).
    pub fn normalized(mut self) -> Self {
        self.schedule_conf = self.schedule_conf.trim().to_owned();
        self.handler = self.handler.trim().to_owned();
        if self.glue_type == GlueType::Shell {
            self.glue_source.retain(|c| c != '\r');
        }
        self
    }

    /// Checks every field against `limits` and the fields against each other, and returns
    /// the parsed schedule. What needs the database (the group, child jobs and alarm
    /// channels exist) is the caller's.
    pub fn validate(&self, limits: &Limits) -> Result<Schedule, Error> {
        at_most_chars("description", &self.description, limits.description_chars)?;
        at_most_chars("owner", &self.owner, limits.owner_chars)?;
        at_most_bytes(
            "alarm_channels",
            &self.alarm_channels,
            limits.alarm_channels_bytes,
        )?;
        at_most_chars(
            "schedule_conf",
            &self.schedule_conf,
            limits.schedule_conf_chars,
        )?;
        at_most_chars("time_zone", &self.time_zone, limits.time_zone_chars)?;
        let schedule = Schedule::parse(self.schedule_type, &self.schedule_conf, &self.time_zone)
            .map_err(|e| invalid("schedule_conf", e.to_string()))?;
        if self.glue_type == GlueType::Bean && self.handler.trim().is_empty() {
            return Err(invalid("handler", "a BEAN job needs a handler name"));
        }
        at_most_chars("handler", &self.handler, limits.handler_chars)?;
        if has_source(self.glue_type) && self.glue_source.trim().is_empty() {
            return Err(invalid(
                "glue_source",
                format!("a {} job needs a script", self.glue_type),
            ));
        }
        at_most_bytes("glue_source", &self.glue_source, limits.glue_source_bytes)?;
        validate_params(&self.params, limits)?;
        if self.timeout_s < 0 {
            return Err(invalid(
                "timeout_s",
                format!("{} is negative; use 0 for no timeout", self.timeout_s),
            ));
        }
        if !(0..=limits.retry_count_max).contains(&self.retry_count) {
            return Err(invalid(
                "retry_count",
                format!(
                    "{} is out of range 0-{}",
                    self.retry_count, limits.retry_count_max
                ),
            ));
        }
        if !(0..=limits.retry_backoff_ms_max).contains(&self.retry_backoff_ms) {
            return Err(invalid(
                "retry_backoff_ms",
                format!(
                    "{} is out of range 0-{}",
                    self.retry_backoff_ms, limits.retry_backoff_ms_max
                ),
            ));
        }
        let budget_max = crate::fire_check::MAX_LATENESS_BUDGET_MS;
        if !(0..=budget_max).contains(&self.lateness_budget_ms) {
            return Err(invalid(
                "lateness_budget_ms",
                format!(
                    "{} is out of range 0-{budget_max}; use 0 for no late alerts",
                    self.lateness_budget_ms
                ),
            ));
        }
        Ok(schedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(r: Result<Schedule, Error>) -> Option<&'static str> {
        match r {
            Ok(_) => None,
            Err(Error::Invalid { field, .. }) => Some(field),
            Err(e) => panic!("not a field error: {e}"),
        }
    }

    #[test]
    fn every_rule_names_its_field() {
        let l = Limits::STANDARD;
        let cron = |s: &mut JobSpec| {
            s.schedule_type = ScheduleType::Cron;
            s.schedule_conf = "0 0 3 * * ?".into();
        };
        // (what, change to a valid bean job, the field refused or None)
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, Box<dyn Fn(&mut JobSpec)>, Option<&str>)] = &[
            ("the default", Box::new(|_| {}), None),
            ("a cron job", Box::new(cron), None),
            (
                "description at the limit, multibyte",
                Box::new(|s| s.description = "é".repeat(255)),
                None,
            ),
            (
                "description over",
                Box::new(|s| s.description = "é".repeat(256)),
                Some("description"),
            ),
            (
                "owner at the limit, multibyte",
                Box::new(|s| s.owner = "ü".repeat(64)),
                None,
            ),
            (
                "owner over",
                Box::new(|s| s.owner = "u".repeat(65)),
                Some("owner"),
            ),
            (
                "handler at the limit, multibyte",
                Box::new(|s| s.handler = "ß".repeat(255)),
                None,
            ),
            (
                "handler over",
                Box::new(|s| s.handler = "h".repeat(256)),
                Some("handler"),
            ),
            (
                "bean without handler",
                Box::new(|s| s.handler = "  ".into()),
                Some("handler"),
            ),
            (
                "params at the limit",
                Box::new(|s| s.params = "p".repeat(65_535)),
                None,
            ),
            (
                "params one byte over",
                Box::new(|s| s.params = "p".repeat(65_536)),
                Some("params"),
            ),
            (
                "alarm channels over",
                Box::new(|s| s.alarm_channels = "a".repeat(65_536)),
                Some("alarm_channels"),
            ),
            (
                "script at the limit",
                Box::new(|s| {
                    s.glue_type = GlueType::Shell;
                    s.glue_source = "x".repeat(1024 * 1024);
                }),
                None,
            ),
            (
                "script over",
                Box::new(|s| {
                    s.glue_type = GlueType::Shell;
                    s.glue_source = "x".repeat(1024 * 1024 + 1);
                }),
                Some("glue_source"),
            ),
            (
                "script job without a script",
                Box::new(|s| s.glue_type = GlueType::Python),
                Some("glue_source"),
            ),
            (
                "bad cron",
                Box::new(|s| {
                    cron(s);
                    s.schedule_conf = "every day".into();
                }),
                Some("schedule_conf"),
            ),
            (
                "schedule text over",
                Box::new(|s| {
                    cron(s);
                    s.schedule_conf = "0".repeat(256);
                }),
                Some("schedule_conf"),
            ),
            (
                "unknown zone",
                Box::new(|s| {
                    cron(s);
                    s.time_zone = "Mars/Olympus".into();
                }),
                Some("schedule_conf"),
            ),
            (
                "zone over",
                Box::new(|s| s.time_zone = "z".repeat(65)),
                Some("time_zone"),
            ),
            (
                "negative timeout",
                Box::new(|s| s.timeout_s = -1),
                Some("timeout_s"),
            ),
            (
                "negative lateness budget",
                Box::new(|s| s.lateness_budget_ms = -1),
                Some("lateness_budget_ms"),
            ),
            (
                "lateness budget over a day",
                Box::new(|s| s.lateness_budget_ms = 86_400_001),
                Some("lateness_budget_ms"),
            ),
            (
                "retries at the limit",
                Box::new(|s| s.retry_count = 100),
                None,
            ),
            (
                "retries over",
                Box::new(|s| s.retry_count = 101),
                Some("retry_count"),
            ),
            (
                "negative retries",
                Box::new(|s| s.retry_count = -1),
                Some("retry_count"),
            ),
            (
                "backoff at the limit",
                Box::new(|s| s.retry_backoff_ms = 86_400_000),
                None,
            ),
            (
                "backoff over",
                Box::new(|s| s.retry_backoff_ms = 86_400_001),
                Some("retry_backoff_ms"),
            ),
        ];
        for (what, change, want) in cases {
            let mut s = JobSpec::new(1, "demo");
            change(&mut s);
            assert_eq!(field_of(s.validate(&l)), *want, "{what}");
        }
    }

    #[test]
    fn messages_say_the_unit_they_count() {
        let mut s = JobSpec::new(1, "demo");
        s.handler = "h".repeat(256);
        assert_eq!(
            s.validate(&Limits::STANDARD).unwrap_err().to_string(),
            "handler: must be at most 255 characters"
        );
        let mut s = JobSpec::new(1, "demo");
        s.params = "p".repeat(65_536);
        assert_eq!(
            s.validate(&Limits::STANDARD).unwrap_err().to_string(),
            "params: must be at most 65535 bytes"
        );
    }

    #[test]
    fn smaller_limits_are_applied() {
        let l = Limits {
            description_chars: 3,
            ..Limits::STANDARD
        };
        let mut s = JobSpec::new(1, "demo");
        s.description = "abcd".into();
        assert_eq!(field_of(s.validate(&l)), Some("description"));
        assert_eq!(field_of(s.validate(&Limits::STANDARD)), None);
    }

    #[test]
    fn normalizing_trims_and_strips_carriage_returns_of_shell_only() {
        let mut s = JobSpec::new(1, " demo ");
        s.schedule_conf = " 0 0 3 * * ? ".into();
        s.glue_source = "a\r\nb".into();
        let n = s.clone().normalized();
        assert_eq!(
            (n.handler.as_str(), n.schedule_conf.as_str()),
            ("demo", "0 0 3 * * ?")
        );
        assert_eq!(n.glue_source, "a\r\nb", "only shell scripts lose \\r");
        s.glue_type = GlueType::Shell;
        assert_eq!(s.normalized().glue_source, "a\nb");
    }

    #[test]
    fn field_names_are_the_fields_serde_writes() {
        let names = JobSpec::field_names();
        assert_eq!(
            (names[0], names[names.len() - 1]),
            ("group_id", "lateness_budget_ms")
        );
        let written = serde_json::to_value(JobSpec::new(1, "h")).unwrap();
        let mut written: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let mut names = names.to_vec();
        written.sort_unstable();
        names.sort_unstable();
        assert_eq!(names, written);
    }

    #[test]
    fn a_missing_field_takes_its_default_and_group_id_is_required() {
        let blank: JobSpec = serde_json::from_str(r#"{"group_id": 7}"#).unwrap();
        assert_eq!(blank, JobSpec::blank(7));
        let defaults = JobSpec {
            group_id: 7,
            description: String::new(),
            owner: String::new(),
            alarm_channels: String::new(),
            schedule_type: ScheduleType::None,
            schedule_conf: String::new(),
            time_zone: String::new(),
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::First,
            handler: String::new(),
            params: String::new(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_s: 0,
            retry_count: 0,
            retry_backoff_ms: 0,
            child_job_ids: Vec::new(),
            priority: 0,
            glue_type: GlueType::Bean,
            glue_source: String::new(),
            delivery: Delivery::AtMostOnce,
            lateness_budget_ms: 1_000,
        };
        assert_eq!(JobSpec::blank(7), defaults);
        let e = serde_json::from_str::<JobSpec>(r#"{"handler": "h"}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `group_id`"), "{e}");
        let e = serde_json::from_str::<JobSpec>(r#"{"group_id": 1, "colour": 1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn an_empty_zone_is_null_on_the_wire_and_null_reads_as_empty() {
        let j = serde_json::to_value(JobSpec::blank(1)).unwrap();
        assert_eq!(j["time_zone"], serde_json::Value::Null);
        let j = serde_json::to_value(JobSpec::new(1, "h")).unwrap();
        assert_eq!(j["time_zone"], "UTC");
        for zone in [r#""""#, "null"] {
            let s: JobSpec =
                serde_json::from_str(&format!(r#"{{"group_id": 1, "time_zone": {zone}}}"#))
                    .unwrap();
            assert_eq!(s.time_zone, "", "{zone}");
        }
    }

    #[test]
    fn keys_are_ascii_names_of_limited_length() {
        let l = Limits::STANDARD;
        for ok in ["a", "job-1.daily_run", &"k".repeat(128)] {
            validate_key(ok, &l).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        for bad in ["", "with space", "é", "a/b", &"k".repeat(129)] {
            assert!(validate_key(bad, &l).is_err(), "{bad:?}");
        }
    }
}
