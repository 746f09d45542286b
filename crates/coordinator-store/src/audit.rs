//! The audit journal (SPEC §4): appending chained entries inside the
//! transaction that writes what they record, reading them back page by page,
//! and chaining entries an older schema wrote.
//!
//! The chain itself (canonical encoding, hash, verification) is
//! `coordinator_core::audit`; this module only keeps it in rows. Appending
//! locks the one-row `audit_head` (`SELECT … FOR UPDATE` on PostgreSQL; a
//! SQLite writer holds the database lock anyway), takes the next positions
//! from it, inserts the entries with their hashes and moves the head. Callers
//! append last, right before commit, so the lock — which serialises every
//! audit append across processes — is held only for those few statements and
//! the commit. Positions therefore follow commit order, which the
//! auto-increment `seq` does not (two transactions may take ids in one order
//! and commit in the other).

use std::borrow::Cow;

use coordinator_core::audit::{Content, Entry, Head};

use crate::db::{Arg, Dialect, Row, Tx};
use crate::{Store, StoreError};

const HEAD_SQLITE: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1";
const HEAD_PG: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1 FOR UPDATE";
const HEAD_READ: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1";
const APPEND: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, position, prev_hash, hash) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const MOVE_HEAD: &str = "UPDATE audit_head SET position = $1, hash = $2 WHERE singleton = 1";
const PAGE: &str = "SELECT position, run_id, at, kind, step, actor, detail, prev_hash, hash FROM audit \
     WHERE position > $1 AND position <= $2 AND ($3 IS NULL OR run_id = $3) ORDER BY position LIMIT $4";
const UNCHAINED: &str = "SELECT seq, run_id, at, kind, step, actor, detail FROM audit WHERE hash IS NULL ORDER BY seq";
const CHAIN: &str = "UPDATE audit SET position = $1, prev_hash = $2, hash = $3 WHERE seq = $4";

/// One entry to append, before it is chained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// The kind's spelling.
    pub kind: &'static str,
    /// The step.
    pub step: Option<&'a str>,
    /// The description (never a protected payload).
    pub detail: Cow<'a, str>,
}

/// A page of the journal (`Store::audit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    /// The entries, by position, none beyond `head`.
    pub entries: Vec<Entry>,
    /// The journal's head when the page was read.
    pub head: Head,
    /// The position to read on from, when the page is full.
    pub next: Option<i64>,
}

/// Appends `lines` to the chain inside `tx`, recorded for `run_id` (`None`:
/// the deployment) at `at`, caused by `actor` (`None`: the coordinator).
/// Call it last before commit: it locks the journal's head until then.
pub(crate) async fn append(
    tx: &mut Tx,
    run_id: Option<&str>,
    at: i64,
    actor: Option<&str>,
    lines: &[Line<'_>],
) -> Result<(), StoreError> {
    if lines.is_empty() {
        return Ok(());
    }
    let lock = match tx.dialect() {
        Dialect::Sqlite => HEAD_SQLITE,
        Dialect::Pg => HEAD_PG,
    };
    let mut head = read_head(tx, lock).await?;
    for line in lines {
        let content = Content { run_id, at, kind: line.kind, step: line.step, actor, detail: &line.detail };
        let entry = Entry::chained(&head, &content);
        let args: Vec<Arg> = vec![
            run_id.into(),
            at.into(),
            line.kind.into(),
            line.step.into(),
            entry.detail.as_str().into(),
            actor.into(),
            entry.position.into(),
            entry.prev_hash.as_str().into(),
            entry.hash.as_str().into(),
        ];
        tx.execute(APPEND, args).await?;
        head = entry.head();
    }
    tx.execute(MOVE_HEAD, vec![head.position.into(), head.hash.into()]).await?;
    Ok(())
}

async fn read_head(tx: &mut Tx, sql: &'static str) -> Result<Head, StoreError> {
    match tx.fetch_optional(sql, Vec::new()).await? {
        Some(row) => Ok(Head { position: row.get(0)?, hash: row.get(1)? }),
        None => Err(StoreError::Corrupt("the audit journal has no head row (audit_head)".into())),
    }
}

/// Chains the entries an older schema wrote (no hash yet), in the order they
/// were written, after the current head. Idempotent; run by `Store::migrate`.
pub(crate) async fn chain_unchained(store: &Store) -> Result<(), StoreError> {
    let mut tx = store.pool.begin().await?;
    let lock = match tx.dialect() {
        Dialect::Sqlite => HEAD_SQLITE,
        Dialect::Pg => HEAD_PG,
    };
    let mut head = read_head(&mut tx, lock).await?;
    let rows = tx.fetch_all(UNCHAINED, Vec::new()).await?;
    if rows.is_empty() {
        return Ok(());
    }
    for row in &rows {
        let (seq, run_id, at, kind, step, actor, detail): (
            i64,
            Option<String>,
            i64,
            String,
            Option<String>,
            Option<String>,
            String,
        ) = (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?);
        let content = Content {
            run_id: run_id.as_deref(),
            at,
            kind: &kind,
            step: step.as_deref(),
            actor: actor.as_deref(),
            detail: &detail,
        };
        let entry = Entry::chained(&head, &content);
        let args: Vec<Arg> =
            vec![entry.position.into(), entry.prev_hash.as_str().into(), entry.hash.as_str().into(), seq.into()];
        tx.execute(CHAIN, args).await?;
        head = entry.head();
    }
    tx.execute(MOVE_HEAD, vec![head.position.into(), head.hash.into()]).await?;
    tx.commit().await
}

fn entry(row: &Row) -> Result<Entry, StoreError> {
    Ok(Entry {
        position: row.get(0)?,
        run_id: row.get(1)?,
        at: row.get(2)?,
        kind: row.get(3)?,
        step: row.get(4)?,
        actor: row.get(5)?,
        detail: row.get(6)?,
        // A row without a hash was not chained: it shows as tampered.
        prev_hash: row.get::<Option<String>>(7)?.unwrap_or_default(),
        hash: row.get::<Option<String>>(8)?.unwrap_or_default(),
    })
}

impl Store {
    /// Up to `limit` journal entries after position `after`, by position,
    /// only of `run_id` when given (deployment-level entries have none), and
    /// never beyond the head read first — so a reader paging on to the end
    /// reaches exactly the head it is given, even while entries are appended.
    pub async fn audit(&self, run_id: Option<&str>, after: i64, limit: u32) -> Result<AuditPage, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let head = read_head(&mut tx, HEAD_READ).await?;
        let args: Vec<Arg> = vec![after.into(), head.position.into(), run_id.into(), i64::from(limit).into()];
        let entries = tx.fetch_all(PAGE, args).await?.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
        let full = limit > 0 && entries.len() >= usize::try_from(limit).unwrap_or(usize::MAX);
        let next = if full { entries.last().map(|e| e.position) } else { None };
        Ok(AuditPage { entries, head, next })
    }
}
