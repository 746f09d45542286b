//! OIDC-issued JWT bearer tokens
//! (docs/reference/protection.md#access-and-roles, `access.oidc` in
//! runtime.yaml).
//!
//! An [`Issuer`] holds the issuer's signing keys, read from its JWKS: a
//! `file:PATH` document read once at start-up, or an `https://` URL fetched
//! at start-up ([`Issuer::fetch_at_start`]) and fetched again when a token
//! names a key id the issuer does not know — at most once per
//! [`REFRESH_INTERVAL`] per issuer, one fetch at a time, each bounded by
//! [`FETCH_TIMEOUT`].
//!
//! A JWT is accepted when its header's `kid` names one of the issuer's keys
//! and its `alg` is that key's algorithm (RS256, ES256 on P-256, or EdDSA on
//! Ed25519: `none` and the HMAC algorithms never are), the signature holds,
//! `iss` equals the issuer, `aud` contains the audience, `exp` is in the
//! future and `nbf` (when present) is past, both with [`LEEWAY_SECONDS`] of
//! clock skew, and `sub` is neither empty nor a reserved `trigger:` subject.
//! A refusal ([`JwtRefusal`]) says why, and never holds the token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::auth::access::is_reserved_subject;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECONDS: u64 = 30;
/// The shortest time between two fetches of an issuer's JWKS URL.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// How long one fetch of a JWKS URL may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest JWKS document accepted, in bytes.
const MAX_JWKS_BYTES: usize = 1 << 20;
/// The algorithms a JWT may be signed with.
const ACCEPTED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// Why an issuer's JWKS cannot be used. Never carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// The `file:` document cannot be read.
    #[error("cannot be read: {0}")]
    Unreadable(String),
    /// The URL cannot be fetched (network, timeout, HTTP status).
    #[error("cannot be fetched: {0}")]
    Unreachable(String),
    /// The content is not a JWKS document.
    #[error("is not a JWKS document (a JSON object `{{\"keys\": [...]}}`): {0}")]
    NotJwks(String),
    /// No key of the document can verify signatures.
    #[error(
        "holds no key this service can verify tokens with (each needs a `kid`, and is RSA for RS256, \
         EC P-256 for ES256 or OKP Ed25519 for EdDSA)"
    )]
    NoUsableKey,
}

impl JwksError {
    /// Whether the JWKS is unavailable (exit code 3) rather than wrong (exit code 1).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, JwksError::Unreadable(_) | JwksError::Unreachable(_))
    }
}

/// Why a JWT was not accepted. The message may be shown to the caller: it
/// never holds the token or a claim's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtRefusal {
    /// Not three base64url parts with a JSON header and payload, or an `alg` this service does not know (`none`).
    #[error("the JWT is not well formed, or its `alg` is not RS256, ES256 or EdDSA")]
    Malformed,
    /// An algorithm that is not accepted (HMAC), or not the algorithm of the key the `kid` names.
    #[error("the JWT's `alg` is not accepted (RS256, ES256 or EdDSA, matching the key its `kid` names)")]
    Algorithm,
    /// No configured issuer is the token's `iss`.
    #[error("the JWT's issuer (`iss`) is not accepted")]
    Issuer,
    /// The header has no `kid`, or the issuer has no key with that id.
    #[error("the JWT's key id (`kid`) is not one of its issuer's keys")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the JWT's signature is not valid")]
    Signature,
    /// `exp` is past.
    #[error("the JWT has expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("the JWT is not valid yet (`nbf`)")]
    NotYetValid,
    /// `aud` does not contain the audience.
    #[error("the JWT is not meant for this service (`aud`)")]
    Audience,
    /// A required claim (`exp`, `iss`, `aud`, `sub`) is missing or not of its type.
    #[error("the JWT's `{0}` claim is missing or malformed")]
    Claim(String),
    /// `sub` is empty or a reserved `trigger:` subject.
    #[error("the JWT's subject (`sub`) is empty or reserved")]
    Subject,
}

impl From<jsonwebtoken::errors::Error> for JwtRefusal {
    fn from(error: jsonwebtoken::errors::Error) -> JwtRefusal {
        match error.into_kind() {
            ErrorKind::ExpiredSignature => JwtRefusal::Expired,
            ErrorKind::ImmatureSignature => JwtRefusal::NotYetValid,
            ErrorKind::InvalidAudience => JwtRefusal::Audience,
            ErrorKind::InvalidIssuer => JwtRefusal::Issuer,
            ErrorKind::InvalidSignature => JwtRefusal::Signature,
            ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => JwtRefusal::Algorithm,
            ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => JwtRefusal::Claim(claim),
            _ => JwtRefusal::Malformed,
        }
    }
}

/// Whether a bearer token has the shape of a JWT: three dot-separated parts.
pub fn is_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// One verification key of an issuer.
struct VerifyingKey {
    key: DecodingKey,
    algorithm: Algorithm,
}

/// Key id → key.
type Keys = HashMap<String, Arc<VerifyingKey>>;

/// Where an issuer's keys come from.
enum Source {
    /// Read once at start-up.
    File,
    /// Fetched at start-up and refreshed on unknown key ids.
    Url {
        url: String,
        client: reqwest::Client,
        /// When the URL was last fetched; the lock makes refreshes single-flight.
        last_fetch: tokio::sync::Mutex<Option<Instant>>,
    },
}

/// An OIDC issuer whose JWTs authenticate callers.
pub struct Issuer {
    issuer: String,
    audience: String,
    jwks: String,
    source: Source,
    keys: RwLock<Arc<Keys>>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("jwks", &self.jwks)
            .field("keys", &self.current().len())
            .finish()
    }
}

/// The claims read from a verified JWT (the others were checked by `jsonwebtoken`).
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
}

/// The only claim read before verification: which issuer's rules apply.
#[derive(Deserialize)]
struct Unverified {
    #[serde(default)]
    iss: Option<String>,
}

impl Issuer {
    /// An issuer from its `access.oidc` entry: `jwks` is `file:PATH` (relative
    /// to `base`, read now) or a URL (fetched by [`Issuer::fetch_at_start`]).
    ///
    /// # Errors
    /// [`JwksError`] when a `file:` document cannot be read or used, or no HTTP client can be built.
    pub fn new(issuer: &str, audience: &str, jwks: &str, base: &Path) -> Result<Issuer, JwksError> {
        let (source, keys) = match jwks.strip_prefix("file:") {
            Some(path) => {
                let bytes = std::fs::read(base.join(path)).map_err(|e| JwksError::Unreadable(e.to_string()))?;
                (Source::File, parse_jwks(&bytes)?)
            }
            None => {
                let client = reqwest::Client::builder()
                    .timeout(FETCH_TIMEOUT)
                    .connect_timeout(FETCH_TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| JwksError::Unreachable(format!("no HTTP client: {e}")))?;
                let source = Source::Url { url: jwks.to_owned(), client, last_fetch: tokio::sync::Mutex::new(None) };
                (source, Keys::new())
            }
        };
        install_provider();
        Ok(Issuer {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            jwks: jwks.to_owned(),
            source,
            keys: RwLock::new(Arc::new(keys)),
        })
    }

    /// The issuer (`iss`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The JWKS reference as configured (`file:PATH` or the URL).
    pub fn jwks(&self) -> &str {
        &self.jwks
    }

    /// Fetches a URL JWKS (nothing to do for `file:`): the service does not
    /// start without its issuers' keys.
    ///
    /// # Errors
    /// [`JwksError`] when the URL cannot be fetched or its document used.
    pub async fn fetch_at_start(&self) -> Result<(), JwksError> {
        let Source::Url { url, client, last_fetch } = &self.source else { return Ok(()) };
        let mut last = last_fetch.lock().await;
        let keys = fetch(client, url).await?;
        *last = Some(Instant::now());
        self.replace(keys);
        Ok(())
    }

    /// Verifies `token` against this issuer; the subject on success.
    ///
    /// # Errors
    /// [`JwtRefusal`] saying why the token is not accepted.
    pub async fn verify(&self, token: &str) -> Result<String, JwtRefusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtRefusal::Malformed)?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(JwtRefusal::Algorithm);
        }
        let kid = header.kid.ok_or(JwtRefusal::UnknownKey)?;
        let key = self.key(&kid).await.ok_or(JwtRefusal::UnknownKey)?;
        if key.algorithm != header.alg {
            return Err(JwtRefusal::Algorithm);
        }
        let mut validation = Validation::new(key.algorithm);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)?;
        match data.claims.sub {
            Some(sub) if !sub.is_empty() && !is_reserved_subject(&sub) => Ok(sub),
            _ => Err(JwtRefusal::Subject),
        }
    }

    /// The key `kid`, fetching the URL again when it is unknown (at most once
    /// per [`REFRESH_INTERVAL`]; concurrent callers wait for the one fetch).
    async fn key(&self, kid: &str) -> Option<Arc<VerifyingKey>> {
        if let Some(key) = self.current().get(kid) {
            return Some(Arc::clone(key));
        }
        let Source::Url { url, client, last_fetch } = &self.source else { return None };
        let mut last = last_fetch.lock().await;
        // Another caller may have fetched while this one waited.
        if let Some(key) = self.current().get(kid) {
            return Some(Arc::clone(key));
        }
        if last.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL) {
            return None;
        }
        *last = Some(Instant::now());
        match fetch(client, url).await {
            Ok(keys) => self.replace(keys),
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, jwks = %url, error = %e, "refreshing an OIDC issuer's JWKS failed")
            }
        }
        self.current().get(kid).cloned()
    }

    fn current(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn replace(&self, keys: Keys) {
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
    }
}

/// Verifies a JWT against the issuers whose `issuer` is its (unverified)
/// `iss`; the subject on success.
///
/// # Errors
/// [`JwtRefusal`]: [`JwtRefusal::Issuer`] when no issuer matches, otherwise
/// the last matching issuer's refusal.
pub async fn verify(issuers: &[Issuer], token: &str) -> Result<String, JwtRefusal> {
    let unverified: Unverified =
        jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|_| JwtRefusal::Malformed)?;
    let iss = unverified.iss.ok_or_else(|| JwtRefusal::Claim("iss".to_owned()))?;
    let mut refusal = JwtRefusal::Issuer;
    for issuer in issuers.iter().filter(|i| i.issuer == iss) {
        match issuer.verify(token).await {
            Ok(subject) => return Ok(subject),
            Err(e) => refusal = e,
        }
    }
    Err(refusal)
}

/// GETs a JWKS URL and reads its keys.
async fn fetch(client: &reqwest::Client, url: &str) -> Result<Keys, JwksError> {
    let response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| JwksError::Unreachable(e.without_url().to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(JwksError::Unreachable(format!("HTTP {status}")));
    }
    if response.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
        return Err(JwksError::NotJwks(format!("larger than {MAX_JWKS_BYTES} bytes")));
    }
    let bytes = response.bytes().await.map_err(|e| JwksError::Unreachable(e.without_url().to_string()))?;
    parse_jwks(&bytes)
}

/// The usable keys of a JWKS document. Keys without a `kid`, meant for
/// encryption, or of another type or curve are left out; the first of two
/// keys with the same `kid` is kept.
fn parse_jwks(bytes: &[u8]) -> Result<Keys, JwksError> {
    #[derive(Deserialize)]
    struct Document {
        keys: Vec<serde_json::Value>,
    }
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(JwksError::NotJwks(format!("larger than {MAX_JWKS_BYTES} bytes")));
    }
    let document: Document = serde_json::from_slice(bytes).map_err(|e| JwksError::NotJwks(e.to_string()))?;
    let mut keys = Keys::new();
    for value in document.keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else { continue };
        let Some((kid, key)) = usable(&jwk) else { continue };
        keys.entry(kid).or_insert_with(|| Arc::new(key));
    }
    if keys.is_empty() {
        return Err(JwksError::NoUsableKey);
    }
    Ok(keys)
}

/// A JWK's key id and verification key, when it can verify an accepted algorithm.
fn usable(jwk: &Jwk) -> Option<(String, VerifyingKey)> {
    let kid = jwk.common.key_id.clone().filter(|k| !k.is_empty())?;
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let (algorithm, declared) = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => (Algorithm::RS256, KeyAlgorithm::RS256),
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
            (Algorithm::ES256, KeyAlgorithm::ES256)
        }
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            (Algorithm::EdDSA, KeyAlgorithm::EdDSA)
        }
        _ => return None,
    };
    if jwk.common.key_algorithm.is_some_and(|a| a != declared) {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some((kid, VerifyingKey { key, algorithm }))
}

/// Makes aws-lc-rs jsonwebtoken's provider (the only backend compiled in).
fn install_provider() {
    // An error means a provider is installed already.
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;
