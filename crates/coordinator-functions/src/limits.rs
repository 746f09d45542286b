//! The bounds every function call runs under.
//!
//! Owns [`Limits`] (the numbers a deployment may lower) and [`Bound`] (the
//! name of the bound that stopped a call). It must not build engines or run
//! scripts; `engine.rs` turns these numbers into Rhai settings.

use std::fmt;

/// How much work and memory one function call may use.
///
/// The defaults are those of docs/reference/project.md#functionsrhai. A
/// deployment may lower them; a zero is raised to one when the engine is built,
/// because Rhai reads zero as "unlimited" and a sandbox must never be
/// unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rhai operations (statements, expressions, loop iterations, calls) per call.
    pub max_operations: u64,
    /// Nesting depth of function calls, counting the called function itself.
    pub max_call_depth: usize,
    /// Nesting depth of expressions, checked when the source is compiled.
    pub max_expr_depth: usize,
    /// Bytes of string data in one value; Rhai sums every string inside a
    /// collection, so this also bounds the text an array or map can hold.
    pub max_string_bytes: usize,
    /// Entries in one array (or BLOB) and, separately, in one map; Rhai counts
    /// nested entries too, so this also bounds nesting.
    pub max_collection_entries: usize,
}

impl Limits {
    /// Rhai operations per call unless the deployment lowers it.
    pub const DEFAULT_MAX_OPERATIONS: u64 = 100_000;
    /// Call depth unless the deployment lowers it.
    pub const DEFAULT_MAX_CALL_DEPTH: usize = 32;
    /// Expression depth unless the deployment lowers it.
    pub const DEFAULT_MAX_EXPR_DEPTH: usize = 64;
    /// String bytes (64 KiB) unless the deployment lowers it.
    pub const DEFAULT_MAX_STRING_BYTES: usize = 65_536;
    /// Array and map entries unless the deployment lowers it.
    pub const DEFAULT_MAX_COLLECTION_ENTRIES: usize = 10_000;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_operations: Self::DEFAULT_MAX_OPERATIONS,
            max_call_depth: Self::DEFAULT_MAX_CALL_DEPTH,
            max_expr_depth: Self::DEFAULT_MAX_EXPR_DEPTH,
            max_string_bytes: Self::DEFAULT_MAX_STRING_BYTES,
            max_collection_entries: Self::DEFAULT_MAX_COLLECTION_ENTRIES,
        }
    }
}

/// Variables (parameters included) one function may have in scope at once.
///
/// Not a deployment setting: it only keeps a scope from growing without end,
/// and no sensible function comes near it.
pub const MAX_VARIABLES: usize = 1_024;

/// Functions one `functions.rhai` may define; a larger file is refused when
/// it is compiled.
pub const MAX_FUNCTIONS: usize = 1_024;

/// Which bound stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// [`Limits::max_operations`]: the call did too much work (e.g. an endless loop).
    Operations,
    /// [`Limits::max_call_depth`]: calls nested too deeply (e.g. runaway recursion).
    CallDepth,
    /// [`Limits::max_expr_depth`]: an expression nested too deeply. Rhai checks
    /// this while compiling, so a call meets it only in theory.
    ExpressionDepth,
    /// [`Limits::max_string_bytes`]: a string (or the strings inside one value) grew too large.
    StringSize,
    /// [`Limits::max_collection_entries`]: an array or map grew too large.
    CollectionSize,
    /// The fixed bound on live variables ([`MAX_VARIABLES`]), which is not a
    /// deployment setting.
    Variables,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Operations => "operation bound",
            Self::CallDepth => "call depth bound",
            Self::ExpressionDepth => "expression depth bound",
            Self::StringSize => "string size bound",
            Self::CollectionSize => "collection size bound",
            Self::Variables => "variable count bound",
        })
    }
}
