//! The deployment's state of each connection: an operator's pause
//! (docs/reference/operations.md#connections).
//!
//! A paused connection is sent nothing: every claim, offer and eager lease
//! of outbox rows leaves the rows whose `conn` names it where they are
//! (due, unleased, their claim count untouched), and when work is next due
//! is read without them, so a worker does not wake for them. Rows already
//! leased when the pause is written are not called back. Pausing and
//! resuming are journaled (kind `connection`, no run, the operator as
//! actor) in the transaction that changes the row, only when they change it.
//!
//! Eager dispatch (`commit_leases`) decides in the process which rows it
//! leases as they are queued: each process remembers whether any
//! connection is paused ([`Store::refresh_pauses`], its own pauses at
//! once) and leases nothing eagerly while one is, so its work goes through
//! claims, which read the pause in their own statement.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::audit::{self, Line};
use crate::types::EagerLease;
use crate::{Store, StoreError, wakeups};

/// The audit kind of a pause or resume (no run).
const CONNECTION: &str = "connection";

/// A condition on the outbox row's connection column `$conn` (SQL text):
/// it is not paused. A row naming no connection never is.
macro_rules! not_paused {
    ($conn:literal) => {
        concat!("NOT EXISTS (SELECT 1 FROM connections pc WHERE pc.name = ", $conn, " AND pc.paused_at IS NOT NULL)")
    };
}
pub(crate) use not_paused;

const STATES: &str = "SELECT name, paused_by, paused_at, paused_reason FROM connections ORDER BY name";
const STATE: &str = "SELECT name, paused_by, paused_at, paused_reason FROM connections WHERE name = $1";
const ANY_PAUSED: &str = "SELECT count(*) FROM connections WHERE paused_at IS NOT NULL";
const PAUSE: &str = "INSERT INTO connections (name, paused_by, paused_at, paused_reason) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (name) DO UPDATE SET paused_by = excluded.paused_by, paused_at = excluded.paused_at, \
     paused_reason = excluded.paused_reason WHERE connections.paused_at IS NULL";
const RESUME: &str = "UPDATE connections SET paused_by = NULL, paused_at = NULL, paused_reason = NULL \
     WHERE name = $1 AND paused_at IS NOT NULL";

/// An operator's pause of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// Who paused it (the operator's subject).
    pub by: String,
    /// When, ms since the epoch.
    pub at: i64,
    /// Why, as the operator wrote it.
    pub reason: String,
}

/// A connection the store holds a state for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionState {
    /// The connection's name (runtime.yaml).
    pub name: String,
    /// Its pause, while it is paused.
    pub paused: Option<Pause>,
}

/// What this process remembers of the connections: whether any is paused.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    any_paused: AtomicBool,
}

impl Store {
    /// Every connection the store holds a state for, by name.
    pub async fn connection_states(&self) -> Result<Vec<ConnectionState>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(STATES, Vec::new()).await?;
        let states = rows.iter().map(state_of).collect::<Result<Vec<_>, _>>()?;
        self.remember_pauses(states.iter().any(|s| s.paused.is_some()));
        Ok(states)
    }

    /// Pauses `name` at `at` on behalf of `by`, with the operator's `reason`.
    /// A connection already paused keeps its pause as it is. Returns the pause
    /// in force and whether this call placed it.
    pub async fn pause_connection(
        &self,
        name: &str,
        at: i64,
        by: &str,
        reason: &str,
    ) -> Result<(Pause, bool), StoreError> {
        let mut tx = self.pool.begin().await?;
        let placed = tx.execute(PAUSE, vec![name.into(), by.into(), at.into(), reason.into()]).await? > 0;
        let state = match tx.fetch_optional(STATE, vec![name.into()]).await? {
            Some(row) => state_of(&row)?,
            None => return Err(StoreError::Corrupt(format!("connection {name} vanished while it was paused"))),
        };
        let Some(pause) = state.paused else {
            return Err(StoreError::Corrupt(format!("connection {name} is not paused after its pause")));
        };
        if placed {
            let line =
                Line { kind: CONNECTION, step: None, detail: format!("connection {name} paused: {reason}").into() };
            audit::append(&mut tx, None, at, Some(by), &[line]).await?;
        }
        tx.commit().await?;
        self.remember_pauses(true);
        Ok((pause, placed))
    }

    /// Resumes `name` at `at` on behalf of `by`, with the operator's
    /// `reason`; its due work is claimable at once (every process is woken).
    /// Returns the pause it lifted, `None` when the connection was not paused.
    pub async fn resume_connection(
        &self,
        name: &str,
        at: i64,
        by: &str,
        reason: &str,
    ) -> Result<Option<Pause>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let before = match tx.fetch_optional(STATE, vec![name.into()]).await? {
            Some(row) => state_of(&row)?.paused,
            None => None,
        };
        let lifted = tx.execute(RESUME, vec![name.into()]).await? > 0;
        if lifted {
            let line =
                Line { kind: CONNECTION, step: None, detail: format!("connection {name} resumed: {reason}").into() };
            audit::append(&mut tx, None, at, Some(by), &[line]).await?;
            wakeups::notify(&mut tx);
        }
        let still: i64 = match tx.fetch_optional(ANY_PAUSED, Vec::new()).await? {
            Some(row) => row.get(0)?,
            None => 0,
        };
        tx.commit().await?;
        self.remember_pauses(still > 0);
        Ok(if lifted { before } else { None })
    }

    /// Reads whether any connection is paused into this process's memory
    /// (the restore fence's watch calls it every second).
    pub async fn refresh_pauses(&self) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let paused: i64 = match tx.fetch_optional(ANY_PAUSED, Vec::new()).await? {
            Some(row) => row.get(0)?,
            None => 0,
        };
        self.remember_pauses(paused > 0);
        Ok(())
    }

    /// Whether this process last read a connection paused.
    pub fn any_connection_paused(&self) -> bool {
        self.connections.any_paused.load(Ordering::Relaxed)
    }

    /// The eager lease a batch or an admission may take: none while any
    /// connection is paused (see the module doc).
    pub(crate) fn eager(&self, lease: Option<EagerLease>) -> Option<EagerLease> {
        lease.filter(|_| !self.any_connection_paused())
    }

    fn remember_pauses(&self, any: bool) {
        self.connections.any_paused.store(any, Ordering::Relaxed);
    }
}

/// A `STATES` row.
fn state_of(row: &crate::db::Row) -> Result<ConnectionState, StoreError> {
    let at: Option<i64> = row.get(2)?;
    let paused = match at {
        Some(at) => Some(Pause {
            by: row.get::<Option<String>>(1)?.unwrap_or_default(),
            at,
            reason: row.get::<Option<String>>(3)?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(ConnectionState { name: row.get(0)?, paused })
}
