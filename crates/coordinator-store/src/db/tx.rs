//! An open handle ([`Tx`]): a transaction that can write (on SQLite a
//! member of a group or a background writer's own, `gates`) or a pooled
//! connection outside any transaction, for reads and one-statement writes.
//! It runs the statements it is given, commits or abandons, reports a lost
//! PostgreSQL connection (`hangup`), and has a commit announced to other
//! processes when asked.
//!
//! It must not know any table, nor choose a statement.

use sqlx::pool::PoolConnection;
use sqlx::{Postgres, Sqlite, Transaction};

use crate::StoreError;
use crate::db::args::{Arg, Query, bind_pg, bind_sqlite};
use crate::db::db;
use crate::db::gates::SqliteTx;
use crate::db::hangup;
use crate::db::pool::{Dialect, PgShared};
use crate::db::rows::Row;

/// Whether a PostgreSQL transaction's commit is to be announced to other
/// processes (`wakeups::notify` asked for it), by whom, and where a lost
/// connection is to be told.
pub(crate) struct Announce {
    shared: PgShared,
    due: bool,
}

impl Announce {
    pub(super) fn new(shared: &PgShared) -> Announce {
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
    /// A PostgreSQL connection outside any transaction ([`Pool::begin_read`](crate::db::Pool::begin_read)).
    PgRead(PoolConnection<Postgres>, Announce),
    /// A SQLite connection outside any transaction ([`Pool::begin_read`](crate::db::Pool::begin_read)).
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

    /// Runs an assembled write (see [`Query`]), unnamed and uncached; returns
    /// the number of rows it changed.
    pub(crate) async fn execute_query(&mut self, query: Query) -> Result<u64, StoreError> {
        let Query { sql, args } = query;
        Ok(match self.on() {
            On::Sqlite(t) => bind_sqlite(&sql, args)?
                .persistent(false)
                .execute(t.conn()?)
                .await
                .map_err(|e| t.failed(e))?
                .rows_affected(),
            On::SqliteRead(c) => {
                bind_sqlite(&sql, args)?.persistent(false).execute(c).await.map_err(db)?.rows_affected()
            }
            On::Pg(c, a, uncommitted) => bind_pg(&sql, args)
                .persistent(false)
                .execute(c)
                .await
                .map_err(|e| a.failed(e, uncommitted))?
                .rows_affected(),
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
