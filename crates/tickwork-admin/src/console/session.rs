//! Signing in and out, the session every page needs, CSRF checks of forms, the language
//! choice, and how errors of the service layer are shown.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use askama::Template;
use axum::body::Bytes;
use axum::extract::{
    ConnectInfo, FromRequest, FromRequestParts, OptionalFromRequestParts, Request, State,
};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::auth::{
    self, LOGIN_CSRF_COOKIE, LOGINS_BUSY, Principal, Role, SESSION_COOKIE, SessionInfo, check_csrf,
    check_login_csrf,
};
use super::i18n::Lang;
use super::ops::Ops;
use super::ui::{self, Ctx, Form};
use crate::{Error, ErrorCode, Service};

/// The cookie of an explicit language choice.
const LANG_COOKIE: &str = "lang";

/// The value of cookie `name`, if sent.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The page language: an explicit switch (cookie), else the user's locale, else the
/// browser's `Accept-Language`, else English.
fn choose_lang(headers: &HeaderMap, locale: Option<&str>) -> Lang {
    cookie(headers, LANG_COOKIE)
        .and_then(Lang::parse)
        .or_else(|| locale.and_then(Lang::parse))
        .or_else(|| Lang::from_accept_language(headers))
        .unwrap_or(Lang::En)
}

/// The signed-in person behind a request. Extracting it from a request without a valid
/// session answers with a redirect to the login page.
pub(super) struct Visitor {
    pub principal: Principal,
    session: SessionInfo,
    session_id: String,
    pub lang: Lang,
    pub here: String,
    ok: Option<&'static str>,
    err: Option<String>,
    tz: jiff::tz::TimeZone,
}

impl FromRequestParts<Service> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, admin: &Service) -> Result<Self, Response> {
        let here = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".to_owned());
        let login = || {
            let next = serde_urlencoded::to_string([("next", here.as_str())]).unwrap_or_default();
            ui::see_other(&format!("/login?{next}"))
        };
        let Some(sid) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(login());
        };
        let info = match admin.auth().session(sid).await {
            Ok(Some(info)) => info,
            Ok(None) => return Err(login()),
            Err(e) => {
                tracing::error!(error = %e, "console: session lookup failed");
                return Err((StatusCode::SERVICE_UNAVAILABLE, "try again").into_response());
            }
        };
        let lang = choose_lang(&parts.headers, info.principal.locale.as_deref());
        // Banners after a redirect: `ok` is an i18n key (only known keys are shown), `err`
        // a message (escaped by the templates like everything else).
        let query: Vec<(String, String)> =
            serde_urlencoded::from_str(parts.uri.query().unwrap_or("")).unwrap_or_default();
        let ok = query
            .iter()
            .find(|(k, _)| k == "ok")
            .map(|(_, v)| lang.t(v))
            .filter(|t| *t != "??");
        let err = query
            .iter()
            .find(|(k, _)| k == "err")
            .map(|(_, v)| v.chars().take(500).collect());
        let tz = jiff::tz::TimeZone::get(&admin.config().default_time_zone)
            .unwrap_or(jiff::tz::TimeZone::UTC);
        Ok(Visitor {
            principal: info.principal.clone(),
            session: info,
            session_id: sid.to_owned(),
            lang,
            here,
            ok,
            err,
            tz,
        })
    }
}

impl OptionalFromRequestParts<Service> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        admin: &Service,
    ) -> Result<Option<Self>, Response> {
        Ok(
            <Visitor as FromRequestParts<Service>>::from_request_parts(parts, admin)
                .await
                .ok(),
        )
    }
}

/// A form posted by the signed-in person, its CSRF token checked: without a session the
/// answer is a redirect to the login page, with a bad token a page that says so; either way
/// nothing happens.
pub(super) struct Posted(pub Visitor, pub Form);

impl FromRequest<Service> for Posted {
    type Rejection = Response;

    async fn from_request(req: Request, admin: &Service) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let v =
            <Visitor as FromRequestParts<Service>>::from_request_parts(&mut parts, admin).await?;
        let body = Bytes::from_request(Request::from_parts(parts, body), admin)
            .await
            .map_err(IntoResponse::into_response)?;
        let form = v.form(&body).map_err(|res| *res)?;
        Ok(Posted(v, form))
    }
}

impl Visitor {
    /// The layout context of a page under navigation item `nav`.
    pub(super) fn ctx(&self, nav: &'static str) -> Ctx {
        let p = &self.principal;
        Ctx {
            lang: self.lang,
            username: p.username.clone(),
            role: role_key(p.role),
            csrf: self.session.csrf_token.clone(),
            nav,
            here: self.here.clone(),
            ok: self.ok,
            err: self.err.clone(),
            is_admin: p.is_admin(),
            can_write: p.role != Role::Viewer,
            read_only_note: p.role == Role::Viewer,
            tz: self.tz.clone(),
        }
    }

    /// The service layer, acting as this person.
    pub(super) fn ops<'a>(&'a self, admin: &'a Service) -> Ops<'a> {
        Ops {
            a: admin,
            p: &self.principal,
        }
    }

    pub(super) fn tz(&self) -> &jiff::tz::TimeZone {
        &self.tz
    }

    pub(super) fn t(&self, key: &str) -> &'static str {
        self.lang.t(key)
    }

    /// Whether the controls of group `group_id` are shown (the service checks again).
    pub(super) fn can_change(&self, group_id: i64) -> bool {
        self.principal.can_change_group(group_id)
    }

    /// Reads a submitted form and checks its CSRF token; a bad token is answered with a
    /// page that says so, and nothing happens.
    fn form(&self, body: &Bytes) -> Result<Form, Box<Response>> {
        let form = Form::parse(body);
        let presented = form.get("_csrf");
        if check_csrf(&self.session, presented).is_ok() {
            Ok(form)
        } else {
            Err(Box::new(self.message(
                StatusCode::FORBIDDEN,
                self.t("csrf_failed"),
                "/",
            )))
        }
    }

    /// A page with one message and a way back.
    pub(super) fn message(&self, status: StatusCode, text: &str, back: &str) -> Response {
        let page = MessagePage {
            c: self.ctx(""),
            text: text.to_owned(),
            back: ui::safe_path(back).to_owned(),
        };
        ui::render_status(status, &page)
    }

    /// How a failed service call is shown when there is no form to re-render: the page the
    /// action came from, with the message in a banner. Forbidden actions say so plainly.
    pub(super) fn fail(&self, back: &str, e: Error) -> Response {
        ui::see_other(&ui::with_err(back, &self.error_text(&e)))
    }

    /// The message of a service error for people; an internal cause is logged, not shown.
    pub(super) fn error_text(&self, e: &Error) -> String {
        if e.code() == ErrorCode::Forbidden {
            return self.t("forbidden").to_owned();
        }
        e.client_message("console")
            .unwrap_or_else(|| self.t("error").to_owned())
    }

    /// A service error on a form sent back to be corrected: the answer's status, and the
    /// messages by field (an input error on the field it names, the rest under "" for the
    /// page's banner).
    pub(super) fn form_errors(&self, e: &Error) -> (StatusCode, HashMap<String, String>) {
        let errors = match e {
            Error::Invalid {
                field: Some(field),
                message,
            } => HashMap::from([(field.clone(), message.clone())]),
            other => HashMap::from([(String::new(), self.error_text(other))]),
        };
        (e.code().status(), errors)
    }

    /// The error page of a failure to show something: 404 for a missing thing, and so on
    /// by the error's code.
    pub(super) fn error_page(&self, e: Error) -> Response {
        self.message(e.code().status(), &self.error_text(&e), "/")
    }
}

/// The i18n key of a role.
pub(super) fn role_key(role: Role) -> &'static str {
    match role {
        Role::Admin => "admin",
        Role::Operator => "operator",
        Role::Viewer => "viewer",
    }
}

/// A page with one message.
#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage {
    c: Ctx,
    text: String,
    back: String,
}

// ---- login, logout, language ----

/// The notes the login page shows after a redirect (i18n keys).
const LOGIN_NOTES: &[&str] = &["password_changed"];

/// The login page.
#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    lang: Lang,
    username: String,
    next: String,
    /// The form's CSRF token, also in the [`LOGIN_CSRF_COOKIE`] cookie (double submit).
    csrf: String,
    error: Option<&'static str>,
    /// A note after a redirect here (an i18n key's text): the password was changed.
    notice: Option<&'static str>,
}

#[derive(serde::Deserialize, Default)]
pub(super) struct LoginQuery {
    #[serde(default)]
    next: String,
    /// A note to show: one of [`LOGIN_NOTES`].
    #[serde(default)]
    ok: String,
}

pub(super) async fn login_form(
    State(admin): State<Service>,
    headers: HeaderMap,
    visitor: Option<Visitor>,
    axum::extract::Query(q): axum::extract::Query<LoginQuery>,
) -> Response {
    if visitor.is_some() {
        return ui::see_other(&q.next);
    }
    let next = ui::safe_path(&q.next).to_owned();
    let page = LoginPage::new(&headers, String::new(), next).notice(&q.ok);
    login_page(&admin, &headers, StatusCode::OK, page)
}

impl LoginPage {
    fn t(&self, key: &str) -> &'static str {
        self.lang.t(key)
    }

    /// The page in the browser's language, its CSRF token still to be chosen.
    fn new(headers: &HeaderMap, username: String, next: String) -> LoginPage {
        LoginPage {
            lang: choose_lang(headers, None),
            username,
            next,
            csrf: String::new(),
            error: None,
            notice: None,
        }
    }

    fn error(mut self, key: &str) -> LoginPage {
        self.error = Some(self.lang.t(key));
        self
    }

    /// A note by i18n key; only the notes of this page are shown, so a link cannot make
    /// the login page say anything else.
    fn notice(mut self, key: &str) -> LoginPage {
        self.notice = LOGIN_NOTES.contains(&key).then(|| self.lang.t(key));
        self
    }
}

/// The login page with its form's CSRF token: the browser's own when its cookie holds a
/// well-formed one, else a new one, set in the cookie.
fn login_page(
    admin: &Service,
    headers: &HeaderMap,
    status: StatusCode,
    mut page: LoginPage,
) -> Response {
    let kept = cookie(headers, LOGIN_CSRF_COOKIE)
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned);
    let csrf = match kept.map_or_else(|| auth::random_hex(32), Ok) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "console: no login csrf token");
            return (StatusCode::INTERNAL_SERVER_ERROR, "try again").into_response();
        }
    };
    let cookie = format!(
        "{LOGIN_CSRF_COOKIE}={csrf}; Path=/login; HttpOnly; SameSite=Strict; Max-Age=86400{}",
        if admin.auth().config().secure_cookie {
            "; Secure"
        } else {
            ""
        }
    );
    page.csrf = csrf;
    let mut res = ui::render_status(status, &page);
    if let Ok(v) = cookie.parse() {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

/// Whether a form was posted from our own pages: its `Origin` (or, without one, its
/// `Referer`) names the host it was sent to (`Host`, or `X-Forwarded-Host` behind a proxy:
/// a browser does not let a foreign page set either). Clients that send neither are not
/// browsers (those send `Origin` with every form post); the CSRF cookie still applies.
fn posted_from_this_site(headers: &HeaderMap) -> bool {
    let name = if headers.contains_key(header::ORIGIN) {
        header::ORIGIN
    } else {
        header::REFERER
    };
    // Every value must name this site: a second header cannot vouch for a foreign first.
    headers
        .get_all(&name)
        .iter()
        .all(|source| names_this_host(headers, source))
}

/// Whether the URL `source` has the host (and port) this request was sent to.
fn names_this_host(headers: &HeaderMap, source: &header::HeaderValue) -> bool {
    let Some(url) = source.to_str().ok().and_then(|s| url::Url::parse(s).ok()) else {
        return false;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return false;
    };
    [header::HOST.as_str(), "x-forwarded-host"]
        .iter()
        .filter_map(|name| headers.get(*name)?.to_str().ok())
        .filter_map(|v| v.split(',').next())
        .map(str::trim)
        .any(|authority| {
            let (h, p) = match authority.rsplit_once(':') {
                Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    (h, p.parse::<u16>().ok())
                }
                _ => (authority, Some(port)),
            };
            h.eq_ignore_ascii_case(host) && p == Some(port)
        })
}

/// Largest login form.
const LOGIN_BODY_LIMIT: usize = 16 * 1024;

pub(super) async fn login_submit(State(admin): State<Service>, req: Request) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().cloned();
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    let body = axum::body::to_bytes(body, LOGIN_BODY_LIMIT)
        .await
        .unwrap_or_default();
    let form = Form::parse(&body);
    let username = form.get("username").trim().to_owned();
    let next = ui::safe_path(form.get("next")).to_owned();
    let ip = peer
        .map(|ConnectInfo(a)| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    // Login CSRF: a foreign page must not sign a browser in (as the attacker's account).
    let refused = if !posted_from_this_site(&headers) {
        Some("login_cross_site")
    } else if check_login_csrf(
        cookie(&headers, LOGIN_CSRF_COOKIE).unwrap_or(""),
        form.get("_csrf"),
    )
    .is_err()
    {
        Some("csrf_failed")
    } else {
        None
    };
    if let Some(reason) = refused {
        tracing::warn!(ip = %ip, reason, "login refused: not posted by our login form");
        let page = LoginPage::new(&headers, username, next).error(reason);
        return login_page(&admin, &headers, StatusCode::FORBIDDEN, page);
    }
    match admin
        .auth()
        .login(&username, form.get("password"), ip)
        .await
    {
        Ok(session) => {
            let cookie = admin.auth().session_cookie(&session);
            let mut res = ui::see_other(&next);
            if let Ok(v) = cookie.parse() {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res
        }
        Err(e) => {
            let error = match &e {
                Error::Unauthorized(_) => "bad_credentials",
                // The only input a login checks: the password's length.
                Error::Invalid { .. } => "password_too_long",
                Error::RateLimited(m) if m == LOGINS_BUSY => "login_busy",
                Error::RateLimited(_) => "login_slow_down",
                other => {
                    if let Some(m) = other.client_message("console login") {
                        tracing::error!(error = %m, "console: login failed");
                    }
                    "error"
                }
            };
            let page = LoginPage::new(&headers, username, next).error(error);
            login_page(&admin, &headers, e.code().status(), page)
        }
    }
}

pub(super) async fn logout(State(admin): State<Service>, Posted(visitor, _): Posted) -> Response {
    if let Err(e) = admin.auth().logout(&visitor.session_id).await {
        tracing::error!(error = %e, "console: logout failed");
    }
    let mut res = ui::see_other("/login");
    if let Ok(v) = admin.auth().clear_session_cookie().parse() {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

#[derive(serde::Deserialize)]
pub(super) struct LangQuery {
    to: String,
    #[serde(default)]
    back: String,
}

/// Switches the language (a cookie only: changes nothing on the server).
pub(super) async fn switch_lang(
    axum::extract::Query(q): axum::extract::Query<LangQuery>,
) -> Response {
    let lang = Lang::parse(&q.to).unwrap_or(Lang::En);
    let mut res = ui::see_other(&q.back);
    if let Ok(v) = format!(
        "{LANG_COOKIE}={}; SameSite=Lax; Path=/; Max-Age=31536000",
        lang.code()
    )
    .parse()
    {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}
