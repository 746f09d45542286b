//! Activating a package (`POST /v1/packages`,
//! docs/reference/service.md#packages-and-activation,
//! docs/reference/runs.md#pinning): the bytes checked against the pinned
//! digest, the definition read and compiled, every operation's connection
//! configured, the package stored and its revision made the one new admissions
//! get. Admitted runs keep theirs.

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::package::{self, PackageError};
use coordinator_functions::Limits;
use coordinator_store::{Package, StoreError};

use crate::engine::Engine;
use crate::engine::error::EngineError;

/// A package activated by [`Engine::activate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activation {
    /// The workflow.
    pub workflow: String,
    /// The revision new admissions get from now on.
    pub revision: String,
    /// The package's digest.
    pub digest: String,
    /// The revision that was active before, if any (the same one when re-activated).
    pub previous_revision: Option<String>,
}

/// Why a package was not activated.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// The bytes' digest is not the pinned one (`package.digest-mismatch`).
    #[error("the package's digest is {actual}, not the pinned {expected}")]
    DigestMismatch {
        /// The pinned digest.
        expected: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// The bytes are not a package this service can run (`package.invalid`).
    #[error("{0}")]
    Invalid(String),
    /// An operation uses a connection the deployment does not configure (`package.unknown-connection`).
    #[error("operation `{alias}` uses connection `{connection}`, which this deployment does not configure")]
    UnknownConnection {
        /// The operation alias.
        alias: String,
        /// The connection it names.
        connection: String,
    },
    /// The revision is stored already with other package bytes (`package.revision-conflict`).
    #[error("revision {revision} is stored already with another package digest")]
    RevisionConflict {
        /// The revision.
        revision: String,
    },
    /// The store failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl Engine {
    /// Activates a package (docs/reference/project.md#packages,
    /// docs/reference/runs.md#pinning): checks the bytes against the pinned
    /// digest, reads and compiles the definition, checks that every operation's
    /// connection is configured, stores the package and makes its revision the
    /// one new admissions get. Admitted runs keep their revision. Activating
    /// the active revision again changes nothing. A change is journaled as
    /// `actor`'s (deployment-level entry `activation`).
    ///
    /// # Errors
    /// [`ActivationError`].
    pub async fn activate(
        &self,
        bytes: &[u8],
        digest: &str,
        actor: Option<&str>,
    ) -> Result<Activation, ActivationError> {
        let package = package::read(bytes, Some(digest)).map_err(|e| match e {
            PackageError::Digest { expected, actual } => ActivationError::DigestMismatch { expected, actual },
            // Parser messages can quote the body: say what is expected instead.
            PackageError::Malformed(_) => ActivationError::Invalid(
                "the body is not a Coordinator package (canonical JSON {format, manifest, definition})".to_owned(),
            ),
            other => ActivationError::Invalid(other.to_string()),
        })?;
        let definition = package.definition;
        if let Some(why) = super::too_frequent(&definition, self.schedule_floor_seconds) {
            return Err(ActivationError::Invalid(why));
        }
        for (alias, op) in &definition.operations {
            if !self.connections.contains_key(&op.connection) && !self.remote.contains_key(&op.connection) {
                return Err(ActivationError::UnknownConnection {
                    alias: alias.clone(),
                    connection: op.connection.clone(),
                });
            }
        }
        let workflow = definition.workflow.clone();
        let revision = package.manifest.revision;
        let compiled = Workflow::compile(definition, Limits::default())
            .and_then(|wf| wf.with_event_schemas(&self.event_schemas))
            .map_err(|e| ActivationError::Invalid(format!("the package does not compile: {e}")))?;
        let stored = Package {
            revision: revision.clone(),
            workflow: workflow.clone(),
            digest: digest.to_owned(),
            bytes: bytes.to_vec(),
        };
        let stored = crate::engine::package::at_rest::sealed(&self.keyring, &stored).map_err(EngineError::Seal)?;
        self.store.put_package(&stored).await.map_err(|e| match e {
            StoreError::Conflict { .. } => ActivationError::RevisionConflict { revision: revision.clone() },
            other => ActivationError::Engine(other.into()),
        })?;
        let previous_revision = self.store.active(&workflow).await.map_err(EngineError::from)?;
        self.store.activate(&workflow, &revision, self.now(), actor).await.map_err(EngineError::from)?;
        self.workflows.insert(&revision, crate::engine::workflow_cache::Compiled::new(compiled, bytes.len())).await;
        Ok(Activation { workflow, revision, digest: digest.to_owned(), previous_revision })
    }
}
