//! Prompt wake-ups across processes: a transaction that queues work or sets a
//! timer notifies the channel [`WORK_CHANNEL`] (PostgreSQL `NOTIFY`, delivered
//! at commit, dropped on rollback), and [`Wakeups`] lets a worker of any
//! process sleep until one arrives.
//!
//! On SQLite there is one process, woken in-process by its engine, so nothing
//! is sent and [`Wakeups::next`] never resolves. A wake-up carries nothing: it
//! only says "read the state again"; losing one costs a polling interval.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::db::{Dialect, Pool, Tx, db};
use crate::{Store, StoreError};

/// The PostgreSQL notification channel of new work.
pub const WORK_CHANNEL: &str = "coordinator_work";

/// How long the listener waits before reconnecting after a failure.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

const NOTIFY: &str = "SELECT pg_notify($1, '')";

/// Notifies other processes that work may be due, inside `tx` (PostgreSQL only).
pub(crate) async fn notify(tx: &mut Tx) -> Result<(), StoreError> {
    if tx.dialect() == Dialect::Pg {
        tx.execute(NOTIFY, vec![WORK_CHANNEL.into()]).await?;
    }
    Ok(())
}

/// A subscription to new-work notifications (see [`Store::wakeups`]).
///
/// On PostgreSQL a background task holds a dedicated listening connection
/// (reconnecting by itself) and stops when this value is dropped.
#[derive(Debug)]
pub struct Wakeups {
    inner: Option<Listening>,
}

#[derive(Debug)]
struct Listening {
    woken: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Wakeups {
    /// A subscription that never wakes (SQLite, or no listener could be started).
    pub fn never() -> Wakeups {
        Wakeups { inner: None }
    }

    /// Resolves when a notification arrived since the previous call returned
    /// (at once if one is pending), or when the listening connection was lost
    /// (state must be read again). Cancel-safe: use it in `select!`.
    pub async fn next(&mut self) {
        match &self.inner {
            Some(listening) => listening.woken.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl Store {
    /// Subscribes to notifications of new work from every process sharing the
    /// database. On PostgreSQL this opens a dedicated connection and listens on
    /// [`WORK_CHANNEL`] before returning, so any commit after it wakes the
    /// subscriber; on SQLite it returns [`Wakeups::never`].
    pub async fn wakeups(&self) -> Result<Wakeups, StoreError> {
        let Pool::Pg(pool) = &self.pool else { return Ok(Wakeups::never()) };
        // Its own one-connection pool: the listener does not take a connection from the store's.
        let options = (*pool.connect_options()).clone();
        let own =
            PgPoolOptions::new().max_connections(1).max_lifetime(None).idle_timeout(None).connect_lazy_with(options);
        let mut listener = PgListener::connect_with(&own).await.map_err(db)?;
        listener.listen(WORK_CHANNEL).await.map_err(db)?;
        let woken = Arc::new(Notify::new());
        let task = tokio::spawn(listen(listener, Arc::clone(&woken)));
        Ok(Wakeups { inner: Some(Listening { woken, task }) })
    }
}

/// Forwards notifications (and lost connections) to `woken` until aborted.
async fn listen(mut listener: PgListener, woken: Arc<Notify>) {
    loop {
        match listener.try_recv().await {
            // A notification, or a lost connection (re-established by the listener): wake.
            Ok(_) => woken.notify_one(),
            Err(_) => {
                // Could not reconnect: whatever was sent meanwhile is lost, so wake, then retry later.
                woken.notify_one();
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
        }
    }
}
