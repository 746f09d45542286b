//! The deployment's state of each connection: an operator's pause, and the
//! pace every process shares ([`pace`]: a product's `Retry-After`, the
//! breaker), with its probes ([`probes`]) (docs/reference/service.md#connections).
//!
//! A paused connection is sent nothing: every claim, offer and eager lease
//! of outbox rows leaves the rows whose `conn` names it where they are
//! (due, unleased, their claim count untouched), and when work is next due
//! is read without them, so a worker does not wake for them. Rows already
//! leased when the pause is written are not called back. Pausing and
//! resuming are journaled (kind `connection`, no run, the operator as
//! actor) in the transaction that changes the row, only when they change it.
//!
//! Eager dispatch (`commit_leases`) leases rows as they are queued: each
//! process remembers whether any connection is held back
//! ([`Store::refresh_connections`] every second, its own changes at once)
//! and offers no eager lease while one is; and on PostgreSQL the statement
//! that would lease reads the connections itself (`batch`, `admissions_pg`),
//! so another process's pause holds at once. The work goes through claims,
//! which read the connections in their own statement.

pub(crate) mod allowance;
pub(crate) mod eager;
pub(crate) mod lanes;
pub(crate) mod limits;
pub(crate) mod pace;
pub(crate) mod probes;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, RwLock};

use coordinator_core::pace::Limits;

pub use lanes::workflow_lane;
pub use pace::PaceView;

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

/// A condition on the outbox row's connection column `$conn` at the instant
/// `$now` (SQL text): nothing holds it back — no pause, no hold of a
/// product's `Retry-After`, no breaker open or half-open (its probe is
/// claimed apart, [`probes`]). A row naming no connection never is.
macro_rules! not_blocked {
    ($conn:literal, $now:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM connections pc WHERE pc.name = ",
            $conn,
            " AND (pc.paused_at IS NOT NULL OR pc.hold_until > ",
            $now,
            " OR pc.breaker <> 'closed'))"
        )
    };
}
pub(crate) use not_blocked;

/// What a claim of outbox rows returns: the row and its run, in the columns
/// `claims::work_row` reads.
macro_rules! claimed_columns {
    () => {
        " RETURNING run_id, step, kind, attempt, not_before, claims, \
         (SELECT r.revision FROM runs r WHERE r.id = outbox.run_id), \
         (SELECT r.snapshot FROM runs r WHERE r.id = outbox.run_id), \
         (SELECT r.trace_parent FROM runs r WHERE r.id = outbox.run_id), \
         (SELECT r.snapshot_base FROM runs r WHERE r.id = outbox.run_id)"
    };
}
pub(crate) use claimed_columns;

const STATES: &str = concat!(
    "SELECT name, paused_by, paused_at, paused_reason, breaker_why, ",
    pace::pace_columns!(),
    " FROM connections ORDER BY name"
);
const STATE: &str = concat!(
    "SELECT name, paused_by, paused_at, paused_reason, breaker_why, ",
    pace::pace_columns!(),
    " FROM connections WHERE name = $1"
);
const PAUSED_NAMES: &str = "SELECT name FROM connections WHERE paused_at IS NOT NULL";
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
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionState {
    /// The connection's name (runtime.yaml).
    pub name: String,
    /// Its pause, while it is paused.
    pub paused: Option<Pause>,
    /// Its pace: the breaker and a product's hold.
    pub pace: PaceView,
}

/// What this process remembers of the connections: whether any is paused,
/// and the pace of each that is not settled (by name).
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// The connections last read paused, by name.
    paused: Mutex<HashSet<String>>,
    unsettled: Mutex<HashMap<String, PaceView>>,
    /// The connections claimed under limits (`limits`), by name.
    limits: RwLock<BTreeMap<String, Limits>>,
    /// The remote connections offered under limits, by name.
    offer_limits: RwLock<BTreeMap<String, Limits>>,
    /// The limited connections whose last claim here left due work waiting
    /// for a permit, each with when to look again unless an answer of it
    /// commits here first.
    awaiting: Mutex<HashMap<String, i64>>,
    /// This process's allowances of limited connections' permits.
    allowances: allowance::Allowances,
}

impl Memory {
    /// Whether this process may spend an allowance of `name` at `now` (see `allowance`).
    pub(crate) fn allowance_usable(&self, name: &str, now: i64) -> bool {
        self.allowances.usable(name, now)
    }

    /// The tokens this process holds ahead for `name` at `now` (see `allowance`).
    pub(crate) fn allowance_tokens(&self, name: &str, now: i64) -> f64 {
        self.allowances.tokens(name, now)
    }

    /// Whether a claim round should renew this process's allowance of `name` at `now`.
    pub(crate) fn allowance_renewal_due(&self, name: &str, now: i64) -> bool {
        self.allowances.renewal_due(name, now)
    }

    fn unsettled(&self, name: &str) -> bool {
        self.unsettled.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(name)
    }

    /// Whether a pause, a hold or a breaker not closed holds any connection back at `now`.
    fn any_blocked(&self, now: i64) -> bool {
        !self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_empty()
            || self
                .unsettled
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .values()
                .any(|p| p.breaker != "closed" || p.hold_until > now)
    }

    /// Whether connection `name` was last known held back at `now`: paused,
    /// held by a `Retry-After`, or its breaker open (half-open: its probe is out).
    fn held(&self, name: &str, now: i64) -> bool {
        if self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(name) {
            return true;
        }
        let unsettled = self.unsettled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        unsettled.get(name).is_some_and(|p| p.breaker == "open" || p.hold_until > now)
    }

    fn remember_paused(&self, names: HashSet<String>) {
        *self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = names;
    }

    fn remember(&self, name: &str, pace: &PaceView, now: i64) {
        let mut unsettled = self.unsettled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pace.settled(now) {
            unsettled.remove(name);
        } else {
            unsettled.insert(name.to_owned(), pace.clone());
        }
    }
}

impl Store {
    /// Every connection the store holds a state for, by name.
    pub async fn connection_states(&self) -> Result<Vec<ConnectionState>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(STATES, Vec::new()).await?;
        let states = rows.iter().map(state_of).collect::<Result<Vec<_>, _>>()?;
        let paused: HashSet<String> = states.iter().filter(|s| s.paused.is_some()).map(|s| s.name.clone()).collect();
        self.connections.remember_paused(paused);
        Ok(states)
    }

    /// Every connection's state, read into this process's memory of them
    /// (the restore fence's watch calls it every second) at `now`.
    pub async fn refresh_connections(&self, now: i64) -> Result<Vec<ConnectionState>, StoreError> {
        let states = self.connection_states().await?;
        let unsettled: HashMap<String, PaceView> =
            states.iter().filter(|s| !s.pace.settled(now)).map(|s| (s.name.clone(), s.pace.clone())).collect();
        *self.connections.unsettled.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = unsettled;
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
        let paused = paused_names(&mut tx).await?;
        tx.commit().await?;
        self.connections.remember_paused(paused);
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
        // Every pause in force, another process's too.
        let paused = paused_names(&mut tx).await?;
        tx.commit().await?;
        self.connections.remember_paused(paused);
        Ok(if lifted { before } else { None })
    }

    /// Whether this process last knew any connection held back at `now`
    /// (paused, held by a `Retry-After`, its breaker not closed).
    pub fn any_connection_blocked(&self, now: i64) -> bool {
        self.connections.any_blocked(now)
    }

    /// Whether this process last read a connection paused.
    pub fn any_connection_paused(&self) -> bool {
        !self.connections.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_empty()
    }

    /// The eager lease a batch or an admission at `now` may take: none while
    /// any connection is held back (see the module doc).
    pub(crate) fn eager(&self, lease: Option<EagerLease>, now: i64) -> Option<EagerLease> {
        lease.filter(|_| !self.connections.any_blocked(now))
    }

    /// Whether this process's last claim of limited connection `name` left
    /// due work waiting for a permit: an answer of it that commits here frees
    /// one, worth a claim round at once.
    pub fn permits_awaited(&self, name: &str) -> bool {
        self.connections.awaiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(name)
    }

    /// An answer of limited connection `name` committed here and freed a
    /// permit: the next claim round looks at it at once.
    pub fn permit_freed(&self, name: &str) {
        self.connections.awaiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(name);
    }

    /// When a claim round looks at limited connection `name` again: `None`
    /// at once; else the instant its last claim set (its work waits for a
    /// permit that another process may free).
    pub(crate) fn awaiting_until(&self, name: &str) -> Option<i64> {
        self.connections.awaiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).copied()
    }

    pub(crate) fn remember_awaiting(&self, name: &str, until: Option<i64>) {
        let mut names = self.connections.awaiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match until {
            Some(at) => names.insert(name.to_owned(), at),
            None => names.remove(name),
        };
    }

    /// Whether this process last knew connection `name` held back at `now`:
    /// paused, held by a product's `Retry-After`, or its breaker open (not
    /// half-open: then its probe is out). Work claimed before it was held
    /// back is given back unsent rather than sent (`coordinator`'s dispatch).
    pub fn connection_held(&self, name: &str, now: i64) -> bool {
        self.connections.held(name, now)
    }

    /// Connection `name`'s limits in this process (none: the default).
    pub(crate) fn limits_of(&self, name: &str) -> Limits {
        let limits = self.connections.limits.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        match limits.get(name) {
            Some(limits) => *limits,
            None => self.offer_limits_of(name, None),
        }
    }

    pub(crate) fn remember_pace(&self, name: &str, pace: &PaceView, now: i64) {
        self.connections.remember(name, pace, now);
    }
}

/// The connections paused now, by name.
async fn paused_names(tx: &mut crate::db::Tx) -> Result<HashSet<String>, StoreError> {
    tx.fetch_all(PAUSED_NAMES, Vec::new()).await?.iter().map(|row| row.get(0)).collect()
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
    let pace = pace::pace_of(row, 5, &Limits::default(), 0)?;
    Ok(ConnectionState { name: row.get(0)?, paused, pace: pace::view_of(&pace, row.get(4)?) })
}
