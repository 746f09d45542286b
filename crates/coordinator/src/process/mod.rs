//! The service as a process: reading its deployment, starting, running its
//! tasks and stopping.
//!
//! - [`deployment`]: one deployment as `runtime.yaml` describes it, secrets
//!   resolved, the pinned package read.
//! - [`serve`]: `coordinator serve` and `coordinator migrate`.
//! - [`dev`]: `coordinator dev`, the one-command development stack, with
//!   [`dev_secrets`] (the secrets it generates and keeps) and
//!   [`project_dir`] (a project directory on disk as the checker's source).
//! - [`tasks`]: the service's tasks and the order in which a drain stops them.
//! - [`drain`]: the state of a stopping service.
//! - [`test_clock`]: the clock tests move across processes (`COORDINATOR_TEST_CLOCK_FILE`).
//! - [`janitor`]: vacuums the queue tables on PostgreSQL.
//! - [`audit_chain`]: hash-chains the audit journal's pending entries in the
//!   background.

pub mod audit_chain;
pub mod deployment;
pub mod dev;
pub mod dev_secrets;
pub mod drain;
pub mod janitor;
pub mod project_dir;
pub mod serve;
pub(crate) mod tasks;
pub mod test_clock;
