//! The Coordinator service (SPEC §5, §7): the engine that drives runs through
//! the store one event at a time, the worker that dispatches to products, the
//! HTTP API and `coordinator dev`.
//!
//! Modules: `engine` (admission, events under the run lock, sealed snapshots,
//! the workflow cache), `after` (the after-commit hooks: metrics, log lines,
//! spans), `activation` (activating a package), `worker` (claims, timers)
//! and `perform` (one claimed row's product request and its fenced report),
//! `telemetry` (logging, after-commit transition lines, traces),
//! `api` (axum router, one module per concern), `access` (subjects, bearer
//! token digests, role grants and the checks on them), `oidc` (JWTs of OIDC
//! issuers verified against their JWKS), `inspection` (the operator's
//! view of a run, with the recovery actions the machine would accept),
//! `metrics` (each engine's Prometheus recorder, fed after commit),
//! `sealer` (chains the audit journal's pending entries in the background),
//! `definitions` (the bounded cache of compiled workflows), `hints` (Redis
//! dispatch hints: due work announced after commit, an accelerator only), `janitor` (vacuums the queue tables on PostgreSQL), `fence` (the restore
//! and failover fence: arming, watching, the hold on a trip), `drain` (the state of
//! a stopping service) and `running` (the service's tasks and the order in
//! which a drain stops them),
//! `completions` (completion notifications), `events` (admission from signed
//! product events) and `signature` (their HMAC header), `dev` (the one-command
//! development stack), `error`.
//! The binary (`main.rs`) parses arguments, sets logging up, prints `dev`'s
//! banner and drains on SIGTERM/SIGINT.

pub mod access;
pub(crate) mod activation;
pub(crate) mod admissions;
pub(crate) mod after;
pub mod api;
pub(crate) mod committer;
pub mod completions;
pub(crate) mod console;
mod definitions;
pub mod deployment;
pub mod dev;
pub mod dev_secrets;
pub mod drain;
pub mod engine;
pub mod error;
pub mod events;
pub mod fence;
pub(crate) mod handoff;
pub mod hints;
pub mod hold;
pub(crate) mod in_hand;
pub(crate) mod in_progress;
pub mod inspection;
pub mod janitor;
mod lease_owner;
pub mod metrics;
pub mod oidc;
mod opened;
pub(crate) mod perform;
pub mod preview;
pub mod project_dir;
pub mod remote;
pub mod remote_worker;
pub mod run_id;
pub(crate) mod running;
pub(crate) mod sealed_run;
pub mod sealer;
pub mod serve;
pub mod signature;
pub(crate) mod snapshot;
pub(crate) mod stored_package;
pub mod telemetry;
pub(crate) mod wait_index;
pub mod worker;

pub use engine::{AdmitRequest, AdmitResult, Engine, RunView};
pub use error::EngineError;
pub use running::Drained;

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
