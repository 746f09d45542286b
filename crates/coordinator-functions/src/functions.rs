//! A compiled `functions.rhai` and the one way to call into it.
//!
//! Owns [`Functions`] (engine plus AST, shared by reference counting) and
//! [`Signature`]; `call.rs` runs the calls. Nothing here changes after
//! compiling, so calls cannot influence each other through it. It must not
//! keep state between calls, read a clock, or do IO.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use rhai::{AST, Engine, ParseError, ParseErrorType};
use serde_json::Value;

use crate::call;
use crate::engine::sandbox_engine;
use crate::error::{CallError, CompileError};
use crate::limits::Limits;
use crate::locate;

/// A function defined in `functions.rhai` (private ones included).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The function's name.
    pub name: String,
    /// How many parameters it declares.
    pub params: usize,
    /// 1-based line of the function's name in the source.
    pub line: usize,
    /// 1-based column (in characters) of the function's name.
    pub column: usize,
}

/// A compiled `functions.rhai`, ready to be called from any thread.
///
/// Cloning is cheap: clones share one engine and AST.
#[derive(Clone)]
pub struct Functions {
    inner: Arc<Compiled>,
}

/// What a compile produces; read-only from then on.
pub(crate) struct Compiled {
    pub(crate) engine: Engine,
    pub(crate) ast: AST,
    pub(crate) limits: Limits,
    /// Sorted by name, then params.
    pub(crate) signatures: Vec<Signature>,
    /// Identifiers in the source: names an error message may show.
    pub(crate) source_words: HashSet<String>,
}

impl Functions {
    /// Compiles `source` under `limits`.
    ///
    /// CRLF line endings are read as LF, as the revision hash reads them.
    /// The source's top-level statements are compiled but never run.
    ///
    /// # Errors
    ///
    /// [`CompileError`] with Rhai's message and the 1-based position when the
    /// source is not valid Rhai, uses something the sandbox leaves out
    /// (`eval`, `import`, an undeclared variable), or nests expressions
    /// beyond [`Limits::max_expr_depth`].
    pub fn compile(source: &str, limits: Limits) -> Result<Self, CompileError> {
        let source = normalize_line_endings(source);
        let engine = sandbox_engine(&limits);
        let ast = engine.compile(source.as_ref()).map_err(|error| compile_error(&error, &limits))?;
        let signatures = signatures_of(&ast, &source);
        let source_words = locate::words(&source);
        Ok(Self { inner: Arc::new(Compiled { engine, ast, limits, signatures, source_words }) })
    }

    /// Every script-defined function, sorted by name, then parameter count.
    #[must_use]
    pub fn signatures(&self) -> Vec<Signature> {
        self.inner.signatures.clone()
    }

    /// The limits this source was compiled under.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Calls the script function `name` with `args` and returns its result.
    ///
    /// Arguments become Rhai values (JSON integers are `INT`, other numbers
    /// `FLOAT`, `null` is `()`); each argument must itself fit the string
    /// and collection bounds. The result comes back the same way, so a value
    /// a function only passes through is returned exactly.
    ///
    /// The call runs on an evaluator thread whose stack is sized
    /// for the deepest evaluation the limits allow, so no script can
    /// overflow the caller's stack; the calling thread just waits for it.
    /// That thread is started on a calling thread's first call and reused.
    ///
    /// # Errors
    ///
    /// [`CallError`]; none of its messages contains an argument, a thrown
    /// value or a part of the result.
    pub fn call(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        let compiled = &*self.inner;
        let known =
            compiled.signatures.iter().any(|signature| signature.name == name && signature.params == args.len());
        if !known {
            return Err(CallError::UnknownFunction { name: name.to_string(), arity: args.len() });
        }

        call::run(&self.inner, name, args)
    }
}

impl fmt::Debug for Functions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Functions")
            .field("limits", &self.inner.limits)
            .field("signatures", &self.inner.signatures)
            .finish_non_exhaustive()
    }
}

fn normalize_line_endings(source: &str) -> Cow<'_, str> {
    if source.contains("\r\n") { Cow::Owned(source.replace("\r\n", "\n")) } else { Cow::Borrowed(source) }
}

fn compile_error(error: &ParseError, limits: &Limits) -> CompileError {
    let ParseError(kind, position) = error;
    let mut message = kind.to_string();
    if matches!(**kind, ParseErrorType::ExprTooDeep) {
        message.push_str(&format!(" (expression depth bound: {})", limits.max_expr_depth));
    }
    CompileError { message, line: position.line().unwrap_or(1), column: position.position().unwrap_or(1) }
}

/// Pairs Rhai's list of functions with the positions found in the source.
fn signatures_of(ast: &AST, source: &str) -> Vec<Signature> {
    let definitions = locate::definitions(source);
    let mut signatures: Vec<Signature> = ast
        .iter_functions()
        .map(|function| {
            let params = function.params.len();
            // The scan sees what Rhai compiled, so a miss means a syntax it
            // does not know yet; the start of the file is still a valid place.
            let (line, column) = definitions
                .iter()
                .find(|found| found.name == function.name && found.params == params)
                .map_or((1, 1), |found| (found.line, found.column));
            Signature { name: function.name.to_string(), params, line, column }
        })
        .collect();
    signatures.sort_by(|a, b| (&a.name, a.params).cmp(&(&b.name, b.params)));
    signatures
}
