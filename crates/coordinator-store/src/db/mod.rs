//! The dialect adapter: one connection pool and one transaction type over the
//! two backends, so every statement of the store is written once.
//!
//! It owns connecting (SQLite in WAL mode with a busy timeout, PostgreSQL with a
//! small pool), how a transaction starts (`BEGIN IMMEDIATE` on SQLite, so a
//! writer holds the database lock from its first read), binding [`Arg`]s and
//! decoding columns. It must not know any table: SQL text comes from the
//! callers, who write `$n` placeholders (SQLite accepts `$NNN` as well) —
//! `&'static str` statements, or, for the few reads whose WHERE clause
//! depends on which filters a caller gave, a [`Query`] assembled from
//! `&'static str` fragments and numbered placeholders only.

mod gates;
mod hangup;
mod run_ids;

use std::str::FromStr;
use std::time::Duration;

use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow};
use sqlx::{Decode, Postgres, Row as _, Sqlite, Transaction, Type};

use crate::wakeups::Announcer;
use crate::{StoreError, fence, wakeups};
use gates::{Gates, SqliteTx};
pub(crate) use hangup::Hangups;
use run_ids::{pg_id, sqlite_id, uuid_as_text};

/// How long a SQLite writer waits for the database lock before giving up.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long taking a connection from either pool may take, opening one
/// included (sqlx's default, named because `Store::ping` answers within it):
/// a refused connection is retried until then, a database that does not exist
/// fails at once.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// The backend's connection pool.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    /// An embedded SQLite database file, and the gates its writers queue at.
    Sqlite(SqlitePool, Arc<Gates>),
    /// A PostgreSQL server, and what its handles share.
    Pg(PgPool, PgShared),
}

/// What every handle of a PostgreSQL pool shares: the task that tells other
/// processes of new work, and the memory of the server hanging up.
#[derive(Debug, Clone)]
pub(crate) struct PgShared {
    announcer: Announcer,
    pub(crate) hangups: Arc<Hangups>,
}

impl PgShared {
    /// An error taking a connection or beginning a transaction, before any
    /// statement was sent: a lost connection or a pool that found none in
    /// time is [`StoreError::Unavailable`].
    fn unreached(&self, e: sqlx::Error) -> StoreError {
        let e = self.hangups.note(e);
        if hangup::is_lost(&e) || matches!(e, sqlx::Error::PoolTimedOut) {
            StoreError::Unavailable(e.to_string())
        } else {
            db(e)
        }
    }
}

/// Which SQL dialect a statement is written in, where the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// SQLite.
    Sqlite,
    /// PostgreSQL.
    Pg,
}

/// Whose write a transaction is, for SQLite's [`Gates`] (PostgreSQL's
/// writers need no gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A request's: admissions, operators' commands, activations.
    Request,
    /// The background's: claims, reports, sealing.
    Background,
}

/// Connections per process to PostgreSQL: few enough for several processes to
/// share the server's default 100.
const PG_MAX_CONNECTIONS: u32 = 10;

/// A pooled PostgreSQL connection idle for longer than this is pinged before
/// it is handed out (one round trip), so a connection the server dropped
/// while it sat idle (a restart, an idle timeout) is replaced instead of
/// failing its first statement. One in use moments ago is handed out as is
/// (sqlx's default pinged on every acquire, a round trip per transaction:
/// bench/RESULTS.md, eighth sitting) unless it was put back before a
/// hang-up that some handle has seen since (`hangup`).
const PG_PING_IF_IDLE: Duration = Duration::from_secs(1);

/// How many times a PostgreSQL transaction is begun in all when its `BEGIN`
/// fails on a lost connection: once per pooled connection, plus a new one.
const PG_BEGIN_TRIES: u32 = PG_MAX_CONNECTIONS + 1;

impl Pool {
    /// Connects from a URL: `sqlite://path?mode=rwc` or `postgres://…`.
    pub(crate) async fn connect(url: &str, fence: Arc<fence::Memory>) -> Result<Pool, StoreError> {
        if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(db)?
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .foreign_keys(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(8)
                // An embedded file has no server to hang up: no ping before each use.
                .test_before_acquire(false)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_with(options)
                .await
                .map_err(db)?;
            Ok(Pool::Sqlite(pool, Arc::new(Gates::default())))
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            let instance: Arc<str> = wakeups::new_instance().into();
            let hangups = Arc::new(Hangups::default());
            let seen = Arc::clone(&hangups);
            let pool = PgPoolOptions::new()
                .max_connections(PG_MAX_CONNECTIONS)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .test_before_acquire(false)
                .before_acquire(move |conn, meta| {
                    let stale = meta.idle_for > PG_PING_IF_IDLE || seen.predates(meta.idle_for);
                    Box::pin(async move {
                        // A failed ping is expected after a hang-up: the pool replaces the connection.
                        Ok(!stale || sqlx::Connection::ping(conn).await.is_ok())
                    })
                })
                .after_connect(move |conn, _| {
                    let (instance, fence) = (Arc::clone(&instance), Arc::clone(&fence));
                    Box::pin(async move {
                        wakeups::mark_connection(conn, &instance).await?;
                        // Read before anything uses the connection (a restored or promoted server trips the fence).
                        fence::on_connect(conn, &fence).await
                    })
                })
                .connect(url)
                .await
                .map_err(db)?;
            let announcer = Announcer::start(pool.clone(), Arc::clone(&hangups));
            Ok(Pool::Pg(pool, PgShared { announcer, hangups }))
        } else {
            Err(StoreError::UnsupportedUrl(url.split(':').next().unwrap_or_default().to_owned()))
        }
    }

    /// Starts a transaction that can write, for a request (see [`Writer`]).
    pub(crate) async fn begin(&self) -> Result<Tx, StoreError> {
        self.begin_for(Writer::Request).await
    }

    /// Starts a transaction that can write, for `writer`.
    pub(crate) async fn begin_for(&self, writer: Writer) -> Result<Tx, StoreError> {
        match self {
            Pool::Sqlite(p, gates) => Ok(Tx::Sqlite(match writer {
                Writer::Request => gates::begin_member(p, gates).await?,
                Writer::Background => gates::begin_background(p, gates).await?,
            })),
            Pool::Pg(p, shared) => {
                let mut tries = 1;
                loop {
                    match p.begin().await {
                        Ok(tx) => return Ok(Tx::Pg(tx, Announce::new(shared))),
                        // BEGIN changed nothing: begin again, on another connection.
                        Err(e) if hangup::is_lost(&e) && tries < PG_BEGIN_TRIES => {
                            shared.hangups.seen();
                            tries += 1;
                        }
                        Err(e) => return Err(shared.unreached(e)),
                    }
                }
            }
        }
    }

    /// A handle for reads: a pooled connection outside any transaction, on
    /// either backend. Each statement reads its own committed snapshot, and no
    /// `BEGIN` or `ROLLBACK` is spent on a read (on SQLite each statement is a
    /// trip to the connection's thread and back) — so a read of several
    /// statements must not depend on their seeing one moment. On PostgreSQL
    /// it also carries the writes that are one statement each (a plain
    /// admission, a worker's claim round): each commits on its own.
    pub(crate) async fn begin_read(&self) -> Result<Tx, StoreError> {
        match self {
            Pool::Sqlite(p, _) => Ok(Tx::SqliteRead(p.acquire().await.map_err(db)?)),
            Pool::Pg(p, shared) => {
                Ok(Tx::PgRead(p.acquire().await.map_err(|e| shared.unreached(e))?, Announce::new(shared)))
            }
        }
    }

    /// Closes every connection.
    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite(p, _) => p.close().await,
            Pool::Pg(p, _) => p.close().await,
        }
    }
}

/// A value bound to a `$n` placeholder.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Text(String),
    MaybeText(Option<String>),
    Int(i64),
    MaybeInt(Option<i64>),
    Flag(bool),
    Bytes(Vec<u8>),
    MaybeBytes(Option<Vec<u8>>),
    /// A run id: a `uuid` on PostgreSQL, its text on SQLite ([`Arg::id`]).
    Id(String),
    /// A run id or NULL.
    MaybeId(Option<String>),
    /// A PostgreSQL `uuid[]` of run ids.
    Ids(Vec<String>),
    /// A PostgreSQL `uuid[]` of run ids with NULLs.
    MaybeIds(Vec<Option<String>>),
    /// A PostgreSQL `text[]` (set-based statements over `unnest`; SQLite has no arrays).
    Texts(Vec<String>),
    /// A PostgreSQL `text[]` with NULLs.
    MaybeTexts(Vec<Option<String>>),
    /// A PostgreSQL `bigint[]`.
    Ints(Vec<i64>),
    /// A PostgreSQL `bool[]`.
    Flags(Vec<bool>),
    /// A PostgreSQL `bytea[]`.
    Blobs(Vec<Vec<u8>>),
    /// A PostgreSQL `bytea[]` with NULLs.
    MaybeBlobs(Vec<Option<Vec<u8>>>),
}

impl Arg {
    /// A run id bound where the column is a run id (`runs.id`, every `run_id`).
    pub(crate) fn id(id: &str) -> Arg {
        Arg::Id(id.to_owned())
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Arg {
        Arg::Text(v.to_owned())
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Arg {
        Arg::Text(v)
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Arg {
        Arg::MaybeText(v.map(str::to_owned))
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::Int(v)
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Arg {
        Arg::MaybeInt(v)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Arg {
        Arg::Flag(v)
    }
}
impl From<Option<Vec<u8>>> for Arg {
    fn from(v: Option<Vec<u8>>) -> Arg {
        Arg::MaybeBytes(v)
    }
}
impl From<&[u8]> for Arg {
    fn from(v: &[u8]) -> Arg {
        Arg::Bytes(v.to_vec())
    }
}

/// A read assembled from fixed pieces of SQL (listing runs by the filters a
/// caller gave): its text only ever grows by `&'static str` fragments and by
/// placeholders the builder numbers itself, and every value is a bound
/// [`Arg`], so no value can reach the SQL text.
///
/// It is sent as an unnamed statement, not cached: PostgreSQL then plans it
/// with the values bound (a cached statement would, after five runs, get a
/// generic plan, which assumes a `LIMIT $n` returns a tenth of the table and
/// knows no value's frequency), and the connections' statement caches do not
/// fill with filter combinations.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    sql: String,
    args: Vec<Arg>,
}

impl Query {
    /// A statement starting with `head`.
    pub(crate) fn new(head: &'static str) -> Query {
        Query { sql: head.to_owned(), args: Vec::new() }
    }

    /// Appends a fixed piece of SQL.
    pub(crate) fn push(&mut self, fragment: &'static str) -> &mut Query {
        self.sql.push_str(fragment);
        self
    }

    /// Appends SQL the store composed itself from numbers it computed (the
    /// name and bounds of a day partition): never text from a caller.
    pub(crate) fn push_made(&mut self, fragment: &str) -> &mut Query {
        self.sql.push_str(fragment);
        self
    }

    /// Binds a value, appending its placeholder (`$n`, numbered in order).
    pub(crate) fn bind(&mut self, arg: impl Into<Arg>) -> &mut Query {
        self.args.push(arg.into());
        self.sql.push('$');
        self.sql.push_str(&self.args.len().to_string());
        self
    }

    /// The text as assembled (for tests).
    #[cfg(test)]
    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }
}

/// Binds every argument in order to a SQLite query. Arrays have no SQLite
/// type: a statement that binds one is written for PostgreSQL only.
fn bind_sqlite(sql: &str, args: Vec<Arg>) -> Result<SqliteQuery<'_>, StoreError> {
    let mut q = sqlx::query(sql);
    for arg in args {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::MaybeText(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::MaybeInt(v) => q.bind(v),
            Arg::Flag(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
            Arg::MaybeBytes(v) => q.bind(v),
            Arg::Id(v) => q.bind(sqlite_id(v)),
            Arg::MaybeId(v) => q.bind(v.map(sqlite_id)),
            Arg::Ids(_)
            | Arg::MaybeIds(_)
            | Arg::Texts(_)
            | Arg::MaybeTexts(_)
            | Arg::Ints(_)
            | Arg::Flags(_)
            | Arg::Blobs(_)
            | Arg::MaybeBlobs(_) => {
                return Err(StoreError::Database(format!("an array bound to a SQLite statement: {sql}")));
            }
        };
    }
    Ok(q)
}

/// Binds every argument in order to a PostgreSQL query.
fn bind_pg(sql: &str, args: Vec<Arg>) -> PgQuery<'_> {
    let mut q = sqlx::query(sql);
    for arg in args {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::MaybeText(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::MaybeInt(v) => q.bind(v),
            Arg::Flag(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
            Arg::MaybeBytes(v) => q.bind(v),
            Arg::Id(v) => q.bind(pg_id(&v)),
            Arg::MaybeId(v) => q.bind(v.as_deref().map(pg_id)),
            Arg::Ids(v) => q.bind(v.iter().map(|id| pg_id(id)).collect::<Vec<_>>()),
            Arg::MaybeIds(v) => q.bind(v.iter().map(|id| id.as_deref().map(pg_id)).collect::<Vec<_>>()),
            Arg::Texts(v) => q.bind(v),
            Arg::MaybeTexts(v) => q.bind(v),
            Arg::Ints(v) => q.bind(v),
            Arg::Flags(v) => q.bind(v),
            Arg::Blobs(v) => q.bind(v),
            Arg::MaybeBlobs(v) => q.bind(v),
        };
    }
    q
}

type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>;
type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// Whether a PostgreSQL transaction's commit is to be announced to other
/// processes (`wakeups::notify` asked for it), by whom, and where a lost
/// connection is to be told.
pub(crate) struct Announce {
    shared: PgShared,
    due: bool,
}

impl Announce {
    fn new(shared: &PgShared) -> Announce {
        Announce { shared: shared.clone(), due: false }
    }

    /// A PostgreSQL error as the store reports it, noting a lost connection.
    /// A connection lost inside a transaction not yet committed is
    /// [`StoreError::Unavailable`] (the server rolls that transaction back);
    /// anywhere else whether the statement took effect is not known.
    fn failed(&self, e: sqlx::Error, uncommitted: bool) -> StoreError {
        let e = self.shared.hangups.note(e);
        if uncommitted && hangup::is_lost(&e) { StoreError::Unavailable(e.to_string()) } else { db(e) }
    }
}

/// An open transaction. Dropping it without [`Tx::commit`] rolls it back.
pub(crate) enum Tx {
    Sqlite(SqliteTx),
    Pg(Transaction<'static, Postgres>, Announce),
    /// A PostgreSQL connection outside any transaction ([`Pool::begin_read`]).
    PgRead(PoolConnection<Postgres>, Announce),
    /// A SQLite connection outside any transaction ([`Pool::begin_read`]).
    SqliteRead(PoolConnection<Sqlite>),
}

/// The connection under a [`Tx`], for running one statement.
enum On<'a> {
    Sqlite(&'a mut SqliteTx),
    SqliteRead(&'a mut sqlx::SqliteConnection),
    /// A PostgreSQL connection, and whether it is inside a transaction.
    Pg(&'a mut sqlx::PgConnection, &'a Announce, bool),
}

impl Tx {
    /// The dialect, for the few statements written twice.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Tx::Sqlite(_) | Tx::SqliteRead(_) => Dialect::Sqlite,
            Tx::Pg(..) | Tx::PgRead(..) => Dialect::Pg,
        }
    }

    /// The connection under this handle: PostgreSQL's two kinds of handle run
    /// statements alike.
    fn on(&mut self) -> On<'_> {
        match self {
            Tx::Sqlite(t) => On::Sqlite(t),
            Tx::SqliteRead(c) => On::SqliteRead(c),
            Tx::Pg(tx, a) => On::Pg(tx, a, true),
            Tx::PgRead(conn, a) => On::Pg(conn, a, false),
        }
    }

    /// Runs a statement; returns the number of rows it changed.
    pub(crate) async fn execute(&mut self, sql: &'static str, args: Vec<Arg>) -> Result<u64, StoreError> {
        Ok(match self.on() {
            On::Sqlite(t) => bind_sqlite(sql, args)?.execute(t.conn()?).await.map_err(|e| t.failed(e))?.rows_affected(),
            On::SqliteRead(c) => bind_sqlite(sql, args)?.execute(c).await.map_err(db)?.rows_affected(),
            On::Pg(c, a, uncommitted) => {
                bind_pg(sql, args).execute(c).await.map_err(|e| a.failed(e, uncommitted))?.rows_affected()
            }
        })
    }

    /// Runs a query returning at most one row.
    pub(crate) async fn fetch_optional(
        &mut self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> Result<Option<Row>, StoreError> {
        Ok(match self.on() {
            On::Sqlite(t) => {
                bind_sqlite(sql, args)?.fetch_optional(t.conn()?).await.map_err(|e| t.failed(e))?.map(Row::Sqlite)
            }
            On::SqliteRead(c) => bind_sqlite(sql, args)?.fetch_optional(c).await.map_err(db)?.map(Row::Sqlite),
            On::Pg(c, a, uncommitted) => {
                bind_pg(sql, args).fetch_optional(c).await.map_err(|e| a.failed(e, uncommitted))?.map(Row::Pg)
            }
        })
    }

    /// Runs a query returning any number of rows.
    pub(crate) async fn fetch_all(&mut self, sql: &'static str, args: Vec<Arg>) -> Result<Vec<Row>, StoreError> {
        self.fetch_bound(sql, args, true).await
    }

    /// Runs an assembled read (see [`Query`]), unnamed and uncached.
    pub(crate) async fn fetch_query(&mut self, query: Query) -> Result<Vec<Row>, StoreError> {
        let Query { sql, args } = query;
        self.fetch_bound(&sql, args, false).await
    }

    /// Runs a query returning any number of rows, its statement prepared and
    /// cached on the connection when `persistent`.
    async fn fetch_bound(&mut self, sql: &str, args: Vec<Arg>, persistent: bool) -> Result<Vec<Row>, StoreError> {
        Ok(match self.on() {
            On::Sqlite(t) => {
                let q = bind_sqlite(sql, args)?.persistent(persistent);
                q.fetch_all(t.conn()?).await.map_err(|e| t.failed(e))?.into_iter().map(Row::Sqlite).collect()
            }
            On::SqliteRead(c) => {
                let q = bind_sqlite(sql, args)?.persistent(persistent);
                q.fetch_all(c).await.map_err(db)?.into_iter().map(Row::Sqlite).collect()
            }
            On::Pg(c, a, uncommitted) => {
                let q = bind_pg(sql, args).persistent(persistent);
                q.fetch_all(c).await.map_err(|e| a.failed(e, uncommitted))?.into_iter().map(Row::Pg).collect()
            }
        })
    }

    /// Ends the transaction as `result` says: committed when it is `Ok` (a
    /// failed commit is the answer then), abandoned ([`Tx::abandon`]) when it
    /// is an error, which is the answer unless abandoning fails too.
    pub(crate) async fn settle<T>(self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match result {
            Ok(value) => self.commit().await.map(|()| value),
            Err(e) => {
                self.abandon().await?;
                Err(e)
            }
        }
    }

    /// Commits.
    pub(crate) async fn commit(self) -> Result<(), StoreError> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Pg(tx, announce) => {
                tx.commit().await.map_err(|e| announce.failed(e, false))?;
                if announce.due {
                    announce.shared.announcer.announce();
                }
                Ok(())
            }
            // Nothing to commit: every statement committed on its own.
            Tx::PgRead(..) | Tx::SqliteRead(_) => Ok(()),
        }
    }

    /// Ends a transaction that is to write nothing, once what it read may be
    /// answered from: rolled back, except that a SQLite request's writer in a
    /// group waits for its group's commit (`gates`), since it may have read
    /// what earlier members wrote. Its error replaces the caller's answer.
    pub(crate) async fn abandon(self) -> Result<(), StoreError> {
        match self {
            Tx::Sqlite(t) => t.abandon().await,
            Tx::Pg(tx, a) => tx.rollback().await.map_err(|e| a.failed(e, true)),
            Tx::PgRead(..) | Tx::SqliteRead(_) => Ok(()),
        }
    }

    /// Tells other processes of new work once what this handle wrote is
    /// committed: at [`Tx::commit`] for a transaction, at once for a handle
    /// outside one (its statements committed as they ran). Nothing on SQLite.
    pub(crate) fn announce_after_commit(&mut self) {
        match self {
            Tx::Pg(_, announce) => announce.due = true,
            Tx::PgRead(_, announce) => announce.shared.announcer.announce(),
            Tx::Sqlite(_) | Tx::SqliteRead(_) => {}
        }
    }
}

/// A result row of either backend.
pub(crate) enum Row {
    Sqlite(SqliteRow),
    Pg(PgRow),
}

impl Row {
    /// The value of column `index`, decoded as `T`; a type mismatch means the
    /// schema is not what this code expects.
    ///
    /// A PostgreSQL `uuid` column (a run id) decodes as its hyphenated text
    /// where a `String` or an `Option<String>` is asked, so a run id reads
    /// alike from both backends.
    pub(crate) fn get<T>(&self, index: usize) -> Result<T, StoreError>
    where
        T: for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres> + 'static,
    {
        let decoded = match self {
            Row::Sqlite(r) => r.try_get::<T, _>(index),
            Row::Pg(r) => match uuid_as_text::<T>(r, index) {
                Some(text) => text,
                None => r.try_get::<T, _>(index),
            },
        };
        decoded.map_err(|e| StoreError::Corrupt(format!("column {index}: {e}")))
    }
}

/// A database error as the store reports it: a unique-constraint violation is
/// a [`StoreError::Conflict`], anything else [`StoreError::Database`].
pub(crate) fn db(e: sqlx::Error) -> StoreError {
    if let Some(d) = e.as_database_error()
        && d.is_unique_violation()
    {
        return StoreError::Conflict { what: d.message().to_owned() };
    }
    StoreError::Database(e.to_string())
}

#[cfg(test)]
mod tests;
