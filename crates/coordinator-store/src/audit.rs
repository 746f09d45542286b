//! The audit journal (SPEC §4): writing entries inside the transaction that
//! writes what they record, sealing them into the hash chain shortly after,
//! and reading the chain back page by page.
//!
//! The chain itself (canonical encoding, hash, verification) is
//! `coordinator_core::audit`; this module only keeps it in rows.
//!
//! Writing and chaining are two steps, so that no commit waits for the chain.
//! [`append`] inserts a decision's entries as *pending* rows (no `position`,
//! `prev_hash` or `hash`), in the transaction that records what they describe:
//! an entry exists if and only if its decision committed. It takes no lock
//! beyond its own rows (on PostgreSQL, several lines are one `INSERT … SELECT
//! … FROM unnest(…)`), so commits of different runs and processes do not
//! serialise on the journal.
//!
//! [`seal`] (`Store::seal_audit`, run by the service's sealer every 100 ms,
//! by `GET /v1/audit` before it reads, and by `Store::migrate`) chains the
//! committed pending rows in `seq` order after the one-row `audit_head`, in
//! one transaction: lock the head (`SELECT … FOR UPDATE` on PostgreSQL;
//! SQLite's `BEGIN IMMEDIATE` holds the write lock), read the pending rows
//! *after* the lock, compute each entry (`Entry::chained`), write positions
//! and hashes (one `UPDATE … FROM unnest(…)` on PostgreSQL, one `UPDATE …
//! FROM json_each(…)` on SQLite), move the head,
//! commit. Positions therefore follow sealing order. A run's entries keep
//! their order: its transactions are serialised by the run's row lock, so a
//! later one's rows get larger `seq` values and commit later. Two sealers
//! serialise on the head's row lock; under READ COMMITTED the second reads the
//! pending rows with a snapshot taken after the first committed, so no row is
//! chained twice (and the `UPDATE … WHERE hash IS NULL` count is checked, so
//! if it ever were, the sealing would be rolled back instead).
//!
//! A batch of reports (`batch`, most of a running deployment's entries) does
//! not leave its entries pending, on either backend: [`append_chained`]
//! locks the head inside the batch's transaction, seals what is pending
//! first, and inserts the batch's entries already chained — one write per
//! entry instead of an insert and an update of the whole row (the sealing
//! `UPDATE` was the largest share of WAL per run, bench/RESULTS.md; on
//! SQLite it took the only write lock once more). Admissions and single
//! applies stay lock-free on the journal and pending, so they never wait for
//! a batch's commit.
//!
//! Until it is sealed an entry is not in the chain: [`Store::audit`] shows
//! positions only, and an edit made to a pending row before sealing is
//! chained as if it were the original — the window is the sealer's interval.
//! The partial index `audit_pending` (migration 0007) keeps finding pending
//! rows cheap however long the journal grows.

use std::borrow::Cow;

use coordinator_core::audit::{Content, Entry, Head};

use crate::db::{Arg, Dialect, Row, Tx, Writer};
use crate::{Store, StoreError};

const HEAD_SQLITE: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1";
const HEAD_PG: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1 FOR UPDATE";
const HEAD_READ: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1";
/// All lines in one statement: `$3` is a JSON array of `[run, kind, step,
/// detail]`, inserted in its order (so `seq` follows it).
const APPEND_SQLITE: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor) \
     SELECT json_extract(j.value, '$[0]'), $1, json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), \
     json_extract(j.value, '$[3]'), $2 FROM json_each($3) AS j ORDER BY j.key";
/// [`APPEND_SQLITE`] with each entry's position and hash, `[4]` and `[5]`
/// (`append_chained`; no `prev_hash`: readers [`link`] it).
const APPEND_CHAINED_SQLITE: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, position, hash) \
     SELECT json_extract(j.value, '$[0]'), $1, json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), \
     json_extract(j.value, '$[3]'), $2, json_extract(j.value, '$[4]'), json_extract(j.value, '$[5]') \
     FROM json_each($3) AS j ORDER BY j.key";
/// All lines in one statement; `ORDER BY` the lines' order, so `seq` (taken as
/// the sorted rows are inserted) follows it.
const APPEND_PG: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor) \
     SELECT u.run_id, $2::bigint, u.kind, u.step, u.detail, $6::text \
     FROM unnest($1::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(run_id, kind, step, detail, n) \
     ORDER BY u.n";
/// [`APPEND_PG`] with each entry's position and hash, `$7` and `$8`
/// (`append_chained`; no `prev_hash`: readers [`link`] it).
const APPEND_CHAINED_PG: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, position, hash) \
     SELECT u.run_id, $2::bigint, u.kind, u.step, u.detail, $6::text, u.position, u.hash \
     FROM unnest($1::text[], $3::text[], $4::text[], $5::text[], $7::bigint[], $8::text[]) \
     WITH ORDINALITY AS u(run_id, kind, step, detail, position, hash, n) ORDER BY u.n";
const MOVE_HEAD: &str = "UPDATE audit_head SET position = $1, hash = $2 WHERE singleton = 1";
const PAGE: &str = "SELECT position, run_id, at, kind, step, actor, detail, prev_hash, hash FROM audit \
     WHERE position > $1 AND position <= $2 AND ($3 IS NULL OR run_id = $3) ORDER BY position LIMIT $4";
/// The hash of the sealed entry at `$1` (the predecessor of an entry whose row has no `prev_hash`).
const HASH_AT: &str = "SELECT hash FROM audit WHERE position = $1 AND position IS NOT NULL";
/// Whether anything is pending, without a lock (the partial index `audit_pending`).
const ANY_PENDING: &str = "SELECT seq FROM audit WHERE hash IS NULL ORDER BY seq LIMIT 1";
const PENDING: &str =
    "SELECT seq, run_id, at, kind, step, actor, detail FROM audit WHERE hash IS NULL ORDER BY seq LIMIT $1";
/// All rows in one statement: `$1` is a JSON array of `[seq, position, hash]`
/// (one statement instead of one per entry: on SQLite each statement is a
/// trip to the connection's thread and back).
const SEAL_SQLITE: &str = "UPDATE audit SET position = json_extract(j.value, '$[1]'), \
     hash = json_extract(j.value, '$[2]') FROM json_each($1) AS j \
     WHERE audit.seq = json_extract(j.value, '$[0]') AND audit.hash IS NULL";
/// Each row is found by `seq` in the partial index `audit_pending` (migration
/// 0007); `at` picks its day partition (migration 0013).
const SEAL_PG: &str = "UPDATE audit AS a SET position = u.position, hash = u.hash \
     FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS u(seq, position, hash, at) \
     WHERE a.seq = u.seq AND a.at = u.at AND a.hash IS NULL";
/// Entries sealed per transaction by [`seal_all`].
const SEAL_ALL_BATCH: u32 = 1000;

/// One entry to append, before it is chained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// The kind's spelling.
    pub kind: &'static str,
    /// The step.
    pub step: Option<Cow<'a, str>>,
    /// The description (never a protected payload).
    pub detail: Cow<'a, str>,
}

/// One chained line as [`APPEND_CHAINED_SQLITE`] reads it: run, kind, step,
/// detail, position, hash.
type ChainedLine<'a> = (Option<&'a str>, &'a str, Option<&'a str>, &'a str, i64, String);

impl Line<'_> {
    /// The line, owning its text (kept past the decision it came from).
    pub(crate) fn into_owned(self) -> Line<'static> {
        Line {
            kind: self.kind,
            step: self.step.map(|s| Cow::Owned(s.into_owned())),
            detail: Cow::Owned(self.detail.into_owned()),
        }
    }
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
    /// Where the journal starts after a retention cut (the last entry the cut
    /// removed; verification starts after it), `None` when it starts at 1.
    pub checkpoint: Option<Head>,
}

/// Writes `lines` inside `tx` as pending entries (not chained yet: [`seal`]
/// does that after commit), recorded for `run_id` (`None`: the deployment) at
/// `at`, caused by `actor` (`None`: the coordinator), in the order given. It
/// takes no lock on the journal.
pub(crate) async fn append(
    tx: &mut Tx,
    run_id: Option<&str>,
    at: i64,
    actor: Option<&str>,
    lines: &[Line<'_>],
) -> Result<(), StoreError> {
    let entries: Vec<(Option<&str>, &Line<'_>)> = lines.iter().map(|line| (run_id, line)).collect();
    append_entries(tx, at, actor, &entries).await
}

/// [`append`] for entries of several runs (a batch's decisions), in the order given.
pub(crate) async fn append_entries(
    tx: &mut Tx,
    at: i64,
    actor: Option<&str>,
    entries: &[(Option<&str>, &Line<'_>)],
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    match tx.dialect() {
        Dialect::Pg => {
            tx.execute(APPEND_PG, pg_columns(at, actor, entries)).await?;
        }
        Dialect::Sqlite => {
            let lines: Vec<(Option<&str>, &str, Option<&str>, &str)> =
                entries.iter().map(|(run, l)| (*run, l.kind, l.step.as_deref(), l.detail.as_ref())).collect();
            let lines = serde_json::to_string(&lines).map_err(|e| StoreError::Corrupt(format!("audit lines: {e}")))?;
            tx.execute(APPEND_SQLITE, vec![at.into(), actor.into(), lines.into()]).await?;
        }
    }
    Ok(())
}

/// The entries as [`APPEND_PG`]'s `$1`–`$6` (runs, the instant, kinds, steps, details, the actor).
fn pg_columns(at: i64, actor: Option<&str>, entries: &[(Option<&str>, &Line<'_>)]) -> Vec<Arg> {
    vec![
        Arg::MaybeTexts(entries.iter().map(|(run, _)| run.map(str::to_owned)).collect()),
        at.into(),
        Arg::Texts(entries.iter().map(|(_, l)| l.kind.to_owned()).collect()),
        Arg::MaybeTexts(entries.iter().map(|(_, l)| l.step.as_deref().map(str::to_owned)).collect()),
        Arg::Texts(entries.iter().map(|(_, l)| l.detail.clone().into_owned()).collect()),
        actor.into(),
    ]
}

async fn read_head(tx: &mut Tx, sql: &'static str) -> Result<Head, StoreError> {
    match tx.fetch_optional(sql, Vec::new()).await? {
        Some(row) => Ok(Head { position: row.get(0)?, hash: row.get(1)? }),
        None => Err(StoreError::Corrupt("the audit journal has no head row (audit_head)".into())),
    }
}

/// Chains up to `limit` committed pending entries, in `seq` order, after the
/// current head, in one transaction; returns how many. Nothing pending: no
/// lock is taken and nothing is written.
pub(crate) async fn seal(store: &Store, limit: u32) -> Result<u64, StoreError> {
    if limit == 0 {
        return Ok(0);
    }
    // The cheap look first, so that an idle sealer takes no lock.
    let mut look = store.pool.begin_read().await?;
    let pending = look.fetch_optional(ANY_PENDING, Vec::new()).await?.is_some();
    drop(look);
    if !pending {
        return Ok(0);
    }
    let mut tx = store.pool.begin_for(Writer::Background).await?;
    let mut head = lock_head(&mut tx).await?;
    let sealed = chain_pending(&mut tx, &mut head, limit).await?;
    if sealed.is_empty() {
        return Ok(0);
    }
    let count = u64::try_from(sealed.len()).unwrap_or(u64::MAX);
    check_sealed(write_seals(&mut tx, sealed).await?, count)?;
    tx.execute(MOVE_HEAD, vec![head.position.into(), head.hash.into()]).await?;
    tx.commit().await?;
    Ok(count)
}

/// Locks the journal's head (`SELECT … FOR UPDATE` on PostgreSQL; SQLite's
/// writer already holds the database) and reads it.
async fn lock_head(tx: &mut Tx) -> Result<Head, StoreError> {
    let lock = match tx.dialect() {
        Dialect::Sqlite => HEAD_SQLITE,
        Dialect::Pg => HEAD_PG,
    };
    read_head(tx, lock).await
}

/// Under the head's lock (`lock_head`, in `tx`): up to `limit` committed
/// pending entries, in `seq` order, each chained after `head`, which moves
/// along (the caller writes both). The pending rows are read by a statement
/// after the lock, so a sealer that waited for it reads them as the one
/// before it left them.
async fn chain_pending(tx: &mut Tx, head: &mut Head, limit: u32) -> Result<Vec<(i64, Entry)>, StoreError> {
    let rows = tx.fetch_all(PENDING, vec![i64::from(limit).into()]).await?;
    let mut sealed = Vec::with_capacity(rows.len());
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
        let entry = Entry::chained(head, &content);
        *head = entry.head();
        sealed.push((seq, entry));
    }
    Ok(sealed)
}

/// Chained pending rows as [`SEAL_PG`]'s `$1`–`$4` (seq, position, hash, at).
fn seal_columns(sealed: Vec<(i64, Entry)>) -> Vec<Arg> {
    let seqs = sealed.iter().map(|(seq, _)| *seq).collect();
    let ats = sealed.iter().map(|(_, e)| e.at).collect();
    let positions = sealed.iter().map(|(_, e)| e.position).collect();
    let hashes = sealed.into_iter().map(|(_, e)| e.hash).collect();
    vec![Arg::Ints(seqs), Arg::Ints(positions), Arg::Texts(hashes), Arg::Ints(ats)]
}

/// Writes chained pending rows' positions and hashes; returns how many rows it wrote.
async fn write_seals(tx: &mut Tx, sealed: Vec<(i64, Entry)>) -> Result<u64, StoreError> {
    match tx.dialect() {
        Dialect::Pg => tx.execute(SEAL_PG, seal_columns(sealed)).await,
        Dialect::Sqlite => {
            let rows: Vec<(i64, i64, &str)> =
                sealed.iter().map(|(seq, e)| (*seq, e.position, e.hash.as_str())).collect();
            let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(format!("audit seals: {e}")))?;
            tx.execute(SEAL_SQLITE, vec![rows.into()]).await
        }
    }
}

/// Refuses a sealing that wrote fewer rows than it chained: another writer
/// chained some of them, so roll back rather than chain one twice.
fn check_sealed(written: u64, count: u64) -> Result<(), StoreError> {
    if written == count {
        return Ok(());
    }
    Err(StoreError::Conflict {
        what: format!("audit entries sealed concurrently ({written} of {count} still pending)"),
    })
}

/// Writes `entries` inside `tx` already chained, for a transaction that
/// writes many (a batch of reports, `batch`): it locks the
/// head, first seals every committed pending entry (so each run's entries
/// stay in their order: a run's earlier transactions committed before this
/// one locked the run, so their pending entries are visible here), then
/// chains `entries` after them, in the order given, and inserts them sealed
/// — one insert per entry instead of an insert and, later, an update of the
/// whole row. The head stays locked until `tx` ends, so positions still
/// follow commit order; nothing this transaction holds is waited for by a
/// holder of the head (sealers lock nothing else), so no cycle forms.
pub(crate) async fn append_chained(
    tx: &mut Tx,
    at: i64,
    actor: Option<&str>,
    entries: &[(Option<&str>, &Line<'_>)],
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut head = lock_head(tx).await?;
    loop {
        let sealed = chain_pending(tx, &mut head, SEAL_ALL_BATCH).await?;
        let count = u64::try_from(sealed.len()).unwrap_or(u64::MAX);
        if count > 0 {
            check_sealed(write_seals(tx, sealed).await?, count)?;
        }
        if count < u64::from(SEAL_ALL_BATCH) {
            break;
        }
    }
    let (mut positions, mut hashes) = (Vec::new(), Vec::new());
    for (run, line) in entries {
        let content =
            Content { run_id: *run, at, kind: line.kind, step: line.step.as_deref(), actor, detail: &line.detail };
        let entry = Entry::chained(&head, &content);
        head = entry.head();
        positions.push(entry.position);
        hashes.push(entry.hash);
    }
    match tx.dialect() {
        Dialect::Pg => {
            let mut args = pg_columns(at, actor, entries);
            args.extend([Arg::Ints(positions), Arg::Texts(hashes)]);
            tx.execute(APPEND_CHAINED_PG, args).await?;
        }
        Dialect::Sqlite => {
            let lines: Vec<ChainedLine<'_>> = entries
                .iter()
                .zip(positions.into_iter().zip(hashes))
                .map(|((run, l), (position, hash))| {
                    (*run, l.kind, l.step.as_deref(), l.detail.as_ref(), position, hash)
                })
                .collect();
            let lines = serde_json::to_string(&lines).map_err(|e| StoreError::Corrupt(format!("audit lines: {e}")))?;
            tx.execute(APPEND_CHAINED_SQLITE, vec![at.into(), actor.into(), lines.into()]).await?;
        }
    }
    tx.execute(MOVE_HEAD, vec![head.position.into(), head.hash.into()]).await?;
    Ok(())
}

/// Seals every pending entry, [`SEAL_ALL_BATCH`] per transaction (run by
/// `Store::migrate`: entries an older schema wrote, 0005, are pending too).
pub(crate) async fn seal_all(store: &Store) -> Result<u64, StoreError> {
    let mut total = 0;
    loop {
        let sealed = seal(store, SEAL_ALL_BATCH).await?;
        total += sealed;
        if sealed < u64::from(SEAL_ALL_BATCH) {
            return Ok(total);
        }
    }
}

/// An entry read from its row, and whether the row carries its `prev_hash`
/// (rows written before migration 14 do; [`link`] fills in the others).
fn entry(row: &Row) -> Result<(Entry, bool), StoreError> {
    let prev_hash: Option<String> = row.get(7)?;
    let stored = prev_hash.is_some();
    let entry = Entry {
        position: row.get(0)?,
        run_id: row.get(1)?,
        at: row.get(2)?,
        kind: row.get(3)?,
        step: row.get(4)?,
        actor: row.get(5)?,
        detail: row.get(6)?,
        prev_hash: prev_hash.unwrap_or_default(),
        // A row without a hash was not chained: it shows as tampered.
        hash: row.get::<Option<String>>(8)?.unwrap_or_default(),
    };
    Ok((entry, stored))
}

/// Gives each entry whose row has no `prev_hash` the hash of its
/// predecessor, the entry at the position before: the entry before it in
/// `entries` when that is the one, else the genesis (position 1), the
/// retention `checkpoint` (the last entry the cut removed), or the row at
/// that position. No such row leaves it empty, so verification reports the
/// entry as tampered with (a deleted predecessor is a gap either way).
async fn link(tx: &mut Tx, rows: Vec<(Entry, bool)>, checkpoint: Option<&Head>) -> Result<Vec<Entry>, StoreError> {
    let mut entries: Vec<Entry> = Vec::with_capacity(rows.len());
    for (mut entry, stored) in rows {
        if !stored {
            let before = entry.position - 1;
            entry.prev_hash = match entries.last() {
                Some(last) if last.position == before => last.hash.clone(),
                _ if before == 0 => Head::genesis().hash,
                _ if checkpoint.is_some_and(|c| c.position == before) => {
                    checkpoint.map(|c| c.hash.clone()).unwrap_or_default()
                }
                _ => match tx.fetch_optional(HASH_AT, vec![before.into()]).await? {
                    Some(row) => row.get::<Option<String>>(0)?.unwrap_or_default(),
                    None => String::new(),
                },
            };
        }
        entries.push(entry);
    }
    Ok(entries)
}

impl Store {
    /// Seals up to `limit` pending journal entries into the hash chain (in the
    /// order they were written, after the current head) in one transaction, and
    /// returns how many; fewer than `limit` means none was left pending when
    /// it looked. Concurrent calls, in this or other processes, serialise on
    /// the journal's head and never chain an entry twice.
    pub async fn seal_audit(&self, limit: u32) -> Result<u64, StoreError> {
        seal(self, limit).await
    }

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
        let args: Vec<Arg> = vec![from.into(), upto.into(), run_id.into(), i64::from(limit).into()];
        let rows = tx.fetch_all(PAGE, args).await?.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
        let entries = link(&mut tx, rows, checkpoint.as_ref()).await?;
        let next = match run_id {
            _ if limit == 0 => None,
            None => (upto < head.position).then_some(upto),
            Some(_) => {
                let full = entries.len() >= usize::try_from(limit).unwrap_or(usize::MAX);
                if full { entries.last().map(|e| e.position) } else { None }
            }
        };
        Ok(AuditPage { entries, head, next, checkpoint })
    }
}
