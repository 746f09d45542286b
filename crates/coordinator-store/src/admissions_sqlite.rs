//! Admissions together on SQLite (`Store::admit_guarded_batch`; PostgreSQL's
//! is `admissions_pg`): many decided admissions in one transaction of the
//! process's writer, a statement per table for all of them over JSON arrays
//! (`json_each`) instead of a statement per table for each. Each run is
//! written only while its own gate is open (no restore hold, its revision
//! the active one) and its idempotency key unused; a key twice in one batch
//! is taken by its first run only. Snapshot bytes travel in the JSON as hex.
//! As `admissions_pg`, a first decision whose writes must keep their order is not
//! written this way (the caller admits it in a transaction of its own).

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::StoreError;
use crate::admissions_pg::{Admitting, Runs, add_writes};
use crate::audit::{Line, rows};
use crate::db::Tx;
use crate::grouped::Grouped;

/// `j.value` (a run of `$1`) may be admitted: no hold, its revision active.
macro_rules! gate_sql {
    () => {
        "NOT EXISTS (SELECT 1 FROM restore_hold WHERE singleton = 1) AND EXISTS (SELECT 1 FROM active_revisions a \
         WHERE a.workflow = j.value ->> 'workflow' AND a.revision = j.value ->> 'revision')"
    };
}

/// Takes the keys of `$1`'s runs that have one, in their order; the runs
/// whose key was taken come back.
const TAKE_KEYS: &str = concat!(
    "INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     SELECT j.value ->> 'owner', j.value ->> 'workflow', j.value ->> 'key', j.value ->> 'id' FROM json_each($1) AS j \
     WHERE j.value ->> 'key' IS NOT NULL AND ",
    gate_sql!(),
    " ORDER BY j.key ON CONFLICT (owner, workflow, idempotency_key) DO NOTHING RETURNING run_id"
);
/// Inserts `$1`'s runs that have no key or whose key `$2` took; the runs
/// inserted come back. `'attention'` is `RunState::Attention.as_str()`.
const INSERT_RUNS: &str = concat!(
    "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, \
     admitted_at, updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since, \
     snapshot_base) \
     SELECT j.value ->> 'id', j.value ->> 'workflow', j.value ->> 'revision', j.value ->> 'owner', \
     j.value ->> 'key', j.value ->> 'digest', j.value ->> 'state', j.value ->> 'held', j.value ->> 'at', \
     j.value ->> 'at', 1, unhex(j.value ->> 'head'), j.value ->> 'traceParent', j.value ->> 'outcome', \
     j.value ->> 'attentionStep', CASE WHEN j.value ->> 'state' = 'attention' THEN j.value ->> 'at' END, \
     unhex(j.value ->> 'base') FROM json_each($1) AS j \
     WHERE (j.value ->> 'key' IS NULL OR j.value ->> 'id' IN (SELECT value FROM json_each($2))) AND ",
    gate_sql!(),
    " ORDER BY j.key RETURNING id"
);
/// Outbox rows `[run, step, kind, attempt, not before, lane, connection]`, unleased.
const QUEUE_WORK: &str = "INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, \
     claims, lane, conn) SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, NULL, \
     NULL, 0, j.value ->> 5, j.value ->> 6 FROM json_each($1) AS j ORDER BY j.key";
/// Timers `[run, timer, due at]`.
const SET_TIMERS: &str = "INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, NULL, NULL FROM json_each($1) AS j ORDER BY j.key";
/// Waits `[run, step, reference]`.
const OPEN_WAITS: &str = "INSERT INTO waits (run_id, step, reference) \
     SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each($1) AS j ORDER BY j.key";
/// Pending journal rows `[run, kind, step, detail, more, at, actor]`, in order.
const APPEND: &str = "INSERT INTO audit (run_id, at, kind, step, detail, actor, more) \
     SELECT j.value ->> 0, j.value ->> 5, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 6, \
     j.value ->> 4 FROM json_each($1) AS j ORDER BY j.key";

/// Admits each of `runs` in `tx` (a SQLite write transaction the caller
/// commits): whether each was created, in order.
pub(crate) async fn admit(tx: &mut Tx, runs: &[Admitting<'_>]) -> Result<Vec<bool>, StoreError> {
    let (mut columns, mut grouped, mut journal, mut until) =
        (Runs::default(), Grouped::default(), Vec::new(), Vec::new());
    for a in runs {
        if add_writes(a, &mut grouped, &mut journal, &mut until)?.is_some() {
            columns.push(a.new, a.decision)?;
        }
    }
    if columns.id.is_empty() {
        return Ok(runs.iter().map(|_| false).collect());
    }
    let listed = text(&runs_json(&columns))?;
    let mut taken: Vec<String> = Vec::new();
    if columns.key.iter().any(Option::is_some) {
        for row in tx.fetch_all(TAKE_KEYS, vec![listed.as_str().into()]).await? {
            taken.push(row.get(0)?);
        }
    }
    let mut created = HashSet::new();
    for row in tx.fetch_all(INSERT_RUNS, vec![listed.into(), text(&json!(taken))?.into()]).await? {
        created.insert(row.get::<String>(0)?);
    }
    if !created.is_empty() {
        write_rows(tx, &columns, &grouped, &journal, &created).await?;
        crate::search_keys::insert(tx, runs.iter().map(|a| a.new).filter(|new| created.contains(&new.id))).await?;
    }
    Ok(runs.iter().map(|a| created.contains(&a.new.id)).collect())
}

/// The first decisions' rows of the `created` runs.
async fn write_rows(
    tx: &mut Tx,
    columns: &Runs,
    grouped: &Grouped,
    journal: &[(&str, Line<'_>)],
    created: &HashSet<String>,
) -> Result<(), StoreError> {
    let q = &grouped.queue_work;
    let work: Vec<Value> = (0..q.0.len())
        .filter(|&i| created.contains(&q.0[i]))
        .map(|i| json!([q.0[i], q.1[i], q.2[i], q.3[i], q.4[i], q.5[i], q.7[i]]))
        .collect();
    let t = &grouped.set_timers;
    let timers: Vec<Value> =
        (0..t.0.len()).filter(|&i| created.contains(&t.0[i])).map(|i| json!([t.0[i], t.1[i], t.2[i]])).collect();
    let w = &grouped.open_waits;
    let waits: Vec<Value> =
        (0..w.0.len()).filter(|&i| created.contains(&w.0[i])).map(|i| json!([w.0[i], w.1[i], w.2[i]])).collect();
    for (sql, rows) in [(QUEUE_WORK, work), (SET_TIMERS, timers), (OPEN_WAITS, waits)] {
        if !rows.is_empty() {
            tx.execute(sql, vec![text(&Value::Array(rows))?.into()]).await?;
        }
    }
    // The journal's rows (`audit::rows`): each run's lines, at most GROUP_MAX a row, at its
    // admission and caused by its admitting subject.
    let admitted: HashMap<&str, (i64, &str)> = (0..columns.id.len())
        .map(|i| (columns.id[i].as_str(), (columns.admitted_at[i], columns.owner[i].as_str())))
        .collect();
    let lines: Vec<(Option<&str>, &Line<'_>)> =
        journal.iter().filter(|(run, _)| created.contains(*run)).map(|(run, l)| (Some(*run), l)).collect();
    if lines.is_empty() {
        return Ok(());
    }
    let (firsts, mores) = rows::pending(&lines)?;
    let mut entries = Vec::with_capacity(firsts.len());
    for ((run, l), more) in firsts.iter().zip(mores) {
        let run = run.unwrap_or_default();
        let (at, actor) =
            admitted.get(run).copied().ok_or_else(|| StoreError::Corrupt(format!("journal of run {run}")))?;
        entries.push(json!([run, l.kind, l.step, l.detail, more, at, actor]));
    }
    tx.execute(APPEND, vec![text(&Value::Array(entries))?.into()]).await?;
    Ok(())
}

/// The runs as `$1` of [`TAKE_KEYS`] and [`INSERT_RUNS`].
fn runs_json(c: &Runs) -> Value {
    let runs: Vec<Value> = (0..c.id.len())
        .map(|i| {
            json!({
                "id": c.id[i], "workflow": c.workflow[i], "revision": c.revision[i], "owner": c.owner[i],
                "key": c.key[i], "digest": c.digest[i], "state": c.state[i], "held": c.held[i],
                "at": c.admitted_at[i], "head": hex::encode(&c.head[i]), "traceParent": c.trace_parent[i],
                "outcome": c.outcome[i], "attentionStep": c.attention_step[i],
                "base": c.base[i].as_ref().map(hex::encode),
            })
        })
        .collect();
    Value::Array(runs)
}

fn text(value: &Value) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("admission rows: {e}")))
}
