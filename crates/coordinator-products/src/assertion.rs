//! `private_key_jwt` client authentication (RFC 7523 §2.2, OpenID Connect Core
//! §9): for every token request, a fresh JWT signed with the connection's
//! private key — `iss` and `sub` the client id, `aud` the token endpoint, a
//! random `jti`, `iat`, and `exp` one minute later — sent as
//! `client_assertion`. The key never leaves this process; the assertion is
//! used once and dropped.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

/// The `client_assertion_type` of a JWT bearer assertion.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// How long an assertion is valid, in seconds.
const LIFETIME_SECONDS: u64 = 60;

/// A PEM reader of one key type.
type ParsePem = fn(&[u8]) -> jsonwebtoken::errors::Result<EncodingKey>;

/// A private key that signs client assertions, with its algorithm and key id.
#[derive(Clone)]
pub struct AssertionKey {
    key: EncodingKey,
    algorithm: Algorithm,
    key_id: String,
}

impl std::fmt::Debug for AssertionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssertionKey").field("algorithm", &self.algorithm).field("key_id", &self.key_id).finish()
    }
}

/// Why a private key cannot sign assertions. Never carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the private key is not a PEM PKCS#8 EC P-256 (ES256), RSA (RS256) or Ed25519 (EdDSA) key; \
     write it with `openssl pkcs8 -topk8 -nocrypt`"
)]
pub struct UnusableKey;

/// Why an assertion could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the client assertion could not be signed")]
pub struct SigningFailed;

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    jti: String,
    iat: u64,
    exp: u64,
}

impl AssertionKey {
    /// Reads a PEM private key: EC P-256 signs ES256, RSA RS256, Ed25519 EdDSA.
    ///
    /// # Errors
    /// [`UnusableKey`] for anything else.
    pub fn from_pem(pem: &[u8], key_id: &str) -> Result<AssertionKey, UnusableKey> {
        install_provider();
        let candidates: [(ParsePem, Algorithm); 3] = [
            (EncodingKey::from_ec_pem, Algorithm::ES256),
            (EncodingKey::from_ed_pem, Algorithm::EdDSA),
            (EncodingKey::from_rsa_pem, Algorithm::RS256),
        ];
        for (parse, algorithm) in candidates {
            let Ok(key) = parse(pem) else { continue };
            let candidate = AssertionKey { key, algorithm, key_id: key_id.to_owned() };
            // A key of another curve parses but cannot sign this algorithm: try it once.
            if candidate.sign("probe", "probe").is_ok() {
                return Ok(candidate);
            }
        }
        Err(UnusableKey)
    }

    /// The signing algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A fresh assertion for `client_id` at `audience` (the token endpoint URL).
    ///
    /// # Errors
    /// [`SigningFailed`] when the key cannot sign or no randomness is available.
    pub fn sign(&self, client_id: &str, audience: &str) -> Result<String, SigningFailed> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|_| SigningFailed)?;
        let claims = Claims {
            iss: client_id,
            sub: client_id,
            aud: audience,
            jti: hex::encode(nonce),
            iat: now,
            exp: now + LIFETIME_SECONDS,
        };
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.key_id.clone());
        jsonwebtoken::encode(&header, &claims, &self.key).map_err(|_| SigningFailed)
    }
}

/// Makes aws-lc-rs jsonwebtoken's provider (the only backend compiled in).
fn install_provider() {
    // An error means a provider is installed already.
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key made for these tests only.
    const TEST_KEY: &str = include_str!("../tests/keys/client-es256.pem");

    #[test]
    fn an_ec_key_signs_es256_assertions_with_a_fresh_jti_each_time() {
        let key = AssertionKey::from_pem(TEST_KEY.as_bytes(), "k1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key.algorithm(), Algorithm::ES256);
        let a = key.sign("coordinator", "http://id.test/token").unwrap_or_else(|e| panic!("{e}"));
        let b = key.sign("coordinator", "http://id.test/token").unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a, b);
        let header = jsonwebtoken::decode_header(&a).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((header.alg, header.kid.as_deref()), (Algorithm::ES256, Some("k1")));
        assert!(!format!("{key:?}").contains("PRIVATE"));
    }

    #[test]
    fn other_text_is_not_a_key() {
        assert_eq!(AssertionKey::from_pem(b"not a key", "k1").map(|_| ()), Err(UnusableKey));
    }
}
