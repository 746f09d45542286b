//! The worker: claims due timers and outbox rows, does what each row asks
//! (send an attempt, look up a receipt, observe a completion) through
//! `ProductClient` with a fresh token each time, and reports the classified
//! answer as an event under the claim's fence (`Engine::apply_claimed`, which
//! uses `Store::apply_fenced`), so a worker whose lease was taken over cannot
//! apply.
//!
//! It sleeps until the store's next due instant, until this process's engine
//! wakes it after a commit, or until another process sharing the database
//! commits new work (`Store::wakeups`, PostgreSQL `NOTIFY`), and polls at most
//! every [`MAX_SLEEP`] as a fallback: no busy loop. Each claimed row is handled
//! on its own task; the lease ([`WorkerOptions::lease_ms`], longer than a
//! token request and a product request take at most) keeps other claims (of
//! this or another process) away from it meanwhile.
//!
//! Re-dispatch after a lost lease: a row whose earlier claim ran out without a
//! report comes back `reclaimed`. An attempt of a mutation or evaluation is
//! then NOT sent again: the earlier worker may have sent it and the product may
//! have acted, so the worker reports the effect uncertain (SPEC §3: the run
//! goes to `attention`, an operator settles it). Reads, receipt lookups and
//! observations change nothing and are simply done again.

use std::sync::Arc;
use std::time::Duration;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Observation};
use coordinator_core::machine::run::Run;
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::workflow::Step;
use coordinator_products::Connection;
use coordinator_store::{Claim, ClaimLimits, ClaimedRun, Due, TimerItem, Wakeups, WorkItem, WorkKind, WorkScope};

use crate::committer::{self, Reports};
use crate::engine::Engine;
use crate::error::EngineError;

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
}

impl WorkerOptions {
    /// The options for an engine's connections (see [`lease_ms_for`]).
    pub fn for_engine(engine: &Engine) -> WorkerOptions {
        WorkerOptions { lease_ms: lease_ms_for(engine.connections.values()) }
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

/// Runs the worker with `options` until the task is dropped or aborted.
pub async fn run_with(engine: Arc<Engine>, options: WorkerOptions) {
    let (reports, committer) = committer::start(Arc::clone(&engine));
    // The committer stops with the worker (this future dropped or aborted).
    let _committer = AbortOnDrop(committer);
    let mut wakeups = match engine.store.wakeups().await {
        Ok(wakeups) => wakeups,
        Err(e) => {
            eprintln!("coordinator worker: not listening for other processes' work (polling instead): {e}");
            Wakeups::never()
        }
    };
    loop {
        let next = match claim_round(&engine, &reports, options).await {
            Ok(next) => next,
            Err(e) => {
                eprintln!("coordinator worker: claiming failed: {e}");
                None
            }
        };
        let sleep = match next {
            Some(due) => Duration::from_millis(u64::try_from(due.saturating_sub(engine.now())).unwrap_or(0)),
            None => MAX_SLEEP,
        };
        if sleep.is_zero() {
            // More is due than one round takes (or another claimer holds due rows a moment).
            continue;
        }
        tokio::select! {
            () = engine.wake.notified() => {}
            () = wakeups.next() => {}
            () = tokio::time::sleep(sleep.min(MAX_SLEEP)) => {}
        }
    }
}

/// The work this engine's worker takes: receipts only in recovery-only mode.
fn scope(engine: &Engine) -> WorkScope {
    if engine.recovery_only { WorkScope::ReceiptsOnly } else { WorkScope::All }
}

/// Claims due timers and work and starts a task for each; returns when work
/// is next due after what it claimed (`None`: nothing is queued).
async fn claim_round(
    engine: &Arc<Engine>,
    reports: &Reports,
    options: WorkerOptions,
) -> Result<Option<i64>, EngineError> {
    let limits = ClaimLimits { timers: TIMER_CLAIM_LIMIT, work: CLAIM_LIMIT };
    // Recovery-only: no timer fires and nothing is dispatched; receipts are only read.
    let Due { timers, work, next } =
        engine.store.claim_due(scope(engine), engine.now(), &engine.owner, options.lease_ms, limits).await?;
    // Timers first. One run's timers fire one after another in the store's order
    // (due time, then SPEC §3 precedence); different runs' fire concurrently. The
    // round waits for all of them, so a run's later timers are never claimed
    // before its earlier ones have fired.
    let mut by_run: Vec<Vec<TimerItem>> = Vec::new();
    for timer in timers {
        match by_run.iter_mut().find(|group| group[0].run_id == timer.run_id) {
            Some(group) => group.push(timer),
            None => by_run.push(vec![timer]),
        }
    }
    let mut firing = tokio::task::JoinSet::new();
    for group in by_run {
        let (engine, reports) = (Arc::clone(engine), reports.clone());
        firing.spawn(async move {
            for timer in group {
                report(fire(&engine, &reports, timer).await, "timer");
            }
        });
    }
    while firing.join_next().await.is_some() {}
    for (item, run) in work {
        let (engine, reports) = (Arc::clone(engine), reports.clone());
        tokio::spawn(async move {
            let kind = item.kind.as_str();
            let result = perform(&engine, &reports, item, run).await;
            report(result, kind);
        });
    }
    Ok(next)
}

fn report(result: Result<(), EngineError>, what: &str) {
    match result {
        // Applied (the engine woke the worker if it queued anything), or a stale
        // or unwanted report, acknowledged and ignored (its lease runs out).
        Ok(()) | Err(EngineError::Ignored(_)) => {}
        Err(e) => eprintln!("coordinator worker: {what} not applied: {e}"),
    }
}

/// Applies a due timer (in the committer's next batch).
async fn fire(engine: &Engine, reports: &Reports, timer: TimerItem) -> Result<(), EngineError> {
    let wf = engine.workflow(&timer.revision).await?;
    let event = Event::TimerDue { timer: timer.timer.clone() };
    reports.apply(Claim::Timer(timer), event, wf).await
}

/// Does what an outbox row asks and reports the answer (in the committer's next batch).
async fn perform(engine: &Engine, reports: &Reports, item: WorkItem, run: ClaimedRun) -> Result<(), EngineError> {
    let (event, wf) = answer(engine, &item, &run).await?;
    reports.apply(Claim::Work(item), event, wf).await
}

/// Does what an outbox row asks, on the run as the claim read it: the event
/// that reports the answer, and the run's workflow.
async fn answer(engine: &Engine, item: &WorkItem, claimed: &ClaimedRun) -> Result<(Event, Arc<Workflow>), EngineError> {
    let wf = engine.workflow(&claimed.revision).await?;
    let run = engine.open(&item.run_id, &claimed.snapshot)?;
    let event = match item.kind {
        WorkKind::Attempt => attempt(engine, &wf, &run, item).await?,
        WorkKind::Receipt => {
            let (conn, _, _) = call_target(engine, &wf, &item.step)?;
            let call = run.call(&item.step).ok_or_else(|| missing(item, "call"))?;
            let answer = engine.products.receipt(conn, &call.command.idempotency_key).await;
            Event::ReceiptAnswered { step: item.step.clone(), answer }
        }
        WorkKind::Observation => observe(engine, &wf, &run, item).await?,
    };
    Ok((event, wf))
}

async fn attempt(engine: &Engine, wf: &Workflow, run: &Run, item: &WorkItem) -> Result<Event, EngineError> {
    let (conn, operation, effect) = call_target(engine, wf, &item.step)?;
    let call = run.call(&item.step).ok_or_else(|| missing(item, "call"))?;
    let attempt = u32::try_from(item.attempt).map_err(|_| missing(item, "attempt number"))?;
    if item.reclaimed && !resendable(effect) {
        eprintln!(
            "coordinator worker: attempt {attempt} of step {} of run {} was claimed before and never reported; \
             not sending it again, its effect is unknown",
            item.step, item.run_id
        );
        return Ok(Event::CallAnswered { step: item.step.clone(), attempt, answer: CallAnswer::Uncertain });
    }
    let send_key = matches!(effect, Effect::Mutation | Effect::Evaluation);
    let answer = engine.products.call(conn, &operation, &call.command, &run.id, attempt, send_key).await;
    Ok(Event::CallAnswered { step: item.step.clone(), attempt, answer })
}

/// Whether an attempt an earlier worker may have sent can be sent again
/// without guessing: only a read (repeating it changes nothing).
fn resendable(effect: Effect) -> bool {
    match effect {
        Effect::Read => true,
        Effect::Mutation | Effect::Evaluation | Effect::ProposalAction => false,
    }
}

async fn observe(engine: &Engine, wf: &Workflow, run: &Run, item: &WorkItem) -> Result<Event, EngineError> {
    let Some(Step::WaitFor(wait)) = wf.step(&item.step) else {
        return Err(missing(item, "wait-for step"));
    };
    let record = run.wait(&item.step).ok_or_else(|| missing(item, "wait"))?;
    let seq = u32::try_from(item.attempt).map_err(|_| missing(item, "observation number"))?;
    let answer = match call_target(engine, wf, &wait.completion.step) {
        Ok((conn, _, _)) => engine.products.observe(conn, &wait.completion.name, &record.reference).await,
        Err(_) => Observation::Unavailable,
    };
    Ok(Event::CompletionObserved { step: item.step.clone(), seq, answer })
}

/// The connection, operation (`name/vN`, without the product) and effect of a call step.
pub(crate) fn call_target<'a>(
    engine: &'a Engine,
    wf: &Workflow,
    step: &str,
) -> Result<(&'a Connection, String, Effect), EngineError> {
    let (_, pinned) = wf.operation_of(step).ok_or_else(|| EngineError::Corrupt(format!("step {step} is no call")))?;
    let conn = engine
        .connections
        .get(&pinned.connection)
        .ok_or_else(|| EngineError::Corrupt(format!("no connection `{}` is configured", pinned.connection)))?;
    let operation = pinned.operation.split_once('.').map_or(pinned.operation.as_str(), |(_, op)| op);
    Ok((conn, operation.to_owned(), pinned.descriptor.effect))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn missing(item: &WorkItem, what: &str) -> EngineError {
    EngineError::Corrupt(format!("run {} has no {what} for step {} ({})", item.run_id, item.step, item.kind.as_str()))
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

    #[test]
    fn the_lease_covers_a_token_request_and_a_call_on_the_slowest_connection() {
        let default = default_connection();
        assert_eq!(lease_ms_for([&default]), 80_000, "2 × (5 s + 30 s) + 10 s");
        let (fast, slow) = (connection(1, 2), connection(10, 50));
        assert_eq!(lease_ms_for([&fast, &slow, &default]), 130_000);
        assert_eq!(lease_ms_for([]), 10_000, "no connection: the margin alone");
    }
}
