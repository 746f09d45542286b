//! `coordinator worker`: a process next to a product that makes the product
//! requests of remote connections (runtime.yaml `dispatch: remote`) for the
//! coordinator, with credentials that only it holds (worker.yaml, [`config`]).
//!
//! It long-polls the coordinator's [`TaskService`] for tasks of its
//! connections (as many as it has free slots: `concurrency`), and for each:
//! acquires the lease — committed by the coordinator before anything is sent;
//! a task whose offer lapsed, or any failure to acquire, is not sent at all —
//! makes the request with the same product client the service uses (a fresh
//! token per attempt, the run's `traceparent`), and reports the classified
//! answer, retrying the same report while the coordinator is unavailable.
//! SIGTERM/SIGINT stop the polling; the requests already sent are finished
//! and reported before it exits (`drain`).
//!
//! [`TaskService`]: coordinator_proto::v1::task_service_server::TaskService

pub mod config;
mod task;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use coordinator_products::{Connection, ProductClient, Secret};
use coordinator_proto::v1::task_service_client::TaskServiceClient;
use coordinator_proto::v1::{ConnectionLimits, PollTasksRequest};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Status};

/// How long one poll waits for a task.
const POLL_WAIT: Duration = Duration::from_secs(10);
/// The first and the longest pause after a failed call.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(5));

/// A worker ready to run: its coordinator, its token and its connections.
pub struct Worker {
    /// The coordinator's gRPC address (`http://…` or `https://…`).
    pub address: String,
    /// The worker's bearer token.
    pub token: Secret,
    /// A PEM CA certificate to trust for `https` (otherwise the system's roots).
    pub ca_certificate: Option<Vec<u8>>,
    /// Connection name → how to reach the product.
    pub connections: HashMap<String, Connection>,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// This worker's own limits of its connections (worker.yaml `limits`),
    /// sent with every poll: the coordinator counts them over the whole
    /// deployment, with its own.
    pub limits: Vec<ConnectionLimits>,
    /// Reads the token again (from its reference), for a token that is
    /// replaced while the worker runs (an OIDC JWT renewed by a sidecar):
    /// tried once when the coordinator answers `UNAUTHENTICATED`.
    pub token_refresh: Option<TokenRefresh>,
}

/// Reads the worker's token again; `None` when it cannot be read now.
pub type TokenRefresh = Arc<dyn Fn() -> Option<Secret> + Send + Sync>;

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.connections.keys().collect();
        names.sort();
        f.debug_struct("Worker").field("address", &self.address).field("connections", &names).finish()
    }
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The address or TLS settings are not usable.
    #[error("the coordinator address cannot be used: {0}")]
    Address(String),
    /// The coordinator refused the worker's credentials or connections; retrying would not help.
    #[error("the coordinator refused this worker: {0}")]
    Refused(String),
}

/// The gRPC client with the worker's bearer token on every call.
pub(crate) type Client = TaskServiceClient<InterceptedService<Channel, Bearer>>;

/// Adds `authorization: Bearer <token>` to every call (the token may be replaced: [`Bearer::replace`]).
#[derive(Clone)]
pub(crate) struct Bearer(Arc<std::sync::RwLock<MetadataValue<tonic::metadata::Ascii>>>);

impl Bearer {
    fn new(token: &Secret) -> Result<Bearer, WorkerError> {
        Ok(Bearer(Arc::new(std::sync::RwLock::new(header(token)?))))
    }

    /// Sends `token` from now on; false when it is the token sent already.
    fn replace(&self, token: &Secret) -> Result<bool, WorkerError> {
        let new = header(token)?;
        let mut current = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *current == new {
            return Ok(false);
        }
        *current = new;
        Ok(true)
    }
}

fn header(token: &Secret) -> Result<MetadataValue<tonic::metadata::Ascii>, WorkerError> {
    MetadataValue::try_from(format!("Bearer {}", token.expose()))
        .map_err(|_| WorkerError::Address("the worker token holds characters a header cannot carry".into()))
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let value = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

/// What every task of one worker shares.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) owner: String,
    pub(crate) connections: HashMap<String, Connection>,
    pub(crate) products: ProductClient,
}

impl Worker {
    /// The client of the coordinator (connecting lazily: an unreachable coordinator is retried, not fatal).
    fn client(&self, bearer: Bearer) -> Result<Client, WorkerError> {
        let mut endpoint =
            Endpoint::from_shared(self.address.clone()).map_err(|e| WorkerError::Address(e.to_string()))?;
        if self.address.starts_with("https://") {
            let mut tls = ClientTlsConfig::new().with_native_roots();
            if let Some(ca) = &self.ca_certificate {
                tls = tls.ca_certificate(Certificate::from_pem(ca));
            }
            endpoint = endpoint.tls_config(tls).map_err(|e| WorkerError::Address(e.to_string()))?;
        }
        let endpoint = endpoint.connect_timeout(Duration::from_secs(5)).tcp_nodelay(true);
        Ok(TaskServiceClient::with_interceptor(endpoint.connect_lazy(), bearer))
    }

    /// Runs until `stop` turns true (then finishes the tasks in flight) or the coordinator refuses the worker.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> Result<(), WorkerError> {
        let bearer = Bearer::new(&self.token)?;
        let refresh = self.token_refresh.clone();
        let client = self.client(bearer.clone())?;
        let owner = format!("worker-{}", uuid::Uuid::now_v7());
        let mut connections: Vec<String> = self.connections.keys().cloned().collect();
        connections.sort();
        let concurrency = self.concurrency.max(1);
        let limits = self.limits.clone();
        let shared = Arc::new(Shared { client, owner, connections: self.connections, products: ProductClient::new() });
        let slots = Arc::new(Semaphore::new(concurrency));
        let mut tasks = JoinSet::new();
        let mut failures = 0;
        tracing::info!(owner = %shared.owner, connections = ?connections, concurrency, "worker started");
        let outcome = loop {
            while tasks.try_join_next().is_some() {}
            if *stop.borrow() {
                break Ok(());
            }
            // At least one slot is free before polling, so an offer is never taken without room to do it.
            let first = tokio::select! {
                permit = Arc::clone(&slots).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break Ok(()),
                },
                _ = stop.changed() => continue,
            };
            let free =
                u32::try_from(slots.available_permits() + 1).unwrap_or(1).min(crate::dispatch::remote::MAX_POLL_TASKS);
            let request = PollTasksRequest {
                owner: shared.owner.clone(),
                connections: connections.clone(),
                max_tasks: free,
                wait_ms: u32::try_from(POLL_WAIT.as_millis()).unwrap_or(10_000),
                limits: limits.clone(),
            };
            let mut client = shared.client.clone();
            let polled = tokio::select! {
                polled = client.poll_tasks(request) => polled,
                _ = stop.changed() => continue,
            };
            match polled {
                Ok(response) => {
                    failures = 0;
                    let mut first = Some(first);
                    for offered in response.into_inner().tasks {
                        let permit = match first.take() {
                            Some(permit) => permit,
                            None => match Arc::clone(&slots).try_acquire_owned() {
                                Ok(permit) => permit,
                                // More than was asked for: its offer lapses unsent.
                                Err(_) => break,
                            },
                        };
                        let shared = Arc::clone(&shared);
                        tasks.spawn(async move {
                            task::carry(&shared, offered).await;
                            drop(permit);
                        });
                    }
                }
                Err(status) if status.code() == Code::Unauthenticated && reread_token(refresh.as_ref(), &bearer)? => {
                    tracing::info!("the coordinator refused the token; read it again and polling with the new one");
                }
                Err(status) if refused(&status) => {
                    tracing::error!(code = ?status.code(), message = status.message(), "the coordinator refused this worker");
                    break Err(WorkerError::Refused(status.message().to_owned()));
                }
                Err(status) => {
                    tracing::warn!(code = ?status.code(), message = status.message(), "polling for tasks failed; trying again");
                    tokio::select! {
                        () = tokio::time::sleep(backoff(failures)) => {}
                        _ = stop.changed() => {}
                    }
                    failures = failures.saturating_add(1);
                }
            }
        };
        tracing::info!(in_flight = tasks.len(), "worker stopping: polling no more; finishing the tasks in flight");
        while tasks.join_next().await.is_some() {}
        tracing::info!("worker stopped");
        outcome
    }
}

/// Reads the token again; true when a new one will be sent.
fn reread_token(refresh: Option<&TokenRefresh>, bearer: &Bearer) -> Result<bool, WorkerError> {
    match refresh.and_then(|refresh| refresh()) {
        Some(token) => bearer.replace(&token),
        None => Ok(false),
    }
}

/// Whether a status says the worker itself is not accepted (a retry cannot help).
fn refused(status: &Status) -> bool {
    matches!(status.code(), Code::Unauthenticated | Code::PermissionDenied | Code::NotFound | Code::InvalidArgument)
}

/// The pause after `failures` failed calls in a row.
pub(crate) fn backoff(failures: u32) -> Duration {
    BACKOFF.0.saturating_mul(2u32.saturating_pow(failures.min(8))).min(BACKOFF.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_token_is_sent_from_then_on_and_an_unchanged_one_is_not_a_change() {
        let first = Secret::new("first");
        let bearer = match Bearer::new(&first) {
            Ok(bearer) => bearer,
            Err(e) => panic!("{e}"),
        };
        let sent = |bearer: &mut Bearer| {
            let request = tonic::service::Interceptor::call(bearer, Request::new(()));
            request.ok().and_then(|r| r.metadata().get("authorization").map(|v| v.to_str().unwrap_or("").to_owned()))
        };
        let mut interceptor = bearer.clone();
        assert_eq!(sent(&mut interceptor).as_deref(), Some("Bearer first"));
        let same: TokenRefresh = Arc::new(|| Some(Secret::new("first")));
        assert_eq!(reread_token(Some(&same), &bearer).ok(), Some(false), "the same token: the refusal stands");
        let renewed: TokenRefresh = Arc::new(|| Some(Secret::new("second")));
        assert_eq!(reread_token(Some(&renewed), &bearer).ok(), Some(true));
        assert_eq!(sent(&mut interceptor).as_deref(), Some("Bearer second"), "every clone sends the new token");
        let unreadable: TokenRefresh = Arc::new(|| None);
        assert_eq!(reread_token(Some(&unreadable), &bearer).ok(), Some(false));
        assert_eq!(reread_token(None, &bearer).ok(), Some(false));
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(1), Duration::from_millis(400));
        assert_eq!(backoff(4), Duration::from_millis(3200));
        assert_eq!(backoff(5), Duration::from_secs(5));
        assert_eq!(backoff(40), Duration::from_secs(5));
    }
}
