//! OIDC-issued JWTs as bearer tokens (docs/reference/protection.md#access-and-roles)
//! on a `coordinator serve` stack
//! whose runtime.yaml has an `access.oidc` issuer with a `file:` JWKS: a
//! valid JWT of a granted subject admits and reads by its grants; expired,
//! wrong audience or issuer, unknown `kid`, tampered, `alg: none` and HS256
//! tokens are `401`; no JWT is ever echoed. Also: what refuses the start.
//!
//! The signing key pairs are generated at test time (aws-lc-rs); the JWKS
//! holds their public keys.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use coordinator::process::deployment::{DeploymentError, RuntimeConfig};
use coordinator::process::serve::{self, Service};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, SimServer, deployment, free_port, migrated, sqlite_url};
use crate::support::{TOKEN, get_as, on_runtime, post_as, sample_input, tempdir};

/// The workflow of the deployment.
const WORKFLOW: &str = "reviewed-notice";
/// The issuer.
const ISS: &str = "https://id.example";
/// The audience.
const AUD: &str = "coordinator";

/// An ES256 key pair generated for one test, with its key id.
struct Signer {
    key: EncodingKey,
    kid: String,
}

impl Signer {
    fn new(kid: &str) -> Signer {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .unwrap_or_else(|e| panic!("P-256 key: {e}"));
        Signer { key: EncodingKey::from_ec_der(pkcs8.as_ref()), kid: kid.to_owned() }
    }

    /// The public JWK, with the key id.
    fn jwk(&self) -> Value {
        let mut jwk = Jwk::from_encoding_key(&self.key, Algorithm::ES256).unwrap_or_else(|e| panic!("JWK: {e}"));
        jwk.common.key_id = Some(self.kid.clone());
        serde_json::to_value(&jwk).unwrap_or_else(|e| panic!("JWK JSON: {e}"))
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap_or_else(|e| panic!("sign: {e}"))
    }
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISS, "aud": AUD, "sub": sub, "iat": now(), "exp": now() + 300})
}

/// Base64url without padding (to forge JWT parts).
fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `access:` with the operator's static token, the issuer and grants to JWT subjects.
fn access_yaml(jwks: &str) -> String {
    format!(
        "{{tokens: [{{subject: operator, token: file:operator-token, roles: [admit, read, operate]}}], \
         oidc: [{{issuer: \"{ISS}\", audience: {AUD}, jwks: \"{jwks}\"}}], \
         grants: [{{subject: alice, workflow: {WORKFLOW}, roles: [admit, read]}}, \
                  {{subject: bob, workflow: {WORKFLOW}, roles: [read]}}]}}"
    )
}

/// The stack under test, and the key its issuer publishes.
struct Stack {
    service: Service,
    signer: Signer,
    _sims: SimServer,
    _dir: tempfile::TempDir,
}

async fn stack() -> Stack {
    let signer = Signer::new("key-1");
    let dir = tempdir();
    let (mut spec, sims) = deployment(&sqlite_url(dir.path()), None, false).await;
    spec.access = access_yaml("file:keys/jwks.json");
    spec.files.push(("keys/jwks.json".to_owned(), json!({"keys": [signer.jwk()]}).to_string()));
    let service = migrated(&spec.write(dir.path())).await;
    Stack { service, signer, _sims: sims, _dir: dir }
}

#[test]
fn a_valid_jwt_acts_by_its_subjects_grants() {
    on_runtime(async {
        let stack = stack().await;
        let url = format!("{}/v1/runs", stack.service.url());
        let body = json!({"workflow": WORKFLOW, "revision": stack.service.revision, "input": sample_input()});
        let alice = stack.signer.sign(&claims("alice"));
        let (status, admitted) = post_as(&url, Some(&alice), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run = admitted["runId"].as_str().unwrap_or_default().to_owned();
        let owner = stack.service.engine.store().load(&run).await.unwrap_or_else(|e| panic!("{e}")).map(|r| r.owner);
        assert_eq!(owner.as_deref(), Some("alice"), "the run is owned by the JWT's subject");
        let (status, read) = get_as(&format!("{url}/{run}"), Some(&alice)).await;
        assert_eq!((status, read["runId"].as_str()), (200, Some(run.as_str())), "{read}");
        let (status, listing) = get_as(&url, Some(&alice)).await;
        assert_eq!(status, 200, "{listing}");
        assert_eq!(listing["runs"].as_array().map(Vec::len), Some(1), "{listing}");
        // Only its roles: no `operate`.
        let (status, inspection) = get_as(&format!("{url}/{run}/inspection"), Some(&alice)).await;
        assert_eq!((status, inspection["code"].as_str()), (403, Some("auth.forbidden")), "{inspection}");
        // bob only reads (and sees nothing of alice's); carol holds no grant at all.
        let bob = stack.signer.sign(&claims("bob"));
        let (status, refused) = post_as(&url, Some(&bob), &body).await;
        assert_eq!((status, refused["code"].as_str()), (403, Some("auth.forbidden")), "{refused}");
        assert_eq!(get_as(&format!("{url}/{run}"), Some(&bob)).await.0, 404);
        let carol = stack.signer.sign(&claims("carol"));
        assert_eq!(get_as(&url, Some(&carol)).await.0, 403);
        // Static tokens still work next to the issuer.
        assert_eq!(get_as(&format!("{url}/{run}/inspection"), Some(TOKEN)).await.0, 200);
        for (who, answer) in [("alice", &admitted), ("alice", &read), ("alice", &inspection), ("bob", &refused)] {
            assert!(!answer.to_string().contains(&alice) && !answer.to_string().contains(&bob), "{who}: {answer}");
        }
    });
}

#[test]
fn every_bad_jwt_is_unauthenticated_and_never_echoed() {
    on_runtime(async {
        let stack = stack().await;
        let url = format!("{}/v1/runs", stack.service.url());
        let signer = &stack.signer;
        let with = |change: &dyn Fn(&mut Value)| {
            let mut c = claims("alice");
            change(&mut c);
            signer.sign(&c)
        };
        let valid = signer.sign(&claims("alice"));
        let parts: Vec<&str> = valid.split('.').collect();
        let forged = base64url(claims("operator").to_string().as_bytes());
        let public_key = signer.jwk().to_string();
        let hmac = EncodingKey::from_secret(public_key.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let mut hs_header = Header::new(Algorithm::HS256);
        hs_header.kid = Some(signer.kid.clone());
        let hs256 = jsonwebtoken::encode(&hs_header, &claims("alice"), &hmac).unwrap_or_else(|e| panic!("{e}"));
        let none_header = base64url(br#"{"alg":"none","typ":"JWT","kid":"key-1"}"#);
        let cases = [
            ("expired", with(&|c| c["exp"] = json!(now() - 120)), Some("expired")),
            ("wrong audience", with(&|c| c["aud"] = json!("another-service")), Some("aud")),
            ("wrong issuer", with(&|c| c["iss"] = json!("https://evil.example")), Some("iss")),
            ("unknown kid", Signer::new("key-2").sign(&claims("alice")), Some("kid")),
            ("another key, same kid", Signer::new("key-1").sign(&claims("alice")), Some("signature")),
            ("tampered payload", format!("{}.{forged}.{}", parts[0], parts[2]), Some("signature")),
            ("alg none", format!("{none_header}.{forged}."), None),
            ("HS256 signed with the public key", hs256, Some("alg")),
            ("reserved subject", with(&|c| c["sub"] = json!("trigger:casework")), Some("sub")),
        ];
        for (case, token, reason) in cases {
            let (status, body) = get_as(&url, Some(&token)).await;
            assert_eq!((status, body["code"].as_str()), (401, Some("auth.unauthenticated")), "{case}: {body}");
            let message = body["message"].as_str().unwrap_or_default();
            if let Some(reason) = reason {
                assert!(message.contains(reason), "{case}: the message says why: {message}");
            }
            assert!(!body.to_string().contains(&token), "{case}: the token is echoed");
            assert!(!body.to_string().contains(parts[1]), "{case}: a token part is echoed");
        }
        assert_eq!(get_as(&url, Some(&valid)).await.0, 200, "the valid token still works");
    });
}

#[test]
fn unusable_jwks_refuse_the_start() {
    on_runtime(async {
        let dir = tempdir();
        let mut spec = DeploymentSpec::new(&sqlite_url(dir.path()), "http://127.0.0.1:9");
        spec.files.push(("not-jwks.json".to_owned(), "{\"keys\": 3}".to_owned()));
        // (reference, whether the refusal is "unavailable" (exit code 3), text of the message)
        let cases =
            [("file:missing.json", true, "cannot be read"), ("file:not-jwks.json", false, "not a JWKS document")];
        for (jwks, unavailable, text) in cases {
            spec.access = access_yaml(jwks);
            let file = spec.write(dir.path());
            let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
            match config.resolve() {
                Err(e @ DeploymentError::Jwks { .. }) => {
                    let message = e.to_string();
                    assert!(message.contains(ISS) && message.contains(jwks) && message.contains(text), "{message}");
                    assert_eq!(e.is_unavailable(), unavailable, "{message}");
                }
                other => panic!("{jwks}: expected a refusal, got {other:?}"),
            }
        }
        // A URL is fetched when the service starts: unreachable, it does not start (exit code 3).
        let port = free_port();
        spec.access = access_yaml(&format!("https://127.0.0.1:{port}/jwks.json"));
        let file = spec.write(dir.path());
        let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
        let deployment = config.resolve().unwrap_or_else(|e| panic!("resolve: {e}"));
        match serve::start(deployment).await {
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                assert!(e.to_string().contains("cannot be fetched"), "{e}");
            }
            Ok(_) => panic!("started without the issuer's keys"),
        }
    });
}

#[test]
fn the_console_signs_in_with_a_jwt_for_no_longer_than_it_lasts() {
    on_runtime(async {
        let stack = stack().await;
        let base = stack.service.url();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut claims = claims("alice");
        claims["exp"] = json!(now() + 120);
        let alice = stack.signer.sign(&claims);
        let signed = http
            .post(format!("{base}/console/sign-in"))
            .form(&[("token", alice.as_str())])
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(signed.status().as_u16(), 303);
        let set = signed.headers().get("set-cookie").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let max_age: u64 = set
            .split(';')
            .find_map(|p| p.trim().strip_prefix("Max-Age="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX);
        assert!(max_age <= 120, "the session ends with the JWT: {set}");
        assert!(!set.contains(&alice), "the cookie holds no token");
        let cookie = set.split(';').next().unwrap_or_default().to_owned();
        let page = http
            .get(format!("{base}/console/runs"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(page.status().as_u16(), 200);
        let html = page.text().await.unwrap_or_default();
        assert!(html.contains("Signed in as <strong>alice</strong>"), "{html}");
        // alice only reads and admits: the inbox is for operators.
        let inbox = http
            .get(format!("{base}/console/attention"))
            .header("cookie", &cookie)
            .send()
            .await
            .map(|r| r.status().as_u16());
        assert_eq!(inbox.ok(), Some(403));
        let forged = http
            .post(format!("{base}/console/sign-in"))
            .form(&[("token", format!("{alice}x").as_str())])
            .send()
            .await
            .map(|r| r.status().as_u16());
        assert_eq!(forged.ok(), Some(401), "a tampered JWT does not sign in");
    });
}
