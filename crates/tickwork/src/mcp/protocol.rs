//! The Model Context Protocol's messages as this server answers them: JSON-RPC 2.0, one
//! message a line. Pure: a line in, what to do out ([`Step`]); the tools run elsewhere.
//!
//! Handled: `initialize` (protocol version negotiation), `notifications/initialized`, `ping`,
//! `tools/list`, `tools/call`. Other notifications are ignored (as are answers from the
//! client: this server asks nothing of it); other methods are `method not found`.

use serde_json::{Value, json};

use super::tools::{self, Call};

/// The protocol versions this server speaks, newest first.
pub(crate) const VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC's error codes.
pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// What the server does with one message.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Write this answer.
    Reply(Value),
    /// Run a tool, then answer request `id` with [`tool_result`].
    Call { id: Value, call: Call },
    /// Nothing to answer (a notification, or an answer from the client).
    Silent,
}

/// One connection's state: the negotiated version, once initialized.
#[derive(Debug, Default)]
pub(crate) struct Session {
    version: Option<&'static str>,
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Step {
    Step::Reply(json!({
        "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message.into() },
    }))
}

fn result(id: Value, result: Value) -> Step {
    Step::Reply(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}

impl Session {
    /// The version agreed on in `initialize`.
    pub(crate) fn version(&self) -> Option<&'static str> {
        self.version
    }

    /// What to do with one line read from the client.
    pub(crate) fn receive(&mut self, line: &str) -> Step {
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return error(Value::Null, PARSE_ERROR, format!("parse error: {e}")),
        };
        let Some(obj) = msg.as_object() else {
            return error(
                Value::Null,
                INVALID_REQUEST,
                "a message is one JSON object (batches are not supported)",
            );
        };
        let id = obj.get("id").cloned();
        let id_ok = matches!(&id, None | Some(Value::String(_)) | Some(Value::Number(_)));
        if obj.get("jsonrpc") != Some(&json!("2.0")) || !id_ok {
            return error(
                id.filter(|_| id_ok).unwrap_or(Value::Null),
                INVALID_REQUEST,
                "not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\" and \"id\" a string or \
                 a number",
            );
        }
        let Some(method) = obj.get("method") else {
            // An answer or error from the client: it answers nothing we asked.
            return Step::Silent;
        };
        let Some(method) = method.as_str() else {
            return error(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "\"method\" must be a string",
            );
        };
        let params = obj.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = id else {
            // Notifications (`notifications/initialized`, `notifications/cancelled`, ...)
            // change nothing here and are never answered.
            return Step::Silent;
        };
        if !matches!(params, Value::Null | Value::Object(_)) {
            return error(id, INVALID_PARAMS, "\"params\" must be an object");
        }
        match method {
            "initialize" => self.initialize(id, &params),
            "ping" => result(id, json!({})),
            _ if self.version.is_none() => error(
                id,
                INVALID_REQUEST,
                format!("{method}: the session is not initialized; send initialize first"),
            ),
            "tools/list" => result(id, json!({ "tools": tools::definitions() })),
            "tools/call" => {
                let Some(name) = params.get("name").and_then(Value::as_str) else {
                    return error(id, INVALID_PARAMS, "tools/call needs the tool's \"name\"");
                };
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                match Call::parse(name, args) {
                    Ok(call) => Step::Call { id, call },
                    Err(message) => error(id, INVALID_PARAMS, message),
                }
            }
            other => error(id, METHOD_NOT_FOUND, format!("method not found: {other}")),
        }
    }

    /// Answers with the client's version when this server speaks it, else its newest.
    fn initialize(&mut self, id: Value, params: &Value) -> Step {
        let Some(asked) = params.get("protocolVersion").and_then(Value::as_str) else {
            return error(
                id,
                INVALID_PARAMS,
                "initialize needs \"protocolVersion\" (a string)",
            );
        };
        let version = VERSIONS
            .iter()
            .find(|v| **v == asked)
            .copied()
            .unwrap_or(VERSIONS[0]);
        self.version = Some(version);
        result(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": { "tools": { "listChanged": false } },
                "serverInfo": { "name": "tickwork", "version": env!("CARGO_PKG_VERSION") },
                "instructions": "Tools of a Tickwork scheduler (jobs, runs, their logs, the \
                    schedule ahead) through its REST API, with the token's role: a viewer reads, \
                    an operator changes the jobs of its groups, an admin everything. Jobs are \
                    named by key or id; instants are epoch milliseconds.",
            }),
        )
    }
}

/// What a tool did, as a `tools/call` answer: its text, its structured value (from 2025-06-18
/// on), or its failure as a tool error the model can read.
pub(crate) fn tool_result(
    id: Value,
    version: Option<&str>,
    outcome: Result<tools::Outcome, String>,
) -> Value {
    let structured = version.is_some_and(|v| v >= "2025-06-18");
    let body = match outcome {
        Ok(o) => {
            let mut r =
                json!({ "content": [{ "type": "text", "text": o.text }], "isError": false });
            if structured && let Some(s) = o.structured {
                r["structuredContent"] = s;
            }
            r
        }
        Err(message) => {
            json!({ "content": [{ "type": "text", "text": message }], "isError": true })
        }
    };
    json!({ "jsonrpc": "2.0", "id": id, "result": body })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(s: &mut Session, line: &str) -> Value {
        match s.receive(line) {
            Step::Reply(v) => v,
            other => panic!("{line}: expected an answer, got {other:?}"),
        }
    }

    fn initialized(version: &str) -> Session {
        let mut s = Session::default();
        reply(
            &mut s,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        );
        assert_eq!(
            s.receive(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Step::Silent
        );
        s
    }

    #[test]
    fn initialize_answers_the_clients_version_when_spoken_else_the_newest() {
        for (asked, answered) in [
            ("2025-06-18", "2025-06-18"),
            ("2025-03-26", "2025-03-26"),
            ("2024-11-05", "2024-11-05"),
            ("2025-11-25", "2025-06-18"),
            ("1999-01-01", "2025-06-18"),
        ] {
            let mut s = Session::default();
            let r = reply(
                &mut s,
                &json!({"jsonrpc": "2.0", "id": "a", "method": "initialize",
                        "params": {"protocolVersion": asked, "capabilities": {}}})
                .to_string(),
            );
            assert_eq!(r["id"], "a");
            assert_eq!(r["result"]["protocolVersion"], answered, "{asked}");
            assert_eq!(r["result"]["serverInfo"]["name"], "tickwork");
            assert_eq!(r["result"]["capabilities"]["tools"]["listChanged"], false);
            assert_eq!(s.version(), Some(answered));
        }
    }

    #[test]
    fn errors_follow_json_rpc() {
        let mut s = Session::default();
        #[rustfmt::skip]
        let cases: &[(&str, Value, i64)] = &[
            ("{not json", Value::Null, PARSE_ERROR),
            ("[1, 2]", Value::Null, INVALID_REQUEST),
            (r#"{"id": 1, "method": "ping"}"#, json!(1), INVALID_REQUEST),
            (r#"{"jsonrpc": "1.0", "id": 2, "method": "ping"}"#, json!(2), INVALID_REQUEST),
            (r#"{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}"#, Value::Null, INVALID_REQUEST),
            (r#"{"jsonrpc": "2.0", "id": 3, "method": 7}"#, json!(3), INVALID_REQUEST),
            (r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}"#, json!(4), INVALID_REQUEST),
            (r#"{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {}}"#, json!(5), INVALID_PARAMS),
            (r#"{"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": [1]}"#, json!(6), INVALID_PARAMS),
        ];
        for (line, id, code) in cases {
            let r = reply(&mut s, line);
            assert_eq!(
                (&r["id"], &r["error"]["code"]),
                (id, &json!(code)),
                "{line}: {r}"
            );
            assert!(
                r["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty())
            );
        }
        assert_eq!(s.version(), None, "no failed initialize counts");

        let mut s = initialized("2025-06-18");
        for (line, code) in [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"resources/list"}"#,
                METHOD_NOT_FOUND,
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{}}"#,
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"drop_tables"}}"#,
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"show_job","arguments":{}}}"#,
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"show_run","arguments":{"run_id":"x"}}}"#,
                INVALID_PARAMS,
            ),
        ] {
            let r = reply(&mut s, line);
            assert_eq!(r["error"]["code"], code, "{line}: {r}");
        }
    }

    #[test]
    fn ping_tools_list_and_calls() {
        let mut s = Session::default();
        let pong = reply(&mut s, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        let mut s = initialized("2025-06-18");
        let list = reply(&mut s, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
        let names: Vec<&str> = list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "list_jobs",
                "show_job",
                "trigger_job",
                "start_job",
                "stop_job",
                "list_runs",
                "show_run",
                "run_log",
                "schedule_preview",
                "schedule_heatmap"
            ]
        );
        for t in list["result"]["tools"].as_array().unwrap() {
            assert_eq!(t["inputSchema"]["type"], "object", "{t}");
            assert!(!t["description"].as_str().unwrap().is_empty());
        }
        let step = s.receive(
            r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"trigger_job","arguments":{"job":"nightly","params":"full"}}}"#,
        );
        let Step::Call { id, call } = step else {
            panic!("{step:?}")
        };
        assert_eq!(id, json!("c"));
        assert_eq!(
            call,
            Call::TriggerJob {
                job: "nightly".into(),
                params: Some("full".into()),
                address: None
            }
        );
        // Answers from the client and notifications are not answered.
        assert_eq!(
            s.receive(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#),
            Step::Silent
        );
        assert_eq!(
            s.receive(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#
            ),
            Step::Silent
        );
    }

    #[test]
    fn tool_results_carry_text_structure_by_version_and_errors() {
        let ok = || {
            Ok(tools::Outcome {
                text: "done".into(),
                structured: Some(json!({"id": 1})),
            })
        };
        let r = tool_result(json!(1), Some("2025-06-18"), ok());
        assert_eq!(
            r["result"],
            json!({"content": [{"type": "text", "text": "done"}], "isError": false,
                   "structuredContent": {"id": 1}})
        );
        let old = tool_result(json!(1), Some("2025-03-26"), ok());
        assert!(old["result"].get("structuredContent").is_none(), "{old}");
        let failed = tool_result(json!(2), Some("2025-06-18"), Err("forbidden".into()));
        assert_eq!(
            failed["result"],
            json!({"content": [{"type": "text", "text": "forbidden"}], "isError": true})
        );
    }
}
