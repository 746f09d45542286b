//! The janitor: vacuums the queue tables every [`INTERVAL`]
//! (`Store::tidy_queues`, PostgreSQL only), so the index entries of outbox
//! and timer rows done since the last time do not pile up in front of every
//! claim until autovacuum comes by (a minute apart by default). A failure is
//! logged and the next round tries again; nothing depends on it but speed.
//!
//! In recovery-only mode it does nothing: that mode keeps to its receipts.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::Engine;

/// How long the janitor sleeps between two rounds.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Tidies the queue tables until the task is dropped or aborted; returns at
/// once when the engine is recovery-only.
pub async fn run(engine: Arc<Engine>) {
    if engine.is_recovery_only() {
        return;
    }
    loop {
        tokio::time::sleep(INTERVAL).await;
        if let Err(e) = engine.store().tidy_queues().await {
            tracing::warn!(error = %e, "vacuuming the queue tables failed; trying again");
        }
    }
}
