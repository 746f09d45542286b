//! Tests of [`crate::auth::oidc`] and of JWTs through [`crate::auth::access::Access`],
//! with key pairs generated at test time (aws-lc-rs) and JWKS documents built
//! from their public keys.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair};
use coordinator_core::model::runtime::{Grant, Role};
use coordinator_products::Secret;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;
use crate::auth::access::{Access, StaticCredential, Unauthenticated};

const ISS: &str = "https://id.example";
const AUD: &str = "coordinator";

/// A private key that signs test JWTs, with its algorithm and key id.
struct Signer {
    key: EncodingKey,
    algorithm: Algorithm,
    kid: String,
}

impl Signer {
    fn es256(kid: &str) -> Signer {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .unwrap_or_else(|e| panic!("P-256 key: {e}"));
        let key = EncodingKey::from_ec_der(pkcs8.as_ref());
        Signer { key, algorithm: Algorithm::ES256, kid: kid.to_owned() }
    }

    fn ed25519(kid: &str) -> Signer {
        let pkcs8 =
            Ed25519KeyPair::generate_pkcs8v1(&SystemRandom::new()).unwrap_or_else(|e| panic!("Ed25519 key: {e}"));
        Signer { key: EncodingKey::from_ed_der(pkcs8.as_ref()), algorithm: Algorithm::EdDSA, kid: kid.to_owned() }
    }

    fn rs256(kid: &str) -> Signer {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
            .unwrap_or_else(|e| panic!("RSA key: {e}"));
        let der = pair.as_der().unwrap_or_else(|e| panic!("RSA key DER: {e}"));
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", base64(der.as_ref()));
        let key = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap_or_else(|e| panic!("RSA PEM: {e}"));
        Signer { key, algorithm: Algorithm::RS256, kid: kid.to_owned() }
    }

    /// The public JWK, with the key id.
    fn jwk(&self) -> Value {
        let mut jwk = Jwk::from_encoding_key(&self.key, self.algorithm).unwrap_or_else(|e| panic!("JWK: {e}"));
        jwk.common.key_id = Some(self.kid.clone());
        serde_json::to_value(&jwk).unwrap_or_else(|e| panic!("JWK JSON: {e}"))
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap_or_else(|e| panic!("sign: {e}"))
    }
}

/// Standard base64 (for a PEM body).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Base64url without padding (a JWT part).
fn base64url(bytes: &[u8]) -> String {
    base64(bytes).trim_end_matches('=').replace('+', "-").replace('/', "_")
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISS, "aud": AUD, "sub": sub, "iat": now(), "exp": now() + 300})
}

/// An issuer whose JWKS is a `file:` holding `keys`.
fn issuer_with(keys: &[Value]) -> (tempfile::TempDir, Issuer) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let text = json!({ "keys": keys }).to_string();
    std::fs::write(dir.path().join("jwks.json"), text).unwrap_or_else(|e| panic!("jwks.json: {e}"));
    let issuer = Issuer::new(ISS, AUD, "file:jwks.json", dir.path()).unwrap_or_else(|e| panic!("issuer: {e}"));
    (dir, issuer)
}

#[tokio::test]
async fn tokens_of_each_algorithm_verify_with_the_key_their_kid_names() {
    let signers = [Signer::es256("ec"), Signer::ed25519("ed"), Signer::rs256("rsa")];
    let keys: Vec<Value> = signers.iter().map(Signer::jwk).collect();
    let (_dir, issuer) = issuer_with(&keys);
    for signer in &signers {
        let token = signer.sign(&claims("alice"));
        assert!(is_jwt(&token));
        assert_eq!(issuer.verify(&token).await, Ok("alice".to_owned()), "{:?}", signer.algorithm);
    }
    // `aud` may be a list; an `exp` just past is within the leeway.
    let mut listed = claims("alice");
    listed["aud"] = json!(["other", AUD]);
    listed["exp"] = json!(now() - 5);
    assert_eq!(issuer.verify(&signers[0].sign(&listed)).await, Ok("alice".to_owned()));
    assert!(!format!("{issuer:?}").contains(&signers[0].jwk()["x"].to_string()));
}

#[tokio::test]
async fn every_wrong_claim_key_or_algorithm_is_refused_with_its_reason() {
    let signer = Signer::es256("k1");
    let (_dir, issuer) = issuer_with(&[signer.jwk()]);
    let issuers = [issuer];
    let with = |change: &dyn Fn(&mut Value)| {
        let mut c = claims("alice");
        change(&mut c);
        signer.sign(&c)
    };
    let valid = signer.sign(&claims("alice"));
    let (header, rest) = valid.split_once('.').unwrap_or_else(|| panic!("a JWT"));
    let signature = rest.rsplit_once('.').map(|(_, s)| s).unwrap_or_default();
    let tampered_payload = base64url(claims("mallory").to_string().as_bytes());
    let hs256_header = base64url(br#"{"alg":"HS256","typ":"JWT","kid":"k1"}"#);
    let public_key = signer.jwk().to_string();
    let hmac_key = EncodingKey::from_secret(public_key.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let mut hs_header = Header::new(Algorithm::HS256);
    hs_header.kid = Some("k1".into());
    let hs256 = jsonwebtoken::encode(&hs_header, &claims("alice"), &hmac_key).unwrap_or_else(|e| panic!("{e}"));
    let none = format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT","kid":"k1"}"#),
        base64url(claims("alice").to_string().as_bytes())
    );
    let other = Signer::es256("k1").sign(&claims("alice"));
    let unknown = Signer::es256("k2").sign(&claims("alice"));
    let cases: Vec<(&str, String, JwtRefusal)> = vec![
        ("expired", with(&|c| c["exp"] = json!(now() - 120)), JwtRefusal::Expired),
        ("not yet valid", with(&|c| c["nbf"] = json!(now() + 120)), JwtRefusal::NotYetValid),
        ("wrong audience", with(&|c| c["aud"] = json!("someone-else")), JwtRefusal::Audience),
        ("wrong issuer", with(&|c| c["iss"] = json!("https://evil.example")), JwtRefusal::Issuer),
        ("no exp", with(&|c| drop(c.as_object_mut().and_then(|o| o.remove("exp")))), JwtRefusal::Claim("exp".into())),
        ("no aud", with(&|c| drop(c.as_object_mut().and_then(|o| o.remove("aud")))), JwtRefusal::Claim("aud".into())),
        ("no sub", with(&|c| drop(c.as_object_mut().and_then(|o| o.remove("sub")))), JwtRefusal::Claim("sub".into())),
        ("empty sub", with(&|c| c["sub"] = json!("")), JwtRefusal::Subject),
        ("reserved sub", with(&|c| c["sub"] = json!("trigger:casework")), JwtRefusal::Subject),
        ("unknown kid", unknown, JwtRefusal::UnknownKey),
        ("another key, same kid", other, JwtRefusal::Signature),
        ("tampered payload", format!("{header}.{tampered_payload}.{signature}"), JwtRefusal::Signature),
        ("HS256 header on an ES256 signature", format!("{hs256_header}.{}", rest), JwtRefusal::Algorithm),
        ("HS256 signed with the public key", hs256, JwtRefusal::Algorithm),
        ("alg none", none, JwtRefusal::Malformed),
        ("not a JWT", "a.b.c".to_owned(), JwtRefusal::Malformed),
    ];
    for (case, token, want) in cases {
        assert_eq!(verify(&issuers, &token).await, Err(want), "{case}");
    }
}

#[test]
fn jwks_documents_need_a_usable_signing_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let write = |text: &str| std::fs::write(dir.path().join("jwks.json"), text).unwrap_or_else(|e| panic!("{e}"));
    let load = || Issuer::new(ISS, AUD, "file:jwks.json", dir.path()).map(|_| ());
    write("not json");
    assert!(matches!(load(), Err(JwksError::NotJwks(_))));
    write(r#"{"keys": []}"#);
    assert_eq!(load(), Err(JwksError::NoUsableKey));
    let mut no_kid = Signer::es256("k").jwk();
    no_kid["kid"] = Value::Null;
    let mut for_encryption = Signer::es256("enc").jwk();
    for_encryption["use"] = json!("enc");
    let hmac = json!({"kty": "oct", "k": "c2VjcmV0", "kid": "h"});
    let strange = json!({"kty": "EC", "crv": "P-999", "x": "AA", "y": "AA", "kid": "s"});
    write(&json!({ "keys": [no_kid, for_encryption, hmac, strange] }).to_string());
    assert_eq!(load(), Err(JwksError::NoUsableKey));
    write(&json!({ "keys": [hmac, Signer::es256("k").jwk()] }).to_string());
    assert_eq!(load(), Ok(()));
    let missing = Issuer::new(ISS, AUD, "file:missing.json", dir.path()).map(|_| ());
    assert!(matches!(&missing, Err(e @ JwksError::Unreadable(_)) if e.is_unavailable()), "{missing:?}");
}

/// A JWKS served over plain HTTP on loopback (the decoder allows only
/// `https://` in runtime.yaml; the fetching is the same), counting fetches.
struct JwksServer {
    url: String,
    document: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(keys: &[Value]) -> JwksServer {
        let document = Arc::new(Mutex::new(json!({ "keys": keys })));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (doc, count) = (Arc::clone(&document), Arc::clone(&fetches));
        let router = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let (doc, count) = (Arc::clone(&doc), Arc::clone(&count));
                async move {
                    count.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let body = doc.lock().unwrap_or_else(PoisonError::into_inner).to_string();
                    ([(axum::http::header::CONTENT_TYPE, "application/json")], body)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        JwksServer { url: format!("http://{addr}/jwks"), document, fetches, _task: task }
    }

    fn serve(&self, keys: &[Value]) {
        *self.document.lock().unwrap_or_else(PoisonError::into_inner) = json!({ "keys": keys });
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn url_keys_are_fetched_at_start_and_refreshed_once_per_interval_on_unknown_kids() {
    let (first, second, third) = (Signer::es256("k1"), Signer::es256("k2"), Signer::es256("k3"));
    let server = JwksServer::start(&[first.jwk()]).await;
    let issuer = Arc::new(Issuer::new(ISS, AUD, &server.url, Path::new(".")).unwrap_or_else(|e| panic!("{e}")));
    issuer.fetch_at_start().await.unwrap_or_else(|e| panic!("start-up fetch: {e}"));
    assert_eq!(server.fetches(), 1);
    assert_eq!(issuer.verify(&first.sign(&claims("a"))).await, Ok("a".to_owned()));
    assert_eq!(server.fetches(), 1, "a known kid fetches nothing");

    // The issuer rotates: an unknown kid fetches the document again... but not
    // within a minute of the start-up fetch.
    server.serve(&[first.jwk(), second.jwk()]);
    assert_eq!(issuer.verify(&second.sign(&claims("a"))).await, Err(JwtRefusal::UnknownKey));
    assert_eq!(server.fetches(), 1);
    let forget = || async {
        let Source::Url { last_fetch, .. } = &issuer.source else { panic!("a URL issuer") };
        *last_fetch.lock().await = None;
    };
    forget().await;
    assert_eq!(issuer.verify(&second.sign(&claims("a"))).await, Ok("a".to_owned()));
    assert_eq!(server.fetches(), 2);
    assert_eq!(issuer.verify(&third.sign(&claims("a"))).await, Err(JwtRefusal::UnknownKey));
    assert_eq!(server.fetches(), 2, "at most one fetch per interval");

    // Concurrent callers with an unknown kid share one fetch.
    server.serve(&[third.jwk()]);
    forget().await;
    let token = third.sign(&claims("a"));
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (issuer, token) = (Arc::clone(&issuer), token.clone());
            tokio::spawn(async move { issuer.verify(&token).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap_or_else(|e| panic!("{e}")), Ok("a".to_owned()));
    }
    assert_eq!(server.fetches(), 3);
    // The rotated-out key is gone.
    assert_eq!(issuer.verify(&first.sign(&claims("a"))).await, Err(JwtRefusal::UnknownKey));
}

#[tokio::test]
async fn a_url_that_cannot_be_fetched_refuses_the_start() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let closed = Issuer::new(ISS, AUD, &format!("http://127.0.0.1:{port}/jwks"), Path::new("."))
        .unwrap_or_else(|e| panic!("{e}"));
    let refused = closed.fetch_at_start().await;
    assert!(matches!(&refused, Err(e @ JwksError::Unreachable(_)) if e.is_unavailable()), "{refused:?}");
    let server = JwksServer::start(&[]).await;
    let empty = Issuer::new(ISS, AUD, &server.url, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(empty.fetch_at_start().await, Err(JwksError::NoUsableKey));
    let missing = Issuer::new(ISS, AUD, &server.url.replace("/jwks", "/nothing"), Path::new("."))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(missing.fetch_at_start().await, Err(JwksError::Unreachable(m)) if m.contains("404")));
}

#[tokio::test]
async fn a_jwt_subject_holds_its_grants_and_static_tokens_still_work() {
    let signer = Signer::es256("k1");
    let (_dir, issuer) = issuer_with(&[signer.jwk()]);
    let grant = |subject: &str, workflow: &str, roles: &[Role]| Grant {
        subject: subject.into(),
        workflow: workflow.into(),
        roles: roles.to_vec(),
    };
    let grants = [grant("alice", "notice", &[Role::Admit, Role::Read]), grant("ops", "*", &[Role::Read])];
    let tokens = vec![StaticCredential { subject: "ops".into(), token: Secret::new("t-ops"), roles: vec![] }];
    let access = Access::new(tokens, &grants).unwrap_or_else(|e| panic!("{e}")).with_issuers(vec![issuer]);
    assert!(!access.is_empty());
    let alice = access.authenticate_bearer(&signer.sign(&claims("alice"))).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(alice.subject(), "alice");
    assert!(alice.holds(Role::Admit, "notice") && alice.holds(Role::Read, "notice"));
    assert!(!alice.holds(Role::Operate, "notice") && !alice.holds(Role::Admit, "permit"));
    let nobody = access.authenticate_bearer(&signer.sign(&claims("bob"))).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!nobody.holds_somewhere(Role::Read), "a subject without grants holds nothing");
    let ops = access.authenticate_bearer("t-ops").await.unwrap_or_else(|e| panic!("{e}"));
    assert!(ops.holds_everywhere(Role::Read));
    assert_eq!(access.authenticate_bearer("t-op").await.err(), Some(Unauthenticated::UnknownToken));
    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 120);
    let refused = access.authenticate_bearer(&signer.sign(&expired)).await.err();
    assert_eq!(refused, Some(Unauthenticated::Jwt(JwtRefusal::Expired)));
    // Without issuers, a JWT is just an unknown token.
    let plain = Access::new(Vec::new(), &grants).unwrap_or_else(|e| panic!("{e}"));
    assert!(plain.is_empty());
    let refused = plain.authenticate_bearer(&signer.sign(&claims("alice"))).await.err();
    assert_eq!(refused, Some(Unauthenticated::UnknownToken));
}
