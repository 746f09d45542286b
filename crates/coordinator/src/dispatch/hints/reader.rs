//! Reading one stream with the consumer group [`GROUP`]: each serve process
//! is a consumer (its lease owner id), so one hint wakes one process. The
//! reader blocks in `XREADGROUP … BLOCK` on a connection of its own (a
//! blocking read would stall every command pipelined behind it on a shared
//! one), wakes its [`Signal`] for entries another process wrote (this
//! process woke itself when it committed), and `XACK`s them once the claim
//! round (or offer) that follows has ended — or after [`ACK_WAIT`], since a
//! hint is never the authority. A lane's reader reads only while one of this
//! process's polls waits for the lane, the in-process one until the worker
//! drained.
//!
//! Losing Redis costs latency only: a lost connection is reopened with
//! [`Backoff`]; a missing group (`NOGROUP`: Redis restarted without
//! persistence, `FLUSHALL`) is created again, from the start of whatever the
//! stream holds by then (`XGROUP CREATE … 0 MKSTREAM`), whether a read finds
//! it gone or a reconnection creates it (the server came back without it;
//! told once, by whichever process created it first). On each connection
//! the reader first takes over entries another consumer left pending for
//! longer than [`STALE`] (a process that died before acknowledging) and
//! acknowledges them, and removes consumers idle for an hour with nothing
//! pending, so stopped processes leave nothing behind.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::{StreamAutoClaimReply, StreamInfoConsumersReply, StreamReadReply};
use redis::{AsyncConnectionConfig, RedisResult};
use tokio::task::JoinHandle;

use super::backoff::Backoff;
use super::health::{Health, describe};
use super::signal::Signal;
use super::stream::{self, GROUP, Lane};

/// How long one `XREADGROUP` blocks.
pub(crate) const BLOCK: Duration = Duration::from_secs(1);
/// The most entries one read takes.
const COUNT: usize = 128;
/// The longest the reader waits for the round after a wake-up before acknowledging anyway.
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(5);
/// Entries pending this long with another consumer are taken over (it stopped).
const STALE: Duration = Duration::from_secs(60);
/// Consumers idle this long with nothing pending are removed.
const IDLE_CONSUMER: Duration = Duration::from_secs(3600);
/// Connecting, and any reply but a blocked read's.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One stream's reader.
pub(crate) struct Reader {
    pub(crate) client: redis::Client,
    pub(crate) lane: Lane,
    /// This process's consumer name (its lease owner id).
    pub(crate) consumer: String,
    pub(crate) signal: Arc<Signal>,
    pub(crate) health: Arc<Health>,
}

/// How a read went.
enum Read {
    /// Entries (maybe none: the block timed out).
    Entries(Vec<stream::Entry>),
    /// The group or the stream went missing: create it again.
    Missing,
}

impl Reader {
    /// The part's name in the health and the log.
    pub(crate) fn part(lane: &Lane) -> String {
        format!("reader of {}", lane.key())
    }

    /// Starts the reader; it runs until aborted.
    pub(crate) fn start(self) -> JoinHandle<()> {
        tokio::spawn(self.run())
    }

    async fn run(self) {
        let part = Reader::part(&self.lane);
        let mut backoff = Backoff::default();
        let mut again = false;
        loop {
            match self.connected(again).await {
                Ok(mut con) => {
                    again = true;
                    self.health.report(&part, true, None);
                    let e = self.read_until_lost(&mut con, &part, &mut backoff).await;
                    self.health.report(&part, false, Some(&describe(&e)));
                }
                Err(e) => {
                    self.health.report(&part, false, Some(&describe(&e)));
                }
            }
            tokio::time::sleep(backoff.next()).await;
        }
    }

    /// A fresh connection of this reader's own, the group in place and the
    /// leftovers of stopped consumers cleared. `again`: this reader had a
    /// connection before, so a group it has to create was lost meanwhile.
    async fn connected(&self, again: bool) -> RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(BLOCK.saturating_add(TIMEOUT)));
        let mut con = self.client.get_multiplexed_async_connection_with_config(&config).await?;
        if self.create_group(&mut con).await? && again {
            self.recreated();
        }
        self.tidy(&mut con).await?;
        Ok(con)
    }

    /// Reads, wakes and acknowledges until the connection fails; returns why.
    async fn read_until_lost(
        &self,
        con: &mut MultiplexedConnection,
        part: &str,
        backoff: &mut Backoff,
    ) -> redis::RedisError {
        loop {
            let reading = match self.lane {
                // A drained worker claims nothing: leave the hints to the other processes.
                Lane::InProcess => !self.signal.is_closed(),
                // No poll of this process waits: leave the lane's hints to the processes whose polls do.
                Lane::Remote(_) => self.signal.is_wanted(),
            };
            if !reading {
                self.signal.wanted(BLOCK).await;
                continue;
            }
            let entries = match self.read(con).await {
                Ok(Read::Entries(entries)) => entries,
                Ok(Read::Missing) => {
                    match self.create_group(con).await {
                        Ok(true) => self.recreated(),
                        Ok(false) => {}
                        Err(e) => return e,
                    }
                    continue;
                }
                Err(e) => return e,
            };
            self.health.report(part, true, None);
            backoff.reset();
            if entries.is_empty() {
                continue;
            }
            if entries.iter().any(|e| e.from.as_deref() != Some(self.consumer.as_str())) {
                let begun = self.signal.wake();
                let woke = match self.lane {
                    Lane::InProcess => &self.health.woke_in_process,
                    Lane::Remote(_) => &self.health.woke_remote,
                };
                woke.fetch_add(1, Ordering::Relaxed);
                // A lane whose polls all left meanwhile has no offer coming: acknowledge at once.
                if matches!(self.lane, Lane::InProcess) || self.signal.is_wanted() {
                    self.signal.round_after(begun, ACK_WAIT).await;
                }
            }
            let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
            if let Err(e) = self.ack(con, &ids).await {
                return e;
            }
        }
    }

    /// Counts and tells a group found missing and created again.
    fn recreated(&self) {
        self.health.groups_recreated.fetch_add(1, Ordering::Relaxed);
        tracing::info!(stream = %self.lane.key(), "Redis dispatch hints: the consumer group was missing (Redis restarted empty or was flushed); created again");
    }

    /// `XGROUP CREATE <key> coordinator 0 MKSTREAM`: whether it created the
    /// group; one already there (`BUSYGROUP`) is fine.
    async fn create_group(&self, con: &mut MultiplexedConnection) -> RedisResult<bool> {
        let created: RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.lane.key())
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(con)
            .await;
        match created {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One blocking `XREADGROUP` of new entries.
    async fn read(&self, con: &mut MultiplexedConnection) -> RedisResult<Read> {
        let block = u64::try_from(BLOCK.as_millis()).unwrap_or(1000);
        let reply: RedisResult<Option<StreamReadReply>> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(COUNT)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(self.lane.key())
            .arg(">")
            .query_async(con)
            .await;
        match reply {
            Ok(reply) => Ok(Read::Entries(reply.map(stream::entries).unwrap_or_default())),
            Err(e) if is_missing(&e) => Ok(Read::Missing),
            Err(e) => Err(e),
        }
    }

    async fn ack(&self, con: &mut MultiplexedConnection, ids: &[&str]) -> RedisResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        redis::cmd("XACK").arg(self.lane.key()).arg(GROUP).arg(ids).query_async::<i64>(con).await.map(|_| ())
    }

    /// Takes over and acknowledges entries stopped consumers left pending,
    /// and removes consumers idle for long with nothing pending.
    async fn tidy(&self, con: &mut MultiplexedConnection) -> RedisResult<()> {
        let stale = u64::try_from(STALE.as_millis()).unwrap_or(u64::MAX);
        let claimed: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(self.lane.key())
            .arg(GROUP)
            .arg(&self.consumer)
            .arg(stale)
            .arg("0-0")
            .arg("COUNT")
            .arg(1000)
            .arg("JUSTID")
            .query_async(con)
            .await?;
        let ids: Vec<&str> = claimed.claimed.iter().map(|id| id.id.as_str()).collect();
        self.ack(con, &ids).await?;
        let consumers: StreamInfoConsumersReply =
            redis::cmd("XINFO").arg("CONSUMERS").arg(self.lane.key()).arg(GROUP).query_async(con).await?;
        let idle = usize::try_from(IDLE_CONSUMER.as_millis()).unwrap_or(usize::MAX);
        for gone in consumers.consumers.iter().filter(|c| c.pending == 0 && c.idle >= idle && c.name != self.consumer) {
            redis::cmd("XGROUP")
                .arg("DELCONSUMER")
                .arg(self.lane.key())
                .arg(GROUP)
                .arg(&gone.name)
                .query_async::<i64>(con)
                .await?;
        }
        Ok(())
    }
}

/// Whether a read failed because its group or stream is gone: `NOGROUP`, or
/// a blocked read released because its key was deleted (`UNBLOCKED`).
pub(crate) fn is_missing(e: &redis::RedisError) -> bool {
    matches!(e.code(), Some("NOGROUP" | "UNBLOCKED"))
}
