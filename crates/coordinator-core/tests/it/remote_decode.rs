//! Remote workers' configuration: a `runtime.yaml` connection with `dispatch:
//! remote`, the `grpc` listener, and a worker's `worker.yaml`. The sample
//! files decode to what serde reads and survive a round trip through JSON;
//! every mistake is reported at its exact line and column, with the code
//! and, where it says where a field belongs, the message.

use coordinator_core::decode::{runtime, worker};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::model::runtime::{Authorization, Dispatch, Role, RuntimeFile};
use coordinator_core::model::worker::WorkerFile;
use coordinator_core::yaml;

use crate::support::{PACKAGE, RUNTIME_HEAD, decode_file, fixture, like_serde, positions};

fn runtime_file(text: &str) -> (Option<RuntimeFile>, Vec<Diagnostic>) {
    decode_file("runtime.yaml", text, runtime::decode)
}

fn worker_file(text: &str) -> (Option<WorkerFile>, Vec<Diagnostic>) {
    decode_file("worker.yaml", text, worker::decode)
}

/// The value after serialising it to JSON and reading it back.
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> Option<T> {
    serde_json::to_value(value).ok().and_then(|json| serde_json::from_value(json).ok())
}

#[test]
fn a_remote_runtime_file_decodes_to_what_serde_reads_and_round_trips() {
    let file: RuntimeFile = like_serde("runtime.yaml", &fixture("runtime-remote.yaml"), runtime::decode);
    assert_eq!(round_trip(&file).as_ref(), Some(&file));

    let registry = &file.connections["registry"];
    assert_eq!(registry.dispatch, Dispatch::Remote);
    assert!(registry.is_remote());
    assert_eq!(registry.workers, ["registry-worker", "registry-worker-dr"]);
    assert_eq!((registry.base_url.as_deref(), registry.authorization.as_ref()), (None, None));
    assert_eq!(registry.event_signing_secret.as_ref().map(|s| s.as_str()), Some("env:BREG_EVENT_SECRET"));
    let casework = &file.connections["casework"];
    assert_eq!(casework.dispatch, Dispatch::InProcess);
    assert!(casework.workers.is_empty());
    assert_eq!(casework.base_url.as_deref(), Some("https://casework.internal.example"));
    let Some(grpc) = &file.grpc else { panic!("no grpc") };
    assert_eq!(grpc.listen, "0.0.0.0:7401");
    assert_eq!(grpc.tls.as_ref().map(|t| t.private_key.as_str()), Some("file:/run/secrets/grpc.key"));
    assert_eq!(file.access.tokens[0].roles, [Role::Worker]);
    assert_eq!(file.access.grants[0].roles, [Role::Worker]);
    // The default is not written out: an in-process file serialises as before.
    let json = serde_json::to_value(casework).unwrap_or_default();
    assert!(json.get("dispatch").is_none() && json.get("workers").is_none(), "{json}");
}

#[test]
fn a_worker_file_decodes_to_what_serde_reads_and_round_trips() {
    let file: WorkerFile = like_serde("worker.yaml", &fixture("worker.yaml"), worker::decode);
    assert_eq!(round_trip(&file).as_ref(), Some(&file));

    assert_eq!(file.coordinator.address, "https://coordinator.internal.example:7401");
    assert_eq!(file.coordinator.token.as_str(), "env:REGISTRY_WORKER_TOKEN");
    assert_eq!(
        file.coordinator.ca_certificate.as_ref().map(|c| c.as_str()),
        Some("file:/etc/coordinator/internal-ca.pem")
    );
    assert_eq!(file.effective_concurrency(), 32);
    let registry = &file.connections["registry"];
    assert_eq!(registry.dispatch, Dispatch::InProcess);
    assert_eq!(registry.base_url.as_deref(), Some("https://breg.internal.example/api"));
    assert!(matches!(&registry.authorization, Some(Authorization::PrivateKeyJwt(g)) if g.key_id == "registry-2026-10"));
    assert_eq!(registry.effective_timeouts().request_seconds, 20);
}

/// A runtime file of 11 lines ending inside the connection `registry` (at
/// line 10), so that the fields appended to it start on line 12, four spaces
/// in; `grpc` is line 8.
fn runtime_with(grpc: bool, connection: &str) -> String {
    let grpc = if grpc { "grpc: {listen: 0.0.0.0:7401}" } else { "observeFloorSeconds: 30" };
    format!(
        "\
{RUNTIME_HEAD}{PACKAGE}
access: {{tokens: [{{subject: registry-worker, token: env:W, roles: [worker]}}]}}
{grpc}
connections:
  registry:
    product: breg
{connection}"
    )
}

const IN_PROCESS: &str = "    baseUrl: https://breg.example\n    authorization: {type: client-secret, \
                          tokenEndpoint: https://id.example/t, clientId: c, clientSecret: env:S}\n";

/// Each connection (appended to [`runtime_with`], with `grpc`) and where its mistakes are reported.
const CONNECTION_MISTAKES: &[(&str, &[&str])] = &[
    // An unknown dispatch, and nothing else about the connection.
    ("    dispatch: remot\n", &["12:15 schema.invalid-value"]),
    ("    dispatch: [remote]\n", &["12:15 schema.invalid-value"]),
    // A remote connection with the product's address, credentials or timeouts.
    (
        "    dispatch: remote\n    workers: [registry-worker]\n    baseUrl: https://breg.example\n",
        &["14:5 schema.unknown-field"],
    ),
    (
        "    dispatch: remote\n    workers: [registry-worker]\n    authorization: {type: client-secret}\n",
        &["14:5 schema.unknown-field"],
    ),
    (
        "    dispatch: remote\n    workers: [registry-worker]\n    timeouts: {connectSeconds: 5, requestSeconds: 5}\n",
        &["14:5 schema.unknown-field"],
    ),
    // An in-process connection (by default or said) without its address and credentials.
    ("    eventSigningSecret: env:E\n", &["10:3 schema.missing-field", "10:3 schema.missing-field"]),
    ("    dispatch: in-process\n    baseUrl: https://breg.example\n", &["10:3 schema.missing-field"]),
    // `workers` on an in-process connection.
    (
        "    workers: [registry-worker]\n    baseUrl: https://breg.example\n    authorization: {type: client-secret, tokenEndpoint: https://id.example/t, clientId: c, clientSecret: env:S}\n",
        &["12:5 schema.unknown-field"],
    ),
    // A remote connection without workers, with none, with one twice, with an empty one.
    ("    dispatch: remote\n", &["10:3 schema.missing-field"]),
    ("    dispatch: remote\n    workers: []\n", &["13:14 schema.invalid-value"]),
    ("    dispatch: remote\n    workers: [registry-worker, registry-worker]\n", &["13:32 schema.invalid-value"]),
    ("    dispatch: remote\n    workers: [\" \"]\n", &["13:15 schema.invalid-value"]),
    ("    dispatch: remote\n    workers: registry-worker\n", &["13:14 schema.invalid-value"]),
];

#[test]
fn every_mistake_in_a_connection_is_reported_where_it_is() {
    for (connection, expected) in CONNECTION_MISTAKES {
        let (_, diagnostics) = runtime_file(&runtime_with(true, connection));
        assert_eq!(positions(&diagnostics), *expected, "{connection}");
    }
    for valid in [IN_PROCESS, "    dispatch: remote\n    workers: [registry-worker]\n    eventSigningSecret: env:E\n"] {
        let (file, diagnostics) = runtime_file(&runtime_with(true, valid));
        assert_eq!(positions(&diagnostics), Vec::<String>::new(), "{valid}");
        assert!(file.is_some(), "{valid}");
    }
}

#[test]
fn a_remote_connection_needs_the_grpc_listener() {
    let remote = "    dispatch: remote\n    workers: [registry-worker]\n";
    let (file, diagnostics) = runtime_file(&runtime_with(false, remote));
    assert!(file.is_none());
    assert_eq!(positions(&diagnostics), ["12:15 schema.missing-field"]);
    assert!(diagnostics[0].message.contains("no `grpc` listener"), "{}", diagnostics[0].message);
    // Reported even when the connection has another mistake.
    let (_, diagnostics) = runtime_file(&runtime_with(false, "    dispatch: remote\n"));
    assert_eq!(positions(&diagnostics), ["10:3 schema.missing-field", "12:15 schema.missing-field"]);
    // In-process connections need no listener.
    let (file, diagnostics) = runtime_file(&runtime_with(false, IN_PROCESS));
    assert_eq!((file.is_some(), positions(&diagnostics)), (true, vec![]));
}

#[test]
fn a_misplaced_field_says_where_it_belongs() {
    let message = |connection: &str| {
        let (_, diagnostics) = runtime_file(&runtime_with(true, connection));
        diagnostics.first().map(|d| (d.message.clone(), d.help.clone())).unwrap_or_default()
    };
    let (credentials, help) =
        message("    dispatch: remote\n    workers: [registry-worker]\n    authorization: {type: client-secret}\n");
    assert_eq!(
        credentials,
        "connection `registry` is remote: its `authorization` belongs in the worker.yaml of the workers that \
         serve it, not in runtime.yaml"
    );
    assert!(help.contains("next to the product"), "{help}");
    let (workers, _) = message(&format!("{IN_PROCESS}    workers: [registry-worker]\n"));
    assert_eq!(
        workers,
        "connection `registry` is in-process: `workers` is only for a connection with `dispatch: remote`"
    );
    let (missing, help) = message("    dispatch: remote\n");
    assert_eq!(missing, "connection `registry` is remote but has no `workers`");
    assert!(help.contains("role `worker`"), "{help}");
}

/// Each mistake in `grpc` (line 8 of [`runtime_with`]) and where it is reported.
const GRPC_MISTAKES: &[(&str, &str)] = &[
    ("grpc: {listen: 7401}", "8:16 schema.invalid-value"),
    ("grpc: {listen: 127.0.0.1:7400}", "8:16 schema.invalid-value"),
    ("grpc: {}", "8:1 schema.missing-field"),
    ("grpc: {listen: 0.0.0.0:7401, port: 7401}", "8:30 schema.unknown-field"),
    ("grpc: {listen: 0.0.0.0:7401, tls: {certificate: file:/c}}", "8:30 schema.missing-field"),
    ("grpc: {listen: 0.0.0.0:7401, tls: {certificate: file:/c, privateKey: BEGIN-KEY}}", "8:70 schema.invalid-value"),
    ("grpc: 7401", "8:7 schema.invalid-value"),
];

#[test]
fn every_mistake_in_grpc_is_reported_where_it_is() {
    let base = runtime_with(true, IN_PROCESS);
    for (grpc, expected) in GRPC_MISTAKES {
        let text = base.replace("grpc: {listen: 0.0.0.0:7401}", grpc);
        let (_, diagnostics) = runtime_file(&text);
        assert_eq!(positions(&diagnostics), [*expected], "{grpc}");
        assert!(diagnostics.iter().all(|d| !d.message.contains("BEGIN-KEY")), "{grpc}");
    }
}

/// A worker file of 10 lines, so that a field appended to it starts on line 11.
const WORKER: &str = "\
apiVersion: coordinator/v1
kind: Worker
coordinator:
  address: https://coordinator.internal.example:7401
  token: env:WORKER_TOKEN
connections:
  registry:
    product: breg
    baseUrl: https://breg.internal.example
    authorization: {type: client-secret, tokenEndpoint: https://id.example/t, clientId: w, clientSecret: env:S}
";

/// Each mistake in a worker file: `(from, to)` replaced in [`WORKER`] (once),
/// then a text appended to it, and where the mistake is reported.
const WORKER_MISTAKES: &[((&str, &str), &str, &str)] = &[
    (("", ""), "    dispatch: remote\n", "11:5 schema.unknown-field"),
    (("", ""), "    workers: [registry-worker]\n", "11:5 schema.unknown-field"),
    (("", ""), "    eventSigningSecret: env:E\n", "11:5 schema.unknown-field"),
    (("", ""), "    timeout: {connectSeconds: 5}\n", "11:5 schema.unknown-field"),
    (("", ""), "concurrency: 0\n", "11:14 schema.invalid-value"),
    (("", ""), "concurrency: 1025\n", "11:14 schema.invalid-value"),
    (("", ""), "concurrency: many\n", "11:14 schema.invalid-value"),
    (("", ""), "workers: 2\n", "11:1 schema.unknown-field"),
    (("    baseUrl: https://breg.internal.example\n", ""), "", "7:3 schema.missing-field"),
    (("kind: Worker", "kind: Runtime"), "", "2:7 schema.invalid-value"),
    (("env:WORKER_TOKEN", "hunter2-literal"), "", "5:10 schema.invalid-value"),
    (("  token: env:WORKER_TOKEN\n", ""), "", "3:1 schema.missing-field"),
    ((":7401", ":7401\n  caCertificate: BEGIN-CERT"), "", "5:18 schema.invalid-value"),
    (
        ("https://coordinator.internal.example:7401", "ftp://coordinator.internal.example"),
        "",
        "4:12 schema.invalid-value",
    ),
    (
        ("https://coordinator.internal.example:7401", "https://coordinator.internal.example/grpc"),
        "",
        "4:12 schema.invalid-value",
    ),
    (
        ("https://coordinator.internal.example:7401", "https://user:pw@coordinator.internal.example"),
        "",
        "4:12 schema.invalid-value",
    ),
    (
        (
            "https://coordinator.internal.example:7401",
            "http://coordinator.internal.example:7401\n  caCertificate: file:/ca.pem",
        ),
        "",
        "5:3 schema.unknown-field",
    ),
];

#[test]
fn every_mistake_in_a_worker_file_is_reported_where_it_is() {
    for ((from, to), extra, expected) in WORKER_MISTAKES {
        let mut text = if from.is_empty() { WORKER.to_owned() } else { WORKER.replacen(from, to, 1) };
        text.push_str(extra);
        let (file, diagnostics) = worker_file(&text);
        assert_eq!(positions(&diagnostics), [*expected], "{from:?} -> {to:?}, {extra:?}");
        // An unknown field refuses the file, yet leaves the value decoded.
        assert_eq!(file.is_none(), !expected.ends_with("schema.unknown-field"), "{text}");
        for literal in ["hunter2-literal", "BEGIN-CERT", "user:pw"] {
            assert!(diagnostics.iter().all(|d| !d.message.contains(literal) && !d.help.contains(literal)));
        }
    }
    let (file, diagnostics) = worker_file(&format!("{WORKER}concurrency: 1024\n"));
    assert_eq!((file.map(|f| f.effective_concurrency()), positions(&diagnostics)), (Some(1024), vec![]));
    let (file, _) = worker_file(WORKER);
    assert_eq!(file.map(|f| f.effective_concurrency()), Some(WorkerFile::DEFAULT_CONCURRENCY));
}

#[test]
fn a_worker_file_serves_at_least_one_connection() {
    let text = "apiVersion: coordinator/v1\nkind: Worker\ncoordinator: {address: http://c:7401, token: env:T}\nconnections: {}\n";
    let (file, diagnostics) = worker_file(text);
    assert!(file.is_none());
    assert_eq!(positions(&diagnostics), ["4:14 schema.invalid-value"]);
}

#[test]
fn a_runtime_only_field_in_a_worker_file_says_where_it_belongs() {
    let (_, diagnostics) = worker_file(&format!("{WORKER}    eventSigningSecret: env:E\n"));
    let (message, help) = diagnostics.first().map(|d| (d.message.as_str(), d.help.as_str())).unwrap_or_default();
    assert_eq!(message, "connection `registry` has an `eventSigningSecret`, which a worker never uses");
    assert!(help.contains("coordinator's runtime.yaml"), "{help}");
    let (_, diagnostics) = worker_file(&format!("{WORKER}    dispatch: remote\n"));
    assert!(diagnostics.first().is_some_and(|d| d.help.contains("runtime.yaml")), "{diagnostics:?}");
}

#[test]
fn excerpts_of_a_worker_file_mask_literal_secrets_and_keep_settings() {
    let text = WORKER.replace("env:WORKER_TOKEN", "hunter2-literal");
    let root = match yaml::parse("worker.yaml", &text) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    let shown = runtime::redact(&root, &text);
    assert!(!shown.contains("hunter2-literal"), "{shown}");
    let sample = fixture("worker.yaml");
    let root = match yaml::parse("worker.yaml", &sample) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    assert_eq!(runtime::redact(&root, &sample), sample);
    let remote = fixture("runtime-remote.yaml");
    let root = match yaml::parse("runtime.yaml", &remote) {
        Ok(root) => root,
        Err(d) => panic!("{d:?}"),
    };
    assert_eq!(runtime::redact(&root, &remote), remote);
}

/// A connection's `breaker`, each field optional; mistakes where they are; never in a worker's file.
#[test]
fn a_breaker_decodes_with_its_defaults_and_is_the_deployments() {
    let breaker = |fields: &str| runtime_file(&runtime_with(true, &format!("{IN_PROCESS}    breaker: {fields}\n")));
    let (file, diagnostics) = breaker("{openAfterFailures: 3, probeEverySeconds: 10}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let settings = file.and_then(|f| f.connections["registry"].breaker).map(|b| b.settings());
    assert_eq!(settings.map(|s| (s.open_after_failures, s.probe_every_ms)), Some((3, 10_000)));
    let (file, diagnostics) = breaker("{probeEverySeconds: 5}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let config = file.and_then(|f| f.connections["registry"].breaker);
    assert_eq!(config.map(|b| (b.open_after_failures, b.probe_every_seconds)), Some((5, 5)), "the default count");
    for (fields, expected) in [
        ("{openAfterFailures: 0}", "14:34 schema.invalid-value"),
        ("{probeEverySeconds: -1}", "14:34 schema.invalid-value"),
        ("{probeEvery: 5}", "14:15 schema.unknown-field"),
    ] {
        let (_, diagnostics) = breaker(fields);
        assert_eq!(positions(&diagnostics), [expected], "{fields}");
    }
    // A remote connection's breaker is the deployment's too; a worker's file has none.
    let remote = "    dispatch: remote\n    workers: [registry-worker]\n    breaker: {openAfterFailures: 3}\n";
    let (file, diagnostics) = runtime_file(&runtime_with(true, remote));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(file.and_then(|f| f.connections["registry"].breaker).map(|b| b.open_after_failures), Some(3));
    let (_, diagnostics) = worker_file(&format!("{WORKER}    breaker: {{openAfterFailures: 3}}\n"));
    assert_eq!(positions(&diagnostics), ["11:5 schema.unknown-field"]);
    assert!(diagnostics[0].message.contains("the coordinator keeps for the whole deployment"), "{diagnostics:?}");
}

/// A connection's `limits`: at least one limit, a burst only with a rate;
/// each mistake where it is; in runtime.yaml and in a worker's file.
#[test]
fn limits_decode_and_each_mistake_is_named_where_it_is() {
    let with = |fields: &str| runtime_file(&runtime_with(true, &format!("{IN_PROCESS}    limits: {fields}\n")));
    let (file, diagnostics) = with("{concurrency: 4, ratePerSecond: 0.5, burst: 2}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let limits = file.and_then(|f| f.connections["registry"].limits).map(|l| l.limits());
    assert_eq!(limits.map(|l| (l.concurrency, l.rate_per_second, l.burst)), Some((Some(4), Some(0.5), Some(2))));
    let (file, diagnostics) = with("{ratePerSecond: 200}");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(file.and_then(|f| f.connections["registry"].limits).map(|l| l.limits().bucket()), Some(200.0));
    for (fields, expected) in [
        ("{}", "14:5 schema.missing-field"),
        ("{burst: 3}", "14:21 schema.invalid-value"),
        ("{concurrency: 0}", "14:27 schema.invalid-value"),
        ("{ratePerSecond: 0}", "14:29 schema.invalid-value"),
        ("{ratePerSecond: -2}", "14:29 schema.invalid-value"),
        ("{concurrency: 2, rate: 5}", "14:30 schema.unknown-field"),
    ] {
        let (_, diagnostics) = with(fields);
        assert_eq!(positions(&diagnostics), [expected], "{fields}: {diagnostics:?}");
    }
    // A remote connection's limits, in runtime.yaml and in a worker's own file.
    let remote = "    dispatch: remote\n    workers: [registry-worker]\n    limits: {concurrency: 3}\n";
    let (file, diagnostics) = runtime_file(&runtime_with(true, remote));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(file.and_then(|f| f.connections["registry"].limits).and_then(|l| l.concurrency), Some(3));
    let (file, diagnostics) = worker_file(&format!("{WORKER}    limits: {{ratePerSecond: 25}}\n"));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let rate = file.and_then(|f| f.connections["registry"].limits).map(|l| l.limits().rate_per_second);
    assert_eq!(rate, Some(Some(25.0)));
    let (_, diagnostics) = worker_file(&format!("{WORKER}    limits: {{burst: 2}}\n"));
    assert_eq!(positions(&diagnostics), ["11:21 schema.invalid-value"]);
}
