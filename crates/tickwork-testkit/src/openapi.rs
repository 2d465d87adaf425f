//! Holds JSON answers to an OpenAPI 3.1 document: the answer's status must be declared for its
//! operation and its body must match the declared schema (JSON Schema 2020-12).
//!
//! Written for the documents Tickwork serves, not for every schema: the keywords it checks are
//! `$ref` (to anywhere in the document), `type` (a name or a list of names), `enum`, `const`,
//! `properties`, `required`, `additionalProperties`, `items`, `minItems`, `maxItems`,
//! `minLength`, `maxLength` (in characters), `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`, `format` (`int32` and `int64`), `anyOf`, `oneOf`, `allOf` and `not`;
//! annotations (`description`, `title`, `default`, ...) are ignored. Any other keyword is a
//! mismatch rather than passed over, so a document cannot outgrow the check unnoticed.

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

/// Where a value disagrees with its schema, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The JSON path of the value that disagrees: `$`, `$.items[0].state`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// What an object schema that lists `properties` but says nothing of `additionalProperties`
/// lets through. JSON Schema allows any other property ([`Undeclared::Allow`]); a test that
/// holds answers to their documentation refuses them ([`Undeclared::Refuse`]), so that a
/// field the document forgot is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undeclared {
    Allow,
    Refuse,
}

/// Keywords that describe and never constrain.
const ANNOTATIONS: &[&str] = &[
    "$comment",
    "$schema",
    "$id",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Checks `value` against `schema`, resolving `$ref`s in `doc`.
pub fn validate(
    doc: &Value,
    schema: &Value,
    value: &Value,
    undeclared: Undeclared,
) -> Result<(), Mismatch> {
    Checker { doc, undeclared }.check(schema, value, "$")
}

/// Checks an answer of operation `method route` (`route` as the document's `paths` spell it,
/// `/jobs/{id}`): its `status` must be declared for the operation, and `body` (`Null` when
/// the answer had no JSON body) must match the declared `application/json` schema. The error
/// names the operation, the status and the JSON path of the mismatch.
pub fn check_answer(
    doc: &Value,
    method: &str,
    route: &str,
    status: u16,
    body: &Value,
    undeclared: Undeclared,
) -> Result<(), String> {
    let method = method.to_ascii_lowercase();
    let what = format!("{} {route} answered {status}", method.to_ascii_uppercase());
    let operation = doc["paths"]
        .get(route)
        .and_then(|item| item.get(&method))
        .ok_or_else(|| format!("{what}: the document has no such operation"))?;
    let responses = &operation["responses"];
    let response = responses
        .get(status.to_string())
        .or_else(|| responses.get(format!("{}XX", status / 100)))
        .or_else(|| responses.get("default"))
        .ok_or_else(|| {
            let declared: Vec<&str> = responses
                .as_object()
                .map(|r| r.keys().map(String::as_str).collect())
                .unwrap_or_default();
            format!("{what}: the status is not declared (declared: {declared:?})")
        })?;
    let response = resolve_refs(doc, response).map_err(|m| format!("{what}: {m}"))?;
    let Some(content) = response.get("content") else {
        return match body {
            Value::Null => Ok(()),
            _ => Err(format!(
                "{what}: the document declares no body, the answer has one: {}",
                short(body)
            )),
        };
    };
    let schema = content
        .get("application/json")
        .and_then(|c| c.get("schema"))
        .ok_or_else(|| format!("{what}: the document declares no JSON body"))?;
    validate(doc, schema, body, undeclared)
        .map_err(|m| format!("{what}: {m}\nthe answer: {}", short(body)))
}

/// The path template of `doc` that the concrete `path` (`/jobs/7/start`, no query) falls
/// under (`/jobs/{id}/start`); of several, the one with the most literal segments.
pub fn route_of<'a>(doc: &'a Value, path: &str) -> Option<&'a str> {
    let segments: Vec<&str> = path.split('/').collect();
    let matching = |template: &str| {
        let parts: Vec<&str> = template.split('/').collect();
        let fits = parts.len() == segments.len()
            && parts
                .iter()
                .zip(&segments)
                .all(|(t, s)| (t.starts_with('{') && t.ends_with('}') && !s.is_empty()) || t == s);
        fits.then(|| parts.iter().filter(|t| !t.starts_with('{')).count())
    };
    doc["paths"]
        .as_object()?
        .keys()
        .filter_map(|t| Some((matching(t)?, t.as_str())))
        .max_by_key(|(literals, _)| *literals)
        .map(|(_, t)| t)
}

/// Follows `$ref` until an object without one (responses may be references too).
fn resolve_refs<'a>(doc: &'a Value, mut v: &'a Value) -> Result<&'a Value, Mismatch> {
    for _ in 0..32 {
        match v.get("$ref") {
            Some(r) => v = pointer(doc, r, "$")?,
            None => return Ok(v),
        }
    }
    Err(mismatch("$", "a cycle of $ref"))
}

/// The target of a local reference `#/a/b`.
fn pointer<'a>(doc: &'a Value, reference: &Value, path: &str) -> Result<&'a Value, Mismatch> {
    let r = reference
        .as_str()
        .ok_or_else(|| mismatch(path, "$ref is not a string"))?;
    let Some(p) = r.strip_prefix('#') else {
        return Err(mismatch(
            path,
            format!("$ref {r:?} is not local to the document"),
        ));
    };
    doc.pointer(p)
        .ok_or_else(|| mismatch(path, format!("$ref {r:?} names nothing in the document")))
}

fn mismatch(path: &str, message: impl Into<String>) -> Mismatch {
    Mismatch {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// A value as a message shows it: its JSON, cut after 120 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `n` is an integer as JSON Schema counts them (`1.0` is one).
fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn has_type(v: &Value, name: &str) -> bool {
    match (name, v) {
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => is_integer(n),
        _ => type_name(v) == name,
    }
}

/// Numbers in order: exactly for integers (an `i64::MAX` bound is not rounded), else as f64.
fn cmp_numbers(a: &serde_json::Number, b: &serde_json::Number) -> Option<Ordering> {
    let exact = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (exact(a), exact(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// Equality as JSON Schema has it: numbers by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| json_eq(p, q)))
        }
        _ => a == b,
    }
}

/// The path of property `key` under `path`.
fn key_path(path: &str, key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        format!("{path}.{key}")
    } else {
        format!("{path}[{}]", Value::from(key))
    }
}

struct Checker<'a> {
    doc: &'a Value,
    undeclared: Undeclared,
}

impl Checker<'_> {
    fn check(&self, schema: &Value, value: &Value, path: &str) -> Result<(), Mismatch> {
        let keywords = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err(mismatch(path, "no value is allowed here")),
            Value::Object(k) => k,
            other => {
                return Err(mismatch(
                    path,
                    format!("the schema is not an object: {}", short(other)),
                ));
            }
        };
        for (keyword, arg) in keywords {
            self.keyword(keywords, keyword, arg, value, path)?;
        }
        Ok(())
    }

    fn keyword(
        &self,
        schema: &Map<String, Value>,
        keyword: &str,
        arg: &Value,
        value: &Value,
        path: &str,
    ) -> Result<(), Mismatch> {
        let number = |what: &str| {
            arg.as_number()
                .ok_or_else(|| mismatch(path, format!("{what} is not a number in the schema")))
        };
        let count = |what: &str| {
            arg.as_u64()
                .ok_or_else(|| mismatch(path, format!("{what} is not a count in the schema")))
        };
        match keyword {
            "$ref" => self.check(pointer(self.doc, arg, path)?, value, path),
            "type" => {
                let names: Vec<&str> = match arg {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => return Err(mismatch(path, "type is neither a name nor a list")),
                };
                if names.iter().any(|n| has_type(value, n)) {
                    Ok(())
                } else {
                    Err(mismatch(
                        path,
                        format!(
                            "expected {}, found {} {}",
                            names.join(" or "),
                            type_name(value),
                            short(value)
                        ),
                    ))
                }
            }
            "enum" => {
                let options = arg
                    .as_array()
                    .ok_or_else(|| mismatch(path, "enum is not a list in the schema"))?;
                if options.iter().any(|o| json_eq(o, value)) {
                    Ok(())
                } else {
                    Err(mismatch(
                        path,
                        format!("{} is not one of {}", short(value), short(arg)),
                    ))
                }
            }
            "const" if json_eq(arg, value) => Ok(()),
            "const" => Err(mismatch(
                path,
                format!("{} is not {}", short(value), short(arg)),
            )),
            "properties" | "required" | "additionalProperties" => {
                // Checked together, once, under `properties` (or alone without it).
                let first = ["properties", "required", "additionalProperties"]
                    .into_iter()
                    .find(|k| schema.contains_key(*k));
                match (first == Some(keyword), value) {
                    (true, Value::Object(o)) => self.object(schema, o, path),
                    _ => Ok(()),
                }
            }
            "items" => match value {
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, item)| self.check(arg, item, &format!("{path}[{i}]"))),
                _ => Ok(()),
            },
            "minItems" | "maxItems" => match value {
                Value::Array(items) => {
                    let bound = count(keyword)?;
                    let n = items.len() as u64;
                    let fits = if keyword == "minItems" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    fits.then_some(())
                        .ok_or_else(|| mismatch(path, format!("{n} items break {keyword} {bound}")))
                }
                _ => Ok(()),
            },
            "minLength" | "maxLength" => match value {
                Value::String(s) => {
                    let bound = count(keyword)?;
                    let n = s.chars().count() as u64;
                    let fits = if keyword == "minLength" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    fits.then_some(()).ok_or_else(|| {
                        mismatch(path, format!("{n} characters break {keyword} {bound}"))
                    })
                }
                _ => Ok(()),
            },
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match value {
                Value::Number(n) => {
                    let bound = number(keyword)?;
                    let order = cmp_numbers(n, bound);
                    let fits = match keyword {
                        "minimum" => order.is_some_and(Ordering::is_ge),
                        "maximum" => order.is_some_and(Ordering::is_le),
                        "exclusiveMinimum" => order.is_some_and(Ordering::is_gt),
                        _ => order.is_some_and(Ordering::is_lt),
                    };
                    fits.then_some(())
                        .ok_or_else(|| mismatch(path, format!("{n} breaks {keyword} {bound}")))
                }
                _ => Ok(()),
            },
            "format" => self.format(arg, value, path),
            "anyOf" | "oneOf" | "allOf" => self.combination(keyword, arg, value, path),
            "not" => match self.check(arg, value, path) {
                Ok(()) => Err(mismatch(
                    path,
                    format!("{} matches the schema under not", short(value)),
                )),
                Err(_) => Ok(()),
            },
            k if ANNOTATIONS.contains(&k) => Ok(()),
            other => Err(mismatch(
                path,
                format!("the schema uses `{other}`, which this validator does not check"),
            )),
        }
    }

    fn object(
        &self,
        schema: &Map<String, Value>,
        object: &Map<String, Value>,
        path: &str,
    ) -> Result<(), Mismatch> {
        let empty = Map::new();
        let properties = match schema.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(mismatch(path, "properties is not an object in the schema")),
        };
        if let Some(required) = schema.get("required") {
            let required = required
                .as_array()
                .ok_or_else(|| mismatch(path, "required is not a list in the schema"))?;
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(mismatch(
                        path,
                        format!("the required property `{name}` is missing"),
                    ));
                }
            }
        }
        let others = match schema.get("additionalProperties") {
            Some(s) => Some(s),
            None if self.undeclared == Undeclared::Refuse && schema.contains_key("properties") => {
                Some(&Value::Bool(false))
            }
            None => None,
        };
        for (key, v) in object {
            let at = key_path(path, key);
            match (properties.get(key), others) {
                (Some(s), _) => self.check(s, v, &at)?,
                (None, Some(Value::Bool(false))) => {
                    return Err(mismatch(
                        &at,
                        format!("the property `{key}` is not in the schema"),
                    ));
                }
                (None, Some(s)) => self.check(s, v, &at)?,
                (None, None) => {}
            }
        }
        Ok(())
    }

    fn format(&self, arg: &Value, value: &Value, path: &str) -> Result<(), Mismatch> {
        let Value::Number(n) = value else {
            return Ok(());
        };
        // A fraction is the type's to refuse; a float with an integral value must fit too.
        let float_fits = |bits: i32| {
            let edge = 2f64.powi(bits - 1);
            !n.is_u64()
                && n.as_f64()
                    .is_some_and(|f| f.fract() != 0.0 || (-edge..edge).contains(&f))
        };
        let fits = match arg.as_str() {
            Some("int64") => n.is_i64() || float_fits(64),
            Some("int32") => n
                .as_i64()
                .map_or_else(|| float_fits(32), |i| i32::try_from(i).is_ok()),
            // Other formats annotate.
            _ => true,
        };
        fits.then_some(())
            .ok_or_else(|| mismatch(path, format!("{n} is out of the range of {arg}")))
    }

    fn combination(
        &self,
        keyword: &str,
        arg: &Value,
        value: &Value,
        path: &str,
    ) -> Result<(), Mismatch> {
        let branches = arg
            .as_array()
            .ok_or_else(|| mismatch(path, format!("{keyword} is not a list in the schema")))?;
        let results: Vec<Result<(), Mismatch>> = branches
            .iter()
            .map(|b| self.check(b, value, path))
            .collect();
        let passed = results.iter().filter(|r| r.is_ok()).count();
        let why = || {
            results
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().err().map(|m| format!("#{i}: {m}")))
                .collect::<Vec<_>>()
                .join("; ")
        };
        match keyword {
            "allOf" => results.into_iter().collect(),
            "anyOf" if passed > 0 => Ok(()),
            "oneOf" if passed == 1 => Ok(()),
            "oneOf" if passed > 1 => Err(mismatch(
                path,
                format!("matches {passed} schemas of oneOf, not exactly one"),
            )),
            _ => Err(mismatch(
                path,
                format!("matches none of the schemas of {keyword} ({})", why()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A document with the shapes Tickwork's uses.
    fn doc() -> Value {
        json!({
            "openapi": "3.1.0",
            "paths": {
                "/things/{id}": {
                    "get": { "responses": {
                        "200": { "content": { "application/json": {
                            "schema": { "$ref": "#/components/schemas/Thing" } } } },
                        "404": { "$ref": "#/components/responses/NotFound" },
                    } },
                    "delete": { "responses": { "204": { "description": "gone" } } },
                },
            },
            "components": {
                "responses": { "NotFound": { "description": "no such thing", "content": {
                    "application/json": { "schema": { "$ref": "#/components/schemas/Error" } },
                } } },
                "schemas": {
                    "Thing": {
                        "type": "object",
                        "required": ["id", "state"],
                        "properties": {
                            "id": { "type": "integer", "format": "int64", "minimum": 1 },
                            "state": { "type": "string", "enum": ["on", "off"] },
                            "name": { "type": "string", "maxLength": 3 },
                            "note": { "type": ["string", "null"] },
                            "tags": { "type": "array", "items": { "type": "string" } },
                            "score": { "type": "number", "exclusiveMaximum": 1 },
                            "size": { "type": "integer", "maximum": 9223372036854775807_i64 },
                            "extra": { "anyOf": [{ "type": "null" },
                                { "$ref": "#/components/schemas/Closed" }] },
                            "counts": { "type": "object",
                                "additionalProperties": { "type": "integer" } },
                            "free": {},
                        },
                    },
                    "Closed": {
                        "type": "object",
                        "properties": { "a": { "type": "boolean" } },
                        "additionalProperties": false,
                    },
                    "Error": {
                        "type": "object",
                        "required": ["code"],
                        "properties": { "code": { "type": "string" } },
                    },
                    "Odd": { "type": "string", "pattern": "^a" },
                },
            },
        })
    }

    fn thing(patch: Value) -> Value {
        let mut v = json!({ "id": 1, "state": "on" });
        for (k, x) in patch.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    #[test]
    fn values_are_held_to_their_schema() {
        let doc = doc();
        let schema = json!({ "$ref": "#/components/schemas/Thing" });
        // (case, value, None when valid / Some((path, part of the message)))
        type Expected = Option<(&'static str, &'static str)>;
        let cases: Vec<(&str, Value, Expected)> = vec![
            ("the smallest valid value", thing(json!({})), None),
            (
                "every optional field",
                thing(json!({
                    "name": "abc", "note": null, "tags": ["x"], "score": 0.5,
                    "size": 9223372036854775807_i64, "extra": { "a": true },
                    "counts": { "ok": 2 }, "free": [1, "x", null],
                })),
                None,
            ),
            (
                "a nullable field with a value",
                thing(json!({ "note": "n" })),
                None,
            ),
            ("anyOf's null branch", thing(json!({ "extra": null })), None),
            (
                "an integer written as 2.0",
                thing(json!({ "id": 2.0 })),
                None,
            ),
            (
                "three characters of two bytes each",
                thing(json!({ "name": "ééé" })),
                None,
            ),
            (
                "a missing required field",
                json!({ "id": 1 }),
                Some(("$", "required property `state` is missing")),
            ),
            (
                "an extra field on a closed object",
                thing(json!({ "extra": { "a": true, "b": 1 } })),
                Some(("$.extra", "none of the schemas of anyOf")),
            ),
            (
                "a wrong enum value",
                thing(json!({ "state": "sleeping" })),
                Some(("$.state", "\"sleeping\" is not one of")),
            ),
            (
                "a null where not nullable",
                thing(json!({ "name": null })),
                Some(("$.name", "expected string, found null")),
            ),
            (
                "a string for an integer",
                thing(json!({ "id": "1" })),
                Some(("$.id", "expected integer, found string")),
            ),
            (
                "a fraction for an integer",
                thing(json!({ "id": 1.5 })),
                Some(("$.id", "expected integer")),
            ),
            (
                "below the minimum",
                thing(json!({ "id": 0 })),
                Some(("$.id", "0 breaks minimum 1")),
            ),
            (
                "past an exclusive maximum",
                thing(json!({ "score": 1 })),
                Some(("$.score", "breaks exclusiveMaximum")),
            ),
            (
                "one past i64::MAX, not rounded into range",
                thing(json!({ "size": 9223372036854775808_u64 })),
                Some(("$.size", "breaks maximum")),
            ),
            (
                "int64 out of range",
                thing(json!({ "id": 9223372036854775808_u64 })),
                Some(("$.id", "out of the range of \"int64\"")),
            ),
            (
                "too long, counted in characters",
                thing(json!({ "name": "éééé" })),
                Some(("$.name", "4 characters break maxLength 3")),
            ),
            (
                "a wrong item",
                thing(json!({ "tags": ["x", 2] })),
                Some(("$.tags[1]", "expected string, found integer")),
            ),
            (
                "a wrong value under additionalProperties",
                thing(json!({ "counts": { "odd key": "x" } })),
                Some(("$.counts[\"odd key\"]", "expected integer")),
            ),
            (
                "not an object at all",
                json!([]),
                Some(("$", "expected object, found array")),
            ),
        ];
        for (case, value, expected) in cases {
            let got = validate(&doc, &schema, &value, Undeclared::Allow);
            match (expected, got) {
                (None, Ok(())) => {}
                (Some((path, part)), Err(m)) => {
                    assert_eq!(m.path, path, "{case}: {m}");
                    assert!(m.message.contains(part), "{case}: {m}");
                }
                (expected, got) => panic!("{case}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn undeclared_fields_are_refused_only_when_asked() {
        let doc = doc();
        let schema = json!({ "$ref": "#/components/schemas/Thing" });
        let value = thing(json!({ "colour": "red" }));
        assert_eq!(validate(&doc, &schema, &value, Undeclared::Allow), Ok(()));
        let m = validate(&doc, &schema, &value, Undeclared::Refuse).unwrap_err();
        assert_eq!(m.path, "$.colour", "{m}");
        // Objects without a list of properties stay free-form, and declared maps keep theirs.
        let free = thing(json!({ "free": { "any": 1 }, "counts": { "a": 1 } }));
        assert_eq!(validate(&doc, &schema, &free, Undeclared::Refuse), Ok(()));
    }

    #[test]
    fn combinations_and_unknown_keywords() {
        let doc = doc();
        let cases: Vec<(Value, Value, bool)> = vec![
            (
                json!({ "oneOf": [{ "type": "integer" }, { "type": "number" }] }),
                json!(1),
                false,
            ),
            (
                json!({ "oneOf": [{ "type": "integer" }, { "type": "string" }] }),
                json!(1),
                true,
            ),
            (
                json!({ "allOf": [{ "minimum": 1 }, { "maximum": 3 }] }),
                json!(2),
                true,
            ),
            (
                json!({ "allOf": [{ "minimum": 1 }, { "maximum": 3 }] }),
                json!(4),
                false,
            ),
            (json!({ "not": { "type": "null" } }), json!(null), false),
            (json!({ "const": 1 }), json!(1.0), true),
            (json!({ "type": "array", "minItems": 1 }), json!([]), false),
            (json!({ "format": "int32" }), json!(2147483647), true),
            (json!({ "format": "int32" }), json!(2147483648_i64), false),
            (json!({ "format": "int32" }), json!(-2147483648.0), true),
            (json!({ "format": "int64" }), json!(1e19), false),
            (json!({ "format": "uri" }), json!(1), true),
            (json!(false), json!(1), false),
            (json!(true), json!(1), true),
            (
                json!({ "$ref": "#/components/schemas/Odd" }),
                json!("a"),
                false,
            ),
            (
                json!({ "$ref": "#/components/schemas/Nothing" }),
                json!("a"),
                false,
            ),
        ];
        for (schema, value, valid) in cases {
            let got = validate(&doc, &schema, &value, Undeclared::Allow);
            assert_eq!(got.is_ok(), valid, "{schema} on {value}: {got:?}");
        }
        let m = validate(
            &doc,
            &json!({ "$ref": "#/components/schemas/Odd" }),
            &json!("b"),
            Undeclared::Allow,
        )
        .unwrap_err();
        assert!(m.message.contains("`pattern`"), "{m}");
        let m = validate(
            &doc,
            &json!({ "$ref": "#/components/schemas/Closed" }),
            &json!({ "a": true, "b": 1 }),
            Undeclared::Allow,
        )
        .unwrap_err();
        assert_eq!(
            (m.path.as_str(), m.message.as_str()),
            ("$.b", "the property `b` is not in the schema")
        );
    }

    #[test]
    fn concrete_paths_find_their_template() {
        let doc = json!({ "paths": {
            "/jobs": {}, "/jobs/{id}": {}, "/jobs/{id}/start": {}, "/jobs/{id}/script": {},
            "/jobs/{id}/script/versions/{version}/restore": {}, "/users/{id}": {}, "/users/me": {},
        } });
        for (path, route) in [
            ("/jobs", Some("/jobs")),
            ("/jobs/7", Some("/jobs/{id}")),
            ("/jobs/abc", Some("/jobs/{id}")),
            ("/jobs/7/start", Some("/jobs/{id}/start")),
            (
                "/jobs/7/script/versions/1/restore",
                Some("/jobs/{id}/script/versions/{version}/restore"),
            ),
            ("/users/me", Some("/users/me")),
            ("/users/8", Some("/users/{id}")),
            ("/jobs/", None),
            ("/jobs/7/stop", None),
            ("/nothing/here", None),
        ] {
            assert_eq!(route_of(&doc, path), route, "{path}");
        }
    }

    #[test]
    fn answers_are_held_to_their_operation() {
        let doc = doc();
        let ok = json!({ "id": 3, "state": "off" });
        // (method, route, status, body, None when valid / Some(part of the error))
        let cases: Vec<(&str, &str, u16, Value, Option<&str>)> = vec![
            ("GET", "/things/{id}", 200, ok.clone(), None),
            (
                "get",
                "/things/{id}",
                404,
                json!({ "code": "not_found" }),
                None,
            ),
            ("DELETE", "/things/{id}", 204, Value::Null, None),
            (
                "GET",
                "/things/{id}",
                200,
                json!({ "id": 3 }),
                Some("GET /things/{id} answered 200: $: the required property `state`"),
            ),
            (
                "GET",
                "/things/{id}",
                404,
                json!({ "message": "x" }),
                Some("answered 404: $: the required property `code`"),
            ),
            (
                "GET",
                "/things/{id}",
                500,
                json!({ "code": "internal" }),
                Some("answered 500: the status is not declared"),
            ),
            (
                "GET",
                "/things/{id}",
                200,
                Value::Null,
                Some("$: expected object, found null"),
            ),
            (
                "DELETE",
                "/things/{id}",
                204,
                json!({}),
                Some("declares no body"),
            ),
            ("PUT", "/things/{id}", 200, ok, Some("no such operation")),
            ("GET", "/others", 200, json!({}), Some("no such operation")),
        ];
        for (method, route, status, body, expected) in cases {
            let got = check_answer(&doc, method, route, status, &body, Undeclared::Refuse);
            match (expected, got) {
                (None, Ok(())) => {}
                (Some(part), Err(e)) => assert!(e.contains(part), "{method} {route}: {e}"),
                (expected, got) => {
                    panic!("{method} {route} {status}: expected {expected:?}, got {got:?}")
                }
            }
        }
    }
}
