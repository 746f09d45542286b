//! Group commit on SQLite (`batch`; PostgreSQL's is `batch::batch_pg`): the
//! writer holds the database's only write lock for the whole transaction, so
//! nothing moves between a read and a write of it. The batch's runs are read
//! in one statement and its claims' leases checked in one statement per
//! kind, each report is decided and its actions persisted with the
//! statements of a single apply (`persist`), and every decided run's row is
//! moved on from the version read in one statement (`json_each` over the
//! batch as JSON, snapshot bytes as hex). Then the audit entries are chained
//! at once and, under a lease, what the reports left due is leased.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::audit::{self, Line};
use crate::batch::run_of;
use crate::claims::describe;
use crate::db::Tx;
use crate::eager::{self, Batched, EagerLease};
use crate::persist::{persist, timer_key};
use crate::runs::attention_since_sql;
use crate::types::{Claim, Decision};
use crate::{StoreError, snapshot_frame};

/// The runs of `$1` (a JSON array of ids): id, version, snapshot head and base.
const READ_RUNS: &str = "SELECT id, version, snapshot, snapshot_base FROM runs \
     WHERE id IN (SELECT value FROM json_each($1))";
/// Which of the work claims `$1` (`[run, step, kind, attempt]`, by index) `$2` still holds.
const HELD_WORK: &str = "SELECT j.key FROM json_each($1) AS j JOIN outbox o ON o.run_id = j.value ->> 0 \
     AND o.step = j.value ->> 1 AND o.kind = j.value ->> 2 AND o.attempt = j.value ->> 3 AND o.lease_owner = $2";
/// Which of the timer claims `$1` (`[run, timer, due at]`, by index) `$2` still holds.
const HELD_TIMERS: &str = "SELECT j.key FROM json_each($1) AS j JOIN timers t ON t.run_id = j.value ->> 0 \
     AND t.timer = j.value ->> 1 AND t.due_at = j.value ->> 2 AND t.lease_owner = $2";
/// Every decided run's row from the version it was decided on, as a single
/// apply's `UPDATE` writes it (`attention_since` by the same rule).
const UPDATE_RUNS: &str = concat!(
    "UPDATE runs SET snapshot = u.head, state = u.state, held = u.held, updated_at = $2, version = runs.version + 1, \
     outcome = u.outcome, attention_step = u.attention_step, snapshot_base = u.base, ",
    attention_since_sql!("u.state", "runs.", "$2"),
    " FROM (SELECT value ->> 'id' AS id, unhex(value ->> 'head') AS head, value ->> 'state' AS state, \
     value ->> 'held' AS held, value ->> 'version' AS version, value ->> 'outcome' AS outcome, \
     value ->> 'attentionStep' AS attention_step, unhex(value ->> 'base') AS base FROM json_each($1)) AS u \
     WHERE runs.id = u.id AND runs.version = u.version"
);

fn text(value: &Value) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("batch rows: {e}")))
}

/// The indexes of `claims` whose lease `owner` still holds.
async fn held(tx: &mut Tx, claims: &[Claim], owner: &str) -> Result<HashSet<usize>, StoreError> {
    let (mut work, mut timers) = (Vec::new(), Vec::new());
    for claim in claims {
        match claim {
            Claim::Work(w) => {
                work.push(json!([w.run_id, w.step, w.kind.as_str(), w.attempt]));
                timers.push(Value::Null);
            }
            Claim::Timer(t) => {
                timers.push(json!([t.run_id, timer_key(&t.timer)?, t.due_at]));
                work.push(Value::Null);
            }
        }
    }
    let mut held = HashSet::new();
    for (sql, rows) in [(HELD_WORK, work), (HELD_TIMERS, timers)] {
        if rows.iter().all(Value::is_null) {
            continue;
        }
        for row in tx.fetch_all(sql, vec![text(&Value::Array(rows))?.into(), owner.into()]).await? {
            held.insert(usize::try_from(row.get::<i64>(0)?).unwrap_or(usize::MAX));
        }
    }
    Ok(held)
}

/// Applies one fenced report per claim in `tx` (see the module doc).
pub(crate) async fn batch_sqlite<E>(
    tx: &mut Tx,
    claims: &[Claim],
    owner: &str,
    at: i64,
    lease: Option<EagerLease>,
    decide: &mut impl FnMut(usize, &[u8]) -> Result<Decision, E>,
) -> Result<Batched, StoreError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let ids: Vec<&str> = claims.iter().map(run_of).collect();
    let mut read: HashMap<String, (i64, Vec<u8>)> = HashMap::with_capacity(claims.len());
    for row in tx.fetch_all(READ_RUNS, vec![text(&json!(ids))?.into()]).await? {
        read.insert(row.get(0)?, (row.get(1)?, snapshot_frame::read(&row, 2, 3)?));
    }
    let held = held(tx, claims, owner).await?;
    let mut outcome = Vec::with_capacity(claims.len());
    let mut applied: Vec<&str> = Vec::with_capacity(claims.len());
    let mut journal: Vec<(&str, Line<'static>)> = Vec::new();
    let mut updates: Vec<Value> = Vec::with_capacity(claims.len());
    for (i, claim) in claims.iter().enumerate() {
        let run_id = run_of(claim);
        // These fail before anything of the report is written.
        let Some((version, snapshot)) = read.get(run_id) else {
            outcome.push(Err(StoreError::NotFound { what: format!("run {run_id}") }));
            continue;
        };
        if !held.contains(&i) {
            outcome.push(Err(StoreError::LeaseLost { what: describe(claim) }));
            continue;
        }
        let decision = match decide(i, snapshot) {
            Ok(decision) => decision,
            Err(e) => {
                outcome.push(Err(StoreError::Rejected(e.into())));
                continue;
            }
        };
        let lines = persist(tx, run_id, at, &decision.actions, &decision.lanes).await?;
        let (head, base) = snapshot_frame::columns(&decision.snapshot)?;
        updates.push(json!({
            "id": run_id, "head": hex::encode(head), "state": decision.state.as_str(), "held": decision.held,
            "version": version, "outcome": decision.outcome, "attentionStep": decision.attention_step,
            "base": base.map(hex::encode),
        }));
        journal.extend(lines.into_iter().map(|line| (run_id, line.into_owned())));
        applied.push(run_id);
        outcome.push(Ok(version + 1));
    }
    if !updates.is_empty() {
        let n = u64::try_from(updates.len()).unwrap_or(u64::MAX);
        if tx.execute(UPDATE_RUNS, vec![text(&Value::Array(updates))?.into(), at.into()]).await? != n {
            // Nothing is written (the caller drops the transaction and applies the reports one by one).
            let run_id = applied.first().copied().unwrap_or_default();
            let expected = read.get(run_id).map_or(0, |(v, _)| *v);
            return Err(StoreError::Stale { run_id: run_id.to_owned(), expected });
        }
    }
    // Chained here, not left pending for the sealer (whose later update of
    // every entry would take the only write lock again).
    let entries: Vec<(Option<&str>, &Line<'_>)> = journal.iter().map(|(run, line)| (Some(*run), line)).collect();
    audit::append_chained(tx, at, None, &entries).await?;
    let leased = match lease {
        Some(lease) => eager::lease_runs_sqlite(tx, &applied, owner, at, lease).await?,
        None => Vec::new(),
    };
    Ok(Batched { results: outcome, leased })
}
