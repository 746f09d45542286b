//! Announcing after commit: [`Announcer::announce`] never waits and never
//! fails — it puts the lanes on a bounded queue ([`QUEUE`]), and a full queue
//! drops the hint and counts it. One task takes whatever has queued, writes one
//! entry per distinct lane (hints that came together are one), pipelined on a
//! reconnecting multiplexed connection (`ConnectionManager`). While Redis
//! cannot be reached, each batch is dropped and counted, the task pauses
//! ([`Backoff`]) and the queue fills and drops: a commit never waits for Redis.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::backoff::Backoff;
use super::health::{Health, describe};
use super::stream::{self, Lane};

/// How many hints wait for the task at most; more are dropped (and counted).
pub(crate) const QUEUE: usize = 1024;
/// The longest a connection attempt or a reply may take.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The part's name in the health and the log.
pub(crate) const PART: &str = "announcer";

/// Where commits hand their hints (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct Announcer {
    queue: mpsc::Sender<Lane>,
    health: Arc<Health>,
}

impl Announcer {
    /// Starts the sending task; it ends when every announcer is dropped.
    pub(crate) fn start(client: redis::Client, owner: String, health: Arc<Health>) -> (Announcer, JoinHandle<()>) {
        let (queue, queued) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(client, owner, Arc::clone(&health), queued));
        (Announcer { queue, health }, task)
    }

    /// Queues a hint for each lane; a full queue drops it (counted).
    pub(crate) fn announce(&self, lanes: Vec<Lane>) {
        for lane in lanes {
            match self.queue.try_send(lane) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.health.dropped_full.fetch_add(1, Ordering::Relaxed);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.health.dropped_unavailable.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

async fn run(client: redis::Client, owner: String, health: Arc<Health>, mut queued: mpsc::Receiver<Lane>) {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(1)
        .set_max_delay(super::backoff::LONGEST);
    let mut backoff = Backoff::default();
    // Connected first (what queues meanwhile waits, and a full queue drops); it reconnects by itself after.
    let mut manager = loop {
        match ConnectionManager::new_with_config(client.clone(), config.clone()).await {
            Ok(manager) => {
                health.report(PART, true, None);
                break manager;
            }
            Err(e) => {
                health.report(PART, false, Some(&describe(&e)));
                tokio::time::sleep(backoff.next()).await;
            }
        }
    };
    backoff.reset();
    while let Some(first) = queued.recv().await {
        let mut lanes = BTreeSet::from([first]);
        let mut asked: u64 = 1;
        while let Ok(lane) = queued.try_recv() {
            lanes.insert(lane);
            asked += 1;
        }
        match send(&mut manager, &lanes, &owner).await {
            Ok(()) => {
                health.sent.fetch_add(u64::try_from(lanes.len()).unwrap_or(u64::MAX), Ordering::Relaxed);
                health.report(PART, true, None);
                backoff.reset();
            }
            Err(e) => {
                health.dropped_unavailable.fetch_add(asked, Ordering::Relaxed);
                health.report(PART, false, Some(&describe(&e)));
                tokio::time::sleep(backoff.next()).await;
            }
        }
    }
}

/// One `XADD` per lane, pipelined.
async fn send(manager: &mut ConnectionManager, lanes: &BTreeSet<Lane>, owner: &str) -> redis::RedisResult<()> {
    let at = crate::engine::now_ms();
    let mut pipe = redis::pipe();
    for lane in lanes {
        pipe.add_command(stream::xadd(lane, owner, at)).ignore();
    }
    pipe.query_async::<()>(manager).await
}
