//! Durable batches (docs/api.md#batches): an operator's command over every
//! run a filter matched when the batch started, kept in `batches` and
//! `batch_runs` (migration 0025) and worked through by whichever process
//! holds the batch's lease.
//!
//! - Starting one ([`Store::start_batch`]) writes the batch and the runs its
//!   filter matches (the listing's own filter, `listing::push_filter`) in one
//!   transaction: `matched` never changes afterwards.
//! - A run is acted on in its decision's own transaction
//!   ([`Store::apply_for_batch`]): its `batch_runs` row is marked `done` there,
//!   only while its outcome is empty, so a run is acted on at most once
//!   whatever crashes, and a refusal is recorded without a decision
//!   ([`Store::batch_refused`]). Progress is counted from those rows, so it
//!   never goes backwards.
//! - A lease ([`Store::claim_batch`], renewed by [`Store::renew_batch`]) says
//!   which process works a batch; another takes it over once it runs out.

use std::collections::BTreeMap;

use crate::db::{Arg, Dialect, Query, Tx, Writer};
use crate::listing::{Revision, push_filter};
use crate::types::{Decision, ListFilter};
use crate::{Store, StoreError};

/// The most runs one batch may match.
pub const MOST_BATCH_RUNS: u64 = 100_000;

const INSERT_BATCH: &str = "INSERT INTO batches (id, action, filter, reason, created_by, created_at, state, matched) \
     VALUES ($1, $2, $3, $4, $5, $6, 'running', 0)";
const SET_MATCHED: &str = "UPDATE batches SET matched = $2 WHERE id = $1";
/// The columns `view` reads, in its order.
macro_rules! select_batches {
    () => {
        "SELECT id, action, filter, reason, created_by, created_at, state, matched, ended_at, cancelled_by, \
         lease_owner FROM batches"
    };
}
const ONE: &str = concat!(select_batches!(), " WHERE id = $1");
const NEWEST: &str = concat!(select_batches!(), " ORDER BY created_at DESC, id DESC LIMIT $1");
const COUNTS: &str = "SELECT outcome, code, count(*) FROM batch_runs WHERE batch_id = $1 AND outcome IS NOT NULL \
     GROUP BY outcome, code";
/// The oldest running batch whose lease is free, ran out, or is `$1`'s own;
/// leased to `$1` until `$2` (`$3` now).
const CLAIM_PG: &str = "UPDATE batches SET lease_owner = $1, lease_until = $2 WHERE id = (SELECT id FROM batches \
     WHERE state = 'running' AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < $3) \
     ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id";
const CLAIM_SQLITE: &str = "UPDATE batches SET lease_owner = $1, lease_until = $2 WHERE id = (SELECT id FROM batches \
     WHERE state = 'running' AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < $3) \
     ORDER BY created_at LIMIT 1) RETURNING id";
const RENEW: &str = "UPDATE batches SET lease_until = $3 WHERE id = $1 AND lease_owner = $2 AND state = 'running' \
     RETURNING id";
const RELEASE: &str = "UPDATE batches SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1";
const PENDING: &str = "SELECT run_id FROM batch_runs WHERE batch_id = $1 AND outcome IS NULL ORDER BY run_id LIMIT $2";
const FINISH: &str = "UPDATE batches SET state = 'done', ended_at = $3, lease_owner = NULL, lease_until = NULL \
     WHERE id = $1 AND lease_owner = $2 AND state = 'running' \
     AND NOT EXISTS (SELECT 1 FROM batch_runs WHERE batch_id = $1 AND outcome IS NULL)";
const CANCEL: &str = "UPDATE batches SET state = 'cancelled', ended_at = $2, cancelled_by = $3, lease_owner = NULL, \
     lease_until = NULL WHERE id = $1 AND state = 'running' RETURNING id";
/// Runs of batch `$1` after run `$2`, in run id order, `$3` at most; `$4`
/// (`done`, `refused` or `pending`) or NULL for every outcome.
const RUNS: &str = "SELECT run_id, outcome, code, at FROM batch_runs WHERE batch_id = $1 AND run_id > $2 \
     AND ($4 IS NULL OR ($4 = 'pending' AND outcome IS NULL) OR outcome = $4) ORDER BY run_id LIMIT $3";
/// Marks run `$2` of batch `$1` with outcome `$3` (`$4` code, `$5` now) while it has none.
const MARK: &str = "UPDATE batch_runs SET outcome = $3, code = $4, at = $5 \
     WHERE batch_id = $1 AND run_id = $2 AND outcome IS NULL";

/// A batch being started.
#[derive(Debug, Clone)]
pub struct NewBatch<'a> {
    /// Its id.
    pub id: &'a str,
    /// `reconcile`, `retry-same` or `cancel`.
    pub action: &'a str,
    /// The filter as the caller gave it (JSON text, shown back).
    pub filter_json: &'a str,
    /// The runs it applies to.
    pub filter: &'a ListFilter,
    /// The operator's reason.
    pub reason: &'a str,
    /// Who started it.
    pub by: &'a str,
    /// When, ms.
    pub at: i64,
}

/// A batch as stored, with its progress counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchView {
    /// Its id.
    pub id: String,
    /// The command.
    pub action: String,
    /// The filter as given (JSON text).
    pub filter: String,
    /// The operator's reason.
    pub reason: String,
    /// Who started it.
    pub created_by: String,
    /// When, ms.
    pub created_at: i64,
    /// `running`, `done` or `cancelled`.
    pub state: String,
    /// The runs the filter matched when it started.
    pub matched: u64,
    /// Runs the command was applied to.
    pub done: u64,
    /// Runs the rules refused, by code.
    pub refused: BTreeMap<String, u64>,
    /// When it ended (done or cancelled), ms.
    pub ended_at: Option<i64>,
    /// Who cancelled it.
    pub cancelled_by: Option<String>,
    /// The process working it now, if any.
    pub worked_by: Option<String>,
}

impl BatchView {
    /// Runs not acted on yet.
    pub fn remaining(&self) -> u64 {
        self.matched.saturating_sub(self.done + self.refused.values().sum::<u64>())
    }
}

/// One run of a batch and what the batch did to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRun {
    /// The run.
    pub run_id: String,
    /// `done`, `refused`, or `None` while it waits for its turn.
    pub outcome: Option<String>,
    /// The rule's code of a refusal.
    pub code: Option<String>,
    /// When it was acted on, ms.
    pub at: Option<i64>,
}

/// How a start went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// Started over this many runs.
    Matched(u64),
    /// More runs than [`MOST_BATCH_RUNS`] match: nothing was written.
    TooMany,
}

impl Store {
    /// Starts a batch over the runs `new.filter` matches now (see the module doc).
    pub async fn start_batch(&self, new: &NewBatch<'_>) -> Result<Started, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Request).await?;
        let args: Vec<Arg> = vec![
            new.id.into(),
            new.action.into(),
            new.filter_json.into(),
            new.reason.into(),
            new.by.into(),
            new.at.into(),
        ];
        tx.execute(INSERT_BATCH, args).await?;
        let mut q = Query::new("INSERT INTO batch_runs (batch_id, run_id) SELECT ");
        q.bind(new.id).push(", id FROM runs WHERE TRUE");
        let matched = if push_filter(&mut q, new.filter, Revision::Equal).is_some() {
            q.push(" ORDER BY admitted_at, id LIMIT ").bind(i64::try_from(MOST_BATCH_RUNS + 1).unwrap_or(i64::MAX));
            tx.execute_query(q).await?
        } else {
            0
        };
        if matched > MOST_BATCH_RUNS {
            tx.abandon().await?;
            return Ok(Started::TooMany);
        }
        tx.execute(SET_MATCHED, vec![new.id.into(), i64::try_from(matched).unwrap_or(i64::MAX).into()]).await?;
        tx.commit().await?;
        Ok(Started::Matched(matched))
    }

    /// How many runs `filter` matches now, counted up to `most + 1`.
    pub async fn count_matching(&self, filter: &ListFilter, most: u64) -> Result<u64, StoreError> {
        let mut q = Query::new("SELECT count(*) FROM (SELECT 1 FROM runs WHERE TRUE");
        if push_filter(&mut q, filter, Revision::Equal).is_none() {
            return Ok(0);
        }
        q.push(" LIMIT ").bind(i64::try_from(most.saturating_add(1)).unwrap_or(i64::MAX)).push(") AS matching");
        let rows = self.pool.begin_read().await?.fetch_query(q).await?;
        let counted: i64 = rows.first().map(|r| r.get(0)).transpose()?.unwrap_or(0);
        Ok(u64::try_from(counted).unwrap_or(0))
    }

    /// A batch with its progress.
    pub async fn batch(&self, id: &str) -> Result<Option<BatchView>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let Some(row) = tx.fetch_optional(ONE, vec![id.into()]).await? else { return Ok(None) };
        Ok(Some(view(&mut tx, &row).await?))
    }

    /// The newest `limit` batches with their progress.
    pub async fn batches(&self, limit: u32) -> Result<Vec<BatchView>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(NEWEST, vec![i64::from(limit).into()]).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(view(&mut tx, row).await?);
        }
        Ok(out)
    }

    /// Leases the oldest running batch no live process works to `owner`
    /// until `until`; its id.
    pub async fn claim_batch(&self, owner: &str, now: i64, until: i64) -> Result<Option<String>, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let sql = match tx.dialect() {
            Dialect::Pg => CLAIM_PG,
            Dialect::Sqlite => CLAIM_SQLITE,
        };
        let row = tx.fetch_optional(sql, vec![owner.into(), until.into(), now.into()]).await?;
        let id = row.map(|r| r.get::<String>(0)).transpose()?;
        tx.commit().await?;
        Ok(id)
    }

    /// Extends `owner`'s lease on batch `id` to `until`; `false` when the
    /// lease was lost or the batch no longer runs (cancelled): stop working it.
    pub async fn renew_batch(&self, id: &str, owner: &str, until: i64) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let renewed = tx.fetch_optional(RENEW, vec![id.into(), owner.into(), until.into()]).await?.is_some();
        tx.commit().await?;
        Ok(renewed)
    }

    /// Gives back every batch lease `owner` holds (a routine stop).
    pub async fn release_batches(&self, owner: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        tx.execute(RELEASE, vec![owner.into()]).await?;
        tx.commit().await
    }

    /// Up to `limit` runs of batch `id` not acted on yet.
    pub async fn batch_pending(&self, id: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(PENDING, vec![id.into(), i64::from(limit).into()]).await?;
        rows.iter().map(|r| r.get(0)).collect()
    }

    /// Up to `limit` runs of batch `id` after run `after` (in run id order)
    /// with their outcome; only those with `outcome` (`done`, `refused`,
    /// `pending`) when given.
    pub async fn batch_runs(
        &self,
        id: &str,
        outcome: Option<&str>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<BatchRun>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        // The nil id sorts before every run id (both stores compare them as canonical text or UUIDs).
        let after = Arg::id(after.unwrap_or("00000000-0000-0000-0000-000000000000"));
        let rows = tx.fetch_all(RUNS, vec![id.into(), after, i64::from(limit).into(), outcome.into()]).await?;
        rows.iter()
            .map(|r| Ok(BatchRun { run_id: r.get(0)?, outcome: r.get(1)?, code: r.get(2)?, at: r.get(3)? }))
            .collect()
    }

    /// Ends batch `id` as done when `owner` holds it and no run is left.
    pub async fn finish_batch(&self, id: &str, owner: &str, now: i64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        tx.execute(FINISH, vec![id.into(), owner.into(), now.into()]).await?;
        tx.commit().await
    }

    /// Cancels batch `id` (by `by`): runs not acted on yet stay so. `false`
    /// when it was not running.
    pub async fn cancel_batch(&self, id: &str, by: &str, now: i64) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Request).await?;
        let cancelled = tx.fetch_optional(CANCEL, vec![id.into(), now.into(), by.into()]).await?.is_some();
        tx.commit().await?;
        Ok(cancelled)
    }

    /// Records that the rules refused batch `id`'s command on `run_id`
    /// (`code`), unless the run already has an outcome; whether it was recorded.
    pub async fn batch_refused(&self, id: &str, run_id: &str, code: &str, now: i64) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Request).await?;
        let marked = mark(&mut tx, id, run_id, "refused", Some(code), now).await?;
        tx.commit().await?;
        Ok(marked)
    }

    /// [`Store::apply_as`] for run `run_id` of batch `id`: in the same
    /// transaction its `batch_runs` row is marked `done`, only while it has
    /// no outcome; [`StoreError::Conflict`] (nothing written) when it has one.
    pub async fn apply_for_batch<E>(
        &self,
        id: &str,
        run_id: &str,
        at: i64,
        actor: &str,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut tx = self.pool.begin_for(Writer::Request).await?;
        let applied = async {
            if !mark(&mut tx, id, run_id, "done", None, at).await? {
                return Err(StoreError::Conflict { what: format!("run {run_id} of batch {id} was acted on before") });
            }
            crate::runs::apply_locked(&mut tx, run_id, at, None, None, Some(actor), decide).await
        }
        .await;
        tx.settle(applied).await
    }
}

async fn mark(
    tx: &mut Tx,
    id: &str,
    run_id: &str,
    outcome: &str,
    code: Option<&str>,
    at: i64,
) -> Result<bool, StoreError> {
    let args = vec![id.into(), Arg::id(run_id), outcome.into(), code.into(), at.into()];
    Ok(tx.execute(MARK, args).await? == 1)
}

async fn view(tx: &mut Tx, row: &crate::db::Row) -> Result<BatchView, StoreError> {
    let id: String = row.get(0)?;
    let (mut done, mut refused) = (0, BTreeMap::new());
    for counted in tx.fetch_all(COUNTS, vec![id.as_str().into()]).await? {
        let (outcome, code, n): (String, Option<String>, i64) = (counted.get(0)?, counted.get(1)?, counted.get(2)?);
        let n = u64::try_from(n).unwrap_or(0);
        match outcome.as_str() {
            "done" => done += n,
            _ => *refused.entry(code.unwrap_or_default()).or_insert(0) += n,
        }
    }
    let matched: i64 = row.get(7)?;
    Ok(BatchView {
        id,
        action: row.get(1)?,
        filter: row.get(2)?,
        reason: row.get(3)?,
        created_by: row.get(4)?,
        created_at: row.get(5)?,
        state: row.get(6)?,
        matched: u64::try_from(matched).unwrap_or(0),
        done,
        refused,
        ended_at: row.get(8)?,
        cancelled_by: row.get(9)?,
        worked_by: row.get(10)?,
    })
}
