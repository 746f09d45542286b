//! What every check reads (the decoded workflow, its node tree, the catalog,
//! the function signatures) and where it writes (the diagnostics).

use std::collections::BTreeMap;

use coordinator_functions::Signature;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::workflow::WorkflowFile;
use crate::yaml::{Node, Part, Path};

use super::catalog::Catalog;

/// The inputs and output of the semantic checks of one workflow.
pub struct Ctx<'a> {
    /// The decoded workflow.
    pub wf: &'a WorkflowFile,
    /// Its node tree, to point at text.
    pub root: &'a Node,
    /// Its file name.
    pub file: &'a str,
    /// Built-in and project operations and events.
    pub catalog: &'a Catalog,
    /// Function name -> parameter counts, when `functions.rhai` compiled.
    pub functions: Option<BTreeMap<String, Vec<usize>>>,
    /// What the checks found.
    pub diagnostics: Vec<Diagnostic>,
}

impl<'a> Ctx<'a> {
    /// A context over a decoded workflow.
    pub fn new(
        wf: &'a WorkflowFile,
        root: &'a Node,
        file: &'a str,
        catalog: &'a Catalog,
        signatures: Option<&[Signature]>,
    ) -> Self {
        let functions = signatures.map(|sigs| {
            let mut map: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for s in sigs {
                map.entry(s.name.clone()).or_default().push(s.params);
            }
            map
        });
        Ctx { wf, root, file, catalog, functions, diagnostics: Vec::new() }
    }

    /// Reports an error at the text of `path` in `workflow.yaml`.
    pub fn error(&mut self, code: Code, path: &Path, part: Part, message: impl Into<String>, help: impl Into<String>) {
        let span = self.root.span_of(path, part);
        self.diagnostics.push(Diagnostic::error(code, self.file, span, message, help));
    }

    /// Reports a warning at the text of `path` in `workflow.yaml`.
    pub fn warning(
        &mut self,
        code: Code,
        path: &Path,
        part: Part,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        let span = self.root.span_of(path, part);
        self.diagnostics.push(Diagnostic::error(code, self.file, span, message, help).warning());
    }
}

/// Path of a step in `workflow.yaml`.
pub fn step_path(id: &str) -> Path {
    Path::root().key("steps").key(id)
}
