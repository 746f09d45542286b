//! SQLite's writers: the gates they queue at, and group commit for requests.
//!
//! SQLite admits one writer at a time, and each commit waits for its own
//! `fsync`: with one transaction per admission, concurrent admissions queue
//! for the disk one by one. So writers of requests (admissions, operators'
//! commands, activations) that find others waiting share one transaction: each
//! does its work inside a savepoint of the shared transaction (`SAVEPOINT
//! member`), releases it, and passes the gate on instead of committing; the
//! shared transaction commits once, for all of them, and each member's
//! [`SqliteTx::commit`] returns only then, with the commit's outcome. Nothing
//! a member wrote is visible to other connections, or reported to its caller
//! as done, before that commit.
//!
//! Who commits: after passing the gate on, a member queues at the gate again
//! (it is fair, first come first served). Whoever takes the gate first while
//! the shared transaction is still open commits it — that member when it
//! comes round, or a background writer (which never joins: its commits start
//! work at products, so each stands alone) before it begins its own. A member
//! that finds nobody waiting commits at once, as a lone writer always did. A
//! member whose caller dropped it without committing (an error, a read that
//! found what it looked for) has its savepoint rolled back by the next holder
//! of the gate; one with no member before it takes the shared transaction
//! with it. A failed commit fails every member: none of their writes happened.
//! So does a statement error after which SQLite may have rolled the whole
//! transaction back by itself (a full disk, an I/O error: [`ROLLS_BACK`]): the
//! shared transaction is then rolled back rather than committed, since what
//! earlier members wrote may be gone.
//!
//! Background writers (the worker's claims and reports, the sealer) first take
//! turns among themselves in their own lane, so at most one of them is ever
//! ahead of a request's writer.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError};

use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::StoreError;
use crate::db::db;

const SAVEPOINT: &str = "SAVEPOINT member";
const RELEASE: &str = "RELEASE SAVEPOINT member";
const UNDO: &str = "ROLLBACK TO SAVEPOINT member";
/// SQLite's primary result codes after which it may have rolled back the
/// whole transaction by itself: `SQLITE_BUSY`, `SQLITE_NOMEM`,
/// `SQLITE_IOERR`, `SQLITE_CORRUPT`, `SQLITE_FULL`.
const ROLLS_BACK: [i64; 5] = [5, 7, 10, 11, 13];

/// Where this process's SQLite writers queue, in arrival order (see the
/// module doc): SQLite admits one writer anyway, and a connection that finds
/// the database locked waits in its busy handler's growing sleeps (up to
/// 100 ms each), not in a queue.
#[derive(Debug, Default)]
pub(crate) struct Gates {
    writer: Arc<Mutex<()>>,
    background: Arc<Mutex<()>>,
    /// Writers queued at `writer` now.
    waiting: AtomicUsize,
    /// The shared transaction while it is open and nobody is working in it.
    shared: std::sync::Mutex<Option<Shared>>,
    /// Commits of the writers' transactions, for tests.
    commits: AtomicU64,
}

/// The transaction that members of one group write in.
struct Shared {
    tx: Transaction<'static, Sqlite>,
    /// Members whose writes it holds (released savepoints), waiting for its commit.
    members: usize,
    /// A member was dropped without committing: its savepoint is still to be undone.
    undo: bool,
    /// A statement failed in a way after which SQLite may have rolled the
    /// transaction back: it is rolled back, never committed.
    broken: bool,
    /// The commit's outcome, left for the members.
    outcome: Arc<OnceLock<Result<(), String>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("members", &self.members)
            .field("undo", &self.undo)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

/// A SQLite transaction that can write; it holds this process's writer gate
/// (and a background one its lane) while it works.
pub(crate) enum SqliteTx {
    /// A background writer's own transaction.
    Own { tx: Transaction<'static, Sqlite>, _writer: OwnedMutexGuard<()>, _lane: OwnedMutexGuard<()> },
    /// A request's writer, a member of a group.
    Member(Member),
}

/// A request's writer at work in the shared transaction.
pub(crate) struct Member {
    /// `None` only once it has been handed on (committed or dropped).
    shared: Option<Shared>,
    gates: Arc<Gates>,
    /// Dropped after `shared` is back in its place.
    writer: Option<OwnedMutexGuard<()>>,
}

impl Gates {
    /// Queues at the writer gate, counted as waiting meanwhile.
    async fn enter(self: &Arc<Gates>) -> OwnedMutexGuard<()> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let guard = Arc::clone(&self.writer).lock_owned().await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        guard
    }

    fn take_shared(&self) -> Option<Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn put_shared(&self, shared: Shared) {
        *self.shared.lock().unwrap_or_else(PoisonError::into_inner) = Some(shared);
    }

    /// Commits the shared transaction (its last member's savepoint undone
    /// first if need be) and leaves the outcome for its members.
    async fn finish(&self, mut shared: Shared) -> Result<(), String> {
        if shared.broken {
            let _ = shared.outcome.set(Err(BROKEN.to_owned()));
            discard(shared.tx).await;
            return Err(BROKEN.to_owned());
        }
        let undone = if shared.undo { undo(&mut shared.tx).await } else { Ok(()) };
        let outcome = match undone {
            Ok(()) => shared.tx.commit().await.map_err(|e| db(e).to_string()),
            Err(e) => {
                discard(shared.tx).await;
                Err(e.to_string())
            }
        };
        self.commits.fetch_add(1, Ordering::SeqCst);
        let _ = shared.outcome.set(outcome.clone());
        outcome
    }

    /// How many times a writer's transaction committed (tests).
    #[cfg(test)]
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }
}

/// What the members of a broken shared transaction are told.
const BROKEN: &str = "a statement failed in a way after which the database may have rolled the shared \
     transaction back (a full disk, an I/O error): nothing of it was committed";

/// Whether SQLite may have rolled the whole transaction back after `e`.
fn may_have_rolled_back(e: &sqlx::Error) -> bool {
    let code = e.as_database_error().and_then(|d| d.code()).and_then(|c| c.parse::<i64>().ok());
    code.is_some_and(|c| ROLLS_BACK.contains(&(c & 0xff)))
}

/// Rolls back a broken shared transaction. SQLite may have rolled it back
/// by itself already, which the driver does not know: a `BEGIN` first (it
/// fails harmlessly while the transaction is still open) gives its rollback
/// a transaction to end, so the connection goes back to the pool clean.
async fn discard(mut tx: Transaction<'static, Sqlite>) {
    let _ = sqlx::query("BEGIN").execute(&mut *tx).await;
    let _ = tx.rollback().await;
}

/// Undoes the last member's savepoint.
async fn undo(tx: &mut Transaction<'static, Sqlite>) -> Result<(), StoreError> {
    sqlx::query(UNDO).execute(&mut **tx).await.map_err(db)?;
    sqlx::query(RELEASE).execute(&mut **tx).await.map_err(db)?;
    Ok(())
}

/// Starts a background writer's own transaction: its lane, the gate, and the
/// shared transaction committed first if one is open.
pub(crate) async fn begin_background(pool: &SqlitePool, gates: &Arc<Gates>) -> Result<SqliteTx, StoreError> {
    let lane = Arc::clone(&gates.background).lock_owned().await;
    let writer = gates.enter().await;
    if let Some(shared) = gates.take_shared() {
        // Its members find the outcome when they come round; a failure is theirs.
        let _ = gates.finish(shared).await;
    }
    let tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
    Ok(SqliteTx::Own { tx, _writer: writer, _lane: lane })
}

/// Starts a request's writer: the gate, then the shared transaction (a new
/// one when none is open) with a savepoint of its own.
pub(crate) async fn begin_member(pool: &SqlitePool, gates: &Arc<Gates>) -> Result<SqliteTx, StoreError> {
    let writer = gates.enter().await;
    let mut shared = match gates.take_shared() {
        Some(shared) if shared.broken => {
            let _ = shared.outcome.set(Err(BROKEN.to_owned()));
            discard(shared.tx).await;
            None
        }
        Some(mut shared) if shared.undo => match undo(&mut shared.tx).await {
            Ok(()) => {
                shared.undo = false;
                Some(shared)
            }
            Err(e) => {
                // The shared transaction cannot go on: it fails for its members.
                let _ = shared.outcome.set(Err(e.to_string()));
                discard(shared.tx).await;
                None
            }
        },
        other => other,
    };
    if shared.is_none() {
        let tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
        shared = Some(Shared { tx, members: 0, undo: false, broken: false, outcome: Arc::new(OnceLock::new()) });
    }
    let mut member = Member { shared, gates: Arc::clone(gates), writer: Some(writer) };
    sqlx::query(SAVEPOINT).execute(member.conn()?).await.map_err(db)?;
    Ok(SqliteTx::Member(member))
}

impl SqliteTx {
    /// The connection to run statements on.
    pub(crate) fn conn(&mut self) -> Result<&mut SqliteConnection, StoreError> {
        match self {
            SqliteTx::Own { tx, .. } => Ok(&mut **tx),
            SqliteTx::Member(member) => member.conn(),
        }
    }

    /// The store's error for a statement that failed in this transaction; a
    /// failure after which SQLite may have rolled the transaction back marks a
    /// shared one broken (module doc).
    pub(crate) fn failed(&mut self, e: sqlx::Error) -> StoreError {
        if let SqliteTx::Member(member) = self
            && may_have_rolled_back(&e)
            && let Some(shared) = member.shared.as_mut()
        {
            shared.broken = true;
        }
        db(e)
    }

    /// Commits: a background writer's transaction at once; a member's writes
    /// with its group's (see the module doc), returning when that committed.
    pub(crate) async fn commit(self) -> Result<(), StoreError> {
        match self {
            SqliteTx::Own { tx, .. } => tx.commit().await.map_err(db),
            SqliteTx::Member(member) => member.end(RELEASE).await,
        }
    }

    /// Ends without writing anything: a background writer's transaction is
    /// rolled back; a member's own writes are undone, and it returns when
    /// its group committed — so a caller that answers from what it read (a
    /// run another member just admitted) answers only from what is durable.
    pub(crate) async fn abandon(self) -> Result<(), StoreError> {
        match self {
            SqliteTx::Own { tx, .. } => tx.rollback().await.map_err(db),
            SqliteTx::Member(member) => member.end(UNDO).await,
        }
    }
}

impl Member {
    fn conn(&mut self) -> Result<&mut SqliteConnection, StoreError> {
        match self.shared.as_mut() {
            Some(shared) => Ok(&mut *shared.tx),
            None => Err(StoreError::Database("the transaction was already committed".into())),
        }
    }

    /// Ends the member's savepoint with `how` ([`RELEASE`] keeps its writes,
    /// [`UNDO`] drops them), then waits for the group's commit (module doc).
    async fn end(mut self, how: &'static str) -> Result<(), StoreError> {
        sqlx::query(how).execute(self.conn()?).await.map_err(db)?;
        if how == UNDO {
            sqlx::query(RELEASE).execute(self.conn()?).await.map_err(db)?;
        }
        let Some(mut shared) = self.shared.take() else {
            return Err(StoreError::Database("the transaction was already committed".into()));
        };
        shared.members += 1;
        let outcome = Arc::clone(&shared.outcome);
        let gates = Arc::clone(&self.gates);
        if gates.waiting.load(Ordering::SeqCst) == 0 {
            let result = gates.finish(shared).await;
            drop(self.writer.take());
            return result.map_err(StoreError::Database);
        }
        // Others are waiting: they write in the same transaction, and whoever
        // holds the gate next while it is open commits it.
        gates.put_shared(shared);
        drop(self.writer.take());
        let writer = gates.enter().await;
        let result = match outcome.get() {
            Some(done) => done.clone(),
            None => match gates.take_shared() {
                Some(shared) if Arc::ptr_eq(&shared.outcome, &outcome) => gates.finish(shared).await,
                other => {
                    // Not ours: ours ended without an outcome, which cannot be.
                    if let Some(shared) = other {
                        gates.put_shared(shared);
                    }
                    Err("the shared transaction ended without committing".to_owned())
                }
            },
        };
        drop(writer);
        result.map_err(StoreError::Database)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Dropped without committing: its savepoint is undone by the next
        // holder of the gate, or, with no member before it, the whole shared
        // transaction is dropped (rolled back).
        if let Some(mut shared) = self.shared.take() {
            if shared.members == 0 {
                let _ = shared.outcome.set(Err("rolled back".to_owned()));
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) if shared.broken => drop(runtime.spawn(discard(shared.tx))),
                    _ => drop(shared),
                }
            } else {
                shared.undo = true;
                self.gates.put_shared(shared);
            }
        }
        drop(self.writer.take());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::db::{Arg, NoCheck, Pool, Tx, Writer};

    /// A failure guard only: how long the test waits for its writers to queue.
    const QUEUE_LIMIT: Duration = Duration::from_secs(60);

    async fn pool(dir: &tempfile::TempDir) -> (Pool, Arc<Gates>) {
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("group.db").display());
        let pool = Pool::connect(&url, Arc::new(NoCheck)).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let Pool::Sqlite(_, gates) = &pool else { panic!("a SQLite pool") };
        let gates = Arc::clone(gates);
        let mut tx = pool.begin_for(Writer::Background).await.unwrap_or_else(|e| panic!("begin: {e}"));
        tx.execute("CREATE TABLE t (name TEXT NOT NULL)", Vec::new()).await.unwrap_or_else(|e| panic!("create: {e}"));
        tx.commit().await.unwrap_or_else(|e| panic!("commit: {e}"));
        (pool, gates)
    }

    /// Waits until `n` writers queue at the gate.
    async fn queued(gates: &Gates, n: usize) {
        let waited = tokio::time::timeout(QUEUE_LIMIT, async {
            while gates.waiting.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        waited.await.unwrap_or_else(|_| panic!("{n} writers never queued"));
    }

    /// A request writer that inserts `name`, then commits or (`keep` false) drops its transaction.
    fn writer(pool: &Pool, name: &'static str, keep: bool) -> tokio::task::JoinHandle<Result<(), StoreError>> {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut tx = pool.begin_for(Writer::Request).await?;
            tx.execute("INSERT INTO t (name) VALUES ($1)", vec![name.into()]).await?;
            if keep { tx.commit().await } else { Ok(()) }
        })
    }

    async fn names(pool: &Pool) -> Vec<String> {
        let mut read = pool.begin_read().await.unwrap_or_else(|e| panic!("read: {e}"));
        let rows = read.fetch_all("SELECT name FROM t ORDER BY name", Vec::new()).await;
        rows.unwrap_or_else(|e| panic!("select: {e}")).iter().map(|r| r.get::<String>(0).unwrap_or_default()).collect()
    }

    async fn hold_gate(pool: &Pool) -> Tx {
        pool.begin_for(Writer::Background).await.unwrap_or_else(|e| panic!("hold: {e}"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_request_writers_commit_once_together() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (pool, gates) = pool(&dir).await;
        let held = hold_gate(&pool).await;
        const NAMES: [&str; 32] = [
            "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7",
            "b8", "b9", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "d0", "d1",
        ];
        let tasks: Vec<_> = NAMES.iter().map(|n| writer(&pool, n, true)).collect();
        queued(&gates, NAMES.len()).await;
        let before = gates.commits();
        held.commit().await.unwrap_or_else(|e| panic!("held: {e}"));
        for task in tasks {
            task.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("writer: {e}"));
        }
        // Every writer's commit returned after its row was committed, and all in one commit.
        assert_eq!(names(&pool).await.len(), NAMES.len());
        assert_eq!(gates.commits() - before, 1, "one commit for the group");
        // A lone writer afterwards commits on its own.
        writer(&pool, "e0", true).await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(gates.commits() - before, 2);
        assert_eq!(names(&pool).await.len(), NAMES.len() + 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_dropped_without_committing_leaves_only_its_own_writes_out() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (pool, gates) = pool(&dir).await;
        let held = hold_gate(&pool).await;
        // In this order at the gate: kept, dropped, kept; then one dropped last.
        let first = writer(&pool, "first", true);
        queued(&gates, 1).await;
        let dropped = writer(&pool, "dropped", false);
        queued(&gates, 2).await;
        let third = writer(&pool, "third", true);
        queued(&gates, 3).await;
        let last = writer(&pool, "last-dropped", false);
        queued(&gates, 4).await;
        held.commit().await.unwrap_or_else(|e| panic!("held: {e}"));
        for task in [first, dropped, third, last] {
            task.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("writer: {e}"));
        }
        assert_eq!(names(&pool).await, vec!["first".to_owned(), "third".to_owned()]);
        // A member dropped with nobody before it takes the shared transaction with it.
        writer(&pool, "alone", false).await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("{e}"));
        writer(&pool, "after", true).await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&pool).await, vec!["after".to_owned(), "first".to_owned(), "third".to_owned()]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_that_abandons_returns_once_what_it_read_is_committed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (pool, gates) = pool(&dir).await;
        let held = hold_gate(&pool).await;
        let first = writer(&pool, "first", true);
        queued(&gates, 1).await;
        let reader = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut tx = pool.begin_for(Writer::Request).await?;
                tx.execute("INSERT INTO t (name) VALUES ('undone')", Vec::new()).await?;
                let seen = tx.fetch_all("SELECT name FROM t WHERE name = 'first'", Vec::new()).await?.len();
                tx.abandon().await?;
                Ok::<usize, StoreError>(seen)
            })
        };
        queued(&gates, 2).await;
        held.commit().await.unwrap_or_else(|e| panic!("held: {e}"));
        let seen = reader.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("reader: {e}"));
        // It read the first member's row in the shared transaction, and by the
        // time it returned that row was committed; its own write was undone.
        assert_eq!(seen, 1);
        assert_eq!(names(&pool).await, vec!["first".to_owned()]);
        first.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("first: {e}"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_database_fails_the_whole_group_and_commits_none_of_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (pool, gates) = pool(&dir).await;
        let held = hold_gate(&pool).await;
        let first = writer(&pool, "first", true);
        queued(&gates, 1).await;
        // The second member fills the database (SQLITE_FULL), after which SQLite
        // may roll the transaction back by itself: the group must not commit.
        let filler = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut tx = pool.begin_for(Writer::Request).await?;
                let pages: i64 = tx.fetch_all("PRAGMA page_count", Vec::new()).await?[0].get(0)?;
                tx.execute("SELECT 1", Vec::new()).await?;
                let limit = format!("PRAGMA max_page_count = {pages}");
                sqlx::query(&limit).execute(tx_conn(&mut tx)?).await.map_err(db)?;
                let big = vec![7_u8; 1 << 20];
                let full = tx.execute("INSERT INTO t (name) VALUES ($1)", vec![Arg::Bytes(big)]).await;
                sqlx::query("PRAGMA max_page_count = 1073741823").execute(tx_conn(&mut tx)?).await.map_err(db)?;
                Ok::<bool, StoreError>(full.is_err())
            })
        };
        queued(&gates, 2).await;
        // A third member after it: its answer must match what became of its write.
        let third = writer(&pool, "third", true);
        queued(&gates, 3).await;
        held.commit().await.unwrap_or_else(|e| panic!("held: {e}"));
        let refused = filler.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("filler: {e}"));
        assert!(refused, "the insert over max_page_count fails");
        let first = first.await.unwrap_or_else(|e| panic!("task: {e}"));
        assert!(first.is_err(), "the first member is told its write did not happen: {first:?}");
        let third = third.await.unwrap_or_else(|e| panic!("task: {e}"));
        let stored = names(&pool).await;
        assert!(!stored.contains(&"first".to_owned()), "and it did not: {stored:?}");
        assert_eq!(
            third.is_ok(),
            stored.contains(&"third".to_owned()),
            "the third's answer is true: {third:?} {stored:?}"
        );
        // The next writer starts afresh.
        writer(&pool, "after", true).await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("{e}"));
        assert!(names(&pool).await.contains(&"after".to_owned()));
    }

    /// The connection of a writer's transaction (tests).
    fn tx_conn(tx: &mut Tx) -> Result<&mut SqliteConnection, StoreError> {
        match tx {
            Tx::Sqlite(t) => t.conn(),
            _ => Err(StoreError::Database("not a SQLite writer".into())),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_background_writer_commits_an_open_group_before_its_own_work() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (pool, gates) = pool(&dir).await;
        // A request's writer holds the gate (a background one would hold the lane too).
        let held = pool.begin_for(Writer::Request).await.unwrap_or_else(|e| panic!("hold: {e}"));
        let member = writer(&pool, "member", true);
        queued(&gates, 1).await;
        // The background writer queues behind the member, which hands the open group to it.
        let background = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut tx = pool.begin_for(Writer::Background).await?;
                let seen = tx.fetch_all("SELECT name FROM t", Vec::new()).await?.len();
                tx.commit().await?;
                Ok::<usize, StoreError>(seen)
            })
        };
        queued(&gates, 2).await;
        held.commit().await.unwrap_or_else(|e| panic!("held: {e}"));
        member.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("member: {e}"));
        let seen = background.await.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("bg: {e}"));
        assert_eq!(seen, 1, "the member's row was committed before the background writer began");
    }
}
