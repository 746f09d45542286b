//! The database layer, at the bottom of the store: one connection pool and
//! one transaction type over the two backends, so every statement of the
//! store is written once.
//!
//! The layer's map:
//! - `pool`: connecting, the pool over both backends ([`Pool`]), whose write
//!   a transaction is ([`Writer`]) and which dialect ([`Dialect`]);
//! - `tx`: an open handle ([`Tx`]), transaction or pooled connection:
//!   running statements, committing, abandoning;
//! - `args`: values bound to `$n` placeholders ([`Arg`]) and reads assembled
//!   from fixed fragments ([`Query`]);
//! - `rows`: result rows and decoding their columns ([`Row`]);
//! - `run_ids`: run ids as `uuid` on PostgreSQL and text on SQLite, a
//!   `String` above this layer;
//! - `gates`: SQLite's writers — the gates they queue at, and group commit
//!   for requests;
//! - `hangup`: what a PostgreSQL pool remembers of the server hanging up;
//! - `notify`: LISTEN/NOTIFY, PostgreSQL's wake-ups of other processes
//!   ([`Wakeups`]);
//! - `tests`: the layer's own tests on both backends.
//!
//! It must not know any table: SQL text comes from the callers, who write
//! `$n` placeholders (SQLite accepts `$NNN` as well) — `&'static str`
//! statements, or, for the few reads whose WHERE clause depends on which
//! filters a caller gave, a [`Query`] assembled from `&'static str`
//! fragments and numbered placeholders only.
//!
//! Nor may it import any module of the crate outside `db/`: only
//! [`crate::StoreError`] (its errors) and [`crate::types`] (plain values, a leaf).
//! What the layers above need done on a new connection (the fence's reading)
//! they hand in when the pool is built ([`OnConnect`]).

mod args;
mod gates;
mod hangup;
mod hosts;
pub(crate) mod notify;
mod pool;
mod rows;
mod run_ids;
mod tx;

use crate::StoreError;

pub(crate) use args::{Arg, Query};
pub use notify::Wakeups;
pub(crate) use notify::new_instance;
#[cfg(test)]
pub(crate) use pool::NoCheck;
pub(crate) use pool::{Checking, Dialect, OnConnect, Pool, Writer};
pub(crate) use rows::Row;
pub(crate) use tx::Tx;

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
