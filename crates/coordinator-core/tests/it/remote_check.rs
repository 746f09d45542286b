//! Checking remote workers' configuration beyond its shape: every subject a
//! remote connection lists in `workers` can authenticate holding the role
//! `worker` (an error when none can, so the connection could never be
//! served; a warning for the others), the gRPC listener's TLS references are
//! probed with the others (a remote connection has no authorization to
//! probe), and a `worker.yaml` is checked on its own, its references probed.

use coordinator_core::check::runtime::{self, RuntimeInput, SecretProbe, SecretProblem};
use coordinator_core::check::worker::{WorkerInput, check_worker};
use coordinator_core::diagnostic::{Diagnostic, Severity};
use coordinator_core::model::runtime::{SecretRef, SecretSource};

use crate::support::{PACKAGE, RUNTIME_HEAD, fixture};

/// `line:column code severity` of each diagnostic.
fn listed(diagnostics: &[Diagnostic]) -> Vec<String> {
    let severity = |d: &Diagnostic| if d.severity == Severity::Error { "error" } else { "warning" };
    diagnostics.iter().map(|d| format!("{}:{} {} {}", d.line, d.column, d.code, severity(d))).collect()
}

/// Loads a runtime file (no project), probing its secrets with `probe`.
fn load(text: &str, probe: Option<&dyn SecretProbe>) -> (bool, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let input = RuntimeInput { file: "runtime.yaml", text, secrets: probe, package: None };
    let (loaded, _) = runtime::load(&input, &mut out);
    coordinator_core::diagnostic::sort(&mut out);
    (loaded.is_some(), out)
}

/// A runtime file whose remote connection lists `workers` (line 13), with `access` (from line 14).
fn with_access(workers: &str, access: &str) -> String {
    format!(
        "\
{RUNTIME_HEAD}grpc: {{listen: 0.0.0.0:7401}}
{PACKAGE}
connections:
  registry:
    product: breg
    dispatch: remote
    eventSigningSecret: env:E
    workers: {workers}
access:
{access}"
    )
}

const TOKEN: &str = "  tokens: [{subject: w1, token: env:W1, roles: [worker]}]\n";
const OIDC: &str = "  oidc: [{issuer: https://id.example, audience: coordinator, jwks: file:jwks.json}]\n";

#[test]
fn a_remote_connection_no_worker_can_serve_is_refused() {
    // No token holds `worker`; the token's subject holds other roles only.
    let (_, diagnostics) =
        load(&with_access("[w1]", "  tokens: [{subject: w1, token: env:W1, roles: [read]}]\n"), None);
    assert_eq!(listed(&diagnostics), ["13:15 runtime.unknown-worker error"]);
    assert!(diagnostics[0].message.contains("no worker can serve the connection"), "{}", diagnostics[0].message);
    // A grant of `worker` to a subject nothing authenticates: no token has it and there is no OIDC issuer.
    let grant = "  grants: [{subject: w2, workflow: \"*\", roles: [worker]}]\n";
    let (loaded, diagnostics) = load(&with_access("[w2]", &format!("{TOKEN}{grant}")), None);
    assert_eq!((loaded, listed(&diagnostics)), (true, vec!["13:15 runtime.unknown-worker error".to_owned()]));
}

#[test]
fn a_subject_that_cannot_serve_beside_one_that_can_is_a_warning() {
    let (loaded, diagnostics) = load(&with_access("[w1, w-typo]", TOKEN), None);
    assert!(loaded);
    assert_eq!(listed(&diagnostics), ["13:19 runtime.unknown-worker warning"]);
}

#[test]
fn a_worker_holds_the_role_through_its_token_or_a_grant() {
    let grant = |subject: &str| format!("  grants: [{{subject: {subject}, workflow: \"*\", roles: [worker]}}]\n");
    for (workers, access) in [
        ("[w1]", TOKEN.to_owned()),
        // A grant to a token's subject, whose entry lists other roles.
        ("[w1]", format!("  tokens: [{{subject: w1, token: env:W1, roles: [read]}}]\n{}", grant("w1"))),
        // A grant to an OIDC subject.
        ("[staff]", format!("{OIDC}{}", grant("staff"))),
    ] {
        let (loaded, diagnostics) = load(&with_access(workers, &access), None);
        assert_eq!((loaded, listed(&diagnostics)), (true, vec![]), "{access}");
    }
}

/// A pretend environment where only the references in `unset` do not resolve.
struct Unset(&'static [&'static str]);

impl SecretProbe for Unset {
    fn probe(&self, reference: &SecretRef) -> Result<(), SecretProblem> {
        if !self.0.contains(&reference.as_str()) {
            return Ok(());
        }
        match reference.source() {
            SecretSource::Env(_) => Err(SecretProblem::NotSet),
            SecretSource::File(_) => Err(SecretProblem::Unreadable("No such file or directory".to_owned())),
        }
    }
}

#[test]
fn the_grpc_certificate_and_key_are_probed_and_a_remote_connection_has_no_authorization_to_probe() {
    let text = fixture("runtime-remote.yaml");
    let (loaded, diagnostics) = load(&text, Some(&Unset(&[])));
    assert_eq!((loaded, listed(&diagnostics)), (true, vec![]));
    let probe = Unset(&["file:/run/secrets/grpc.crt", "file:/run/secrets/grpc.key", "env:CASEWORK_CLIENT_SECRET"]);
    let (_, diagnostics) = load(&text, Some(&probe));
    assert_eq!(
        listed(&diagnostics),
        [
            "18:18 runtime.secret-unavailable error",
            "19:17 runtime.secret-unavailable error",
            "37:21 runtime.secret-unavailable error",
        ]
    );
    assert_eq!(
        diagnostics[1].message,
        "the file `/run/secrets/grpc.key` (the gRPC private key) cannot be read: No such file or directory"
    );
}

#[test]
fn a_worker_file_is_checked_with_its_secrets() {
    let text = fixture("worker.yaml");
    let report = check_worker(&WorkerInput { file: "worker.yaml", text: &text, secrets: None });
    assert!(report.ok(), "{:?}", report.diagnostics);
    assert_eq!(report.worker.map(|w| w.connections.len()), Some(1));
    assert_eq!(report.files, [("worker.yaml".to_owned(), text.clone())]);

    let probe = Unset(&[
        "env:REGISTRY_WORKER_TOKEN",
        "file:/etc/coordinator/internal-ca.pem",
        "file:/run/secrets/registry-client.pem",
    ]);
    let report = check_worker(&WorkerInput { file: "worker.yaml", text: &text, secrets: Some(&probe) });
    assert!(!report.ok());
    assert_eq!(
        listed(&report.diagnostics),
        [
            "9:10 runtime.secret-unavailable error",
            "10:18 runtime.secret-unavailable error",
            "19:19 runtime.secret-unavailable error",
        ]
    );
    let token = &report.diagnostics[0];
    assert_eq!(token.message, "the environment variable `REGISTRY_WORKER_TOKEN` (the coordinator token) is not set");
    assert!(token.help.contains("the worker's environment"), "{}", token.help);
    assert!(report.diagnostics[1].help.contains("worker file's directory"), "{}", report.diagnostics[1].help);
}

#[test]
fn a_worker_file_with_a_mistake_is_refused_with_its_excerpt_masked() {
    let text = fixture("worker.yaml").replace("env:REGISTRY_WORKER_TOKEN", "hunter2-literal");
    let report = check_worker(&WorkerInput { file: "worker.yaml", text: &text, secrets: Some(&Unset(&[])) });
    assert!(!report.ok());
    assert_eq!(listed(&report.diagnostics), ["9:10 schema.invalid-value error"]);
    assert!(report.files.iter().all(|(_, shown)| !shown.contains("hunter2-literal")));
    let report = check_worker(&WorkerInput { file: "worker.yaml", text: "a: [", secrets: None });
    assert_eq!((report.ok(), report.files.len()), (false, 0));
    assert_eq!(report.diagnostics.first().map(|d| d.code.as_str()), Some("yaml.syntax"));
}
