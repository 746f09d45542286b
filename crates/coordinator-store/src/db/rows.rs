//! What a statement returns: a row of either backend ([`Row`]), whose
//! columns decode alike on both (a PostgreSQL `uuid` run id as its text,
//! `run_ids`).
//!
//! It must not know any table: callers read columns by position.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Decode, Postgres, Row as _, Sqlite, Type};

use crate::StoreError;
use crate::db::run_ids::uuid_as_text;

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
