//! The grouped statements of a batch: writes of many decisions gathered per
//! kind of write (a statement each, `unnest` over arrays), deletes first,
//! then inserts (PostgreSQL; SQLite runs the same columns as JSON,
//! `batch_sqlite`), and which decisions may be grouped that way.

use std::collections::HashSet;
use std::sync::Arc;

use crate::StoreError;
use crate::commit_leases;
use crate::connections::{self, allowance::Pending};
use crate::db::{Arg, Row, Tx};
use crate::persist::{Write, timer_key};
use crate::types::EagerLease;

const FINISH_WORK_PG: &str = "DELETE FROM outbox o USING unnest($1::uuid[], $2::text[], $3::text[]) AS d(run_id, step, kind) \
     WHERE o.run_id = d.run_id AND o.step = d.step AND o.kind = d.kind";
const FINISH_ATTEMPT_PG: &str = "DELETE FROM outbox o \
     USING unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[]) AS d(run_id, step, kind, attempt) \
     WHERE o.run_id = d.run_id AND o.step = d.step AND o.kind = d.kind AND o.attempt = d.attempt";
const CLEAR_TIMERS_PG: &str = "DELETE FROM timers t USING unnest($1::uuid[], $2::text[]) AS d(run_id, timer) \
     WHERE t.run_id = d.run_id AND t.timer = d.timer";
const CLOSE_WAITS_PG: &str = "DELETE FROM waits w USING unnest($1::uuid[], $2::text[]) AS d(run_id, step) \
     WHERE w.run_id = d.run_id AND w.step = d.step";
const END_OUTBOX_PG: &str = "DELETE FROM outbox WHERE run_id = ANY($1)";
const END_TIMERS_PG: &str = "DELETE FROM timers WHERE run_id = ANY($1)";
const END_WAITS_PG: &str = "DELETE FROM waits WHERE run_id = ANY($1)";
/// Queues rows, each leased at once to `$8` until `$9` where `$7` says so
/// (eager dispatch, `commit_leases`), and returns them with their lease owner.
/// `$10` the connection of each, `$11` now: nothing is leased while any
/// connection is held back (paused, held, its breaker not closed).
const QUEUE_WORK_PG: &str = "WITH e AS (SELECT NOT EXISTS (SELECT 1 FROM connections c WHERE c.paused_at IS NOT NULL \
     OR c.hold_until > $11 OR c.breaker <> 'closed') AS ok) \
     INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, \
     claims, lane, conn) SELECT q.run_id, q.step, q.kind, q.attempt, q.not_before, \
     CASE WHEN q.eager AND (SELECT ok FROM e) THEN $8::text END, CASE WHEN q.eager AND (SELECT ok FROM e) THEN $9::bigint END, \
     CASE WHEN q.eager AND (SELECT ok FROM e) THEN 1 ELSE 0 END, q.lane, q.conn FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::bool[], \
     $10::text[]) AS q(run_id, step, kind, attempt, not_before, lane, eager, conn) \
     ON CONFLICT (run_id, step, kind) DO UPDATE SET attempt = excluded.attempt, \
     not_before = excluded.not_before, lease_owner = excluded.lease_owner, lease_until = excluded.lease_until, \
     claims = excluded.claims, lane = excluded.lane, conn = excluded.conn \
     RETURNING run_id, step, kind, attempt, not_before, claims, lease_owner";
const SET_TIMERS_PG: &str = "INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     SELECT s.run_id, s.timer, s.due_at, NULL, NULL FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS s(run_id, timer, due_at) \
     ON CONFLICT (run_id, timer) DO UPDATE SET due_at = excluded.due_at, lease_owner = NULL, lease_until = NULL";
const OPEN_WAITS_PG: &str = "INSERT INTO waits (run_id, step, reference) \
     SELECT w.run_id, w.step, w.reference FROM unnest($1::uuid[], $2::text[], $3::text[]) AS w(run_id, step, reference) \
     ON CONFLICT (run_id, step) DO UPDATE SET reference = excluded.reference";

/// The rows of one table a write touches, to find a decision that writes a
/// row twice (its writes must then keep their order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key<'a> {
    Outbox(&'a str, &'static str),
    Timer(String),
    Wait(&'a str),
}

/// Whether a decision's writes give the same result when every delete runs
/// before every insert: no row is written after it was inserted, and the run's
/// work is not ended after something was inserted.
pub(crate) fn groupable(writes: &[Write<'_>]) -> Result<bool, StoreError> {
    let mut inserted: HashSet<Key<'_>> = HashSet::new();
    for write in writes {
        let (key, insert) = match write {
            Write::QueueWork { step, kind, .. } => (Key::Outbox(step, kind.as_str()), true),
            Write::FinishWork { step, kind, .. } => (Key::Outbox(step, kind.as_str()), false),
            Write::SetTimer { timer, .. } => (Key::Timer(timer_key(timer)?), true),
            Write::ClearTimer { timer } => (Key::Timer(timer_key(timer)?), false),
            Write::OpenWait { step, .. } => (Key::Wait(step), true),
            Write::CloseWait { step } => (Key::Wait(step), false),
            Write::EndWork if inserted.is_empty() => continue,
            Write::EndWork => return Ok(false),
            Write::Journal { .. } => continue,
        };
        if inserted.contains(&key) {
            return Ok(false);
        }
        if insert {
            inserted.insert(key);
        }
    }
    Ok(true)
}

/// A text column of a grouped statement.
type Texts = Vec<String>;
/// A bigint column of a grouped statement.
type Ints = Vec<i64>;
/// A text column with NULLs of a grouped statement.
type MaybeTexts = Vec<Option<String>>;

/// Arrays of the grouped statements, one field per statement, each row's
/// run first (also the columns of a new run's one statement, `admissions_pg`).
#[derive(Default)]
pub(crate) struct Grouped {
    pub(crate) finish_work: (Texts, Texts, Texts),
    pub(crate) finish_attempt: (Texts, Texts, Texts, Ints),
    pub(crate) clear_timers: (Texts, Texts),
    pub(crate) close_waits: (Texts, Texts),
    pub(crate) end: Texts,
    /// Run, step, kind, attempt, not before, lane; whether the row is
    /// leased to the batch's worker as it is queued (`commit_leases`); its connection.
    pub(crate) queue_work: (Texts, Texts, Texts, Ints, Ints, MaybeTexts, Vec<bool>, MaybeTexts),
    pub(crate) set_timers: (Texts, Texts, Ints),
    pub(crate) open_waits: (Texts, Texts, Texts),
    /// The limited connections whose rows may be leased at once when their
    /// pace grants it in the batch's transaction ([`Grouped::lease_governed`]).
    governing: HashSet<String>,
    /// The queued rows (index in `queue_work`) of a `governing` connection a
    /// claim would take now: leased at once only as far as it grants.
    governed: Vec<(usize, String)>,
}

impl Grouped {
    /// Groups whose rows of the limited connections `names` may be leased
    /// at once as far as each grants ([`Grouped::lease_governed`]).
    pub(crate) fn governing(names: impl IntoIterator<Item = String>) -> Self {
        Grouped { governing: names.into_iter().collect(), ..Grouped::default() }
    }

    /// Adds `write` of `run`'s decision at `at`; a queued row is leased at
    /// once when `eager` (else the flag is unused).
    pub(crate) fn add(&mut self, run: &str, at: i64, write: &Write<'_>, eager: bool) -> Result<(), StoreError> {
        let r = run.to_owned();
        match write {
            Write::FinishWork { step, kind, attempt: None } => {
                push3(&mut self.finish_work, r, (*step).to_owned(), kind.as_str().to_owned());
            }
            Write::FinishWork { step, kind, attempt: Some(attempt) } => {
                let f = &mut self.finish_attempt;
                f.0.push(r);
                f.1.push((*step).to_owned());
                f.2.push(kind.as_str().to_owned());
                f.3.push(*attempt);
            }
            Write::ClearTimer { timer } => {
                self.clear_timers.0.push(r);
                self.clear_timers.1.push(timer_key(timer)?);
            }
            Write::CloseWait { step } => {
                self.close_waits.0.push(r);
                self.close_waits.1.push((*step).to_owned());
            }
            Write::EndWork => self.end.push(r),
            Write::QueueWork { step, kind, attempt, not_before, lane, conn } => {
                let q = &mut self.queue_work;
                q.0.push(r);
                q.1.push((*step).to_owned());
                q.2.push(kind.as_str().to_owned());
                q.3.push(*attempt);
                q.4.push(not_before.unwrap_or(at));
                q.5.push(lane.map(str::to_owned));
                q.6.push(eager);
                q.7.push(conn.map(str::to_owned));
            }
            Write::SetTimer { timer, due_at } => {
                let s = &mut self.set_timers;
                s.0.push(r);
                s.1.push(timer_key(timer)?);
                s.2.push(*due_at);
            }
            Write::OpenWait { step, reference } => {
                push3(&mut self.open_waits, r, (*step).to_owned(), (*reference).to_owned());
            }
            Write::Journal { .. } => {}
        }
        Ok(())
    }

    /// [`Grouped::add`] with `write` leased at once when a claim would take
    /// it now under `lease` (`commit_leases::leases`, for a run `held` or not) and
    /// `room` is left, taking one; returns whether it wakes workers (what no
    /// lease took, `Write::wakes`).
    pub(crate) fn add_offered(
        &mut self,
        run: &str,
        at: i64,
        write: &Write<'_>,
        held: bool,
        lease: Option<EagerLease>,
        room: &mut usize,
    ) -> Result<bool, StoreError> {
        if let Some(conn) = commit_leases::leases_in_lane(write, at, held, lease)
            && self.governing.contains(conn)
        {
            // Decided by `lease_governed`, which also wakes for what it leaves.
            self.governed.push((self.queue_work.0.len(), conn.to_owned()));
            self.add(run, at, write, false)?;
            return Ok(false);
        }
        let eager = *room > 0 && commit_leases::leases(write, at, held, lease);
        *room -= usize::from(eager);
        self.add(run, at, write, eager)?;
        Ok(write.wakes(at) && !eager)
    }

    /// Leases at once, of the rows of limited connections a claim would take
    /// now, what `owner`'s allowance of each grants in `tx` at `now`
    /// (`connections::eager`), at most `room` in all, in the order they were
    /// added; returns whether any is left for a claim (a wake-up), and the
    /// grants, held until the commit ends.
    pub(crate) async fn lease_governed(
        &mut self,
        tx: &mut Tx,
        memory: &Arc<connections::Memory>,
        owner: &str,
        room: usize,
        now: i64,
    ) -> Result<(bool, Pending), StoreError> {
        if self.governed.is_empty() {
            return Ok((false, Pending::default()));
        }
        let mut wanted: Vec<(String, u32)> = Vec::new();
        for (_, conn) in self.governed.iter().take(room) {
            match wanted.iter_mut().find(|(name, _)| name == conn) {
                Some((_, want)) => *want += 1,
                None => wanted.push((conn.clone(), 1)),
            }
        }
        let (mut granted, pending) = connections::eager::grant(tx, memory, owner, &wanted, now).await?;
        let mut left = false;
        for (i, conn) in &self.governed {
            match granted.get_mut(conn) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    self.queue_work.6[*i] = true;
                }
                _ => left = true,
            }
        }
        Ok((left, pending))
    }

    /// The deletes, one statement per kind that has rows: they run before
    /// any insert ([`groupable`]).
    pub(crate) async fn execute_deletes(&mut self, tx: &mut Tx) -> Result<(), StoreError> {
        let finish_work = std::mem::take(&mut self.finish_work);
        let finish_attempt = std::mem::take(&mut self.finish_attempt);
        let clear_timers = std::mem::take(&mut self.clear_timers);
        let close_waits = std::mem::take(&mut self.close_waits);
        let end = std::mem::take(&mut self.end);
        if !finish_work.0.is_empty() {
            let (a, b, c) = finish_work;
            tx.execute(FINISH_WORK_PG, vec![Arg::Ids(a), Arg::Texts(b), Arg::Texts(c)]).await?;
        }
        if !finish_attempt.0.is_empty() {
            let (a, b, c, d) = finish_attempt;
            tx.execute(FINISH_ATTEMPT_PG, vec![Arg::Ids(a), Arg::Texts(b), Arg::Texts(c), Arg::Ints(d)]).await?;
        }
        if !clear_timers.0.is_empty() {
            tx.execute(CLEAR_TIMERS_PG, vec![Arg::Ids(clear_timers.0), Arg::Texts(clear_timers.1)]).await?;
        }
        if !close_waits.0.is_empty() {
            tx.execute(CLOSE_WAITS_PG, vec![Arg::Ids(close_waits.0), Arg::Texts(close_waits.1)]).await?;
        }
        if !end.is_empty() {
            for sql in [END_OUTBOX_PG, END_TIMERS_PG, END_WAITS_PG] {
                tx.execute(sql, vec![Arg::Ids(end.clone())]).await?;
            }
        }
        Ok(())
    }

    /// The inserts, one statement per kind that has rows, after
    /// [`Grouped::execute_deletes`]. Returns the queued rows
    /// (`QUEUE_WORK_PG`'s columns), the eager ones leased to `owner` until `until`.
    pub(crate) async fn execute_inserts(
        self,
        tx: &mut Tx,
        owner: &str,
        until: i64,
        now: i64,
    ) -> Result<Vec<Row>, StoreError> {
        let Grouped { queue_work, set_timers, open_waits, .. } = self;
        let mut queued = Vec::new();
        if !queue_work.0.is_empty() {
            let (a, b, c, d, e, f, g, h) = queue_work;
            let args = vec![
                Arg::Ids(a),
                Arg::Texts(b),
                Arg::Texts(c),
                Arg::Ints(d),
                Arg::Ints(e),
                Arg::MaybeTexts(f),
                Arg::Flags(g),
                owner.into(),
                until.into(),
                Arg::MaybeTexts(h),
                now.into(),
            ];
            queued = tx.fetch_all(QUEUE_WORK_PG, args).await?;
        }
        if !set_timers.0.is_empty() {
            let (a, b, c) = set_timers;
            tx.execute(SET_TIMERS_PG, vec![Arg::Ids(a), Arg::Texts(b), Arg::Ints(c)]).await?;
        }
        if !open_waits.0.is_empty() {
            let (a, b, c) = open_waits;
            tx.execute(OPEN_WAITS_PG, vec![Arg::Ids(a), Arg::Texts(b), Arg::Texts(c)]).await?;
        }
        Ok(queued)
    }
}

fn push3(v: &mut (Texts, Texts, Texts), a: String, b: String, c: String) {
    v.0.push(a);
    v.1.push(b);
    v.2.push(c);
}
