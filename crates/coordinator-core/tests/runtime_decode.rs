//! Decoding `runtime.yaml`: the sample file decodes to the same value serde
//! reads from it; every kind of mistake is reported at once, each at its exact
//! line and column; and a secret written as a value is never repeated, neither
//! in a diagnostic nor in the text shown in excerpts.

use coordinator_core::decode::runtime::{decode, redact};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::model::runtime::{Authorization, Role, RuntimeFile};
use coordinator_core::yaml;

mod support;

use support::{decode_file, positions};

/// The decoded file and its diagnostics, sorted.
fn decoded_full(text: &str) -> (Option<RuntimeFile>, Vec<Diagnostic>) {
    decode_file("runtime.yaml", text, decode)
}

/// The decoded file and the diagnostics as `line:column code`, in reading order.
fn decoded(text: &str) -> (Option<RuntimeFile>, Vec<String>) {
    let (file, diagnostics) = decoded_full(text);
    (file, positions(&diagnostics))
}

fn fixture() -> String {
    support::fixture("runtime.yaml")
}

#[test]
fn the_sample_file_decodes_to_what_serde_reads() {
    let text = fixture();
    let (file, diagnostics) = decoded(&text);
    assert_eq!(diagnostics, Vec::<String>::new());
    let Some(file) = file else { panic!("no file") };
    let json = yaml::parse("runtime.yaml", &text).map(|n| n.to_json()).unwrap_or_default();
    let by_serde: Option<RuntimeFile> = serde_json::from_value(json).ok();
    assert_eq!(by_serde.as_ref(), Some(&file));

    assert_eq!(file.payload_keys.active, "k2");
    assert_eq!(file.connections.keys().collect::<Vec<_>>(), ["casework", "messaging", "registry"]);
    assert!(
        matches!(file.connections["casework"].authorization, Authorization::PrivateKeyJwt(ref g) if g.key_id == "casework-2026-10")
    );
    assert_eq!(
        file.connections["registry"].event_signing_secret.as_ref().map(|s| s.as_str()),
        Some("env:BREG_EVENT_SECRET")
    );
    assert_eq!(file.observe_floor_seconds, Some(60));
    assert_eq!(file.access.grants[1].roles, [Role::Admit, Role::Read, Role::Operate]);
}

const MISTAKES: &str = "\
apiVersion: coordinator/v1
kind: Runtime
database:
  url: postgres://coordinator:hunter2@db/coordinator
payloadKeys:
  active: k3
  keys:
    k1: file:/run/secrets/k1
    k2: \"env:\"
listen: 0.0.0.0
package:
  path: p.pkg
  digest: sha256:ABC
connections:
  registry:
    product: breg
    baseUrl: https://user:pw-in-url@breg.example
    authorization:
      type: client-secret
      tokenEndpoint: id.example/token
      clientId: c
      clientSecret: s3cr3t-value
      privateKey: file:/x
    eventSigningSecret: env:BREG_EVENT_SECRET
    timeout: {connectSeconds: 5}
  bad name:
    product: Casework
    baseUrl: https://casework.example
    authorization: {type: private-key-jwt, tokenEndpoint: https://id.example/t, clientId: c, privateKey: file:/k}
    eventSigningSecret: env:1BAD
access:
  tokens:
  - subject: intake
    token: tok-en-literal
    roles: [admit, write]
  grants:
  - subject: ops
    workflow: reviewed-notice
    roles: []
  oidc:
  - issuer: https://id.example
    audience: coordinator
    jwks: http://id.example/jwks.json
";

#[test]
fn every_independent_mistake_is_reported_at_once() {
    let (file, diagnostics) = decoded(MISTAKES);
    assert!(file.is_none());
    assert_eq!(
        diagnostics,
        [
            "4:8 schema.invalid-value",
            "6:11 schema.invalid-value",
            "9:9 schema.invalid-value",
            "10:9 schema.invalid-value",
            "13:11 schema.invalid-value",
            "17:14 schema.invalid-value",
            "20:22 schema.invalid-value",
            "22:21 schema.invalid-value",
            "23:7 schema.unknown-field",
            "25:5 schema.unknown-field",
            "26:3 schema.invalid-value",
            "27:14 schema.invalid-value",
            "29:5 schema.missing-field",
            "30:25 schema.invalid-value",
            "34:12 schema.invalid-value",
            "35:20 schema.invalid-value",
            "39:12 schema.invalid-value",
            "43:11 schema.invalid-value",
        ]
    );
}

#[test]
fn missing_and_misplaced_fields_are_named_where_they_belong() {
    let text = "\
apiVersion: coordinator/v1
kind: Runtim
payloadKeys: {active: k1, keys: {k1: env:K1}}
listen: 127.0.0.1:7400
package: {path: p.pkg}
connections:
  casework:
    product: casework
    authorization: {tokenEndpoint: https://id.example/t}
access: {}
observeFloorSeconds: 0
";
    let (file, diagnostics) = decoded(text);
    assert!(file.is_none());
    assert_eq!(
        diagnostics,
        [
            "1:1 schema.missing-field",
            "2:7 schema.invalid-value",
            "5:1 schema.missing-field",
            "7:3 schema.missing-field",
            "9:5 schema.missing-field",
            "11:22 schema.invalid-value",
        ]
    );
}

#[test]
fn a_literal_secret_is_refused_without_being_repeated() {
    let (_, diagnostics) = decoded_full(MISTAKES);
    let literals = ["hunter2", "s3cr3t-value", "tok-en-literal", "pw-in-url", "1BAD"];
    for d in &diagnostics {
        for literal in literals {
            assert!(!d.message.contains(literal) && !d.help.contains(literal), "{literal} echoed: {d:?}");
        }
    }
    let secret =
        diagnostics.iter().find(|d| (d.line, d.column) == (22, 21)).map(|d| (d.message.as_str(), d.help.as_str()));
    assert_eq!(
        secret,
        Some((
            "the clientSecret of connection `registry` is not `env:NAME` or `file:PATH`: a secret must be a reference",
            "write env:NAME or file:PATH; the secret itself stays in the environment or the file, never in runtime.yaml"
        ))
    );
}

#[test]
fn excerpts_mask_every_value_that_may_be_a_secret_and_keep_positions() {
    let root = match yaml::parse("runtime.yaml", MISTAKES) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    let shown = redact(&root, MISTAKES);
    for literal in ["hunter2", "s3cr3t-value", "tok-en-literal", "pw-in-url"] {
        assert!(!shown.contains(literal), "{literal} shown:\n{shown}");
    }
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), MISTAKES.lines().count());
    let masked = |prefix: &str, literal: &str| format!("{prefix}{}", "*".repeat(literal.len()));
    assert_eq!(lines[3], masked("  url: ", "postgres://coordinator:hunter2@db/coordinator"));
    assert_eq!(lines[16], masked("    baseUrl: ", "https://user:pw-in-url@breg.example"));
    assert_eq!(lines[21], masked("      clientSecret: ", "s3cr3t-value"));
    assert_eq!(lines[33], masked("    token: ", "tok-en-literal"));
    // References, names and plain settings stay readable.
    assert_eq!(lines[7], "    k1: file:/run/secrets/k1");
    assert_eq!(lines[15], "    product: breg");
    assert_eq!(lines[23], "    eventSigningSecret: env:BREG_EVENT_SECRET");

    let block = "payloadKeys:\n  keys:\n    k1: |\n      line-one-secret\n      line-two-secret\n  active: k1\n";
    let root = match yaml::parse("runtime.yaml", block) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    let shown = redact(&root, block);
    assert_eq!(shown, "payloadKeys:\n  keys:\n    k1: |\n      ***************\n      ***************\n  active: k1\n");
}
