//! The offline checker: everything `coordinatorctl check` proves (docs/reference/checker.md).
//!
//! [`check_project`] reads the project through [`ProjectSource`] (the caller does
//! the IO), parses and decodes every file, runs each proof family in its own
//! module, and returns every diagnostic at once together with the compiled
//! [`Definition`] when there is no error. Structural (`yaml.*`, `schema.*`)
//! errors stop the semantic proofs for that file, as a compiler stops at parse
//! errors; the semantic proofs then report all their findings together.

pub mod catalog;
pub mod context;
pub mod dataflow;
pub mod functions;
pub mod graph;
pub mod operations;
pub mod outcomes;
pub mod runtime;
pub mod schedules;
pub mod schemas;
pub mod search_keys;
pub mod triggers;
pub mod waits;
pub mod worker;

use coordinator_functions::{Functions, Limits};

use crate::decode::{self, Decoder};
use crate::definition::{Definition, PinnedOperation, normalise_line_endings};
use crate::diagnostic::{self, Code, Diagnostic, Span};
use crate::json_schema;
use crate::model::workflow::WorkflowFile;
use crate::yaml::{self, Node, Part, Path};

use self::catalog::Catalog;
use self::context::Ctx;

/// The name of the workflow file in a project directory.
pub const WORKFLOW_FILE: &str = "workflow.yaml";

/// Read access to a project's files. Paths are relative to the project directory.
pub trait ProjectSource {
    /// The text of a file, `Ok(None)` if it does not exist.
    ///
    /// # Errors
    /// [`SourceError`] if the file exists but cannot be read.
    fn read(&self, path: &str) -> Result<Option<String>, SourceError>;

    /// The paths of the project's catalog files (`catalog/*.yaml`), sorted.
    ///
    /// # Errors
    /// [`SourceError`] if the catalog directory exists but cannot be listed.
    fn catalog_files(&self) -> Result<Vec<String>, SourceError>;
}

/// A project held in memory: file path (`workflow.yaml`, `catalog/x.yaml`, …)
/// to text. For tests and tools that assemble a project without a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryProject(pub std::collections::BTreeMap<String, String>);

impl MemoryProject {
    /// A project of `files` (path, text).
    pub fn of<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> MemoryProject {
        MemoryProject(files.into_iter().map(|(path, text)| (path.to_owned(), text.to_owned())).collect())
    }
}

impl ProjectSource for MemoryProject {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        Ok(self.0.get(path).cloned())
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        Ok(self.0.keys().filter(|k| k.starts_with("catalog/") && k.ends_with(".yaml")).cloned().collect())
    }
}

/// A project file that could not be read (exit code 3 in the binaries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The file exists but reading it failed.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why (from the operating system).
        reason: String,
    },
    /// The project has no `workflow.yaml`.
    #[error("no {WORKFLOW_FILE} in the project directory")]
    NoWorkflow,
}

/// The result of checking a project.
#[derive(Debug)]
pub struct Report {
    /// The workflow id, when the workflow file decoded far enough to have one.
    pub workflow: Option<String>,
    /// Every finding, sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
    /// The compiled project, when there is no error.
    pub checked: Option<Checked>,
    /// Every project file read, with its text, for showing excerpts.
    pub files: Vec<(String, String)>,
}

impl Report {
    /// Whether the project is accepted (no error; warnings allowed).
    pub fn ok(&self) -> bool {
        self.checked.is_some()
    }

    /// The revision, when the project is accepted.
    pub fn revision(&self) -> Option<&str> {
        self.checked.as_ref().map(|c| c.revision.as_str())
    }
}

/// A project that passed every proof.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The decoded workflow file (with titles and descriptions).
    pub workflow: WorkflowFile,
    /// The compiled definition.
    pub definition: Definition,
    /// Its revision.
    pub revision: String,
    /// The project files read, with their text (`workflow.yaml`, the functions file, catalogs).
    pub files: Vec<(String, String)>,
}

/// Checks a project.
///
/// # Errors
/// [`SourceError`] when a file cannot be read at all; every problem with the
/// content of the files is a diagnostic in the [`Report`] instead.
pub fn check_project(source: &dyn ProjectSource) -> Result<Report, SourceError> {
    check(source, None, Vec::new())
}

/// Checks a project and the `runtime.yaml` of a deployment that would run it:
/// the runtime file's own structure, the project's connections against it and,
/// when `runtime` has a [`SecretProbe`](runtime::SecretProbe), its secret
/// references. The report's files include the runtime file's text with every
/// possible secret masked, for excerpts.
///
/// # Errors
/// As [`check_project`]; the caller has read the runtime file already.
pub fn check_project_with_runtime(
    source: &dyn ProjectSource,
    runtime: &runtime::RuntimeInput<'_>,
) -> Result<Report, SourceError> {
    let mut diagnostics = Vec::new();
    let (loaded, shown) = runtime::load(runtime, &mut diagnostics);
    let mut report = check(source, loaded.as_ref(), diagnostics)?;
    if let (Some(loaded), Some(project)) = (&loaded, report.revision())
        && let Some(pinned) = loaded.package_revision.as_deref()
        && pinned != project
    {
        let at = Path::root().key("package").key("digest");
        let warning = Diagnostic::error(
            Code::RuntimePackageOtherRevision,
            &loaded.file,
            loaded.root.span_of(&at, Part::Value),
            format!("the pinned package holds revision {pinned}; this project is revision {project}"),
            "package this project and pin its digest, or check the project the package was made from",
        )
        .warning();
        report.diagnostics.push(warning);
        diagnostic::sort(&mut report.diagnostics);
    }
    report.files.extend(shown.map(|text| (runtime.file.to_owned(), text)));
    Ok(report)
}

/// Checks a project, starting from the runtime file's diagnostics (if any).
fn check(
    source: &dyn ProjectSource,
    runtime: Option<&runtime::LoadedRuntime>,
    mut diagnostics: Vec<Diagnostic>,
) -> Result<Report, SourceError> {
    let text = source.read(WORKFLOW_FILE)?.ok_or(SourceError::NoWorkflow)?;
    let mut files = vec![(WORKFLOW_FILE.to_owned(), text.clone())];

    let mut catalog = Catalog::builtin();
    for path in source.catalog_files()? {
        let Some(text) = source.read(&path)? else { continue };
        match catalog::load(&path, &text, false, &mut diagnostics) {
            Ok(loaded) => {
                catalog_schemas(&loaded.file, &loaded.root, &loaded.catalog, &mut diagnostics);
                catalog.add(loaded, &mut diagnostics);
            }
            Err(product) => catalog.broken.push(product),
        }
        files.push((path, text));
    }

    let (root, workflow) = match yaml::parse(WORKFLOW_FILE, &text) {
        Ok(root) => {
            let mut decoder = Decoder::new(WORKFLOW_FILE);
            let workflow = decode::workflow::decode(&mut decoder, &root);
            diagnostics.append(&mut decoder.diagnostics);
            (root, workflow)
        }
        Err(d) => {
            diagnostics.push(d);
            return Ok(finish(None, diagnostics, None, files));
        }
    };
    let workflow_id = workflow.as_ref().map(|w| w.workflow.id.clone()).or_else(|| id_of(&root));
    let Some(workflow) = workflow else {
        return Ok(finish(workflow_id, diagnostics, None, files));
    };

    let (functions_source, compiled) = match source.read(&workflow.functions)? {
        None => {
            let span = root.span_of(&Path::root().key("functions"), Part::Value);
            diagnostics.push(Diagnostic::error(
                Code::ProjectMissingFile,
                WORKFLOW_FILE,
                span,
                format!("the functions file `{}` does not exist", workflow.functions),
                "create it next to workflow.yaml, or correct the path",
            ));
            (None, None)
        }
        Some(text) => {
            let compiled = match Functions::compile(&text, Limits::default()) {
                Ok(functions) => Some(functions),
                Err(e) => {
                    diagnostics.push(Diagnostic::error(
                        Code::FunctionCompile,
                        &workflow.functions,
                        Span::at(e.line, e.column),
                        format!("the functions file does not compile: {}", e.message),
                        "fix the Rhai syntax at this position",
                    ));
                    None
                }
            };
            files.push((workflow.functions.clone(), text.clone()));
            (Some(text), compiled)
        }
    };
    let signatures = compiled.as_ref().map(Functions::signatures);

    let mut cx = Ctx::new(&workflow, &root, WORKFLOW_FILE, &catalog, signatures.as_deref());
    operations::check(&mut cx);
    let graph = graph::check(&mut cx);
    dataflow::check(&mut cx, &graph);
    waits::check(&mut cx);
    functions::check(&mut cx);
    outcomes::check(&mut cx);
    schemas::check(&mut cx);
    triggers::check(&mut cx);
    search_keys::check(&mut cx, compiled.as_ref());
    schedules::check(&mut cx, compiled.as_ref());
    if let Some(rt) = runtime {
        runtime::check(&mut cx, rt);
    }
    diagnostics.append(&mut cx.diagnostics);

    let errors = diagnostics.iter().any(Diagnostic::is_error);
    let checked = match functions_source {
        Some(source) if !errors => compile(&workflow, &catalog, &source, files.clone()),
        _ => None,
    };
    Ok(finish(workflow_id, diagnostics, checked, files))
}

fn finish(
    workflow: Option<String>,
    mut diagnostics: Vec<Diagnostic>,
    checked: Option<Checked>,
    files: Vec<(String, String)>,
) -> Report {
    diagnostic::sort(&mut diagnostics);
    Report { workflow, diagnostics, checked, files }
}

/// The workflow id from the raw tree, for reports of files that did not decode.
fn id_of(root: &Node) -> Option<String> {
    match &root.get("workflow")?.get("id")?.value {
        yaml::NodeValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Builds the definition and revision of a project without errors.
fn compile(
    workflow: &WorkflowFile,
    catalog: &Catalog,
    functions: &str,
    files: Vec<(String, String)>,
) -> Option<Checked> {
    let mut operations = std::collections::BTreeMap::new();
    for (alias, binding) in &workflow.operations {
        let descriptor = catalog.operations.get(&binding.operation)?.clone();
        operations.insert(
            alias.clone(),
            PinnedOperation {
                operation: binding.operation.clone(),
                connection: binding.connection.clone(),
                descriptor,
            },
        );
    }
    let definition = Definition {
        workflow: workflow.workflow.id.clone(),
        deadline_seconds: workflow.deadline_seconds,
        input: workflow.input.clone(),
        operations,
        triggers: workflow.triggers.clone(),
        search_keys: workflow.search_keys.iter().map(|(name, key)| (name.clone(), key.function.clone())).collect(),
        schedules: workflow
            .schedules
            .iter()
            .map(|s| crate::model::workflow::Schedule { description: None, ..s.clone() })
            .collect(),
        start: workflow.start.clone(),
        steps: workflow.steps.clone(),
        outcomes: workflow.outcomes.clone(),
        functions: normalise_line_endings(functions),
    };
    let revision = definition.revision().ok()?;
    Some(Checked { workflow: workflow.clone(), definition, revision, files })
}

/// Every schema a project catalog embeds must be a valid JSON Schema.
fn catalog_schemas(file: &str, root: &Node, catalog: &crate::model::catalog::CatalogFile, out: &mut Vec<Diagnostic>) {
    let mut check = |path: Path, schema: &serde_json::Value| {
        if let Err(e) = json_schema::compile(schema) {
            let mut full = path;
            full.0.extend(e.path.0);
            out.push(Diagnostic::error(
                Code::SchemaInvalidJsonSchema,
                file,
                root.span_of(&full, Part::Value),
                format!("not a valid JSON Schema 2020-12: {}", e.message),
                "fix the schema keyword at this position (see json-schema.org, draft 2020-12)",
            ));
        }
    };
    for (name, op) in &catalog.operations {
        let base = Path::root().key("operations").key(name);
        check(base.key("input"), &op.input);
        check(base.key("output"), &op.output);
        for (completion, c) in &op.completions {
            check(base.key("completions").key(completion).key("schema"), &c.schema);
        }
    }
    for (name, ev) in &catalog.events {
        check(Path::root().key("events").key(name).key("schema"), &ev.schema);
    }
}
