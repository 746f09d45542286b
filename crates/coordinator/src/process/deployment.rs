//! One deployment, as `runtime.yaml` describes it (docs/reference/runtime.md):
//! the file decoded with the same diagnostics as `coordinatorctl check
//! --runtime`, its secret references resolved, the pinned package read and
//! checked against its digest, and everything turned into what the engine needs
//! (store URL, keyring, product connections, settings; for remote workers, the
//! connections they serve and the gRPC listener; the Redis URL of the dispatch
//! hints).
//!
//! This module is the service's only reader of the environment and of secret
//! files. A resolved secret lives in memory only; no error message shows one:
//! errors name the reference (`env:DATABASE_URL`), never its value.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use coordinator_core::check::runtime::{self, RuntimeInput};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::machine::Settings;
use coordinator_core::model::runtime::{self as model, Authorization, RuntimeFile, SecretRef, SecretSource};
use coordinator_core::package;
use coordinator_products::{AssertionKey, Connection, HttpUrl, Secret, TokenSource};
use coordinator_seal::Keyring;
use coordinator_store::Package;

use crate::auth::access::{Access, StaticCredential};
use crate::auth::oidc::{Issuer, JwksError};

/// The observation floor when `runtime.yaml` sets none (docs/reference/runs.md#waits).
pub const DEFAULT_OBSERVE_FLOOR_SECONDS: u64 = 30;

/// Why a deployment cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// The runtime file cannot be read.
    #[error("{file}: cannot read the runtime file: {reason}")]
    Unreadable {
        /// The file.
        file: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The runtime file is not valid: its diagnostics (they never show a secret).
    #[error("{file} was refused: {}", first_error(.diagnostics))]
    Refused {
        /// The file.
        file: String,
        /// What is wrong, with positions and repair hints.
        diagnostics: Vec<Diagnostic>,
    },
    /// A secret reference cannot be resolved.
    #[error("{what}: {reference} {problem}")]
    Secret {
        /// What the secret is for.
        what: String,
        /// The reference (never the value).
        reference: String,
        /// Why it cannot be used.
        problem: String,
    },
    /// The pinned package cannot be used.
    #[error("package {path}: {reason}")]
    Package {
        /// The package file.
        path: String,
        /// Why (unreadable, digest mismatch, not a package, connection not configured).
        reason: String,
    },
    /// A value is valid YAML but cannot be used as given.
    #[error("{0}")]
    Invalid(String),
    /// An OIDC issuer's JWKS cannot be read, fetched or used.
    #[error("access.oidc issuer `{issuer}`: the JWKS {jwks} {problem}")]
    Jwks {
        /// The issuer.
        issuer: String,
        /// The JWKS reference (`file:PATH` or the URL).
        jwks: String,
        /// What is wrong.
        problem: JwksError,
    },
}

impl DeploymentError {
    /// Whether the failure is a resource that is unavailable (exit code 3)
    /// rather than a configuration that is wrong (exit code 1).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, DeploymentError::Unreadable { .. } | DeploymentError::Secret { .. })
            || matches!(self, DeploymentError::Jwks { problem, .. } if problem.is_unavailable())
            || matches!(self, DeploymentError::Package { reason, .. } if reason.starts_with("cannot read"))
    }
}

/// A decoded runtime file and the directory its relative paths are relative to.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The file as given.
    pub file: PathBuf,
    /// Its content.
    pub runtime: RuntimeFile,
}

/// A deployment with every reference resolved: what `coordinator serve` runs.
pub struct Deployment {
    /// The decoded runtime file.
    pub config: RuntimeConfig,
    /// The database URL (a secret: it may carry a password).
    pub database_url: Secret,
    /// The payload keys.
    pub keyring: Keyring,
    /// Where the API listens.
    pub listen: SocketAddr,
    /// The pinned package, read and verified.
    pub package: Package,
    /// Connection name → how to reach the product, for the in-process connections.
    pub connections: HashMap<String, Connection>,
    /// Remote connection name (`dispatch: remote`) → the subjects allowed to
    /// serve it (`workers`). The coordinator holds no product credentials for them.
    pub remote: BTreeMap<String, Vec<String>>,
    /// Where remote workers connect (`grpc`), when the file has it.
    pub grpc: Option<GrpcListener>,
    /// The Redis URL of the dispatch hints (`dispatch.redis.url`, a secret:
    /// it may carry a password), when the file has it.
    pub redis: Option<Secret>,
    /// Connection name → its `eventSigningSecret`, for the connections that have one.
    pub event_secrets: HashMap<String, Secret>,
    /// The machine's settings (observation floor).
    pub settings: Settings,
    /// Who may call the API (`access`: token digests, subjects, grants).
    pub access: Arc<Access>,
}

/// The gRPC listener of `grpc:`, resolved.
#[derive(Debug, Clone)]
pub struct GrpcListener {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The server's certificate chain and key (`grpc.tls`); without it, plain HTTP/2.
    pub tls: Option<GrpcTlsPem>,
}

/// The PEM texts of `grpc.tls`, resolved from their references.
#[derive(Debug, Clone)]
pub struct GrpcTlsPem {
    /// The certificate chain, leaf first.
    pub certificate: Secret,
    /// The leaf certificate's private key.
    pub private_key: Secret,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("file", &self.config.file)
            .field("listen", &self.listen)
            .field("revision", &self.package.revision)
            .finish_non_exhaustive()
    }
}

impl RuntimeConfig {
    /// Reads and decodes a runtime file with the checker's diagnostics.
    ///
    /// # Errors
    /// [`DeploymentError::Unreadable`] or [`DeploymentError::Refused`].
    pub fn read(file: &Path) -> Result<RuntimeConfig, DeploymentError> {
        let shown = file.display().to_string();
        let text = std::fs::read_to_string(file)
            .map_err(|e| DeploymentError::Unreadable { file: shown.clone(), reason: e.to_string() })?;
        let mut diagnostics = Vec::new();
        let input = RuntimeInput { file: &shown, text: &text, secrets: None, package: None };
        let (loaded, _) = runtime::load(&input, &mut diagnostics);
        match loaded {
            Some(loaded) if !diagnostics.iter().any(Diagnostic::is_error) => {
                Ok(RuntimeConfig { file: file.to_path_buf(), runtime: loaded.runtime })
            }
            _ => Err(DeploymentError::Refused { file: shown, diagnostics }),
        }
    }

    /// The directory relative `file:` references and the package path are relative to.
    fn base(&self) -> PathBuf {
        self.file.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// Resolves a secret reference: an environment variable, or a file's
    /// contents. Surrounding whitespace (a file's final newline) is dropped.
    ///
    /// # Errors
    /// [`DeploymentError::Secret`] naming the reference and what it is for.
    pub fn secret(&self, reference: &SecretRef, what: &str) -> Result<Secret, DeploymentError> {
        resolve_secret(&self.base(), reference, what)
    }

    /// The database URL.
    ///
    /// # Errors
    /// [`DeploymentError::Secret`] when its reference does not resolve.
    pub fn database_url(&self) -> Result<Secret, DeploymentError> {
        self.secret(&self.runtime.database.url, "database.url")
    }

    /// Resolves everything else: keys, the package, connections, the listen address.
    ///
    /// # Errors
    /// [`DeploymentError`] naming the first thing that cannot be used.
    pub fn resolve(self) -> Result<Deployment, DeploymentError> {
        let database_url = self.database_url()?;
        let keyring = self.keyring()?;
        let listen = socket_address("listen", &self.runtime.listen)?;
        let grpc = self.grpc()?;
        let redis = self.redis_url()?;
        let package = self.package()?;
        let connections = self.connections()?;
        let remote = self.remote();
        let event_secrets = self.event_secrets()?;
        check_package_connections(&self, &package, &connections, &remote)?;
        check_package_triggers(&self, &package, &event_secrets)?;
        let access = Arc::new(self.access()?);
        let floor = self.runtime.observe_floor_seconds.unwrap_or(DEFAULT_OBSERVE_FLOOR_SECONDS);
        Ok(Deployment {
            database_url,
            keyring,
            listen,
            package,
            connections,
            remote,
            grpc,
            redis,
            event_secrets,
            settings: Settings { observe_floor_seconds: floor },
            access,
            config: self,
        })
    }

    /// The payload keys: each reference holds 32 bytes written as 64 hex digits
    /// (`openssl rand -hex 32`).
    fn keyring(&self) -> Result<Keyring, DeploymentError> {
        let keys = &self.runtime.payload_keys;
        let mut resolved = Vec::new();
        for (id, reference) in &keys.keys {
            let what = format!("payloadKeys.keys.{id}");
            let secret = self.secret(reference, &what)?;
            let bytes = decode_hex_key(secret.expose()).ok_or_else(|| DeploymentError::Secret {
                what,
                reference: reference.as_str().to_owned(),
                problem: "is not a 32-byte key written as 64 hex digits (make one with `openssl rand -hex 32`)"
                    .to_owned(),
            })?;
            resolved.push((id.clone(), bytes));
        }
        Keyring::new(&keys.active, resolved)
            .map_err(|e| DeploymentError::Invalid(format!("payloadKeys: {e} (active key `{}`)", keys.active)))
    }

    /// `access`: each static token resolved and kept as a digest, with the
    /// grants, and the OIDC issuers (a `file:` JWKS read now; a URL is
    /// fetched by [`fetch_jwks`] when the service starts).
    fn access(&self) -> Result<Access, DeploymentError> {
        let access = &self.runtime.access;
        let mut issuers = Vec::new();
        for entry in &access.oidc {
            let issuer = Issuer::new(&entry.issuer, &entry.audience, &entry.jwks, &self.base()).map_err(|problem| {
                DeploymentError::Jwks { issuer: entry.issuer.clone(), jwks: entry.jwks.clone(), problem }
            })?;
            issuers.push(issuer);
        }
        let mut credentials = Vec::new();
        for (i, entry) in access.tokens.iter().enumerate() {
            let token =
                self.secret(&entry.token, &format!("access.tokens[{i}].token (subject `{}`)", entry.subject))?;
            credentials.push(StaticCredential { subject: entry.subject.clone(), token, roles: entry.roles.clone() });
        }
        Access::new(credentials, &access.grants)
            .map(|a| a.with_issuers(issuers))
            .map_err(|e| DeploymentError::Invalid(e.to_string()))
    }

    /// The shortest spacing of a schedule's firings this deployment allows, in seconds.
    pub fn schedule_floor(&self) -> u64 {
        self.runtime.schedule_floor_seconds.unwrap_or(coordinator_core::schedule::MIN_SPACING_SECONDS)
    }

    /// The pinned package, checked against its digest.
    fn package(&self) -> Result<Package, DeploymentError> {
        let pinned = &self.runtime.package;
        let path = self.base().join(&pinned.path);
        let shown = path.display().to_string();
        let bytes = std::fs::read(&path)
            .map_err(|e| DeploymentError::Package { path: shown.clone(), reason: format!("cannot read it: {e}") })?;
        let read = package::read(&bytes, Some(&pinned.digest))
            .map_err(|e| DeploymentError::Package { path: shown.clone(), reason: e.to_string() })?;
        if let Some(reason) = crate::engine::package::too_frequent(&read.definition, self.schedule_floor()) {
            return Err(DeploymentError::Package { path: shown, reason });
        }
        Ok(Package {
            revision: read.manifest.revision.clone(),
            workflow: read.manifest.workflow.clone(),
            digest: pinned.digest.clone(),
            bytes,
        })
    }

    /// Each connection's `eventSigningSecret`, resolved (connections without one are left out).
    fn event_secrets(&self) -> Result<HashMap<String, Secret>, DeploymentError> {
        let mut out = HashMap::new();
        for (name, c) in &self.runtime.connections {
            if let Some(reference) = &c.event_signing_secret {
                out.insert(name.clone(), self.secret(reference, &format!("connections.{name}.eventSigningSecret"))?);
            }
        }
        Ok(out)
    }

    /// The remote connections and the subjects that may serve each.
    fn remote(&self) -> BTreeMap<String, Vec<String>> {
        let remote = self.runtime.connections.iter().filter(|(_, c)| c.is_remote());
        remote.map(|(name, c)| (name.clone(), c.workers.clone())).collect()
    }

    /// `grpc`, its address parsed and its TLS references resolved.
    fn grpc(&self) -> Result<Option<GrpcListener>, DeploymentError> {
        let Some(grpc) = &self.runtime.grpc else { return Ok(None) };
        let listen = socket_address("grpc.listen", &grpc.listen)?;
        let tls = match &grpc.tls {
            None => None,
            Some(tls) => Some(GrpcTlsPem {
                certificate: self.secret(&tls.certificate, "grpc.tls.certificate")?,
                private_key: self.secret(&tls.private_key, "grpc.tls.privateKey")?,
            }),
        };
        Ok(Some(GrpcListener { listen, tls }))
    }

    /// `dispatch.redis.url`, resolved: a `redis://` URL (TLS is not built in:
    /// the hints cross a private network). Errors never show the URL.
    fn redis_url(&self) -> Result<Option<Secret>, DeploymentError> {
        let Some(hints) = &self.runtime.dispatch else { return Ok(None) };
        let url = self.secret(&hints.redis.url, "dispatch.redis.url")?;
        if !url.expose().starts_with("redis://") {
            return Err(DeploymentError::Invalid(format!(
                "dispatch.redis.url: {} is not a redis:// URL (redis://[:password@]host:port[/db]; \
                 rediss:// is not supported)",
                hints.redis.url
            )));
        }
        Ok(Some(url))
    }

    /// The in-process product connections, with their credentials resolved
    /// (a remote connection has none here: its workers call the product).
    fn connections(&self) -> Result<HashMap<String, Connection>, DeploymentError> {
        let mut out = HashMap::new();
        for (name, c) in &self.runtime.connections {
            let secret = |reference: &SecretRef, what: &str| self.secret(reference, what);
            if let Some(connection) = product_connection(name, c, &secret)? {
                out.insert(name.clone(), connection);
            }
        }
        Ok(out)
    }
}

/// Resolves a secret reference: an environment variable, or a file's contents
/// (a relative path from `base`). Surrounding whitespace (a file's final
/// newline) is dropped.
///
/// # Errors
/// [`DeploymentError::Secret`] naming the reference and what it is for.
pub fn resolve_secret(base: &Path, reference: &SecretRef, what: &str) -> Result<Secret, DeploymentError> {
    let problem = |problem: String| DeploymentError::Secret {
        what: what.to_owned(),
        reference: reference.as_str().to_owned(),
        problem,
    };
    let value = match reference.source() {
        SecretSource::Env(name) => match std::env::var(name) {
            Ok(value) => value,
            Err(std::env::VarError::NotPresent) => return Err(problem("is not set".to_owned())),
            Err(std::env::VarError::NotUnicode(_)) => return Err(problem("is not valid UTF-8".to_owned())),
        },
        SecretSource::File(path) => {
            std::fs::read_to_string(base.join(path)).map_err(|e| problem(format!("cannot be read: {e}")))?
        }
    };
    let value = value.trim();
    if value.is_empty() {
        return Err(problem("is empty".to_owned()));
    }
    Ok(Secret::new(value))
}

/// A secret resolver: (reference, what it is for) → the secret.
pub type SecretResolver<'a> = dyn Fn(&SecretRef, &str) -> Result<Secret, DeploymentError> + 'a;

/// The product connection `c` describes, its credentials resolved with
/// `secret` (runtime.yaml's for `serve`, worker.yaml's for `coordinator
/// worker`); `None` for a remote connection, which has none.
///
/// # Errors
/// [`DeploymentError`] naming the field or reference that cannot be used.
pub fn product_connection(
    name: &str,
    c: &model::Connection,
    secret: &SecretResolver<'_>,
) -> Result<Option<Connection>, DeploymentError> {
    let (Some(base_url), Some(authorization)) = (&c.base_url, &c.authorization) else {
        // Decoding guarantees both for an in-process connection and neither for a remote one.
        return Ok(None);
    };
    let url = |what: &str, text: &str| {
        HttpUrl::parse(text).map_err(|e| DeploymentError::Invalid(format!("connections.{name}.{what}: `{text}`: {e}")))
    };
    let token = match authorization {
        Authorization::ClientSecret(grant) => TokenSource::ClientSecret {
            token_endpoint: url("authorization.tokenEndpoint", &grant.token_endpoint)?,
            client_id: grant.client_id.clone(),
            client_secret: secret(&grant.client_secret, &format!("connections.{name}.authorization.clientSecret"))?,
            scope: grant.scope.clone(),
        },
        Authorization::PrivateKeyJwt(grant) => {
            let what = format!("connections.{name}.authorization.privateKey");
            let pem = secret(&grant.private_key, &what)?;
            let key = AssertionKey::from_pem(pem.expose().as_bytes(), &grant.key_id).map_err(|e| {
                DeploymentError::Secret {
                    what,
                    reference: grant.private_key.as_str().to_owned(),
                    problem: e.to_string(),
                }
            })?;
            TokenSource::PrivateKeyJwt {
                token_endpoint: url("authorization.tokenEndpoint", &grant.token_endpoint)?,
                client_id: grant.client_id.clone(),
                key,
                scope: grant.scope.clone(),
            }
        }
    };
    let timeouts = c.effective_timeouts();
    let connection = Connection::new(url("baseUrl", base_url)?, token)
        .with_timeouts(Duration::from_secs(timeouts.connect_seconds), Duration::from_secs(timeouts.request_seconds));
    Ok(Some(connection))
}

/// Fetches the JWKS of every OIDC issuer configured by URL: the service does
/// not start without its issuers' keys.
///
/// # Errors
/// [`DeploymentError::Jwks`] naming the issuer and the URL (exit code 3 when
/// it cannot be fetched).
pub async fn fetch_jwks(access: &Access) -> Result<(), DeploymentError> {
    for issuer in access.issuers() {
        issuer.fetch_at_start().await.map_err(|problem| DeploymentError::Jwks {
            issuer: issuer.issuer().to_owned(),
            jwks: issuer.jwks().to_owned(),
            problem,
        })?;
    }
    Ok(())
}

/// Every connection the package's operations use is configured, for the
/// same product: in-process with its credentials, or remote.
fn check_package_connections(
    config: &RuntimeConfig,
    package: &Package,
    connections: &HashMap<String, Connection>,
    remote: &BTreeMap<String, Vec<String>>,
) -> Result<(), DeploymentError> {
    let read = package::read(&package.bytes, None)
        .map_err(|e| DeploymentError::Package { path: config.runtime.package.path.clone(), reason: e.to_string() })?;
    for (alias, op) in &read.definition.operations {
        let product = op.operation.split_once('.').map_or(op.operation.as_str(), |(p, _)| p);
        let configured = config.runtime.connections.get(&op.connection);
        match configured {
            Some(c)
                if c.product == product
                    && (connections.contains_key(&op.connection) || remote.contains_key(&op.connection)) => {}
            Some(c) => {
                return Err(DeploymentError::Package {
                    path: config.runtime.package.path.clone(),
                    reason: format!(
                        "operation `{alias}` ({}) uses connection `{}`, which reaches product `{}`, not `{product}`",
                        op.operation, op.connection, c.product
                    ),
                });
            }
            None => {
                return Err(DeploymentError::Package {
                    path: config.runtime.package.path.clone(),
                    reason: format!(
                        "operation `{alias}` ({}) uses connection `{}`, which runtime.yaml does not configure; \
                         add it under `connections`",
                        op.operation, op.connection
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Every trigger of the package can verify its events: its connection is
/// configured, for the event's product, with an `eventSigningSecret`.
fn check_package_triggers(
    config: &RuntimeConfig,
    package: &Package,
    event_secrets: &HashMap<String, Secret>,
) -> Result<(), DeploymentError> {
    let read = package::read(&package.bytes, None)
        .map_err(|e| DeploymentError::Package { path: config.runtime.package.path.clone(), reason: e.to_string() })?;
    for (name, trigger) in &read.definition.triggers {
        let product = trigger.event.split_once('.').map_or(trigger.event.as_str(), |(p, _)| p);
        let problem = match config.runtime.connections.get(&trigger.connection) {
            None => "which runtime.yaml does not configure; add it under `connections`".to_owned(),
            Some(c) if c.product != product => format!("which reaches product `{}`, not `{product}`", c.product),
            Some(_) if !event_secrets.contains_key(&trigger.connection) => {
                "which has no `eventSigningSecret`: add a secret reference, or no event can be verified".to_owned()
            }
            Some(_) => continue,
        };
        return Err(DeploymentError::Package {
            path: config.runtime.package.path.clone(),
            reason: format!("trigger `{name}` ({}) uses connection `{}`, {problem}", trigger.event, trigger.connection),
        });
    }
    Ok(())
}

/// An IP address and port (`what` names the field in the error).
fn socket_address(what: &str, text: &str) -> Result<SocketAddr, DeploymentError> {
    text.parse::<SocketAddr>().map_err(|_| {
        DeploymentError::Invalid(format!(
            "{what}: `{text}` is not an IP address and port (write it like 127.0.0.1:7400)"
        ))
    })
}

/// The first error of a refusal, with its position, and how many more there are.
fn first_error(diagnostics: &[Diagnostic]) -> String {
    let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
    match errors.first() {
        None => "no usable content".to_owned(),
        Some(d) if errors.len() == 1 => format!("{}:{}: {} [{}]", d.line, d.column, d.message, d.code.as_str()),
        Some(d) => {
            format!("{}:{}: {} [{}] (and {} more)", d.line, d.column, d.message, d.code.as_str(), errors.len() - 1)
        }
    }
}

/// 64 hex digits → 32 bytes.
fn decode_hex_key(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..32).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()).collect()
}

#[cfg(test)]
#[path = "deployment_tests.rs"]
mod tests;
