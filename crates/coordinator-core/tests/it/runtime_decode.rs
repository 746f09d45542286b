//! Decoding `runtime.yaml`: the sample file decodes to the same value serde
//! reads from it; every kind of mistake is reported at once, each at its exact
//! line and column; and a secret written as a value is never repeated, neither
//! in a diagnostic nor in the text shown in excerpts. The optional
//! `shutdownGraceSeconds`, `logging` and `telemetry` decode when valid and are
//! refused, each mistake at its place, when not.

use coordinator_core::decode::runtime::{decode, redact};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::model::runtime::{Authorization, LogFormat, OtlpProtocol, Role, RuntimeFile};
use coordinator_core::yaml;

use crate::support::{decode_file, fixture, like_serde, positions};

/// The decoded file and its diagnostics, sorted.
fn decoded_full(text: &str) -> (Option<RuntimeFile>, Vec<Diagnostic>) {
    decode_file("runtime.yaml", text, decode)
}

/// The decoded file and the diagnostics as `line:column code`, in reading order.
fn decoded(text: &str) -> (Option<RuntimeFile>, Vec<String>) {
    let (file, diagnostics) = decoded_full(text);
    (file, positions(&diagnostics))
}

#[test]
fn the_sample_file_decodes_to_what_serde_reads() {
    let file = like_serde("runtime.yaml", &fixture("runtime.yaml"), decode);

    assert_eq!(file.payload_keys.active, "k2");
    assert_eq!(file.connections.keys().collect::<Vec<_>>(), ["casework", "messaging", "registry"]);
    assert!(
        matches!(file.connections["casework"].authorization, Some(Authorization::PrivateKeyJwt(ref g)) if g.key_id == "casework-2026-10")
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

/// The smallest valid file: eight lines, so that a field appended to it starts on line 9.
const MINIMAL: &str = "\
apiVersion: coordinator/v1
kind: Runtime
database: {url: env:DATABASE_URL}
payloadKeys: {active: k1, keys: {k1: env:K1}}
listen: 127.0.0.1:7400
package: {path: p.pkg, digest: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
connections: {}
access: {}
";

/// [`MINIMAL`] with `extra` appended (from line 9).
fn decoded_with(extra: &str) -> (Option<RuntimeFile>, Vec<Diagnostic>) {
    decoded_full(&format!("{MINIMAL}{extra}"))
}

#[test]
fn shutdown_logging_and_telemetry_are_optional() {
    let (file, diagnostics) = decoded(MINIMAL);
    assert_eq!(diagnostics, Vec::<String>::new());
    let Some(file) = file else { panic!("no file") };
    assert_eq!(file.shutdown_grace_seconds, None);
    assert_eq!(file.logging, None);
    assert_eq!(file.telemetry, None);
    // The fixture sets none of them either.
    let (fixture, _) = decoded(&fixture("runtime.yaml"));
    assert!(
        fixture.is_some_and(|f| f.shutdown_grace_seconds.is_none() && f.logging.is_none() && f.telemetry.is_none())
    );
}

#[test]
fn shutdown_logging_and_telemetry_decode_to_what_serde_reads() {
    let text = format!(
        "{MINIMAL}\
shutdownGraceSeconds: 45
retention: {{endedRunsDays: 30}}
logging:
  filter: info, coordinator=debug,sqlx::pool=WARN
  format: json
telemetry:
  otlp: {{endpoint: http://otel-collector:4318, protocol: http/protobuf}}
  serviceName: coordinator-staging
  sampleRatio: 0.25
"
    );
    let file = like_serde("runtime.yaml", &text, decode);

    assert_eq!(file.shutdown_grace_seconds, Some(45));
    assert_eq!(file.retention.map(|r| r.ended_runs_days), Some(30));
    let Some(logging) = file.logging else { panic!("no logging") };
    assert_eq!(logging.filter.as_ref().map(|f| f.as_str()), Some("info, coordinator=debug,sqlx::pool=WARN"));
    assert_eq!(logging.format, Some(LogFormat::Json));
    let Some(telemetry) = file.telemetry else { panic!("no telemetry") };
    assert_eq!(telemetry.otlp.endpoint, "http://otel-collector:4318");
    assert_eq!(telemetry.otlp.protocol, Some(OtlpProtocol::HttpProtobuf));
    assert_eq!(telemetry.service_name.as_deref(), Some("coordinator-staging"));
    assert_eq!(telemetry.sample_ratio.map(|r| r.get()), Some(0.25));
}

#[test]
fn within_logging_and_telemetry_every_field_but_the_endpoint_is_optional() {
    let (file, diagnostics) = decoded_with("logging: {}\ntelemetry:\n  otlp: {endpoint: https://collector.example}\n");
    assert_eq!(positions(&diagnostics), Vec::<String>::new());
    let Some(file) = file else { panic!("no file") };
    let Some(logging) = file.logging else { panic!("no logging") };
    assert_eq!((logging.filter, logging.format), (None, None));
    let Some(telemetry) = file.telemetry else { panic!("no telemetry") };
    assert_eq!(
        (telemetry.otlp.protocol, telemetry.service_name.as_deref(), telemetry.sample_ratio),
        (None, None, None)
    );
    assert_eq!(telemetry.otlp.effective_protocol(), OtlpProtocol::Grpc);
    assert_eq!(telemetry.effective_service_name(), "coordinator");
    assert_eq!(telemetry.effective_sample_ratio().get(), 1.0);

    for (written, ratio) in [("0", 0.0), ("1", 1.0), ("1.0", 1.0), ("0.001", 0.001)] {
        let extra = format!("telemetry:\n  otlp: {{endpoint: http://c:4317}}\n  sampleRatio: {written}\n");
        let (file, diagnostics) = decoded_with(&extra);
        assert_eq!(positions(&diagnostics), Vec::<String>::new(), "{written}");
        let decoded = file.and_then(|f| f.telemetry).and_then(|t| t.sample_ratio).map(|r| r.get());
        assert_eq!(decoded, Some(ratio), "{written}");
    }
}

/// Each mistake (appended to [`MINIMAL`]) and where it is reported.
const SECTION_MISTAKES: &[(&str, &str)] = &[
    ("shutdownGraceSeconds: 0\n", "9:23 schema.invalid-value"),
    ("shutdownGraceSeconds: \"30\"\n", "9:23 schema.invalid-value"),
    ("shutdownGraceSeconds: 2.5\n", "9:23 schema.invalid-value"),
    ("logging:\n  filter: coordinator=loud\n", "10:11 schema.invalid-value"),
    ("logging:\n  filter: coord-inator=info\n", "10:11 schema.invalid-value"),
    ("logging:\n  filter: info,\n", "10:11 schema.invalid-value"),
    ("logging:\n  filter: 3\n", "10:11 schema.invalid-value"),
    ("logging:\n  format: xml\n", "10:11 schema.invalid-value"),
    ("logging:\n  level: debug\n", "10:3 schema.unknown-field"),
    ("logging: debug\n", "9:10 schema.invalid-value"),
    ("telemetry:\n  serviceName: coordinator\n", "9:1 schema.missing-field"),
    ("telemetry:\n  otlp: {protocol: grpc}\n", "10:3 schema.missing-field"),
    ("telemetry:\n  otlp:\n    endpoint: ftp://collector:21\n", "11:15 schema.invalid-value"),
    ("telemetry:\n  otlp:\n    endpoint: http://user:pass@collector:4317\n", "11:15 schema.invalid-value"),
    ("telemetry:\n  otlp:\n    endpoint: http://c:4317\n    protocol: http/json\n", "12:15 schema.invalid-value"),
    ("telemetry:\n  otlp:\n    endpoint: http://c:4317\n    headers: {}\n", "12:5 schema.unknown-field"),
    ("telemetry:\n  otlp: {endpoint: http://c:4317}\n  sampleRatio: 1.5\n", "11:16 schema.invalid-value"),
    ("telemetry:\n  otlp: {endpoint: http://c:4317}\n  sampleRatio: -0.1\n", "11:16 schema.invalid-value"),
    ("telemetry:\n  otlp: {endpoint: http://c:4317}\n  sampleRatio: \"0.5\"\n", "11:16 schema.invalid-value"),
    ("telemetry:\n  otlp: {endpoint: http://c:4317}\n  serviceName: \" \"\n", "11:16 schema.invalid-value"),
    ("telemetry:\n  otlp: {endpoint: http://c:4317}\n  exporter: otlp\n", "11:3 schema.unknown-field"),
    ("retention: {}\n", "9:1 schema.missing-field"),
    ("retention:\n  endedRunsDays: 0\n", "10:18 schema.invalid-value"),
    ("retention:\n  endedRunsDays: 36501\n", "10:18 schema.invalid-value"),
    ("retention:\n  endedRunsDays: \"30\"\n", "10:18 schema.invalid-value"),
    ("retention:\n  endedRunsDays: 30\n  auditDays: 10\n", "11:3 schema.unknown-field"),
    ("retention: 30\n", "9:12 schema.invalid-value"),
];

#[test]
fn every_mistake_in_shutdown_logging_and_telemetry_is_reported_where_it_is() {
    for (extra, expected) in SECTION_MISTAKES {
        let (file, diagnostics) = decoded_with(extra);
        assert_eq!(positions(&diagnostics), [*expected], "{extra}");
        // An unknown field is an error that refuses the file, yet leaves the value decoded.
        assert_eq!(file.is_none(), !expected.ends_with("schema.unknown-field"), "{extra}");
    }
}

#[test]
fn mistakes_in_the_three_settings_are_reported_together() {
    let (file, diagnostics) = decoded_with(
        "\
shutdownGraceSeconds: 0
logging: {filter: 'info,,warn', format: xml}
telemetry:
  otlp: {endpoint: 'ftp://c', protocol: http/json}
  sampleRatio: 2
  exporter: otlp
",
    );
    assert!(file.is_none());
    assert_eq!(
        positions(&diagnostics),
        [
            "9:23 schema.invalid-value",
            "10:19 schema.invalid-value",
            "10:41 schema.invalid-value",
            "12:20 schema.invalid-value",
            "12:41 schema.invalid-value",
            "13:16 schema.invalid-value",
            "14:3 schema.unknown-field",
        ]
    );
}

#[test]
fn a_bad_filter_is_named_by_its_directive_with_a_valid_example() {
    let message = |extra: &str| {
        let (_, diagnostics) = decoded_with(extra);
        diagnostics.first().map(|d| (d.message.clone(), d.help.clone())).unwrap_or_default()
    };
    let (loud, help) = message("logging:\n  filter: info,coordinator=loud\n");
    assert_eq!(
        loud,
        "logging.filter is not a log filter: directive 2 (`coordinator=loud`): `loud` is not one of \
         trace, debug, info, warn, error, off"
    );
    assert!(help.contains("`info,coordinator=debug,sqlx=warn`"), "{help}");
    let (target, _) = message("logging:\n  filter: coord-inator=info\n");
    assert!(target.contains("directive 1 (`coord-inator=info`): the target `coord-inator`"), "{target}");
    let (empty, _) = message("logging:\n  filter: info,\n");
    assert_eq!(empty, "logging.filter is not a log filter: directive 2 is empty");
}

#[test]
fn an_endpoint_with_credentials_is_refused_and_masked_without_being_repeated() {
    let text = format!("{MINIMAL}telemetry:\n  otlp:\n    endpoint: http://user:pass-in-url@collector:4317\n");
    let (_, diagnostics) = decoded_full(&text);
    let shown: Vec<(&str, &str)> = diagnostics.iter().map(|d| (d.message.as_str(), d.help.as_str())).collect();
    assert_eq!(
        shown,
        [(
            "telemetry.otlp.endpoint carries credentials (`user:password@`)",
            "write the collector's base address as an http:// or https:// URL without credentials, \
             e.g. `http://otel-collector:4317` for grpc or `http://otel-collector:4318` for http/protobuf"
        )]
    );
    let root = match yaml::parse("runtime.yaml", &text) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    let excerpt = redact(&root, &text);
    assert!(!excerpt.contains("pass-in-url"), "{excerpt}");
    // The settings themselves are not secrets: they stay readable.
    let settings = format!(
        "{MINIMAL}shutdownGraceSeconds: 45\nlogging: {{filter: info, format: json}}\n\
         telemetry: {{otlp: {{endpoint: http://c:4317, protocol: grpc}}, serviceName: c, sampleRatio: 0.5}}\n"
    );
    let root = match yaml::parse("runtime.yaml", &settings) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    assert_eq!(redact(&root, &settings), settings);
}
