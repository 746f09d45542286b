//! The audit journal (docs/reference/protection.md#the-audit-journal): writing entries inside the transaction that
//! writes what they record, sealing them into the hash chain shortly after,
//! and reading the chain back page by page.
//!
//! The chain itself (canonical encoding, hash, verification) is
//! [`coordinator_core::audit`]; this module only keeps it in rows.
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
//! A decision's entries for one run are one row (`rows`, migration 0017):
//! the first in the row's columns, the others in its `more`, at the
//! positions right after the row's. Sealing a pending row chains all its
//! entries and writes their hashes; readers explode rows into entries
//! (`read`), so nothing outside this module sees a row.
//!
//! Until it is sealed an entry is not in the chain: [`Store::audit`] shows
//! positions only, and an edit made to a pending row before sealing is
//! chained as if it were the original — the window is the sealer's interval.
//! The partial index `audit_pending` (migration 0007) keeps finding pending
//! rows cheap however long the journal grows.

use std::borrow::Cow;

mod read;
pub(crate) mod rows;
mod run_journal;

pub use read::AuditPage;
pub use run_journal::RunJournal;

use coordinator_core::audit::{Content, Entry, Head};

use crate::db::{Arg, Dialect, Tx, Writer};
use crate::{Store, StoreError};

const HEAD_SQLITE: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1";
const HEAD_PG: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1 FOR UPDATE";
const HEAD_READ: &str = "SELECT position, hash FROM audit_head WHERE singleton = 1";
/// All rows in one statement: `$3` is a JSON array of `[run, kind, step,
/// detail, more]` (`rows`), inserted in its order (so `seq` follows it).
const APPEND_SQLITE: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, more) \
     SELECT json_extract(j.value, '$[0]'), $1, json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), \
     json_extract(j.value, '$[3]'), $2, json_extract(j.value, '$[4]') FROM json_each($3) AS j ORDER BY j.key";
/// [`APPEND_SQLITE`] with each row's position and hash, `[5]` and `[6]`
/// (`append_chained`; no `prev_hash`: readers link it).
const APPEND_CHAINED_SQLITE: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, more, position, hash) \
     SELECT json_extract(j.value, '$[0]'), $1, json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), \
     json_extract(j.value, '$[3]'), $2, json_extract(j.value, '$[4]'), json_extract(j.value, '$[5]'), \
     json_extract(j.value, '$[6]') FROM json_each($3) AS j ORDER BY j.key";
/// All rows in one statement; `ORDER BY` the rows' order, so `seq` (taken as
/// the sorted rows are inserted) follows it.
const APPEND_PG: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, more) \
     SELECT u.run_id, $2::bigint, u.kind, u.step, u.detail, $6::text, u.more \
     FROM unnest($1::uuid[], $3::text[], $4::text[], $5::text[], $7::text[]) \
     WITH ORDINALITY AS u(run_id, kind, step, detail, more, n) ORDER BY u.n";
/// [`APPEND_PG`] with each row's position and hash, `$8` and `$9`
/// (`append_chained`; no `prev_hash`: readers link it).
const APPEND_CHAINED_PG: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, more, position, hash) \
     SELECT u.run_id, $2::bigint, u.kind, u.step, u.detail, $6::text, u.more, u.position, u.hash \
     FROM unnest($1::uuid[], $3::text[], $4::text[], $5::text[], $7::text[], $8::bigint[], $9::text[]) \
     WITH ORDINALITY AS u(run_id, kind, step, detail, more, position, hash, n) ORDER BY u.n";
const MOVE_HEAD: &str = "UPDATE audit_head SET position = $1, hash = $2 WHERE singleton = 1";
/// Whether anything is pending, without a lock (the partial index `audit_pending`).
const ANY_PENDING: &str = "SELECT seq FROM audit WHERE hash IS NULL ORDER BY seq LIMIT 1";
const PENDING: &str =
    "SELECT seq, run_id, at, kind, step, actor, detail, more FROM audit WHERE hash IS NULL ORDER BY seq LIMIT $1";
/// All rows in one statement: `$1` is a JSON array of `[seq, position, hash, more]`
/// (one statement instead of one per entry: on SQLite each statement is a
/// trip to the connection's thread and back).
const SEAL_SQLITE: &str = "UPDATE audit SET position = json_extract(j.value, '$[1]'), \
     hash = json_extract(j.value, '$[2]'), more = json_extract(j.value, '$[3]') FROM json_each($1) AS j \
     WHERE audit.seq = json_extract(j.value, '$[0]') AND audit.hash IS NULL";
/// Each row is found by `seq` in the partial index `audit_pending` (migration
/// 0007); `at` picks its day partition (migration 0013).
const SEAL_PG: &str = "UPDATE audit AS a SET position = u.position, hash = u.hash, more = u.more \
     FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::text[]) AS u(seq, position, hash, at, more) \
     WHERE a.seq = u.seq AND a.at = u.at AND a.hash IS NULL";
/// Entries (in whole rows) sealed per transaction by [`seal_all`].
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

/// One row as [`APPEND_SQLITE`] reads it: run, kind, step, detail, more.
type PendingRow<'a> = (Option<&'a str>, &'a str, Option<&'a str>, &'a str, Option<String>);
/// One row as [`APPEND_CHAINED_SQLITE`] reads it: [`PendingRow`], position, hash.
type ChainedRow<'a> = (Option<&'a str>, &'a str, Option<&'a str>, &'a str, Option<String>, i64, String);

/// A pending row chained by the sealer: its `seq` and `at` (which find it),
/// its first entry's position and hash, and its `more` with the later entries' hashes.
struct Sealed {
    seq: i64,
    at: i64,
    position: i64,
    hash: String,
    more: Option<String>,
}

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

/// [`append`] for entries of several runs (a batch's decisions), in the
/// order given: a row per run's consecutive lines (`rows`).
pub(crate) async fn append_entries(
    tx: &mut Tx,
    at: i64,
    actor: Option<&str>,
    entries: &[(Option<&str>, &Line<'_>)],
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let (firsts, mores) = rows::pending(entries)?;
    match tx.dialect() {
        Dialect::Pg => {
            let mut args = pg_columns(at, actor, &firsts);
            args.push(Arg::MaybeTexts(mores));
            tx.execute(APPEND_PG, args).await?;
        }
        Dialect::Sqlite => {
            let rows: Vec<PendingRow<'_>> = firsts
                .iter()
                .zip(mores)
                .map(|((run, l), more)| (*run, l.kind, l.step.as_deref(), l.detail.as_ref(), more))
                .collect();
            let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(format!("audit rows: {e}")))?;
            tx.execute(APPEND_SQLITE, vec![at.into(), actor.into(), rows.into()]).await?;
        }
    }
    Ok(())
}

/// The rows' first entries as [`APPEND_PG`]'s `$1`–`$6` (runs, the instant, kinds, steps, details, the actor).
fn pg_columns(at: i64, actor: Option<&str>, firsts: &[(Option<&str>, &Line<'_>)]) -> Vec<Arg> {
    vec![
        Arg::MaybeIds(firsts.iter().map(|(run, _)| run.map(str::to_owned)).collect()),
        at.into(),
        Arg::Texts(firsts.iter().map(|(_, l)| l.kind.to_owned()).collect()),
        Arg::MaybeTexts(firsts.iter().map(|(_, l)| l.step.as_deref().map(str::to_owned)).collect()),
        Arg::Texts(firsts.iter().map(|(_, l)| l.detail.clone().into_owned()).collect()),
        actor.into(),
    ]
}

async fn read_head(tx: &mut Tx, sql: &'static str) -> Result<Head, StoreError> {
    match tx.fetch_optional(sql, Vec::new()).await? {
        Some(row) => Ok(Head { position: row.get(0)?, hash: row.get(1)? }),
        None => Err(StoreError::Corrupt("the audit journal has no head row (audit_head)".into())),
    }
}

/// Chains committed pending entries, in `seq` order and in whole rows,
/// after the current head, in one transaction, until at least `limit` are
/// chained or none is left; returns how many (fewer than `limit`: none was
/// left). Nothing pending: no lock is taken and nothing is written.
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
    let (sealed, count) = chain_pending(&mut tx, &mut head, limit).await?;
    if sealed.is_empty() {
        return Ok(0);
    }
    write_seals(&mut tx, sealed).await?;
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

/// Under the head's lock (`lock_head`, in `tx`): committed pending rows, in
/// `seq` order, until at least `limit` entries (or none is left), each entry
/// chained after `head`, which moves along (the caller writes both); and
/// how many entries. The pending rows are read by a statement after the
/// lock, so a sealer that waited for it reads them as the one before it left them.
async fn chain_pending(tx: &mut Tx, head: &mut Head, limit: u32) -> Result<(Vec<Sealed>, u64), StoreError> {
    // At least one entry per row: `limit` rows hold `limit` entries or more.
    let rows = tx.fetch_all(PENDING, vec![i64::from(limit).into()]).await?;
    let (mut sealed, mut count) = (Vec::with_capacity(rows.len()), 0);
    for row in &rows {
        if count >= u64::from(limit) {
            break;
        }
        let (seq, run_id, at, kind, step): (i64, Option<String>, i64, String, Option<String>) =
            (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?);
        let (actor, detail, more): (Option<String>, String, Option<String>) = (row.get(5)?, row.get(6)?, row.get(7)?);
        let later = rows::later(more.as_deref());
        let (run_id, actor) = (run_id.as_deref(), actor.as_deref());
        let first =
            Entry::chained(head, &Content { run_id, at, kind: &kind, step: step.as_deref(), actor, detail: &detail });
        *head = first.head();
        let mut hashes = Vec::with_capacity(later.len());
        for (kind, step, detail, _) in &later {
            let content = Content { run_id, at, kind, step: step.as_deref(), actor, detail };
            let entry = Entry::chained(head, &content);
            *head = entry.head();
            hashes.push(entry.hash);
        }
        count += 1 + u64::try_from(later.len()).unwrap_or(0);
        let more = if more.is_some() && later.is_empty() { more } else { rows::sealed_more(&later, &hashes)? };
        sealed.push(Sealed { seq, at, position: first.position, hash: rows::compact(&first.hash).into_owned(), more });
    }
    Ok((sealed, count))
}

/// Writes chained pending rows' positions, hashes and `more`, checking that
/// each was still pending.
async fn write_seals(tx: &mut Tx, sealed: Vec<Sealed>) -> Result<(), StoreError> {
    let count = u64::try_from(sealed.len()).unwrap_or(u64::MAX);
    let written = match tx.dialect() {
        Dialect::Pg => {
            let args = vec![
                Arg::Ints(sealed.iter().map(|s| s.seq).collect()),
                Arg::Ints(sealed.iter().map(|s| s.position).collect()),
                Arg::Texts(sealed.iter().map(|s| s.hash.clone()).collect()),
                Arg::Ints(sealed.iter().map(|s| s.at).collect()),
                Arg::MaybeTexts(sealed.into_iter().map(|s| s.more).collect()),
            ];
            tx.execute(SEAL_PG, args).await?
        }
        Dialect::Sqlite => {
            let rows: Vec<(i64, i64, &str, Option<&str>)> =
                sealed.iter().map(|s| (s.seq, s.position, s.hash.as_str(), s.more.as_deref())).collect();
            let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(format!("audit seals: {e}")))?;
            tx.execute(SEAL_SQLITE, vec![rows.into()]).await?
        }
    };
    check_sealed(written, count)
}

/// Refuses a sealing that wrote fewer rows than it chained: another writer
/// chained some of them, so roll back rather than chain one twice.
fn check_sealed(written: u64, count: u64) -> Result<(), StoreError> {
    if written == count {
        return Ok(());
    }
    Err(StoreError::Conflict { what: format!("audit rows sealed concurrently ({written} of {count} still pending)") })
}

/// Writes `entries` inside `tx` already chained, for a transaction that
/// writes many (a batch of reports, `batch`): it locks the
/// head, first seals every committed pending entry (so each run's entries
/// stay in their order: a run's earlier transactions committed before this
/// one locked the run, so their pending entries are visible here), then
/// chains `entries` after them, in the order given, and inserts them sealed,
/// a row per run's consecutive lines (`rows`) — one insert per row instead
/// of an insert and, later, an update of the whole row. The head stays
/// locked until `tx` ends, so positions still follow commit order; nothing
/// this transaction holds is waited for by a holder of the head (sealers
/// lock nothing else), so no cycle forms.
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
        let (sealed, count) = chain_pending(tx, &mut head, SEAL_ALL_BATCH).await?;
        if !sealed.is_empty() {
            write_seals(tx, sealed).await?;
        }
        if count < u64::from(SEAL_ALL_BATCH) {
            break;
        }
    }
    let groups = rows::groups(entries);
    let (mut firsts, mut mores, mut positions, mut hashes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for group in groups {
        let lines = &entries[group];
        let mut chained = Vec::with_capacity(lines.len());
        for (run, line) in lines {
            let content =
                Content { run_id: *run, at, kind: line.kind, step: line.step.as_deref(), actor, detail: &line.detail };
            let entry = Entry::chained(&head, &content);
            head = entry.head();
            chained.push(entry);
        }
        let row_hashes: Vec<String> = chained.into_iter().map(|e| e.hash).collect();
        mores.push(rows::more(lines, Some(&row_hashes))?);
        positions.push(head.position - i64::try_from(lines.len()).unwrap_or(0) + 1);
        hashes.push(row_hashes.first().map(|h| rows::compact(h).into_owned()).unwrap_or_default());
        firsts.push(lines[0]);
    }
    match tx.dialect() {
        Dialect::Pg => {
            let mut args = pg_columns(at, actor, &firsts);
            args.extend([Arg::MaybeTexts(mores), Arg::Ints(positions), Arg::Texts(hashes)]);
            tx.execute(APPEND_CHAINED_PG, args).await?;
        }
        Dialect::Sqlite => {
            let rows: Vec<ChainedRow<'_>> = firsts
                .iter()
                .zip(mores.into_iter().zip(positions.into_iter().zip(hashes)))
                .map(|((run, l), (more, (position, hash)))| {
                    (*run, l.kind, l.step.as_deref(), l.detail.as_ref(), more, position, hash)
                })
                .collect();
            let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(format!("audit rows: {e}")))?;
            tx.execute(APPEND_CHAINED_SQLITE, vec![at.into(), actor.into(), rows.into()]).await?;
        }
    }
    tx.execute(MOVE_HEAD, vec![head.position.into(), head.hash.into()]).await?;
    Ok(())
}

/// Seals every pending entry, at least [`SEAL_ALL_BATCH`] per transaction
/// (run by `Store::migrate`: entries an older schema wrote, 0005, are pending too).
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

impl Store {
    /// Seals pending journal entries into the hash chain (in the order they
    /// were written, after the current head) in one transaction, in whole
    /// rows (a decision's entries for one run stay together), until at least
    /// `limit` are sealed or none is left, and returns how many; fewer than
    /// `limit` means none was left pending when it looked. Concurrent calls,
    /// in this or other processes, serialise on the journal's head and never
    /// chain an entry twice.
    pub async fn seal_audit(&self, limit: u32) -> Result<u64, StoreError> {
        seal(self, limit).await
    }
}
