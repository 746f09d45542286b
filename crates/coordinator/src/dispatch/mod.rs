//! Dispatch: carrying a run's due work (fired timers, product requests) from
//! the store to the products and the answers back as events.
//!
//! In process:
//! - [`worker`]: the worker loop: claims due timers and outbox rows, fires
//!   timers, hands each claimed row to its own task.
//! - [`perform`]: one claimed row: the product request with a fresh token, and
//!   its classified answer reported under the claim's fence.
//! - [`committer`]: group commit of the worker's reports, many to a
//!   transaction.
//! - [`handoff`]: eager dispatch: work a commit leased to this process handed
//!   straight to its worker.
//! - [`capacity`]: the bound on the work a worker holds (claimed or leased rows
//!   not yet reported).
//! - [`lease_owner`]: the name this process's leases are written under.
//!
//! Around it:
//! - [`hints`]: Redis dispatch hints, an accelerator and never the authority.
//! - [`remote`]: the gRPC task service through which remote workers carry the
//!   product requests of `dispatch: remote` connections.
//! - [`remote_worker`]: the `coordinator worker` process on the other side.
//!
//! Nothing here decides: every answer goes through the engine's one
//! transaction per event.

pub(crate) mod capacity;
pub(crate) mod committer;
pub(crate) mod handoff;
pub mod hints;
pub(crate) mod lease_owner;
pub(crate) mod perform;
pub mod remote;
pub mod remote_worker;
pub mod worker;
