//! The compiled definition of a workflow and its revision.
//!
//! The definition is everything that changes execution and nothing else:
//! steps, operations with their pinned catalog descriptors, triggers, search keys, input and
//! outcome schemas, the deadline and the function source. The revision is
//! `sha256:<hex>` over its canonical JSON (RFC 8785), so titles, descriptions,
//! `project.version`, comments, key order and YAML layout cannot change it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::catalog::OperationDescriptor;
use crate::model::workflow::{Step, Trigger};

/// The execution-relevant content of a checked workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Definition {
    /// The workflow id.
    pub workflow: String,
    /// Run deadline in seconds from admission.
    pub deadline_seconds: u64,
    /// JSON Schema of the run input.
    pub input: Value,
    /// Alias -> pinned operation.
    pub operations: BTreeMap<String, PinnedOperation>,
    /// Trigger name -> trigger.
    pub triggers: BTreeMap<String, Trigger>,
    /// Search key name -> the function computing it from the input (absent
    /// when there is none, so a workflow without keys keeps its revision).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub search_keys: BTreeMap<String, String>,
    /// The schedules, as written but for their descriptions (absent when
    /// there is none, so a workflow without schedules keeps its revision).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<crate::model::workflow::Schedule>,
    /// The first step.
    pub start: String,
    /// Step id -> step.
    pub steps: BTreeMap<String, Step>,
    /// Outcome -> JSON Schema of its published output.
    pub outcomes: BTreeMap<String, Value>,
    /// The Rhai source, with line endings normalised to `\n`.
    pub functions: String,
}

/// An operation alias with the catalog descriptor it was checked against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PinnedOperation {
    /// `<product>.<name>/v<N>`.
    pub operation: String,
    /// The logical connection.
    pub connection: String,
    /// The descriptor as the catalog had it when the project was checked.
    pub descriptor: OperationDescriptor,
}

/// Errors of canonical serialisation (only possible for values JSON cannot hold).
#[derive(Debug, thiserror::Error)]
#[error("the definition cannot be written as canonical JSON: {0}")]
pub struct CanonicalError(String);

impl Definition {
    /// The canonical JSON bytes (RFC 8785).
    ///
    /// # Errors
    /// [`CanonicalError`] if a value cannot be canonicalised.
    pub fn canonical_json(&self) -> Result<Vec<u8>, CanonicalError> {
        canonical(self)
    }

    /// The revision: `sha256:<hex>` of the canonical JSON.
    ///
    /// # Errors
    /// [`CanonicalError`] if a value cannot be canonicalised.
    pub fn revision(&self) -> Result<String, CanonicalError> {
        Ok(sha256_id(&self.canonical_json()?))
    }
}

/// Canonical JSON (RFC 8785) of any serialisable value.
///
/// # Errors
/// [`CanonicalError`] if a value cannot be canonicalised.
pub fn canonical<T: Serialize>(value: &T) -> Result<Vec<u8>, CanonicalError> {
    serde_json_canonicalizer::to_vec(value).map_err(|e| CanonicalError(e.to_string()))
}

/// `sha256:<lowercase hex>` of some bytes.
pub fn sha256_id(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Normalises line endings (`\r\n` and lone `\r` become `\n`).
pub fn normalise_line_endings(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_is_rfc8785() {
        let value = serde_json::json!({"b": 1.0, "a": [3, "x", {"z": null, "y": 1e21}]});
        let bytes = canonical(&value).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&bytes), r#"{"a":[3,"x",{"y":1e+21,"z":null}],"b":1}"#);
    }

    #[test]
    fn sha256_ids_are_prefixed_hex() {
        assert_eq!(sha256_id(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
