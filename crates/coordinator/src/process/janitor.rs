//! The janitor: vacuums the queue tables every [`INTERVAL`]
//! ([`Store::tidy_queues`], PostgreSQL only), so the index entries of outbox
//! and timer rows done since the last time do not pile up in front of every
//! claim until autovacuum comes by (a minute apart by default); and every
//! [`HOUSEKEEPING`] (and once at start) makes the day partitions ahead
//! ([`Store::prepare_partitions`]) and, when runtime.yaml sets `retention`,
//! removes the runs that ended longer ago ([`Store::retain`]). A failure is
//! logged and the next round tries again: nothing depends on a round but
//! speed, and a day not made ahead only sends its rows to the DEFAULT
//! partition.
//!
//! In recovery-only mode it does nothing: that mode keeps to its receipts.
//!
//! [`Store::tidy_queues`]: coordinator_store::Store::tidy_queues
//! [`Store::prepare_partitions`]: coordinator_store::Store::prepare_partitions
//! [`Store::retain`]: coordinator_store::Store::retain

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::Engine;

/// How long the janitor sleeps between two rounds. Each `VACUUM (ANALYZE)`
/// of the queue tables (~30 ms at a few hundred runs/s) also invalidates
/// every plan PostgreSQL cached for statements on them, in every session:
/// once a second, replanning and vacuuming took about a tenth of
/// PostgreSQL's time in the throughput bench. Every 5 s, claims step over
/// up to 5 s of done rows' index entries instead of 1 s, and PostgreSQL's
/// time per run measured 8–11 % lower (bench/RESULTS.md).
pub const INTERVAL: Duration = Duration::from_secs(5);
/// How often partitions are made ahead and retention applied.
pub const HOUSEKEEPING: Duration = Duration::from_secs(3600);

/// Tidies the queue tables until the task is dropped or aborted; returns at
/// once when the engine is recovery-only.
pub async fn run(engine: Arc<Engine>) {
    if engine.is_recovery_only() {
        return;
    }
    let mut housekeeping = Instant::now();
    loop {
        if Instant::now() >= housekeeping {
            keep_house(&engine).await;
            housekeeping = Instant::now() + HOUSEKEEPING;
        }
        tokio::time::sleep(INTERVAL).await;
        if let Err(e) = engine.store().tidy_queues().await {
            tracing::warn!(error = %e, "vacuuming the queue tables failed; trying again");
        }
    }
}

/// Makes the day partitions ahead and applies the retention, logging what it did.
pub async fn keep_house(engine: &Engine) {
    prepare_partitions(engine).await;
    let Some(days) = engine.retention_days else { return };
    match engine.store().retain(engine.now(), days).await {
        Ok(cut) if cut.runs > 0 || cut.entries > 0 => tracing::info!(
            runs = cut.runs,
            partitions = cut.partitions,
            journal_entries = cut.entries,
            journal_starts_after = cut.checkpoint.map(|c| c.position),
            ended_runs_days = days,
            "retention: removed runs that ended before the retention period"
        ),
        Ok(_) => tracing::debug!(ended_runs_days = days, "retention: nothing to remove"),
        Err(e) => tracing::warn!(error = %e, "retention failed; trying again in an hour"),
    }
}

/// Makes the day partitions ahead (PostgreSQL), logging a day it could not make.
pub async fn prepare_partitions(engine: &Engine) {
    match engine.store().prepare_partitions(engine.now()).await {
        Ok(prepared) => {
            if !prepared.created.is_empty() {
                tracing::info!(partitions = ?prepared.created, "day partitions made ahead");
            }
            for (name, e) in prepared.skipped {
                tracing::warn!(
                    partition = %name,
                    error = %e,
                    "a day partition could not be made; that day's rows go to the DEFAULT partition"
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "making the day partitions failed; trying again in an hour"),
    }
}
