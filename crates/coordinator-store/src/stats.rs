//! Reads for monitoring, at scrape time (`GET /metrics`): how many runs are in
//! each state, how long the oldest claimable work and timer have been due
//! (`queue_heads`), and how many runs wait for an operator, by workflow and
//! reason (`attention_by_reason`). Each is one statement on a pooled
//! connection outside any transaction; none takes SQLite's writer gate. It
//! reads, never decides.

use coordinator_core::model::run::RunState;

use crate::db::Dialect;
use crate::types::AttentionReason;
use crate::{Store, StoreError};

const RUNS_BY_STATE: &str = "SELECT state, COUNT(*) FROM runs GROUP BY state";

/// `$1` now. Work: the first unleased due row without a lane in
/// `outbox_unleased` order (the first of a run without a hold; receipt
/// lookups count on held runs, as claims take them), the first of each lane
/// in `outbox_lanes` order (the lanes found by skipping through that index,
/// one probe per lane: `lanes`), and the smallest `not_before` of rows whose
/// lease ran out, over the expired range of `outbox_leased` (normally empty,
/// as the next claims take those rows; at most what dead workers held). That
/// part looks up each row's run (no join that could read all of `runs`) and
/// tests `not_before` inside the `MIN` (so SQLite does not read
/// `outbox_claim_order` across every due row instead). Timers: the first
/// claimable due timer in `timers_claim_order` order, as the timer claim
/// reads it. As with `next_due_sql!` in `claims`, 100 000 waiting rows cost
/// what ten do; rows of held runs at the head of a queue are stepped over,
/// and so are rows of paused connections (`connections`), which are not claimable.
const QUEUE_HEADS: &str = concat!(
    "WITH RECURSIVE lanes (lane) AS (\
     SELECT (SELECT o.lane FROM outbox o WHERE o.lane IS NOT NULL AND o.lease_until IS NULL ORDER BY o.lane LIMIT 1) \
     UNION ALL SELECT (SELECT o.lane FROM outbox o WHERE o.lane > l.lane AND o.lane IS NOT NULL \
       AND o.lease_until IS NULL ORDER BY o.lane LIMIT 1) FROM lanes l WHERE l.lane IS NOT NULL) \
   SELECT (SELECT MIN(due) FROM (\
     SELECT (SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id \
       WHERE o.lease_until IS NULL AND o.lane IS NULL AND o.not_before <= $1 AND (NOT r.held OR o.kind = 'receipt') \
       AND ",
    crate::connections::not_blocked!("o.conn", "$1"),
    " ORDER BY o.not_before LIMIT 1) AS due \
     UNION ALL SELECT (SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id \
       WHERE o.lane = l.lane AND o.lane IS NOT NULL AND o.lease_until IS NULL AND o.not_before <= $1 \
       AND (NOT r.held OR o.kind = 'receipt') AND ",
    crate::connections::not_paused!("o.lane"),
    " ORDER BY o.not_before LIMIT 1) FROM lanes l WHERE l.lane IS NOT NULL \
     UNION ALL SELECT (SELECT MIN(CASE WHEN o.not_before <= $1 THEN o.not_before END) FROM outbox o \
       WHERE o.lease_until < $1 \
       AND (o.kind = 'receipt' OR NOT (SELECT r.held FROM runs r WHERE r.id = o.run_id)) AND ",
    crate::connections::not_blocked!("o.conn", "$1"),
    ")) AS work), \
   (SELECT t.due_at FROM timers t JOIN runs r ON r.id = t.run_id \
     WHERE t.due_at <= $1 AND (t.lease_until IS NULL OR t.lease_until < $1) AND NOT r.held \
     ORDER BY t.due_at LIMIT 1)"
);

/// Runs in attention by workflow and hold, from the partial index
/// `runs_attention` (migration 0010, widened by 0011), whose predicate is this literal: a bound
/// state would not match it. `'attention'` is `RunState::Attention.as_str()`
/// (a test below keeps them equal).
const ATTENTION: &str = "SELECT workflow, held, COUNT(*) FROM runs WHERE state = 'attention' GROUP BY workflow, held";

/// The due instants at the head of the queues (`Store::queue_heads`), for the
/// age of the oldest waiting work: `None` when nothing is due.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueHeads {
    /// The smallest `not_before` of due, claimable outbox rows (not leased, or
    /// their lease ran out; in-process or waiting in a remote connection's
    /// lane) of runs without a restore hold (receipt lookups whatever the
    /// hold), ms.
    pub oldest_due_work: Option<i64>,
    /// The smallest `due_at` of due, claimable timers of runs without a restore hold, ms.
    pub oldest_due_timer: Option<i64>,
}

/// How many runs of a workflow are in attention for a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionCount {
    /// The workflow.
    pub workflow: String,
    /// Why they wait.
    pub reason: AttentionReason,
    /// How many runs.
    pub runs: i64,
}

impl Store {
    /// How many runs are in each state (every state, zero included), in `RunState::ALL` order.
    pub async fn runs_by_state(&self) -> Result<Vec<(RunState, i64)>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut counts: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
        for row in tx.fetch_all(RUNS_BY_STATE, Vec::new()).await? {
            let state: String = row.get(0)?;
            let n: i64 = row.get(1)?;
            let Some(slot) = counts.iter_mut().find(|(s, _)| s.as_str() == state) else {
                return Err(StoreError::Corrupt(format!("run state `{state}`")));
            };
            slot.1 = n;
        }
        Ok(counts)
    }

    /// The due instants at the head of the outbox and the timers at `now`
    /// (see [`QueueHeads`]), in one statement that stops at the first
    /// claimable row of each queue.
    pub async fn queue_heads(&self, now: i64) -> Result<QueueHeads, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        match tx.fetch_optional(QUEUE_HEADS, vec![now.into()]).await? {
            Some(row) => Ok(QueueHeads { oldest_due_work: row.get(0)?, oldest_due_timer: row.get(1)? }),
            None => Err(StoreError::Corrupt("the queue heads read no row".into())),
        }
    }

    /// How many runs are in attention, by workflow and reason: ordered by
    /// workflow, then `UnknownEffect` before `RestoreHold`; a pair with no
    /// run is left out. Reads only the runs in attention (`runs_attention`).
    pub async fn attention_by_reason(&self) -> Result<Vec<AttentionCount>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut counts = Vec::new();
        for row in tx.fetch_all(ATTENTION, Vec::new()).await? {
            let held: bool = row.get(1)?;
            counts.push(AttentionCount {
                workflow: row.get(0)?,
                reason: AttentionReason::of_held(held),
                runs: row.get(2)?,
            });
        }
        // In Rust, not SQL: the same (byte) order whatever the database's collation.
        counts.sort_by(|a, b| (&a.workflow, a.reason).cmp(&(&b.workflow, b.reason)));
        Ok(counts)
    }
}

/// The sealed parts of the snapshots of runs not finished (the partial index
/// `runs_state_listing` on PostgreSQL): every head and every base
/// (`snapshot_frame`), as `s`. An empty head (nothing since the base) names no key.
macro_rules! sealed_parts {
    () => {
        "(SELECT snapshot AS s FROM runs WHERE state <> 'finished' \
         UNION ALL SELECT snapshot_base FROM runs WHERE state <> 'finished' AND snapshot_base IS NOT NULL) AS v \
         WHERE length(s) > 2"
    };
}

/// The key ids that the sealed snapshots of runs not finished name, read from
/// the header `coordinator_seal` writes (a version byte, the key id's length
/// in one byte, the id).
const SEALED_KEY_IDS_PG: &str =
    concat!("SELECT DISTINCT substring(s FROM 3 FOR get_byte(s, 1)) FROM ", sealed_parts!());
/// [`SEALED_KEY_IDS_PG`] for SQLite, which has no `get_byte`: the length byte
/// read from its two hex digits.
const SEALED_KEY_IDS_SQLITE: &str = concat!(
    "SELECT DISTINCT substr(s, 3, \
     (instr('0123456789ABCDEF', substr(hex(substr(s, 2, 1)), 1, 1)) - 1) * 16 \
     + instr('0123456789ABCDEF', substr(hex(substr(s, 2, 1)), 2, 1)) - 1) FROM ",
    sealed_parts!()
);

impl Store {
    /// The payload key ids named by the sealed snapshots of the runs not
    /// finished (the runs the service will open to go on with them), sorted.
    /// `coordinator serve` refuses to start when one is not configured.
    pub async fn sealed_key_ids(&self) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let sql = match tx.dialect() {
            Dialect::Pg => SEALED_KEY_IDS_PG,
            Dialect::Sqlite => SEALED_KEY_IDS_SQLITE,
        };
        let mut ids = Vec::new();
        for row in tx.fetch_all(sql, Vec::new()).await? {
            let id: Vec<u8> = row.get(0)?;
            ids.push(String::from_utf8_lossy(&id).into_owned());
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attention_literal_is_the_attention_state_and_the_index_predicate() {
        let predicate = format!("WHERE state = '{}'", RunState::Attention.as_str());
        assert!(ATTENTION.contains(&predicate), "{ATTENTION}");
        assert!(crate::inbox::GROUPS.contains(&predicate), "{}", crate::inbox::GROUPS);
        for migration in [
            include_str!("../migrations/pg/0010_trace_parent.sql"),
            include_str!("../migrations/sqlite/0010_trace_parent.sql"),
        ] {
            assert!(
                migration.contains(&format!("runs_attention ON runs (workflow, held) {predicate};")),
                "{migration}"
            );
        }
        // Migration 0011 rebuilds it wider, with the same predicate.
        for migration in
            [include_str!("../migrations/pg/0011_listing.sql"), include_str!("../migrations/sqlite/0011_listing.sql")]
        {
            let index =
                format!("runs_attention ON runs (workflow, held, attention_since, id, attention_step) {predicate};");
            assert!(migration.contains(&index), "{migration}");
        }
    }

    #[test]
    fn attention_reasons_are_spelled_as_metrics_labels() {
        let labels = [AttentionReason::UnknownEffect, AttentionReason::RestoreHold].map(AttentionReason::as_str);
        assert_eq!(labels, ["unknown-effect", "restore-hold"]);
    }
}
