//! Recovery: what the operator sees of a run and what brings runs back after
//! an incident.
//!
//! - [`inspection`]: the operator's view of one run with the recovery actions
//!   the machine would accept now.
//! - [`preview`]: what an operator's command would do, decided on a copy.
//! - [`restore_hold`]: placing and releasing the restore hold across a
//!   deployment, run by run through the machine.
//! - [`fence`]: the restore and failover fence: arming it, watching the
//!   database's identity, placing the hold when it trips.
//!
//! Decisions stay the machine's: these modules feed it events and read what
//! it decided (see `docs/reference/recovery.md`).

pub mod fence;
pub mod inspection;
pub mod preview;
pub mod restore_hold;
