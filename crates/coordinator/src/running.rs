//! The tasks of a running service (`serve`, `dev`): the HTTP server (and the
//! gRPC server of remote workers, when there are remote connections) and the
//! engine's background tasks — the worker, the audit journal's sealer and the
//! janitor (the last two return at once in recovery-only mode, which writes
//! nothing on its own) — and the order in which they stop.
//!
//! [`Running::drain`] is a routine stop (SIGTERM, SIGINT): draining begins
//! (`crate::drain`), the worker finishes the product requests it sent and
//! gives back the claims it had not acted on, then the HTTP server (then the
//! gRPC server: remote workers' reports are taken until here) stops
//! accepting and finishes the requests in progress (`crate::in_progress`:
//! a connection with no request in progress — idle between requests, a
//! browser's preconnect, a request head not yet complete — is closed, not
//! waited on), then the journal is sealed to its end. All of it is bounded
//! by the grace period; what is still in flight when it runs out is left as
//! a crash would leave it (a lease that runs out makes a sent mutation
//! uncertain). Dropping a `Running` aborts
//! every task at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};

use crate::engine::Engine;
use crate::in_progress::InProgress;
use crate::{janitor, sealer, worker};

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Everything in flight was answered and committed, every unsent claim given back.
    Clean,
    /// The grace period ran out with this many product requests still unanswered.
    GraceExpired {
        /// Product requests sent and not answered.
        in_flight: usize,
    },
}

/// The tasks of a running service. Dropping it stops them all at once.
pub(crate) struct Running {
    engine: Arc<Engine>,
    server: JoinHandle<()>,
    stop_server: Option<oneshot::Sender<()>>,
    requests: InProgress,
    worker: JoinHandle<()>,
    sealer: JoinHandle<()>,
    janitor: JoinHandle<()>,
    grpc: Option<crate::remote::server::Grpc>,
}

impl Running {
    /// Serves `router` on `listener` (`who` names the command in its log
    /// lines) and starts `engine`'s background tasks.
    pub(crate) fn start(
        who: &'static str,
        listener: tokio::net::TcpListener,
        router: axum::Router,
        engine: &Arc<Engine>,
        grpc: Option<crate::remote::server::Grpc>,
    ) -> Running {
        let (stop_server, stopped) = oneshot::channel::<()>();
        let requests = InProgress::default();
        // Routes made ready once: served as a `Router`, axum would rebuild every
        // route for each connection it accepts.
        let router = requests.count(router).into_make_service();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, router).with_graceful_shutdown(async {
                // A dropped sender stops the server as well.
                let _ = stopped.await;
            });
            if let Err(e) = serving.await {
                tracing::error!(command = who, error = %e, "the HTTP server stopped");
            }
        });
        Running {
            engine: Arc::clone(engine),
            server,
            stop_server: Some(stop_server),
            requests,
            worker: tokio::spawn(worker::run(Arc::clone(engine))),
            sealer: tokio::spawn(sealer::run(Arc::clone(engine))),
            janitor: tokio::spawn(janitor::run(Arc::clone(engine))),
            grpc,
        }
    }

    /// Waits until the server ends (only on failure, abort or after a drain).
    pub(crate) async fn serve_forever(&mut self) {
        let _ = (&mut self.server).await;
    }

    /// Stops as a routine stop should, within `grace` (see the module docs).
    pub(crate) async fn drain(&mut self, grace: Duration) -> Drained {
        let deadline = Instant::now() + grace;
        let engine = Arc::clone(&self.engine);
        engine.drain.begin();
        engine.metrics().draining(true);
        // Counted after `begin`: a request counted later is not sent (see `worker::sending`).
        tracing::info!(
            in_flight = engine.drain.in_flight(),
            grace_seconds = grace.as_secs(),
            "draining: admitting and claiming nothing more; waiting for the product requests already sent"
        );
        if timeout_at(deadline, &mut self.worker).await.is_err() {
            return self.expired("product requests");
        }
        tracing::info!("draining: every product request sent was answered and committed; unsent claims given back");
        if let Some(stop) = self.stop_server.take() {
            let _ = stop.send(());
        }
        // The server ends once its connections close; a connection with no
        // request in progress may stay open (a preconnect, a half-sent head),
        // so once no request is in progress the server is stopped outright.
        let requests = self.requests.clone();
        let server = &mut self.server;
        let ended = async {
            tokio::select! {
                _ = server => true,
                () = requests.idle() => false,
            }
        };
        match timeout_at(deadline, ended).await {
            Err(_) => return self.expired("HTTP requests"),
            Ok(true) => {}
            Ok(false) => {
                self.server.abort();
                tracing::debug!("draining: no HTTP request in progress; open connections closed");
            }
        }
        if let Some(grpc) = &mut self.grpc {
            grpc.stop(deadline.saturating_duration_since(Instant::now())).await;
        }
        self.janitor.abort();
        self.sealer.abort();
        if !engine.is_recovery_only() && timeout_at(deadline, seal_to_end(&engine)).await.is_err() {
            return self.expired("sealing the audit journal");
        }
        // The last spans (this drain's decisions among them) go out before the process does.
        let exporting = Arc::clone(&engine);
        let flushed = tokio::task::spawn_blocking(move || exporting.traces().shutdown());
        if timeout_at(deadline, flushed).await.is_err() {
            tracing::warn!("draining: the last spans were not exported within the grace period");
        }
        tracing::info!("drained");
        Drained::Clean
    }

    /// The grace period ran out while the drain was `waiting_for` this (named in the log line).
    fn expired(&self, waiting_for: &'static str) -> Drained {
        let in_flight = self.engine.drain.in_flight();
        tracing::warn!(
            in_flight,
            http_requests_in_progress = self.requests.now(),
            waiting_for,
            "the grace period ran out before the drain finished: product requests still unanswered become \
             uncertain once their leases run out, as after a crash (raise shutdownGraceSeconds)"
        );
        Drained::GraceExpired { in_flight }
    }
}

/// Seals every pending audit entry (the worker's last commits wrote some).
async fn seal_to_end(engine: &Engine) {
    if let Err(e) = sealer::seal_pending(engine).await {
        // Pending entries stay pending; the next process (or a read) seals them.
        tracing::warn!(error = %e, "draining: sealing the audit journal failed; pending entries are sealed later");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in [&self.server, &self.worker, &self.sealer, &self.janitor] {
            task.abort();
        }
    }
}
