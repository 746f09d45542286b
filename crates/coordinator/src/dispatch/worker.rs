//! The worker: claims due timers and outbox rows, fires each timer, and hands
//! each outbox row to its own task ([`perform`](crate::dispatch::perform): the product request and its
//! report under the claim's fence), so a worker whose lease was taken over
//! cannot apply.
//!
//! It sleeps until the store's next due instant, until this process's engine
//! wakes it after a commit, or until another process sharing the database
//! commits new work ([`Store::wakeups`], PostgreSQL `NOTIFY`; and, with Redis
//! dispatch hints, another process's hint: [`crate::dispatch::hints`]), and polls at most
//! every [`MAX_SLEEP`] as a fallback (every [`hints::SWEEP`](crate::dispatch::hints::SWEEP) while the hints
//! reach Redis): no busy loop. The lease
//! ([`WorkerOptions::lease_ms`], longer than a token request and a product
//! request take at most) keeps other claims (of this or another process)
//! away from a claimed row meanwhile.
//!
//! Work its own committer or this process's admissions leased as they
//! committed (eager dispatch, [`crate::dispatch::handoff`]) arrives on a queue and is
//! started at once, as a claim's is, without a claim round.
//!
//! Work in hand is bounded ([`WorkerOptions::in_hand`], [`crate::dispatch::capacity`]): a
//! place is taken before a row is claimed or leased and held until its task
//! ends; with no place free the worker claims no work (timers still fire)
//! and waits for one.
//!
//! Draining ([`crate::process::drain`]): the worker claims nothing more and waits for
//! its tasks, each of which finishes a request it sent or gives its claim
//! back, so a routine stop leaves no lease to run out and no effect uncertain;
//! work leased to it after the drain began is given back.
//! A claim round that claimed something is a span of its own; every round's
//! duration is a metric.
//!
//! [`Store::wakeups`]: coordinator_store::Store::wakeups

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coordinator_core::machine::event::Event;
use coordinator_products::Connection;
use coordinator_store::{Claim, ClaimLimits, Due, TimerItem, Wakeups, WorkScope};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::dispatch::capacity::{self, InHand};
use crate::dispatch::committer::{self, Reports};
use crate::dispatch::handoff::{self, Handoff, Leased};
use crate::engine::Engine;
use crate::engine::commit_hooks::Note;
use crate::engine::error::EngineError;

/// The longest the worker sleeps without looking for due work.
pub const MAX_SLEEP: Duration = Duration::from_millis(250);
/// What a lease allows beyond the product requests: loading the run, deciding,
/// committing the report.
pub const LEASE_MARGIN: Duration = Duration::from_secs(10);
/// Outbox rows claimed per round.
const CLAIM_LIMIT: u32 = 32;
/// Timers claimed per round (firing one is a single short transaction).
const TIMER_CLAIM_LIMIT: u32 = 1024;

/// How a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerOptions {
    /// How long a claim is leased, in ms. It must outlast doing and reporting
    /// a row: a claim that runs out is taken over, and an attempt of a
    /// mutation or evaluation taken over is reported uncertain.
    pub lease_ms: i64,
    /// The most claimed or leased rows the worker holds at once (each a
    /// product request in flight or about to be).
    pub in_hand: usize,
}

impl WorkerOptions {
    /// The options for an engine's connections (see [`lease_ms_for`]).
    pub fn for_engine(engine: &Engine) -> WorkerOptions {
        WorkerOptions { lease_ms: lease_ms_for(engine.connections.values()), in_hand: capacity::DEFAULT_BOUND }
    }

    /// The lease as a duration.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.lease_ms).unwrap_or(0))
    }
}

/// The lease a claim needs with these connections, in ms: 2 × (connect +
/// request timeout) of the slowest connection (a token request and the call
/// itself each take at most that) plus [`LEASE_MARGIN`].
pub fn lease_ms_for<'a>(connections: impl IntoIterator<Item = &'a Connection>) -> i64 {
    let slowest = connections
        .into_iter()
        .map(|c| c.connect_timeout.saturating_add(c.request_timeout))
        .max()
        .unwrap_or(Duration::ZERO);
    let lease = slowest.saturating_mul(2).saturating_add(LEASE_MARGIN);
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

/// Runs the worker with the lease its engine's connections need
/// ([`WorkerOptions::for_engine`]) until the task is dropped or aborted.
pub async fn run(engine: Arc<Engine>) {
    let options = WorkerOptions::for_engine(&engine);
    run_with(engine, options).await;
}

/// Runs the worker with `options` until the task is dropped or aborted, or
/// until the engine drains: then it claims nothing more and returns once every
/// task it started has finished (an answer committed, or an unsent claim given back).
pub async fn run_with(engine: Arc<Engine>, options: WorkerOptions) {
    let (handed, mut leased) = mpsc::unbounded_channel();
    let in_hand = InHand::new(options.in_hand);
    let handoff = Handoff { lease_ms: options.lease_ms, scope: scope(&engine), in_hand: in_hand.clone(), to: handed };
    // Admissions in this process hand their leased work here too, while the worker runs.
    engine.set_handoff(Some(handoff.clone()));
    let _registered = Registered(Arc::clone(&engine));
    let (reports, committer) = committer::start(Arc::clone(&engine), Some(handoff));
    // The committer stops with the worker (this future dropped or aborted).
    let _committer = AbortOnDrop(committer);
    let mut wakeups = match engine.store.wakeups().await {
        Ok(wakeups) => wakeups,
        Err(e) => {
            tracing::warn!(error = %e, "not listening for other processes' work; polling instead");
            Wakeups::never()
        }
    };
    let mut hinted = engine.hints.in_process();
    // Dropping the set (the worker aborted) aborts the tasks in it.
    let mut tasks = JoinSet::new();
    while !engine.is_draining() {
        while tasks.try_join_next().is_some() {}
        if let Err(e) = engine.keep_fence().await {
            tracing::warn!(error = %e, "watching the restore fence failed; trying again");
        }
        if engine.is_fenced() {
            // Nothing is claimed while the fence holds (the store would refuse); the watch goes on.
            tokio::select! {
                () = engine.drain.begun() => {}
                () = tokio::time::sleep(MAX_SLEEP) => {}
            }
            continue;
        }
        let round = engine.hints.round_begins();
        let next = match claim_round(&engine, &reports, options, &in_hand, &mut tasks).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "claiming due work failed; trying again");
                None
            }
        };
        engine.hints.round_ended(round);
        let fallback = engine.hints.interval(MAX_SLEEP);
        let sleep = match next {
            Some(due) => Duration::from_millis(u64::try_from(due.saturating_sub(engine.now())).unwrap_or(0)),
            None => fallback,
        };
        // No room: no work is claimed until a task ends (due timers are looked for at the fallback).
        let full = in_hand.room() == 0;
        if sleep.is_zero() && !full {
            // More is due than one round takes (or another claimer holds due rows a moment).
            continue;
        }
        let asleep = tokio::time::sleep(if full { fallback } else { sleep.min(fallback) });
        tokio::pin!(asleep);
        loop {
            tokio::select! {
                Some(work) = leased.recv() => {
                    // Leased work is started while the worker sleeps on: it needs no claim round.
                    while tasks.try_join_next().is_some() {}
                    start(&engine, &reports, &mut tasks, work);
                    while let Ok(work) = leased.try_recv() {
                        start(&engine, &reports, &mut tasks, work);
                    }
                    continue;
                }
                () = in_hand.freed(), if full => {}
                () = engine.wake.notified(), if !full => {}
                () = wakeups.next(), if !full => {}
                () = hinted.next(), if !full => {}
                () = engine.drain.begun() => {}
                () = &mut asleep => {}
            }
            break;
        }
    }
    engine.hints.worker_stopped();
    tracing::info!(tasks = tasks.len(), "worker draining: claiming nothing more");
    while tasks.join_next().await.is_some() {}
    // Every report has been answered and admissions are refused, so nothing more is leased:
    // what was leased after the drain began goes back.
    engine.set_handoff(None);
    leased.close();
    while let Some((item, _, _)) = leased.recv().await {
        handoff::release(&engine, item).await;
    }
}

/// Starts a task doing claimed or leased work: its request and its report,
/// holding the work's place until it ends or hands it on with its report.
fn start(engine: &Arc<Engine>, reports: &Reports, tasks: &mut JoinSet<()>, (item, run, place): Leased) {
    engine.metrics().dispatch_delay("in-process", run.due_at, engine.now());
    let (engine, reports) = (Arc::clone(engine), reports.clone());
    tasks.spawn(async move {
        let kind = item.kind.as_str();
        let result = crate::dispatch::perform::perform(&engine, &reports, item, run, Some(place)).await;
        report(result, kind);
    });
}

/// The work this engine's worker takes: receipts only in recovery-only mode.
fn scope(engine: &Engine) -> WorkScope {
    if engine.recovery_only { WorkScope::ReceiptsOnly } else { WorkScope::All }
}

/// Claims due timers and as much work as there is room for in hand, and
/// starts a task for each in `tasks`; returns when work is next due after
/// what it claimed (`None`: nothing is queued).
async fn claim_round(
    engine: &Arc<Engine>,
    reports: &Reports,
    options: WorkerOptions,
    in_hand: &InHand,
    tasks: &mut JoinSet<()>,
) -> Result<Option<i64>, EngineError> {
    let mut places = in_hand.reserve(CLAIM_LIMIT as usize);
    let work_limit = u32::try_from(places.len()).unwrap_or(CLAIM_LIMIT);
    let limits = ClaimLimits { timers: TIMER_CLAIM_LIMIT, work: work_limit };
    let (started, clock) = (std::time::Instant::now(), SystemTime::now());
    // Recovery-only: no timer fires and nothing is dispatched; receipts are only read.
    let Due { timers, work, next } =
        engine.store.claim_due(scope(engine), engine.now(), &engine.owner, options.lease_ms, limits).await?;
    engine.metrics().claim_round(started.elapsed());
    // Each claimed row takes its place now; the places left over go back before the timers fire
    // (firing waits for commits, whose eager leases need room).
    let work: Vec<_> = work.into_iter().map(|(item, run)| (item, run, places.take_one())).collect();
    drop(places);
    if !timers.is_empty() || !work.is_empty() {
        // Only rounds that claimed something are traced: an idle round says nothing.
        let mut span = engine.traces.start_at("claim round", SpanKind::Internal, None, clock);
        span.set(|| {
            [
                KeyValue::new("coordinator.timers", i64::try_from(timers.len()).unwrap_or(i64::MAX)),
                KeyValue::new("coordinator.work", i64::try_from(work.len()).unwrap_or(i64::MAX)),
            ]
        });
        span.end();
    }
    // Timers first. One run's timers fire one after another in the store's
    // order (due time, then the precedence of docs/reference/runs.md#waits);
    // different runs' fire concurrently. The round waits for all of them, so a
    // run's later timers are never claimed before its earlier ones have fired.
    let mut by_run: Vec<Vec<TimerItem>> = Vec::new();
    for timer in timers {
        match by_run.iter_mut().find(|group| group[0].run_id == timer.run_id) {
            Some(group) => group.push(timer),
            None => by_run.push(vec![timer]),
        }
    }
    let mut firing = JoinSet::new();
    for group in by_run {
        let (engine, reports) = (Arc::clone(engine), reports.clone());
        firing.spawn(async move {
            for timer in group {
                report(fire(&engine, &reports, timer).await, "timer");
            }
        });
    }
    while firing.join_next().await.is_some() {}
    for (item, run, place) in work {
        match place {
            Some(place) => start(engine, reports, tasks, (item, run, place)),
            // Never more claimed than the places taken; if so, it goes back.
            None => handoff::release(engine, item).await,
        }
    }
    Ok(next)
}

fn report(result: Result<(), EngineError>, what: &str) {
    match result {
        // Applied (the engine woke the worker if it queued anything), or a stale
        // or unwanted report, acknowledged and ignored (its lease runs out).
        Ok(()) | Err(EngineError::Ignored(_)) => {}
        Err(e) => tracing::warn!(work = what, error = %e, "a worker's report was not applied"),
    }
}

/// Applies a due timer (in the committer's next batch).
async fn fire(engine: &Engine, reports: &Reports, timer: TimerItem) -> Result<(), EngineError> {
    let wf = engine.workflow(&timer.revision).await?;
    let event = Event::TimerDue { timer: timer.timer.clone() };
    let note = Note { trace_parent: timer.trace_parent.clone(), ..Note::default() };
    reports.apply(Claim::Timer(timer), event, wf, note, None).await
}

/// Withdraws the worker's hand-over from admissions when dropped (the worker stopped or was aborted).
struct Registered(Arc<Engine>);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.set_handoff(None);
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use coordinator_products::{HttpUrl, Secret, TokenSource};

    use super::*;

    fn default_connection() -> Connection {
        let url = match HttpUrl::parse("http://127.0.0.1:9/product") {
            Ok(url) => url,
            Err(e) => panic!("url: {e}"),
        };
        Connection::new(url, TokenSource::Static(Secret::new("token")))
    }

    fn connection(connect_s: u64, request_s: u64) -> Connection {
        default_connection().with_timeouts(Duration::from_secs(connect_s), Duration::from_secs(request_s))
    }

    /// Connections accepted and held unanswered, and how many were accepted.
    struct Holding {
        base: String,
        held: Arc<std::sync::Mutex<Vec<tokio::net::TcpStream>>>,
        accepted: tokio::sync::watch::Receiver<usize>,
    }

    impl Holding {
        async fn start() -> Holding {
            let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(listener) => listener,
                Err(e) => panic!("bind: {e}"),
            };
            let base = match listener.local_addr() {
                Ok(addr) => format!("http://{addr}"),
                Err(e) => panic!("address: {e}"),
            };
            let held = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (count, accepted) = tokio::sync::watch::channel(0);
            let holding = Arc::clone(&held);
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    holding.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(stream);
                    count.send_modify(|n| *n += 1);
                }
            });
            Holding { base, held, accepted }
        }

        async fn until_accepted(&mut self, n: usize) {
            let waited = tokio::time::timeout(Duration::from_secs(120), self.accepted.wait_for(|a| *a >= n)).await;
            assert!(matches!(waited, Ok(Ok(_))), "{n} requests were never sent");
        }

        fn accepted(&self) -> usize {
            *self.accepted.borrow()
        }

        /// Closes one held connection unanswered: its request fails.
        fn close_one(&self) {
            drop(self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop());
        }
    }

    #[tokio::test]
    async fn a_worker_holds_no_more_work_than_its_bound_and_takes_more_as_places_free() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut product = Holding::start().await;
        let engine = crate::dispatch::perform::drain_tests::engine_at(dir.path(), &product.base, 6).await;
        let options = WorkerOptions { in_hand: 2, ..WorkerOptions::for_engine(&engine) };
        let worker = tokio::spawn(run_with(Arc::clone(&engine), options));
        product.until_accepted(2).await;
        // Six runs' first requests are due: without the bound the worker's
        // next rounds would send the rest in this time (a bound that holds
        // passes however slow the machine is).
        tokio::time::sleep(Duration::from_millis(750)).await;
        assert_eq!(product.accepted(), 2, "two places: two requests in flight, the rest stays queued");
        // One request fails (its connection closed unanswered): its place frees, one more is sent.
        product.close_one();
        product.until_accepted(3).await;
        tokio::time::sleep(Duration::from_millis(750)).await;
        assert_eq!(product.accepted(), 3, "one place freed, one more request");
        worker.abort();
    }

    #[test]
    fn the_lease_covers_a_token_request_and_a_call_on_the_slowest_connection() {
        let default = default_connection();
        assert_eq!(lease_ms_for([&default]), 80_000, "2 × (5 s + 30 s) + 10 s");
        let (fast, slow) = (connection(1, 2), connection(10, 50));
        assert_eq!(lease_ms_for([&fast, &slow, &default]), 130_000);
        assert_eq!(lease_ms_for([]), 10_000, "no connection: the margin alone");
    }
}
