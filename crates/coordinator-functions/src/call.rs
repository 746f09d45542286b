//! Runs one function call inside the sandbox.
//!
//! Owns the steps of a call: converting the JSON arguments, running the
//! function on a thread whose stack fits the limits, and turning the result
//! or the error into JSON or a [`CallError`]. It must not keep anything
//! between calls: each call gets a fresh scope and never runs the script's
//! top-level statements.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, mpsc};
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
///
/// The call runs on this thread's evaluator: a long-lived thread of its own
/// with a stack sized for the limits, started on first use and reused, so a
/// call costs a hand-over rather than a thread start (starting and unmapping a
/// large stack per call dominated the machine's decision time).
pub(crate) fn run(compiled: &Arc<Compiled>, name: &str, args: &[Value]) -> Result<Value, CallError> {
    let stack = stack_bytes(&compiled.limits);
    // A caller whose own thread has room for the deepest evaluation (the service's
    // workers and the scenario runner start theirs with such a stack) runs the call
    // here, without any hand-over.
    if stacker::remaining_stack().is_some_and(|left| left >= stack) {
        return match panic::catch_unwind(AssertUnwindSafe(|| run_here(compiled, name, args))) {
            Ok(result) => result,
            Err(panic) => Err(CallError::Failed {
                function: name.to_string(),
                message: format!("the script engine panicked ({})", panic_kind(&*panic)),
            }),
        };
    }
    let job_compiled = Arc::clone(compiled);
    let job_name = name.to_owned();
    let job_args = args.to_vec();
    let (reply, answer) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| run_here(&job_compiled, &job_name, &job_args)));
        // The caller may have gone (it cannot: it waits), so a failed send is ignored.
        let _ = reply.send(outcome.map_err(|panic| panic_kind(&*panic)));
    });
    let sent = EVALUATOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let evaluator = match slot.as_mut() {
            Some(e) if e.stack >= stack => e,
            _ => slot.insert(Evaluator::start(stack)?),
        };
        evaluator.jobs.send(job).map_err(|_| ())
    });
    let started = sent.is_ok();
    match answer.recv() {
        Ok(Ok(result)) => result,
        Ok(Err(kind)) => Err(CallError::Failed {
            function: name.to_string(),
            message: format!("the script engine panicked ({kind})"),
        }),
        Err(_) => {
            // The evaluator is gone; the next call starts a new one.
            EVALUATOR.with(|cell| cell.borrow_mut().take());
            let message =
                if started { "the evaluator stopped during the call" } else { "no evaluator thread could be started" };
            Err(CallError::Failed { function: name.to_string(), message: message.to_string() })
        }
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A thread with a large stack that runs one job at a time for one calling thread.
struct Evaluator {
    jobs: mpsc::Sender<Job>,
    stack: usize,
}

impl Evaluator {
    fn start(stack: usize) -> Result<Evaluator, ()> {
        let (jobs, queue) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("rhai-evaluator".to_string())
            .stack_size(stack)
            .spawn(move || {
                // Ends when the calling thread (and with it the sender) is gone.
                while let Ok(job) = queue.recv() {
                    job();
                }
            })
            .map_err(|_| ())?;
        Ok(Evaluator { jobs, stack })
    }
}

thread_local! {
    static EVALUATOR: RefCell<Option<Evaluator>> = const { RefCell::new(None) };
}

/// The stack a thread needs to run calls under `limits` without a hand-over.
pub fn stack_bytes(limits: &Limits) -> usize {
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

/// Runs `work` on a thread with room for function calls under `limits`, so that
/// every call it makes runs in place rather than being handed to an evaluator.
/// For callers that make many calls in a row (the scenario runner, benchmarks).
///
/// # Panics
/// Re-raises a panic of `work`; panics if no thread can be started (the process
/// is out of resources).
pub fn with_call_stack<T: Send>(limits: &Limits, work: impl FnOnce() -> T + Send) -> T {
    let size = stack_bytes(limits).saturating_add(8 << 20);
    thread::scope(|scope| {
        let handle =
            match thread::Builder::new().name("coordinator-calls".into()).stack_size(size).spawn_scoped(scope, work) {
                Ok(handle) => handle,
                Err(e) => panic!("cannot start a thread for function calls: {e}"),
            };
        match handle.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
