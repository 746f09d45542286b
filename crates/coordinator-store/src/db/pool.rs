//! The connection pool over both backends ([`Pool`]): connecting (SQLite in
//! WAL mode with a busy timeout, PostgreSQL with a small pool that replaces
//! connections the server dropped, `hangup`) and handing out handles
//! ([`Tx`]): a transaction that can write, for a request's writer or the
//! background's ([`Writer`]; `BEGIN IMMEDIATE` on SQLite, through its
//! writers' gates, `gates`), or a pooled connection for reads. Also which
//! dialect a statement is written in ([`Dialect`]).
//!
//! It must not know any table. What a new PostgreSQL connection must pass
//! besides this layer's own marking (`notify`) is the layers above's:
//! handed in when the pool is built, as an [`OnConnect`].

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgConnection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use crate::StoreError;
use crate::db::db;
use crate::db::gates::{self, Gates};
use crate::db::hangup::{self, Hangups};
use crate::db::hosts::{self, Hosts};
use crate::db::notify::{self, Announcer};
use crate::db::tx::{Announce, Tx};

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
    pub(super) announcer: Announcer,
    pub(crate) hangups: Arc<Hangups>,
    /// The hosts of a URL naming several, which pools are kept pointed at (`hosts`).
    pub(super) hosts: Option<Arc<Hosts>>,
    /// Keeps the pointing going while the pool lives.
    _following: Option<hosts::Following>,
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

/// A check of a new connection, running ([`OnConnect::check`]).
pub(crate) type Checking<'c> = Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'c>>;

/// What every new PostgreSQL connection must pass before anything uses it,
/// as the layers above define it and hand it in to [`Pool::connect`] (the
/// store's: the fence reads the server, so a restored or promoted one trips
/// it). An error refuses the connection. Nothing is checked on SQLite.
pub(crate) trait OnConnect: Send + Sync + 'static {
    /// Checks `conn`, just opened and marked as this pool's.
    fn check<'c>(&'c self, conn: &'c mut PgConnection) -> Checking<'c>;
}

/// Checks nothing: for this layer's own tests, whose pools need no more.
#[cfg(test)]
pub(crate) struct NoCheck;

#[cfg(test)]
impl OnConnect for NoCheck {
    fn check<'c>(&'c self, _: &'c mut PgConnection) -> Checking<'c> {
        Box::pin(async { Ok(()) })
    }
}

impl Pool {
    /// Connects from a URL: `sqlite://path?mode=rwc` or `postgres://…`; on
    /// PostgreSQL each new connection passes `on_connect` before it is used.
    pub(crate) async fn connect(url: &str, on_connect: Arc<dyn OnConnect>) -> Result<Pool, StoreError> {
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
            let hosts = Hosts::parse(url)?.map(Arc::new);
            let picked = match &hosts {
                Some(hosts) => Some(hosts.pick().await?),
                None => None,
            };
            let instance: Arc<str> = notify::new_instance().into();
            let hangups = Arc::new(Hangups::default());
            let seen = Arc::clone(&hangups);
            let options = PgPoolOptions::new()
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
                    let (instance, on_connect) = (Arc::clone(&instance), Arc::clone(&on_connect));
                    Box::pin(async move {
                        notify::mark_connection(conn, &instance).await?;
                        // Checked before anything uses the connection (the store's fence reading).
                        on_connect.check(conn).await
                    })
                });
            let pool = match &picked {
                Some((_, target)) => options.connect_with(target.clone()).await,
                None => options.connect(url).await,
            }
            .map_err(db)?;
            let following = match (&hosts, picked) {
                (Some(hosts), Some((host, _))) => {
                    hosts.point(&pool);
                    Some(hosts::follow(Arc::clone(hosts), Arc::clone(&hangups), host))
                }
                _ => None,
            };
            let announcer = Announcer::start(pool.clone(), Arc::clone(&hangups));
            Ok(Pool::Pg(pool, PgShared { announcer, hangups, hosts, _following: following }))
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
