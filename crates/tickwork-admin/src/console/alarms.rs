//! Alarm channels (email, webhook and chat robots) with their masked settings and the recent
//! deliveries; create, edit, delete and send a test message (admins only).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value};
use tickwork_protocol::api::{
    AlarmChannelInput, AlarmChannelView, AlarmDeliveryQuery, AlarmDeliveryView,
};

use super::i18n::Lang;
use super::session::{Posted, Visitor};
use super::ui::{self, Ctx, Field, Form, Opt};
use crate::{Error, ErrorCode, Service};

/// Deliveries shown on the page.
const DELIVERIES: u64 = 50;

/// Every field of the form, as the form posts them.
const FORM_KEYS: [&str; 12] = [
    "name", "kind", "enabled", "host", "port", "tls", "user", "password", "from", "to", "url",
    "secret",
];

/// Config keys whose stored value is never shown; left empty on an edit, the stored one stays.
const KEPT_KEYS: [&str; 3] = ["password", "secret", "url"];

/// The config keys of a kind, in form order; `None` for a kind we do not know (the service
/// says what is wrong with it).
fn config_keys(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "email" => Some(&["host", "port", "tls", "user", "password", "from", "to"]),
        "webhook" | "dingtalk" | "feishu" => Some(&["url", "secret"]),
        "wecom" | "slack" => Some(&["url"]),
        _ => None,
    }
}

/// The config a form describes: only the keys of its kind, only non-empty values (so an edit
/// keeps a stored secret, password or URL left empty, and a create without one is refused by
/// the service), `to` split at commas. A port that is not a number is an error of that field.
fn config_of(kind: &str, values: &HashMap<&str, String>) -> Result<Map<String, Value>, String> {
    let mut config = Map::new();
    for key in config_keys(kind).unwrap_or(&[]) {
        let raw = values.get(key).map(String::as_str).unwrap_or("");
        let raw = if KEPT_KEYS.contains(key) {
            raw
        } else {
            raw.trim()
        };
        if raw.is_empty() {
            continue;
        }
        let value = match *key {
            "port" => Value::from(raw.parse::<u16>().map_err(|_| "port".to_owned())?),
            "to" => Value::Array(
                raw.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.to_owned()))
                    .collect(),
            ),
            _ => Value::String(raw.to_owned()),
        };
        config.insert((*key).to_owned(), value);
    }
    Ok(config)
}

/// A masked config in one line: `key=value` by key, lists joined by commas.
fn summary(config: &Value) -> String {
    let Value::Object(map) = config else {
        return String::new();
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let v = match &map[k] {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| i.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The form values of a stored channel: its masked settings, never a secret or a URL.
fn values_of_view(ch: &AlarmChannelView) -> HashMap<&'static str, String> {
    let mut values = HashMap::from([
        ("name", ch.name.clone()),
        ("kind", ch.kind.clone()),
        ("enabled", if ch.enabled { "on" } else { "" }.to_owned()),
    ]);
    for key in ["host", "port", "tls", "user", "from", "to"] {
        let v = match ch.config.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        values.insert(key, v);
    }
    values
}

fn values_of_form(form: &Form) -> HashMap<&'static str, String> {
    FORM_KEYS
        .into_iter()
        .map(|k| (k, form.get(k).to_owned()))
        .collect()
}

/// The form's fields; `editing` hints that empty secrets keep the stored ones.
fn fields(values: &HashMap<&str, String>, editing: bool, lang: Lang) -> Vec<Field> {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    let kind = get("kind");
    let tls = get("tls");
    let kept = |create: &'static str, edit: &'static str| if editing { edit } else { create };
    vec![
        Field::new("name", "name", "text")
            .value(get("name"))
            .hint("channel_name_hint"),
        // The channel kinds, the TLS modes and the deliveries' states are labelled codes
        // (`i18n::codes`).
        Field::new("kind", "kind", "select").options(Opt::coded_text(
            "channel",
            lang,
            if kind.is_empty() { "webhook" } else { &kind },
        )),
        Field::new("enabled", "enabled", "checkbox").value(get("enabled")),
        Field::new("url", "url", "text")
            .hint(kept("url_hint", "url_keep_hint"))
            .value(get("url")),
        Field::new("secret", "secret", "password").hint(kept("secret_hint", "secret_keep_hint")),
        Field::new("host", "smtp_host", "text")
            .value(get("host"))
            .hint("email_only"),
        Field::new("port", "port", "number")
            .value(get("port"))
            .hint("port_hint"),
        Field::new("tls", "tls", "select").options(Opt::coded_text(
            "tls",
            lang,
            if tls.is_empty() { "starttls" } else { &tls },
        )),
        Field::new("user", "smtp_user", "text")
            .value(get("user"))
            .hint("email_only"),
        Field::new("password", "password", "password")
            .hint(kept("email_only", "password_keep_hint")),
        Field::new("from", "mail_from", "text")
            .value(get("from"))
            .hint("email_only"),
        Field::new("to", "mail_to", "text")
            .value(get("to"))
            .hint("mail_to_hint"),
    ]
}

/// A service error on the field it names: `config: url ...` on the URL field, `name: ...` on
/// the name; anything else in the banner.
fn errors_of(v: &Visitor, e: &Error) -> (StatusCode, HashMap<String, String>) {
    let (status, mut errors) = v.form_errors(e);
    if let Some(msg) = errors.remove("config") {
        errors.insert(config_field(&msg).to_owned(), msg);
    }
    (status, errors)
}

/// The form field a service complaint about the config names (`host: ...`, `url "x": ...`,
/// ``missing field `url` ``), or "" for the banner.
fn config_field(msg: &str) -> &'static str {
    let quoted = msg
        .split_once("field `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(name, _)| name);
    let first = quoted.unwrap_or_else(|| msg.split([':', ' ']).next().unwrap_or(""));
    FORM_KEYS.into_iter().find(|k| *k == first).unwrap_or("")
}

pub(super) struct ChannelRow {
    pub ch: AlarmChannelView,
    pub summary: String,
}

pub(super) struct DeliveryRow {
    pub d: AlarmDeliveryView,
    pub class: &'static str,
    pub updated: String,
}

#[derive(Template)]
#[template(path = "alarms.html")]
struct AlarmsPage {
    c: Ctx,
    rows: Vec<ChannelRow>,
    deliveries: Vec<DeliveryRow>,
    total: u64,
    states: Vec<Opt>,
    fields: Vec<Field>,
}

#[derive(Template)]
#[template(path = "alarm_form.html")]
struct AlarmFormPage {
    c: Ctx,
    id: i64,
    fields: Vec<Field>,
}

#[derive(Deserialize, Default)]
pub(super) struct ListQuery {
    #[serde(default)]
    state: String,
}

fn delivery_class(state: &str) -> &'static str {
    match state {
        "sent" => "s-ok",
        "failed" => "s-fail",
        _ => "s-run",
    }
}

async fn page(
    a: &Service,
    v: &Visitor,
    state: &str,
    values: &HashMap<&str, String>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let channels = match a.alarms().channels_list(&v.principal).await {
        Ok(c) => c,
        Err(e) => return v.error_page(e),
    };
    let mut c = v.ctx("alarm_channels");
    let query = AlarmDeliveryQuery {
        state: Some(state.to_owned()).filter(|s| !s.is_empty()),
        page: Some(1),
        limit: Some(DELIVERIES),
        ..AlarmDeliveryQuery::default()
    };
    let (deliveries, total) = match a.alarms().deliveries_list(&v.principal, query).await {
        Ok(p) => (p.items, p.total),
        Err(e) => {
            c.err = Some(v.error_text(&e));
            (Vec::new(), 0)
        }
    };
    let deliveries = deliveries
        .into_iter()
        .map(|d| DeliveryRow {
            class: delivery_class(&d.state),
            updated: c.time(d.updated_at),
            d,
        })
        .collect();
    let rows = channels
        .into_iter()
        .map(|ch| ChannelRow {
            summary: summary(&ch.config),
            ch,
        })
        .collect();
    let mut states = Opt::list([(String::new(), v.t("all").to_owned())], state);
    states.extend(Opt::coded_text("sent", v.lang, state));
    let mut f = fields(values, false, v.lang);
    if let Some(rest) = ui::place_errors(&mut f, errors) {
        c.err = Some(rest);
    }
    ui::render_status(
        status,
        &AlarmsPage {
            c,
            rows,
            deliveries,
            total,
            states,
            fields: f,
        },
    )
}

pub(super) async fn list(
    State(a): State<Service>,
    v: Visitor,
    Query(q): Query<ListQuery>,
) -> Response {
    let values = HashMap::from([("enabled", "on".to_owned())]);
    page(&a, &v, &q.state, &values, HashMap::new(), StatusCode::OK).await
}

/// The service input a form describes, or the field whose value is not understood.
fn input_of(values: &HashMap<&str, String>) -> Result<AlarmChannelInput, String> {
    let get = |k: &str| values.get(k).cloned().unwrap_or_default();
    let kind = get("kind").trim().to_owned();
    Ok(AlarmChannelInput {
        name: get("name").trim().to_owned(),
        config: config_of(&kind, values)?,
        kind,
        enabled: Some(matches!(get("enabled").as_str(), "on" | "true" | "1")),
    })
}

pub(super) async fn create(State(a): State<Service>, Posted(v, form): Posted) -> Response {
    let values = values_of_form(&form);
    let input = match input_of(&values) {
        Ok(i) => i,
        Err(field) => {
            let errors = HashMap::from([(field, v.t("bad_number").to_owned())]);
            let status = ErrorCode::InvalidInput.status();
            return page(&a, &v, "", &values, errors, status).await;
        }
    };
    match v.ops(&a).alarm_channel_create(input).await {
        Ok(_) => ui::see_other(&ui::with_ok("/alarms", "created")),
        Err(e) => {
            let (status, errors) = errors_of(&v, &e);
            page(&a, &v, "", &values, errors, status).await
        }
    }
}

fn form_page(
    v: &Visitor,
    id: i64,
    values: &HashMap<&str, String>,
    errors: HashMap<String, String>,
    status: StatusCode,
) -> Response {
    let mut c = v.ctx("alarm_channels");
    let mut f = fields(values, true, v.lang);
    if let Some(rest) = ui::place_errors(&mut f, errors) {
        c.err = Some(rest);
    }
    ui::render_status(status, &AlarmFormPage { c, id, fields: f })
}

pub(super) async fn edit_form(
    State(a): State<Service>,
    v: Visitor,
    Path(id): Path<i64>,
) -> Response {
    match a.alarms().channel_get(&v.principal, id).await {
        Ok(ch) => form_page(&v, id, &values_of_view(&ch), HashMap::new(), StatusCode::OK),
        Err(e) => v.error_page(e),
    }
}

pub(super) async fn update(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, form): Posted,
) -> Response {
    let values = values_of_form(&form);
    let input = match input_of(&values) {
        Ok(i) => i,
        Err(field) => {
            let errors = HashMap::from([(field, v.t("bad_number").to_owned())]);
            return form_page(&v, id, &values, errors, ErrorCode::InvalidInput.status());
        }
    };
    match v.ops(&a).alarm_channel_update(id, input).await {
        Ok(_) => ui::see_other(&ui::with_ok("/alarms", "saved")),
        Err(e) => {
            let (status, errors) = errors_of(&v, &e);
            form_page(&v, id, &values, errors, status)
        }
    }
}

pub(super) async fn delete(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, _): Posted,
) -> Response {
    match v.ops(&a).alarm_channel_delete(id).await {
        Ok(()) => ui::see_other(&ui::with_ok("/alarms", "deleted")),
        Err(e) => v.fail("/alarms", e),
    }
}

/// Sends a test message; the outcome comes back as the page's banner.
pub(super) async fn test(
    State(a): State<Service>,
    Path(id): Path<i64>,
    Posted(v, _): Posted,
) -> Response {
    match v.ops(&a).alarm_channel_test(id).await {
        Ok(r) if r.ok => ui::see_other(&ui::with_ok("/alarms", "test_sent")),
        Ok(r) => {
            let why = r.error.unwrap_or_default();
            let msg = format!("{} ({} ms): {why}", v.t("test_failed"), r.elapsed_ms);
            ui::see_other(&ui::with_err("/alarms", &msg))
        }
        Err(e) => v.fail("/alarms", e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&'static str, &str)]) -> HashMap<&'static str, String> {
        pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
    }

    #[test]
    fn config_has_only_the_keys_of_its_kind() {
        let v = values(&[
            ("url", "https://hooks.example/x"),
            ("secret", "s3"),
            ("host", "smtp.example"),
            ("to", "a@example.com"),
        ]);
        let c = config_of("webhook", &v).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c["url"], "https://hooks.example/x");
        assert_eq!(c["secret"], "s3");
        let c = config_of("slack", &v).unwrap();
        assert_eq!(c.keys().collect::<Vec<_>>(), ["url"]);
        assert!(config_of("pager", &v).unwrap().is_empty());
    }

    #[test]
    fn empty_secrets_are_left_out_so_the_stored_ones_stay() {
        let v = values(&[("url", ""), ("secret", "")]);
        assert!(config_of("dingtalk", &v).unwrap().is_empty());
        let v = values(&[
            ("host", " smtp.example "),
            ("port", "465"),
            ("tls", "tls"),
            ("user", ""),
            ("password", ""),
            ("from", "ops@example.com"),
            ("to", "a@example.com, b@example.com,"),
        ]);
        let c = config_of("email", &v).unwrap();
        assert_eq!(c["host"], "smtp.example");
        assert_eq!(c["port"], 465);
        assert_eq!(
            c["to"],
            serde_json::json!(["a@example.com", "b@example.com"])
        );
        assert!(!c.contains_key("user") && !c.contains_key("password"));
        let bad = values(&[("port", "smtp")]);
        assert_eq!(config_of("email", &bad), Err("port".to_owned()));
    }

    #[test]
    fn config_complaints_land_on_their_field() {
        assert_eq!(
            config_field("host: an email channel needs an SMTP host"),
            "host"
        );
        assert_eq!(
            config_field("url \"x\": relative URL without a base"),
            "url"
        );
        assert_eq!(config_field("missing field `url`"), "url");
        assert_eq!(config_field("unknown field `foo`"), "");
    }

    #[test]
    fn summary_lists_masked_settings_by_key() {
        let config = serde_json::json!({
            "url": "https://oapi.example/robot/***?access_token=***",
            "secret_set": true,
        });
        assert_eq!(
            summary(&config),
            "secret_set=true, url=https://oapi.example/robot/***?access_token=***"
        );
        let config = serde_json::json!({"to": ["a@x.org", "b@x.org"], "port": 587});
        assert_eq!(summary(&config), "port=587, to=a@x.org,b@x.org");
    }

    #[test]
    fn an_edit_form_never_holds_a_secret_or_url() {
        let ch = AlarmChannelView {
            id: 1,
            name: "ops".into(),
            kind: "webhook".into(),
            config: serde_json::json!({"url": "https://h/***", "secret_set": true}),
            enabled: true,
            created_at: 0,
            updated_at: 0,
        };
        let v = values_of_view(&ch);
        assert!(!v.contains_key("url") && !v.contains_key("secret"));
        assert_eq!(v["enabled"], "on");
        assert!(
            fields(&v, true, Lang::En)
                .iter()
                .all(|f| f.value.is_empty() || !["url", "secret", "password"].contains(&f.name))
        );
    }
}
