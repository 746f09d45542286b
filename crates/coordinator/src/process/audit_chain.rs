//! The audit chain task: chains the audit entries committed transactions wrote
//! pending ([`Store::seal_audit`]), in the background, so that no commit waits
//! for the journal's hash chain (coordinator-store's `audit` module has the
//! design).
//!
//! It seals up to [`BATCH`] entries at a time; after a full batch it goes on
//! at once, otherwise it sleeps [`INTERVAL`], so an entry is chained within
//! about that long of its commit. A failure is logged and the next round
//! tries again: nothing is lost, a pending entry stays pending. Several
//! processes on one database each run one; they serialise on the journal's
//! head. `GET /v1/audit` seals whatever is still pending before it reads, so
//! a reader never depends on this task having run.
//!
//! In recovery-only mode it does nothing: that mode writes nothing on its own.
//!
//! [`Store::seal_audit`]: coordinator_store::Store::seal_audit

use std::sync::Arc;
use std::time::Duration;

use crate::engine::Engine;

/// Entries sealed per transaction.
pub const BATCH: u32 = 1000;
/// How long the task sleeps after a round that left nothing pending.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// Seals every entry pending now, a batch at a time (a read of the journal
/// does this first, so it never depends on the background task having run).
pub(crate) async fn seal_pending(engine: &Engine) -> Result<(), coordinator_store::StoreError> {
    while engine.store().seal_audit(BATCH).await? >= u64::from(BATCH) {}
    Ok(())
}

/// Seals the journal until the task is dropped or aborted; returns at once
/// when the engine is recovery-only.
pub async fn run(engine: Arc<Engine>) {
    if engine.is_recovery_only() {
        return;
    }
    loop {
        match engine.store().seal_audit(BATCH).await {
            Ok(sealed) if sealed >= u64::from(BATCH) => continue,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sealing the audit journal failed; trying again"),
        }
        tokio::time::sleep(INTERVAL).await;
    }
}
