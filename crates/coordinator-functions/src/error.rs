//! The errors of compiling and calling functions.
//!
//! Owns [`CompileError`] and [`CallError`]. Messages here must never carry
//! argument values, thrown values or anything else computed from run data:
//! the data may be protected, and these messages end up in journals, API
//! responses and logs. They name functions, script positions and kinds of
//! failure only.

use crate::limits::Bound;

/// `functions.rhai` does not compile under the bounds.
///
/// The message comes from Rhai's parser and describes the source text (which
/// is the author's, never run data); the position is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (line {line}, column {column})")]
pub struct CompileError {
    /// What is wrong with the source, e.g. "Expecting ')' ...".
    pub message: String,
    /// 1-based line in `functions.rhai` (1 when Rhai gives no position).
    pub line: usize,
    /// 1-based column, counted in characters (1 when Rhai gives no position).
    pub column: usize,
}

/// A function call did not produce a JSON value.
///
/// Every variant fails the run with the same code (see [`CallError::code`]);
/// the variants say why for operators and tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No script function has this name and number of parameters.
    #[error("functions.rhai defines no function `{name}` with {arity} parameter(s)")]
    UnknownFunction {
        /// The name that was called.
        name: String,
        /// The number of arguments it was called with.
        arity: usize,
    },
    /// A bound of the sandbox stopped the call.
    #[error("function `{function}` was stopped by the {bound}")]
    Bound {
        /// The function that was called.
        function: String,
        /// Which bound stopped it.
        bound: Bound,
    },
    /// The call failed for any other reason, including a `throw` in the script.
    #[error("function `{function}` failed: {message}")]
    Failed {
        /// The function that was called.
        function: String,
        /// The kind of failure and where in `functions.rhai` it happened; never a value.
        message: String,
    },
    /// The function returned something JSON cannot hold (a function pointer,
    /// a NaN or infinite float, a range, ...).
    #[error("function `{function}` returned a value that is not JSON: {message}")]
    Output {
        /// The function that was called.
        function: String,
        /// What kind of value was found and where inside the result; never the value.
        message: String,
    },
}

impl CallError {
    /// The run-failure code for every call error: `function.failed`.
    ///
    /// docs/reference/project.md#functionsrhai fails a run with one code
    /// whether the function threw, hit a bound or returned something unusable;
    /// the variant is detail for the operator, not a different contract. An
    /// unknown function or wrong arity is refused by `coordinatorctl check`
    /// (`function.unknown`, `function.arity`) before a run exists, so meeting
    /// it at run time is the same kind of failure.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownFunction { .. } | Self::Bound { .. } | Self::Failed { .. } | Self::Output { .. } => {
                "function.failed"
            }
        }
    }
}
