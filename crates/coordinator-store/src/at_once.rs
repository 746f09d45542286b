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
//!
//! Eager dispatch (`eager`): given a lease, the first decision's rows that a
//! claim would take at once are inserted leased to the admitting process's
//! worker (at most the lease's rows) and handed back with the run, so the
//! first step needs no claim round.

use crate::StoreError;
use crate::audit::Line;
use crate::audit::rows;
use crate::batch::{Grouped, groupable};
use crate::claims::in_work_order;
use crate::db::{Arg, Tx};
use crate::eager::{self, EagerLease};
use crate::persist::{Write, decision_writes};
use crate::runs::{insert_run_sql, run_args};
use crate::types::{ClaimedRun, Decision, NewRun, WorkItem, WorkKind};

/// The statement: the key's row (when the run has a key), the run row
/// (`insert_run_sql!`, `$1`–`$13`, its snapshot's base `$30`) only when the key was taken for it, then its
/// first decision's rows (the outbox rows' lanes are `$25`, whether each is
/// leased at once `$26`, to `$27` until `$28`; the journal rows' `more` `$29`); `$gate` (a literal, `""` for
/// none) is a condition both inserts need.
macro_rules! admit_pg_sql {
    ($gate:expr) => {
        concat!(
            "WITH k AS (INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     SELECT $4, $2, $5, $1 WHERE $5::text IS NOT NULL",
            $gate,
            " ON CONFLICT (owner, workflow, idempotency_key) DO NOTHING RETURNING run_id), \
   r AS (",
            insert_run_sql!(concat!(" WHERE ($5::text IS NULL OR EXISTS (SELECT 1 FROM k))", $gate), "$30"),
            "), \
   q AS (INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, claims, lane) \
     SELECT r.id, q.step, q.kind, q.attempt, q.not_before, CASE WHEN q.eager THEN $27::text END, \
     CASE WHEN q.eager THEN $28::bigint END, CASE WHEN q.eager THEN 1 ELSE 0 END, q.lane \
     FROM r, unnest($14::text[], $15::text[], $16::bigint[], $17::bigint[], $25::text[], $26::bool[]) \
     AS q(step, kind, attempt, not_before, lane, eager)), \
   t AS (INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT r.id, t.timer, t.due_at, NULL, NULL FROM r, unnest($18::text[], $19::bigint[]) AS t(timer, due_at)), \
   w AS (INSERT INTO waits (run_id, step, reference) \
     SELECT r.id, w.step, w.reference FROM r, unnest($20::text[], $21::text[]) AS w(step, reference)), \
   a AS (INSERT INTO audit (run_id, at, kind, step, detail, actor, more) \
     SELECT r.id, $9, a.kind, a.step, a.detail, $4, a.more \
     FROM r, unnest($22::text[], $23::text[], $24::text[], $29::text[]) WITH ORDINALITY AS a(kind, step, detail, more, n) \
     ORDER BY a.n) \
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
/// collected and not used: a new run has no rows to delete), its audit
/// entries and whether anything it queued is left for a claim (a wake-up),
/// or `None` when its writes must keep their order. Rows a claim would take
/// at once are leased under `lease`, at most its rows.
fn columns<'a>(
    run: &str,
    decision: &'a Decision,
    at: i64,
    lease: Option<EagerLease>,
) -> Result<Option<(Grouped, Vec<Line<'a>>, bool)>, StoreError> {
    let all: Vec<Write<'a>> = decision_writes(&decision.actions, &decision.lanes);
    if !groupable(&all)? {
        return Ok(None);
    }
    let mut grouped = Grouped::default();
    let mut journal = Vec::new();
    let (mut room, mut wakes) = (lease.map_or(0, |l| l.rows), false);
    for write in &all {
        match write.journal_line() {
            Some(line) => journal.push(line),
            None => wakes |= grouped.add_offered(run, at, write, decision.held, lease, &mut room)?,
        }
    }
    Ok(Some((grouped, journal, wakes)))
}

/// What became of a one-statement admission.
pub(crate) enum AtOnce {
    /// The run was created with its first decision's writes, committed; with
    /// the rows leased at once (eager dispatch), in claim order.
    Created(Vec<(WorkItem, ClaimedRun)>),
    /// The idempotency key was taken first: nothing was written.
    KeyTaken,
    /// The first decision cannot be written this way: use a transaction.
    NotThisWay,
}

/// Admits `new` with `decision` in one statement on `conn` (a PostgreSQL
/// handle outside any transaction, `Pool::begin_read`); `guarded`: only while
/// the admission's gate is open (no hold, the revision active), else
/// [`AtOnce::KeyTaken`] stands for either. Under `lease` (owner and lease),
/// what a claim would take at once is leased to that owner.
pub(crate) async fn admit(
    conn: &mut Tx,
    new: &NewRun,
    decision: &Decision,
    guarded: bool,
    lease: Option<(&str, EagerLease)>,
) -> Result<AtOnce, StoreError> {
    let Some((g, journal, wakes)) = columns(&new.id, decision, new.admitted_at, lease.map(|(_, l)| l))? else {
        return Ok(AtOnce::NotThisWay);
    };
    let leased = leased_rows(new, decision, &g);
    // The journal's rows (`audit::rows`): the run's lines, at most GROUP_MAX a row.
    let lines: Vec<(Option<&str>, &Line<'_>)> = journal.iter().map(|l| (Some(new.id.as_str()), l)).collect();
    let (firsts, mores) = rows::pending(&lines)?;
    let (mut args, base) = run_args(new, decision)?;
    args.extend([
        Arg::Texts(g.queue_work.1),
        Arg::Texts(g.queue_work.2),
        Arg::Ints(g.queue_work.3),
        Arg::Ints(g.queue_work.4),
        Arg::Texts(g.set_timers.1),
        Arg::Ints(g.set_timers.2),
        Arg::Texts(g.open_waits.1),
        Arg::Texts(g.open_waits.2),
        Arg::Texts(firsts.iter().map(|(_, l)| l.kind.to_owned()).collect()),
        Arg::MaybeTexts(firsts.iter().map(|(_, l)| l.step.as_deref().map(str::to_owned)).collect()),
        Arg::Texts(firsts.iter().map(|(_, l)| l.detail.clone().into_owned()).collect()),
        Arg::MaybeTexts(g.queue_work.5),
        Arg::Flags(g.queue_work.6),
        lease.map(|(owner, _)| owner).into(),
        lease.map(|(_, l)| l.until).into(),
        Arg::MaybeTexts(mores),
        base,
    ]);
    let sql = if guarded { ADMIT_GUARDED_PG } else { ADMIT_PG };
    match conn.fetch_optional(sql, args).await? {
        Some(_) => {
            if wakes {
                conn.announce_after_commit();
            }
            Ok(AtOnce::Created(leased))
        }
        None => Ok(AtOnce::KeyTaken),
    }
}

/// The rows `g` queues leased, as a claim of the new run would return them.
fn leased_rows(new: &NewRun, decision: &Decision, g: &Grouped) -> Vec<(WorkItem, ClaimedRun)> {
    let q = &g.queue_work;
    let committed = eager::Committed {
        revision: &new.revision,
        snapshot: &decision.snapshot,
        trace_parent: new.trace_parent.as_deref(),
    };
    let rows = (0..q.6.len()).filter(|&i| q.6[i]).filter_map(|i| {
        let kind = WorkKind::parse(&q.2[i])?;
        let item = WorkItem {
            run_id: new.id.clone(),
            step: q.1[i].clone(),
            kind,
            attempt: q.3[i],
            reclaimed: false,
            claims: 1,
        };
        Some((q.4[i], item, committed.claimed(q.4[i])))
    });
    in_work_order(rows.collect())
}
