//! The simulated OAuth 2.0 token endpoint (client-credentials grant, RFC 6749
//! §4.4) and the bearer check every product endpoint makes.
//!
//! `POST {sim}/token` with a form body `grant_type=client_credentials`, and the
//! client's credentials either as `client_id`/`client_secret` form fields
//! (`client_secret_post`) or as HTTP Basic (`client_secret_basic`). It answers
//! `{"access_token", "token_type": "Bearer", "expires_in"}`. Tokens are opaque,
//! bound to the client and optionally narrowed by `scope` (space-separated
//! product names); a client may be limited to some products. This is a test
//! double, not a security boundary: tokens are unpredictable enough for tests,
//! nothing more. A client registered with a public key may instead
//! authenticate with `private_key_jwt` (RFC 7523): a `client_assertion` JWT
//! whose `kid` names its key, `iss` and `sub` its id, `aud` this endpoint's
//! URL, with an unexpired `exp` and a `jti` never seen before (a replayed
//! assertion is refused).

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, OriginalUri, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::json;

use crate::error::ApiError;

/// A client the token endpoint accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// `client_id`.
    pub id: String,
    /// `client_secret`.
    pub secret: String,
    /// The products its tokens are valid for; `None` for every product.
    pub products: Option<BTreeSet<String>>,
    /// `private_key_jwt`: the key id and PEM public key its assertions are verified with.
    pub assertion_key: Option<(String, String)>,
}

impl Client {
    /// A client whose tokens are valid for every product.
    pub fn new(id: impl Into<String>, secret: impl Into<String>) -> Self {
        Client { id: id.into(), secret: secret.into(), products: None, assertion_key: None }
    }

    /// A client that authenticates only with `private_key_jwt`, verified with this PEM public key.
    pub fn with_assertion_key(id: impl Into<String>, key_id: impl Into<String>, public_pem: impl Into<String>) -> Self {
        Client {
            id: id.into(),
            secret: String::new(),
            products: None,
            assertion_key: Some((key_id.into(), public_pem.into())),
        }
    }
}

/// Why the token endpoint refuses (RFC 6749 §5.2 error codes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// `400 invalid_request`: not a form, or a required parameter is missing.
    #[error("the request is not a valid client-credentials token request")]
    InvalidRequest,
    /// `401 invalid_client`: unknown client or wrong secret.
    #[error("unknown client or wrong secret")]
    InvalidClient,
    /// `400 unsupported_grant_type`: anything but `client_credentials`.
    #[error("only grant_type=client_credentials is supported")]
    UnsupportedGrantType,
    /// `400 invalid_scope`: a scope names a product the client may not use.
    #[error("the scope names a product this client may not use")]
    InvalidScope,
}

impl IntoResponse for TokenError {
    fn into_response(self) -> Response {
        let (status, code) = match self {
            TokenError::InvalidRequest => (StatusCode::BAD_REQUEST, "invalid_request"),
            TokenError::InvalidClient => (StatusCode::UNAUTHORIZED, "invalid_client"),
            TokenError::UnsupportedGrantType => (StatusCode::BAD_REQUEST, "unsupported_grant_type"),
            TokenError::InvalidScope => (StatusCode::BAD_REQUEST, "invalid_scope"),
        };
        (status, Json(json!({"error": code, "error_description": self.to_string()}))).into_response()
    }
}

/// A token issued by the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The opaque bearer token.
    pub access_token: String,
    /// Its lifetime.
    pub expires_in: Duration,
}

#[derive(Debug)]
struct Grant {
    client: String,
    products: Option<BTreeSet<String>>,
    expires_at: Instant,
}

#[derive(Debug)]
struct TokenState {
    clients: BTreeMap<String, Client>,
    /// Assertion ids seen and not yet forgotten.
    seen_jti: HashSet<String>,
    /// The same ids by expiry, so that forgetting the expired ones reads only those.
    jti_expiry: BTreeSet<(u64, String)>,
    grants: HashMap<String, Grant>,
    /// The grants' tokens in the order issued, which is the order they expire
    /// in (one lifetime for all): forgetting the expired ones pops the front
    /// instead of reading every grant on every issuance.
    grant_expiry: VecDeque<(Instant, String)>,
    issued: u64,
}

impl TokenState {
    /// Forgets the grants that expired by `now` (the front of `grant_expiry`).
    fn forget_grants(&mut self, now: Instant) {
        while let Some((expires_at, _)) = self.grant_expiry.front() {
            if *expires_at > now {
                break;
            }
            if let Some((_, token)) = self.grant_expiry.pop_front() {
                self.grants.remove(&token);
            }
        }
    }

    /// Forgets the assertion ids that stopped being valid a minute before `now` (seconds).
    fn forget_assertions(&mut self, now: u64) {
        while let Some((exp, _)) = self.jti_expiry.first() {
            if *exp + 60 >= now {
                break;
            }
            if let Some((_, jti)) = self.jti_expiry.pop_first() {
                self.seen_jti.remove(&jti);
            }
        }
    }
}

/// The token issuer and verifier shared by the token endpoint and every product.
#[derive(Debug, Clone)]
pub struct Tokens {
    state: Arc<Mutex<TokenState>>,
    ttl: Duration,
    random: RandomState,
}

impl Tokens {
    /// An issuer accepting `clients`, whose tokens live for `ttl`.
    pub fn new(clients: impl IntoIterator<Item = Client>, ttl: Duration) -> Self {
        let clients = clients.into_iter().map(|c| (c.id.clone(), c)).collect();
        let state = TokenState {
            clients,
            seen_jti: HashSet::new(),
            jti_expiry: BTreeSet::new(),
            grants: HashMap::new(),
            grant_expiry: VecDeque::new(),
            issued: 0,
        };
        Tokens { state: Arc::new(Mutex::new(state)), ttl, random: RandomState::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TokenState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Issues a token to a client that proves its secret; `scope` (space-separated
    /// product names) narrows it.
    ///
    /// # Errors
    /// [`TokenError::InvalidClient`] for an unknown client or wrong secret,
    /// [`TokenError::InvalidScope`] for a product the client may not use.
    pub fn issue(&self, client_id: &str, secret: &str, scope: Option<&str>) -> Result<Issued, TokenError> {
        let known = self.lock().clients.get(client_id).is_some_and(|c| !c.secret.is_empty() && c.secret == secret);
        if !known {
            return Err(TokenError::InvalidClient);
        }
        self.grant(client_id, scope)
    }

    /// Issues a token to the client a `private_key_jwt` assertion proves,
    /// made for `audience` (this endpoint's URL).
    ///
    /// # Errors
    /// [`TokenError::InvalidClient`] when the assertion is not valid, expired,
    /// for another audience, or replayed; [`TokenError::InvalidScope`] as for [`Tokens::issue`].
    pub fn issue_for_assertion(
        &self,
        assertion: &str,
        audience: &str,
        scope: Option<&str>,
    ) -> Result<Issued, TokenError> {
        let client_id = self.verify_assertion(assertion, audience)?;
        self.grant(&client_id, scope)
    }

    fn verify_assertion(&self, assertion: &str, audience: &str) -> Result<String, TokenError> {
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        let header = jsonwebtoken::decode_header(assertion).map_err(|_| TokenError::InvalidClient)?;
        let kid = header.kid.ok_or(TokenError::InvalidClient)?;
        let client = {
            let state = self.lock();
            let found = state.clients.values().find(|c| c.assertion_key.as_ref().is_some_and(|(k, _)| *k == kid));
            found.cloned().ok_or(TokenError::InvalidClient)?
        };
        let Some((_, pem)) = &client.assertion_key else { return Err(TokenError::InvalidClient) };
        let key = match header.alg {
            Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(pem.as_bytes()),
            Algorithm::EdDSA => DecodingKey::from_ed_pem(pem.as_bytes()),
            _ => DecodingKey::from_rsa_pem(pem.as_bytes()),
        }
        .map_err(|_| TokenError::InvalidClient)?;
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[audience]);
        validation.set_issuer(&[client.id.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
        let data = jsonwebtoken::decode::<AssertionClaims>(assertion, &key, &validation)
            .map_err(|_| TokenError::InvalidClient)?;
        if data.claims.sub != client.id {
            return Err(TokenError::InvalidClient);
        }
        let mut state = self.lock();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        state.forget_assertions(now);
        if state.seen_jti.contains(&data.claims.jti) {
            return Err(TokenError::InvalidClient);
        }
        state.jti_expiry.insert((data.claims.exp, data.claims.jti.clone()));
        state.seen_jti.insert(data.claims.jti);
        Ok(client.id)
    }

    fn grant(&self, client_id: &str, scope: Option<&str>) -> Result<Issued, TokenError> {
        let mut state = self.lock();
        let client = state.clients.get(client_id).ok_or(TokenError::InvalidClient)?;
        let products = match scope.map(str::split_whitespace) {
            None => client.products.clone(),
            Some(asked) => {
                let asked: BTreeSet<String> = asked.map(str::to_owned).collect();
                if asked.is_empty() {
                    client.products.clone()
                } else if client.products.as_ref().is_some_and(|allowed| !asked.is_subset(allowed)) {
                    return Err(TokenError::InvalidScope);
                } else {
                    Some(asked)
                }
            }
        };
        // Expired grants can never authorize again; forget them so a long dev session stays small.
        let now = Instant::now();
        state.forget_grants(now);
        state.issued += 1;
        let access_token = format!(
            "sim-{:016x}{:016x}",
            self.random.hash_one((state.issued, client_id)),
            self.random.hash_one((client_id, state.issued))
        );
        let grant = Grant { client: client_id.to_owned(), products, expires_at: now + self.ttl };
        state.grants.insert(access_token.clone(), grant);
        state.grant_expiry.push_back((now + self.ttl, access_token.clone()));
        Ok(Issued { access_token, expires_in: self.ttl })
    }

    /// Checks `Authorization: Bearer …` for a call to `product`; returns the client id.
    ///
    /// # Errors
    /// [`ApiError::Unauthorized`] when the header is missing, the token unknown or
    /// expired, or not valid for `product`.
    pub fn authorize(&self, headers: &HeaderMap, product: &str) -> Result<String, ApiError> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .ok_or(ApiError::Unauthorized)?;
        let state = self.lock();
        let grant = state.grants.get(token.trim()).ok_or(ApiError::Unauthorized)?;
        let allowed = grant.products.as_ref().is_none_or(|p| p.contains(product));
        if grant.expires_at <= Instant::now() || !allowed {
            return Err(ApiError::Unauthorized);
        }
        Ok(grant.client.clone())
    }

    /// The tokens issued and not yet expired, for tests that search stores and
    /// logs for them (a coordinator must never keep one).
    pub fn live_tokens(&self) -> Vec<String> {
        let now = Instant::now();
        self.lock().grants.iter().filter(|(_, g)| g.expires_at > now).map(|(t, _)| t.clone()).collect()
    }

    /// How many tokens were issued so far (each attempt should fetch a fresh one).
    pub fn issued(&self) -> u64 {
        self.lock().issued
    }
}

/// The token request's form fields; all optional so that each gap gets its own error.
#[derive(Debug, Deserialize)]
struct TokenRequest {
    grant_type: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    client_assertion_type: Option<String>,
    client_assertion: Option<String>,
    scope: Option<String>,
}

/// The claims of a client assertion this endpoint reads (the rest is validated by `jsonwebtoken`).
#[derive(Debug, Deserialize)]
struct AssertionClaims {
    sub: String,
    jti: String,
    exp: u64,
}

/// The `client_assertion_type` of `private_key_jwt`.
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The token endpoint: `POST /token` (served as `/sim/token` by [`crate::app`]).
pub fn router(tokens: Tokens) -> Router {
    Router::new().route("/token", post(token)).with_state(tokens)
}

async fn token(
    State(tokens): State<Tokens>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    form: Result<Form<TokenRequest>, FormRejection>,
) -> Result<Response, TokenError> {
    let Form(request) = form.map_err(|_| TokenError::InvalidRequest)?;
    match request.grant_type.as_deref() {
        Some("client_credentials") => {}
        Some(_) => return Err(TokenError::UnsupportedGrantType),
        None => return Err(TokenError::InvalidRequest),
    }
    let issued = if let Some(assertion) = &request.client_assertion {
        if request.client_assertion_type.as_deref() != Some(JWT_BEARER) {
            return Err(TokenError::InvalidRequest);
        }
        // The audience is this endpoint as the client addressed it.
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).ok_or(TokenError::InvalidRequest)?;
        let audience = format!("http://{host}{}", uri.path());
        tokens.issue_for_assertion(assertion, &audience, request.scope.as_deref())?
    } else {
        let (id, secret) = match (basic_credentials(&headers), request.client_id, request.client_secret) {
            (Some(basic), _, _) => basic,
            (None, Some(id), Some(secret)) => (id, secret),
            (None, _, _) => return Err(TokenError::InvalidClient),
        };
        tokens.issue(&id, &secret, request.scope.as_deref())?
    };
    let body = json!({
        "access_token": issued.access_token,
        "token_type": "Bearer",
        "expires_in": issued.expires_in.as_secs(),
    });
    let mut response = Json(body).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `Authorization: Basic base64(id:secret)`, if present and well-formed.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

/// Standard base64 with padding (RFC 4648 §4); `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let padding = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if padding > 2 || chunk[..4 - padding].contains(&b'=') {
            return None;
        }
        let mut word = 0u32;
        for &c in &chunk[..4 - padding] {
            word = (word << 6) | value(c)?;
        }
        word <<= 6 * padding as u32;
        let [_, a, b, c] = word.to_be_bytes();
        out.extend_from_slice(&[a, b, c][..3 - padding]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_basic_credentials() {
        assert_eq!(base64_decode("Y29vcmRpbmF0b3I6czNjcmV0").as_deref(), Some(&b"coordinator:s3cret"[..]));
        assert_eq!(base64_decode("YQ==").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64_decode("YWI=").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64_decode("YQ="), None);
        assert_eq!(base64_decode("Y=Q="), None);
        assert_eq!(base64_decode("Y!Q="), None);
    }

    #[test]
    fn tokens_are_bound_to_client_scope_and_lifetime() {
        let mut limited = Client::new("limited", "s");
        limited.products = Some(["messaging".to_owned()].into());
        let tokens = Tokens::new([Client::new("c", "s"), limited], Duration::from_secs(60));
        assert_eq!(tokens.issue("c", "wrong", None), Err(TokenError::InvalidClient));
        assert_eq!(tokens.issue("limited", "s", Some("breg")), Err(TokenError::InvalidScope));
        let bearer = |t: &Issued| {
            let mut headers = HeaderMap::new();
            let value = format!("Bearer {}", t.access_token);
            headers.insert(header::AUTHORIZATION, value.parse().unwrap_or(header::HeaderValue::from_static("x")));
            headers
        };
        let Ok(scoped) = tokens.issue("c", "s", Some("breg")) else { panic!("scoped token") };
        assert_eq!(tokens.authorize(&bearer(&scoped), "breg"), Ok("c".to_owned()));
        assert_eq!(tokens.authorize(&bearer(&scoped), "messaging"), Err(ApiError::Unauthorized));
        let Ok(limited) = tokens.issue("limited", "s", None) else { panic!("limited token") };
        assert_eq!(tokens.authorize(&bearer(&limited), "breg"), Err(ApiError::Unauthorized));
        assert_eq!(tokens.authorize(&HeaderMap::new(), "breg"), Err(ApiError::Unauthorized));
        let expired = Tokens::new([Client::new("c", "s")], Duration::ZERO);
        let Ok(t) = expired.issue("c", "s", None) else { panic!("token") };
        assert_eq!(expired.authorize(&bearer(&t), "breg"), Err(ApiError::Unauthorized));
        assert_eq!(tokens.issued(), 2);
    }

    #[test]
    fn expired_grants_are_forgotten_as_new_ones_are_issued() {
        let lasting = Tokens::new([Client::new("c", "s")], Duration::from_secs(3600));
        let expiring = Tokens::new([Client::new("c", "s")], Duration::ZERO);
        for _ in 0..3 {
            assert!(lasting.issue("c", "s", None).is_ok());
            assert!(expiring.issue("c", "s", None).is_ok());
        }
        let kept = |t: &Tokens| {
            let state = t.lock();
            (state.grants.len(), state.grant_expiry.len())
        };
        assert_eq!(kept(&lasting), (3, 3));
        // Each issuance forgets the ones before it: only the latest is still kept.
        assert_eq!(kept(&expiring), (1, 1));
        assert!(expiring.live_tokens().is_empty());
    }
}
