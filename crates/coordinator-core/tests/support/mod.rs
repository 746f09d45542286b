//! Test support: project sources on disk and in memory.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coordinator_core::check::{ProjectSource, Report, SourceError, check_project};

/// A project directory on disk.
pub struct DirSource(pub PathBuf);

impl ProjectSource for DirSource {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        match std::fs::read_to_string(self.0.join(path)) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::Unreadable { path: path.into(), reason: e.to_string() }),
        }
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        let Ok(entries) = std::fs::read_dir(self.0.join("catalog")) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| format!("catalog/{}", e.file_name().to_string_lossy()))
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        out.sort();
        Ok(out)
    }
}

/// A project held in memory: path -> text.
#[derive(Clone, Default)]
pub struct MemSource(pub BTreeMap<String, String>);

impl MemSource {
    /// A copy of a project directory.
    pub fn from_dir(dir: &Path) -> MemSource {
        let mut files = BTreeMap::new();
        collect(dir, dir, &mut files);
        MemSource(files)
    }

    /// Replaces a file.
    pub fn with(mut self, path: &str, text: &str) -> MemSource {
        self.0.insert(path.to_owned(), text.to_owned());
        self
    }

    /// Edits a file with a text replacement that must match.
    pub fn edit(self, path: &str, from: &str, to: &str) -> MemSource {
        let text = self.0.get(path).cloned().unwrap_or_default();
        assert!(text.contains(from), "{path} does not contain {from:?}");
        let edited = text.replacen(from, to, 1);
        self.with(path, &edited)
    }
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if let (Ok(rel), Ok(text)) = (path.strip_prefix(root), std::fs::read_to_string(&path)) {
            out.insert(rel.to_string_lossy().replace('\\', "/"), text);
        }
    }
}

impl ProjectSource for MemSource {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        Ok(self.0.get(path).cloned())
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        Ok(self.0.keys().filter(|k| k.starts_with("catalog/") && k.ends_with(".yaml")).cloned().collect())
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Checks a project source, failing the test if it cannot be read.
pub fn check(source: &dyn ProjectSource) -> Report {
    match check_project(source) {
        Ok(r) => r,
        Err(e) => panic!("project unreadable: {e}"),
    }
}

/// `code file:line:column` of every diagnostic, one per line.
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
    decode: impl FnOnce(&mut coordinator_core::decode::Decoder<'_>, &coordinator_core::yaml::Node) -> Option<T>,
) -> (Option<T>, Vec<coordinator_core::diagnostic::Diagnostic>) {
    let root = match coordinator_core::yaml::parse(name, text) {
        Ok(root) => root,
        Err(d) => panic!("not YAML: {d:?}"),
    };
    let mut d = coordinator_core::decode::Decoder::new(name);
    let file = decode(&mut d, &root);
    coordinator_core::diagnostic::sort(&mut d.diagnostics);
    for x in &d.diagnostics {
        eprintln!("{}:{} {} {} ({})", x.line, x.column, x.code, x.message, x.help);
    }
    (file, d.diagnostics)
}

/// Diagnostics as `line:column code`, in reading order.
pub fn positions(diagnostics: &[coordinator_core::diagnostic::Diagnostic]) -> Vec<String> {
    diagnostics.iter().map(|x| format!("{}:{} {}", x.line, x.column, x.code)).collect()
}

/// A file of `tests/fixtures/`.
pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap_or_default()
}
