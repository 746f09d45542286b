//! The corpus of invalid projects: one small project per diagnostic code.
//!
//! Every directory under `tests/corpus/` is a complete project (`workflow.yaml`,
//! `functions.rhai`, optionally `catalog/*.yaml`) with an `expected.txt` that
//! lists every diagnostic the checker must report, errors and warnings alike,
//! one `<code> <file>:<line>:<column>` per line, in the checker's order (file,
//! line, column, code). Lines starting with `#` explain the case. An empty
//! list means the project must be accepted without any diagnostic.
//!
//! A case with a `runtime.yaml` is checked against it, as `coordinatorctl check
//! --runtime runtime.yaml` does (its diagnostics name the file `runtime.yaml`).
//! A case that also has an `environment.txt` is checked as with `--environment`,
//! in a pretend environment: the variables it lists are set, a `file:`
//! reference can be read when that file exists in the case directory, and
//! the pinned package is read from the case directory.
//!
//! The runner checks every case, compares the full list exactly and reports
//! all mismatching cases at once. It also proves that the corpus covers every
//! stable code and that a project is refused unless its case only shows a
//! warning.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use coordinator_core::check::runtime::{PackageSource, RuntimeInput, SecretProbe, SecretProblem};
use coordinator_core::check::{Report, check_project, check_project_with_runtime};
use coordinator_core::diagnostic::Code;
use coordinator_core::model::runtime::{SecretRef, SecretSource};

use crate::support::{project, summary};

/// The runtime file of a case, checked with the project when present.
const RUNTIME_FILE: &str = "runtime.yaml";

/// The variables of a case's pretend environment, one per line.
const ENVIRONMENT_FILE: &str = "environment.txt";

/// Codes that only warn: a case showing nothing else must be accepted.
const WARNINGS: &[&str] =
    &["operation.unused-alias", "outcome.unused", "runtime.unused-connection", "runtime.package-other-revision"];

/// One expected diagnostic: `code file:line:column`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Expected {
    code: String,
    file: String,
    line: usize,
    column: usize,
}

impl Expected {
    /// The order the checker sorts diagnostics in.
    fn sort_key(&self) -> (&str, usize, usize, &str) {
        (&self.file, self.line, self.column, &self.code)
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}:{}:{}", self.code, self.file, self.line, self.column)
    }
}

/// One corpus case.
struct Case {
    name: String,
    dir: PathBuf,
    expected: Vec<Expected>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("corpus")
}

fn known_code(text: &str) -> bool {
    Code::ALL.iter().any(|c| c.as_str() == text)
}

/// Parses one `code file:line:column` line.
fn parse_line(line: &str) -> Result<Expected, String> {
    let (code, place) = line.split_once(' ').ok_or("expected `<code> <file>:<line>:<column>`")?;
    if !known_code(code) {
        return Err(format!("`{code}` is not a diagnostic code of `Code::ALL`"));
    }
    let mut parts = place.rsplitn(3, ':');
    let column = parts.next().and_then(|c| c.parse().ok()).ok_or("the column is not a number")?;
    let line_no = parts.next().and_then(|l| l.parse().ok()).ok_or("the line is not a number")?;
    let file = parts.next().filter(|f| !f.is_empty()).ok_or("no file")?;
    if line_no == 0 || column == 0 {
        return Err("lines and columns are 1-based".to_owned());
    }
    Ok(Expected { code: code.to_owned(), file: file.to_owned(), line: line_no, column })
}

/// Reads every case; problems with the corpus itself go to `problems`.
fn load_cases(problems: &mut Vec<String>) -> Vec<Case> {
    let root = corpus_dir();
    let mut dirs: Vec<PathBuf> = match std::fs::read_dir(&root) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect(),
        Err(e) => panic!("cannot list {}: {e}", root.display()),
    };
    dirs.sort();
    let mut cases = Vec::new();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = match std::fs::read_to_string(dir.join("expected.txt")) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{name}: cannot read expected.txt: {e}"));
                continue;
            }
        };
        let mut expected = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_line(line) {
                Ok(e) => expected.push(e),
                Err(why) => problems.push(format!("{name}/expected.txt:{}: {why}: {line}", i + 1)),
            }
        }
        if !expected.is_sorted_by(|a, b| a.sort_key() <= b.sort_key()) {
            problems.push(format!("{name}/expected.txt: lines are not sorted by file, line, column, code"));
        }
        if known_code(&name) && !expected.iter().any(|e| e.code == name) {
            problems.push(format!("{name}: the case is named after a code that its expected.txt does not list"));
        }
        cases.push(Case { name, dir, expected });
    }
    cases
}

/// `code file:line:column` of every diagnostic of a report, in the report's order.
fn actual_of(report: &Report) -> Vec<Expected> {
    report
        .diagnostics
        .iter()
        .map(|d| Expected { code: d.code.as_str().to_owned(), file: d.file.clone(), line: d.line, column: d.column })
        .collect()
}

/// A case's pretend environment (`environment.txt`): no real variable or file
/// outside the case directory is looked at.
struct CaseEnvironment {
    dir: PathBuf,
    set: BTreeSet<String>,
}

impl PackageSource for CaseEnvironment {
    fn read_package(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(self.dir.join(path)).map_err(|e| e.to_string())
    }
}

impl SecretProbe for CaseEnvironment {
    fn probe(&self, reference: &SecretRef) -> Result<(), SecretProblem> {
        match reference.source() {
            SecretSource::Env(name) if self.set.contains(name) => Ok(()),
            SecretSource::Env(_) => Err(SecretProblem::NotSet),
            SecretSource::File(path) => match std::fs::metadata(self.dir.join(path)) {
                Ok(meta) if meta.len() == 0 => Err(SecretProblem::Empty),
                Ok(_) => Ok(()),
                Err(e) => Err(SecretProblem::Unreadable(e.to_string())),
            },
        }
    }
}

/// Checks a case's project, against its `runtime.yaml` when it has one.
fn check_case(dir: &Path) -> Result<Report, String> {
    let source = project(dir);
    let Ok(runtime) = std::fs::read_to_string(dir.join(RUNTIME_FILE)) else {
        return check_project(&source).map_err(|e| e.to_string());
    };
    let environment = std::fs::read_to_string(dir.join(ENVIRONMENT_FILE)).ok().map(|text| CaseEnvironment {
        dir: dir.to_path_buf(),
        set: text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect(),
    });
    let input = RuntimeInput {
        file: RUNTIME_FILE,
        text: &runtime,
        secrets: environment.as_ref().map(|e| e as &dyn SecretProbe),
        package: environment.as_ref().map(|e| e as &dyn PackageSource),
    };
    check_project_with_runtime(&source, &input).map_err(|e| e.to_string())
}

/// Checks one case; `None` when it passes, else what went wrong.
fn run_case(case: &Case) -> Option<String> {
    let report = match check_case(&case.dir) {
        Ok(r) => r,
        Err(e) => return Some(format!("  the project cannot be read: {e}\n")),
    };
    let actual = actual_of(&report);
    let mut out = String::new();
    if actual != case.expected {
        let list = |items: &[Expected]| -> String {
            if items.is_empty() {
                return "    (none)\n".to_owned();
            }
            items.iter().map(|e| format!("    {e}\n")).collect()
        };
        let _ = write!(out, "  expected:\n{}  actual:\n{}", list(&case.expected), list(&actual));
        for e in case.expected.iter().filter(|e| !actual.contains(e)) {
            let _ = writeln!(out, "  - missing {e}");
        }
        for (a, d) in actual.iter().zip(&report.diagnostics).filter(|(a, _)| !case.expected.contains(a)) {
            let _ = writeln!(out, "  + extra   {a}: {}", d.message);
        }
    }
    let only_warnings = case.expected.iter().all(|e| WARNINGS.contains(&e.code.as_str()));
    let refused = !report.ok() || report.diagnostics.iter().any(|d| d.is_error());
    if only_warnings && refused {
        let _ = writeln!(out, "  the case shows no error, but the project is refused:\n{}", summary(&report));
    }
    if !only_warnings && !refused {
        let _ = writeln!(out, "  the case shows an error, but the project is accepted");
    }
    (!out.is_empty()).then_some(out)
}

#[test]
fn every_corpus_case_reports_exactly_its_expected_diagnostics() {
    let mut problems = Vec::new();
    let cases = load_cases(&mut problems);
    assert!(!cases.is_empty(), "no corpus cases under {}", corpus_dir().display());
    let mut failures = Vec::new();
    for case in &cases {
        if let Some(why) = run_case(case) {
            failures.push(format!("{}:\n{why}", case.name));
        }
    }
    let mut message = String::new();
    if !problems.is_empty() {
        let _ = writeln!(message, "corpus format problems:\n  {}", problems.join("\n  "));
    }
    if !failures.is_empty() {
        let _ =
            writeln!(message, "{} of {} corpus cases fail:\n\n{}", failures.len(), cases.len(), failures.join("\n"));
    }
    assert!(message.is_empty(), "{message}");
}

#[test]
fn the_corpus_covers_every_code() {
    let mut problems = Vec::new();
    let cases = load_cases(&mut problems);
    let uncovered: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|code| !cases.iter().any(|case| case.expected.iter().any(|e| e.code == *code)))
        .collect();
    assert!(uncovered.is_empty(), "no corpus case expects these codes: {}", uncovered.join(", "));
    for code in WARNINGS {
        assert!(known_code(code), "`{code}` is not a code of `Code::ALL` any more");
    }
}

#[test]
fn expected_lines_parse() {
    assert_eq!(
        parse_line("graph.cycle workflow.yaml:12:14"),
        Ok(Expected { code: "graph.cycle".into(), file: "workflow.yaml".into(), line: 12, column: 14 })
    );
    assert!(parse_line("graph.nope workflow.yaml:1:1").is_err());
    assert!(parse_line("graph.cycle workflow.yaml:0:1").is_err());
    assert!(parse_line("graph.cycle workflow.yaml").is_err());
}
