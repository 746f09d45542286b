//! Who may call the service and what they may do.
//!
//! - [`access`]: subjects, static bearer token digests, role grants per
//!   workflow and the checks on them.
//! - [`oidc`]: JWT bearer tokens of OIDC issuers, verified against their JWKS.
//!
//! The API and the remote workers' service authenticate through these; the
//! rules are in `docs/reference/protection.md`.

pub mod access;
pub mod oidc;
