//! The restore and failover fence's readings (docs/reference/recovery.md#the-fence, recovery after
//! restore; docs/operations.md, "The fence").
//!
//! A database restored from a backup, or a standby promoted before it had
//! every commit, has forgotten leases whose effects products may already have
//! accepted. Nothing in such a database is inconsistent with itself; only a
//! memory outside it can notice, so each process keeps one ([`Memory`]): the
//! last [`Reading`] it saw of the database's identity, its commit epoch and
//! the fence's generation.
//!
//! - **Identity**: on PostgreSQL the cluster's system identifier, the current
//!   timeline and the database's oid (a promotion changes the timeline, a
//!   `pg_restore` into a new database the oid, a new cluster the system
//!   identifier); on SQLite a random id written into the file at its first
//!   start, so a copy carries it.
//! - **Commit epoch**: on PostgreSQL the WAL position flushed so far, which
//!   every write transaction advances and a restore or a lagging standby sets
//!   back; on SQLite a counter each watching process advances at every reading.
//! - **Generation**: how many times an operator accepted a new history by
//!   releasing a restore hold (the `fence` row, with the identity then
//!   accepted). A restore cannot raise it, so a higher one tells every
//!   process to take the database as it now is.
//!
//! The memory trips when a reading disagrees with it — another identity, an
//! epoch or generation that went back — when the identity differs from the
//! one the deployment recorded (checked at start), or when a report names an
//! attempt the database does not know ([`Store::attempt_known`]). It is read
//! at start, every second, and on PostgreSQL on every new connection before
//! anything uses it; a tripped memory makes [`Store::claim_due`] refuse, so no
//! claim reaches a product between the trip and the restore hold the engine
//! then places. Only an armed memory (a normal `serve` or `dev`) trips:
//! recovery-only mode and the command-line tools only read.

use std::sync::{Mutex, MutexGuard, PoisonError};

use sqlx::PgConnection;

use crate::audit::{self, Line};
use crate::db::{Arg, Checking, Dialect, OnConnect, Row, Writer, new_instance};
use crate::types::WorkItem;
use crate::{Store, StoreError};

/// The server's identity and flushed WAL position, and whether the fence row's table exists yet.
const READ_PG: &str = "SELECT (SELECT system_identifier::text FROM pg_control_system()), \
     pg_walfile_name(pg_current_wal_flush_lsn()), \
     (SELECT oid::text FROM pg_database WHERE datname = current_database()), \
     (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint, \
     to_regclass('fence') IS NOT NULL";
const RECORDED: &str = "SELECT system, timeline, database, generation FROM fence WHERE singleton = 1";
const ADVANCE_SQLITE: &str = "UPDATE fence SET epoch = epoch + 1 WHERE singleton = 1 \
     RETURNING system, timeline, database, generation, epoch";
const RECORD: &str = "INSERT INTO fence (singleton, system, timeline, database, epoch, generation, recorded_at) \
     VALUES (1, $1, $2, $3, $4, $5, $6) ON CONFLICT (singleton) DO UPDATE SET system = excluded.system, \
     timeline = excluded.timeline, database = excluded.database, generation = excluded.generation, \
     recorded_at = excluded.recorded_at";
const PLACE: &str = "INSERT INTO restore_hold (singleton, placed_at, placed_by, reason) VALUES (1, $1, $2, $3) \
     ON CONFLICT (singleton) DO NOTHING";
const RUN_EXISTS: &str = "SELECT 1 FROM runs WHERE id = $1";
const WORK_ROW: &str = "SELECT attempt, claims FROM outbox WHERE run_id = $1 AND step = $2 AND kind = $3";

/// Who places a hold the fence placed (`restore_hold.placed_by`).
pub const FENCE_ACTOR: &str = "coordinator";

/// Which database a deployment talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseIdentity {
    /// PostgreSQL's system identifier; SQLite: the file's random id.
    pub system: String,
    /// PostgreSQL's timeline; SQLite: 1.
    pub timeline: i64,
    /// PostgreSQL: the database's oid; SQLite: `sqlite`.
    pub database: String,
}

/// One reading of the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// Its identity.
    pub identity: DatabaseIdentity,
    /// Its commit epoch.
    pub epoch: i64,
    /// The fence's generation (0 before the first acceptance).
    pub generation: i64,
}

/// What a process remembers of its database (handed to the pool as its
/// [`OnConnect`] check, so a new connection is read before it is used).
#[derive(Debug, Default)]
pub(crate) struct Memory {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    armed: bool,
    seen: Option<Reading>,
    tripped: Option<String>,
}

/// What a reading says against the memory.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Nothing is lost: the memory moves on to the reading.
    Advance,
    /// An operator accepted a new history: the memory starts from the reading.
    Rebase,
    /// The database forgot something: the evidence.
    Trip(String),
}

fn judge(seen: &Reading, now: &Reading) -> Verdict {
    let (was, is) = (&seen.identity, &now.identity);
    if now.generation > seen.generation {
        return Verdict::Rebase;
    }
    let evidence = if now.generation < seen.generation {
        format!(
            "the fence's generation went back from {} to {}: the database was restored from a backup taken \
             before an operator's release",
            seen.generation, now.generation
        )
    } else if is.system != was.system {
        format!("the database's system identifier changed from {} to {}: another database", was.system, is.system)
    } else if is.database != was.database {
        format!(
            "the database's oid changed from {} to {}: the database was restored into a new one",
            was.database, is.database
        )
    } else if is.timeline != was.timeline {
        format!(
            "the timeline changed from {} to {}: a standby was promoted, or the database was recovered to a point \
             in time",
            was.timeline, is.timeline
        )
    } else if now.epoch < seen.epoch {
        format!(
            "the commit epoch went back from {} to {}: the database lost commits (restored from a backup, or failed \
             over to a standby that lagged)",
            seen.epoch, now.epoch
        )
    } else {
        return Verdict::Advance;
    };
    Verdict::Trip(evidence)
}

/// The identity recorded against the one read, as evidence when they differ.
fn differs(recorded: &DatabaseIdentity, now: &DatabaseIdentity) -> Option<String> {
    let part = |what: &str, a: &str, b: &str| (a != b).then(|| format!("{what} {a} → {b}"));
    let parts: Vec<String> = [
        part("system identifier", &recorded.system, &now.system),
        part("timeline", &recorded.timeline.to_string(), &now.timeline.to_string()),
        part("database oid", &recorded.database, &now.database),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "the database is not the one the deployment recorded ({}): restored, promoted or replaced since",
            parts.join(", ")
        )
    })
}

impl Memory {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the memory holds now: a reading is judged against what was
    /// known before it was taken, since readings on several connections at
    /// once may arrive out of order (a later one first).
    pub(crate) fn baseline(&self) -> Option<Reading> {
        self.lock().seen.clone()
    }

    /// Judges a reading against `baseline` (taken before it); the memory
    /// keeps the newest reading unless it tripped.
    pub(crate) fn observe(&self, baseline: Option<&Reading>, now: Reading) {
        let mut state = self.lock();
        if !state.armed {
            return;
        }
        let verdict = match baseline {
            Some(seen) => judge(seen, &now),
            None => Verdict::Advance,
        };
        let newest = state.seen.as_ref().is_none_or(|seen| (now.generation, now.epoch) > (seen.generation, seen.epoch));
        let accepted = state.seen.as_ref().is_none_or(|seen| now.generation > seen.generation);
        match verdict {
            // Only a generation the memory has not seen lifts a trip: a late reading of an older one does not.
            Verdict::Rebase if accepted => {
                state.seen = Some(now);
                state.tripped = None;
            }
            Verdict::Rebase | Verdict::Advance if state.tripped.is_none() && newest => state.seen = Some(now),
            Verdict::Rebase | Verdict::Advance => {}
            Verdict::Trip(evidence) => {
                state.tripped.get_or_insert(evidence);
            }
        }
    }

    fn trip(&self, evidence: String) {
        let mut state = self.lock();
        if state.armed {
            state.tripped.get_or_insert(evidence);
        }
    }

    fn tripped(&self) -> Option<String> {
        self.lock().tripped.clone()
    }
}

/// The pool's check of each new PostgreSQL connection (`Store::connect` hands
/// the memory in): the connection is read, and the memory told.
impl OnConnect for Memory {
    fn check<'c>(&'c self, conn: &'c mut PgConnection) -> Checking<'c> {
        Box::pin(on_connect(conn, self))
    }
}

/// Reads a new PostgreSQL connection and tells the memory ([`OnConnect`]).
async fn on_connect(conn: &mut PgConnection, memory: &Memory) -> Result<(), sqlx::Error> {
    use sqlx::Row as _;
    let baseline = memory.baseline();
    let server = sqlx::query(READ_PG).fetch_one(&mut *conn).await?;
    let has_fence: bool = server.try_get(4)?;
    let recorded = match has_fence {
        true => sqlx::query(RECORDED).fetch_optional(&mut *conn).await?.map(Row::Pg),
        false => None,
    };
    let reading = pg_reading(&Row::Pg(server), recorded.as_ref()).map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
    memory.observe(baseline.as_ref(), reading);
    Ok(())
}

/// A reading from [`READ_PG`]'s row and the fence row (its generation).
fn pg_reading(server: &Row, recorded: Option<&Row>) -> Result<Reading, StoreError> {
    let wal_file: String = server.get(1)?;
    let timeline = wal_file
        .get(..8)
        .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| StoreError::Corrupt(format!("WAL file name `{wal_file}` names no timeline")))?;
    let identity = DatabaseIdentity { system: server.get(0)?, timeline, database: server.get(2)? };
    let generation = match recorded {
        Some(row) => row.get(3)?,
        None => 0,
    };
    Ok(Reading { identity, epoch: server.get(3)?, generation })
}

fn identity_of(row: &Row) -> Result<DatabaseIdentity, StoreError> {
    Ok(DatabaseIdentity { system: row.get(0)?, timeline: row.get(1)?, database: row.get(2)? })
}

impl Store {
    /// Reads the database as it is now, with the identity the deployment
    /// recorded (`None` before the first start). On SQLite this advances the
    /// epoch, writing the file's identity at its first reading.
    async fn read(&self, at: i64) -> Result<(Reading, Option<DatabaseIdentity>), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let read = match tx.dialect() {
            Dialect::Pg => {
                let server = tx
                    .fetch_optional(READ_PG, Vec::new())
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("the server's identity read no row".into()))?;
                let recorded = tx.fetch_optional(RECORDED, Vec::new()).await?;
                let reading = pg_reading(&server, recorded.as_ref())?;
                (reading, recorded.as_ref().map(identity_of).transpose()?)
            }
            Dialect::Sqlite => {
                let existed = match tx.fetch_optional(ADVANCE_SQLITE, Vec::new()).await? {
                    Some(row) => Some(row),
                    None => {
                        let system = new_instance();
                        let identity = DatabaseIdentity { system, timeline: 1, database: "sqlite".into() };
                        tx.execute(RECORD, record_args(&identity, 0, 0, at)).await?;
                        None
                    }
                };
                let recorded = existed.is_some();
                let row = match existed {
                    Some(row) => row,
                    None => tx
                        .fetch_optional(ADVANCE_SQLITE, Vec::new())
                        .await?
                        .ok_or_else(|| StoreError::Corrupt("the fence row vanished as it was written".into()))?,
                };
                let identity = identity_of(&row)?;
                let reading = Reading { identity: identity.clone(), epoch: row.get(4)?, generation: row.get(3)? };
                (reading, recorded.then_some(identity))
            }
        };
        tx.commit().await?;
        Ok(read)
    }

    /// Arms this process's fence (a normal start): reads the database,
    /// records its identity at the deployment's first start, and trips when
    /// the recorded identity is not the one read. Returns the evidence when tripped.
    pub async fn arm_fence(&self, at: i64) -> Result<Option<String>, StoreError> {
        let (reading, recorded) = self.read(at).await?;
        let evidence = match &recorded {
            Some(recorded) => differs(recorded, &reading.identity),
            None => {
                let mut tx = self.pool.begin_for(Writer::Background).await?;
                tx.execute(RECORD, record_args(&reading.identity, reading.epoch, reading.generation, at)).await?;
                tx.commit().await?;
                None
            }
        };
        let mut state = self.fence.lock();
        state.armed = true;
        state.seen = Some(reading);
        if let Some(evidence) = &evidence {
            state.tripped.get_or_insert_with(|| evidence.clone());
        }
        Ok(state.tripped.clone())
    }

    /// Reads the database and judges the reading (the watch's round, every second).
    pub async fn check_fence(&self, at: i64) -> Result<(), StoreError> {
        let baseline = self.fence.baseline();
        let (reading, _) = self.read(at).await?;
        self.fence.observe(baseline.as_ref(), reading);
        Ok(())
    }

    /// The evidence of a tripped fence, while it holds.
    pub fn fence_tripped(&self) -> Option<String> {
        self.fence.tripped()
    }

    /// Trips the fence (when armed) with `evidence`.
    pub fn trip_fence(&self, evidence: String) {
        self.fence.trip(evidence);
    }

    /// Accepts the database as it is now (an operator released the restore
    /// hold): records its identity under the next generation, which tells
    /// every process to start its memory over, and lifts this one's fence.
    pub async fn accept_database(&self, at: i64) -> Result<(), StoreError> {
        let (mut reading, _) = self.read(at).await?;
        reading.generation += 1;
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        tx.execute(RECORD, record_args(&reading.identity, reading.epoch, reading.generation, at)).await?;
        tx.commit().await?;
        let mut state = self.fence.lock();
        state.seen = Some(reading);
        state.tripped = None;
        Ok(())
    }

    /// Journals the fence's `evidence` and places the restore hold for it
    /// (kept as it is when one is placed already). Returns whether it placed one.
    pub async fn place_fence_hold(&self, at: i64, evidence: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let placed = tx.execute(PLACE, vec![at.into(), FENCE_ACTOR.into(), evidence.into()]).await? > 0;
        let mut lines =
            vec![Line { kind: "fence", step: None, detail: format!("the fence tripped: {evidence}").into() }];
        if placed {
            lines.push(Line {
                kind: "hold",
                step: None,
                detail: "restore hold placed for the deployment by the fence".into(),
            });
        }
        audit::append(&mut tx, None, at, None, &lines).await?;
        tx.commit().await?;
        Ok(placed)
    }

    /// Whether the database knows the claim of `item` this process made: its
    /// run exists and its outbox row, if still there, is at this attempt or a
    /// later one, claimed at least as often. A row gone means the run moved
    /// on; an earlier attempt, fewer claims or no run mean lost commits.
    pub async fn attempt_known(&self, item: &WorkItem) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        if tx.fetch_optional(RUN_EXISTS, vec![Arg::id(&item.run_id)]).await?.is_none() {
            return Ok(false);
        }
        let args = vec![Arg::id(&item.run_id), item.step.as_str().into(), item.kind.as_str().into()];
        let Some(row) = tx.fetch_optional(WORK_ROW, args).await? else { return Ok(true) };
        let (attempt, claims): (i64, i64) = (row.get(0)?, row.get(1)?);
        Ok(attempt > item.attempt || (attempt == item.attempt && claims >= item.claims))
    }
}

fn record_args(identity: &DatabaseIdentity, epoch: i64, generation: i64, at: i64) -> Vec<Arg> {
    vec![
        identity.system.as_str().into(),
        identity.timeline.into(),
        identity.database.as_str().into(),
        epoch.into(),
        generation.into(),
        at.into(),
    ]
}

/// A [`StoreError`] for a claim the tripped fence refused.
pub(crate) fn refuse(memory: &Memory) -> Result<(), StoreError> {
    match memory.tripped() {
        Some(evidence) => Err(StoreError::Fenced(evidence)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(system: &str, timeline: i64, database: &str, epoch: i64, generation: i64) -> Reading {
        Reading {
            identity: DatabaseIdentity { system: system.into(), timeline, database: database.into() },
            epoch,
            generation,
        }
    }

    #[test]
    fn a_reading_that_moved_on_advances() {
        assert_eq!(judge(&reading("7", 1, "16384", 10, 0), &reading("7", 1, "16384", 10, 0)), Verdict::Advance);
        assert_eq!(judge(&reading("7", 1, "16384", 10, 0), &reading("7", 1, "16384", 99, 0)), Verdict::Advance);
    }

    #[test]
    fn every_kind_of_forgetting_trips_and_names_itself() {
        let seen = reading("7", 1, "16384", 10, 2);
        let cases = [
            (reading("7", 1, "16384", 9, 2), "commit epoch went back from 10 to 9"),
            (reading("7", 2, "16384", 50, 2), "timeline changed from 1 to 2"),
            (reading("7", 1, "16999", 50, 2), "oid changed from 16384 to 16999"),
            (reading("8", 1, "16384", 50, 2), "system identifier changed from 7 to 8"),
            (reading("7", 1, "16384", 50, 1), "generation went back from 2 to 1"),
        ];
        for (now, says) in cases {
            match judge(&seen, &now) {
                Verdict::Trip(evidence) => assert!(evidence.contains(says), "{evidence} should say {says}"),
                other => panic!("{now:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn an_operators_acceptance_rebases_whatever_else_changed() {
        let seen = reading("7", 1, "16384", 10, 0);
        assert_eq!(judge(&seen, &reading("7", 2, "16384", 3, 1)), Verdict::Rebase);
    }

    /// A reading judged against what the memory held just before it.
    fn see(memory: &Memory, now: Reading) {
        let baseline = memory.baseline();
        memory.observe(baseline.as_ref(), now);
    }

    #[test]
    fn readings_that_arrive_out_of_order_do_not_trip() {
        let memory = Memory::default();
        memory.lock().armed = true;
        see(&memory, reading("7", 1, "1", 10, 0));
        // Two connections read at once: both knew epoch 10; the later reading (30) lands first.
        let before = memory.baseline();
        see(&memory, reading("7", 1, "1", 30, 0));
        memory.observe(before.as_ref(), reading("7", 1, "1", 20, 0));
        assert_eq!(memory.tripped(), None);
        assert_eq!(memory.baseline().map(|r| r.epoch), Some(30), "the newest reading is kept");
        see(&memory, reading("7", 1, "1", 25, 0));
        assert!(memory.tripped().is_some(), "read after 30 was known, 25 went back");
    }

    #[test]
    fn a_late_reading_of_an_old_acceptance_does_not_lift_a_trip() {
        let memory = Memory::default();
        memory.lock().armed = true;
        see(&memory, reading("7", 1, "1", 10, 0));
        let before = memory.baseline();
        see(&memory, reading("7", 1, "1", 20, 1));
        see(&memory, reading("7", 1, "1", 5, 1));
        assert!(memory.tripped().is_some());
        memory.observe(before.as_ref(), reading("7", 1, "1", 21, 1));
        assert!(memory.tripped().is_some(), "generation 1 was seen already");
    }

    #[test]
    fn an_unarmed_memory_never_trips_and_a_trip_holds_until_a_rebase() {
        let memory = Memory::default();
        see(&memory, reading("7", 1, "1", 10, 0));
        memory.trip("evidence".into());
        assert_eq!(memory.tripped(), None, "unarmed");
        memory.lock().armed = true;
        see(&memory, reading("7", 1, "1", 10, 0));
        see(&memory, reading("7", 1, "1", 5, 0));
        let tripped = memory.tripped().unwrap_or_default();
        assert!(tripped.contains("went back from 10 to 5"), "{tripped}");
        see(&memory, reading("7", 1, "1", 50, 0));
        assert!(memory.tripped().is_some(), "a later epoch does not lift the fence");
        see(&memory, reading("7", 1, "1", 6, 1));
        assert_eq!(memory.tripped(), None, "an acceptance does");
        see(&memory, reading("7", 1, "1", 5, 1));
        assert!(memory.tripped().is_some(), "judged from the accepted reading on");
    }

    #[test]
    fn a_recorded_identity_that_differs_is_named_part_by_part() {
        let recorded = DatabaseIdentity { system: "7".into(), timeline: 1, database: "16384".into() };
        assert_eq!(differs(&recorded, &recorded), None);
        let promoted = DatabaseIdentity { timeline: 2, ..recorded.clone() };
        let evidence = differs(&recorded, &promoted).unwrap_or_default();
        assert!(evidence.contains("timeline 1 → 2") && !evidence.contains("oid"), "{evidence}");
    }
}
