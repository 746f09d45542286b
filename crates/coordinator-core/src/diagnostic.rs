//! Diagnostics: what the checker says about a project, with a stable code, a
//! position and a repair hint. Owns the code list; does not render (the
//! binaries choose human or JSON output).

use serde::Serialize;

/// A position in a project file: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// A range in a project file, end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize)]
pub struct Span {
    /// First character of the range.
    pub start: Position,
    /// Just past the last character of the range.
    pub end: Position,
}

impl Span {
    /// A span of one position (used when only a start is known).
    pub fn at(line: usize, column: usize) -> Self {
        let p = Position { line, column };
        Span { start: p, end: p }
    }
}

/// How serious a diagnostic is. Errors refuse the project; warnings do not
/// (unless the caller denies warnings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The project is refused.
    Error,
    /// The project is accepted, but something is probably not what the author meant.
    Warning,
}

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $text:literal, )*) => {
        /// Stable diagnostic codes. Never renamed: tools and tests depend on the text.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable text of the code, e.g. `graph.cycle`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Code::$variant => $text, )*
                }
            }
        }
    };
}

codes! {
    /// The YAML is not well-formed.
    YamlSyntax = "yaml.syntax",
    /// A mapping has the same key twice.
    YamlDuplicateKey = "yaml.duplicate-key",
    /// A field that the format does not know.
    SchemaUnknownField = "schema.unknown-field",
    /// A required field is absent.
    SchemaMissingField = "schema.missing-field",
    /// A field has a value of the wrong type or outside its allowed values.
    SchemaInvalidValue = "schema.invalid-value",
    /// An embedded JSON Schema is not a valid JSON Schema 2020-12.
    SchemaInvalidJsonSchema = "schema.invalid-json-schema",
    /// A file the project names does not exist.
    ProjectMissingFile = "project.missing-file",
    /// A route names a step that does not exist.
    GraphUnknownStep = "graph.unknown-step",
    /// The step graph has a cycle.
    GraphCycle = "graph.cycle",
    /// A step cannot be reached from `start`.
    GraphUnreachableStep = "graph.unreachable-step",
    /// A `{type: step}` source may be read on a route where that step produced nothing.
    DataflowUnavailableOnRoute = "dataflow.unavailable-on-route",
    /// A `{type: step}` source names a step that never has an output (choose, wait-until, finish).
    DataflowNoOutput = "dataflow.no-output",
    /// A `wait-for` names a completion its call's operation does not expose.
    WaitUnknownCompletion = "wait.unknown-completion",
    /// A `wait-for` can be reached without its call having been accepted.
    WaitCompletionNotBefore = "wait.completion-not-before",
    /// A `wait-for` timeout is not shorter than the run deadline.
    WaitTimeoutExceedsDeadline = "wait.timeout-exceeds-deadline",
    /// A mapping names a function that `functions.rhai` does not define.
    FunctionUnknown = "function.unknown",
    /// A mapping passes a different number of arguments than the function takes.
    FunctionArity = "function.arity",
    /// `functions.rhai` does not compile.
    FunctionCompile = "function.compile",
    /// An operation alias names a host operation that no catalog describes.
    OperationUnknown = "operation.unknown",
    /// A step names an operation alias that `operations` does not declare.
    OperationUnknownAlias = "operation.unknown-alias",
    /// An `onDeclaredRefusal` code is not declared by the operation's owner.
    OperationUndeclaredRefusal = "operation.undeclared-refusal",
    /// An operation alias is declared but no step uses it.
    OperationUnusedAlias = "operation.unused-alias",
    /// A proposal action cannot be run by the coordinator.
    OperationProposalAction = "coordinator.operation.proposal-action",
    /// A `finish` names an outcome that `outcomes` does not declare.
    OutcomeUnknown = "outcome.unknown",
    /// A `finish` of an outcome with a non-null schema has no `output` mapping.
    OutcomeOutputMissing = "outcome.output-missing",
    /// A `finish` of an outcome whose schema is `{type: "null"}` has an `output` mapping.
    OutcomeOutputNotAllowed = "outcome.output-not-allowed",
    /// An outcome is declared but no `finish` step ends with it.
    OutcomeUnused = "outcome.unused",
    /// A trigger names a product event that no catalog describes.
    TriggerUnknownEvent = "trigger.unknown-event",
    /// A trigger names a connection the runtime configuration does not have.
    TriggerUnknownConnection = "trigger.unknown-connection",
    /// A search key's function fails, or returns what a key cannot hold, on a sample of the input schema.
    SearchKeyResult = "search-key.result",
    /// Two schedules of a workflow have the same id.
    ScheduleDuplicate = "schedule.duplicate",
    /// A schedule's `cron` does not parse, or matches no time.
    ScheduleCronInvalid = "schedule.cron-invalid",
    /// A schedule's `timeZone` is not in the IANA time zone database.
    ScheduleTimeZoneUnknown = "schedule.time-zone-unknown",
    /// A schedule fires more often than the floor allows.
    ScheduleTooFrequent = "schedule.too-frequent",
    /// A schedule's input function fails, or its result does not match the input schema, at a sample instant.
    ScheduleInputInvalid = "schedule.input-invalid",
    /// A project catalog uses a product name that the built-in catalog already has.
    CatalogShadowsBuiltin = "catalog.shadows-builtin",
    /// Two project catalog files describe the same product.
    CatalogDuplicateProduct = "catalog.duplicate-product",
    /// An operation alias names a connection the runtime configuration does not have.
    RuntimeUnknownConnection = "runtime.unknown-connection",
    /// A connection reaches another product than the operation or event bound to it.
    RuntimeProductMismatch = "runtime.product-mismatch",
    /// A trigger's connection has no event-signing secret to verify its events with.
    RuntimeMissingSigningSecret = "runtime.missing-signing-secret",
    /// A runtime connection is used by no operation alias or trigger.
    RuntimeUnusedConnection = "runtime.unused-connection",
    /// A remote connection's `workers` names a subject that no static token
    /// and no grant gives the role `worker` (an error when none of its
    /// subjects can serve the connection, else a warning).
    RuntimeUnknownWorker = "runtime.unknown-worker",
    /// With `--environment`: a secret reference names an unset variable or an unreadable file.
    RuntimeSecretUnavailable = "runtime.secret-unavailable",
    /// With `--environment`: the pinned package file cannot be read, is not a
    /// package, or does not have the pinned digest.
    RuntimePackageUnavailable = "runtime.package-unavailable",
    /// With `--environment`: the pinned package holds another revision than the project checked.
    RuntimePackageOtherRevision = "runtime.package-other-revision",
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One finding about a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// Error or warning.
    pub severity: Severity,
    /// The file, relative to the project directory (`workflow.yaml`, `catalog/permits.yaml`).
    pub file: String,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column of the start.
    pub column: usize,
    /// 1-based line of the end (exclusive).
    #[serde(rename = "endLine")]
    pub end_line: usize,
    /// 1-based column of the end (exclusive).
    #[serde(rename = "endColumn")]
    pub end_column: usize,
    /// What is wrong. Never echoes input or secret values.
    pub message: String,
    /// How to repair it.
    pub help: String,
}

impl Diagnostic {
    /// An error at `span` of `file`.
    pub fn error(code: Code, file: &str, span: Span, message: impl Into<String>, help: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: Severity::Error,
            file: file.to_owned(),
            line: span.start.line,
            column: span.start.column,
            end_line: span.end.line,
            end_column: span.end.column,
            message: message.into(),
            help: help.into(),
        }
    }

    /// The same finding as a warning.
    pub fn warning(self) -> Self {
        Diagnostic { severity: Severity::Warning, ..self }
    }

    /// Whether this diagnostic refuses the project.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics the way a reader expects: by file, then position, then code.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (a.file.as_str(), a.line, a.column, a.code.as_str()).cmp(&(b.file.as_str(), b.line, b.column, b.code.as_str()))
    });
}
