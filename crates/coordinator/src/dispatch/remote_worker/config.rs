//! Reading `worker.yaml` (`coordinator worker --config FILE`): decoded with
//! the checker's diagnostics ([`coordinator_core::check::worker`]), then every
//! secret reference resolved (relative `file:` references from the file's
//! directory) and the connections built as `serve` builds its own
//! ([`crate::process::deployment::product_connection`]). `--check` does exactly this and
//! starts nothing, so a file that passes it is one the worker can run on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use coordinator_core::check::worker::{WorkerInput, check_worker};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::model::runtime::SecretRef;
use coordinator_core::model::worker::WorkerFile;
use coordinator_products::Secret;
use coordinator_proto::v1::ConnectionLimits;

use std::sync::Arc;

use super::{TokenRefresh, Worker};
use crate::process::deployment::{DeploymentError, product_connection, resolve_secret};

/// Why a worker file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {file}: {reason}")]
    Unreadable {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The file has errors (the diagnostics say where).
    #[error("{file} was refused ({} error(s))", .diagnostics.iter().filter(|d| d.is_error()).count())]
    Refused {
        /// The file.
        file: String,
        /// Every finding.
        diagnostics: Vec<Diagnostic>,
    },
    /// A reference does not resolve, or a value cannot be used.
    #[error(transparent)]
    Unusable(#[from] DeploymentError),
}

/// A decoded worker file and where it is.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The file.
    pub file: PathBuf,
    /// Its content.
    pub worker: WorkerFile,
    /// Warnings found while decoding.
    pub warnings: Vec<Diagnostic>,
}

impl WorkerConfig {
    /// Reads and decodes a worker file.
    ///
    /// # Errors
    /// [`ConfigError::Unreadable`] or [`ConfigError::Refused`].
    pub fn read(file: &Path) -> Result<WorkerConfig, ConfigError> {
        let shown = file.display().to_string();
        let text = std::fs::read_to_string(file)
            .map_err(|e| ConfigError::Unreadable { file: shown.clone(), reason: e.to_string() })?;
        let report = check_worker(&WorkerInput { file: &shown, text: &text, secrets: None });
        match report.worker {
            Some(worker) => Ok(WorkerConfig { file: file.to_path_buf(), worker, warnings: report.diagnostics }),
            None => Err(ConfigError::Refused { file: shown, diagnostics: report.diagnostics }),
        }
    }

    fn base(&self) -> PathBuf {
        self.file.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    fn secret(&self, reference: &SecretRef, what: &str) -> Result<Secret, DeploymentError> {
        resolve_secret(&self.base(), reference, what)
    }

    /// Resolves every reference and builds the connections.
    ///
    /// # Errors
    /// [`ConfigError::Unusable`] naming the reference or value.
    pub fn resolve(&self) -> Result<Worker, ConfigError> {
        let endpoint = &self.worker.coordinator;
        let token = self.secret(&endpoint.token, "coordinator.token")?;
        let ca_certificate = match &endpoint.ca_certificate {
            Some(ca) => Some(self.secret(ca, "coordinator.caCertificate")?.expose().as_bytes().to_vec()),
            None => None,
        };
        let mut connections = HashMap::new();
        for (name, connection) in &self.worker.connections {
            let secret = |reference: &SecretRef, what: &str| self.secret(reference, what);
            if let Some(built) = product_connection(name, connection, &secret)? {
                connections.insert(name.clone(), built);
            }
        }
        let concurrency = usize::try_from(self.worker.effective_concurrency()).unwrap_or(1);
        let limits = self
            .worker
            .connections
            .iter()
            .filter_map(|(name, connection)| {
                let limits = connection.limits?.limits();
                Some(ConnectionLimits {
                    connection: name.clone(),
                    concurrency: limits.concurrency.unwrap_or(0),
                    rate_per_second: limits.rate_per_second.unwrap_or(0.0),
                    burst: limits.burst.unwrap_or(0),
                })
            })
            .collect();
        let (base, reference) = (self.base(), endpoint.token.clone());
        let token_refresh: TokenRefresh = Arc::new(move || resolve_secret(&base, &reference, "coordinator.token").ok());
        Ok(Worker {
            address: endpoint.address.clone(),
            token,
            ca_certificate,
            connections,
            concurrency,
            limits,
            token_refresh: Some(token_refresh),
        })
    }
}
