//! What a statement is given: the values bound to its `$n` placeholders
//! ([`Arg`]), reads assembled from fixed fragments ([`Query`]), and binding
//! them to each backend's query (a run id as PostgreSQL's `uuid` or SQLite's
//! text, `run_ids`).
//!
//! It must not know any table: SQL text comes from the callers, and grows
//! here only by `&'static str` fragments and the placeholders it numbers.

use sqlx::{Postgres, Sqlite};

use crate::StoreError;
use crate::db::run_ids::{pg_id, sqlite_id};

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
    pub(super) sql: String,
    pub(super) args: Vec<Arg>,
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
pub(super) fn bind_sqlite(sql: &str, args: Vec<Arg>) -> Result<SqliteQuery<'_>, StoreError> {
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
pub(super) fn bind_pg(sql: &str, args: Vec<Arg>) -> PgQuery<'_> {
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

pub(super) type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>;
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;
