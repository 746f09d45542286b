//! Signing in to the console: a bearer token (static or an OIDC JWT) given
//! once on the sign-in page becomes a session cookie; every page after that
//! authenticates by the cookie, and every action also by a CSRF token.
//!
//! The cookie is stateless and signed (HMAC-SHA256 under a key derived from
//! the deployment's active payload key, [`Keyring::derive`]), so every process
//! of a deployment accepts it and a restart keeps it: `v2.<kind>.<who>.<exp>.<nonce>.<mac>`
//! (the nonce random, so that each sign-in is a session of its own),
//! where `kind` is `s` (a static token, `who` an HMAC of its digest — the
//! principal is found again among the configured tokens, so removing a token
//! ends its sessions) or `j` (a JWT, `who` its subject in hex — the roles are
//! `access.grants`' at each request, the expiry at most the JWT's). It is
//! `HttpOnly`, `SameSite=Strict`, `Path=/console` and `Secure` unless the
//! console is reached on a loopback address. The CSRF token is an HMAC of the
//! cookie's MAC: every form carries it, every POST checks it. Nothing of the
//! token itself is kept or logged. Signing out records the session's id (an
//! HMAC of the cookie's MAC) in the database until the cookie's expiry, and
//! every page looks it up: the cookie opens nothing after that, on any
//! process, even replayed.
//!
//! [`Keyring::derive`]: coordinator_seal::Keyring::derive

use std::sync::Arc;

use axum::Form;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use hmac::{KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::{Page, page};
use crate::api::ApiState;
use crate::auth::access::{Principal, SignedIn};

/// The cookie's name.
const COOKIE: &str = "coordinator_session";
/// How long a session lasts at most.
const SESSION_SECONDS: i64 = 8 * 3600;

/// The signed-in caller of a console page.
#[derive(Clone)]
pub(crate) struct Viewer {
    /// Who, with their roles (as the API's `Caller`).
    pub(crate) principal: Arc<Principal>,
    /// The token every form of this session carries.
    pub(crate) csrf: String,
    /// The session's id, as a sign-out records it (an HMAC of the cookie's signature).
    session: String,
    /// When the cookie expires (s since the epoch).
    expires: i64,
}

impl std::fmt::Debug for Viewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Viewer").field("subject", &self.principal.subject()).finish_non_exhaustive()
    }
}

impl FromRequestParts<ApiState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Viewer, Response> {
        let key = state.engine.console_key();
        let mut viewer = cookie(&parts.headers).and_then(|value| open(state, &key, value));
        if let Some(open) = &viewer {
            // Signing out ends a session on every process: it is looked up, not only verified.
            match state.engine.store.console_session_ended(&open.session).await {
                Ok(false) => {}
                Ok(true) => viewer = None,
                Err(e) => {
                    tracing::warn!(error = %e, "console: the session could not be checked");
                    return Err(super::problem(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "The database does not answer, so this session cannot be checked. Try again shortly.",
                    ));
                }
            }
        }
        match viewer {
            Some(viewer) => {
                if let Some(slot) = parts.extensions.get::<crate::api::SubjectSlot>() {
                    slot.set(viewer.principal.subject());
                }
                Ok(viewer)
            }
            None => {
                let next = parts.uri.path_and_query().map_or("/console/runs", |p| p.as_str());
                let target = format!("/console/sign-in?next={}", percent(next));
                Err(Redirect::to(&target).into_response())
            }
        }
    }
}

impl Viewer {
    /// Refuses a form whose CSRF token is not this session's (`403`).
    pub(crate) fn check(&self, presented: &str) -> Result<(), Response> {
        let same: bool = self.csrf.as_bytes().ct_eq(presented.as_bytes()).into();
        if same {
            Ok(())
        } else {
            Err(super::problem(
                StatusCode::FORBIDDEN,
                "The form is not from this session (its CSRF token does not match): reload the page and send it again.",
            ))
        }
    }
}

/// The session cookie's value, if the request carries one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn mac(key: &[u8; 32], parts: &[&str]) -> String {
    // HMAC takes keys of every length.
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        unreachable!("HMAC-SHA256 accepts keys of every length")
    };
    for part in parts {
        mac.update(part.as_bytes());
        mac.update(b"|");
    }
    hex::encode(mac.finalize().into_bytes())
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// What identifies a static token in a cookie: an HMAC of its digest (not the digest).
fn token_id(key: &[u8; 32], digest: &[u8; 32]) -> String {
    mac(key, &["static-token", &hex::encode(digest)])
}

/// The cookie for a sign-in that happened now, made unique by `nonce` (random).
fn seal(key: &[u8; 32], signed_in: &SignedIn, now: i64, nonce: &[u8; 16]) -> (String, i64) {
    let (kind, who, expires) = match signed_in {
        SignedIn::Static(digest) => ("s", token_id(key, digest), now + SESSION_SECONDS),
        SignedIn::Jwt { subject, expires_at } => (
            "j",
            hex::encode(subject.as_bytes()),
            expires_at.map_or(now + SESSION_SECONDS, |e| e.min(now + SESSION_SECONDS)),
        ),
    };
    let (expires_text, nonce) = (expires.to_string(), hex::encode(nonce));
    let signature = mac(key, &["v2", kind, &who, &expires_text, &nonce]);
    (format!("v2.{kind}.{who}.{expires_text}.{nonce}.{signature}"), expires)
}

/// The viewer a cookie names, if it is genuine, unexpired and its principal still exists.
fn open(state: &ApiState, key: &[u8; 32], value: &str) -> Option<Viewer> {
    let mut parts = value.split('.');
    let (version, kind, who, expires, nonce, signature) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "v2" || parts.next().is_some() {
        return None;
    }
    let expected = mac(key, &["v2", kind, who, expires, nonce]);
    let genuine: bool = expected.as_bytes().ct_eq(signature.as_bytes()).into();
    if !genuine || expires.parse::<i64>().ok()? <= now_seconds() {
        return None;
    }
    let principal = match kind {
        "s" => state.access.static_principal(|digest| {
            let same: bool = token_id(key, digest).as_bytes().ct_eq(who.as_bytes()).into();
            same
        })?,
        "j" => state.access.jwt_principal(&String::from_utf8(unhex(who)?).ok()?),
        _ => return None,
    };
    let session = mac(key, &["session", signature]);
    Some(Viewer { principal, csrf: mac(key, &["csrf", signature]), session, expires: expires.parse().ok()? })
}

fn now_seconds() -> i64 {
    crate::engine::now_ms().div_euclid(1000)
}

/// A path for `?next=`, percent-encoded.
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Only a console path may be a sign-in's destination (no open redirect).
fn destination(next: Option<&str>) -> &str {
    match next {
        Some(next) if next.starts_with("/console/") && !next.starts_with("//") && !next.contains('\\') => next,
        _ => "/console/runs",
    }
}

/// Whether the request came to a loopback address (the cookie may then go without `Secure`).
fn loopback(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let name = host
        .rsplit_once(':')
        .map_or(host, |(name, port)| if port.chars().all(|c| c.is_ascii_digit()) { name } else { host });
    matches!(name, "localhost" | "127.0.0.1" | "[::1]") || name.starts_with("127.")
}

/// `GET /console/sign-in`.
#[derive(Debug, Deserialize)]
pub(super) struct SignInQuery {
    next: Option<String>,
}

#[derive(askama::Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage<'a> {
    next: &'a str,
    problem: Option<&'a str>,
}

pub(super) async fn form(Query(query): Query<SignInQuery>) -> Response {
    page(&SignInPage { next: destination(query.next.as_deref()), problem: None }, StatusCode::OK)
}

/// `POST /console/sign-in` body.
#[derive(Deserialize)]
pub(super) struct SignInForm {
    token: String,
    next: Option<String>,
}

pub(super) async fn sign_in(
    State(state): State<ApiState>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let next = destination(form.next.as_deref()).to_owned();
    let token = form.token.trim();
    let refused = |problem: &str| page(&SignInPage { next: &next, problem: Some(problem) }, StatusCode::UNAUTHORIZED);
    if token.is_empty() {
        return refused("Paste a bearer token: a static token of this deployment or an OIDC token.");
    }
    let (_, signed_in) = match state.access.sign_in(token).await {
        Ok(signed_in) => signed_in,
        Err(e) => return refused(&format!("That token does not sign in: {e}.")),
    };
    let key = state.engine.console_key();
    let now = now_seconds();
    let mut nonce = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut nonce) {
        tracing::error!(error = %e, "console: no randomness for a session");
        return refused("The service could not start a session (no randomness on its host); try again.");
    }
    let (value, expires) = seal(&key, &signed_in, now, &nonce);
    let secure = if loopback(&headers) { "" } else { "; Secure" };
    let cookie =
        format!("{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{secure}", expires - now);
    let mut response = Redirect::to(&next).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /console/sign-out` body.
#[derive(Deserialize)]
pub(super) struct SignOutForm {
    #[serde(default)]
    csrf: String,
}

pub(super) async fn sign_out(State(state): State<ApiState>, viewer: Viewer, Form(form): Form<SignOutForm>) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    // Recorded first: the cookie then opens nothing, on any process, even if the browser keeps it.
    let ended = state.engine.store.end_console_session(&viewer.session, viewer.expires * 1000, now_seconds() * 1000);
    if let Err(e) = ended.await {
        tracing::warn!(error = %e, "console: a sign-out could not be recorded");
        return super::problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "The database does not answer, so signing out could not be recorded and the session still holds. \
             Try again shortly.",
        );
    }
    let mut response = Redirect::to("/console/sign-in").into_response();
    let expired = format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

impl Page for SignInPage<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_console_paths_are_destinations() {
        assert_eq!(destination(Some("/console/runs?state=attention")), "/console/runs?state=attention");
        for bad in ["https://evil.example/", "//evil.example", "/v1/runs", "/console\\..", ""] {
            assert_eq!(destination(Some(bad)), "/console/runs", "{bad}");
        }
        assert_eq!(destination(None), "/console/runs");
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        let with = |host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap_or(HeaderValue::from_static("x")));
            loopback(&h)
        };
        assert!(with("127.0.0.1:7400") && with("localhost:7400") && with("[::1]:7400") && with("localhost"));
        assert!(!with("coordinator.example:443") && !with("10.0.0.1:7400"));
    }

    #[test]
    fn a_cookie_names_its_kind_and_expiry_and_hides_the_token() {
        let key = [7u8; 32];
        let digest = [9u8; 32];
        let (value, expires) = seal(&key, &SignedIn::Static(digest), 1000, &[1; 16]);
        assert_eq!(expires, 1000 + SESSION_SECONDS);
        assert!(value.starts_with("v2.s.") && !value.contains(&hex::encode(digest)), "{value}");
        let (again, _) = seal(&key, &SignedIn::Static(digest), 1000, &[2; 16]);
        assert_ne!(value, again, "two sign-ins in one second are two sessions (one can end alone)");
        let (jwt, expires) =
            seal(&key, &SignedIn::Jwt { subject: "a.b".into(), expires_at: Some(1500) }, 1000, &[1; 16]);
        assert_eq!(expires, 1500, "never longer than the JWT");
        assert_eq!(jwt.split('.').count(), 6, "the subject is hex, so its dots do not split the cookie");
    }
}
