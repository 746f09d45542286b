//! The project model: plain data types for `workflow.yaml`, catalog files,
//! `scenarios.yaml`, `runtime.yaml`, `worker.yaml` and the run and effect
//! states they name.
//!
//! These types are the single description of the formats: the JSON Schemas in
//! `schemas/` are generated from them, the revision is computed over their
//! canonical JSON, and packages carry them. They hold no spans and no logic
//! beyond small accessors; decoding with diagnostics lives in [`decode`](crate::decode).

pub mod catalog;
pub mod run;
pub mod runtime;
pub mod scenarios;
pub mod worker;
pub mod workflow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only `apiVersion` this version of Coordinator reads.
pub const API_VERSION: &str = "coordinator/v1";

/// `apiVersion: coordinator/v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum ApiVersion {
    /// The first version of the project format.
    #[default]
    #[serde(rename = "coordinator/v1")]
    V1,
}
