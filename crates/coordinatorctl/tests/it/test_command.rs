//! `coordinatorctl test`, through the real binary: every example's scenarios pass;
//! the JSON report; every expectation of the flagship's scenarios is really
//! compared (changing any one of them fails exactly that case and names the
//! field, with the expected and the actual value); and script problems (a missing
//! or unused reply, an unknown field, no scenarios file) are refused clearly.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use coordinator_core::diagnostic::Position;
use coordinator_core::yaml::{self, Node, NodeValue};
use serde_json::{Value, json};

use crate::support::{code, copy_dir, ctl, json, read, repo, stderr, stdout, tempdir, write};

fn test_project(dir: &Path, json: bool) -> Output {
    let project = dir.display().to_string();
    if json { ctl(&["test", "--project", &project, "--format", "json"]) } else { ctl(&["test", "--project", &project]) }
}

fn parse(text: &str) -> Node {
    match yaml::parse("scenarios.yaml", text) {
        Ok(root) => root,
        Err(d) => panic!("scenarios.yaml is not YAML: {d:?}"),
    }
}

/// Every example project (a directory under `examples/`), by name.
fn examples() -> Vec<(String, PathBuf)> {
    let dir = repo().join("examples");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("workflow.yaml").is_file())
        .map(|p| (p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), p))
        .collect();
    found.sort();
    found
}

/// The `cases` of a parsed scenarios file.
fn cases(root: &Node) -> &[Node] {
    match root.get("cases").map(|c| &c.value) {
        Some(NodeValue::Seq(items)) => items,
        _ => panic!("scenarios.yaml has no `cases` sequence"),
    }
}

fn case_ids(root: &Node) -> Vec<String> {
    cases(root)
        .iter()
        .map(|case| match case.get("id").map(Node::to_json) {
            Some(Value::String(id)) => id,
            other => panic!("a case without a string id: {other:?}"),
        })
        .collect()
}

/// The ids of the `firings` (schedule cases) of a parsed scenarios file, if it has any.
fn firing_ids(root: &Node) -> Vec<String> {
    match root.get("firings").map(|c| &c.value) {
        Some(NodeValue::Seq(items)) => items
            .iter()
            .map(|case| match case.get("id").map(Node::to_json) {
                Some(Value::String(id)) => id,
                other => panic!("a firings case without a string id: {other:?}"),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The workflow id and revision `check` reports for a project.
fn checked(dir: &Path) -> (Value, Value) {
    let out = ctl(&["check", "--project", &dir.display().to_string(), "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = json(&out);
    (report["workflow"].clone(), report["revision"].clone())
}

// ---- (a) and (b): every example passes, in human and JSON form ----

#[test]
fn every_example_passes_its_scenarios() {
    let examples = examples();
    let names: Vec<&str> = examples.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["appointment-reminder", "permit-check", "reviewed-notice"] {
        assert!(names.contains(&expected), "examples/{expected} is missing: {names:?}");
    }
    for (name, dir) in &examples {
        let scenarios = dir.join("scenarios.yaml");
        assert!(scenarios.is_file(), "examples/{name} has no scenarios.yaml");
        let text = read(&scenarios);
        assert!(
            text.starts_with("# yaml-language-server: $schema=../../schemas/scenarios.schema.json\n"),
            "examples/{name}/scenarios.yaml starts with the schema modeline"
        );
        let root = parse(&text);
        let ids: Vec<String> = case_ids(&root).into_iter().chain(firing_ids(&root)).collect();
        assert!(!ids.is_empty(), "examples/{name} scripts no case");

        let out = test_project(dir, false);
        let human = stdout(&out);
        assert_eq!(code(&out), 0, "examples/{name}:\n{human}{}", stderr(&out));
        assert!(human.ends_with(&format!("\n{} passed, 0 failed\n", ids.len())), "examples/{name}:\n{human}");
        let lines: Vec<&str> = human.lines().collect();
        let expected: Vec<String> = ids.iter().map(|id| format!("pass  {id}")).collect();
        assert_eq!(lines[..lines.len() - 1], expected[..], "one `pass` line per case, in file order");
    }
}

#[test]
fn the_json_report_lists_every_case_with_what_the_run_did() {
    for (name, dir) in examples() {
        let text = read(&dir.join("scenarios.yaml"));
        let root = parse(&text);
        let ids = case_ids(&root);
        let firings = firing_ids(&root);
        let (workflow, revision) = checked(&dir);

        let out = test_project(&dir, true);
        assert_eq!(code(&out), 0, "examples/{name}: {}", stderr(&out));
        let report = json(&out);
        let Some(fields) = report.as_object() else { panic!("the report is not an object: {report}") };
        let keys: BTreeSet<&str> = fields.keys().map(String::as_str).collect();
        assert_eq!(keys, BTreeSet::from(["ok", "command", "workflow", "revision", "passed", "failed", "cases"]));
        assert_eq!(report["ok"], true);
        assert_eq!(report["command"], "test");
        assert_eq!(report["workflow"], workflow);
        assert_eq!(report["workflow"], json!(name), "the example's directory is named after its workflow");
        assert_eq!(report["revision"], revision);
        assert!(report["revision"].as_str().is_some_and(|r| r.starts_with("sha256:")));
        assert_eq!(report["passed"], json!(ids.len() + firings.len()));
        assert_eq!(report["failed"], 0);

        let Some(reported) = report["cases"].as_array() else { panic!("no cases array: {report}") };
        assert_eq!(reported.len(), ids.len() + firings.len());
        // Schedule cases come after the run cases; they follow firings, not a run.
        for (case, id) in reported[ids.len()..].iter().zip(&firings) {
            assert_eq!((&case["id"], &case["passed"], &case["actual"]), (&json!(id), &json!(true), &Value::Null));
            assert_eq!(case["problem"], Value::Null, "{name}/{id}");
        }
        for ((case, id), node) in reported.iter().zip(&ids).zip(cases(&root)) {
            let keys: BTreeSet<&str> =
                case.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
            assert_eq!(keys, BTreeSet::from(["id", "passed", "problem", "actual"]), "{name}/{id}");
            assert_eq!(case["id"], json!(id));
            assert_eq!(case["passed"], true, "{name}/{id}: {case}");
            assert_eq!(case["problem"], Value::Null);
            let actual = &case["actual"];
            let keys: BTreeSet<&str> =
                actual.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
            let all = ["path", "state", "outcome", "output", "failure", "elapsedSeconds", "effects", "observations"];
            assert_eq!(keys, BTreeSet::from(all), "{name}/{id}");
            // An independent comparison: everything the case expects is what the report says happened.
            let expect = node.get("expect").map(Node::to_json).unwrap_or_default();
            for (field, value) in expect.as_object().into_iter().flatten() {
                match field.as_str() {
                    "effects" | "observations" => {
                        for (step, v) in value.as_object().into_iter().flatten() {
                            assert_eq!(&actual[field][step], v, "{name}/{id}: {field}.{step}");
                        }
                    }
                    _ => assert_eq!(&actual[field], value, "{name}/{id}: {field}"),
                }
            }
        }
    }
}

// ---- (c): every expectation of reviewed-notice is compared ----

/// One expectation of one case, changed to a different valid value.
struct Mutation {
    /// Index of the case in `cases`.
    case: usize,
    /// The case id.
    id: String,
    /// The field as the runner names it (`state`, `effects.send-notice`).
    field: String,
    /// The JSON pointer of the value in the parsed file.
    pointer: String,
    /// Where the value is written.
    start: Position,
    end: Position,
    /// The value the case expects (and the run produced: the case passes).
    original: Value,
    /// The different value written instead.
    replacement: Value,
}

/// A different valid value for an expectation.
fn other_value(field: &str, original: &Value) -> Value {
    match (field, original) {
        ("path", Value::Array(steps)) => {
            let mut steps = steps.clone();
            if steps.len() > 1 {
                steps.pop();
            } else {
                steps.push(json!("notice-sent"));
            }
            Value::Array(steps)
        }
        ("state", Value::String(s)) => json!(if s == "finished" { "failed" } else { "finished" }),
        // A written null is an expectation too: null becomes a value, a value becomes null.
        ("outcome", Value::Null) => json!("notice-sent"),
        ("outcome", Value::String(_)) => Value::Null,
        ("failure", Value::Null) => json!("product-refused"),
        ("failure", Value::String(_)) => Value::Null,
        ("output", Value::Null) => json!({"applicationId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"}),
        // A change deep inside the published output: one string value.
        ("output", Value::Object(fields)) => {
            let mut fields = fields.clone();
            match fields.iter_mut().find(|(_, v)| v.is_string()) {
                Some((_, v)) => *v = json!(format!("{}-changed", v.as_str().unwrap_or_default())),
                None => {
                    fields.insert("changed".to_owned(), json!(true));
                }
            }
            Value::Object(fields)
        }
        ("elapsedSeconds", Value::Number(n)) => json!(n.as_u64().unwrap_or_default() + 1),
        ("effects", Value::String(s)) => json!(if s == "accepted" { "refused" } else { "accepted" }),
        ("observations", Value::Number(n)) => json!(n.as_u64().unwrap_or_default() + 1),
        _ => panic!("no different value for {field} = {original}"),
    }
}

/// Every expectation every case sets, each changed to a different valid value.
fn mutations(root: &Node) -> Vec<Mutation> {
    let mut found = Vec::new();
    for (i, case) in cases(root).iter().enumerate() {
        let id = case.get("id").map(Node::to_json).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let Some(NodeValue::Map(entries)) = case.get("expect").map(|e| &e.value) else {
            panic!("case {id} has no expect mapping");
        };
        for (key, node) in entries {
            let field = key.text.as_str();
            let mut push = |name: String, pointer: String, node: &Node, kind: &str| {
                let original = node.to_json();
                let replacement = other_value(kind, &original);
                assert_ne!(original, replacement);
                found.push(Mutation {
                    case: i,
                    id: id.clone(),
                    field: name,
                    pointer,
                    start: node.span.start,
                    end: node.span.end,
                    original,
                    replacement,
                });
            };
            match (field, &node.value) {
                ("effects" | "observations", NodeValue::Map(steps)) => {
                    for (step, value) in steps {
                        let pointer = format!("/cases/{i}/expect/{field}/{}", step.text);
                        push(format!("{field}.{}", step.text), pointer, value, field);
                    }
                }
                _ => push(field.to_owned(), format!("/cases/{i}/expect/{field}"), node, field),
            }
        }
    }
    found
}

/// The byte offset of a 1-based line and character column.
fn offset(text: &str, at: Position) -> usize {
    let mut pos = 0;
    for _ in 1..at.line {
        match text[pos..].find('\n') {
            Some(i) => pos += i + 1,
            None => return text.len(),
        }
    }
    let rest = &text[pos..];
    let line_len = rest.find('\n').unwrap_or(rest.len());
    pos + rest[..line_len].char_indices().nth(at.column - 1).map_or(line_len, |(i, _)| i)
}

/// The scenarios text with one expectation rewritten (as JSON, which is YAML flow
/// syntax); checked by parsing it back: the whole document must equal the original
/// with exactly that value replaced.
fn mutated_text(text: &str, original: &Value, m: &Mutation) -> String {
    let (start, end) = (offset(text, m.start), offset(text, m.end));
    let replacement = m.replacement.to_string();
    let mutated = format!("{}{replacement}{}", &text[..start], &text[end..]);
    let mut wanted = original.clone();
    match wanted.pointer_mut(&m.pointer) {
        Some(v) => *v = m.replacement.clone(),
        None => panic!("{} is not in the parsed file", m.pointer),
    }
    let got = match yaml::parse("scenarios.yaml", &mutated) {
        Ok(root) => root.to_json(),
        Err(d) => panic!("{} / {}: the edit broke the YAML ({d:?}):\n{mutated}", m.id, m.field),
    };
    assert!(
        got == wanted,
        "{} / {}: the edit of `{}` changed more than that value (an alias?):\n{}",
        m.id,
        m.field,
        &text[start..end],
        &mutated[start.saturating_sub(80)..(start + replacement.len() + 80).min(mutated.len())]
    );
    mutated
}

/// Runs one mutation; returns what went wrong, if anything.
fn check_mutation(project: &Path, text: &str, parsed: &Value, ids: &[String], m: &Mutation) -> Result<(), String> {
    let dir = tempdir();
    copy_dir(project, dir.path());
    write(&dir.path().join("scenarios.yaml"), &mutated_text(text, parsed, m));
    let out = test_project(dir.path(), true);
    let what = format!("{} / {} ({} -> {})", m.id, m.field, m.original, m.replacement);
    if code(&out) != 1 {
        let shown: String = stdout(&out).chars().take(400).collect();
        return Err(format!("{what}: exit {} instead of 1\n{shown}\n{}", code(&out), stderr(&out)));
    }
    let report = json(&out);
    let failing: Vec<&str> = report["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["passed"] != true)
        .filter_map(|c| c["id"].as_str())
        .collect();
    let case = &report["cases"][m.case];
    let problem = &case["problem"];
    let expected_problem = json!({
        "type": "difference",
        "field": m.field,
        "step": m.field.split_once('.').map(|(_, step)| step),
        "expected": m.replacement,
        "actual": m.original,
    });
    let checks = [
        (report["ok"] == false, "ok is not false"),
        (report["failed"] == 1 && report["passed"] == json!(ids.len() - 1), "not exactly one case failed"),
        (failing == [m.id.as_str()], "another case failed"),
        (case["id"] == json!(m.id) && case["passed"] == false, "the case did not fail"),
        (*problem == expected_problem, "the difference does not name the field with both values"),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        None => Ok(()),
        Some((_, why)) => {
            Err(format!("{what}: {why}; failing {failing:?}; problem {problem}; wanted {expected_problem}"))
        }
    }
}

#[test]
fn changing_any_one_expectation_fails_exactly_that_case_and_names_it() {
    let project = repo().join("examples/reviewed-notice");
    let text = read(&project.join("scenarios.yaml"));
    let root = parse(&text);
    let parsed = root.to_json();
    let ids = case_ids(&root);
    let all = mutations(&root);

    // Every kind of expectation is exercised, so no comparison can silently go missing.
    let kinds: BTreeSet<&str> = all.iter().map(|m| m.field.split('.').next().unwrap_or_default()).collect();
    let every = ["path", "state", "outcome", "output", "failure", "elapsedSeconds", "effects", "observations"];
    assert_eq!(kinds, BTreeSet::from(every));
    // Every case sets at least one expectation.
    let covered: BTreeSet<usize> = all.iter().map(|m| m.case).collect();
    assert_eq!(covered.len(), ids.len());

    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let problems = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(m) = all.get(i) else { break };
                    if let Err(problem) = check_mutation(&project, &text, &parsed, &ids, m) {
                        problems.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(problem);
                    }
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(
        problems.is_empty(),
        "{} of {} mutations were not caught:\n{}",
        problems.len(),
        all.len(),
        problems.join("\n")
    );
}

#[test]
fn a_failing_case_is_shown_with_its_difference_and_what_the_run_did() {
    let project = repo().join("examples/reviewed-notice");
    let text = read(&project.join("scenarios.yaml"));
    let root = parse(&text);
    let Some(m) =
        mutations(&root).into_iter().find(|m| m.id == "approved-and-notice-sent" && m.field == "effects.send-notice")
    else {
        panic!("approved-and-notice-sent no longer expects effects.send-notice");
    };
    let dir = tempdir();
    copy_dir(&project, dir.path());
    write(&dir.path().join("scenarios.yaml"), &mutated_text(&text, &root.to_json(), &m));
    let out = test_project(dir.path(), false);
    assert_eq!(code(&out), 1);
    let human = stdout(&out);
    assert!(human.contains("FAIL  approved-and-notice-sent\n"), "{human}");
    assert!(human.contains(r#"effects.send-notice: expected "refused", got "accepted""#), "{human}");
    assert!(human.contains("the run: state finished, path read-application → request-review"), "{human}");
    assert!(human.ends_with(&format!("\n{} passed, 1 failed\n", case_ids(&root).len() - 1)), "{human}");
}

// ---- (d): script problems and files that cannot run ----

const INPUT: &str = "{applicationId: 0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10, recipient: {kind: person, id: person-4711}}";
/// Replies that take a case up to `send-notice` (approved at the first observation).
const UP_TO_THE_NOTICE: &str = r#"    read-application:
    - type: accepted
      output: {recordId: 0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10, recordType: application, revision: 3, data: {}}
    request-review: [{type: accepted, output: {reviewRequestId: review-17}, completions: {result: review-17}}]
    await-review: [{type: complete, value: {decision: approved}}]
"#;
const SENT: &str = "{type: accepted, output: {messageId: message-9, status: queued}}";

/// A copy of reviewed-notice with the given scenarios.yaml (none when `None`).
fn flagship_with(scenarios: Option<&str>) -> tempfile::TempDir {
    let dir = tempdir();
    copy_dir(&repo().join("examples/reviewed-notice"), dir.path());
    let path = dir.path().join("scenarios.yaml");
    match scenarios {
        Some(text) => write(&path, text),
        None => {
            if let Err(e) = std::fs::remove_file(&path) {
                panic!("cannot remove {}: {e}", path.display());
            }
        }
    }
    dir
}

/// A case that reaches `send-notice`, with extra `replies` and `operator` lines.
fn case(id: &str, replies: &str, operator: &str) -> String {
    let head = format!("- id: {id}\n  admittedAt: \"2026-10-09T09:00:00Z\"\n  input: {INPUT}\n");
    let expect = "  expect: {state: finished, outcome: notice-sent}\n";
    format!("{head}  replies:\n{UP_TO_THE_NOTICE}{replies}{operator}{expect}")
}

#[test]
fn missing_and_unused_replies_fail_naming_the_step() {
    let text = [
        "apiVersion: coordinator/v1\nkind: Scenarios\ncases:\n".to_owned(),
        case("needs-a-reply-it-does-not-script", "", ""),
        case("leaves-a-reply-unused", &format!("    send-notice: [{SENT}, {SENT}]\n"), ""),
        case(
            "leaves-an-operator-action-unused",
            &format!("    send-notice: [{SENT}]\n"),
            "  operator: {send-notice: reconcile}\n",
        ),
        case("passes", &format!("    send-notice: [{SENT}]\n"), ""),
    ]
    .concat();
    let dir = flagship_with(Some(&text));

    let out = test_project(dir.path(), true);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!((report["passed"].clone(), report["failed"].clone()), (json!(1), json!(3)));
    let problems: Vec<(&Value, &Value)> =
        report["cases"].as_array().into_iter().flatten().map(|c| (&c["id"], &c["problem"])).collect();
    let [(_, missing), (_, unused), (_, operator), (_, passes)] = problems.as_slice() else {
        panic!("four cases expected: {report}");
    };
    for (problem, says) in [
        (missing, "scripts no further reply"),
        (unused, "1 scripted repl(ies) were not used: accepted"),
        (operator, "1 scripted operator action(s) were not used: reconcile"),
    ] {
        assert_eq!(problem["type"], "script", "{problem}");
        assert_eq!(problem["step"], "send-notice", "{problem}");
        assert!(problem["message"].as_str().is_some_and(|m| m.contains(says)), "{problem}");
    }
    assert_eq!(**passes, Value::Null);

    let out = test_project(dir.path(), false);
    assert_eq!(code(&out), 1);
    let human = stdout(&out);
    assert!(human.contains("FAIL  needs-a-reply-it-does-not-script\n      at step `send-notice`: "), "{human}");
    assert!(human.contains("FAIL  leaves-a-reply-unused\n      at step `send-notice`: "), "{human}");
    assert!(human.contains("FAIL  leaves-an-operator-action-unused\n      at step `send-notice`: "), "{human}");
    assert!(human.contains("pass  passes\n"), "{human}");
    assert!(human.ends_with("\n1 passed, 3 failed\n"), "{human}");
}

#[test]
fn an_unknown_field_is_refused_with_its_diagnostic() {
    let mut text = ["apiVersion: coordinator/v1\nkind: Scenarios\ncases:\n".to_owned(), case("typo", "", "")].concat();
    text = text.replace("expect: {state: finished, outcome: notice-sent}", "expect: {state: finished, elapsed: 0}");
    let line = text.lines().position(|l| l.contains("elapsed: 0")).map(|i| i + 1);
    let dir = flagship_with(Some(&text));

    let out = test_project(dir.path(), true);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!(report["command"], "test");
    assert!(report.get("cases").is_none(), "no case runs from a refused file: {report}");
    let diagnostics = report["diagnostics"].as_array().cloned().unwrap_or_default();
    let Some(d) = diagnostics.iter().find(|d| d["code"] == "schema.unknown-field") else {
        panic!("no schema.unknown-field diagnostic: {report}");
    };
    assert_eq!(d["file"], "scenarios.yaml");
    assert_eq!(d["line"].as_u64(), line.map(|l| l as u64));
    assert!(d["message"].as_str().is_some_and(|m| m.contains("elapsed")), "{d}");

    let out = test_project(dir.path(), false);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("schema.unknown-field"), "{err}");
    assert!(err.contains("scenarios.yaml"), "{err}");
}

#[test]
fn a_project_without_scenarios_is_refused_with_help() {
    let dir = flagship_with(None);
    let out = test_project(dir.path(), false);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("has no scenarios.yaml"), "{err}");
    assert!(err.contains("help: write cases in scenarios.yaml"), "{err}");
    let out = test_project(dir.path(), true);
    assert_eq!(code(&out), 1);
}

#[test]
fn a_project_that_does_not_check_is_refused_before_any_case_runs() {
    let dir = flagship_with(Some(&read(&repo().join("examples/reviewed-notice/scenarios.yaml"))));
    let workflow = dir.path().join("workflow.yaml");
    let text = read(&workflow);
    let broken = text.replacen("next: request-review", "next: request-reveiw", 1);
    assert_ne!(text, broken);
    write(&workflow, &broken);
    let out = test_project(dir.path(), true);
    assert_eq!(code(&out), 1);
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!(report["diagnostics"][0]["code"], "graph.unknown-step");
    assert!(report.get("cases").is_none(), "{report}");
}

/// A schedule project: `ok-schedules` of the checker corpus (a cron schedule
/// in Berlin and an interval), with `scenarios` as its scenarios file.
fn schedule_project(dir: &Path, scenarios: &str) -> PathBuf {
    let project = dir.join("project");
    copy_dir(&repo().join("crates/coordinator-core/tests/corpus/ok-schedules"), &project);
    let _ = std::fs::remove_file(project.join("expected.txt"));
    write(&project.join("scenarios.yaml"), scenarios);
    project
}

const FIRINGS: &str = r#"apiVersion: coordinator/v1
kind: Scenarios
firings:
  - id: nightly-over-the-spring-change
    schedule: nightly
    from: "2026-03-27T12:00:00Z"
    until: "2026-03-30T12:00:00Z"
    expect:
      - {at: "2026-03-28T01:30:00Z", input: {day: "2026-03-28", schedule: nightly}}
      - {at: "2026-03-29T03:00:00+02:00", input: {day: "2026-03-29", schedule: nightly}}
      - {at: "2026-03-30T00:30:00Z"}
  - id: nightly-over-the-autumn-change
    schedule: nightly
    from: "2026-10-24T12:00:00Z"
    until: "2026-10-26T12:00:00Z"
    expect:
      - {at: "2026-10-25T00:30:00Z"}
      - {at: "2026-10-26T01:30:00Z"}
  - id: every-hour-from-the-anchor
    schedule: hourly-check
    from: "2026-01-01T00:00:00Z"
    until: "2026-01-01T02:00:00Z"
    expect:
      - {at: "2026-01-01T00:15:00Z", input: {day: "2026-01-01", schedule: hourly-check}}
      - {at: "2026-01-01T01:15:00Z"}
"#;

#[test]
fn schedule_cases_follow_the_firings_across_daylight_saving_and_say_where_they_differ() {
    let dir = tempdir();
    let project = schedule_project(dir.path(), FIRINGS);
    let out = test_project(&project, false);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("pass  nightly-over-the-spring-change\n"), "{}", stdout(&out));
    assert!(stdout(&out).ends_with("3 passed, 0 failed\n"), "{}", stdout(&out));

    // 02:30 does not happen on 29 March in Berlin: expecting it there fails, and says when it fires.
    let wrong = FIRINGS.replace("2026-03-29T03:00:00+02:00", "2026-03-29T02:30:00+02:00");
    let project = schedule_project(&dir.path().join("wrong"), &wrong);
    let out = test_project(&project, false);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "FAIL  nightly-over-the-spring-change\n      firing 2: expected at 2026-03-29T00:30:00Z (2026-03-29 01:30:00 CET \
             (+01:00)), fires at 2026-03-29T01:00:00Z (2026-03-29 03:00:00 CEST (+02:00))\n"
        ),
        "{}",
        stdout(&out)
    );
    // One firing too few, and another input, each named.
    let short = FIRINGS.replace("      - {at: \"2026-10-26T01:30:00Z\"}\n", "");
    let out = test_project(&schedule_project(&dir.path().join("short"), &short), true);
    let report = json(&out);
    let failure = report["cases"].as_array().into_iter().flatten().find(|c| c["passed"] == false).cloned();
    assert_eq!(failure.as_ref().map(|c| c["id"].clone()), Some(json!("nightly-over-the-autumn-change")), "{report}");
    let message = failure.map(|c| c["problem"].to_string()).unwrap_or_default();
    assert!(message.contains("1 firing(s) expected, but the schedule fires 2"), "{message}");
    let other = FIRINGS
        .replace("{day: \"2026-01-01\", schedule: hourly-check}", "{day: \"2026-01-02\", schedule: hourly-check}");
    let out = test_project(&schedule_project(&dir.path().join("other"), &other), false);
    assert!(
        stdout(&out).contains("firing 1 at 2026-01-01T00:15:00Z (2026-01-01 00:15:00 UTC): the input differs"),
        "{}",
        stdout(&out)
    );
    // An unknown schedule is named.
    let unknown = FIRINGS.replace("schedule: hourly-check\n    from", "schedule: weekly\n    from");
    let out = test_project(&schedule_project(&dir.path().join("unknown"), &unknown), false);
    assert!(
        stdout(&out).contains("the workflow has no schedule `weekly` (it has: nightly, hourly-check)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn explain_prints_each_schedules_next_five_firings() {
    let dir = tempdir();
    let project = schedule_project(dir.path(), FIRINGS);
    let out = ctl(&["explain", "--project", &project.display().to_string()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("\nschedule nightly\n  when            cron `30 2 * * *` in Europe/Berlin\n"), "{text}");
    assert!(
        text.contains("\nschedule hourly-check\n  when            every 3600 s from 2026-01-01T00:15:00Z\n"),
        "{text}"
    );
    let firings = text.lines().filter(|l| l.contains(" = 20") && l.ends_with('Z')).count();
    assert_eq!(firings, 10, "five firings of each schedule: {text}");
    let out = ctl(&["explain", "--project", &project.display().to_string(), "--format", "json"]);
    let value = json(&out);
    assert_eq!(value["schedules"][0]["next"].as_array().map(Vec::len), Some(5), "{value}");
    assert_eq!(value["schedules"][1]["overlap"], "one-pending");
}
