//! Packages in the service.
//!
//! - [`activation`]: activating a package: bytes checked against the pinned
//!   digest, the definition compiled, every operation's connection configured,
//!   the package stored and its revision made active.
//! - [`at_rest`]: a package's bytes sealed under the payload key, bound to
//!   their revision, and opened again when a revision is needed.

pub(crate) mod activation;
pub(crate) mod at_rest;

/// Why a deployment whose schedules fire at most every `floor_seconds`
/// (runtime.yaml `scheduleFloorSeconds`) cannot run `definition`: a
/// schedule of it fires more often. Refused wherever the package would
/// become active (`POST /v1/packages`, `serve`'s pinned package).
pub fn too_frequent(definition: &coordinator_core::definition::Definition, floor_seconds: u64) -> Option<String> {
    let (schedule, gap) = definition
        .schedules
        .iter()
        .find_map(|s| coordinator_core::schedule::under_floor(s, floor_seconds).map(|gap| (s, gap)))?;
    Some(format!(
        "schedule `{}` of workflow `{}` fires {gap} ms apart, more often than this deployment's \
         scheduleFloorSeconds ({floor_seconds}) allows",
        schedule.id, definition.workflow
    ))
}
