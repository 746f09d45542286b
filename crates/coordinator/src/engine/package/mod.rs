//! Packages in the service.
//!
//! - [`activation`]: activating a package: bytes checked against the pinned
//!   digest, the definition compiled, every operation's connection configured,
//!   the package stored and its revision made active.
//! - [`at_rest`]: a package's bytes sealed under the payload key, bound to
//!   their revision, and opened again when a revision is needed.
//!
//! [`unsupported`] says why this service cannot run a definition it can read.

pub(crate) mod activation;
pub(crate) mod at_rest;

/// Why this service cannot run `definition`, when it cannot: its schedules
/// are checked and explained offline, but this release does not fire them,
/// so a package with schedules is refused wherever it would become active
/// (`POST /v1/packages`, `serve`'s pinned package, `dev`'s project) rather
/// than deployed to fire nothing (docs/reference/project.md#schedules).
pub fn unsupported(definition: &coordinator_core::definition::Definition) -> Option<String> {
    let first = definition.schedules.first()?;
    Some(format!(
        "workflow `{}` declares schedules (`{}`…), which this release checks and explains but does not fire: \
         remove `schedules` to deploy it",
        definition.workflow, first.id
    ))
}
