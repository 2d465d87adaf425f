//! Pull mode: the frames of the one WebSocket an executor dials to an admin (`/api/pull`),
//! Tickwork's own protocol for executors the admin cannot reach.
//!
//! Both sides call each other's push-mode API over it: the admin sends `/run`, `/kill`, `/log`,
//! `/beat`, `/idleBeat` and `/tickwork/accepted` as [`Frame::Call`]s with the bodies push mode
//! posts, the executor answers each with the envelope push mode answers, and sends its results
//! as `callback` calls. Besides those, the executor grants credits (the admin never has more
//! `/run`s out than it was granted), beats with the runs it holds, and says when it drains.
//! One frame is one WebSocket text message, a JSON object tagged by `type`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where an admin accepts pull connections (the executor API's family: beside `/api/registry`).
pub const PULL_PATH: &str = "/api/pull";

/// The scheme of the address a pull executor is registered under: `pull://<instance>`, the
/// executor's instance id. It stays the same when the executor dials another admin: runs,
/// kills and log reads follow it to whichever admin holds its connection.
pub const PULL_SCHEME: &str = "pull://";

/// The largest frame either side accepts: a `/run` body is at most 5 MiB (the script's text),
/// plus the frame around it.
pub const MAX_FRAME_BYTES: usize = 6 * 1024 * 1024;

/// The method name of the executor's results, as in `/api/callback`.
pub const CALLBACK_CALL: &str = "callback";

/// Longest instance id an executor may give.
pub const MAX_INSTANCE_LEN: usize = 64;

/// One message of a pull connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    /// The executor's first frame: its app, an instance id that stays the same across its
    /// reconnects, the runs it may take now, and the runs it holds (after a reconnect).
    Hello {
        app: String,
        instance: String,
        credits: u32,
        #[serde(default)]
        running: Vec<i64>,
    },
    /// The admin's answer to a good hello: the address the executor is registered under, and
    /// how often it wants a [`Frame::Beat`].
    Welcome {
        address: String,
        beat_interval_ms: u64,
    },
    /// A call of the other side's API: `path` as push mode names it (`/run`, `callback`, ...),
    /// `body` the JSON push mode posts.
    Call {
        id: u64,
        path: String,
        #[serde(default)]
        body: Value,
    },
    /// The answer to call `id`: the envelope push mode answers.
    Answer { id: u64, body: Value },
    /// The executor may take `n` more runs (one for each run that ended or was not taken).
    Credit { n: u32 },
    /// The executor is alive and holds these runs (queued or running).
    Beat {
        #[serde(default)]
        running: Vec<i64>,
    },
    /// The executor shuts down: send it no more runs.
    Drain,
}

impl Frame {
    /// The frame as one text message.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("frames are always serializable")
    }

    /// Reads one text message; the error says what is wrong with it.
    pub fn from_text(text: &str) -> Result<Frame, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// `pull://<instance>`.
pub fn pull_address(instance: &str) -> String {
    format!("{PULL_SCHEME}{instance}")
}

/// Whether `address` is a pull executor's (only the admin holding its connection registers
/// such an address; push executors may not).
pub fn is_pull_address(address: &str) -> bool {
    address.starts_with(PULL_SCHEME)
}

/// Why an instance id is refused, or `None`: 1 to [`MAX_INSTANCE_LEN`] letters, digits, `-`
/// or `_`.
pub fn instance_error(instance: &str) -> Option<String> {
    if instance.is_empty() || instance.len() > MAX_INSTANCE_LEN {
        return Some(format!(
            "instance must be 1 to {MAX_INSTANCE_LEN} characters, got {}",
            instance.len()
        ));
    }
    if let Some(c) = instance
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Some(format!(
            "instance may hold letters, digits, '-' and '_' only, not {c:?}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_tagged_json_objects() {
        let cases = [
            (
                Frame::Hello {
                    app: "demo".into(),
                    instance: "a1".into(),
                    credits: 8,
                    running: vec![3],
                },
                r#"{"type":"hello","app":"demo","instance":"a1","credits":8,"running":[3]}"#,
            ),
            (
                Frame::Call {
                    id: 7,
                    path: "/kill".into(),
                    body: serde_json::json!({"jobId": 1}),
                },
                r#"{"type":"call","id":7,"path":"/kill","body":{"jobId":1}}"#,
            ),
            (Frame::Credit { n: 2 }, r#"{"type":"credit","n":2}"#),
            (Frame::Drain, r#"{"type":"drain"}"#),
        ];
        for (frame, text) in cases {
            assert_eq!(frame.to_text(), text);
            assert_eq!(Frame::from_text(text).unwrap(), frame);
        }
    }

    #[test]
    fn a_beat_and_a_hello_may_leave_out_their_runs() {
        assert_eq!(
            Frame::from_text(r#"{"type":"beat"}"#).unwrap(),
            Frame::Beat { running: vec![] }
        );
        let hello = r#"{"type":"hello","app":"a","instance":"i","credits":1}"#;
        assert!(matches!(
            Frame::from_text(hello).unwrap(),
            Frame::Hello { running, .. } if running.is_empty()
        ));
    }

    #[test]
    fn unknown_or_broken_frames_are_errors() {
        for text in [
            r#"{"type":"launch"}"#,
            r#"{"type":"credit"}"#,
            r#"{"type":"credit","n":-1}"#,
            "not json",
        ] {
            assert!(Frame::from_text(text).is_err(), "{text}");
        }
    }

    #[test]
    fn pull_addresses_name_the_instance() {
        let a = pull_address("x9");
        assert_eq!(a, "pull://x9");
        assert!(is_pull_address(&a));
        assert!(!is_pull_address("http://127.0.0.1:9999/"));
    }

    #[test]
    fn instance_ids_are_short_plain_names() {
        for (id, ok) in [
            ("a", true),
            ("exec-01_b", true),
            ("", false),
            ("a/b", false),
            ("ü", false),
            (&"x".repeat(MAX_INSTANCE_LEN + 1), false),
            (&"x".repeat(MAX_INSTANCE_LEN), true),
        ] {
            assert_eq!(instance_error(id).is_none(), ok, "{id:?}");
        }
    }
}
