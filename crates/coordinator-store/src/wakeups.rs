//! Prompt wake-ups across processes: after a transaction that queued work or
//! set a timer commits, its process notifies the channel `coordinator_work`
//! (PostgreSQL `NOTIFY`, sent by [`db::notify::Announcer`](crate::db::notify::Announcer); nothing is sent for
//! a transaction rolled back), and [`Wakeups`] lets a worker of any process
//! sleep until one arrives.
//!
//! On SQLite there is one process, woken in-process by its engine, so nothing
//! is sent and [`Wakeups::next`] never resolves. A wake-up only says "read the
//! state again"; losing one costs a polling interval. Its payload names the
//! store that sent it (a random instance name each connection of a [`Store`]
//! carries as the setting `coordinator.instance`), and a store's own
//! subscription ignores its own notifications: the process that committed
//! wakes its worker in-process already.
//!
//! The LISTEN/NOTIFY plumbing is [`db::notify`](crate::db::notify)'s; here are what asks for a
//! wake-up ([`notify`]) and a subscription ([`Store::wakeups`]).

use crate::db::{Tx, Wakeups};
use crate::{Store, StoreError};

/// Notifies other processes that work may be due once `tx` commits
/// (PostgreSQL only; see `db::notify::Announcer`).
pub(crate) fn notify(tx: &mut Tx) {
    tx.announce_after_commit();
}

impl Store {
    /// Subscribes to notifications of new work from every process sharing the
    /// database. On PostgreSQL this opens a dedicated connection and listens on
    /// the work channel (`db::notify::WORK_CHANNEL`) before returning, so any
    /// commit after it wakes the subscriber; on SQLite it returns
    /// [`Wakeups::never`].
    pub async fn wakeups(&self) -> Result<Wakeups, StoreError> {
        self.pool.subscribe().await
    }
}
