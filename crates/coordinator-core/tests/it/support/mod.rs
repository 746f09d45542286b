//! Test support shared by the modules of this binary: projects read into
//! memory and edited there, the checker's report in short, one file decoded
//! with one of the crate's decoders, and the files of `tests/fixtures/`.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use coordinator_core::check::{MemoryProject, ProjectSource, Report, check_project};
use coordinator_core::decode::Decoder;
use coordinator_core::diagnostic::{self, Diagnostic};
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::yaml::{self, Node};
use coordinator_functions::Limits;
use serde::de::DeserializeOwned;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file of a project directory (its subdirectories too), by its path
/// relative to the directory, read into memory: what the checker reads of a
/// project on disk (a file that is not text is left out).
pub fn project(dir: &Path) -> MemoryProject {
    fn collect(root: &Path, dir: &Path, into: &mut MemoryProject) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            if path.is_dir() {
                collect(root, &path, into);
            } else if let (Ok(relative), Ok(text)) = (path.strip_prefix(root), std::fs::read_to_string(&path)) {
                into.0.insert(relative.to_string_lossy().replace('\\', "/"), text);
            }
        }
    }
    let mut project = MemoryProject::default();
    collect(dir, dir, &mut project);
    project
}

/// An example project (`examples/NAME`), read into memory.
pub fn example(name: &str) -> MemoryProject {
    project(&repo().join("examples").join(name))
}

/// Edits of a project held in memory.
pub trait Edit: Sized {
    /// The project with `path` holding `text`.
    fn with(self, path: &str, text: &str) -> Self;

    /// The project with `from` (which must be there) replaced once by `to` in `path`.
    fn edit(self, path: &str, from: &str, to: &str) -> Self;
}

impl Edit for MemoryProject {
    fn with(mut self, path: &str, text: &str) -> Self {
        self.0.insert(path.to_owned(), text.to_owned());
        self
    }

    fn edit(self, path: &str, from: &str, to: &str) -> Self {
        let text = self.0.get(path).cloned().unwrap_or_default();
        assert!(text.contains(from), "{path} does not contain {from:?}");
        let edited = text.replacen(from, to, 1);
        self.with(path, &edited)
    }
}

/// Checks a project source, failing the test if it cannot be read.
pub fn check(source: &dyn ProjectSource) -> Report {
    check_project(source).unwrap_or_else(|e| panic!("project unreadable: {e}"))
}

/// The project in `dir` checked (it must be accepted) and compiled.
pub fn compiled(dir: &Path) -> Workflow {
    let report = check(&project(dir));
    let Some(checked) = report.checked else { panic!("{} does not check clean:\n{}", dir.display(), summary(&report)) };
    Workflow::compile(checked.definition, Limits::default())
        .unwrap_or_else(|e| panic!("{} does not compile: {e}", dir.display()))
}

/// `code file:line:column severity` of every diagnostic, one per line.
pub fn summary(report: &Report) -> String {
    report
        .diagnostics
        .iter()
        .map(|d| format!("{} {}:{}:{} {:?}", d.code, d.file, d.line, d.column, d.severity).to_lowercase())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Decodes `text` as the file `name` with one of the crate's decoders; the
/// diagnostics come sorted (and are printed, to read a failing test).
pub fn decode_file<T>(
    name: &str,
    text: &str,
    decode: impl FnOnce(&mut Decoder<'_>, &Node) -> Option<T>,
) -> (Option<T>, Vec<Diagnostic>) {
    let root = yaml::parse(name, text).unwrap_or_else(|d| panic!("not YAML: {d:?}"));
    let mut d = Decoder::new(name);
    let file = decode(&mut d, &root);
    diagnostic::sort(&mut d.diagnostics);
    for x in &d.diagnostics {
        eprintln!("{}:{} {} {} ({})", x.line, x.column, x.code, x.message, x.help);
    }
    (file, d.diagnostics)
}

/// Diagnostics as `line:column code`, in reading order.
pub fn positions(diagnostics: &[Diagnostic]) -> Vec<String> {
    diagnostics.iter().map(|x| format!("{}:{} {}", x.line, x.column, x.code)).collect()
}

/// A file of `tests/fixtures/`.
pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap_or_default()
}

/// `text`, the file `name`, decoded with `decode`: without a diagnostic, and
/// to the same value serde reads from the file's JSON form.
pub fn like_serde<T: DeserializeOwned + PartialEq + Debug>(
    name: &str,
    text: &str,
    decode: impl FnOnce(&mut Decoder<'_>, &Node) -> Option<T>,
) -> T {
    let (file, diagnostics) = decode_file(name, text, decode);
    assert_eq!(positions(&diagnostics), Vec::<String>::new());
    let Some(file) = file else { panic!("{name}: nothing decoded") };
    let json = yaml::parse(name, text).map(|n| n.to_json()).unwrap_or_default();
    let by_serde: Option<T> = serde_json::from_value(json).ok();
    assert_eq!(by_serde.as_ref(), Some(&file), "{name}: serde reads another value");
    file
}

/// The first five lines of the runtime files these tests write: the
/// database, the payload keys and `listen`, secrets from the environment.
pub const RUNTIME_HEAD: &str = "apiVersion: coordinator/v1
kind: Runtime
database: {url: env:DATABASE_URL}
payloadKeys: {active: k1, keys: {k1: env:K1}}
listen: 127.0.0.1:7400
";

/// A `package:` line pinning a digest (of no package at hand).
pub const PACKAGE: &str =
    "package: {path: p.pkg, digest: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}";
