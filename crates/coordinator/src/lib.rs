//! The Coordinator service: the engine that drives runs through the store one
//! event at a time, the dispatch that carries their calls to products, the
//! HTTP API and console, and the process that runs them
//! (`docs/reference/service.md`).
//!
//! Folders follow a run's path:
//! - [`api`]: the HTTP API (axum router, one module per concern), the front
//!   door of admissions, reads and operator commands.
//! - [`auth`]: who may call and what they may do (tokens, OIDC, roles).
//! - [`engine`]: the [`Engine`] and every one of its operations: admission,
//!   trigger events, nudges, recovery, package activation, the after-commit
//!   hooks, sealed snapshots and the caches; one event, one transaction.
//! - [`dispatch`]: the worker that claims due work and performs product
//!   requests, group-committing the answers; Redis hints; remote workers.
//! - [`console`]: the operator console, server-rendered HTML.
//! - [`telemetry`]: logging, metrics, transition lines, traces.
//! - [`process`]: deployment, `serve`, `dev`, the task set and its stop order,
//!   the drain, the janitor and the audit chain.
//!
//! The binary (`main.rs`) parses arguments, sets logging up, prints `dev`'s
//! banner and drains on SIGTERM/SIGINT.

pub mod api;
pub mod auth;
pub(crate) mod console;
pub mod dispatch;
pub mod engine;
pub mod process;
pub mod telemetry;

pub use engine::error::EngineError;
pub use engine::{AdmitRequest, AdmitResult, Engine, RunView};
pub use process::tasks::Drained;

/// Extra stack for a worker thread beyond what a function call needs.
const THREAD_STACK_MARGIN: usize = 8 << 20;

/// A multi-threaded tokio runtime whose worker threads have room for function
/// calls (Rhai recurses natively), so decisions run in place.
///
/// # Errors
/// The OS error when the runtime cannot be started.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let stack = coordinator_functions::stack_bytes(&coordinator_functions::Limits::default());
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(stack.saturating_add(THREAD_STACK_MARGIN))
        .build()
}
