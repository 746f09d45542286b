//! The pure heart of Coordinator.
//!
//! Owns the project model, the offline checker, the revision and the package
//! format. It must not do IO of any kind: no async runtime, database, network,
//! file system or clock. Whatever it needs from outside (project files, the
//! time, ids) is handed to it.

pub mod audit;
pub mod check;
pub mod decode;
pub mod definition;
pub mod diagnostic;
pub mod editor_schema;
pub mod json_schema;
pub mod machine;
pub mod model;
pub mod package;
pub mod scenario;
pub mod signature;
pub mod yaml;
