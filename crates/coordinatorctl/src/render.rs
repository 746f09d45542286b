//! Printing diagnostics: compiler-style for people (source excerpt, caret,
//! help, colour on a terminal), or the JSON report of docs/reference/checker.md.

use coordinator_core::diagnostic::{Diagnostic, Severity};
use miette::{LabeledSpan, MietteDiagnostic, NamedSource, Report};
use serde_json::{Value, json};

/// The text of each project file, to show excerpts.
pub struct Sources<'a> {
    files: Vec<(&'a str, &'a str)>,
}

impl<'a> Sources<'a> {
    /// The given files (`(path, text)`).
    pub fn new(files: Vec<(&'a str, &'a str)>) -> Self {
        Sources { files }
    }

    fn text(&self, file: &str) -> Option<&'a str> {
        self.files.iter().find(|(f, _)| *f == file).map(|(_, t)| *t)
    }
}

/// Prints diagnostics for people on standard error.
pub fn human(diagnostics: &[Diagnostic], sources: &Sources<'_>) {
    for d in diagnostics {
        let severity = match d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        };
        let mut diag = MietteDiagnostic::new(d.message.clone())
            .with_code(d.code.as_str())
            .with_severity(severity)
            .with_help(d.help.clone());
        match sources.text(&d.file) {
            Some(text) => {
                let (start, len) = byte_range(text, d);
                diag = diag.with_label(LabeledSpan::at(start..start + len, "here"));
                let report = Report::new(diag).with_source_code(NamedSource::new(&d.file, text.to_owned()));
                eprintln!("{report:?}");
            }
            None => {
                eprintln!("{:?}", Report::new(diag));
                eprintln!("  at {}:{}:{}", d.file, d.line, d.column);
            }
        }
    }
}

/// The byte offset and length of a diagnostic's span, cut to its first line.
fn byte_range(text: &str, d: &Diagnostic) -> (usize, usize) {
    let start = offset(text, d.line, d.column);
    let end = if d.end_line == d.line && d.end_column > d.column {
        offset(text, d.end_line, d.end_column)
    } else {
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        line_end.max(start)
    };
    (start, end.saturating_sub(start).max(usize::from(start < text.len())))
}

/// Byte offset of a 1-based line and character column.
fn offset(text: &str, line: usize, column: usize) -> usize {
    let mut pos = 0;
    for _ in 1..line {
        match text[pos..].find('\n') {
            Some(i) => pos += i + 1,
            None => return text.len(),
        }
    }
    let rest = &text[pos..];
    let line_len = rest.find('\n').unwrap_or(rest.len());
    let within = rest[..line_len].char_indices().nth(column.saturating_sub(1)).map_or(line_len, |(i, _)| i);
    pos + within
}

/// The JSON report of a command.
pub fn report(
    command: &str,
    ok: bool,
    workflow: Option<&str>,
    revision: Option<&str>,
    diagnostics: &[Diagnostic],
) -> Value {
    json!({
        "ok": ok,
        "command": command,
        "workflow": workflow,
        "revision": revision,
        "diagnostics": diagnostics,
    })
}

/// Prints a JSON value on standard output.
pub fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => out(&format!("{text}\n")),
        Err(e) => eprintln!("error: cannot print the report: {e}"),
    }
}

/// Writes text to standard output. A reader that went away (`| head`) is not an
/// error worth a panic: the output is simply no longer wanted.
pub fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_characters_on_the_line() {
        let text = "ab\ncé d\n";
        assert_eq!(offset(text, 1, 1), 0);
        assert_eq!(offset(text, 2, 1), 3);
        assert_eq!(offset(text, 2, 3), 6);
        assert_eq!(offset(text, 9, 1), text.len());
    }
}
