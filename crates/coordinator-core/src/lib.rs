//! The pure heart of Coordinator.
//!
//! Owns the project model, the offline checker, the revision and the package
//! format. It must not do IO of any kind: no async runtime, database, network,
//! file system or clock. Whatever it needs from outside (project files, the
//! time, ids) is handed to it.
//!
//! Modules:
//! - [`yaml`]: YAML parsed into a tree of nodes that remember their spans.
//! - [`decode`]: YAML trees decoded into the project model, every problem a
//!   `schema.*` diagnostic.
//! - [`model`]: the plain data types of the file formats (`workflow.yaml`,
//!   catalogs, `scenarios.yaml`, `runtime.yaml`, `worker.yaml`) and the run and
//!   effect states.
//! - [`check`]: the offline checker, everything `coordinatorctl check` proves.
//! - [`diagnostic`]: what the checker says (stable code, position, repair hint)
//!   and the code list.
//! - [`definition`]: the compiled definition of a workflow and its revision.
//! - [`package`]: a checked project frozen into immutable, canonical bytes.
//! - [`machine`]: the pure state machine that decides every run.
//! - [`scenario`]: the scenario runner behind `coordinatorctl test`.
//! - [`json_schema`]: compiling the JSON Schemas a project embeds and
//!   validating values against them, with no remote `$ref`.
//! - [`schema_sample`]: valid sample instances of a JSON Schema, for proofs
//!   that evaluate a function on inputs the schema accepts.
//! - [`editor_schema`]: the JSON Schemas of the file formats, generated from
//!   the model for editors (the copies under `schemas/`).
//! - [`signature`]: verifying a signed product event's `Coordinator-Signature`.
//! - [`pace`]: how fast a connection's product may be called: limits, a
//!   shared hold, a slow-down and a breaker, as pure rules on a given clock.
//! - [`audit`]: the audit journal's hash chain: an entry's canonical encoding,
//!   its hash, and verification of a journal read back.
//! - [`schedule`]: when a schedule fires — cron in an IANA time zone (the
//!   bundled database) or an interval — across daylight saving, on a given
//!   instant.

pub mod audit;
pub mod check;
pub mod decode;
pub mod definition;
pub mod diagnostic;
pub mod editor_schema;
pub mod json_schema;
pub mod machine;
pub mod model;
pub mod pace;
pub mod package;
pub mod scenario;
pub mod schedule;
pub mod schema_sample;
pub mod signature;
pub mod yaml;
