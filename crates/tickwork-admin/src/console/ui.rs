//! What every console page shares: the page context (language, user, CSRF token, flash
//! messages), form fields with inline errors, rendering, redirects, time formatting and the
//! embedded assets.

use std::collections::HashMap;

use askama::Template;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::i18n::{Code, Coded, Lang, text_codes};

/// The navigation: (href, i18n key, what an item needs: "" for everyone, "admin").
pub(super) const NAV: &[(&str, &str, &str)] = &[
    ("/", "dashboard", ""),
    ("/jobs", "jobs", ""),
    ("/runs", "runs", ""),
    ("/schedule", "heatmap", ""),
    ("/workflows", "workflows", ""),
    ("/groups", "groups", ""),
    ("/users", "users", "admin"),
    ("/tokens", "tokens", ""),
    ("/alarms", "alarm_channels", ""),
    ("/audit", "audit", "admin"),
];

/// What the layout of every signed-in page needs.
pub(super) struct Ctx {
    pub lang: Lang,
    pub username: String,
    pub role: &'static str,
    pub csrf: String,
    /// The active navigation item (an i18n key).
    pub nav: &'static str,
    /// The current path and query, where the language switch and actions come back to.
    pub here: String,
    pub ok: Option<&'static str>,
    pub err: Option<String>,
    pub is_admin: bool,
    /// False for viewers: every change control is hidden.
    pub can_write: bool,
    /// Whether the read-only banner is shown (viewers, except on the pages of what is theirs:
    /// password, API tokens).
    pub read_only_note: bool,
    pub tz: TimeZone,
}

impl Ctx {
    /// The text of an i18n key in the page's language.
    pub(super) fn t(&self, key: impl AsRef<str>) -> &'static str {
        self.lang.t(key.as_ref())
    }

    /// The navigation items this user sees.
    pub(super) fn nav_items(&self) -> Vec<(&'static str, &'static str)> {
        NAV.iter()
            .filter(|(_, _, need)| need.is_empty() || self.is_admin)
            .map(|(href, key, _)| (*href, *key))
            .collect()
    }

    /// Whether navigation item `key` is this page's.
    pub(super) fn is_nav(&self, key: impl AsRef<str>) -> bool {
        self.nav == key.as_ref()
    }

    /// The other language, for the switch.
    pub(super) fn other_lang(&self) -> (&'static str, &'static str) {
        match self.lang {
            Lang::En => ("zh", "中文"),
            Lang::Zh => ("en", "English"),
        }
    }

    /// The label of a code (a strategy, a type, a run state) in the page's language; pages
    /// show its code in the tooltip.
    pub(super) fn label(&self, c: impl Code) -> &'static str {
        self.lang.label(c)
    }

    /// The label of a text code of `kind` (an alarm delivery's state, a channel's kind).
    pub(super) fn label_of<'a>(&self, kind: &str, code: &'a str) -> &'a str {
        self.lang.label_of(kind, code)
    }

    /// An instant in the admin's default zone, to the second.
    pub(super) fn time(&self, ms: impl Instant) -> String {
        fmt_ms(ms.ms(), &self.tz)
    }

    /// The name of the zone [`Ctx::time`] writes in, for the headers of time columns.
    pub(super) fn zone(&self) -> &str {
        self.tz.iana_name().unwrap_or("local")
    }
}

/// An instant or none, as templates hand them over (by value or by reference).
pub(super) trait Instant {
    fn ms(&self) -> Option<i64>;
}

impl Instant for i64 {
    fn ms(&self) -> Option<i64> {
        Some(*self)
    }
}

impl Instant for Option<i64> {
    fn ms(&self) -> Option<i64> {
        *self
    }
}

impl<T: Instant> Instant for &T {
    fn ms(&self) -> Option<i64> {
        (**self).ms()
    }
}

/// `2026-11-21 14:03:05`, or `-` for none.
pub(super) fn fmt_ms(ms: Option<i64>, tz: &TimeZone) -> String {
    match ms.and_then(|ms| Timestamp::from_millisecond(ms).ok()) {
        Some(t) => t
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M:%S")
            .to_string(),
        None => "-".to_owned(),
    }
}

/// Reads a `datetime-local` value (`2026-11-21T14:03`, seconds optional) in `tz`.
pub(super) fn parse_local(s: &str, tz: &TimeZone) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let dt: jiff::civil::DateTime = s.parse().ok()?;
    Some(dt.to_zoned(tz.clone()).ok()?.timestamp().as_millisecond())
}

/// One choice of a `<select>`.
pub(super) struct Opt {
    pub value: String,
    pub label: String,
    pub selected: bool,
    /// The tooltip: a code's own spelling when the label is its label, else empty.
    pub title: String,
}

impl Opt {
    pub(super) fn list(
        items: impl IntoIterator<Item = (String, String)>,
        current: &str,
    ) -> Vec<Opt> {
        items
            .into_iter()
            .map(|(value, label)| Opt {
                selected: value == current,
                value,
                label,
                title: String::new(),
            })
            .collect()
    }

    /// Every value of `C`: its code the value (what the form posts), its label the text.
    pub(super) fn coded<C: Coded>(lang: Lang, current: &str) -> Vec<Opt> {
        Opt::labelled(C::all().iter().map(|c| c.kind_code()), lang, current)
    }

    /// Every code of text kind `kind`, as [`Opt::coded`] lists an enumeration's.
    pub(super) fn coded_text(kind: &'static str, lang: Lang, current: &str) -> Vec<Opt> {
        Opt::labelled(
            text_codes(kind).iter().map(|code| (kind, *code)),
            lang,
            current,
        )
    }

    fn labelled(
        codes: impl Iterator<Item = (&'static str, &'static str)>,
        lang: Lang,
        current: &str,
    ) -> Vec<Opt> {
        codes
            .map(|(kind, code)| Opt {
                value: code.to_owned(),
                label: lang.label_of(kind, code).to_owned(),
                selected: code == current,
                title: code.to_owned(),
            })
            .collect()
    }
}

/// One form field as the shared field template draws it.
pub(super) struct Field {
    pub name: &'static str,
    pub label: &'static str,
    /// `text`, `number`, `password`, `select`, `textarea`, `code`, `checkbox` or `checks` (a
    /// box per option, ticked when selected, all posted under the field's name).
    pub kind: &'static str,
    pub value: String,
    pub error: Option<String>,
    pub hint: &'static str,
    pub options: Vec<Opt>,
    /// Spans the whole form row.
    pub wide: bool,
}

impl Field {
    pub(super) fn new(name: &'static str, label: &'static str, kind: &'static str) -> Field {
        Field {
            name,
            label,
            kind,
            value: String::new(),
            error: None,
            hint: "",
            options: Vec::new(),
            wide: matches!(kind, "textarea" | "code" | "checks"),
        }
    }

    pub(super) fn value(mut self, v: impl Into<String>) -> Field {
        self.value = v.into();
        self
    }

    pub(super) fn hint(mut self, h: &'static str) -> Field {
        self.hint = h;
        self
    }

    pub(super) fn options(mut self, o: Vec<Opt>) -> Field {
        self.options = o;
        self
    }

    pub(super) fn checked(&self) -> bool {
        matches!(self.value.as_str(), "on" | "true" | "1")
    }
}

/// Puts errors on their fields; an error no field claims is returned for the page banner.
pub(super) fn place_errors(
    fields: &mut [Field],
    errors: HashMap<String, String>,
) -> Option<String> {
    let mut rest = Vec::new();
    for (name, msg) in errors {
        match fields.iter_mut().find(|f| f.name == name) {
            Some(f) => f.error = Some(msg),
            None => rest.push(msg),
        }
    }
    rest.sort();
    (!rest.is_empty()).then(|| rest.join("; "))
}

/// A submitted `application/x-www-form-urlencoded` form.
#[derive(Debug, Default)]
pub(super) struct Form(pub Vec<(String, String)>);

impl Form {
    pub(super) fn parse(body: &[u8]) -> Form {
        Form(serde_urlencoded::from_bytes(body).unwrap_or_default())
    }

    /// The first value of `name`, or "".
    pub(super) fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Every value of `name` (ticked boxes of one name), in order.
    pub(super) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Renders a page; a template failure is logged and answered with a plain 500.
pub(super) fn render<T: Template>(t: &T) -> Response {
    render_status(StatusCode::OK, t)
}

pub(super) fn render_status<T: Template>(status: StatusCode, t: &T) -> Response {
    match t.render() {
        Ok(body) => (status, Html(body)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "console template failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "page could not be drawn").into_response()
        }
    }
}

/// A 303 to a path of ours (anything else goes to the dashboard: no open redirects).
pub(super) fn see_other(to: &str) -> Response {
    Redirect::to(safe_path(to)).into_response()
}

/// `to` if it is a path of this site, else `/`: it starts with one `/` and holds no `\\`
/// (browsers read it as `/`), no white space and no control character (browsers drop tabs
/// and line breaks, so `/<tab>/evil.example` would become `//evil.example`).
pub(super) fn safe_path(to: &str) -> &str {
    let local = to.starts_with('/')
        && !to.starts_with("//")
        && !to.contains('\\')
        && !to.chars().any(|c| c.is_whitespace() || c.is_control());
    if local { to } else { "/" }
}

/// `path` with `ok=<key>` added to its query (a translated success banner).
pub(super) fn with_ok(path: &str, key: &str) -> String {
    with_param(path, "ok", key)
}

/// `path` with `err=<message>` added to its query (an error banner).
pub(super) fn with_err(path: &str, msg: &str) -> String {
    with_param(path, "err", msg)
}

fn with_param(path: &str, name: &str, value: &str) -> String {
    let path = safe_path(path);
    // Drop an older banner of either kind so they do not pile up.
    let (base, query) = path.split_once('?').unwrap_or((path, ""));
    let mut pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    pairs.retain(|(k, _)| k != "ok" && k != "err");
    pairs.push((name.to_owned(), value.to_owned()));
    format!(
        "{base}?{}",
        serde_urlencoded::to_string(&pairs).unwrap_or_default()
    )
}

/// Our CSS and script, compiled into the binary (also in debug builds).
#[derive(rust_embed::Embed)]
#[folder = "assets/"]
struct Assets;

/// The file name of the script editor's bundle (CodeMirror, built by `build.rs` with npm and
/// esbuild): named by a hash of its content, so it can be cached for good.
pub(super) const EDITOR_JS: &str = env!("TICKWORK_EDITOR_JS");
static EDITOR_BUNDLE: &[u8] = include_bytes!(env!("TICKWORK_EDITOR_JS_PATH"));

pub(super) async fn asset(Path(file): Path<String>) -> Response {
    if file == EDITOR_JS {
        return (
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            EDITOR_BUNDLE,
        )
            .into_response();
    }
    let Some(f) = Assets::get(&file) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let kind = match file.rsplit('.').next() {
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        f.data.into_owned(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banners_replace_each_other_and_stay_local() {
        assert_eq!(with_ok("/jobs?text=a", "saved"), "/jobs?text=a&ok=saved");
        assert_eq!(with_err("/jobs?ok=saved", "no"), "/jobs?err=no");
        assert_eq!(with_ok("https://evil.example/", "x"), "/?ok=x");
        assert_eq!(safe_path("//evil.example"), "/");
    }

    #[test]
    fn local_times_round_trip() {
        let tz = TimeZone::get("Asia/Shanghai").unwrap();
        let ms = parse_local("2026-11-21T14:03", &tz).unwrap();
        assert_eq!(fmt_ms(Some(ms), &tz), "2026-11-21 14:03:00");
        assert_eq!(parse_local("", &tz), None);
    }

    #[test]
    fn assets_are_embedded() {
        assert!(Assets::get("console.css").is_some());
        assert!(Assets::get("console.js").is_some());
        assert!(EDITOR_JS.starts_with("editor-") && EDITOR_JS.ends_with(".js"));
        assert!(EDITOR_BUNDLE.len() > 10_000, "the editor bundle is built");
    }
}
