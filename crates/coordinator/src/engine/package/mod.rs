//! Packages in the service.
//!
//! - [`activation`]: activating a package: bytes checked against the pinned
//!   digest, the definition compiled, every operation's connection configured,
//!   the package stored and its revision made active.
//! - [`at_rest`]: a package's bytes sealed under the payload key, bound to
//!   their revision, and opened again when a revision is needed.

pub(crate) mod activation;
pub(crate) mod at_rest;
