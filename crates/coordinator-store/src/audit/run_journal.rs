//! One run's journal newest first, a page at a time, with the count of its
//! entries (`Store::run_journal`): what the console's run page shows. Only
//! sealed entries (with a position) are read; nothing is linked or verified
//! here (`Store::audit` is the chain's reader).

use coordinator_core::audit::Entry;

use super::rows;
use crate::db::{Arg, Dialect};
use crate::{Store, StoreError};

/// Up to `$3` rows of run `$1` starting before position `$2`, newest first.
/// Each row holds at least one entry before `$2`, so `$3` rows hold at least
/// `$3` such entries when there are that many.
const ROWS: &str = "SELECT position, run_id, at, kind, step, actor, detail, prev_hash, hash, more FROM audit \
     WHERE run_id = $1 AND position IS NOT NULL AND position < $2 ORDER BY position DESC LIMIT $3";
/// The sealed entries of run `$1` in rows starting at or after position
/// `$2`: each row's first, and each of its `more`.
const COUNT_PG: &str = "SELECT count(*) + coalesce(sum(json_array_length(more::json)), 0) FROM audit \
     WHERE run_id = $1 AND position IS NOT NULL AND position >= $2";
const COUNT_SQLITE: &str = "SELECT count(*) + coalesce(sum(json_array_length(more)), 0) FROM audit \
     WHERE run_id = $1 AND position IS NOT NULL AND position >= $2";

/// A page of one run's journal, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunJournal {
    /// The entries, newest (largest position) first.
    pub entries: Vec<Entry>,
    /// Every sealed entry of the run.
    pub total: u64,
    /// The run's entries newer than the page (at or after `before`).
    pub newer: u64,
    /// The `before` of the next (older) page, when there is one.
    pub older: Option<i64>,
}

impl Store {
    /// Up to `limit` sealed entries of `run_id` before position `before`
    /// (none: from the newest), newest first, with the run's count of entries.
    pub async fn run_journal(&self, run_id: &str, before: Option<i64>, limit: u32) -> Result<RunJournal, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let count = match tx.dialect() {
            Dialect::Pg => COUNT_PG,
            Dialect::Sqlite => COUNT_SQLITE,
        };
        let total = count_from(&mut tx, count, run_id, i64::MIN).await?;
        let before_or_end = before.unwrap_or(i64::MAX);
        let mut newer = match before {
            Some(b) => count_from(&mut tx, count, run_id, b).await?,
            None => 0,
        };
        let args: Vec<Arg> = vec![Arg::id(run_id), before_or_end.into(), (i64::from(limit) + 1).into()];
        let mut entries = Vec::new();
        for row in tx.fetch_all(ROWS, args).await? {
            for (entry, _) in rows::entries(&row)? {
                if entry.position < before_or_end {
                    entries.push(entry);
                } else {
                    // The later entries of the row that starts just before the page's end.
                    newer += 1;
                }
            }
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.position));
        let wanted = usize::try_from(limit).unwrap_or(usize::MAX);
        let older = if entries.len() > wanted {
            entries.truncate(wanted);
            entries.last().map(|e| e.position)
        } else {
            None
        };
        Ok(RunJournal { entries, total, newer, older })
    }
}

/// The entries of `run_id` in rows starting at or after `from` (`count` is the dialect's statement).
async fn count_from(tx: &mut crate::db::Tx, count: &'static str, run_id: &str, from: i64) -> Result<u64, StoreError> {
    let counted: i64 = match tx.fetch_optional(count, vec![Arg::id(run_id), from.into()]).await? {
        Some(row) => row.get(0)?,
        None => 0,
    };
    Ok(u64::try_from(counted).unwrap_or(0))
}
