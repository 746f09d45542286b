//! LISTEN/NOTIFY on PostgreSQL, the plumbing of prompt wake-ups across
//! processes (what they are for is `wakeups`'s): every connection of a pool
//! carries its store's instance name ([`mark_connection`]); a commit that
//! asked for it is followed by one `NOTIFY` on [`WORK_CHANNEL`], sent by a
//! task of its own ([`Announcer`]); and a subscription ([`Wakeups`]) listens
//! on a dedicated connection, ignoring its own store's notifications and
//! telling the pool when the server hung up (`hangup`). Nothing of it runs on
//! SQLite.
//!
//! It must not know any table, nor what the work announced is.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::StoreError;
use crate::db::hangup::Hangups;
use crate::db::{Pool, db};

/// The PostgreSQL notification channel of new work.
pub(crate) const WORK_CHANNEL: &str = "coordinator_work";

/// How long the listener waits before reconnecting after a failure.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

const MARK: &str = "SELECT set_config('coordinator.instance', $1, false)";
/// The notification, with the sending store's instance name as its payload.
const NOTIFY: &str = "SELECT pg_notify($1, coalesce(current_setting('coordinator.instance', true), ''))";
const OWN: &str = "SELECT coalesce(current_setting('coordinator.instance', true), '')";

/// A name for one store instance, unique among the processes sharing a
/// database in practice: the process id, the clock, and the per-process
/// random keys of the standard library's hasher.
pub(crate) fn new_instance() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    format!("{:016x}-{}", hasher.finish(), std::process::id())
}

/// Marks a new connection as one of `instance`'s (its notifications carry the name).
pub(super) async fn mark_connection(conn: &mut sqlx::PgConnection, instance: &str) -> Result<(), sqlx::Error> {
    sqlx::query(MARK).bind(instance).execute(conn).await.map(|_| ())
}

/// Sends this process's wake-ups, after the commits that asked for them, one
/// `NOTIFY` at a time from a task of its own: a commit asks
/// ([`Announcer::announce`], which never waits) and the task sends one
/// notification for every request that came while it was sending the last.
///
/// Not inside the committing transaction: a transaction that has notified
/// takes a cluster-wide lock at commit and holds it while its commit record
/// is flushed, so every committing admission waited for the one before it —
/// one WAL flush per admission, no group commit. Sent after commit, a
/// wake-up can no longer arrive before the work it announces is visible; a
/// process that stops between its commit and the notification loses that
/// wake-up, which costs the other processes a polling interval, as any lost
/// wake-up does.
#[derive(Debug, Clone)]
pub(crate) struct Announcer {
    asks: tokio::sync::mpsc::Sender<()>,
}

impl Announcer {
    /// Starts the sending task on `pool`, telling `hangups` of a lost
    /// connection; it ends when the last clone of this announcer is dropped.
    pub(crate) fn start(pool: sqlx::PgPool, hangups: Arc<Hangups>) -> Announcer {
        let (asks, mut asked) = tokio::sync::mpsc::channel::<()>(1);
        tokio::spawn(async move {
            while asked.recv().await.is_some() {
                // A failed notification loses this wake-up only (see above).
                if let Err(e) = sqlx::query(NOTIFY).bind(WORK_CHANNEL).execute(&pool).await {
                    hangups.note(e);
                }
            }
        });
        Announcer { asks }
    }

    /// Asks for a notification; requests made while one is waiting to be sent join it.
    pub(crate) fn announce(&self) {
        let _ = self.asks.try_send(());
    }
}

/// A subscription to new-work notifications (`Store::wakeups`).
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

impl Pool {
    /// Subscribes to notifications of new work from every process sharing the
    /// database (`Store::wakeups`): on PostgreSQL a dedicated connection
    /// listens on [`WORK_CHANNEL`] before this returns; on SQLite
    /// [`Wakeups::never`].
    pub(crate) async fn subscribe(&self) -> Result<Wakeups, StoreError> {
        let Pool::Pg(pool, shared) = self else { return Ok(Wakeups::never()) };
        // Its own one-connection pool: the listener does not take a connection from the store's.
        let options = (*pool.connect_options()).clone();
        let own =
            PgPoolOptions::new().max_connections(1).max_lifetime(None).idle_timeout(None).connect_lazy_with(options);
        if let Some(hosts) = &shared.hosts {
            hosts.point(&own);
        }
        // Any of the store's connections says its instance name.
        let instance: String = match self.begin_read().await?.fetch_optional(OWN, Vec::new()).await? {
            Some(row) => row.get(0)?,
            None => String::new(),
        };
        let mut listener = PgListener::connect_with(&own).await.map_err(db)?;
        listener.listen(WORK_CHANNEL).await.map_err(db)?;
        let woken = Arc::new(Notify::new());
        let task = tokio::spawn(listen(listener, instance, Arc::clone(&woken), Arc::clone(&shared.hangups)));
        Ok(Wakeups { inner: Some(Listening { woken, task }) })
    }
}

/// Forwards notifications of other stores (and lost connections) to `woken`
/// until aborted; a lost connection is also a hang-up for the store's pool
/// (`db::hangup`): the listener, always waiting on its socket, is often the
/// first to see the server go.
async fn listen(mut listener: PgListener, instance: String, woken: Arc<Notify>, hangups: Arc<Hangups>) {
    loop {
        match listener.try_recv().await {
            // This store's own commit: its process woke its worker already.
            Ok(Some(n)) if !instance.is_empty() && n.payload() == instance => {}
            // A notification: wake.
            Ok(Some(_)) => woken.notify_one(),
            // A lost connection, re-established by the listener: wake.
            Ok(None) => {
                hangups.seen();
                woken.notify_one();
            }
            Err(_) => {
                // Could not reconnect: whatever was sent meanwhile is lost, so wake, then retry later.
                hangups.seen();
                woken.notify_one();
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
        }
    }
}
