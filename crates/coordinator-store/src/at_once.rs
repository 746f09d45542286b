//! A new run in one statement (PostgreSQL): the run row, its first
//! decision's outbox rows, timers, waits and audit entries, and the wake-up
//! of other processes, as one `INSERT … ` with data-modifying `WITH` parts,
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

use coordinator_core::machine::action::Action;

use crate::StoreError;
use crate::audit::Line;
use crate::batch::groupable;
use crate::db::{Arg, Tx};
use crate::persist::{Write, audit_kind, timer_key, writes};
use crate::runs::run_args;
use crate::types::{Decision, NewRun};
use crate::wakeups::WORK_CHANNEL;

const ADMIT_PG: &str = "WITH r AS (\
     INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at, \
       updated_at, version, snapshot) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, 1, $10) \
     ON CONFLICT (owner, workflow, idempotency_key) DO NOTHING RETURNING id), \
   q AS (INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, claims) \
     SELECT r.id, q.step, q.kind, q.attempt, q.not_before, NULL, NULL, 0 \
     FROM r, unnest($11::text[], $12::text[], $13::bigint[], $14::bigint[]) AS q(step, kind, attempt, not_before)), \
   t AS (INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT r.id, t.timer, t.due_at, NULL, NULL FROM r, unnest($15::text[], $16::bigint[]) AS t(timer, due_at)), \
   w AS (INSERT INTO waits (run_id, step, reference) \
     SELECT r.id, w.step, w.reference FROM r, unnest($17::text[], $18::text[]) AS w(step, reference)), \
   a AS (INSERT INTO audit (run_id, at, kind, step, detail, actor) \
     SELECT r.id, $9, a.kind, a.step, a.detail, $4 \
     FROM r, unnest($19::text[], $20::text[], $21::text[]) WITH ORDINALITY AS a(kind, step, detail, n) ORDER BY a.n) \
   SELECT r.id FROM r LEFT JOIN LATERAL (SELECT pg_notify($22, '')::text WHERE $23) AS n ON true";

/// The columns of the first decision's writes.
#[derive(Default)]
struct Columns {
    work: (Vec<String>, Vec<String>, Vec<i64>, Vec<i64>),
    timers: (Vec<String>, Vec<i64>),
    waits: (Vec<String>, Vec<String>),
    audit: (Vec<String>, Vec<Option<String>>, Vec<String>),
    wakes: bool,
}

/// The columns of `actions`, or `None` when their writes must keep their order.
fn columns(actions: &[Action], at: i64) -> Result<Option<Columns>, StoreError> {
    let all: Vec<Write<'_>> = actions.iter().flat_map(writes).collect();
    if !groupable(&all)? {
        return Ok(None);
    }
    let mut c = Columns::default();
    for write in all {
        match write {
            Write::QueueWork { step, kind, attempt, not_before } => {
                c.work.0.push(step.to_owned());
                c.work.1.push(kind.as_str().to_owned());
                c.work.2.push(attempt);
                c.work.3.push(not_before.unwrap_or(at));
                c.wakes = true;
            }
            Write::SetTimer { timer, due_at } => {
                c.timers.0.push(timer_key(timer)?);
                c.timers.1.push(due_at);
                c.wakes = true;
            }
            Write::OpenWait { step, reference } => {
                c.waits.0.push(step.to_owned());
                c.waits.1.push(reference.to_owned());
            }
            Write::Journal { kind, step, detail } => {
                let line = Line { kind: audit_kind(kind), step, detail: detail.into() };
                c.audit.0.push(line.kind.to_owned());
                c.audit.1.push(line.step.map(str::to_owned));
                c.audit.2.push(line.detail.into_owned());
            }
            // A new run has no rows to delete.
            Write::FinishWork { .. } | Write::ClearTimer { .. } | Write::CloseWait { .. } | Write::EndWork => {}
        }
    }
    Ok(Some(c))
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
/// handle outside any transaction, `Pool::begin_read`).
pub(crate) async fn admit(conn: &mut Tx, new: &NewRun, decision: &Decision) -> Result<AtOnce, StoreError> {
    let Some(c) = columns(&decision.actions, new.admitted_at)? else { return Ok(AtOnce::NotThisWay) };
    let mut args = run_args(new, decision);
    args.extend([
        Arg::Texts(c.work.0),
        Arg::Texts(c.work.1),
        Arg::Ints(c.work.2),
        Arg::Ints(c.work.3),
        Arg::Texts(c.timers.0),
        Arg::Ints(c.timers.1),
        Arg::Texts(c.waits.0),
        Arg::Texts(c.waits.1),
        Arg::Texts(c.audit.0),
        Arg::MaybeTexts(c.audit.1),
        Arg::Texts(c.audit.2),
        WORK_CHANNEL.into(),
        c.wakes.into(),
    ]);
    match conn.fetch_optional(ADMIT_PG, args).await? {
        Some(_) => Ok(AtOnce::Created),
        None => Ok(AtOnce::KeyTaken),
    }
}
