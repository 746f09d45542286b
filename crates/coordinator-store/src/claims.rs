//! Leases: workers claiming due outbox and timer rows, the fencing check that
//! keeps a worker who lost its lease from applying, and when work is next due.
//!
//! A claim sets `lease_owner` and `lease_until` on rows that are due, not
//! leased (or whose lease expired) and belong to runs without a restore hold.
//! On PostgreSQL claimers skip each other's rows (`FOR UPDATE SKIP LOCKED`);
//! on SQLite the claim runs inside `BEGIN IMMEDIATE`, so claimers serialise.
//! A claim is finished by the decision that deletes its row (through
//! `Store::apply_fenced`), never here. This module must not change snapshots
//! or run rows.
//!
//! Every claim of an outbox row increments its `claims` count; queueing the
//! row (a new attempt) resets it and [`Store::release`] gives one back. A claim
//! that leaves it above 1 is `reclaimed`: an earlier claim ran out without a
//! report, so that worker may have sent the request.
//!
//! A row in a lane (a remote connection's, migration 0016) is not claimed
//! here while it waits for an offer (`remote`); once its lease ran out (an
//! offer not acquired, a remote lease not reported) it is claimed here like
//! any other, and the engine decides what becomes of it (`Store::relane`).
//!
//! No claim takes a row whose connection an operator paused, and when work
//! is next due is read without them ([`connections`](crate::connections)).

use crate::db::{Arg, Dialect, Pool, Row, Tx, Writer};
use crate::persist::{parse_timer, timer_key};
use crate::types::{Claim, ClaimLimits, ClaimedRun, Due, RunWork, TimerItem, WorkItem, WorkKind, WorkScope};
use crate::{Store, StoreError, snapshot_frame, wakeups};

/// A claim of outbox rows: `$1` owner, `$2` lease end, `$3` now, `$5` 1 for
/// receipts only; `$rows` says which rows, `$order` and `$limit` how many
/// and which first, `$lock` is PostgreSQL's row-lock clause, `$run` more
/// returned columns (SQLite's claim names the run's, or none). With a
/// leading `$pick` and `$close`, how the `UPDATE` names the rows its read
/// picked (PostgreSQL: `pick_pg!`); without, by `(run_id, step, kind) IN (…)`.
macro_rules! claim_work_sql {
    ($rows:literal, $order:literal, $limit:literal, $lock:literal, $run:expr) => {
        claim_work_sql!(
            "(run_id, step, kind) IN (SELECT o.run_id, o.step, o.kind",
            ")",
            $rows,
            $order,
            $limit,
            $lock,
            $run
        )
    };
    ($pick:expr, $close:literal, $rows:literal, $order:literal, $limit:literal, $lock:literal, $run:expr) => {
        concat!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2, claims = claims + 1 WHERE ",
            $pick,
            " FROM outbox o JOIN runs r ON r.id = o.run_id WHERE ",
            $rows,
            " AND (NOT r.held OR o.kind = 'receipt') AND ($5 = 0 OR o.kind = 'receipt') AND ",
            crate::connections::not_blocked!("o.conn", "$3"),
            " ORDER BY ",
            $order,
            " LIMIT ",
            $limit,
            $lock,
            $close,
            " RETURNING run_id, step, kind, attempt, not_before, claims",
            $run
        )
    };
}

/// How PostgreSQL's claims name the rows they lease: by `ctid`, from an array
/// their locking read fills once (an `InitPlan`). Named by `IN (SELECT …
/// LIMIT n FOR UPDATE SKIP LOCKED)`, the read could be planned as the inner
/// side of a join and run again for every outer row: planned once per
/// connection while the queue was empty (a worker idle for 30 s), each claim
/// then took 1–4.7 s with thousands of rows waiting, leased more than `n`
/// rows, and the second part's `LIMIT $4 - count` went negative and failed the
/// claim (bench/RESULTS.md, tenth sitting). The rows are locked by the read,
/// so their `ctid` cannot change before the `UPDATE` in the same statement.
macro_rules! pick_pg {
    ($alias:literal) => {
        concat!("ctid = ANY(ARRAY(SELECT ", $alias, ".ctid")
    };
}

/// PostgreSQL's claim of outbox rows, as `WITH` parts ending in
/// `claimed_work` (`$4` the limit): unleased due rows without a lane from the
/// partial index `outbox_unleased` (its predicate spelled out), then rows of
/// any lane whose lease ran out (`outbox_leased`) up to the same limit. Two reads, so neither steps over the other's rows:
/// a claim in one index order would step over every row in flight (leased,
/// not yet reported) that is older than the first unleased one.
macro_rules! claimed_work_pg {
    () => {
        concat!(
            "claimed_fresh AS (",
            claim_work_sql!(
                pick_pg!("o"),
                "))",
                "o.lease_until IS NULL AND o.lane IS NULL AND o.not_before <= $3",
                "o.not_before, o.run_id, o.step, o.kind",
                "$4",
                " FOR UPDATE OF o SKIP LOCKED",
                ""
            ),
            "), claimed_expired AS (",
            claim_work_sql!(
                pick_pg!("o"),
                "))",
                "o.lease_until < $3 AND (o.lane IS NULL OR NOT (split_part(o.lane, '/', 1) = ANY($7::text[])))",
                "o.lease_until, o.run_id, o.step, o.kind",
                "$4 - (SELECT count(*) FROM claimed_fresh)",
                " FOR UPDATE OF o SKIP LOCKED",
                ""
            ),
            "), claimed_work AS (SELECT * FROM claimed_fresh UNION ALL SELECT * FROM claimed_expired)"
        )
    };
}

/// The claim of due timers: `$1` owner, `$2` lease end, `$3` now, `$limit`
/// the placeholder of the limit; `$lock` as in `claim_work_sql`. One read in
/// claim order (`timers_claim_order`), so a run's timers are claimed in
/// their order; `$run` more returned columns (as in `claim_work_sql`).
macro_rules! claim_timers_sql {
    ($limit:literal, $lock:literal, $run:expr) => {
        claim_timers_sql!("(run_id, timer) IN (SELECT t.run_id, t.timer", ")", $limit, $lock, $run)
    };
    ($pick:expr, $close:literal, $limit:literal, $lock:literal, $run:expr) => {
        concat!(
            "UPDATE timers SET lease_owner = $1, lease_until = $2 WHERE ",
            $pick,
            " FROM timers t JOIN runs r ON r.id = t.run_id \
             WHERE t.due_at <= $3 AND (t.lease_until IS NULL OR t.lease_until < $3) AND NOT r.held \
             ORDER BY t.due_at, t.run_id, t.timer LIMIT ",
            $limit,
            $lock,
            $close,
            " RETURNING run_id, timer, due_at",
            $run
        )
    };
}

/// The earliest instant any claimable row becomes due: the first unleased row
/// without a lane in claim order (`outbox_unleased`), and the first lease to
/// run out, of any lane (a leased row was due when it was claimed, so it is
/// claimable again the moment its lease ends). Each part
/// reads one index in order and stops at the first row of a run without a
/// hold, so it costs the same with 100 000 waiting rows as with ten.
/// `$scope` is the placeholder of "1 for receipts only"; `$work` and `$timer`
/// add conditions on outbox rows `o` and timers `t`, `$more` more candidates.
macro_rules! next_due_sql {
    ($scope:literal, $now:literal, $work:literal, $timer:literal, $more:literal) => {
        concat!(
            "SELECT MIN(due) FROM (\
             SELECT (SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id \
               WHERE o.lease_until IS NULL AND o.lane IS NULL AND (NOT r.held OR o.kind = 'receipt') \
               AND (",
            $scope,
            " = 0 OR o.kind = 'receipt') AND ",
            crate::connections::not_blocked!("o.conn", $now),
            $work,
            " ORDER BY o.not_before LIMIT 1) AS due \
             UNION ALL SELECT (SELECT o.lease_until + 1 FROM outbox o JOIN runs r ON r.id = o.run_id \
               WHERE o.lease_until IS NOT NULL AND (NOT r.held OR o.kind = 'receipt') \
               AND (",
            $scope,
            " = 0 OR o.kind = 'receipt') AND ",
            crate::connections::not_blocked!("o.conn", $now),
            $work,
            " ORDER BY o.lease_until LIMIT 1) \
             UNION ALL SELECT (SELECT t.due_at FROM timers t JOIN runs r ON r.id = t.run_id \
               WHERE t.lease_until IS NULL AND NOT r.held AND ",
            $scope,
            " = 0",
            $timer,
            " ORDER BY t.due_at LIMIT 1) \
             UNION ALL SELECT (SELECT t.lease_until + 1 FROM timers t JOIN runs r ON r.id = t.run_id \
               WHERE t.lease_until IS NOT NULL AND NOT r.held AND ",
            $scope,
            " = 0",
            $timer,
            " \
               ORDER BY t.lease_until LIMIT 1) \
             UNION ALL SELECT (SELECT MIN(CASE WHEN c.hold_until > ",
            $now,
            " THEN c.hold_until ELSE c.probe_at END) FROM connections c WHERE c.paused_at IS NULL AND (c.hold_until > ",
            $now,
            " OR (c.breaker = 'open' AND c.probe_at > ",
            $now,
            ")))",
            $more,
            ") AS pending"
        )
    };
}

/// `$4` the limit, `$6` the lanes of limited connections (a JSON array: their
/// rows, expired leases included, are claimed under their limits,
/// `connections::limits`). SQLite deletes in place and serialises claimers,
/// so one read in claim order (`outbox_claim_order`) serves; it steps over
/// the rows waiting in a lane.
const CLAIM_WORK_SQLITE: &str = claim_work_sql!(
    "o.not_before <= $3 AND ((o.lease_until IS NULL AND o.lane IS NULL) OR (o.lease_until < $3 \
     AND (o.lane IS NULL OR (CASE WHEN instr(o.lane, '/') > 0 THEN substr(o.lane, 1, instr(o.lane, '/') - 1) \
     ELSE o.lane END) NOT IN (SELECT l.value FROM json_each($6) AS l))))",
    "o.not_before, o.run_id, o.step, o.kind",
    "$4",
    "",
    // The claimed row's run as more returned columns. PostgreSQL's claim joins
    // `runs` once after its claims instead (`CLAIM_DUE_PG`): each reference to
    // the partitioned table is planned over every partition.
    ", (SELECT r.revision FROM runs r WHERE r.id = outbox.run_id) AS revision, \
     (SELECT r.snapshot FROM runs r WHERE r.id = outbox.run_id) AS snapshot, \
     (SELECT r.trace_parent FROM runs r WHERE r.id = outbox.run_id) AS trace_parent, \
     (SELECT r.snapshot_base FROM runs r WHERE r.id = outbox.run_id) AS snapshot_base"
);
const CLAIM_TIMERS_SQLITE: &str = claim_timers_sql!(
    "$4",
    "",
    ", (SELECT r.revision FROM runs r WHERE r.id = timers.run_id) AS revision, \
     (SELECT r.trace_parent FROM runs r WHERE r.id = timers.run_id) AS trace_parent"
);
/// `$1`: 1 for receipts only; `$2` now.
const NEXT_DUE: &str = next_due_sql!("$1", "$2", "", "", "");
/// Both claims and what is due after them, in one statement (in a transaction of its own, planned as `CLAIM_PLAN_PG` says):
/// transaction): `$1`–`$5` as in `claim_work_sql`, `$6` the timer limit, `$7`
/// the lanes of limited connections (claimed apart, `connections::limits`). Every
/// part reads the snapshot before the claims, so the rows claimed now are left
/// out of the next due instant, and their new lease counts instead. Rows:
/// `work` (run, step, kind, attempt, not_before, claims, revision, snapshot,
/// trace_parent, snapshot_base), `timer` (run, timer, due_at in the not_before column,
/// revision, trace_parent), and one `next` (the instant in the not_before column).
const CLAIM_DUE_PG: &str = concat!(
    "WITH ",
    claimed_work_pg!(),
    ", claimed_timers AS (",
    claim_timers_sql!(pick_pg!("t"), "))", "$6", " FOR UPDATE OF t SKIP LOCKED", ""),
    ") SELECT 'work', c.run_id, c.step, c.kind, c.attempt, c.not_before, c.claims, r.revision, r.snapshot, \
     r.trace_parent, r.snapshot_base FROM claimed_work c LEFT JOIN runs r ON r.id = c.run_id \
     UNION ALL SELECT 'timer', c.run_id, c.timer, NULL, NULL, c.due_at, NULL, r.revision, NULL, r.trace_parent, NULL \
     FROM claimed_timers c LEFT JOIN runs r ON r.id = c.run_id \
     UNION ALL SELECT 'next', NULL, NULL, NULL, NULL, (",
    next_due_sql!(
        "$5",
        "$3",
        " AND NOT EXISTS (SELECT 1 FROM claimed_work c WHERE c.run_id = o.run_id AND c.step = o.step AND c.kind = o.kind)",
        " AND NOT EXISTS (SELECT 1 FROM claimed_timers c WHERE c.run_id = t.run_id AND c.timer = t.timer)",
        " UNION ALL SELECT $2 + 1 WHERE EXISTS (SELECT 1 FROM claimed_work) OR EXISTS (SELECT 1 FROM claimed_timers)"
    ),
    "), NULL, NULL, NULL, NULL, NULL"
);
/// The claim's plan on PostgreSQL, for its transaction only: read the queue
/// indexes in claim order and stop at the limit. The queue tables change
/// faster than their statistics: planned from statistics a second old (or
/// none yet), a claim of 32 rows read all 4 500 due rows through a bitmap
/// scan, joined each to its run and sorted them, 15 000 buffers and 9 ms
/// (the throughput bench); in index order it reads about the rows it claims.
/// And plan it once per connection: left to choose, PostgreSQL planned the
/// statement afresh for every claim (its eleven references to the
/// partitioned `runs` each expand to every partition), 5.9 ms of planning
/// against 3 ms of execution per claim (`pg_stat_statements` with
/// `track_planning`); the generic plan prunes `runs`' partitions as it runs.
const CLAIM_PLAN_PG: &str = "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true), \
     set_config('plan_cache_mode', 'force_generic_plan', true)";
const RELEASE_WORK: &str = "UPDATE outbox SET lease_owner = NULL, lease_until = NULL, \
     claims = CASE WHEN claims > 0 THEN claims - 1 ELSE 0 END \
     WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4 AND lease_owner = $5";
const RELEASE_TIMER: &str = "UPDATE timers SET lease_owner = NULL, lease_until = NULL \
     WHERE run_id = $1 AND timer = $2 AND due_at = $3 AND lease_owner = $4";
const LEASED_WORK_SQLITE: &str = "SELECT 1 FROM outbox \
     WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4 AND lease_owner = $5";
const LEASED_WORK_PG: &str = "SELECT 1 FROM outbox \
     WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4 AND lease_owner = $5 FOR UPDATE";
const LEASED_TIMER_SQLITE: &str = "SELECT 1 FROM timers \
     WHERE run_id = $1 AND timer = $2 AND due_at = $3 AND lease_owner = $4";
const LEASED_TIMER_PG: &str = "SELECT 1 FROM timers \
     WHERE run_id = $1 AND timer = $2 AND due_at = $3 AND lease_owner = $4 FOR UPDATE";
const RUN_OUTBOX: &str = "SELECT step, kind, attempt, not_before FROM outbox WHERE run_id = $1 ORDER BY step, kind";
const RUN_TIMERS: &str = "SELECT timer, due_at FROM timers WHERE run_id = $1 ORDER BY timer";
const RUN_AUDIT: &str = "SELECT kind, step, detail, more FROM audit WHERE run_id = $1 ORDER BY seq";

/// `$5` of the claim statements: 1 for receipt lookups only.
impl WorkScope {
    fn receipts_only(self) -> i64 {
        i64::from(self == WorkScope::ReceiptsOnly)
    }
}

impl Store {
    /// Claims up to `limit` due outbox rows for `owner` until `now + lease_ms`:
    /// rows with `not_before <= now`, no live lease, of runs without a restore
    /// hold. Ordered by `not_before`. An item is [`WorkItem::reclaimed`] when an
    /// earlier claim of the same row ran out without finishing or releasing it.
    pub async fn claim_work(
        &self,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<WorkItem>, StoreError> {
        self.claim_work_in(WorkScope::All, now, owner, lease_ms, limit).await
    }

    /// [`Store::claim_work`] limited to `scope`. Receipt lookups are claimed
    /// on held runs too: they only read, and settle unknown effects under review.
    pub async fn claim_work_in(
        &self,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<WorkItem>, StoreError> {
        let claimed = self.claim_work_with_runs(scope, now, owner, lease_ms, limit).await?;
        Ok(claimed.into_iter().map(|(item, _)| item).collect())
    }

    /// [`Store::claim_work_in`], each item with its run as the claim read it
    /// (revision, snapshot and trace parent), so doing the work needs no read of its own.
    /// The snapshot may be older than the run by the time the work is
    /// reported: the report's fence and the machine decide on the locked run.
    pub async fn claim_work_with_runs(
        &self,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
        let limits = ClaimLimits { timers: 0, work: limit };
        Ok(self.claim_due(scope, now, owner, lease_ms, limits).await?.work)
    }

    /// Claims up to `limit` due timers for `owner` until `now + lease_ms`, like
    /// [`Store::claim_work`]. Timers of held runs are not claimed (the machine
    /// ignores them under a hold). Ordered by due time, then the precedence of docs/reference/runs.md#waits.
    pub async fn claim_timers(
        &self,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<TimerItem>, StoreError> {
        let limits = ClaimLimits { timers: limit, work: 0 };
        Ok(self.claim_due(WorkScope::All, now, owner, lease_ms, limits).await?.timers)
    }

    /// One round of a worker: claims due timers (none when `scope` is
    /// receipts only) and due outbox rows with their runs, up to `limits`, and
    /// says when the next claim could return something — all at one moment.
    /// On PostgreSQL this is one statement (its own transaction, one round
    /// trip); on SQLite one writing transaction. Every claim of the store is
    /// one of these; limits of zero claim nothing and only say when work is
    /// next due.
    pub async fn claim_due(
        &self,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limits: ClaimLimits,
    ) -> Result<Due, StoreError> {
        let timer_limit = if scope == WorkScope::All { limits.timers } else { 0 };
        if matches!(self.pool, Pool::Sqlite(..)) {
            let mut tx = self.pool.begin_for(Writer::Background).await?;
            crate::fence::refuse(&self.fence)?;
            let timers = claim_timer_rows(&mut tx, now, owner, lease_ms, timer_limit).await?;
            let governed = self.governed_lanes_json()?;
            let work = claim_work_rows(&mut tx, scope, now, owner, lease_ms, limits.work, governed).await?;
            // The claims above are visible here: their leases count, not their due times.
            let next = match tx.fetch_optional(NEXT_DUE, vec![scope.receipts_only().into(), now.into()]).await? {
                Some(row) => row.get(0)?,
                None => None,
            };
            tx.commit().await?;
            let work = self.with_probes(work, scope, now, owner, lease_ms, limits.work).await?;
            let (work, next) = self.with_governed(work, next, scope, now, owner, lease_ms, limits.work).await?;
            return Ok(Due { timers, work, next });
        }
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        // Checked once the connection is taken: a new one was read by the fence before it was handed out.
        crate::fence::refuse(&self.fence)?;
        tx.fetch_optional(CLAIM_PLAN_PG, Vec::new()).await?;
        let mut args = claim_args(scope, now, owner, lease_ms, limits.work);
        args.push(i64::from(timer_limit).into());
        args.push(Arg::Texts(self.governed_lanes()));
        let (mut timers, mut work, mut next) = (Vec::new(), Vec::new(), None);
        let rows = tx.fetch_all(CLAIM_DUE_PG, args).await?;
        tx.commit().await?;
        for row in rows {
            let source: String = row.get(0)?;
            match source.as_str() {
                "work" => work.push(work_row(&row, 1)?),
                "timer" => timers.push(timer_row(&row, [1, 2, 5, 7, 9])?),
                _ => next = row.get(5)?,
            }
        }
        let work = self.with_probes(in_work_order(work), scope, now, owner, lease_ms, limits.work).await?;
        let (work, next) = self.with_governed(work, next, scope, now, owner, lease_ms, limits.work).await?;
        Ok(Due { timers: in_timer_order(timers), work, next })
    }

    /// `work` a claim round took, and after it the probes of open breakers
    /// that may go now, within the round's `limit` (`connections::probes`;
    /// looked for only while this process knows a connection held back).
    async fn with_probes(
        &self,
        mut work: Vec<(WorkItem, ClaimedRun)>,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
        if !self.any_connection_blocked(now) {
            return Ok(work);
        }
        let room = limit.saturating_sub(u32::try_from(work.len()).unwrap_or(u32::MAX));
        work.extend(self.claim_probes(scope, now, owner, lease_ms, room).await?);
        Ok(work)
    }

    /// Gives a claim back before its lease ends (a worker shutting down), for a
    /// claim whose work was not done: the row's claim count goes back down, so
    /// the next claim is not [`WorkItem::reclaimed`] on its account. The row is
    /// due again at once (other processes are woken). Returns whether `owner`
    /// still held it.
    pub async fn release(&self, claim: &Claim, owner: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let released = match claim {
            Claim::Work(w) => tx.execute(RELEASE_WORK, work_args(w, owner)).await?,
            Claim::Timer(t) => tx.execute(RELEASE_TIMER, timer_args(t, owner)?).await?,
        };
        if released > 0 {
            wakeups::notify(&mut tx);
        }
        tx.commit().await?;
        Ok(released > 0)
    }

    /// The outbox, timer and audit rows of one run (inspection and tests).
    pub async fn work_of(&self, run_id: &str) -> Result<RunWork, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let mut work = RunWork::default();
        for row in tx.fetch_all(RUN_OUTBOX, vec![Arg::id(run_id)]).await? {
            let kind: String = row.get(1)?;
            let kind = WorkKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("outbox kind `{kind}`")))?;
            work.outbox.push((row.get(0)?, kind, row.get(2)?, row.get(3)?));
        }
        for row in tx.fetch_all(RUN_TIMERS, vec![Arg::id(run_id)]).await? {
            let key: String = row.get(0)?;
            work.timers.push((parse_timer(&key)?, row.get(1)?));
        }
        for row in tx.fetch_all(RUN_AUDIT, vec![Arg::id(run_id)]).await? {
            work.audit.push((row.get(0)?, row.get(1)?, row.get(2)?));
            let more: Option<String> = row.get(3)?;
            work.audit.extend(crate::audit::rows::later(more.as_deref()).into_iter().map(|(k, s, d, _)| (k, s, d)));
        }
        Ok(work)
    }
}

/// The arguments `$1`–`$5` of a claim of outbox rows.
fn claim_args(scope: WorkScope, now: i64, owner: &str, lease_ms: i64, limit: u32) -> Vec<Arg> {
    vec![
        owner.into(),
        now.saturating_add(lease_ms).into(),
        now.into(),
        i64::from(limit).into(),
        scope.receipts_only().into(),
    ]
}

/// Claims due outbox rows inside a SQLite transaction, in claim order.
async fn claim_work_rows(
    tx: &mut Tx,
    scope: WorkScope,
    now: i64,
    owner: &str,
    lease_ms: i64,
    limit: u32,
    governed: Arg,
) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
    let mut args = claim_args(scope, now, owner, lease_ms, limit);
    args.push(governed);
    let rows = tx.fetch_all(CLAIM_WORK_SQLITE, args).await?;
    Ok(in_work_order(rows.iter().map(|row| work_row(row, 0)).collect::<Result<_, _>>()?))
}

/// Claims due timers inside a SQLite transaction, in firing order.
async fn claim_timer_rows(
    tx: &mut Tx,
    now: i64,
    owner: &str,
    lease_ms: i64,
    limit: u32,
) -> Result<Vec<TimerItem>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let args: Vec<Arg> = vec![owner.into(), now.saturating_add(lease_ms).into(), now.into(), i64::from(limit).into()];
    let rows = tx.fetch_all(CLAIM_TIMERS_SQLITE, args).await?;
    Ok(in_timer_order(rows.iter().map(|row| timer_row(row, [0, 1, 2, 3, 4])).collect::<Result<_, _>>()?))
}

/// A claimed outbox row whose columns start at `at`: run, step, kind,
/// attempt, not_before, claims, revision, snapshot, trace_parent, snapshot_base.
pub(crate) fn work_row(row: &Row, at: usize) -> Result<(i64, WorkItem, ClaimedRun), StoreError> {
    let kind: String = row.get(at + 2)?;
    let kind = WorkKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("outbox kind `{kind}`")))?;
    let claims: i64 = row.get(at + 5)?;
    let item = WorkItem {
        run_id: row.get(at)?,
        step: row.get(at + 1)?,
        kind,
        attempt: row.get(at + 3)?,
        reclaimed: claims > 1,
        claims,
    };
    let due_at: i64 = row.get(at + 4)?;
    let snapshot = snapshot_frame::read(row, at + 7, at + 9)?;
    let run = ClaimedRun { revision: row.get(at + 6)?, snapshot, trace_parent: row.get(at + 8)?, due_at };
    Ok((due_at, item, run))
}

/// A claimed timer from the columns at `[run, timer, due_at, revision, trace_parent]`.
fn timer_row(row: &Row, [run, timer, due, revision, trace_parent]: [usize; 5]) -> Result<TimerItem, StoreError> {
    let key: String = row.get(timer)?;
    Ok(TimerItem {
        run_id: row.get(run)?,
        timer: parse_timer(&key)?,
        due_at: row.get(due)?,
        revision: row.get(revision)?,
        trace_parent: row.get(trace_parent)?,
    })
}

/// Claimed outbox rows by `not_before`, run and step.
pub(crate) fn in_work_order(mut claimed: Vec<(i64, WorkItem, ClaimedRun)>) -> Vec<(WorkItem, ClaimedRun)> {
    claimed.sort_by(|a, b| (a.0, &a.1.run_id, &a.1.step).cmp(&(b.0, &b.1.run_id, &b.1.step)));
    claimed.into_iter().map(|(_, item, run)| (item, run)).collect()
}

/// Claimed timers by due time, then the precedence of docs/reference/runs.md#waits, then run.
fn in_timer_order(mut claimed: Vec<TimerItem>) -> Vec<TimerItem> {
    claimed
        .sort_by(|a, b| (a.due_at, a.timer.precedence(), &a.run_id).cmp(&(b.due_at, b.timer.precedence(), &b.run_id)));
    claimed
}

/// Fails with [`StoreError::LeaseLost`] unless the claimed row is still leased
/// to `owner` (with the same attempt, or the same due time for a timer). On
/// PostgreSQL the row stays locked until the transaction ends, so no claimer
/// can take it over between this check and the commit.
pub(crate) async fn check_lease(tx: &mut Tx, claim: &Claim, owner: &str) -> Result<(), StoreError> {
    let dialect = tx.dialect();
    let held = match claim {
        Claim::Work(w) => {
            let sql = match dialect {
                Dialect::Sqlite => LEASED_WORK_SQLITE,
                Dialect::Pg => LEASED_WORK_PG,
            };
            tx.fetch_optional(sql, work_args(w, owner)).await?
        }
        Claim::Timer(t) => {
            let sql = match dialect {
                Dialect::Sqlite => LEASED_TIMER_SQLITE,
                Dialect::Pg => LEASED_TIMER_PG,
            };
            tx.fetch_optional(sql, timer_args(t, owner)?).await?
        }
    };
    match held {
        Some(_) => Ok(()),
        None => Err(StoreError::LeaseLost { what: describe(claim) }),
    }
}

pub(crate) fn work_args(w: &WorkItem, owner: &str) -> Vec<Arg> {
    vec![Arg::id(&w.run_id), w.step.as_str().into(), w.kind.as_str().into(), w.attempt.into(), owner.into()]
}

fn timer_args(t: &TimerItem, owner: &str) -> Result<Vec<Arg>, StoreError> {
    Ok(vec![Arg::id(&t.run_id), timer_key(&t.timer)?.into(), t.due_at.into(), owner.into()])
}

pub(crate) fn describe(claim: &Claim) -> String {
    match claim {
        Claim::Work(w) => format!("{} of step {} (attempt {}) of run {}", w.kind.as_str(), w.step, w.attempt, w.run_id),
        Claim::Timer(t) => format!("timer {:?} of run {}", t.timer, t.run_id),
    }
}

#[cfg(test)]
#[path = "claims_plan_tests.rs"]
mod plan_tests;
