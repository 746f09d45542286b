//! `coordinator serve --runtime runtime.yaml` and `coordinator migrate`
//! (docs/reference/service.md#coordinator): the production service on the
//! database `runtime.yaml` names (PostgreSQL, or SQLite for a single process).
//!
//! `serve` never migrates: a database whose schema is not this version's is
//! refused with the command that fixes it. At every start it stores the pinned
//! package and activates it, so the deployment file is what runs: a package
//! activated later over `POST /v1/packages` stays active until the next start
//! (pin it in `runtime.yaml` to keep it). Runs admitted earlier keep their own
//! revision whatever is active.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::process::tasks::{Drained, Running};
use coordinator_store::Store;
use tokio::net::TcpListener;

use crate::engine::Engine;
use crate::engine::error::EngineError;
use crate::process::deployment::{Deployment, DeploymentError, RuntimeConfig};
use crate::telemetry::traces::{TelemetryError, Traces};

/// Why the service cannot start or migrate.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The runtime file or what it references cannot be used.
    #[error(transparent)]
    Deployment(#[from] DeploymentError),
    /// The database cannot be reached or refused a statement.
    #[error("database: {0}")]
    Database(String),
    /// The database's schema is not this version's.
    #[error("the database is not migrated for this version ({0}); run `coordinator migrate --runtime FILE` first")]
    NotMigrated(String),
    /// A newer version migrated the database: this one would misread it.
    #[error(
        "the database was migrated by a newer version of coordinator (migration{} {} unknown to this one); \
         run that version or a later one, or restore a backup taken before the migration",
        if .0.len() == 1 { "" } else { "s" },
        .0.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
    )]
    SchemaNewer(Vec<i64>),
    /// `telemetry` names an exporter that cannot be built.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// Runs not finished were sealed with payload keys the runtime file does not hold.
    #[error(
        "runs not finished were sealed with payload key {}, which payloadKeys in the runtime file does not hold: \
         add {} to payloadKeys.keys (the active key may stay as it is) and start again",
        quoted(.0),
        if .0.len() == 1 { "it" } else { "them" }
    )]
    PayloadKeysMissing(Vec<String>),
    /// The gRPC server of remote workers cannot start.
    #[error(transparent)]
    Grpc(#[from] crate::dispatch::remote::server::GrpcError),
    /// The listener cannot be bound.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The operating system's reason.
        reason: String,
    },
}

impl ServeError {
    /// Whether a needed resource is unavailable (exit code 3) rather than the configuration wrong (exit code 1).
    pub fn is_unavailable(&self) -> bool {
        match self {
            ServeError::Deployment(e) => e.is_unavailable(),
            ServeError::Telemetry(_) | ServeError::PayloadKeysMissing(_) | ServeError::SchemaNewer(_) => false,
            ServeError::Database(_) | ServeError::NotMigrated(_) | ServeError::Listen { .. } => true,
            ServeError::Grpc(e) => matches!(e, crate::dispatch::remote::server::GrpcError::Listen { .. }),
        }
    }
}

/// Key ids as `a`, `b` and `c`.
fn quoted(ids: &[String]) -> String {
    let quoted: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A running service. Dropping it stops the server and the background
/// tasks (worker, audit chain, janitor).
pub struct Service {
    /// The address served.
    pub addr: SocketAddr,
    /// The engine.
    pub engine: Arc<Engine>,
    /// The workflow of the pinned package.
    pub workflow: String,
    /// The revision activated at start.
    pub revision: String,
    /// How long a drain may take (`shutdownGraceSeconds`, by default the claim lease).
    pub grace: Duration,
    /// Where remote workers connect (`grpc.listen`), when there is a gRPC server.
    pub grpc_addr: Option<SocketAddr>,
    running: Running,
}

impl Service {
    /// The server's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits until the server task ends (only on failure or abort).
    pub async fn serve_forever(&mut self) {
        self.running.serve_forever().await;
    }

    /// Stops as a routine stop should (SIGTERM, SIGINT), within [`Service::grace`]:
    /// nothing more is admitted or claimed, the product requests already sent
    /// are answered and committed, unsent claims are given back, the journal is sealed.
    pub async fn drain(&mut self) -> Drained {
        self.running.drain(self.grace).await
    }
}

/// Brings the schema of the runtime file's database up to date. Reads only
/// `database.url` of the file (checked whole first).
///
/// # Errors
/// [`ServeError`] when the file is refused or the database cannot be migrated.
pub async fn migrate(config: &RuntimeConfig) -> Result<(), ServeError> {
    let url = config.database_url()?;
    let store = Store::connect(url.expose()).await.map_err(|e| ServeError::Database(e.to_string()))?;
    let migrated = store.migrate().await.map_err(|e| ServeError::Database(e.to_string()));
    store.close().await;
    migrated
}

/// Starts the service of a resolved deployment: connects to the migrated
/// database, stores and activates the pinned package, and serves the API,
/// the worker, the audit chain task and the janitor.
///
/// # Errors
/// [`ServeError`] naming what cannot start.
pub async fn start(deployment: Deployment) -> Result<Service, ServeError> {
    start_with(deployment, Mode::Normal).await
}

/// How the service runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Admits, dispatches, fires timers.
    Normal,
    /// `--recovery-only` (docs/reference/recovery.md#recovery-only-mode):
    /// admits nothing, dispatches nothing, fires no timer, and writes nothing
    /// at start (not even the package activation) nor on its own (no audit
    /// chain task; `GET /v1/audit` still seals before reading); inspection, the
    /// restore hold and operator commands are served, and receipt lookups
    /// (reads) are performed so that `reconcile` works under review.
    RecoveryOnly,
}

/// [`start`] in `mode`.
///
/// # Errors
/// [`ServeError`] naming what cannot start.
pub async fn start_with(deployment: Deployment, mode: Mode) -> Result<Service, ServeError> {
    crate::process::deployment::fetch_jwks(&deployment.access).await?;
    let store =
        Store::connect(deployment.database_url.expose()).await.map_err(|e| ServeError::Database(e.to_string()))?;
    // The schema must be this version's: none newer, none missing.
    let schema = store.schema().await.map_err(|e| ServeError::Database(e.to_string()))?;
    if !schema.unknown.is_empty() {
        return Err(ServeError::SchemaNewer(schema.unknown));
    }
    if !schema.missing.is_empty() {
        let missing: Vec<String> = schema.missing.iter().map(|(v, what)| format!("{v} {what}")).collect();
        return Err(ServeError::NotMigrated(format!("migrations not applied: {}", missing.join(", "))));
    }
    let hold = store.hold().await.map_err(|e| ServeError::NotMigrated(e.to_string()))?;
    // Every run the service would go on with must open: a key left out of
    // payloadKeys would leave its runs failing one by one.
    let used = store.sealed_key_ids().await.map_err(|e| ServeError::Database(e.to_string()))?;
    let missing: Vec<String> = used.into_iter().filter(|id| !deployment.keyring.holds(id)).collect();
    if !missing.is_empty() {
        return Err(ServeError::PayloadKeysMissing(missing));
    }
    let package = &deployment.package;
    if mode == Mode::Normal {
        let sealed = crate::engine::package::at_rest::sealed(&deployment.keyring, &deployment.package)
            .map_err(|e| ServeError::Database(format!("sealing the package: {e}")))?;
        store.put_package(&sealed).await.map_err(|e| ServeError::Database(e.to_string()))?;
        // Packages stored in clear, or under a key that is no longer the active one, are sealed again.
        crate::engine::package::at_rest::reseal_rows(&store, &deployment.keyring)
            .await
            .map_err(|e| ServeError::Database(format!("sealing stored packages: {e}")))?;
        store
            .activate(&package.workflow, &package.revision, crate::engine::now_ms(), None)
            .await
            .map_err(|e| ServeError::Database(format!("activating revision {}: {e}", package.revision)))?;
    }
    let listener = TcpListener::bind(deployment.listen)
        .await
        .map_err(|e| ServeError::Listen { addr: deployment.listen, reason: e.to_string() })?;
    let addr =
        listener.local_addr().map_err(|e| ServeError::Listen { addr: deployment.listen, reason: e.to_string() })?;
    // Bound before anything else starts, so a port in use is refused at start.
    let grpc_listener = match &deployment.grpc {
        Some(grpc) => Some(crate::dispatch::remote::server::Grpc::bind(grpc.listen).await?),
        None => None,
    };
    let remote: crate::dispatch::remote::RemoteConnections = deployment.remote.clone().into_iter().collect();
    let engine = Engine::new(store, deployment.keyring, deployment.connections.clone(), deployment.settings)
        .with_remote(remote)
        .with_breakers(
            deployment
                .config
                .runtime
                .connections
                .iter()
                .filter_map(|(name, c)| c.breaker.map(|b| (name.clone(), b.settings())))
                .collect(),
        )
        .with_limits(
            deployment
                .config
                .runtime
                .connections
                .iter()
                .filter_map(|(name, c)| c.limits.map(|l| (name.clone(), l.limits())))
                .collect(),
        )
        .with_event_secrets(deployment.event_secrets.clone())
        .with_retention(deployment.config.runtime.retention.map(|r| r.ended_runs_days))
        .with_schedule_floor(
            deployment.config.runtime.schedule_floor_seconds.unwrap_or(coordinator_core::schedule::MIN_SPACING_SECONDS),
        );
    let engine = match &deployment.redis {
        // Connected in the background: Redis down at start delays nothing (crate::dispatch::hints).
        Some(url) => {
            let hints = crate::dispatch::hints::Hints::start(
                url,
                engine.owner(),
                deployment.remote.keys(),
                mode == Mode::Normal,
            )
            .map_err(|e| ServeError::Deployment(DeploymentError::Invalid(e.to_string())))?;
            engine.with_hints(hints)
        }
        None => engine,
    };
    let traces = match &deployment.config.runtime.telemetry {
        Some(telemetry) => Traces::otlp(telemetry)?,
        None => Traces::off(),
    };
    let engine = Arc::new(engine.with_recovery_only(mode == Mode::RecoveryOnly).with_traces(traces));
    if mode == Mode::Normal {
        // A database restored, promoted or replaced since the last start is fenced before anything is served.
        engine
            .arm_fence()
            .await
            .map_err(|e| ServeError::Database(format!("reading the database for the fence: {e}")))?;
    }
    if hold.is_some() {
        // A placement a crash interrupted is finished before any work is claimed.
        engine
            .hold_unfinished_runs(None)
            .await
            .map_err(|e| ServeError::Database(format!("placing the restore hold: {e}")))?;
    }
    // The package compiles (its functions under the bounds) before anything is served.
    let compiled = match mode {
        Mode::Normal => engine.workflow(&package.revision).await.map(|_| ()),
        Mode::RecoveryOnly => Ok(()),
    };
    compiled.map_err(|e| match e {
        EngineError::Store(s) => ServeError::Database(s.to_string()),
        other => ServeError::Deployment(DeploymentError::Package {
            path: deployment.config.runtime.package.path.clone(),
            reason: other.to_string(),
        }),
    })?;
    let router = crate::api::app(Arc::clone(&engine), Arc::clone(&deployment.access));
    let grace = match deployment.config.runtime.shutdown_grace_seconds {
        Some(seconds) => Duration::from_secs(seconds),
        None => crate::dispatch::worker::WorkerOptions::for_engine(&engine).lease(),
    };
    if mode == Mode::Normal {
        // Today's and the next days' partitions exist before the first admission.
        crate::process::janitor::prepare_partitions(&engine).await;
        // Rows queued for a connection that is no longer remote or limited are served here again;
        // rows of a connection limited now go in their workflow's lane, to be claimed under its limits.
        let limited: Vec<String> = engine.limits.keys().cloned().collect();
        let remote: Vec<String> = deployment.remote.keys().cloned().collect();
        let cleared = engine.store.clear_lanes(&remote, &limited).await;
        cleared.map_err(|e| ServeError::Database(format!("outbox lanes: {e}")))?;
        engine.store.lane_rows(&limited).await.map_err(|e| ServeError::Database(format!("outbox lanes: {e}")))?;
    }
    let grpc = match grpc_listener {
        Some(listener) => {
            let tls = deployment.grpc.as_ref().and_then(|g| g.tls.as_ref()).map(|tls| {
                crate::dispatch::remote::server::TlsIdentity {
                    certificate: tls.certificate.expose().as_bytes().to_vec(),
                    private_key: tls.private_key.expose().as_bytes().to_vec(),
                }
            });
            Some(crate::dispatch::remote::server::Grpc::start(
                listener,
                tls.as_ref(),
                &engine,
                Arc::clone(&deployment.access),
            )?)
        }
        None => None,
    };
    let grpc_addr = grpc.as_ref().map(crate::dispatch::remote::server::Grpc::addr);
    let running = Running::start("serve", listener, router, &engine, grpc);
    Ok(Service {
        addr,
        engine,
        workflow: package.workflow.clone(),
        revision: package.revision.clone(),
        grace,
        grpc_addr,
        running,
    })
}
