//! An instance's context: a small map of text values that the trigger's params start and each
//! node may add to, read by the nodes after it through their params.
//!
//! A node adds by a line of its result message (the `handleMsg` of its callback, so Java
//! executors can too): `tickwork-context: {"rows": "42", "file": "out.csv"}`. Params read it
//! with `${ctx.rows}`, or the whole map as JSON with `${ctx}`; a name the context lacks is left
//! as written, so a mistake shows in the params the executor received.

use std::collections::BTreeMap;

use crate::Error;

/// The context's largest size, as JSON.
pub const CONTEXT_BYTES: usize = 16 * 1024;
/// The longest name in the context.
pub const NAME_CHARS: usize = 64;
/// The start of a result message line that adds to the context.
pub const MESSAGE_PREFIX: &str = "tickwork-context:";
/// The name the trigger's params are kept under.
pub const TRIGGER_PARAMS: &str = "params";

/// Names to values, in name order.
pub type Context = BTreeMap<String, String>;

/// The context an instance starts with: the trigger's params, if any.
pub fn initial(trigger_params: &str) -> Context {
    let mut ctx = Context::new();
    if !trigger_params.is_empty() {
        ctx.insert(TRIGGER_PARAMS.to_owned(), trigger_params.to_owned());
    }
    ctx
}

/// What a node's result message adds: every `tickwork-context:` line's JSON object, later
/// lines over earlier ones. A string value is taken as it is, any other value as its JSON
/// text. `Ok(None)` when the message has no such line.
pub fn from_message(message: &str) -> Result<Option<Context>, Error> {
    let mut found: Option<Context> = None;
    for line in message.lines() {
        let Some(rest) = line.trim_start().strip_prefix(MESSAGE_PREFIX) else {
            continue;
        };
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(rest.trim())
            .map_err(|e| {
                invalid(format!(
                    "a {MESSAGE_PREFIX} line must hold a JSON object: {e}"
                ))
            })?;
        let add = found.get_or_insert_with(Context::new);
        for (name, value) in object {
            let value = match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            add.insert(name, value);
        }
    }
    Ok(found)
}

/// `ctx` with `add` written over it, if the names are well formed and the result fits in
/// [`CONTEXT_BYTES`]; `ctx` is left as it was otherwise.
pub fn merge(ctx: &Context, add: Context) -> Result<Context, Error> {
    for name in add.keys() {
        check_name(name)?;
    }
    let mut out = ctx.clone();
    out.extend(add);
    let size = to_json(&out).len();
    if size > CONTEXT_BYTES {
        return Err(invalid(format!(
            "would be {size} bytes as JSON; at most {CONTEXT_BYTES}"
        )));
    }
    Ok(out)
}

/// The context as the JSON object stored and shown.
pub fn to_json(ctx: &Context) -> String {
    serde_json::to_string(ctx).unwrap_or_else(|_| "{}".to_owned())
}

/// Reads a stored context; a broken one reads as empty rather than stopping the instance.
pub fn from_json(text: &str) -> Context {
    serde_json::from_str(text).unwrap_or_default()
}

/// `params` with every `${ctx.NAME}` replaced by the context's value and `${ctx}` by the
/// whole context as JSON; an unknown name is left as written.
pub fn render(params: &str, ctx: &Context) -> String {
    const OPEN: &str = "${ctx";
    let mut out = String::with_capacity(params.len());
    let mut rest = params;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + OPEN.len()..];
        let Some(close) = tail.find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        let inner = &tail[..close];
        let written = &rest[at..at + OPEN.len() + close + 1];
        if inner.is_empty() {
            out.push_str(&to_json(ctx));
        } else if let Some(value) = inner.strip_prefix('.').and_then(|name| ctx.get(name)) {
            out.push_str(value);
        } else {
            out.push_str(written);
        }
        rest = &rest[at + OPEN.len() + close + 1..];
    }
    out.push_str(rest);
    out
}

fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty()
        || name.len() > NAME_CHARS
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(invalid(format!(
            "name {name:?} must be 1 to {NAME_CHARS} letters, digits, '.', '_' or '-'"
        )));
    }
    Ok(())
}

fn invalid(message: String) -> Error {
    Error::Invalid {
        field: "context",
        message,
    }
}
