//! Remote workers' side of the outbox: lanes, offers, acquired leases and the
//! journal of their reports.
//!
//! An outbox row of a connection configured `dispatch: remote` is in that
//! connection's **lane** (its name, `outbox.lane`, written from
//! `Decision::lanes` whenever the row is queued). In-process claims leave it
//! alone while it waits (`claims`); a remote worker takes it in two steps:
//!
//! - [`Store::offer`] hands due rows of the worker's lanes out for a short
//!   assignment window (`lease_owner` the offer's name, `lease_until` its
//!   end). Nothing has been sent: the claim count stays as it was, so an
//!   offer that runs out is offered again as if it never happened.
//! - [`Store::acquire`] turns a live offer into a lease and counts the claim,
//!   committed before the worker sends anything: from then on the effect may
//!   have happened, and a lease that runs out without a report leaves the row
//!   `reclaimed` for every later offer or claim.
//!
//! The report is applied through the same fence as an in-process one
//! ([`Store::apply_reported`]: the lease must still be the acquiring
//! owner's), and journaled (kind `report`) in the decision's transaction; a
//! report that is not applied can be journaled on its own as evidence
//! ([`Store::journal_report`]). The fence only compares `lease_owner`, so
//! an offer is told apart from a lease by its name alone: offers and leases
//! must be named apart. A report under the offer's name is the coordinator
//! settling an offered row itself (a reclaimed attempt it will not resend).
//!
//! A row of any lane whose offer or lease ran out is claimed in-process too
//! (`claims`); the engine then settles it or gives it back to its lane
//! ([`Store::relane`]). On PostgreSQL an offer is one statement reading each
//! lane in claim order from `outbox_lanes` (rows another offer or claim has
//! locked are skipped) and the rows whose window ran out from
//! `outbox_lanes_leased`; on SQLite one writing transaction reads
//! `outbox_lanes` (migration 0016). A lane held back (an operator's pause, a
//! product's hold, a breaker not closed) is offered nothing but its probe, and
//! a limited one what its pace grants ([`connections`](crate::connections)).
//! This module must not change snapshots or run rows, except through a
//! report's decision.

use std::borrow::Cow;
use std::collections::BTreeMap;

use coordinator_core::pace::Limits;

use crate::audit::{self, Line};
use crate::claims::{in_work_order, work_args, work_row};
use crate::connections::limits::Take;
use crate::db::{Arg, Pool, Tx, Writer};
use crate::types::{Claim, ClaimedRun, Decision, WorkItem};
use crate::{Store, StoreError, runs, wakeups};

/// The audit kind of a remote worker's report (a store-level kind, like `fence`).
const REPORT: &str = "report";

/// The columns an offer returns (`claims::work_row` reads them).
macro_rules! offered_columns {
    () => {
        "RETURNING run_id, step, kind, attempt, not_before, claims, \
         (SELECT r.revision FROM runs r WHERE r.id = outbox.run_id) AS revision, \
         (SELECT r.snapshot FROM runs r WHERE r.id = outbox.run_id) AS snapshot, \
         (SELECT r.trace_parent FROM runs r WHERE r.id = outbox.run_id) AS trace_parent, \
         (SELECT r.snapshot_base FROM runs r WHERE r.id = outbox.run_id) AS snapshot_base"
    };
}

/// One part of PostgreSQL's offer: `$1` offered to, `$2` the window's end,
/// `$3` now, `$5` the lanes; `$rows` which rows of lane `l.value`, `$order`
/// the order each lane is read in (and the offer takes its rows in), `$limit`
/// how many. Each lane is read on its own (a `LATERAL` part, which locks what
/// it reads and skips what others locked), so a worker of several lanes
/// reads about as many rows as it takes; the claim count is left alone. The
/// rows are named by `ctid` from an array the read fills once, as claims name
/// theirs (`claims::pick_pg`).
macro_rules! offer_part_pg {
    ($rows:literal, $order:literal, $limit:literal) => {
        concat!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2 \
             WHERE ctid = ANY(ARRAY(SELECT c.ctid \
             FROM unnest($5::text[]) AS l(value), LATERAL (SELECT o.ctid, o.run_id, o.step, o.kind, ",
            $order,
            " AS rank FROM outbox o JOIN runs r ON r.id = o.run_id \
             WHERE o.lane = l.value AND o.lane IS NOT NULL AND ",
            $rows,
            " AND o.not_before <= $3 AND (NOT r.held OR o.kind = 'receipt') AND ",
            crate::connections::not_blocked!("o.lane", "$3"),
            " ORDER BY ",
            $order,
            ", o.run_id, o.step, o.kind LIMIT ",
            $limit,
            " FOR UPDATE OF o SKIP LOCKED) AS c ORDER BY c.rank, c.run_id, c.step, c.kind LIMIT ",
            $limit,
            ")) ",
            offered_columns!()
        )
    };
}

/// PostgreSQL's offer (`$4` the limit), one statement: unleased due rows of
/// each lane from `outbox_lanes` first, then rows whose window or lease ran
/// out from `outbox_lanes_leased`, up to the same limit.
pub(crate) const OFFER_PG: &str = concat!(
    "WITH offered_fresh AS (",
    offer_part_pg!("o.lease_until IS NULL", "o.not_before", "$4"),
    "), offered_expired AS (",
    offer_part_pg!(
        "o.lease_until IS NOT NULL AND o.lease_until < $3",
        "o.lease_until",
        "$4 - (SELECT count(*) FROM offered_fresh)"
    ),
    ") SELECT * FROM offered_fresh UNION ALL SELECT * FROM offered_expired"
);
/// SQLite's offer, arguments as [`OFFER_PG`]'s with `$5` a JSON array of
/// lanes: one read of `outbox_lanes` in claim order (SQLite's writers take
/// turns, so none steps over another's rows for long).
const OFFER_SQLITE: &str = concat!(
    "UPDATE outbox SET lease_owner = $1, lease_until = $2 \
     WHERE (run_id, step, kind) IN (SELECT o.run_id, o.step, o.kind FROM outbox o JOIN runs r ON r.id = o.run_id \
     WHERE o.lane IN (SELECT l.value FROM json_each($5) AS l) AND o.lane IS NOT NULL AND o.not_before <= $3 \
     AND (o.lease_until IS NULL OR o.lease_until < $3) AND (NOT r.held OR o.kind = 'receipt') AND ",
    crate::connections::not_blocked!("o.lane", "$3"),
    " ORDER BY o.not_before, o.run_id, o.step, o.kind LIMIT $4) ",
    offered_columns!()
);
/// `$1`–`$5` the row and the offer's name (`claims::work_args`), `$6` the
/// owner, `$7` the lease's end, `$8` now: only a live offer becomes a lease.
const ACQUIRE: &str = "UPDATE outbox SET lease_owner = $6, lease_until = $7, claims = claims + 1 \
     WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4 AND lease_owner = $5 AND lease_until >= $8 \
     RETURNING claims";
/// `$1`–`$5` the row and its owner, `$6` the lease's new end.
const RENEW: &str = "UPDATE outbox SET lease_until = $6 \
     WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4 AND lease_owner = $5";
/// `$1`–`$5` the row and its owner, `$6` the lane (NULL: in-process): the
/// claim is given back as `claims::RELEASE_WORK` gives it back.
const RELANE: &str = "UPDATE outbox SET lane = $6, lease_owner = NULL, lease_until = NULL, \
     claims = CASE WHEN claims > 0 THEN claims - 1 ELSE 0 END \
     WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4 AND lease_owner = $5";

/// Rows of lanes of no connection in `$kept` (a `FROM` item of rows
/// `l(value)`: the remote connections and the limited ones, whose lanes are
/// their name or `{name}/{workflow}`) go in-process.
macro_rules! clear_lanes_sql {
    ($kept:literal, $prefix:literal) => {
        concat!(
            "UPDATE outbox SET lane = NULL WHERE lane IS NOT NULL AND lane NOT IN (SELECT l.value FROM ",
            $kept,
            ") AND ",
            $prefix,
            " NOT IN (SELECT l.value FROM ",
            $kept,
            ")"
        )
    };
}
const CLEAR_LANES_PG: &str = clear_lanes_sql!("unnest($1::text[]) AS l(value)", "split_part(lane, '/', 1)");
const CLEAR_LANES_SQLITE: &str = clear_lanes_sql!(
    "json_each($1) AS l",
    "CASE WHEN instr(lane, '/') > 0 THEN substr(lane, 1, instr(lane, '/') - 1) ELSE lane END"
);

/// When the first row of the lanes `$lanes` (a `FROM` item of rows
/// `l(value)`) becomes offerable, of lanes nothing holds back at `$2`: per lane, the first unleased row
/// (`outbox_lanes` in order) and the first lease to run out
/// (`outbox_lanes_leased` in order), each the first of a run without a hold
/// (receipt lookups whatever the hold), as `claims::next_due_sql!` reads the
/// in-process queue.
macro_rules! offered_work_sql {
    ($lanes:literal) => {
        concat!(
            "SELECT MIN(due) FROM (\
             SELECT (SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id \
               WHERE o.lane = l.value AND o.lane IS NOT NULL AND o.lease_until IS NULL \
               AND (NOT r.held OR o.kind = 'receipt') AND ",
            crate::connections::not_blocked!("o.lane", "$2"),
            " ORDER BY o.not_before LIMIT 1) AS due FROM ",
            $lanes,
            " UNION ALL SELECT (SELECT o.lease_until + 1 FROM outbox o JOIN runs r ON r.id = o.run_id \
               WHERE o.lane = l.value AND o.lane IS NOT NULL AND o.lease_until IS NOT NULL \
               AND (NOT r.held OR o.kind = 'receipt') AND ",
            crate::connections::not_blocked!("o.lane", "$2"),
            " ORDER BY o.lease_until LIMIT 1) FROM ",
            $lanes,
            ") AS pending"
        )
    };
}
const OFFERED_WORK_PG: &str = offered_work_sql!("unnest($1::text[]) AS l(value)");
const OFFERED_WORK_SQLITE: &str = offered_work_sql!("json_each($1) AS l");

/// The journal rows of run `$1`, sealed ones by `audit_run_sealed (run_id,
/// position)`, pending ones by `audit_pending` (few: the sealer chains them
/// within moments), to find a `report` entry among them. The journal has no
/// index by kind or detail, so a run's rows are read (a run writes a few,
/// one per decision); on PostgreSQL each day partition's index is probed
/// once, as nothing bounds the days a run's entries were written on.
const RUN_ROWS_JOURNALED: &str = "SELECT kind, step, detail, more FROM audit WHERE run_id = $1 AND position IS NOT NULL \
     UNION ALL SELECT kind, step, detail, more FROM audit WHERE hash IS NULL AND run_id = $1";

impl Store {
    /// Offers up to `limit` due outbox rows of `lanes` to `offered_to` for
    /// `window_ms`: rows with `not_before <= now`, unleased or whose lease ran
    /// out (`lease_until < now`), of runs without a restore hold (receipt
    /// lookups on held runs too, as in-process claims take them), ordered by
    /// `not_before`. Each row's lease is the offer's (`lease_owner =
    /// offered_to`, until `now + window_ms`) and its claim count is left as
    /// it is: each item carries that count, and is
    /// [`WorkItem::reclaimed`] when an earlier acquired lease of the row ran
    /// out without a report. With each, its run as the offer read it.
    ///
    /// `offered_to` must not be a name leases are acquired in
    /// ([`Store::acquire`]'s `owner`): a report under it applies on the
    /// offer alone (what settling an offered row needs). Refused with [`StoreError::Fenced`] while the restore fence
    /// holds. No lanes: nothing, without a query. On PostgreSQL one
    /// statement; concurrent offers and claims never take the same row.
    pub async fn offer(
        &self,
        lanes: &[String],
        now: i64,
        offered_to: &str,
        window_ms: i64,
        limit: u32,
    ) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
        self.offer_within(lanes, &BTreeMap::new(), now, offered_to, window_ms, limit).await
    }

    /// [`Store::offer`] under the polling worker's own limits (`asked`, by
    /// lane) as well as the deployment's ([`Store::set_offer_limits`]): a
    /// lane either limits, or whose pace is not settled (a breaker open,
    /// a hold, a slow-down), is offered under its row's lock what its pace
    /// grants ([`crate::connections::limits`]), its breaker's probe
    /// included; the others in one statement, which skips every lane held back.
    pub async fn offer_within(
        &self,
        lanes: &[String],
        asked: &BTreeMap<String, Limits>,
        now: i64,
        offered_to: &str,
        window_ms: i64,
        limit: u32,
    ) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
        crate::fence::refuse(&self.fence)?;
        if lanes.is_empty() {
            return Ok(Vec::new());
        }
        let mut governed: Vec<(String, Limits)> = Vec::new();
        let mut free: Vec<String> = Vec::new();
        for lane in lanes {
            let limits = self.offer_limits_of(lane, asked.get(lane));
            if limits.is_none() && !self.pace_unsettled(lane) {
                free.push(lane.clone());
            } else {
                governed.push((lane.clone(), limits));
            }
        }
        let mut offered = Vec::new();
        if !free.is_empty() {
            let mut tx = self.writer().await?;
            // Checked once the connection is taken: a new one was read by the fence before it was handed out.
            crate::fence::refuse(&self.fence)?;
            // Each connection's rows wait in a lane per workflow.
            let free = crate::connections::lanes::of_each(&mut tx, &free).await?;
            let (sql, lanes) = match &self.pool {
                Pool::Pg(..) => (OFFER_PG, Arg::Texts(free)),
                Pool::Sqlite(..) => (OFFER_SQLITE, json_lanes(&free)?),
            };
            let args = vec![
                offered_to.into(),
                now.saturating_add(window_ms).into(),
                now.into(),
                i64::from(limit).into(),
                lanes,
            ];
            let rows = tx.fetch_all(sql, args).await?;
            tx.commit().await?;
            for row in &rows {
                offered.push(work_row(row, 0)?);
            }
        }
        for (lane, limits) in governed {
            let room = limit.saturating_sub(u32::try_from(offered.len()).unwrap_or(u32::MAX));
            if room == 0 {
                break;
            }
            let (taken, _) = self.take_lane(&lane, &limits, Take::Offer, now, offered_to, window_ms, room).await?;
            offered.extend(taken);
        }
        for (_, item, _) in &mut offered {
            // Nothing was claimed by this offer: any claim counted is an earlier acquire's.
            item.reclaimed = item.claims >= 1;
        }
        Ok(in_work_order(offered))
    }

    /// Acquires the lease of an offered row for `owner` until `now + ttl_ms`,
    /// if the row (run, step, kind and attempt of `item`) is still offered to
    /// `offered_to` and the offer has not run out (`lease_until >= now`):
    /// counts the claim and commits before returning, so the worker may send
    /// once it has the item back (with the new count, `reclaimed` when an
    /// earlier lease ran out without a report). `None`: the offer is gone
    /// (ran out and was taken, or the row was queued again or finished).
    /// Refused with [`StoreError::Fenced`] while the restore fence holds.
    pub async fn acquire(
        &self,
        item: &WorkItem,
        offered_to: &str,
        owner: &str,
        now: i64,
        ttl_ms: i64,
    ) -> Result<Option<WorkItem>, StoreError> {
        let mut tx = self.writer().await?;
        // Checked once the connection is taken, as for an offer.
        crate::fence::refuse(&self.fence)?;
        let mut args = work_args(item, offered_to);
        args.extend([owner.into(), now.saturating_add(ttl_ms).into(), now.into()]);
        let row = tx.fetch_optional(ACQUIRE, args).await?;
        tx.commit().await?;
        match row {
            Some(row) => {
                let claims: i64 = row.get(0)?;
                Ok(Some(WorkItem { claims, reclaimed: claims > 1, ..item.clone() }))
            }
            None => Ok(None),
        }
    }

    /// Extends the lease `owner` holds on `item`'s row to `now + ttl_ms`;
    /// `false` when it is not `owner`'s any more (taken over, or the row was
    /// reported, queued again or finished). A lease that ran out and that
    /// nobody took over is still `owner`'s, as for [`Store::apply_fenced`].
    pub async fn renew(&self, item: &WorkItem, owner: &str, now: i64, ttl_ms: i64) -> Result<bool, StoreError> {
        let mut tx = self.writer().await?;
        let mut args = work_args(item, owner);
        args.push(now.saturating_add(ttl_ms).into());
        let renewed = tx.execute(RENEW, args).await?;
        tx.commit().await?;
        Ok(renewed > 0)
    }

    /// Gives a row `owner` claimed in-process back to a lane (`None`: keeps
    /// it in-process from now on): sets the lane, clears the lease and gives
    /// the claim back (as [`Store::release`] does: the in-process claim did
    /// not act), and wakes other processes. Returns whether `owner` held it.
    pub async fn relane(&self, item: &WorkItem, owner: &str, lane: Option<&str>) -> Result<bool, StoreError> {
        let mut tx = self.writer().await?;
        let mut args = work_args(item, owner);
        args.push(lane.into());
        let moved = tx.execute(RELANE, args).await?;
        if moved > 0 {
            wakeups::notify(&mut tx);
        }
        tx.commit().await?;
        Ok(moved > 0)
    }

    /// Serves in-process every row whose lane is neither one of `remote`
    /// (the connections configured `dispatch: remote` now) nor one of the
    /// connections claimed under limits, `limited` (called at start, for a
    /// connection a new deployment switched back). Leases are kept: a row
    /// leased now is claimed in-process once its lease ran out. Returns how
    /// many rows changed; other processes are woken when some did.
    pub async fn clear_lanes(&self, remote: &[String], limited: &[String]) -> Result<u64, StoreError> {
        let mut tx = self.writer().await?;
        let kept: Vec<String> = remote.iter().chain(limited).cloned().collect();
        let (sql, kept) = match &self.pool {
            Pool::Pg(..) => (CLEAR_LANES_PG, Arg::Texts(kept)),
            Pool::Sqlite(..) => (CLEAR_LANES_SQLITE, json_lanes(&kept)?),
        };
        let cleared = tx.execute(sql, vec![kept]).await?;
        if cleared > 0 {
            wakeups::notify(&mut tx);
        }
        tx.commit().await?;
        Ok(cleared)
    }

    /// When the next row of `lanes` becomes offerable (not before `now`):
    /// the earliest `not_before` of unleased rows and `lease_until + 1` of
    /// leased ones, of runs without a restore hold (receipt lookups whatever
    /// the hold); `None` when nothing is queued there (or no lanes are
    /// given), of lanes nothing holds back (a pause, a hold, a breaker not
    /// closed). A long poll sleeps until then, or until woken. Reads each
    /// lane's first rows only.
    pub async fn offered_work(&self, lanes: &[String], now: i64) -> Result<Option<i64>, StoreError> {
        if lanes.is_empty() {
            return Ok(None);
        }
        let mut tx = self.pool.begin_read().await?;
        let lanes = crate::connections::lanes::of_each(&mut tx, lanes).await?;
        if lanes.is_empty() {
            return Ok(None);
        }
        let (sql, lanes) = match &self.pool {
            Pool::Pg(..) => (OFFERED_WORK_PG, Arg::Texts(lanes)),
            Pool::Sqlite(..) => (OFFERED_WORK_SQLITE, json_lanes(&lanes)?),
        };
        let due: Option<i64> = match tx.fetch_optional(sql, vec![lanes, now.into()]).await? {
            Some(row) => row.get(0)?,
            None => None,
        };
        Ok(due.map(|due| due.max(now)))
    }

    /// [`Store::apply_fenced`] for a remote worker's report on `claim`
    /// (leased to `owner` by [`Store::acquire`]), journaling the report
    /// (kind `report`, the claim's run and step, `actor` the worker's
    /// subject or `None` for the coordinator's own settling, `detail` what it reported, never a payload) in the same
    /// transaction, after the decision's entries. Nothing is written when
    /// the report does not apply ([`StoreError::LeaseLost`] for a row only
    /// offered to `owner`, taken over, or at another attempt).
    pub async fn apply_reported<E>(
        &self,
        claim: &Claim,
        owner: &str,
        at: i64,
        actor: Option<&str>,
        detail: &str,
        decide: impl FnOnce(&[u8]) -> Result<Decision, E>,
    ) -> Result<i64, StoreError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (run_id, step) = match claim {
            Claim::Work(w) => (w.run_id.as_str(), Some(w.step.as_str())),
            Claim::Timer(t) => (t.run_id.as_str(), None),
        };
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let fence = Some((claim, owner));
        let applied = match runs::apply_locked(&mut tx, run_id, at, None, fence, None, decide).await {
            Ok(version) => {
                let line = report_line(step, detail);
                audit::append(&mut tx, Some(run_id), at, actor, &[line]).await.map(|()| version)
            }
            Err(e) => Err(e),
        };
        tx.settle(applied).await
    }

    /// Journals a report that was not applied (a stale or unknown attempt),
    /// as evidence: one `report` entry for `run_id` and `step` at `at`, by
    /// `actor`, in its own transaction. The run need not exist.
    pub async fn journal_report(
        &self,
        run_id: &str,
        step: &str,
        at: i64,
        actor: &str,
        detail: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        audit::append(&mut tx, Some(run_id), at, Some(actor), &[report_line(Some(step), detail)]).await?;
        tx.commit().await
    }

    /// Whether the journal holds a `report` entry of `run_id` and `step`
    /// with exactly `detail`, sealed or still pending (the same report
    /// repeated gets the answer the first one got). A pure read.
    pub async fn report_journaled(&self, run_id: &str, step: &str, detail: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let is_it = |kind: &str, s: Option<&str>, d: &str| kind == REPORT && s == Some(step) && d == detail;
        for row in tx.fetch_all(RUN_ROWS_JOURNALED, vec![Arg::id(run_id)]).await? {
            let (kind, s, d, more): (String, Option<String>, String, Option<String>) =
                (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
            if is_it(&kind, s.as_deref(), &d)
                || audit::rows::later(more.as_deref()).iter().any(|(k, s, d, _)| is_it(k, s.as_deref(), d))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A handle for this module's writes: on PostgreSQL a pooled connection
    /// outside any transaction (each write here is one statement, its own
    /// transaction), on SQLite a background writer's transaction.
    async fn writer(&self) -> Result<Tx, StoreError> {
        match &self.pool {
            Pool::Pg(..) => self.pool.begin_read().await,
            Pool::Sqlite(..) => self.pool.begin_for(Writer::Background).await,
        }
    }
}

/// The journal line of a report.
fn report_line<'a>(step: Option<&'a str>, detail: &'a str) -> Line<'a> {
    Line { kind: REPORT, step: step.map(Cow::Borrowed), detail: Cow::Borrowed(detail) }
}

/// Lanes as SQLite reads them (`json_each`): a JSON array of strings.
fn json_lanes(lanes: &[String]) -> Result<Arg, StoreError> {
    serde_json::to_string(lanes).map(Arg::Text).map_err(|e| StoreError::Corrupt(format!("lanes: {e}")))
}
