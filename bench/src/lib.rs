//! Generators of large projects for the benchmarks.

use std::collections::BTreeMap;
use std::fmt::Write;

use coordinator_core::check::{ProjectSource, SourceError};

/// A project held in memory.
pub struct MemProject(pub BTreeMap<String, String>);

impl ProjectSource for MemProject {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        Ok(self.0.get(path).cloned())
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        Ok(Vec::new())
    }
}

/// A valid project with `steps` steps (calls, with a choose every tenth step
/// creating a join) and `functions` functions.
pub fn large_project(steps: usize, functions: usize) -> MemProject {
    let mut wf = String::from(
        "apiVersion: coordinator/v1\nkind: Workflow\nworkflow: {id: large}\nfunctions: functions.rhai\n\
         deadlineSeconds: 86400\ninput: {type: object}\n\
         operations:\n  read: {operation: breg.read-record/v1, connection: registry}\n\
         start: s0\nsteps:\n",
    );
    let last = steps - 1;
    for i in 0..last {
        let f = i % functions;
        if i % 10 == 9 && i + 2 <= last {
            let _ = writeln!(
                wf,
                "  s{i}:\n    type: choose\n    choose: {{function: pick, arguments: [{{type: input}}]}}\n    cases: {{a: s{}, b: s{}}}",
                i + 1,
                i + 2
            );
        } else {
            let first = if i == 0 { "{type: input}" } else { "{type: step, step: s0}" };
            let _ = writeln!(
                wf,
                "  s{i}:\n    type: call\n    operation: read\n    input: {{function: f{f}, arguments: [{{type: input}}, {first}]}}\n    next: s{}",
                i + 1
            );
        }
    }
    let _ = writeln!(
        wf,
        "  s{last}:\n    type: finish\n    outcome: done\n    output: {{function: out, arguments: [{{type: step, step: s0}}]}}"
    );
    wf.push_str("outcomes:\n  done: {type: object}\n");
    let mut rhai = String::from("fn pick(input) { \"a\" }\nfn out(first) { #{ id: first.recordId } }\n");
    for f in 0..functions {
        let _ = writeln!(
            rhai,
            "fn f{f}(input, first) {{ #{{ recordType: \"application\", recordId: first.recordId, n: {f} }} }}"
        );
    }
    MemProject(BTreeMap::from([("workflow.yaml".to_owned(), wf), ("functions.rhai".to_owned(), rhai)]))
}

/// A project directory on disk.
pub struct DirProject(pub std::path::PathBuf);

impl ProjectSource for DirProject {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        match std::fs::read_to_string(self.0.join(path)) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::Unreadable { path: path.to_owned(), reason: e.to_string() }),
        }
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        Ok(Vec::new())
    }
}

/// Copies a project to `out` with its scenarios.yaml cases repeated until there are `count`.
///
/// # Errors
/// When a file cannot be read or written.
pub fn many_cases(project: &std::path::Path, out: &std::path::Path, count: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    for file in ["workflow.yaml", "functions.rhai"] {
        std::fs::copy(project.join(file), out.join(file))?;
    }
    let text = std::fs::read_to_string(project.join("scenarios.yaml"))?;
    let start = text.find("cases:\n").map_or(0, |i| i + "cases:\n".len());
    let (head, body) = text.split_at(start);
    // Anchors are defined in the first case; later copies rename only the ids.
    let mut cases: Vec<&str> = body.split("\n- id: ").collect();
    let first = cases.remove(0);
    let first = first.trim_start_matches("- id: ");
    let mut all = vec![first];
    all.extend(cases);
    let mut out_text = String::from(head);
    for i in 0..count {
        let case = all[i % all.len()];
        let (id, rest) = case.split_once('\n').unwrap_or((case, ""));
        let rest =
            if i >= all.len() { rest.replace(": &", ": &x").replace("&x", &format!("&a{i}")) } else { rest.to_owned() };
        out_text.push_str(&format!("- id: {id}-{i}\n{rest}\n"));
    }
    std::fs::write(out.join("scenarios.yaml"), out_text)
}
