//! Group commit: applying the fenced reports of many runs (fired timers,
//! product answers) in ONE transaction, each with every rule of a single
//! apply ([`Store::apply_in`](crate::Store::apply_in)): the claim's lease held at commit, the caller's
//! decision made on the run's current snapshot, its actions persisted, the
//! run row moved on only from the version decided on, its audit entries
//! written — all or nothing for the transaction as a whole.
//!
//! A report that cannot be applied (no run, lease lost, decision rejected)
//! writes nothing and gets its own error; the others go on. A failure of the
//! transaction itself (a statement refused, a version moved, a lease taken
//! while the batch decided) is returned for the whole batch, nothing
//! written, and the caller applies the reports one by one instead.
//!
//! On PostgreSQL each step is one set-based statement for the whole batch
//! (`unnest` over arrays), so a batch of a hundred reports costs about as many
//! round trips as one. Runs and leases are read without locks, decided on,
//! then taken as they are written: the runs' update (from the version read),
//! then the leases (`batch_leases`) — the order a single apply locks in, so
//! a batch and a single apply never wait for each other in a cycle. A lock
//! taken by a read would cost a WAL record per row. On SQLite the writer
//! holds the database lock for the whole transaction: `batch_sqlite` reads
//! the runs and checks the leases in a statement for the batch, persists
//! each report's actions as a single apply does, and moves every run's row
//! on in one statement.
//!
//! Each run appears at most once per batch (the caller keeps a run's later
//! reports for the next batch, in order).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::audit::{self, Line};
use crate::commit_leases::{self, Batched};
use crate::connections::{self, allowance::Pending};
use crate::db::{Arg, Dialect, Row, Tx, Writer};
use crate::grouped::{Grouped, groupable};
use crate::persist::{Write, decision_writes, execute};
use crate::runs::attention_since_sql;
use crate::types::{Claim, Decision, EagerLease};
use crate::{Store, StoreError, batch_leases, claims, snapshot_frame, wakeups};

/// The batch's runs, read without a lock: the update below moves a row on
/// only from the version read (`r.version = u.version`), so a run changed
/// meanwhile fails the batch as a whole instead of being decided twice.
const READ_RUNS_PG: &str =
    "SELECT id, version, snapshot, revision, trace_parent, snapshot_base FROM runs WHERE id = ANY($1)";
/// Every decided run's row, as a single apply's `UPDATE` writes it
/// (`attention_since` by the same rule, `runs::attention_since_sql!`). The
/// rows are also named by `r.id = ANY($1)`, so that each partition is read
/// through its primary key: joined to the `unnest` alone, the plan hashed the
/// batch and read every partition whole (estimated small while the bench
/// filled them), 1.9 ms per batch of nine runs at 4 000 runs.
const UPDATE_RUNS_PG: &str = concat!(
    "UPDATE runs AS r SET snapshot = u.snapshot, state = u.state, held = u.held, \
     updated_at = $6, version = r.version + 1, outcome = u.outcome, attention_step = u.attention_step, \
     snapshot_base = u.snapshot_base, ",
    attention_since_sql!("u.state", "r.", "$6"),
    " FROM unnest($1::uuid[], $2::bytea[], $3::text[], $4::bool[], $5::bigint[], $7::text[], $8::text[], \
     $9::bytea[]) AS u(id, snapshot, state, held, version, outcome, attention_step, snapshot_base) \
     WHERE r.id = ANY($1) AND r.id = u.id AND r.version = u.version"
);
/// Reports one batch should carry at most on PostgreSQL: set-based
/// statements cost about the same for one report as for hundreds.
const BATCH_LIMIT_PG: usize = 1024;
/// Reports one batch should carry at most on SQLite: the writer applies them
/// one after another holding the database's only write lock, so a large batch
/// makes every other writer (an admission) wait for all of it.
const BATCH_LIMIT_SQLITE: usize = 32;

impl Store {
    /// How many reports one [`Store::apply_fenced_batch`] should carry at most on this backend.
    pub fn batch_limit(&self) -> usize {
        match self.pool {
            crate::db::Pool::Pg(..) => BATCH_LIMIT_PG,
            crate::db::Pool::Sqlite(..) => BATCH_LIMIT_SQLITE,
        }
    }

    /// Whether a worker should ask its batches to lease what they queue
    /// ([`Store::apply_fenced_batch_leasing`]) on this backend: on
    /// PostgreSQL, yes. On SQLite both backends' rules hold, but the lease
    /// holds the only write lock longer while a claim round there is a cheap
    /// in-process call: measured ~10 % fewer completed runs/s (bench/RESULTS.md,
    /// sixth sitting), so the service does not.
    pub fn eager_dispatch(&self) -> bool {
        matches!(self.pool, crate::db::Pool::Pg(..))
    }

    /// Applies one fenced report per claim in one transaction (see the module
    /// doc). `decide(i, snapshot)` decides on the locked snapshot of claim
    /// `i`'s run. Returns, per claim in order, the run's new version or why
    /// that report was not applied; `Err` when the transaction failed as a
    /// whole (nothing written).
    pub async fn apply_fenced_batch<E>(
        &self,
        claims: &[Claim],
        owner: &str,
        at: i64,
        decide: impl FnMut(usize, &[u8]) -> Result<Decision, E>,
    ) -> Result<Vec<Result<i64, StoreError>>, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Ok(self.apply_fenced_batch_leasing(claims, owner, at, None, decide).await?.results)
    }

    /// [`Store::apply_fenced_batch`] that also leases to `owner`, under
    /// `lease`, the work its decisions queue for at once (eager dispatch,
    /// `commit_leases`): [`Batched::leased`] is that work, each row with its run as
    /// committed, for the caller to do as it does a claim's. Nothing is
    /// leased without `lease` or while the restore fence holds.
    pub async fn apply_fenced_batch_leasing<E>(
        &self,
        claims: &[Claim],
        owner: &str,
        at: i64,
        lease: Option<EagerLease>,
        mut decide: impl FnMut(usize, &[u8]) -> Result<Decision, E>,
    ) -> Result<Batched, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut seen = HashSet::new();
        if let Some(twice) = claims.iter().map(run_of).find(|run| !seen.insert(*run)) {
            return Err(StoreError::Conflict { what: format!("run {twice} appears twice in one batch") });
        }
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        // Read once the connection is taken, as a claim reads it.
        let lease = self.eager(lease, at).filter(|_| crate::fence::refuse(&self.fence).is_ok());
        let batched = match tx.dialect() {
            Dialect::Pg => {
                let limited = if lease.is_some() { self.governed_lanes() } else { Vec::new() };
                let governing = Governing { memory: &self.connections, limited };
                let (batched, pending) = batch_pg(&mut tx, claims, owner, at, lease, &governing, &mut decide).await?;
                tx.commit().await?;
                // Its grants count as pending until the commit ended.
                drop(pending);
                return Ok(batched);
            }
            Dialect::Sqlite => {
                crate::batch_sqlite::batch_sqlite(&mut tx, claims, owner, at, lease, &mut decide).await?
            }
        };
        tx.commit().await?;
        Ok(batched)
    }
}

pub(crate) fn run_of(claim: &Claim) -> &str {
    match claim {
        Claim::Work(w) => &w.run_id,
        Claim::Timer(t) => &t.run_id,
    }
}

/// Decides claim `i` on `snapshot`, mapping a rejection as a single apply does.
fn decide_one<E>(
    decide: &mut impl FnMut(usize, &[u8]) -> Result<Decision, E>,
    i: usize,
    snapshot: &[u8],
) -> Result<Decision, StoreError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    decide(i, snapshot).map_err(|e| StoreError::Rejected(e.into()))
}

/// A run of a PostgreSQL batch as read: version, snapshot, revision, trace parent.
type Read = (i64, Vec<u8>, String, Option<String>);

/// PostgreSQL: read, decide, then write — each a statement for the whole
/// batch. The runs' rows and the claims' leases are read without locks and
/// taken when written (the runs' update, then `batch_leases::hold`), so a
/// report costs no lock records of its own; anything changed in between
/// fails the batch as a whole.
async fn batch_pg<E>(
    tx: &mut Tx,
    claims: &[Claim],
    owner: &str,
    at: i64,
    lease: Option<EagerLease>,
    governing: &Governing<'_>,
    decide: &mut impl FnMut(usize, &[u8]) -> Result<Decision, E>,
) -> Result<(Batched, Pending), StoreError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let ids: Vec<String> = claims.iter().map(|c| run_of(c).to_owned()).collect();
    let mut read: HashMap<String, Read> = HashMap::with_capacity(claims.len());
    for row in tx.fetch_all(READ_RUNS_PG, vec![Arg::Ids(ids)]).await? {
        read.insert(row.get(0)?, (row.get(1)?, snapshot_frame::read(&row, 2, 5)?, row.get(3)?, row.get(4)?));
    }
    let leased = batch_leases::leased(tx, claims, owner).await?;
    let mut outcome: Vec<Result<i64, StoreError>> = Vec::with_capacity(claims.len());
    let mut decided: Vec<(&Claim, i64, Decision)> = Vec::with_capacity(claims.len());
    for (i, claim) in claims.iter().enumerate() {
        let run_id = run_of(claim);
        let Some((version, snapshot, _, _)) = read.get(run_id) else {
            outcome.push(Err(StoreError::NotFound { what: format!("run {run_id}") }));
            continue;
        };
        if !leased.contains(run_id) {
            outcome.push(Err(StoreError::LeaseLost { what: claims::describe(claim) }));
            continue;
        }
        match decide_one(decide, i, snapshot) {
            Ok(decision) => {
                outcome.push(Ok(version + 1));
                decided.push((claim, *version, decision));
            }
            Err(e) => outcome.push(Err(e)),
        }
    }
    if decided.is_empty() {
        return Ok((Batched { results: outcome, leased: Vec::new() }, Pending::default()));
    }
    update_runs(tx, at, &decided).await?;
    let planned: Vec<Planned<'_>> = decided
        .iter()
        .map(|(claim, _, d)| {
            let writes = decision_writes(&d.actions, &d.lanes, &d.connections);
            Ok(Planned { run: run_of(claim), groupable: groupable(&writes)?, writes, on_hold: d.held })
        })
        .collect::<Result<_, StoreError>>()?;
    let holding: Vec<(&Claim, bool)> = decided
        .iter()
        .zip(&planned)
        .map(|((claim, _, _), p)| {
            let finishing = matches!(claim, Claim::Work(w) if p.groupable && batch_leases::finishes(w, &p.writes));
            (*claim, finishing)
        })
        .collect();
    let held = batch_leases::hold(tx, &holding, owner).await?;
    let (journal, queued, pending) = persist_grouped(tx, at, planned, &held, owner, lease, governing).await?;
    let committed = |run_id: &str| {
        let (_, _, revision, trace_parent) = read.get(run_id)?;
        let (_, _, decision) = decided.iter().find(|(claim, _, _)| run_of(claim) == run_id)?;
        Some(commit_leases::Committed { revision, snapshot: &decision.snapshot, trace_parent: trace_parent.as_deref() })
    };
    let mut leased = Vec::new();
    for row in &queued {
        leased.extend(commit_leases::leased_row(row, committed)?);
    }
    // Chained here, not left pending for the sealer: one insert per entry, no later update.
    let entries: Vec<(Option<&str>, &Line<'_>)> = journal.iter().map(|(run, line)| (Some(*run), line)).collect();
    audit::append_chained(tx, at, None, &entries).await?;
    Ok((Batched { results: outcome, leased: crate::claims::in_work_order(leased) }, pending))
}

/// Moves every decided run's row on from the version it was decided on (its
/// row lock, taken here); fails the batch when one had moved meanwhile.
async fn update_runs(tx: &mut Tx, at: i64, decided: &[(&Claim, i64, Decision)]) -> Result<(), StoreError> {
    let n = decided.len();
    let mut columns = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::new(), Vec::new());
    let mut listed = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for (claim, version, d) in decided {
        let (head, base) = snapshot_frame::columns(&d.snapshot)?;
        columns.0.push(run_of(claim).to_owned());
        columns.1.push(head);
        listed.2.push(base);
        columns.2.push(d.state.as_str().to_owned());
        columns.3.push(d.held);
        columns.4.push(*version);
        listed.0.push(d.outcome.clone());
        listed.1.push(d.attention_step.clone());
    }
    let args = vec![
        Arg::Ids(columns.0),
        Arg::Blobs(columns.1),
        Arg::Texts(columns.2),
        Arg::Flags(columns.3),
        Arg::Ints(columns.4),
        at.into(),
        Arg::MaybeTexts(listed.0),
        Arg::MaybeTexts(listed.1),
        Arg::MaybeBlobs(listed.2),
    ];
    let updated = tx.execute(UPDATE_RUNS_PG, args).await?;
    if updated != u64::try_from(n).unwrap_or(u64::MAX) {
        // Nothing is written: the caller applies the reports one by one.
        let (claim, expected, _) = &decided[0];
        return Err(StoreError::Stale { run_id: run_of(claim).to_owned(), expected: *expected });
    }
    Ok(())
}

/// The limited connections whose rows a batch may lease at once, and this
/// process's memory of its allowances of them.
pub(crate) struct Governing<'a> {
    pub(crate) memory: &'a Arc<connections::Memory>,
    pub(crate) limited: Vec<String>,
}

/// One decided run's writes, as `persist_grouped` takes them.
struct Planned<'a> {
    run: &'a str,
    writes: Vec<Write<'a>>,
    groupable: bool,
    /// The run is under an operator's hold (`Decision::held`).
    on_hold: bool,
}

/// Persists the writes of several runs' decisions (PostgreSQL; queued rows
/// in each decision's lanes): grouped into set-based statements where a
/// decision's writes allow it (`groupable`), else one after another in its
/// order. A grouped delete of a row `held` already deleted is left out.
/// Under `lease`, a grouped decision's rows a claim would take now are
/// queued leased to `owner` (`commit_leases::leases`); those of a connection
/// under `limits` as far as its pace grants (`connections::eager`). Returns every decision's audit
/// entries, per run in order, and the grouped queued rows; notifies other
/// processes once if any decision queued work no lease took, or set a timer.
async fn persist_grouped<'a>(
    tx: &mut Tx,
    at: i64,
    planned: Vec<Planned<'a>>,
    held: &batch_leases::Held<'_>,
    owner: &str,
    lease: Option<EagerLease>,
    governing: &Governing<'_>,
) -> Result<(Vec<(&'a str, Line<'a>)>, Vec<Row>, Pending), StoreError> {
    let mut grouped = Grouped::governing(governing.limited.iter().cloned());
    let mut in_order: Vec<(&str, Vec<Write<'a>>)> = Vec::new();
    let mut journal = Vec::new();
    let mut wakes = false;
    // The rows that may still be leased (the worker's room).
    let mut room = lease.map_or(0, |l| l.rows);
    for Planned { run, writes, groupable, on_hold } in planned {
        journal.extend(writes.iter().filter_map(Write::journal_line).map(|line| (run, line)));
        if groupable {
            for write in writes.iter().filter(|w| !held.done(run, w)) {
                wakes |= grouped.add_offered(run, at, write, on_hold, lease, &mut room)?;
            }
        } else {
            wakes |= writes.iter().any(|w| w.wakes(at));
            in_order.push((run, writes));
        }
    }
    let until = lease.map_or(0, |l| l.until);
    grouped.execute_deletes(tx).await?;
    // After the deletes: a row this batch finished holds no permit.
    let (left, pending) = grouped.lease_governed(tx, governing.memory, owner, room, at).await?;
    let queued = grouped.execute_inserts(tx, owner, until, at).await?;
    finish(tx, at, in_order, wakes || left).await?;
    Ok((journal, queued, pending))
}

/// Writes the decisions that could not be grouped, each in its order, and
/// notifies once when any write of the batch `wakes`.
pub(crate) async fn finish(
    tx: &mut Tx,
    at: i64,
    in_order: Vec<(&str, Vec<Write<'_>>)>,
    wakes: bool,
) -> Result<(), StoreError> {
    for (run, all) in in_order {
        for write in all {
            if !matches!(write, Write::Journal { .. }) {
                execute(tx, run, at, write).await?;
            }
        }
    }
    if wakes {
        wakeups::notify(tx);
    }
    Ok(())
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
