//! Day partitions and retention (migration 0013; docs/operations.md, "Retention").
//!
//! On PostgreSQL `runs` is partitioned by run id and `audit` by `at`, a
//! partition per UTC day, listed in `partition_days`.
//! [`Store::prepare_partitions`] creates the days from the end of the last one
//! through [`AHEAD_DAYS`] days after today (the service calls it at start and
//! every hour), so a run id — generated now, or a client's within −24 h … +1 h —
//! always lands in a day of its own.
//!
//! [`Store::retain`] removes what ended long ago, as a *prefix* of days: from
//! the oldest day on, a day of runs goes while every run in it ended (a
//! terminal state) before the cutoff, `now` minus the retention; the first day
//! holding a run that has not ended, or ended since the cutoff, stops the cut,
//! and nothing after it goes. Its admission keys, trigger events and any
//! queue row of its runs go with it. The journal is cut at the same place less
//! one day (an id may be up to an hour ahead of its admission, so a kept run's
//! first entries may be written the day before its id's day): the entries
//! before that instant, and any entry chained before the last of them. The
//! last entry removed becomes the journal's checkpoint (`audit_checkpoint`),
//! where `audit verify` starts; the cut itself is journaled (kind
//! `retention`). On PostgreSQL a cut is a `DROP TABLE` of whole partitions;
//! SQLite keeps plain tables and deletes the same rows.
//!
//! Both take a transaction-scoped advisory lock, so two processes never
//! create or drop the same day at once, and a lock timeout, so a long
//! transaction elsewhere delays them (the next round tries again) instead of
//! stalling every run behind their lock on the parent table.

use chrono::DateTime;
use coordinator_core::audit::Head;
use coordinator_core::model::run::RunState;

use crate::audit::{self, Line};
use crate::db::{Arg, Pool, Query, Tx};
use crate::{Store, StoreError};

/// A UTC day, ms.
pub const DAY_MS: i64 = 86_400_000;
/// Days after today whose partitions exist ahead of time.
pub const AHEAD_DAYS: i64 = 2;
/// The advisory lock key of partition changes ("coordinator partitions").
const PARTITION_LOCK: i64 = 0x636f_6f72_6470;
/// How long a partition change waits for a table lock before giving up for this round.
const LOCK_TIMEOUT: &str = "SELECT pg_advisory_xact_lock($1), set_config('lock_timeout', '5s', true)";
/// The audit kind of a retention cut (a deployment-level entry).
const RETENTION: &str = "retention";
/// The tables whose rows belong to a run (besides `runs` and `audit`).
const RUN_ROWS: [&str; 6] = ["admission_keys", "run_keys", "trigger_events", "outbox", "timers", "waits"];

const LAST_DAY: &str = "SELECT COALESCE(max(hi_ms), 0) FROM partition_days WHERE tbl = $1";
/// Whether a recorded partition of `$1` overlaps the day `[$2, $3)`.
const DAY_COVERED: &str = "SELECT 1 FROM partition_days WHERE tbl = $1 AND lo_ms < $3 AND hi_ms > $2 LIMIT 1";
const RECORD_DAY: &str = "INSERT INTO partition_days (tbl, name, lo_ms, hi_ms) VALUES ($1, $2, $3, $4)";
const DAYS: &str = "SELECT name, lo_ms, hi_ms FROM partition_days WHERE tbl = $1 ORDER BY lo_ms";
const FORGET_DAYS: &str = "DELETE FROM partition_days WHERE tbl = $1 AND hi_ms <= $2";
const ANY_PENDING_BEFORE: &str = "SELECT 1 FROM audit WHERE at < $1 AND hash IS NULL LIMIT 1";
/// The last sealed row before `$1`; its last entry is where a cut ends (a
/// row's entries share its instant, so a row is never split by a cut).
const LAST_BEFORE: &str = "SELECT position, hash, more FROM audit WHERE at < $1 AND position IS NOT NULL \
     ORDER BY position DESC LIMIT 1";
const DELETE_CHAINED_UP_TO: &str = "DELETE FROM audit WHERE position <= $1";
const DELETE_BEFORE: &str = "DELETE FROM audit WHERE at < $1 OR position <= $2";
const DELETE_RUNS_BEFORE: &str = "DELETE FROM runs WHERE id < $1";
const CHECKPOINT: &str = "SELECT position, hash FROM audit_checkpoint WHERE singleton = 1";
const SET_CHECKPOINT: &str = "INSERT INTO audit_checkpoint (singleton, position, hash, cut_at) VALUES (1, $1, $2, $3) \
     ON CONFLICT (singleton) DO UPDATE SET position = excluded.position, hash = excluded.hash, cut_at = excluded.cut_at";

/// What [`Store::prepare_partitions`] did.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The partitions created, by name.
    pub created: Vec<String>,
    /// The days that could not be created and were skipped (their rows stay in
    /// the table's DEFAULT partition), with why.
    pub skipped: Vec<(String, StoreError)>,
}

/// What [`Store::retain`] removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cut {
    /// Runs removed.
    pub runs: u64,
    /// Day partitions dropped (PostgreSQL; 0 on SQLite).
    pub partitions: u64,
    /// Journal entries removed.
    pub entries: u64,
    /// Where the journal starts now, when the cut moved it.
    pub checkpoint: Option<Head>,
    /// How long dropping the runs' day partitions took, ms (PostgreSQL: the
    /// part of the cut that holds a lock every run's statements wait for).
    pub drop_ms: f64,
}

/// The start of the UTC day of instant `ms`.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS) * DAY_MS
}

/// The run id bound of instant `ms` (`coordinator_run_id_bound` in migration
/// 0020): a UUID of the instant's 12 hex digits followed by zeros, which
/// sorts — as text and as a PostgreSQL `uuid` — before every UUIDv7 made in
/// that ms and after every one made before.
pub fn run_id_bound(ms: i64) -> String {
    let hex = format!("{:012x}", ms.max(0));
    format!("{}-{}-0000-0000-000000000000", &hex[..8], &hex[8..12])
}

/// The instant a UUIDv7 run id was made, ms; `None` if `id` is not shaped so.
pub fn id_ms(id: &str) -> Option<i64> {
    let (high, rest) = (id.get(..8)?, id.get(8..13)?);
    let low = rest.strip_prefix('-')?;
    i64::from_str_radix(&format!("{high}{low}"), 16).ok()
}

/// `{table}_dYYYYMMDD`, the partition of the day starting at `day`.
fn partition_name(table: &str, day: i64) -> String {
    let date = DateTime::from_timestamp_millis(day).map(|t| t.format("%Y%m%d").to_string());
    format!("{table}_d{}", date.unwrap_or_else(|| day.to_string()))
}

/// `state NOT IN (the terminal states)`: a run that has not ended.
fn not_ended() -> String {
    let ended: Vec<String> =
        RunState::ALL.iter().filter(|s| s.is_terminal()).map(|s| format!("'{}'", s.as_str())).collect();
    format!("state NOT IN ({})", ended.join(", "))
}

fn made(sql: String) -> Query {
    let mut query = Query::new("");
    query.push_made(&sql);
    query
}

async fn lock(tx: &mut Tx) -> Result<(), StoreError> {
    tx.fetch_optional(LOCK_TIMEOUT, vec![PARTITION_LOCK.into()]).await.map(|_| ())
}

impl Store {
    /// PostgreSQL: creates the day partitions of `runs` and `audit` from the
    /// end of the last one (at the earliest yesterday) through [`AHEAD_DAYS`]
    /// days after the day of `now`, each in its own transaction. SQLite: nothing.
    pub async fn prepare_partitions(&self, now: i64) -> Result<Prepared, StoreError> {
        let mut prepared = Prepared::default();
        if !matches!(self.pool, Pool::Pg(..)) {
            return Ok(prepared);
        }
        for table in ["runs", "audit"] {
            let last: i64 = {
                let mut tx = self.pool.begin_read().await?;
                tx.fetch_optional(LAST_DAY, vec![table.into()]).await?.map(|r| r.get(0)).transpose()?.unwrap_or(0)
            };
            let mut day = last.max(day_of(now) - DAY_MS);
            while day <= day_of(now) + AHEAD_DAYS * DAY_MS {
                let name = partition_name(table, day);
                match self.create_day(table, &name, day).await {
                    Ok(true) => prepared.created.push(name),
                    Ok(false) => {}
                    Err(e) => prepared.skipped.push((name, e)),
                }
                day += DAY_MS;
            }
        }
        Ok(prepared)
    }

    /// Makes `table`'s partition `name` for `day`; `false` when a partition
    /// of that table already covers the day (another process made it while
    /// this one read where the days end: both read before either made one).
    async fn create_day(&self, table: &str, name: &str, day: i64) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_for(crate::db::Writer::Background).await?;
        lock(&mut tx).await?;
        // Read under the lock: what an earlier holder made has committed.
        if tx.fetch_optional(DAY_COVERED, vec![table.into(), day.into(), (day + DAY_MS).into()]).await?.is_some() {
            return Ok(false);
        }
        let bounds = match table {
            "runs" => {
                format!("FROM ('{}') TO ('{}') WITH (fillfactor = 50)", run_id_bound(day), run_id_bound(day + DAY_MS))
            }
            _ => format!("FROM ({day}) TO ({})", day + DAY_MS),
        };
        tx.fetch_query(made(format!("CREATE TABLE {name} PARTITION OF {table} FOR VALUES {bounds}"))).await?;
        tx.execute(RECORD_DAY, vec![table.into(), name.into(), day.into(), (day + DAY_MS).into()]).await?;
        tx.commit().await.map(|()| true)
    }

    /// Removes, as a prefix of days, the runs that ended before `now` minus
    /// `days` days, with their rows and the journal before them (see the
    /// module's documentation); journaled at `now`. A day holding a run that
    /// has not ended is never removed, nor anything after it.
    pub async fn retain(&self, now: i64, days: u32) -> Result<Cut, StoreError> {
        let cutoff = now - i64::from(days) * DAY_MS;
        // What is pending is chained first: a cut ends at a chained entry.
        audit::seal_all(self).await?;
        let mut tx = self.pool.begin_for(crate::db::Writer::Background).await?;
        let (mut cut, keep_from) = match &self.pool {
            Pool::Pg(..) => {
                lock(&mut tx).await?;
                drop_run_days(&mut tx, cutoff).await?
            }
            Pool::Sqlite(..) => delete_runs(&mut tx, cutoff).await?,
        };
        let Some(keep_from) = keep_from else { return Ok(cut) };
        let journal_from = keep_from - DAY_MS;
        if tx.fetch_optional(ANY_PENDING_BEFORE, vec![journal_from.into()]).await?.is_none()
            && let Some(row) = tx.fetch_optional(LAST_BEFORE, vec![journal_from.into()]).await?
        {
            let more: Option<String> = row.get(2)?;
            let last = audit::rows::last_in_row(row.get(0)?, row.get(1)?, more.as_deref());
            match &self.pool {
                Pool::Pg(..) => drop_journal_days(&mut tx, journal_from, last.position).await?,
                Pool::Sqlite(..) => {
                    tx.execute(DELETE_BEFORE, vec![journal_from.into(), last.position.into()]).await?;
                }
            }
            // Positions have no gaps: the cut removed every entry after the
            // journal's start and up to `last`.
            let start = checkpoint(&mut tx).await?.map_or(0, |c| c.position);
            cut.entries = u64::try_from(last.position - start).unwrap_or(0);
            tx.execute(SET_CHECKPOINT, vec![last.position.into(), last.hash.as_str().into(), now.into()]).await?;
            cut.checkpoint = Some(last);
        }
        if cut.runs > 0 || cut.entries > 0 {
            let detail = format!(
                "retention: removed {} runs that ended before {cutoff} (ms) and {} journal entries{}",
                cut.runs,
                cut.entries,
                cut.checkpoint
                    .as_ref()
                    .map(|h| format!("; the journal starts after position {}", h.position))
                    .unwrap_or_default()
            );
            audit::append(&mut tx, None, now, None, &[Line { kind: RETENTION, step: None, detail: detail.into() }])
                .await?;
        }
        tx.commit().await?;
        Ok(cut)
    }

    /// The journal's checkpoint: the last entry a retention cut removed, where
    /// verification starts (`None`: the journal starts at position 1).
    pub async fn audit_checkpoint(&self) -> Result<Option<Head>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        checkpoint(&mut tx).await
    }
}

pub(crate) async fn checkpoint(tx: &mut Tx) -> Result<Option<Head>, StoreError> {
    match tx.fetch_optional(CHECKPOINT, vec![]).await? {
        Some(row) => Ok(Some(Head { position: row.get(0)?, hash: row.get(1)? })),
        None => Ok(None),
    }
}

/// PostgreSQL: drops the prefix of run days whose runs all ended before
/// `cutoff`, with their rows in [`RUN_ROWS`]; the cut and the start of the
/// first day kept (`None`: nothing dropped).
async fn drop_run_days(tx: &mut Tx, cutoff: i64) -> Result<(Cut, Option<i64>), StoreError> {
    let mut cut = Cut::default();
    let mut keep_from = None;
    let mut names = Vec::new();
    for row in tx.fetch_all(DAYS, vec!["runs".into()]).await? {
        let (name, lo, hi): (String, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
        if hi > day_of(cutoff) {
            break;
        }
        // The day's runs: its partition's, and any the DEFAULT partition holds for it.
        let day = format!(
            "(SELECT id, state, updated_at FROM {name} UNION ALL SELECT id, state, updated_at FROM runs_default \
             WHERE id >= '{}' AND id < '{}') AS day",
            run_id_bound(lo),
            run_id_bound(hi)
        );
        // Stops at the first run that keeps the day (a day that stays is read
        // every round, so it is not counted whole).
        let live = format!("SELECT 1 FROM {day} WHERE {} OR updated_at >= {cutoff} LIMIT 1", not_ended());
        if !tx.fetch_query(made(live)).await?.is_empty() {
            break;
        }
        let counted = tx.fetch_query(made(format!("SELECT count(*) FROM {day}"))).await?;
        let runs: i64 = counted.first().map(|r| r.get(0)).transpose()?.unwrap_or(0);
        // Every run of the day ended: its rows elsewhere go by their run id's
        // range (each table indexes `run_id` first), DEFAULT's with them.
        let (from, to) = (run_id_bound(lo), run_id_bound(hi));
        for table in RUN_ROWS {
            let sql = format!("DELETE FROM {table} WHERE run_id >= '{from}' AND run_id < '{to}'");
            tx.fetch_query(made(sql)).await?;
        }
        tx.fetch_query(made(format!("DELETE FROM runs_default WHERE id >= '{from}' AND id < '{to}'"))).await?;
        cut.runs += u64::try_from(runs).unwrap_or(0);
        names.push(name);
        keep_from = Some(hi);
    }
    let Some(keep_from) = keep_from else { return Ok((cut, None)) };
    let dropping = std::time::Instant::now();
    tx.fetch_query(made(format!("DROP TABLE {}", names.join(", ")))).await?;
    cut.drop_ms = dropping.elapsed().as_secs_f64() * 1000.0;
    tx.execute(FORGET_DAYS, vec!["runs".into(), keep_from.into()]).await?;
    cut.partitions = u64::try_from(names.len()).unwrap_or(0);
    Ok((cut, Some(keep_from)))
}

/// PostgreSQL: drops the journal's day partitions ending at or before
/// `before`, then any row left chained at or before `last` (a straggler
/// written with a later instant, or one in the DEFAULT partition).
async fn drop_journal_days(tx: &mut Tx, before: i64, last: i64) -> Result<(), StoreError> {
    let mut names = Vec::new();
    for row in tx.fetch_all(DAYS, vec!["audit".into()]).await? {
        let (name, hi): (String, i64) = (row.get(0)?, row.get(2)?);
        if hi > before {
            break;
        }
        names.push(name);
    }
    if !names.is_empty() {
        tx.fetch_query(made(format!("DROP TABLE {}", names.join(", ")))).await?;
        tx.execute(FORGET_DAYS, vec!["audit".into(), before.into()]).await?;
    }
    tx.execute(DELETE_CHAINED_UP_TO, vec![last.into()]).await?;
    Ok(())
}

/// SQLite: deletes the runs before the first day holding a run that has not
/// ended before `cutoff`, with their rows; the cut and that day's start.
async fn delete_runs(tx: &mut Tx, cutoff: i64) -> Result<(Cut, Option<i64>), StoreError> {
    let first_live = format!("SELECT min(id) FROM runs WHERE {} OR updated_at >= {cutoff}", not_ended());
    let rows = tx.fetch_query(made(first_live)).await?;
    let first: Option<String> = match rows.first() {
        Some(row) => row.get(0)?,
        None => None,
    };
    let keep_from = match first {
        None => day_of(cutoff),
        // An id that is not a UUIDv7 says nothing about its day: keep everything.
        Some(id) => id_ms(&id).map_or(0, |ms| day_of(ms).min(day_of(cutoff))),
    };
    if keep_from <= 0 {
        return Ok((Cut::default(), None));
    }
    let bound = run_id_bound(keep_from);
    for table in RUN_ROWS {
        let mut query = made(format!("DELETE FROM {table} WHERE run_id < "));
        query.bind(Arg::from(bound.as_str()));
        tx.fetch_query(query).await?;
    }
    let runs = tx.execute(DELETE_RUNS_BEFORE, vec![bound.as_str().into()]).await?;
    Ok((Cut { runs, ..Cut::default() }, Some(keep_from)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_bound_sorts_between_the_ids_of_its_instant_and_those_before() {
        let ms = 1_796_083_200_123_i64;
        let bound = run_id_bound(ms);
        let instant = format!("{:08x}-{:04x}", ms >> 16, ms & 0xffff);
        assert_eq!(bound, format!("{instant}-0000-0000-000000000000"));
        let id = format!("{instant}-7abc-8def-0123456789ab");
        assert!(bound.as_str() < id.as_str());
        assert!(run_id_bound(ms - 1).as_str() < bound.as_str());
        let before = format!("{}-7fff-bfff-ffffffffffff", &run_id_bound(ms - 1)[..13]);
        assert!(before.as_str() < bound.as_str());
        // As PostgreSQL's `uuid` orders them: by their bytes.
        let bytes = |text: &str| uuid::Uuid::try_parse(text).map(|u| *u.as_bytes()).ok();
        assert!(bytes(&before) < bytes(&bound) && bytes(&bound) < bytes(&id));
        assert_eq!(id_ms(&id), Some(ms));
        assert_eq!(id_ms("not-an-id"), None);
    }

    #[test]
    fn days_are_utc_days_named_by_date() {
        let ms = 1_796_083_200_000_i64 + 5_000;
        assert_eq!(day_of(ms), 1_796_083_200_000);
        assert_eq!(partition_name("runs", day_of(ms)), "runs_d20261201");
    }
}
