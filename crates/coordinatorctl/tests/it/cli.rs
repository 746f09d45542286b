//! The real `coordinatorctl` binary: exit codes, reports, and the
//! `init → check → package` journey a new user follows from the README.

use crate::support::{code, copy_dir, ctl, edit, example, json, repo, stderr, stdout, tempdir};

#[test]
fn check_accepts_the_flagship_and_prints_its_revision() {
    let out = ctl(&["check", "--project", &example("reviewed-notice")]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("ok: reviewed-notice sha256:"), "{}", stdout(&out));

    let out = ctl(&["check", "--project", &example("reviewed-notice"), "--format", "json"]);
    assert_eq!(code(&out), 0);
    let report = json(&out);
    assert_eq!(report["ok"], true);
    assert_eq!(report["command"], "check");
    assert_eq!(report["workflow"], "reviewed-notice");
    assert!(report["revision"].as_str().is_some_and(|r| r.starts_with("sha256:")));
    assert_eq!(report["diagnostics"], serde_json::json!([]));
}

/// A copy of the flagship with a step's `next` misspelt.
fn broken_project() -> tempfile::TempDir {
    let dir = tempdir();
    copy_dir(&repo().join("examples/reviewed-notice"), dir.path());
    edit(&dir.path().join("workflow.yaml"), "next: request-review", "next: request-reveiw");
    dir
}

#[test]
fn check_refuses_with_exit_1_and_a_compiler_style_diagnostic() {
    let dir = broken_project();
    let project = dir.path().display().to_string();
    let out = ctl(&["check", "--project", &project]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("graph.unknown-step"), "{err}");
    assert!(err.contains("workflow.yaml:"), "{err}");
    assert!(err.contains("did you mean `request-review`?"), "{err}");
    assert!(err.contains("request-reveiw"), "the excerpt shows the line: {err}");

    let out = ctl(&["check", "--project", &project, "--format", "json"]);
    assert_eq!(code(&out), 1);
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!(report["revision"], serde_json::Value::Null);
    let diag = &report["diagnostics"][0];
    assert_eq!(diag["code"], "graph.unknown-step");
    assert_eq!(diag["severity"], "error");
    assert_eq!(diag["file"], "workflow.yaml");
    assert!(diag["line"].as_u64().is_some_and(|l| l > 1));
    assert!(diag["column"].as_u64().is_some());
    assert!(diag["help"].as_str().is_some());
}

#[test]
fn unavailable_projects_exit_3_and_usage_errors_exit_2() {
    let out = ctl(&["check", "--project", "/nonexistent/project"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("workflow.yaml"));
    let out = ctl(&["check", "--no-such-flag"]);
    assert_eq!(code(&out), 2);
    let out = ctl(&["graph", "--project", &example("reviewed-notice"), "--format", "png"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn init_check_package_works_for_a_new_user() {
    let dir = tempdir();
    let project = dir.path().join("my-workflow");
    let project_arg = project.display().to_string();
    let out = ctl(&["init", "--directory", &project_arg]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let workflow = std::fs::read_to_string(project.join("workflow.yaml")).unwrap_or_default();
    assert!(workflow.starts_with("# yaml-language-server: $schema=schemas/workflow.schema.json"));
    assert!(project.join("schemas/workflow.schema.json").is_file());

    let out = ctl(&["check", "--project", &project_arg, "--deny-warnings"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("ok: my-workflow sha256:"));

    let out = ctl(&["test", "--project", &project_arg]);
    assert_eq!(code(&out), 0, "the starter's scenarios pass: {}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).ends_with("3 passed, 0 failed\n"), "{}", stdout(&out));

    let first = dir.path().join("first.pkg.json");
    let second = dir.path().join("second.pkg.json");
    let out =
        ctl(&["package", "--project", &project_arg, "--output", &first.display().to_string(), "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = json(&out);
    let digest = report["digest"].as_str().unwrap_or_default().to_owned();
    let out =
        ctl(&["package", "--project", &project_arg, "--output", &second.display().to_string(), "--format", "json"]);
    assert_eq!(json(&out)["digest"].as_str(), Some(digest.as_str()));
    let a = std::fs::read(&first).unwrap_or_default();
    let b = std::fs::read(&second).unwrap_or_default();
    assert!(!a.is_empty());
    assert_eq!(a, b, "packaging twice must give identical bytes");

    let package = coordinator_core::package::read(&a, Some(&digest));
    let package = match package {
        Ok(p) => p,
        Err(e) => panic!("package does not read back: {e}"),
    };
    assert_eq!(Some(package.manifest.revision.as_str()), report["revision"].as_str());
    assert!(coordinator_core::package::read(&a, Some("sha256:00")).is_err(), "a wrong pinned digest is refused");

    let again = ctl(&["init", "--directory", &project_arg]);
    assert_eq!(code(&again), 1, "init refuses an existing directory");
}

#[test]
fn explain_describes_every_call() {
    let out = ctl(&["explain", "--project", &example("reviewed-notice"), "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for needle in ["messaging.submit-message/v1", "recipient-opted-out", "casework.submit-review-request/v1"] {
        assert!(text.contains(needle), "explain lacks {needle}");
    }
    let out = ctl(&["explain", "--project", &example("reviewed-notice")]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("send-notice"));
}

#[test]
fn graph_draws_every_route_in_every_format() {
    for format in ["mermaid", "dot", "svg"] {
        let out = ctl(&["graph", "--project", &example("reviewed-notice"), "--format", format]);
        assert_eq!(code(&out), 0, "{format}: {}", stderr(&out));
        let text = stdout(&out);
        for label in ["next", "timeout", "cancel", "case: approved", "case: rejected", "refusal: recipient-opted-out"] {
            assert!(text.contains(label), "{format} lacks the route label {label}");
        }
    }
}
