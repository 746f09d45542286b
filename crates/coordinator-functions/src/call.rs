//! Runs one function call inside the sandbox.
//!
//! Owns the steps of a call: converting the JSON arguments, running the
//! function on a thread whose stack fits the limits, and turning the result
//! or the error into JSON or a [`CallError`]. It must not keep anything
//! between calls: each call gets a fresh scope and never runs the script's
//! top-level statements.

use std::any::Any;
use std::thread;

use rhai::{CallFnOptions, Dynamic, EvalAltResult, Scope};
use serde_json::Value;

use crate::describe::{Failure, describe};
use crate::error::CallError;
use crate::functions::Compiled;
use crate::json;
use crate::limits::Limits;

/// Native stack bytes allowed per (call level x expression level).
///
/// Rhai evaluates by native recursion. Measured with rhai 1.27 in a debug
/// build: the deepest expressions the default bounds compile, recursing to
/// the call depth bound, used 9-18 KiB of stack per call level per
/// expression level (`id(id(...f(n + 1)...))` was the hungriest form) and
/// overflowed the 2 MiB of a default thread. Twice the worst measured leaves
/// room for forms not tried; release builds need far less.
const STACK_PER_LEVEL: usize = 32 * 1024;

/// Stack for everything that recurses over values rather than code: Rhai's
/// size checks and drops walk nested arrays and maps, which the collection
/// bound lets nest thousands deep.
const STACK_BASE: usize = 16 * 1024 * 1024;

/// Never reserve more than this, whatever the limits say.
const STACK_MAX: usize = 1024 * 1024 * 1024;

/// Calls `name` (already known to exist with `args.len()` parameters).
pub(crate) fn run(compiled: &Compiled, name: &str, args: &[Value]) -> Result<Value, CallError> {
    let outcome = thread::scope(|scope| {
        thread::Builder::new()
            .name(format!("rhai:{name}"))
            .stack_size(stack_bytes(&compiled.limits))
            .spawn_scoped(scope, || run_here(compiled, name, args))
            .map(|handle| handle.join())
    });
    match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(CallError::Failed {
            function: name.to_string(),
            message: format!("the script engine panicked ({})", panic_kind(&*panic)),
        }),
        Err(_) => Err(CallError::Failed {
            function: name.to_string(),
            message: "no thread could be started to run the function".to_string(),
        }),
    }
}

fn stack_bytes(limits: &Limits) -> usize {
    limits
        .max_call_depth
        .max(1)
        .saturating_mul(limits.max_expr_depth.max(1))
        .saturating_mul(STACK_PER_LEVEL)
        .saturating_add(STACK_BASE)
        .min(STACK_MAX)
}

/// A panic is a bug in Rhai, not in the project, but its message may quote
/// a value, so only whether there was one is reported.
fn panic_kind(panic: &(dyn Any + Send)) -> &'static str {
    if panic.is::<&str>() || panic.is::<String>() { "message withheld" } else { "no message" }
}

fn run_here(compiled: &Compiled, name: &str, args: &[Value]) -> Result<Value, CallError> {
    let Compiled { engine, ast, source_words, .. } = compiled;
    let failure = |error: &EvalAltResult| match describe(error, source_words) {
        Failure::Bound(bound) => CallError::Bound { function: name.to_string(), bound },
        Failure::Failed(message) => CallError::Failed { function: name.to_string(), message },
    };
    let mut values = Vec::with_capacity(args.len());
    for (index, arg) in args.iter().enumerate() {
        let value = json::to_rhai(arg).map_err(|message| CallError::Failed {
            function: name.to_string(),
            message: format!("argument {}: {message}", index + 1),
        })?;
        // Checked up front so an oversized input fails the same way whatever
        // the function does with it.
        engine.ensure_data_size_within_limits(&value).map_err(|error| failure(&error))?;
        values.push(value);
    }

    let options = CallFnOptions::new().eval_ast(false).rewind_scope(true);
    let result = engine.call_fn_with_options::<Dynamic>(options, &mut Scope::new(), ast, name, values);
    // A captured variable comes back as a shared cell; only its content is the result.
    let value = result.map_err(|error| failure(&error))?.flatten();
    // Rhai does not check a function's return value against the bounds.
    engine.ensure_data_size_within_limits(&value).map_err(|error| failure(&error))?;
    json::to_json(value).map_err(|message| CallError::Output { function: name.to_string(), message })
}
