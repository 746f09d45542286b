//! Packages: a checked project frozen into immutable bytes (docs/reference/project.md#packages).
//!
//! A package is one canonical JSON document (RFC 8785) holding a manifest
//! (workflow id, revision, file digests, tool version) and the compiled
//! definition (with the pinned operation descriptors and the function source).
//! Canonical JSON makes the bytes a function of the project alone, so packaging
//! the same project twice gives the same bytes and the same digest; nothing
//! time- or machine-dependent is written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::check::Checked;
use crate::definition::{CanonicalError, Definition, canonical, sha256_id};

/// The format tag of this version of the package format.
pub const FORMAT: &str = "coordinator-package/v1";

/// A package's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Package {
    /// Always [`FORMAT`].
    pub format: String,
    /// What the package holds.
    pub manifest: Manifest,
    /// The compiled definition.
    pub definition: Definition,
}

/// The package manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// The workflow id.
    pub workflow: String,
    /// The human title, if the workflow has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The revision of the definition.
    pub revision: String,
    /// Project file -> `sha256:<hex>` of its exact bytes.
    pub files: BTreeMap<String, String>,
    /// The tool that made the package.
    pub tool: Tool,
}

/// Name and version of the packaging tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tool {
    /// `coordinatorctl`.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Why a package cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// The bytes are not a package document.
    #[error("not a Coordinator package: {0}")]
    Malformed(String),
    /// The format tag is not one this version reads.
    #[error("package format `{0}` is not supported (expected `{FORMAT}`)")]
    Format(String),
    /// The digest of the bytes is not the pinned one.
    #[error("package digest {actual} does not match the pinned digest {expected}")]
    Digest {
        /// The pinned digest.
        expected: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// The manifest's revision is not the revision of the definition it carries.
    #[error("the package claims revision {claimed} but its definition has revision {actual}")]
    Revision {
        /// What the manifest says.
        claimed: String,
        /// What the definition hashes to.
        actual: String,
    },
    /// Canonical serialisation failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// A package and its bytes.
pub struct Built {
    /// The package bytes (canonical JSON).
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the bytes.
    pub digest: String,
    /// The content.
    pub package: Package,
}

/// Packages a checked project.
///
/// # Errors
/// [`PackageError::Canonical`] if the content cannot be canonicalised.
pub fn build(checked: &Checked, tool_version: &str) -> Result<Built, PackageError> {
    let files = checked.files.iter().map(|(path, text)| (path.clone(), sha256_id(text.as_bytes()))).collect();
    let package = Package {
        format: FORMAT.to_owned(),
        manifest: Manifest {
            workflow: checked.definition.workflow.clone(),
            title: checked.workflow.workflow.title.clone(),
            revision: checked.revision.clone(),
            files,
            tool: Tool { name: "coordinatorctl".to_owned(), version: tool_version.to_owned() },
        },
        definition: checked.definition.clone(),
    };
    let bytes = canonical(&package)?;
    let digest = sha256_id(&bytes);
    Ok(Built { bytes, digest, package })
}

/// Reads package bytes, checking the pinned digest (when given) and the revision.
///
/// # Errors
/// [`PackageError`] when the bytes are not a package, the digest differs, or
/// the manifest's revision is not the definition's.
pub fn read(bytes: &[u8], pinned_digest: Option<&str>) -> Result<Package, PackageError> {
    let actual = sha256_id(bytes);
    if let Some(expected) = pinned_digest
        && expected != actual
    {
        return Err(PackageError::Digest { expected: expected.to_owned(), actual });
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| PackageError::Malformed(e.to_string()))?;
    let format = value.get("format").and_then(|f| f.as_str()).unwrap_or_default();
    if format != FORMAT {
        return Err(PackageError::Format(format.to_owned()));
    }
    let package: Package = serde_json::from_value(value).map_err(|e| PackageError::Malformed(e.to_string()))?;
    let revision = package.definition.revision()?;
    if revision != package.manifest.revision {
        return Err(PackageError::Revision { claimed: package.manifest.revision.clone(), actual: revision });
    }
    Ok(package)
}
