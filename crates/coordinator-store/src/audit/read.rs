//! Reading the journal back, page by page (`Store::audit`): rows exploded
//! into entries (`rows`), each given its predecessor's hash where its row
//! does not store it (`link`).

use std::ops::RangeInclusive;

use coordinator_core::audit::{Entry, Head};

use super::rows::{self, GROUP_SPAN};
use super::{HEAD_READ, read_head};
use crate::db::{Arg, Tx};
use crate::{Store, StoreError};

/// Rows starting in `($1, $2]`, of run `$3` when given: `$1` is
/// [`GROUP_SPAN`] before the page's start, so the row holding its first
/// entry is among them.
const PAGE: &str = "SELECT position, run_id, at, kind, step, actor, detail, prev_hash, hash, more FROM audit \
     WHERE position > $1 AND position <= $2 AND ($3 IS NULL OR run_id = $3) ORDER BY position LIMIT $4";
/// The row holding the sealed entry at `$1` (it starts after `$2`, [`GROUP_SPAN`] before).
const ROW_AT: &str = "SELECT position, hash, more FROM audit WHERE position <= $1 AND position > $2 \
     AND position IS NOT NULL ORDER BY position DESC LIMIT 1";

/// A page of the journal (`Store::audit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    /// The entries, by position, none beyond `head`.
    pub entries: Vec<Entry>,
    /// The journal's head when the page was read.
    pub head: Head,
    /// The position to read on from, when the page is full.
    pub next: Option<i64>,
    /// Where the journal starts after a retention cut (the last entry the cut
    /// removed; verification starts after it), `None` when it starts at 1.
    pub checkpoint: Option<Head>,
}

/// The hash of the sealed entry at `position`, empty when no row holds it.
async fn hash_at(tx: &mut Tx, position: i64) -> Result<String, StoreError> {
    let args: Vec<Arg> = vec![position.into(), position.saturating_sub(GROUP_SPAN).into()];
    Ok(match tx.fetch_optional(ROW_AT, args).await? {
        Some(row) => {
            let more: Option<String> = row.get(2)?;
            rows::hash_in_row(row.get(0)?, row.get(1)?, more.as_deref(), position).unwrap_or_default()
        }
        None => String::new(),
    })
}

/// The entries of `read` (in position order) within `range`, at most
/// `wanted`, each whose row has no `prev_hash` given the hash of its
/// predecessor, the entry at the position before: the entry read before it
/// when that is the one (kept or not), else the genesis (position 1), the
/// retention `checkpoint` (the last entry the cut removed), or the entry the
/// journal holds at that position. None leaves it empty, so verification
/// reports the entry as tampered with (a deleted predecessor is a gap either way).
async fn link(
    tx: &mut Tx,
    read: Vec<(Entry, bool)>,
    range: RangeInclusive<i64>,
    wanted: usize,
    checkpoint: Option<&Head>,
) -> Result<Vec<Entry>, StoreError> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut before_it: Option<(i64, String)> = None;
    for (mut entry, stored) in read {
        if entries.len() >= wanted {
            break;
        }
        let previous = before_it.replace((entry.position, entry.hash.clone()));
        if !range.contains(&entry.position) {
            continue;
        }
        if !stored {
            let before = entry.position.saturating_sub(1);
            entry.prev_hash = match previous {
                Some((position, hash)) if position == before => hash,
                _ if before == 0 => Head::genesis().hash,
                _ if checkpoint.is_some_and(|c| c.position == before) => {
                    checkpoint.map(|c| c.hash.clone()).unwrap_or_default()
                }
                _ => hash_at(tx, before).await?,
            };
        }
        entries.push(entry);
    }
    Ok(entries)
}

impl Store {
    /// Up to `limit` journal entries after position `after`, by position,
    /// only of `run_id` when given (deployment-level entries have none), and
    /// never beyond the head read first — so a reader paging on to the end
    /// reaches exactly the head it is given, even while entries are sealed.
    /// Only sealed entries have positions: pending ones are not shown (seal
    /// first with [`Store::seal_audit`] to read every committed entry). A pure read.
    pub async fn audit(&self, run_id: Option<&str>, after: i64, limit: u32) -> Result<AuditPage, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let head = read_head(&mut tx, HEAD_READ).await?;
        let checkpoint = crate::retention::checkpoint(&mut tx).await?;
        // The whole journal: positions have no gaps, so the page is the
        // range after `from` (the checkpoint when reading from before it),
        // and the next page starts where this range ends, however many rows
        // it held. One run's entries: up to `limit` of them before the head.
        let from = after.max(checkpoint.as_ref().map_or(0, |c| c.position));
        let upto = match run_id {
            None => head.position.min(from.saturating_add(i64::from(limit))),
            Some(_) => head.position,
        };
        let wanted = usize::try_from(limit).unwrap_or(usize::MAX);
        // Up to GROUP_SPAN rows start before `from`; every other row holds an entry of the page.
        let row_limit = i64::from(limit) + GROUP_SPAN;
        let args: Vec<Arg> =
            vec![(from - GROUP_SPAN).into(), upto.into(), Arg::MaybeId(run_id.map(str::to_owned)), row_limit.into()];
        let mut read = Vec::new();
        for row in tx.fetch_all(PAGE, args).await? {
            read.extend(rows::entries(&row)?);
        }
        let entries = link(&mut tx, read, from.saturating_add(1)..=upto, wanted, checkpoint.as_ref()).await?;
        let next = match run_id {
            _ if limit == 0 => None,
            None => (upto < head.position).then_some(upto),
            Some(_) => {
                let full = entries.len() >= wanted;
                if full { entries.last().map(|e| e.position) } else { None }
            }
        };
        Ok(AuditPage { entries, head, next, checkpoint })
    }
}
