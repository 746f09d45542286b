//! New runs in one statement (PostgreSQL): each run row, its first
//! decision's outbox rows, timers, waits and audit entries, and the wake-up
//! of other processes (announced after it committed, [`db::notify::Announcer`](crate::db::notify::Announcer)), as
//! one `INSERT … ` with data-modifying `WITH` parts over arrays (`unnest`),
//! sent outside any explicit transaction — the statement is its own
//! transaction, so any number of admissions cost one round trip and one
//! commit instead of a `BEGIN`, a statement per table and a `COMMIT` each.
//!
//! The runs are new, so none of their rows exist: a delete in a first
//! decision has nothing to remove and is skipped. A first decision whose
//! writes must keep their order ([`grouped::groupable`](crate::grouped::groupable) says no) is not sent this
//! way; nor is an admission from a trigger event (its event row is written in
//! the same transaction, [`Store::admit_in`](crate::Store::admit_in)). A run whose idempotency key was
//! taken first — by an earlier admission or by another of the same statement
//! (`ON CONFLICT DO NOTHING` keeps the first row of a key) — is not written,
//! and the caller reads what the key admitted.
//!
//! Eager dispatch (`commit_leases`): given a lease, a first decision's rows that a
//! claim would take at once are inserted leased to the admitting process's
//! worker (at most the lease's rows) and handed back with the run, so the
//! first step needs no claim round. Rows of a connection under `limits` are
//! leased as far as its pace grants (`connections::eager`): that needs the
//! connection row's lock until the admission commits, so such admissions
//! are sent in a transaction of their own (`Store::admit_guarded_batch`).

use crate::StoreError;
use crate::audit::Line;
use crate::audit::rows;
use crate::batch::Governing;
use crate::claims::in_work_order;
use crate::commit_leases;
use crate::connections::allowance::Pending;
use crate::db::{Arg, Tx};
use crate::grouped::{Grouped, groupable};
use crate::persist::{Write, decision_writes};
use crate::snapshot_frame;
use crate::types::{ClaimedRun, Decision, EagerLease, NewRun, WorkItem, WorkKind};

/// The statement: the runs (`i`, `$1`–`$14`), the keys of those that have one
/// (`k`), the run rows whose key was taken for them (`r`), then their first
/// decisions' rows, each naming its run (outbox `$15`–`$22`, each row leased
/// at once where `$21` says so, to `$23` until `$22`; timers `$24`–`$26`;
/// waits `$27`–`$29`; journal rows `$30`–`$34`; each outbox row's connection
/// `$35`; now `$36`: nothing is leased while any connection is held back,
/// `e`, which each returned row says; search keys `$37`–`$39`, `s`). `$gate` (a literal, `""` for
/// none) is a condition on each run of `i`. `'attention'` is
/// `RunState::Attention.as_str()` (a test in `runs` keeps them equal).
macro_rules! admit_pg_sql {
    ($gate:expr) => {
        concat!(
            "WITH i AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], \
     $6::text[], $7::text[], $8::bool[], $9::bigint[], $10::bytea[], $11::text[], $12::text[], $13::text[], \
     $14::bytea[]) AS i(id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at, \
     snapshot, trace_parent, outcome, attention_step, snapshot_base)",
            $gate,
            "), \
   k AS (INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     SELECT owner, workflow, idempotency_key, id FROM i WHERE idempotency_key IS NOT NULL \
     ON CONFLICT (owner, workflow, idempotency_key) DO NOTHING RETURNING run_id), \
   r AS (INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, \
     admitted_at, updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since, \
     snapshot_base) \
     SELECT id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at, admitted_at, 1, \
     snapshot, trace_parent, outcome, attention_step, CASE WHEN state = 'attention' THEN admitted_at END, \
     snapshot_base FROM i WHERE idempotency_key IS NULL OR id IN (SELECT run_id FROM k) RETURNING id), \
   s AS (INSERT INTO run_keys (name, value, run_id) \
     SELECT s.name, s.value, s.run_id FROM unnest($37::uuid[], $38::text[], $39::text[]) AS s(run_id, name, value) \
     WHERE s.run_id IN (SELECT id FROM r)), \
   e AS (SELECT NOT EXISTS (SELECT 1 FROM connections c WHERE c.paused_at IS NOT NULL OR c.hold_until > $36 \
     OR c.breaker <> 'closed') AS ok), \
   q AS (INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, claims, lane, \
     conn) SELECT q.run_id, q.step, q.kind, q.attempt, q.not_before, \
     CASE WHEN q.eager AND (SELECT ok FROM e) THEN $23::text END, CASE WHEN q.eager AND (SELECT ok FROM e) THEN q.until END, \
     CASE WHEN q.eager AND (SELECT ok FROM e) THEN 1 ELSE 0 END, q.lane, q.conn \
     FROM unnest($15::uuid[], $16::text[], $17::text[], $18::bigint[], $19::bigint[], $20::text[], $21::bool[], \
     $22::bigint[], $35::text[]) AS q(run_id, step, kind, attempt, not_before, lane, eager, until, conn) \
     WHERE q.run_id IN (SELECT id FROM r)), \
   t AS (INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT t.run_id, t.timer, t.due_at, NULL, NULL FROM unnest($24::uuid[], $25::text[], $26::bigint[]) \
     AS t(run_id, timer, due_at) WHERE t.run_id IN (SELECT id FROM r)), \
   w AS (INSERT INTO waits (run_id, step, reference) \
     SELECT w.run_id, w.step, w.reference FROM unnest($27::uuid[], $28::text[], $29::text[]) \
     AS w(run_id, step, reference) WHERE w.run_id IN (SELECT id FROM r)), \
   a AS (INSERT INTO audit (run_id, at, kind, step, detail, actor, more) \
     SELECT a.run_id, i.admitted_at, a.kind, a.step, a.detail, i.owner, a.more \
     FROM unnest($30::uuid[], $31::text[], $32::text[], $33::text[], $34::text[]) WITH ORDINALITY \
     AS a(run_id, kind, step, detail, more, n) JOIN i ON i.id = a.run_id \
     WHERE a.run_id IN (SELECT id FROM r) ORDER BY a.n) \
   SELECT id::text, (SELECT ok FROM e) FROM r"
        )
    };
}

/// New runs, their keys and their first decisions' rows.
pub(crate) const ADMIT_PG: &str = admit_pg_sql!("");
/// The same, each run only while its admission's gate is open: no restore
/// hold placed and its revision the active one of its workflow (`Store::admit_guarded`).
const ADMIT_GUARDED_PG: &str = admit_pg_sql!(
    " WHERE NOT EXISTS (SELECT 1 FROM restore_hold WHERE singleton = 1) \
     AND EXISTS (SELECT 1 FROM active_revisions a WHERE a.workflow = i.workflow AND a.revision = i.revision)"
);

/// One new run to admit: its row, its first decision, and the lease its
/// at-once rows may be taken under (eager dispatch; none: nothing is leased).
pub(crate) struct Admitting<'a> {
    pub(crate) new: &'a NewRun,
    pub(crate) decision: &'a Decision,
    pub(crate) lease: Option<EagerLease>,
}

/// What became of one run of a one-statement admission.
pub(crate) enum AtOnce {
    /// The run was created with its first decision's writes, committed; with
    /// the rows leased at once (eager dispatch), in claim order.
    Created(Vec<(WorkItem, ClaimedRun)>),
    /// The idempotency key was taken first, or the gate was closed: nothing
    /// was written for this run.
    KeyTaken,
    /// The first decision cannot be written this way: use a transaction.
    NotThisWay,
}

/// The runs' columns of the statement (`$1`–`$14`; SQLite's, `admissions_sqlite`, as JSON).
#[derive(Default)]
pub(crate) struct Runs {
    pub(crate) id: Vec<String>,
    pub(crate) workflow: Vec<String>,
    pub(crate) revision: Vec<String>,
    pub(crate) owner: Vec<String>,
    pub(crate) key: Vec<Option<String>>,
    pub(crate) digest: Vec<String>,
    pub(crate) state: Vec<String>,
    pub(crate) held: Vec<bool>,
    pub(crate) admitted_at: Vec<i64>,
    pub(crate) head: Vec<Vec<u8>>,
    pub(crate) trace_parent: Vec<Option<String>>,
    pub(crate) outcome: Vec<Option<String>>,
    pub(crate) attention_step: Vec<Option<String>>,
    pub(crate) base: Vec<Option<Vec<u8>>>,
}

impl Runs {
    pub(crate) fn push(&mut self, new: &NewRun, decision: &Decision) -> Result<(), StoreError> {
        if uuid::Uuid::try_parse(&new.id).is_err() {
            return Err(StoreError::InvalidRunId(new.id.clone()));
        }
        let (head, base) = snapshot_frame::columns(&decision.snapshot)?;
        self.id.push(new.id.clone());
        self.workflow.push(new.workflow.clone());
        self.revision.push(new.revision.clone());
        self.owner.push(new.owner.clone());
        self.key.push(new.idempotency_key.clone());
        self.digest.push(new.input_digest.clone());
        self.state.push(decision.state.as_str().to_owned());
        self.held.push(decision.held);
        self.admitted_at.push(new.admitted_at);
        self.head.push(head);
        self.trace_parent.push(new.trace_parent.clone());
        self.outcome.push(decision.outcome.clone());
        self.attention_step.push(decision.attention_step.clone());
        self.base.push(base);
        Ok(())
    }

    fn args(self) -> Vec<Arg> {
        vec![
            Arg::Ids(self.id),
            Arg::Texts(self.workflow),
            Arg::Texts(self.revision),
            Arg::Texts(self.owner),
            Arg::MaybeTexts(self.key),
            Arg::Texts(self.digest),
            Arg::Texts(self.state),
            Arg::Flags(self.held),
            Arg::Ints(self.admitted_at),
            Arg::Blobs(self.head),
            Arg::MaybeTexts(self.trace_parent),
            Arg::MaybeTexts(self.outcome),
            Arg::MaybeTexts(self.attention_step),
            Arg::MaybeBlobs(self.base),
        ]
    }
}

/// Adds the first decision's writes of `a` to `grouped` (its deletes are
/// collected and not used: a new run has no rows to delete) and its journal
/// lines to `journal`, with the lease's end of each queued row to `until`;
/// `Ok(None)` when its writes must keep their order, else whether anything
/// it queued is left for a claim (a wake-up). Rows a claim would take at once
/// are leased under `a.lease`, at most its rows.
pub(crate) fn add_writes<'a>(
    a: &Admitting<'a>,
    grouped: &mut Grouped,
    journal: &mut Vec<(&'a str, Line<'a>)>,
    until: &mut Vec<i64>,
) -> Result<Option<bool>, StoreError> {
    let all: Vec<Write<'a>> = decision_writes(&a.decision.actions, &a.decision.lanes, &a.decision.connections);
    if !groupable(&all)? {
        return Ok(None);
    }
    let (mut room, mut wakes) = (a.lease.map_or(0, |l| l.rows), false);
    for write in &all {
        match write.journal_line() {
            Some(line) => journal.push((a.new.id.as_str(), line)),
            None => {
                wakes |=
                    grouped.add_offered(&a.new.id, a.new.admitted_at, write, a.decision.held, a.lease, &mut room)?;
            }
        }
    }
    until.resize(grouped.queue_work.0.len(), a.lease.map_or(0, |l| l.until));
    Ok(Some(wakes))
}

/// Admits each of `runs` with its first decision in one statement on `conn`
/// (a PostgreSQL handle outside any transaction, `Pool::begin_read`, or a
/// transaction when rows of connections under `limits` may be leased);
/// `guarded`: each only while its admission's gate is open (no hold, its
/// revision active), else [`AtOnce::KeyTaken`] stands for either. Rows leased
/// at once are leased to `owner`. One answer per run, in order.
pub(crate) async fn admit(
    conn: &mut Tx,
    runs: &[Admitting<'_>],
    guarded: bool,
    owner: Option<&str>,
    governing: &Governing<'_>,
) -> Result<(Vec<AtOnce>, Pending), StoreError> {
    let (mut columns, mut grouped, mut journal, mut until) =
        (Runs::default(), Grouped::governing(governing.limited.iter().cloned()), Vec::new(), Vec::new());
    let (mut sent, mut wakes) = (Vec::with_capacity(runs.len()), false);
    for a in runs {
        match add_writes(a, &mut grouped, &mut journal, &mut until)? {
            Some(w) => {
                columns.push(a.new, a.decision)?;
                wakes |= w;
                sent.push(true);
            }
            None => sent.push(false),
        }
    }
    if columns.id.is_empty() {
        return Ok((runs.iter().map(|_| AtOnce::NotThisWay).collect(), Pending::default()));
    }
    let now = runs.iter().map(|a| a.new.admitted_at).max().unwrap_or(0);
    let room = runs.iter().filter_map(|a| a.lease).map(|l| l.rows).sum();
    let (left, pending) = grouped.lease_governed(conn, governing.memory, owner.unwrap_or(""), room, now).await?;
    wakes |= left;
    // The journal's rows (`audit::rows`): each run's lines, at most GROUP_MAX a row.
    let lines: Vec<(Option<&str>, &Line<'_>)> = journal.iter().map(|(run, l)| (Some(*run), l)).collect();
    let (firsts, mores) = rows::pending(&lines)?;
    let mut args = columns.args();
    let q = &grouped.queue_work;
    args.extend([
        Arg::Ids(q.0.clone()),
        Arg::Texts(q.1.clone()),
        Arg::Texts(q.2.clone()),
        Arg::Ints(q.3.clone()),
        Arg::Ints(q.4.clone()),
        Arg::MaybeTexts(q.5.clone()),
        Arg::Flags(q.6.clone()),
        Arg::Ints(until),
        owner.into(),
        Arg::Ids(std::mem::take(&mut grouped.set_timers.0)),
        Arg::Texts(std::mem::take(&mut grouped.set_timers.1)),
        Arg::Ints(std::mem::take(&mut grouped.set_timers.2)),
        Arg::Ids(std::mem::take(&mut grouped.open_waits.0)),
        Arg::Texts(std::mem::take(&mut grouped.open_waits.1)),
        Arg::Texts(std::mem::take(&mut grouped.open_waits.2)),
        Arg::Ids(firsts.iter().map(|(run, _)| run.unwrap_or_default().to_owned()).collect()),
        Arg::Texts(firsts.iter().map(|(_, l)| l.kind.to_owned()).collect()),
        Arg::MaybeTexts(firsts.iter().map(|(_, l)| l.step.as_deref().map(str::to_owned)).collect()),
        Arg::Texts(firsts.iter().map(|(_, l)| l.detail.clone().into_owned()).collect()),
        Arg::MaybeTexts(mores),
        Arg::MaybeTexts(q.7.clone()),
        now.into(),
    ]);
    args.extend(crate::search_keys::columns(runs.iter().zip(&sent).filter(|(_, sent)| **sent).map(|(a, _)| a.new)));
    let sql = if guarded { ADMIT_GUARDED_PG } else { ADMIT_PG };
    let mut created = std::collections::HashSet::new();
    let mut leasing = true;
    for row in conn.fetch_all(sql, args).await? {
        created.insert(row.get::<String>(0)?);
        leasing &= row.get::<bool>(1)?;
    }
    if wakes && !created.is_empty() {
        conn.announce_after_commit();
    }
    let answers = runs
        .iter()
        .zip(sent)
        .map(|(a, sent)| match (sent, created.contains(&a.new.id)) {
            (false, _) => AtOnce::NotThisWay,
            (true, false) => AtOnce::KeyTaken,
            (true, true) if leasing => AtOnce::Created(leased_rows(a.new, a.decision, &grouped)),
            (true, true) => AtOnce::Created(Vec::new()),
        })
        .collect();
    Ok((answers, pending))
}

/// The rows `g` queues for `new`'s run leased, as a claim of the new run would return them.
fn leased_rows(new: &NewRun, decision: &Decision, g: &Grouped) -> Vec<(WorkItem, ClaimedRun)> {
    let q = &g.queue_work;
    let committed = commit_leases::Committed {
        revision: &new.revision,
        snapshot: &decision.snapshot,
        trace_parent: new.trace_parent.as_deref(),
    };
    let rows = (0..q.6.len()).filter(|&i| q.6[i] && q.0[i] == new.id).filter_map(|i| {
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
