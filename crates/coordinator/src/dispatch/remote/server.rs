//! The gRPC listener of `serve` (runtime.yaml `grpc.listen`, TLS with
//! rustls when `grpc.tls` is set): the [`TaskService`], gRPC health
//! (`grpc.health.v1`, for the whole server `""` and for the service by name)
//! and reflection (`grpc.reflection.v1`). Health follows the database: it is
//! `SERVING` while the database answers, no fence holds and the process is
//! neither draining nor recovery-only (it offers no task then), `NOT_SERVING` otherwise, checked every [`HEALTH_EVERY`].
//!
//! [`TaskService`]: coordinator_proto::v1::task_service_server::TaskService

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coordinator_proto::v1::task_service_server::TaskServiceServer;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;

use crate::auth::access::Access;
use crate::dispatch::remote::service::TaskApi;
use crate::engine::Engine;

/// How often health is checked against the database.
pub const HEALTH_EVERY: Duration = Duration::from_secs(1);
/// How long a health check waits for the database.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// The server's TLS identity: PEM certificate chain and private key.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The certificate chain, PEM.
    pub certificate: Vec<u8>,
    /// The private key, PEM.
    pub private_key: Vec<u8>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsIdentity(..)")
    }
}

/// Why the gRPC server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The listener could not be bound.
    #[error("cannot listen for workers on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// The TLS identity or reflection could not be set up.
    #[error("the gRPC server cannot be set up: {0}")]
    Setup(String),
}

/// A running gRPC server; dropping it stops it at once.
pub(crate) struct Grpc {
    addr: SocketAddr,
    server: JoinHandle<()>,
    health: JoinHandle<()>,
    stop: Option<oneshot::Sender<()>>,
}

impl Grpc {
    /// Binds `addr` (before anything else starts, so a taken port is refused at start).
    pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, GrpcError> {
        TcpListener::bind(addr).await.map_err(|e| GrpcError::Listen { addr, reason: e.to_string() })
    }

    /// Serves the task service, health and reflection on `listener`.
    pub(crate) fn start(
        listener: TcpListener,
        tls: Option<&TlsIdentity>,
        engine: &Arc<Engine>,
        access: Arc<Access>,
    ) -> Result<Grpc, GrpcError> {
        let addr = listener.local_addr().map_err(|e| GrpcError::Setup(e.to_string()))?;
        let mut builder = Server::builder();
        if let Some(tls) = tls {
            let identity = Identity::from_pem(&tls.certificate, &tls.private_key);
            builder = builder
                .tls_config(ServerTlsConfig::new().identity(identity))
                .map_err(|e| GrpcError::Setup(format!("grpc.tls: {e}")))?;
        }
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(coordinator_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| GrpcError::Setup(format!("reflection: {e}")))?;
        let (reporter, health_service) = tonic_health::server::health_reporter();
        let router = builder
            .add_service(health_service)
            .add_service(reflection)
            .add_service(TaskServiceServer::new(TaskApi::new(Arc::clone(engine), access)));
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async {
                // A dropped sender stops the server as well.
                let _ = stopped.await;
            };
            if let Err(e) = router.serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown).await {
                tracing::error!(error = %e, "the gRPC server stopped");
            }
        });
        let health = tokio::spawn(follow_health(Arc::clone(engine), reporter));
        tracing::info!(%addr, tls = tls.is_some(), "serving remote workers over gRPC");
        Ok(Grpc { addr, server, health, stop: Some(stop) })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and finishes the calls in progress (within `grace`).
    pub(crate) async fn stop(&mut self, grace: Duration) {
        self.health.abort();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(grace, &mut self.server).await.is_err() {
            self.server.abort();
        }
    }
}

impl Drop for Grpc {
    fn drop(&mut self) {
        self.server.abort();
        self.health.abort();
    }
}

/// Sets health from the database, the fence and the drain, every [`HEALTH_EVERY`].
async fn follow_health(engine: Arc<Engine>, reporter: tonic_health::server::HealthReporter) {
    let mut last = None;
    loop {
        let reachable = matches!(tokio::time::timeout(PING_TIMEOUT, engine.store().ping()).await, Ok(Ok(())));
        let serving = reachable && !engine.is_fenced() && !engine.is_draining() && !engine.is_recovery_only();
        let status = if serving { ServingStatus::Serving } else { ServingStatus::NotServing };
        if last != Some(serving) {
            for service in ["", coordinator_proto::SERVICE_NAME] {
                reporter.set_service_status(service, status).await;
            }
            tracing::info!(serving, "gRPC health");
            last = Some(serving);
        }
        tokio::time::sleep(HEALTH_EVERY).await;
    }
}
