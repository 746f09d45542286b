//! The OIDC token path (`coordinator::auth::oidc::verify`) against two issuers
//! built from a fixed JWKS file (an Ed25519 and a P-256 key, read once at
//! start-up). Whatever the token, an accepted one names one of the issuers
//! (`iss` a string equal to it), carries that issuer's audience, has not
//! expired and is valid already (within the leeway), and its `sub` is the
//! subject returned, neither empty nor `trigger:`. Tokens signed here from
//! claims the fuzzer writes are accepted whenever those claims plainly
//! satisfy the rules and the header names the signing key.
#![no_main]

use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use coordinator::auth::oidc::{self, Issuer, LEEWAY_SECONDS};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

const ISSUERS: [(&str, &str); 2] = [("https://id.example", "coordinator"), ("https://other.example", "console")];

/// A PKCS#8 v1 document of an Ed25519 key: this prefix, then the 32-byte seed.
const ED25519_PKCS8_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

struct Signer {
    key: EncodingKey,
    algorithm: Algorithm,
    kid: &'static str,
}

struct Setup {
    signers: Vec<Signer>,
    issuers: Vec<Issuer>,
    runtime: tokio::runtime::Runtime,
}

static SETUP: LazyLock<Setup> = LazyLock::new(|| {
    let mut ed = ED25519_PKCS8_PREFIX.to_vec();
    ed.extend_from_slice(&[42; 32]);
    let ec = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
    let signers = vec![
        Signer { key: EncodingKey::from_ed_der(&ed), algorithm: Algorithm::EdDSA, kid: "ed-1" },
        Signer { key: EncodingKey::from_ec_der(ec.as_ref()), algorithm: Algorithm::ES256, kid: "ec-1" },
    ];
    let keys: Vec<Value> = signers
        .iter()
        .map(|s| {
            let mut jwk = Jwk::from_encoding_key(&s.key, s.algorithm).unwrap();
            jwk.common.key_id = Some(s.kid.to_owned());
            serde_json::to_value(&jwk).unwrap()
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("coordinator-fuzz-oidc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("jwks.json"), json!({"keys": keys}).to_string()).unwrap();
    let issuers = ISSUERS.iter().map(|(iss, aud)| Issuer::new(iss, aud, "file:jwks.json", &dir).unwrap()).collect();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    Setup { signers, issuers, runtime }
});

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let setup = &*SETUP;
    let [mode, key, rest @ ..] = data else { return };
    if mode % 2 == 0 {
        let Ok(token) = std::str::from_utf8(rest) else { return };
        check(setup, token, None);
    } else {
        signed(setup, *key, rest);
    }
});

/// A token signed here: claims that satisfy every rule, overridden by the
/// JSON object the input holds; `key` picks the signer and the header's `kid`.
fn signed(setup: &Setup, key: u8, overrides: &[u8]) {
    let (iss, aud) = ISSUERS[usize::from(key / 8) % 2];
    let mut claims = Map::new();
    claims.insert("iss".into(), json!(iss));
    claims.insert("aud".into(), json!(aud));
    claims.insert("sub".into(), json!("fuzz-subject"));
    claims.insert("exp".into(), json!(now() + 3600));
    if let Ok(Value::Object(more)) = serde_json::from_slice::<Value>(overrides) {
        claims.extend(more);
    }
    let signer = &setup.signers[usize::from(key) % 2];
    let (kid, named) = match (key / 2) % 4 {
        0 => (Some(signer.kid.to_owned()), true),
        1 => (Some(setup.signers[usize::from(key + 1) % 2].kid.to_owned()), false),
        2 => (Some("unknown".to_owned()), false),
        _ => (None, false),
    };
    let mut header = Header::new(signer.algorithm);
    header.kid = kid;
    let claims = Value::Object(claims);
    let token = jsonwebtoken::encode(&header, &claims, &signer.key).unwrap();
    check(setup, &token, named.then_some(&claims));
}

/// Verifies `token`: an accepted one must satisfy the rules; with `claims`
/// (the token was signed here by the key its header names), one that
/// plainly satisfies them must be accepted.
fn check(setup: &Setup, token: &str, claims: Option<&Value>) {
    let result = setup.runtime.block_on(oidc::verify(&setup.issuers, token));
    let now = now();
    if let Ok(subject) = &result {
        let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(token).unwrap();
        let Some(iss) = claims["iss"].as_str() else { panic!("accepted with a non-string iss: {claims}") };
        let Some((_, aud)) = ISSUERS.iter().find(|(i, _)| *i == iss) else { panic!("accepted from issuer {iss}") };
        assert!(audience(&claims["aud"]).contains(aud), "accepted for another audience: {claims}");
        let exp = claims["exp"].as_f64().unwrap_or_else(|| panic!("accepted without a numeric exp: {claims}"));
        assert!(exp + 1.0 >= (now - LEEWAY_SECONDS) as f64, "accepted after exp: {claims}");
        if let Some(nbf) = claims["nbf"].as_f64() {
            assert!(nbf <= (now + LEEWAY_SECONDS + 1) as f64, "accepted before nbf: {claims}");
        }
        assert_eq!(claims["sub"].as_str(), Some(subject.as_str()));
        assert!(!subject.is_empty() && !subject.starts_with("trigger:"), "accepted subject {subject:?}");
    }
    if let Some(claims) = claims
        && plainly_acceptable(claims, now)
    {
        assert!(result.is_ok(), "refused ({result:?}) though acceptable: {claims}");
    }
}

/// The audiences of an `aud` claim (a string or an array of strings).
fn audience(aud: &Value) -> Vec<&str> {
    match aud {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether the claims satisfy every rule with room to spare: `iss` one of
/// the issuers, `aud` its audience (or an array of strings holding it), an
/// integer `exp` a minute or more ahead, no `nbf` or an integer one a minute
/// or more past, and a `sub` that is neither empty nor `trigger:`.
fn plainly_acceptable(claims: &Value, now: u64) -> bool {
    let Some(iss) = claims["iss"].as_str() else { return false };
    let Some((_, aud)) = ISSUERS.iter().find(|(i, _)| *i == iss) else { return false };
    let aud_ok = match &claims["aud"] {
        Value::String(one) => one == aud,
        Value::Array(many) => many.iter().all(Value::is_string) && many.iter().any(|a| a == aud),
        _ => false,
    };
    let exp_ok = claims["exp"].as_u64().is_some_and(|exp| exp >= now + 60);
    let nbf_ok = match claims.get("nbf") {
        None => true,
        Some(nbf) => nbf.as_u64().is_some_and(|nbf| nbf + 60 <= now),
    };
    let sub_ok = claims["sub"].as_str().is_some_and(|s| !s.is_empty() && !s.starts_with("trigger:"));
    aud_ok && exp_ok && nbf_ok && sub_ok
}
