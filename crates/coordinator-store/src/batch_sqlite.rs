//! Group commit on SQLite (`batch`; PostgreSQL's is [`batch`](crate::batch)`::batch_pg`): the
//! writer holds the database's only write lock for the whole transaction, so
//! nothing moves between a read and a write of it. The batch's runs are read
//! in one statement and its claims' leases checked in one statement per
//! kind, each report is decided, every decided run's row is moved on from
//! the version read in one statement (`json_each` over the batch as JSON,
//! snapshot bytes as hex), and the decisions' rows are written in a
//! statement per kind of write for the whole batch where a decision's
//! writes allow it ([`grouped::groupable`](crate::grouped::groupable): deletes first, then upserts), else
//! one after another in its order ([`persist::execute`](crate::persist::execute)). Then the audit
//! entries are chained at once and, under a lease, what the reports left
//! due is leased.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::audit::{self, Line};
use crate::batch::{finish, run_of};
use crate::claims::describe;
use crate::commit_leases::{self, Batched};
use crate::db::Tx;
use crate::grouped::{Grouped, groupable};
use crate::persist::{Write, decision_writes, timer_key};
use crate::runs::attention_since_sql;
use crate::types::{Claim, Decision, EagerLease};
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

/// Outbox rows `[run, step, kind]` whose work is done.
const FINISH_WORK: &str = "DELETE FROM outbox WHERE (run_id, step, kind) IN \
     (SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each($1))";
/// Outbox rows `[run, step, kind, attempt]` done with this attempt.
const FINISH_ATTEMPT: &str = "DELETE FROM outbox WHERE (run_id, step, kind, attempt) IN \
     (SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each($1))";
/// Timers `[run, timer]` cleared.
const CLEAR_TIMERS: &str =
    "DELETE FROM timers WHERE (run_id, timer) IN (SELECT value ->> 0, value ->> 1 FROM json_each($1))";
/// Waits `[run, step]` closed.
const CLOSE_WAITS: &str =
    "DELETE FROM waits WHERE (run_id, step) IN (SELECT value ->> 0, value ->> 1 FROM json_each($1))";
/// Every outbox, timer and wait row of the runs `$1` (ids) ended.
const END_WORK: [&str; 3] = [
    "DELETE FROM outbox WHERE run_id IN (SELECT value FROM json_each($1))",
    "DELETE FROM timers WHERE run_id IN (SELECT value FROM json_each($1))",
    "DELETE FROM waits WHERE run_id IN (SELECT value FROM json_each($1))",
];
/// Outbox rows `[run, step, kind, attempt, not before, lane, connection]` queued, as
/// `persist`'s single upsert (`WHERE true`: SQLite's parser needs it before
/// `ON CONFLICT` in an `INSERT … SELECT`).
const QUEUE_WORK: &str = "INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, \
     claims, lane, conn) SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, NULL, NULL, 0, \
     value ->> 5, value ->> 6 FROM json_each($1) WHERE true ORDER BY key \
     ON CONFLICT (run_id, step, kind) DO UPDATE SET attempt = excluded.attempt, \
     not_before = excluded.not_before, lease_owner = NULL, lease_until = NULL, claims = 0, lane = excluded.lane, \
     conn = excluded.conn";
/// Timers `[run, timer, due at]` set.
const SET_TIMERS: &str = "INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT value ->> 0, value ->> 1, value ->> 2, NULL, NULL FROM json_each($1) WHERE true ORDER BY key \
     ON CONFLICT (run_id, timer) DO UPDATE SET due_at = excluded.due_at, lease_owner = NULL, lease_until = NULL";
/// Waits `[run, step, reference]` opened.
const OPEN_WAITS: &str = "INSERT INTO waits (run_id, step, reference) \
     SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each($1) WHERE true ORDER BY key \
     ON CONFLICT (run_id, step) DO UPDATE SET reference = excluded.reference";

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
    let mut decided: Vec<(&str, Decision)> = Vec::with_capacity(claims.len());
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
        let (head, base) = snapshot_frame::columns(&decision.snapshot)?;
        updates.push(json!({
            "id": run_id, "head": hex::encode(head), "state": decision.state.as_str(), "held": decision.held,
            "version": version, "outcome": decision.outcome, "attentionStep": decision.attention_step,
            "base": base.map(hex::encode),
        }));
        decided.push((run_id, decision));
        applied.push(run_id);
        outcome.push(Ok(version + 1));
    }
    let journal = persist_all(tx, at, &decided).await?;
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
        Some(lease) => commit_leases::lease_runs_sqlite(tx, &applied, owner, at, lease).await?,
        None => Vec::new(),
    };
    Ok(Batched { results: outcome, leased })
}

/// Writes the rows of every decided run's actions (see the module doc) and
/// returns their audit entries, per run in order. Notifies once if any of
/// them queued work or set a timer due soon, as `persist` does.
async fn persist_all<'a>(
    tx: &mut Tx,
    at: i64,
    decided: &'a [(&'a str, Decision)],
) -> Result<Vec<(&'a str, Line<'a>)>, StoreError> {
    let mut grouped = Grouped::default();
    let mut in_order: Vec<(&str, Vec<Write<'a>>)> = Vec::new();
    let mut journal = Vec::new();
    let mut wakes = false;
    for (run, decision) in decided {
        let writes = decision_writes(&decision.actions, &decision.lanes, &decision.connections);
        journal.extend(writes.iter().filter_map(Write::journal_line).map(|line| (*run, line)));
        wakes |= writes.iter().any(|w| w.wakes(at));
        if groupable(&writes)? {
            for write in &writes {
                grouped.add(run, at, write, false)?;
            }
        } else {
            in_order.push((run, writes));
        }
    }
    execute_grouped(tx, grouped).await?;
    finish(tx, at, in_order, wakes).await?;
    Ok(journal)
}

/// The grouped writes: deletes first, then upserts, a statement per kind that has rows.
async fn execute_grouped(tx: &mut Tx, g: Grouped) -> Result<(), StoreError> {
    let rows = |n: usize, row: &dyn Fn(usize) -> Value| Value::Array((0..n).map(row).collect());
    let (f, a, t, w, q, s, o) = (
        &g.finish_work,
        &g.finish_attempt,
        &g.clear_timers,
        &g.close_waits,
        &g.queue_work,
        &g.set_timers,
        &g.open_waits,
    );
    let statements = [
        (FINISH_WORK, rows(f.0.len(), &|i| json!([f.0[i], f.1[i], f.2[i]]))),
        (FINISH_ATTEMPT, rows(a.0.len(), &|i| json!([a.0[i], a.1[i], a.2[i], a.3[i]]))),
        (CLEAR_TIMERS, rows(t.0.len(), &|i| json!([t.0[i], t.1[i]]))),
        (CLOSE_WAITS, rows(w.0.len(), &|i| json!([w.0[i], w.1[i]]))),
        (END_WORK[0], json!(g.end)),
        (END_WORK[1], json!(g.end)),
        (END_WORK[2], json!(g.end)),
        (QUEUE_WORK, rows(q.0.len(), &|i| json!([q.0[i], q.1[i], q.2[i], q.3[i], q.4[i], q.5[i], q.7[i]]))),
        (SET_TIMERS, rows(s.0.len(), &|i| json!([s.0[i], s.1[i], s.2[i]]))),
        (OPEN_WAITS, rows(o.0.len(), &|i| json!([o.0[i], o.1[i], o.2[i]]))),
    ];
    for (sql, rows) in statements {
        if rows.as_array().is_some_and(|r| !r.is_empty()) {
            tx.execute(sql, vec![text(&rows)?.into()]).await?;
        }
    }
    Ok(())
}
