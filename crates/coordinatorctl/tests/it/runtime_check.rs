//! `coordinatorctl check --runtime FILE [--environment]`, run as the real
//! binary: a deployment's `runtime.yaml` checked offline with the project, its
//! exit codes, and that no secret written into it is ever printed.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::{code, copy_dir, ctl_in, edit, json, printed, repo, tempdir, write};

/// A variable no test environment sets, named so that it cannot clash.
const SET_VAR: &str = "COORDINATORCTL_RUNTIME_CHECK_TEST_SECRET";

/// Runs the binary in `dir` with `SET_VAR` set to `value`, or removed.
fn ctl_with(dir: &Path, args: &[&str], value: Option<&str>) -> Output {
    ctl_in(Some(dir), args, &[(SET_VAR, value)])
}

/// `code file:line:column` of every diagnostic of a JSON report.
fn diagnostics(report: &Value) -> Vec<String> {
    let list = report["diagnostics"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|d| {
            format!(
                "{} {}:{}:{}",
                d["code"].as_str().unwrap_or("?"),
                d["file"].as_str().unwrap_or("?"),
                d["line"],
                d["column"]
            )
        })
        .collect()
}

/// A temporary directory holding a copy of an example project under `project/`.
fn workspace(example: &str) -> tempfile::TempDir {
    let dir = tempdir();
    copy_dir(&repo().join("examples").join(example), &dir.path().join("project"));
    dir
}

/// A runtime.yaml with these `connections` entries (indented by two spaces).
fn runtime(connections: &str) -> String {
    format!(
        "apiVersion: coordinator/v1
kind: Runtime
database:
  url: env:{SET_VAR}
payloadKeys:
  active: k1
  keys:
    k1: file:secrets/payload-key
listen: 127.0.0.1:7400
package:
  path: app.coordinator-package
  digest: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
connections:
{connections}access:
  grants:
  - subject: ops
    workflow: \"*\"
    roles: [read, operate]
"
    )
}

/// One connection entry; `extra` lines follow the authorization.
fn connection(name: &str, product: &str, extra: &str) -> String {
    format!(
        "  {name}:
    product: {product}
    baseUrl: https://{product}.internal.example
    authorization:
      type: client-secret
      tokenEndpoint: https://id.internal.example/oauth2/token
      clientId: coordinator-{name}
      clientSecret: env:{SET_VAR}
{extra}"
    )
}

/// The runtime of the flagship: registry (breg), casework and messaging.
fn flagship_runtime() -> String {
    let connections = [("registry", "breg"), ("casework", "casework"), ("messaging", "messaging")];
    runtime(&connections.iter().map(|(name, product)| connection(name, product, "")).collect::<String>())
}

#[test]
fn a_valid_project_and_runtime_are_accepted() {
    let dir = workspace("reviewed-notice");
    write(&dir.path().join("runtime.yaml"), &flagship_runtime());
    let out = ctl_with(dir.path(), &["check", "--project", "project", "--runtime", "runtime.yaml"], None);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert!(printed(&out).starts_with("ok: reviewed-notice sha256:"), "{}", printed(&out));

    let out =
        ctl_with(dir.path(), &["check", "--project", "project", "--runtime", "runtime.yaml", "--format", "json"], None);
    assert_eq!(code(&out), 0);
    let report = json(&out);
    assert_eq!(report["ok"], true);
    assert_eq!(report["diagnostics"], serde_json::json!([]));
    let keys: Vec<&str> = report.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
    assert_eq!(keys, ["command", "diagnostics", "ok", "revision", "workflow"], "the report keeps its shape");
}

#[test]
fn an_unknown_trigger_connection_is_refused_at_the_trigger() {
    let dir = workspace("permit-check");
    let workflow = dir.path().join("project/workflow.yaml");
    edit(&workflow, "  permit-expiring:\n    connection: permits", "  permit-expiring:\n    connection: permit-events");
    let permits = connection("permits", "permits", &format!("    eventSigningSecret: env:{SET_VAR}\n"));
    write(
        &dir.path().join("deploy/runtime.yaml"),
        &runtime(&(permits + connection("evaluation", "evaluation", "").as_str())),
    );

    let args = ["check", "--project", "project", "--runtime", "deploy/runtime.yaml"];
    let out = ctl_with(dir.path(), &args, None);
    assert_eq!(code(&out), 1, "{}", printed(&out));
    let text = printed(&out);
    assert!(text.contains("trigger.unknown-connection") && text.contains("workflow.yaml:49:17"), "{text}");
    assert!(text.contains("name one of: evaluation, permits"), "{text}");

    let out = ctl_with(dir.path(), &[&args[..], &["--format", "json"]].concat(), None);
    assert_eq!(code(&out), 1);
    assert_eq!(diagnostics(&json(&out)), ["trigger.unknown-connection workflow.yaml:49:17"]);
}

#[test]
fn runtime_diagnostics_name_the_file_as_typed_and_warnings_can_be_denied() {
    let dir = workspace("reviewed-notice");
    let spare = connection("spare", "scheduling", "");
    write(
        &dir.path().join("deploy/runtime.yaml"),
        &flagship_runtime().replace("access:\n", &format!("{spare}access:\n")),
    );
    let args = ["check", "--project", "project", "--runtime", "deploy/runtime.yaml", "--format", "json"];
    let out = ctl_with(dir.path(), &args, None);
    assert_eq!(code(&out), 0, "a warning does not refuse: {}", printed(&out));
    assert_eq!(diagnostics(&json(&out)), ["runtime.unused-connection deploy/runtime.yaml:38:3"]);
    let out = ctl_with(dir.path(), &[&args[..], &["--deny-warnings"]].concat(), None);
    assert_eq!(code(&out), 1);
}

#[test]
fn a_literal_secret_is_refused_and_never_printed() {
    let dir = workspace("reviewed-notice");
    let literal = "s3cr3t-Literal-Value";
    let text =
        flagship_runtime().replacen(&format!("clientSecret: env:{SET_VAR}"), &format!("clientSecret: {literal}"), 1);
    write(&dir.path().join("runtime.yaml"), &text.replacen("listen: 127.0.0.1:7400", "listen: 127.0.0.1", 1));
    for format in ["human", "json"] {
        let args = ["check", "--project", "project", "--runtime", "runtime.yaml", "--format", format, "--environment"];
        let out = ctl_with(dir.path(), &args, Some("set"));
        assert_eq!(code(&out), 1, "{}", printed(&out));
        let all = printed(&out);
        assert!(!all.contains(literal), "{format} output shows the secret:\n{all}");
        assert!(all.contains("a secret must be a reference"), "{all}");
        assert!(all.contains("runtime.yaml"), "{all}");
    }
    let out =
        ctl_with(dir.path(), &["check", "--project", "project", "--runtime", "runtime.yaml", "--format", "json"], None);
    assert_eq!(
        diagnostics(&json(&out)),
        ["schema.invalid-value runtime.yaml:9:9", "schema.invalid-value runtime.yaml:21:21"]
    );
}

/// The digest `runtime()` pins (of no package).
const PINNED: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// Packages `project` to `deploy/app.coordinator-package` and pins its digest
/// in `deploy/runtime.yaml`.
fn package_and_pin(dir: &Path) {
    let args = ["package", "--project", "project", "--output", "deploy/app.coordinator-package", "--format", "json"];
    let out = ctl_with(dir, &args, None);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    let digest = json(&out)["digest"].as_str().map(str::to_owned).unwrap_or_default();
    edit(&dir.join("deploy/runtime.yaml"), PINNED, &digest);
}

#[test]
fn environment_requires_every_reference_to_resolve() {
    let dir = workspace("reviewed-notice");
    write(&dir.path().join("deploy/runtime.yaml"), &flagship_runtime());
    write(&dir.path().join("deploy/secrets/payload-key"), "0123456789abcdef0123456789abcdef");
    package_and_pin(dir.path());
    let args =
        ["check", "--project", "project", "--runtime", "deploy/runtime.yaml", "--environment", "--format", "json"];

    let out = ctl_with(dir.path(), &args, None);
    assert_eq!(code(&out), 1, "{}", printed(&out));
    let found = diagnostics(&json(&out));
    assert_eq!(found.len(), 4, "the database URL and three client secrets: {found:?}");
    assert!(found.iter().all(|d| d.starts_with("runtime.secret-unavailable deploy/runtime.yaml:")), "{found:?}");
    assert!(found.contains(&"runtime.secret-unavailable deploy/runtime.yaml:4:8".to_owned()), "{found:?}");

    let value = "the-value-of-the-variable";
    let out = ctl_with(dir.path(), &args, Some(value));
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert!(!printed(&out).contains(value));

    // Without --environment, nothing is looked up.
    let out = ctl_with(dir.path(), &args[..5], None);
    assert_eq!(code(&out), 0, "{}", printed(&out));

    // A missing file is named by its reference, relative to the runtime file.
    assert!(std::fs::remove_file(dir.path().join("deploy/secrets/payload-key")).is_ok());
    let out = ctl_with(dir.path(), &args, Some(value));
    assert_eq!(code(&out), 1);
    assert_eq!(diagnostics(&json(&out)), ["runtime.secret-unavailable deploy/runtime.yaml:8:9"]);
    assert!(printed(&out).contains("`secrets/payload-key`"), "{}", printed(&out));
}

#[test]
fn environment_reads_the_pinned_package_and_checks_its_digest_and_revision() {
    let dir = workspace("reviewed-notice");
    write(&dir.path().join("deploy/runtime.yaml"), &flagship_runtime());
    write(&dir.path().join("deploy/secrets/payload-key"), "0123456789abcdef0123456789abcdef");
    let value = Some("the-value-of-the-variable");
    let args =
        ["check", "--project", "project", "--runtime", "deploy/runtime.yaml", "--environment", "--format", "json"];

    // No file at `package.path` (relative to the runtime file).
    let out = ctl_with(dir.path(), &args, value);
    assert_eq!(code(&out), 1, "{}", printed(&out));
    assert_eq!(diagnostics(&json(&out)), ["runtime.package-unavailable deploy/runtime.yaml:11:9"]);
    assert!(printed(&out).contains("`app.coordinator-package`"), "{}", printed(&out));
    // Without --environment the file is not looked at.
    assert_eq!(code(&ctl_with(dir.path(), &args[..5], None)), 0);

    // A package there, but not the one pinned.
    let package = ["package", "--project", "project", "--output", "deploy/app.coordinator-package"];
    assert_eq!(code(&ctl_with(dir.path(), &package, None)), 0);
    let out = ctl_with(dir.path(), &args, value);
    assert_eq!(code(&out), 1, "{}", printed(&out));
    assert_eq!(diagnostics(&json(&out)), ["runtime.package-unavailable deploy/runtime.yaml:12:11"]);

    // Pinned: accepted.
    package_and_pin(dir.path());
    let out = ctl_with(dir.path(), &args, value);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert_eq!(diagnostics(&json(&out)), Vec::<String>::new());

    // The project changed since it was packaged: a warning, refused with --deny-warnings.
    edit(&dir.path().join("project/workflow.yaml"), "deadlineSeconds: 2592000", "deadlineSeconds: 2591999");
    let out = ctl_with(dir.path(), &args, value);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert_eq!(diagnostics(&json(&out)), ["runtime.package-other-revision deploy/runtime.yaml:12:11"]);
    let denied: Vec<&str> = args.iter().copied().chain(["--deny-warnings"]).collect();
    assert_eq!(code(&ctl_with(dir.path(), &denied, value)), 1);
}

#[test]
fn a_missing_runtime_file_exits_3_and_environment_needs_runtime() {
    let dir = workspace("reviewed-notice");
    let out = ctl_with(dir.path(), &["check", "--project", "project", "--runtime", "nowhere.yaml"], None);
    assert_eq!(code(&out), 3, "{}", printed(&out));
    assert!(printed(&out).contains("nowhere.yaml"), "{}", printed(&out));
    let out =
        ctl_with(dir.path(), &["check", "--project", "project", "--runtime", "nowhere.yaml", "--format", "json"], None);
    assert_eq!(code(&out), 3);
    assert_eq!(json(&out)["ok"], false);
    let out = ctl_with(dir.path(), &["check", "--project", "project", "--environment"], None);
    assert_eq!(code(&out), 2, "--environment without --runtime is a usage error");
}

#[test]
fn check_says_which_search_keys_are_stored_in_clear() {
    let dir = workspace("reviewed-notice");
    edit(
        &dir.path().join("project/workflow.yaml"),
        "\nstart: read-application\n",
        "\nsearchKeys:\n  applicationId: {function: application_id, notSecret: true}\nstart: read-application\n",
    );
    let functions = dir.path().join("project/functions.rhai");
    let text = std::fs::read_to_string(&functions).unwrap_or_default();
    write(&functions, &format!("{text}\nfn application_id(input) {{ input.applicationId }}\n"));
    let out = ctl_with(dir.path(), &["check", "--project", "project"], None);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert!(
        printed(&out).contains("note: stored in clear and indexed, declared not secret: search key(s) applicationId"),
        "{}",
        printed(&out)
    );
    let out = ctl_with(dir.path(), &["check", "--project", "project", "--format", "json"], None);
    assert_eq!(json(&out)["searchKeysInClear"], serde_json::json!(["applicationId"]));
}

#[test]
fn a_schedule_more_frequent_than_the_deployments_floor_is_refused_at_its_calendar() {
    let dir = workspace("desk-digest");
    let connections = connection("scheduling", "scheduling", "") + connection("messaging", "messaging", "").as_str();
    // Weekdays at 07:30: one day apart at the closest.
    for (floor, expected) in [(86_400, 0), (86_401, 1)] {
        let yaml = runtime(&connections).replace("access:\n", &format!("scheduleFloorSeconds: {floor}\naccess:\n"));
        write(&dir.path().join("runtime.yaml"), &yaml);
        let args = ["check", "--project", "project", "--runtime", "runtime.yaml", "--format", "json"];
        let out = ctl_with(dir.path(), &args, None);
        assert_eq!(code(&out), expected, "{}", printed(&out));
        let found = diagnostics(&json(&out));
        if expected == 1 {
            let line = std::fs::read_to_string(dir.path().join("project/workflow.yaml"))
                .unwrap_or_default()
                .lines()
                .position(|l| l.contains("cron: \"30 7 * * MON-FRI\""))
                .map_or(0, |i| i + 1);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].starts_with(&format!("schedule.too-frequent workflow.yaml:{line}:")), "{found:?}");
            assert!(printed(&out).contains("scheduleFloorSeconds: 86401"), "{}", printed(&out));
        } else {
            assert!(found.is_empty(), "{found:?}");
        }
    }
    // The floor is 10 s at least.
    let yaml = runtime(&connections).replace("access:\n", "scheduleFloorSeconds: 5\naccess:\n");
    write(&dir.path().join("runtime.yaml"), &yaml);
    let out = ctl_with(dir.path(), &["check", "--project", "project", "--runtime", "runtime.yaml"], None);
    assert_eq!(code(&out), 1, "{}", printed(&out));
    assert!(printed(&out).contains("scheduleFloorSeconds must be a whole number of at least 10"), "{}", printed(&out));
}
