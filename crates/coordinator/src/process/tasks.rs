//! The tasks of a running service (`serve`, `dev`): the HTTP server (and the
//! gRPC server of remote workers, when there are remote connections) and the
//! engine's background tasks — the worker, the audit chain task
//! ([`audit_chain`]), the batch task ([`Engine::work_batches`]), the
//! schedule task ([`Engine::fire_schedules`]) and the janitor (the last four
//! return at once in recovery-only mode, which writes nothing on its own) — and
//! the order in which they stop.
//!
//! [`Running::drain`] is a routine stop (SIGTERM, SIGINT): draining begins
//! ([`crate::process::drain`]), the worker finishes the product requests it sent and
//! gives back the claims it had not acted on, then the HTTP server (then the
//! gRPC server: remote workers' reports are taken until here) stops
//! accepting and finishes the requests in progress ([`crate::api::open_requests`]:
//! a connection with no request in progress — idle between requests, a
//! browser's preconnect, a request head not yet complete — is closed, not
//! waited on), then the journal is sealed to its end, as far as the grace
//! allows (best effort: an entry left pending is sealed later). All of it is
//! bounded by the grace period; what is still in flight when it runs out is
//! left as a crash would leave it (a lease that runs out makes a sent
//! mutation uncertain). Dropping a [`Running`] aborts every task at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};

use crate::api::open_requests::InProgress;
use crate::dispatch::worker;
use crate::engine::Engine;
use crate::process::{audit_chain, janitor};

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
    audit_chain: JoinHandle<()>,
    janitor: JoinHandle<()>,
    batches: JoinHandle<()>,
    schedules: JoinHandle<()>,
    grpc: Option<crate::dispatch::remote::server::Grpc>,
}

impl Running {
    /// Serves `router` on `listener` (`who` names the command in its log
    /// lines) and starts `engine`'s background tasks.
    pub(crate) fn start(
        who: &'static str,
        listener: tokio::net::TcpListener,
        router: axum::Router,
        engine: &Arc<Engine>,
        grpc: Option<crate::dispatch::remote::server::Grpc>,
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
            audit_chain: tokio::spawn(audit_chain::run(Arc::clone(engine))),
            janitor: tokio::spawn(janitor::run(Arc::clone(engine))),
            batches: tokio::spawn({
                let engine = Arc::clone(engine);
                async move { engine.work_batches().await }
            }),
            schedules: tokio::spawn({
                let engine = Arc::clone(engine);
                async move { engine.fire_schedules().await }
            }),
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
        // Counted after `begin`: a request counted later is not sent (see `Request::begin` in
        // `crate::dispatch::perform`).
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
        self.audit_chain.abort();
        // The batch and schedule tasks stop at their next round once draining began, and give their leases back.
        if timeout_at(deadline, &mut self.batches).await.is_err() {
            self.batches.abort();
        }
        if timeout_at(deadline, &mut self.schedules).await.is_err() {
            self.schedules.abort();
        }
        // Sealing is best effort here: nothing uncertain hangs on it (see `seal_within`).
        if !engine.is_recovery_only() {
            seal_within(&engine, deadline).await;
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

/// Seals every pending audit entry (the worker's last commits wrote some),
/// giving up at `deadline`. A drain is not failed by it: an entry left
/// pending is whole and committed, and the next process's audit chain task (or a read
/// of the journal) chains it; no effect becomes uncertain for it. So a
/// database that is slow or whose write lock another holds (SQLite's busy
/// timeout is longer than a usual grace) costs the drain the rest of its
/// grace, never exit code 4 and the operator work it stands for.
async fn seal_within(engine: &Engine, deadline: Instant) {
    let reason = match timeout_at(deadline, audit_chain::seal_pending(engine)).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "the grace period ran out".to_owned(),
    };
    tracing::warn!(
        reason,
        "draining: the audit journal was not sealed to its end; its pending entries are sealed later (by the next \
         process, or by a read of the journal)"
    );
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in [&self.server, &self.worker, &self.audit_chain, &self.janitor, &self.batches, &self.schedules] {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Connection;

    use super::*;

    /// A failure guard only (never a speed claim).
    const GUARD: Duration = Duration::from_secs(120);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drain_that_cannot_seal_within_its_grace_is_clean_and_leaves_the_entries_pending() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // One run admitted: its entries are pending. No product is reached:
        // draining begins before the worker starts, so it claims nothing.
        let engine = crate::dispatch::perform::drain_tests::engine_at(dir.path(), "http://127.0.0.1:9", 1).await;
        engine.drain.begin();
        // Another connection holds SQLite's write lock through the drain.
        let url = format!("sqlite://{}", dir.path().join("c.db").display());
        let mut holder = sqlx::SqliteConnection::connect(&url).await.unwrap_or_else(|e| panic!("{e}"));
        sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap_or_else(|e| panic!("{e}"));

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
        let mut running = Running::start("test", listener, axum::Router::new(), &engine, None);
        let drained = tokio::time::timeout(GUARD, running.drain(Duration::from_secs(1))).await;
        assert_eq!(drained.ok(), Some(Drained::Clean), "sealing is best effort: no exit code 4 for it");

        // The entries stayed pending, whole: once the lock is free they are sealed.
        sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap_or_else(|e| panic!("{e}"));
        let sealed = tokio::time::timeout(GUARD, engine.store().seal_audit(audit_chain::BATCH)).await;
        assert!(matches!(sealed, Ok(Ok(n)) if n > 0), "the run's entries were left pending: {sealed:?}");
    }
}
