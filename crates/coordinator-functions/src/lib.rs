//! The bounded Rhai sandbox that runs a project's pure functions.
//!
//! Owns compiling `functions.rhai` ([`Functions::compile`]), listing its
//! functions ([`Functions::signatures`]) and calling one with JSON arguments
//! ([`Functions::call`]) under the bounds of
//! docs/reference/project.md#functionsrhai ([`Limits`]). The checker, the state
//! machine and the service all call functions through this crate, so a function
//! behaves the same offline and in production.
//!
//! It must stay pure: no clock, IO, randomness, environment or async. A
//! function sees only its arguments, and nothing it does outlives its call.
//! Errors never echo argument, thrown or result values, because run data may
//! be protected.
//!
//! Two costs callers should know: each call needs a stack sized for the
//! deepest evaluation the limits allow ([`stack_bytes`]; Rhai recurses
//! natively and would overflow a 2 MiB thread) — it runs on the caller's
//! thread when that thread has the room, else on a reused evaluator thread
//! (a hand-over per call); and the
//! operation bound bounds work, not time exactly, because one Rhai operation
//! may copy or size-check a whole collection, so the worst case per call is
//! about `max_operations x max_collection_entries` steps (seconds, not
//! milliseconds, for a hostile script). There is no wall-clock limit here:
//! it would need a clock. Async callers should make calls off their
//! executor's worker threads.
//!
//! Modules (all private; the crate's surface is re-exported here):
//! - [`functions`]: [`Functions`], a compiled `functions.rhai`, and
//!   [`Signature`].
//! - [`call`]: one call inside the sandbox: JSON arguments in, a stack that
//!   fits the limits, JSON or a [`CallError`] out.
//! - [`engine`]: the one Rhai engine configuration the sandbox runs under.
//! - [`limits`]: the bounds every call runs under ([`Limits`], [`Bound`]).
//! - [`json`]: JSON values into and out of Rhai, unchanged in passing.
//! - [`describe`]: Rhai's runtime errors turned into value-free descriptions.
//! - [`error`]: [`CompileError`] and [`CallError`], which never carry run
//!   data.
//! - [`locate`]: where each function is defined in the source, and which
//!   names the source contains.

#![warn(missing_docs)]

mod call;
mod describe;
mod engine;
mod error;
mod functions;
mod json;
mod limits;
mod locate;

pub use call::{stack_bytes, with_call_stack};
pub use error::{CallError, CompileError};
pub use functions::{Functions, Signature};
pub use limits::{Bound, Limits, MAX_FUNCTIONS, MAX_VARIABLES};
