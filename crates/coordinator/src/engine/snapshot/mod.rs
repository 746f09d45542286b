//! A run's snapshot as the engine keeps it between decisions.
//!
//! - [`sealed`]: the sealed form the store holds, a base sealed rarely and a
//!   head sealed with every decision.
//! - [`codec`]: the bytes a snapshot is sealed as (JSON, LZ4 against a
//!   dictionary).
//! - [`cache`]: the runs this engine sealed last, kept decoded, so the next
//!   decision on a run does not open what it has just sealed.
//!
//! Nothing here touches the database: the engine reads and writes the sealed
//! bytes through the store.

pub(crate) mod cache;
pub(crate) mod codec;
pub(crate) mod sealed;
