//! `Watch`: what the PostgreSQL server did during a row besides serving it —
//! checkpoints begun and the time checkpoints spent syncing their files
//! (the `fsync`s that slow every commit on the same disk), and the
//! autovacuum workers seen (database and what they ran, sampled every
//! [`WATCH_EVERY`]) — so that a slow row can be told apart from the
//! server's own maintenance.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::PgPool;

/// How often a [`Watch`] looks at the server's activity.
const WATCH_EVERY: Duration = Duration::from_millis(200);
/// Checkpoints begun so far (timed and requested), and the ms their sync phases took.
const CHECKPOINTS: &str =
    "SELECT checkpoints_timed + checkpoints_req, checkpoint_sync_time::float8 FROM pg_stat_bgwriter";
/// The autovacuum workers at work now: database and what they run.
const AUTOVACUUM: &str = "SELECT coalesce(datname, '?') || ': ' || left(coalesce(query, ''), 80) \
     FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'";

/// Watches the server from [`Watch::start`] to [`Watch::stop`].
pub struct Watch {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<BTreeMap<String, usize>>>,
    pool: PgPool,
    checkpoints: (i64, f64),
}

impl Watch {
    /// Starts watching the server `pool` connects to.
    pub async fn start(pool: PgPool) -> anyhow::Result<Watch> {
        let checkpoints: (i64, f64) = sqlx::query_as(CHECKPOINTS).fetch_one(&pool).await?;
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let sampling = pool.clone();
        let task = tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            loop {
                for (what,) in sqlx::query_as::<_, (String,)>(AUTOVACUUM).fetch_all(&sampling).await? {
                    *seen.entry(what).or_insert(0) += 1;
                }
                tokio::select! {
                    _ = &mut stopped => return Ok(seen),
                    () = tokio::time::sleep(WATCH_EVERY) => {}
                }
            }
        });
        Ok(Watch { stop, task, pool, checkpoints })
    }

    /// Stops watching; says what was seen.
    pub async fn stop(self) -> anyhow::Result<String> {
        let _ = self.stop.send(());
        let seen = self.task.await??;
        let (begun, synced): (i64, f64) = sqlx::query_as(CHECKPOINTS).fetch_one(&self.pool).await?;
        let vacuums: Vec<String> = seen.iter().map(|(what, n)| format!("{what} ({n} samples)")).collect();
        Ok(format!(
            "{} checkpoint(s) begun, {:.0} ms of checkpoint sync ended; autovacuum seen: {}",
            begun - self.checkpoints.0,
            synced - self.checkpoints.1,
            if vacuums.is_empty() { "none".to_owned() } else { vacuums.join("; ") }
        ))
    }
}
