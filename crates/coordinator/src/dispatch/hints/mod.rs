//! Redis dispatch hints (runtime.yaml `dispatch.redis`): an accelerator for
//! dispatch, never its authority.
//!
//! After a commit that queued work or set a timer (`Engine::record`, where the
//! engine wakes its own worker), the lanes it concerns are announced on Redis
//! Streams — `coordinator:due:in-process` for in-process work and timers,
//! `coordinator:due:<connection>` for a remote connection's lane — by a task
//! of their own, so a commit never waits for Redis and never fails because of
//! it ([`announcer`]). Every serve process reads the in-process stream with one
//! consumer group, so a hint wakes one other process's worker, and reads a
//! lane's stream while one of its polls waits for that lane ([`reader`]); the
//! entries are acknowledged after the claim round (or offer) that follows.
//!
//! The database stays the only source of truth: a hint says only "look at
//! the database again". The worker's fallback poll keeps running — stretched
//! to [`SWEEP`] while every part reaches Redis, back to the short interval
//! the moment one does not — so losing Redis (a restart without persistence,
//! `FLUSHALL`, a missing group, a full queue) costs latency, never a run.
//!
//! - [`stream`]: the streams' keys and what an entry says.
//! - [`due`]: what a commit made claimable, and on which lanes.
//! - [`announcer`]: the bounded queue and the sending task.
//! - [`reader`]: one stream's consumer-group reader.
//! - [`signal`]: wake-ups and rounds between a reader and what it wakes.
//! - [`health`]: whether Redis answers, and the counts the metrics show.
//! - [`backoff`]: the pause between tries.

mod announcer;
mod backoff;
mod due;
mod health;
mod reader;
mod signal;
mod stream;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Once};
use std::time::Duration;

use coordinator_core::machine::compiled::Workflow;
use coordinator_products::Secret;
use metrics::{counter, describe_counter, describe_gauge, gauge};
use tokio::task::JoinHandle;

pub(crate) use due::Due;
pub(crate) use signal::Hinted;
pub(crate) use stream::Lane;

use announcer::Announcer;
use health::Health;
use reader::Reader;
use signal::{Signal, Waiting};

use crate::dispatch::remote::RemoteConnections;
use crate::telemetry::metrics::Metrics;

/// How often the database is swept for due work while every part reaches Redis.
pub const SWEEP: Duration = Duration::from_secs(2);

/// Hints written, each an `XADD` (hints announced together for one lane are one).
pub const HINTS_SENT: &str = "coordinator_dispatch_hints_sent_total";
/// Hints dropped, by `reason` (`full`: the queue was full; `unavailable`: Redis could not be reached).
pub const HINTS_DROPPED: &str = "coordinator_dispatch_hints_dropped_total";
/// Wake-ups by another process's hints, by `path` (`in-process`: the worker; `remote`: polls of a lane).
pub const HINT_WAKEUPS: &str = "coordinator_dispatch_hint_wakeups_total";
/// Gauge: 1 while every part of the hints reaches Redis, else 0.
pub const REDIS_UP: &str = "coordinator_dispatch_hints_redis_up";

/// Why the hints cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HintsError {
    /// The URL is not one the Redis client takes (never shown: it may carry a password).
    #[error("dispatch.redis.url is not a Redis URL the client can use (redis://[:password@]host:port[/db])")]
    Url,
}

/// An engine's dispatch hints: off unless runtime.yaml configures them.
#[derive(Debug, Default)]
pub(crate) struct Hints {
    live: Option<Arc<Live>>,
}

#[derive(Debug)]
struct Live {
    announcer: Announcer,
    health: Arc<Health>,
    in_process: Arc<Signal>,
    lanes: BTreeMap<String, Arc<Signal>>,
    tasks: Vec<JoinHandle<()>>,
    described: Once,
}

impl Drop for Live {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Hints {
    /// Starts announcing on the Redis server at `url` as `owner` (this
    /// process's lease owner id) and reading: the in-process stream when
    /// `read_in_process` (not in recovery-only mode, which dispatches
    /// nothing), and the lane of each of the `remote` connections. Must be
    /// called inside the service's runtime; connects in the background, so
    /// Redis being down at start delays nothing.
    ///
    /// # Errors
    /// [`HintsError::Url`] when the URL does not parse.
    pub(crate) fn start<'a>(
        url: &Secret,
        owner: &str,
        remote: impl IntoIterator<Item = &'a String>,
        read_in_process: bool,
    ) -> Result<Hints, HintsError> {
        let client = redis::Client::open(url.expose()).map_err(|_| HintsError::Url)?;
        let in_process = Arc::new(Signal::default());
        let lanes: BTreeMap<String, Arc<Signal>> = remote.into_iter().map(|c| (c.clone(), Arc::default())).collect();
        let mut readers = Vec::new();
        if read_in_process {
            readers.push((Lane::InProcess, Arc::clone(&in_process)));
        }
        readers.extend(lanes.iter().map(|(c, signal)| (Lane::Remote(c.clone()), Arc::clone(signal))));
        let parts: Vec<String> = readers.iter().map(|(lane, _)| Reader::part(lane)).collect();
        let signals = std::iter::once(Arc::clone(&in_process)).chain(lanes.values().cloned()).collect();
        let health =
            Arc::new(Health::new(std::iter::once(announcer::PART).chain(parts.iter().map(String::as_str)), signals));
        let (announcer, task) = Announcer::start(client.clone(), owner.to_owned(), Arc::clone(&health));
        let mut tasks = vec![task];
        for (lane, signal) in readers {
            let reader = Reader {
                client: client.clone(),
                lane,
                consumer: owner.to_owned(),
                signal,
                health: Arc::clone(&health),
            };
            tasks.push(reader.start());
        }
        let live = Live { announcer, health, in_process, lanes, tasks, described: Once::new() };
        Ok(Hints { live: Some(Arc::new(live)) })
    }

    /// Announces what a commit of `wf`'s run made claimable (after it committed).
    pub(crate) fn announce(&self, due: &Due, wf: &Workflow, remote: &RemoteConnections) {
        let Some(live) = &self.live else { return };
        if !due.is_empty() {
            live.announcer.announce(due.lanes(wf, remote));
        }
    }

    /// How long a waiter may sleep without looking at the database: [`SWEEP`]
    /// while every part reaches Redis, else `short` (today's interval).
    pub(crate) fn interval(&self, short: Duration) -> Duration {
        match &self.live {
            Some(live) if live.health.is_up() => SWEEP.max(short),
            _ => short,
        }
    }

    /// The in-process stream's wake-ups (for the worker).
    pub(crate) fn in_process(&self) -> Hinted {
        self.live.as_ref().map_or(Hinted(None), |live| live.in_process.subscribe())
    }

    /// A claim round begins (see [`Hints::round_ended`]).
    pub(crate) fn round_begins(&self) -> u64 {
        self.live.as_ref().map_or(0, |live| live.in_process.begin())
    }

    /// The claim round `round` ended: the entries that woke it may be acknowledged.
    pub(crate) fn round_ended(&self, round: u64) {
        if let Some(live) = &self.live {
            live.in_process.ended(round);
        }
    }

    /// The worker stopped for good (drained): its stream is left to the other processes.
    pub(crate) fn worker_stopped(&self) {
        if let Some(live) = &self.live {
            live.in_process.close();
        }
    }

    /// A poll waiting for `lanes` (the remote connections it serves).
    pub(crate) fn polling(&self, lanes: &[String]) -> Polling<'_> {
        let signals: Vec<&Signal> = match &self.live {
            Some(live) => lanes.iter().filter_map(|lane| live.lanes.get(lane)).map(Arc::as_ref).collect(),
            None => Vec::new(),
        };
        let hinted = signals.iter().map(|s| s.subscribe()).collect();
        let waiting = signals.iter().map(|s| s.waiting()).collect();
        Polling { signals, hinted, _waiting: waiting }
    }

    /// Sets the hints' counters and gauge in `metrics` (at scrape time); nothing when off.
    pub(crate) fn record(&self, metrics: &Metrics) {
        let Some(live) = &self.live else { return };
        let health = &live.health;
        let read = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
        metrics.with(|| {
            live.described.call_once(|| {
                describe_counter!(HINTS_SENT, "Dispatch hints written to Redis (XADD).");
                describe_counter!(HINTS_DROPPED, "Dispatch hints dropped, by reason (full, unavailable).");
                describe_counter!(HINT_WAKEUPS, "Wake-ups by another process's dispatch hints, by path.");
                describe_gauge!(REDIS_UP, "1 while every part of the dispatch hints reaches Redis, else 0.");
            });
            counter!(HINTS_SENT).absolute(read(&health.sent));
            counter!(HINTS_DROPPED, "reason" => "full").absolute(read(&health.dropped_full));
            counter!(HINTS_DROPPED, "reason" => "unavailable").absolute(read(&health.dropped_unavailable));
            counter!(HINT_WAKEUPS, "path" => "in-process").absolute(read(&health.woke_in_process));
            counter!(HINT_WAKEUPS, "path" => "remote").absolute(read(&health.woke_remote));
            gauge!(REDIS_UP).set(if health.is_up() { 1.0 } else { 0.0 });
        });
    }
}

/// A poll waiting for its lanes' hints (see [`Hints::polling`]).
pub(crate) struct Polling<'a> {
    signals: Vec<&'a Signal>,
    hinted: Vec<Hinted>,
    _waiting: Vec<Waiting<'a>>,
}

impl Polling<'_> {
    /// Resolves at a wake-up of any of the lanes; never without hints. Cancel-safe.
    pub(crate) async fn next(&mut self) {
        if self.hinted.is_empty() {
            return std::future::pending().await;
        }
        let woken = self.hinted.iter_mut().map(|h| Box::pin(h.next()));
        futures_util::future::select_all(woken).await;
    }

    /// Runs an offer as a round of the lanes (their entries are acknowledged after it).
    pub(crate) async fn offer<T>(&self, offer: impl Future<Output = T>) -> T {
        let rounds: Vec<u64> = self.signals.iter().map(|s| s.begin()).collect();
        let out = offer.await;
        for (signal, round) in self.signals.iter().zip(rounds) {
            signal.ended(round);
        }
        out
    }
}
