//! The durable store of Coordinator: packages, runs, the outbox, timers and the
//! audit journal, on SQLite (embedded, WAL; the default for `coordinator dev`)
//! or PostgreSQL (production; several coordinator processes share one).
//!
//! [`Store`] is one concrete type over both backends (an enum inside, see
//! `db`), not a trait: the two backends share every statement except a lock
//! clause, so one implementation with a dialect switch is shorter than two
//! implementations of a trait, and callers need no generics or boxing. An
//! in-memory store for engine tests can still sit behind a trait the engine
//! defines over this type.
//!
//! The store decides nothing and reads no clock: the caller hands in `now`,
//! and a decision arrives as a closure that runs inside the run's transaction
//! (lock, decide, persist, commit — docs/internals/engine.md). Snapshots are opaque bytes.
//!
//! The crate's map, one line per module: `db` is the bottom layer (it knows
//! no table and imports nothing above it but the leaves), `types` and
//! `error` are leaves every module may use, and the others know tables and build on `db`.
//! - `active_revisions`: the deployment's active revisions, with their package digests, and what each revision still holds.
//! - `admissions_pg`: PostgreSQL's admission of new runs in one statement.
//! - `admissions_sqlite`: SQLite's admissions together, a statement per table over JSON arrays.
//! - `audit`: the hash-chained journal: written with its decision, sealed after commit, read.
//! - `batch_leases`: the leases of a PostgreSQL batch of reports, read first and held to commit.
//! - `batch_sqlite`: group commit of fenced reports on SQLite.
//! - `grouped`: a batch's writes gathered into a statement per kind of write (deletes first), and which decisions may be.
//! - `batch`: group commit of fenced reports: many runs' reports in one transaction.
//! - `batches`: durable operator batches: the runs each matched, their outcomes, the lease of who works one.
//! - `claims`: leases on outbox and timer rows, the fencing check, when work is next due.
//! - `connections`: the deployment's state of each connection: an operator's pause.
//! - `console_sessions`: console sessions ended by signing out, for every process.
//! - `commit_leases`: eager dispatch: work a batch queues, leased at once to its committing worker.
//! - `db`: the database layer: pool and dialect, transactions, arguments, rows, gates, LISTEN/NOTIFY.
//! - `error`: [`StoreError`], the one error type of every layer (a leaf).
//! - `events`: trigger events admitted, by id.
//! - `fence`: the restore and failover fence's readings and memory (the pool's connect check).
//! - `hold`: the deployment's restore-hold flag.
//! - `inbox`: the operator's attention inbox.
//! - `listing`: pages of runs: oldest first, newest first with filters.
//! - `migrations`: the schema migrations compiled in, and the released checksums they keep.
//! - `packages`: stored packages, one row per revision.
//! - `persist`: actions → SQL, inside the decision's transaction.
//! - `remote`: remote workers' lanes, offers, leases and reports.
//! - `retention`: day partitions and retention.
//! - `runs`: activating a revision, admitting, applying a decision, reading one run.
//! - `schedules`: one row per schedule of an active revision: its next instant, last firing, pause and lease.
//! - `schema`: whether a database's schema is this version's.
//! - `search_keys`: the runs' search keys: written at admission, read for a run's pages.
//! - `snapshot_frame`: a run's snapshot in two columns, a base written rarely and a head each decision.
//! - `stats`: monitoring reads at scrape time.
//! - `tidy`: vacuuming the queue tables on PostgreSQL.
//! - `types`: the values that cross the store's interface; it imports no other module.
//! - `waits`: the completion-reference index.
//! - `wakeups`: cross-process notification of new work: asking for it, subscribing.
//!
//! Connecting, migrating, [`Store::ping`] and closing are here.

mod active_revisions;
mod admissions_pg;
mod admissions_sqlite;
mod audit;
mod batch;
mod batch_leases;
mod batch_sqlite;
mod batches;
mod claims;
mod commit_leases;
mod connections;
mod console_sessions;
mod db;
mod error;
mod events;
mod fence;
mod grouped;
mod hold;
mod inbox;
mod listing;
mod migrations;
mod packages;
mod persist;
mod remote;
mod retention;
mod runs;
mod schedules;
mod schema;
mod search_keys;
pub mod snapshot_frame;
mod stats;
mod tidy;
mod types;
mod waits;
mod wakeups;

pub use active_revisions::{ActiveRevision, RevisionHolding};
pub use audit::{AuditPage, RunJournal};
pub use batches::{BatchRun, BatchView, MOST_BATCH_RUNS, NewBatch, Started};
pub use commit_leases::Batched;
pub use connections::allowance::{ALLOWANCE_MS, MOST_PERMITS};
pub use connections::eager::CLAIM_ROOM;
pub use connections::limits::FULL_RECHECK_MS;
pub use connections::{ConnectionState, PaceView, Pause, workflow_lane};
pub use db::Wakeups;
pub use error::StoreError;
pub use fence::{DatabaseIdentity, FENCE_ACTOR, Reading};
pub use hold::Hold;
pub use persist::{TIMER_WAKE_HORIZON_MS, timer_wakes, wakes_workers};
pub use retention::{AHEAD_DAYS, Cut, DAY_MS, Prepared, day_of, id_ms, run_id_bound};
pub use schedules::{Paused, ScheduleMove, ScheduleRow, ScheduleSeed};
pub use schema::Schema;
pub use stats::{AttentionCount, QueueHeads};
pub use types::{
    Admission, AdmissionGate, AttentionCursor, AttentionGroup, AttentionReason, Claim, ClaimLimits, ClaimedRun, Cursor,
    Decision, Due, EagerLease, Guarded, GuardedAdmission, KeyedRun, ListFilter, NewRun, Package, Page, RunFilter,
    RunMeta, RunRow, RunWork, TimerItem, TriggerEvent, WorkItem, WorkKind, WorkScope,
};

/// The readiness probe's statement: a round trip that reads no table.
const PING: &str = "SELECT 1";

/// The store: a connection pool to one database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: db::Pool,
    /// What this process remembers of the database (`fence`).
    fence: std::sync::Arc<fence::Memory>,
    /// What this process remembers of the connections' pauses (`connections`).
    connections: std::sync::Arc<connections::Memory>,
}

impl Store {
    /// Connects to `sqlite://path?mode=rwc` (WAL mode) or `postgres://…`.
    /// Does not migrate: call [`Store::migrate`].
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        let fence = std::sync::Arc::new(fence::Memory::default());
        // The fence reads every new PostgreSQL connection before anything uses it.
        let on_connect: std::sync::Arc<dyn db::OnConnect> = std::sync::Arc::<fence::Memory>::clone(&fence);
        let connections = std::sync::Arc::default();
        Ok(Store { pool: db::Pool::connect(url, on_connect).await?, fence, connections })
    }

    /// Brings the schema up to date, applying the migrations a database has not
    /// had yet (an existing database is upgraded in place), then seals every
    /// pending audit entry into the chain (those written before the journal
    /// was hash-chained, 0005, as well as any not sealed yet).
    /// Idempotent.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let dialect = match &self.pool {
            db::Pool::Sqlite(..) => db::Dialect::Sqlite,
            db::Pool::Pg(..) => db::Dialect::Pg,
        };
        let migrator = migrations::migrator(dialect).await?;
        let result = match &self.pool {
            db::Pool::Sqlite(p, _) => migrator.run(p).await,
            db::Pool::Pg(p, _) => migrator.run(p).await,
        };
        result.map_err(|e| StoreError::Database(format!("migrating the {} schema: {e}", migrations::name(dialect))))?;
        audit::seal_all(self).await.map(|_| ())
    }

    /// One trivial round trip (`SELECT 1`) on a pooled connection, for a
    /// readiness check: `Ok` when the database answers. It takes neither
    /// SQLite's writer gate nor the background lane, so a long write does not
    /// make it wait. Taking the connection is bounded by the pool's acquire
    /// timeout (30 s; an idle connection is tested before it is handed out):
    /// a database that no longer exists fails at once, a server that refuses
    /// connections once the retries have used up that timeout.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.pool.begin_read().await?.execute(PING, Vec::new()).await.map(|_| ())
    }

    /// Closes every connection (waits for those in use to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}
