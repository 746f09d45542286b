//! A new run in one statement (PostgreSQL): the run row, its first
//! decision's outbox rows, timers, waits and audit entries, and the wake-up
//! of other processes (announced after it committed, `wakeups::Announcer`), as
//! one `INSERT … ` with data-modifying `WITH` parts,
//! sent outside any explicit transaction — the statement is its own
//! transaction, so the admission costs one round trip and one commit instead
//! of a `BEGIN`, a statement per table and a `COMMIT`.
//!
//! The run is new, so none of its rows exist: a delete in its first decision
//! has nothing to remove and is skipped. A first decision whose writes must
//! keep their order (`batch::groupable` says no) is not sent this way; nor is
//! an admission from a trigger event (its event row is written in the same
//! transaction, `runs::admit_in`). When the idempotency key was taken first,
//! nothing is written and the caller reads what the key admitted.

use crate::StoreError;
use crate::audit::Line;
use crate::batch::{Grouped, groupable};
use crate::db::{Arg, Tx};
use crate::persist::{Write, audit_kind, decision_writes, wakes_workers};
use crate::runs::{insert_run_sql, run_args};
use crate::types::{Decision, NewRun};

/// The statement: the key's row (when the run has a key), the run row
/// (`insert_run_sql!`, `$1`–`$13`) only when the key was taken for it, then its
/// first decision's rows (the outbox rows' lanes are `$25`); `$gate` (a
/// literal, `""` for none) is a condition both inserts need.
macro_rules! admit_pg_sql {
    ($gate:expr) => {
        concat!(
            "WITH k AS (INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     SELECT $4, $2, $5, $1 WHERE $5::text IS NOT NULL",
            $gate,
            " ON CONFLICT (owner, workflow, idempotency_key) DO NOTHING RETURNING run_id), \
   r AS (",
            insert_run_sql!(concat!(" WHERE ($5::text IS NULL OR EXISTS (SELECT 1 FROM k))", $gate)),
            "), \
   q AS (INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, claims, lane) \
     SELECT r.id, q.step, q.kind, q.attempt, q.not_before, NULL, NULL, 0, q.lane \
     FROM r, unnest($14::text[], $15::text[], $16::bigint[], $17::bigint[], $25::text[]) \
     AS q(step, kind, attempt, not_before, lane)), \
   t AS (INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT r.id, t.timer, t.due_at, NULL, NULL FROM r, unnest($18::text[], $19::bigint[]) AS t(timer, due_at)), \
   w AS (INSERT INTO waits (run_id, step, reference) \
     SELECT r.id, w.step, w.reference FROM r, unnest($20::text[], $21::text[]) AS w(step, reference)), \
   a AS (INSERT INTO audit (run_id, at, kind, step, detail, actor) \
     SELECT r.id, $9, a.kind, a.step, a.detail, $4 \
     FROM r, unnest($22::text[], $23::text[], $24::text[]) WITH ORDINALITY AS a(kind, step, detail, n) ORDER BY a.n) \
   SELECT r.id FROM r"
        )
    };
}

/// A new run, its key and its first decision's rows.
const ADMIT_PG: &str = admit_pg_sql!("");
/// The same, only while the admission's gate is open: no restore hold placed
/// and `$3` the active revision of workflow `$2` (`Store::admit_guarded`).
const ADMIT_GUARDED_PG: &str = admit_pg_sql!(
    " AND NOT EXISTS (SELECT 1 FROM restore_hold WHERE singleton = 1) \
     AND EXISTS (SELECT 1 FROM active_revisions a WHERE a.workflow = $2 AND a.revision = $3)"
);

/// The first decision's writes as the statement's columns (its deletes are
/// collected and not used: a new run has no rows to delete) and its audit
/// entries, or `None` when its writes must keep their order.
fn columns<'a>(run: &str, decision: &'a Decision, at: i64) -> Result<Option<(Grouped, Vec<Line<'a>>)>, StoreError> {
    let all: Vec<Write<'a>> = decision_writes(&decision.actions, &decision.lanes);
    if !groupable(&all)? {
        return Ok(None);
    }
    let mut grouped = Grouped::default();
    let mut journal = Vec::new();
    for write in &all {
        match write {
            Write::Journal { kind, step, detail } => {
                journal.push(Line { kind: audit_kind(*kind), step: *step, detail: (*detail).into() });
            }
            // An admission queues its rows unleased: claims take them.
            other => grouped.add(run, at, other, false)?,
        }
    }
    Ok(Some((grouped, journal)))
}

/// What became of a one-statement admission.
pub(crate) enum AtOnce {
    /// The run was created with its first decision's writes, committed.
    Created,
    /// The idempotency key was taken first: nothing was written.
    KeyTaken,
    /// The first decision cannot be written this way: use a transaction.
    NotThisWay,
}

/// Admits `new` with `decision` in one statement on `conn` (a PostgreSQL
/// handle outside any transaction, `Pool::begin_read`); `guarded`: only while
/// the admission's gate is open (no hold, the revision active), else
/// [`AtOnce::KeyTaken`] stands for either.
pub(crate) async fn admit(
    conn: &mut Tx,
    new: &NewRun,
    decision: &Decision,
    guarded: bool,
) -> Result<AtOnce, StoreError> {
    let Some((g, journal)) = columns(&new.id, decision, new.admitted_at)? else {
        return Ok(AtOnce::NotThisWay);
    };
    let wakes = wakes_workers(&decision.actions);
    let mut args = run_args(new, decision);
    args.extend([
        Arg::Texts(g.queue_work.1),
        Arg::Texts(g.queue_work.2),
        Arg::Ints(g.queue_work.3),
        Arg::Ints(g.queue_work.4),
        Arg::Texts(g.set_timers.1),
        Arg::Ints(g.set_timers.2),
        Arg::Texts(g.open_waits.1),
        Arg::Texts(g.open_waits.2),
        Arg::Texts(journal.iter().map(|l| l.kind.to_owned()).collect()),
        Arg::MaybeTexts(journal.iter().map(|l| l.step.map(str::to_owned)).collect()),
        Arg::Texts(journal.into_iter().map(|l| l.detail.into_owned()).collect()),
        Arg::MaybeTexts(g.queue_work.5),
    ]);
    let sql = if guarded { ADMIT_GUARDED_PG } else { ADMIT_PG };
    match conn.fetch_optional(sql, args).await? {
        Some(_) => {
            if wakes {
                conn.announce_after_commit();
            }
            Ok(AtOnce::Created)
        }
        None => Ok(AtOnce::KeyTaken),
    }
}
