//! What the fuzz targets share: the example projects (embedded, so no input
//! reads a file), a project written as one text, and the property every
//! checker target asserts: each diagnostic points inside the file it names.

use std::collections::BTreeMap;

use coordinator_core::check::{self, MemoryProject};
use coordinator_core::diagnostic::{Diagnostic, Position};
use coordinator_core::machine::compiled::Workflow;
use coordinator_functions::Limits;

/// The line that starts another file in a project input: `#%file PATH`
/// (a YAML and Rhai comment, so a seed made of real files stays readable).
pub const FILE_MARKER: &str = "#%file ";

/// An example project: its files (path, text).
pub struct Example {
    /// Its directory under `examples/`.
    pub name: &'static str,
    /// Its files.
    pub files: &'static [(&'static str, &'static str)],
}

macro_rules! example {
    ($name:literal, [$($path:literal),*]) => {
        Example {
            name: $name,
            files: &[$(($path, include_str!(concat!("../../examples/", $name, "/", $path)))),*],
        }
    };
}

/// The repository's example projects.
pub const EXAMPLES: &[Example] = &[
    example!("reviewed-notice", ["workflow.yaml", "functions.rhai"]),
    example!("permit-check", ["workflow.yaml", "functions.rhai", "catalog/permits.yaml"]),
    example!("appointment-reminder", ["workflow.yaml", "functions.rhai"]),
];

/// A project from one text: `workflow.yaml` up to the first [`FILE_MARKER`]
/// line, then each marked file up to the next.
pub fn split_project(text: &str) -> MemoryProject {
    let mut files = BTreeMap::new();
    let mut path = check::WORKFLOW_FILE.to_owned();
    let mut body = String::new();
    for line in text.split_inclusive('\n') {
        if let Some(next) = line.strip_prefix(FILE_MARKER) {
            files.insert(std::mem::take(&mut path), std::mem::take(&mut body));
            path = next.trim_end_matches(['\n', '\r']).to_owned();
        } else {
            body.push_str(line);
        }
    }
    files.insert(path, body);
    MemoryProject(files)
}

/// An example as one text, in the form [`split_project`] reads.
pub fn join_project(files: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (path, text)) in files.iter().enumerate() {
        if i > 0 {
            out.push_str(FILE_MARKER);
            out.push_str(path);
            out.push('\n');
        }
        out.push_str(text);
    }
    out
}

/// An example checked and compiled (harness set-up: panics if the example is broken).
pub fn compiled(example: &Example) -> Workflow {
    let report = check::check_project(&MemoryProject::of(example.files.iter().copied()))
        .unwrap_or_else(|e| panic!("example {}: {e}", example.name));
    let checked = report.checked.unwrap_or_else(|| panic!("example {} is refused", example.name));
    Workflow::compile(checked.definition, Limits::default()).unwrap_or_else(|e| panic!("example {}: {e}", example.name))
}

/// Whether `at` is a position of `text`: lines split at `\n` (as the
/// renderers count them), columns in characters, one past the end allowed.
pub fn inside(text: &str, at: Position) -> bool {
    let Some(line) = at.line.checked_sub(1).and_then(|i| text.split('\n').nth(i)) else { return false };
    at.column >= 1 && at.column <= line.chars().count() + 1
}

/// Asserts that every diagnostic names a file of `files`, that its span lies
/// inside that file's text and that it does not end before it starts.
pub fn assert_spans_inside(diagnostics: &[Diagnostic], files: &dyn Fn(&str) -> Option<String>) {
    for d in diagnostics {
        let text = files(&d.file)
            .unwrap_or_else(|| panic!("{} names {}, which is not an input file", d.code.as_str(), d.file));
        let start = Position { line: d.line, column: d.column };
        let end = Position { line: d.end_line, column: d.end_column };
        assert!(inside(&text, start), "{} starts outside {}: {}:{}", d.code.as_str(), d.file, d.line, d.column);
        assert!(inside(&text, end), "{} ends outside {}: {}:{}", d.code.as_str(), d.file, d.end_line, d.end_column);
        assert!(start <= end, "{} ends before it starts: {start:?} > {end:?}", d.code.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joined_example_splits_back_into_its_files() {
        for example in EXAMPLES {
            let project = split_project(&join_project(example.files));
            let expected: BTreeMap<String, String> =
                example.files.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())).collect();
            assert_eq!(project.0, expected, "{}", example.name);
        }
    }

    #[test]
    fn positions_count_lines_at_newlines_and_characters_in_a_line() {
        let text = "ab\né\n";
        assert!(inside(text, Position { line: 1, column: 3 }));
        assert!(!inside(text, Position { line: 1, column: 4 }));
        assert!(inside(text, Position { line: 2, column: 2 }));
        assert!(inside(text, Position { line: 3, column: 1 }));
        assert!(!inside(text, Position { line: 4, column: 1 }));
        assert!(!inside(text, Position { line: 0, column: 1 }));
    }

    #[test]
    fn every_example_compiles() {
        for example in EXAMPLES {
            compiled(example);
        }
    }
}
