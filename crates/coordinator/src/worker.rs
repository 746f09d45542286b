//! The worker: claims due timers and outbox rows, does what each row asks
//! (send an attempt, look up a receipt, observe a completion) through
//! `ProductClient` with a fresh token each time, and reports the classified
//! answer as an event with `Store::apply_fenced`, so a worker whose lease was
//! taken over cannot apply.
//!
//! It sleeps until the store's next due instant or until it is woken after a
//! commit, and polls at most every [`MAX_SLEEP`] as a fallback: no busy loop.
//! Each claimed row is handled on its own task; the lease keeps other claims
//! (of this or another process) away from it meanwhile.

use std::sync::Arc;
use std::time::Duration;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{Event, Observation};
use coordinator_core::machine::run::Run;
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::workflow::Step;
use coordinator_products::Connection;
use coordinator_store::{Claim, TimerItem, WorkItem, WorkKind};

use crate::engine::{Engine, now_ms};
use crate::error::EngineError;

/// The longest the worker sleeps without looking for due work.
pub const MAX_SLEEP: Duration = Duration::from_millis(250);
/// How long a claim is leased (longer than any product request timeout).
const LEASE_MS: i64 = 120_000;
/// Rows claimed per round.
const CLAIM_LIMIT: u32 = 32;

/// Runs the worker until the task is dropped or aborted.
pub async fn run(engine: Arc<Engine>) {
    loop {
        let claimed = match claim_round(&engine).await {
            Ok(n) => n,
            Err(e) => {
                eprintln!("coordinator worker: claiming failed: {e}");
                0
            }
        };
        if claimed > 0 {
            continue;
        }
        let sleep = match engine.store.next_due().await {
            Ok(Some(due)) => {
                Duration::from_millis(u64::try_from(due.saturating_sub(now_ms())).unwrap_or(0)).min(MAX_SLEEP)
            }
            Ok(None) | Err(_) => MAX_SLEEP,
        };
        tokio::select! {
            () = engine.wake.notified() => {}
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

/// Claims due timers and work and starts a task for each; returns how many were claimed.
async fn claim_round(engine: &Arc<Engine>) -> Result<usize, EngineError> {
    let now = now_ms();
    let timers = engine.store.claim_timers(now, &engine.owner, LEASE_MS, CLAIM_LIMIT).await?;
    let work = engine.store.claim_work(now, &engine.owner, LEASE_MS, CLAIM_LIMIT).await?;
    let claimed = timers.len() + work.len();
    // Timers first, in the store's order (due time, then SPEC §3 precedence), one after another.
    for timer in timers {
        report(engine, fire(engine, &timer).await, "timer");
    }
    for item in work {
        let engine = Arc::clone(engine);
        tokio::spawn(async move {
            let result = perform(&engine, &item).await;
            report(&engine, result, item.kind.as_str());
        });
    }
    Ok(claimed)
}

fn report(engine: &Engine, result: Result<(), EngineError>, what: &str) {
    match result {
        Ok(()) => engine.wake.notify_one(),
        // A stale or unwanted report is acknowledged and ignored (its lease runs out).
        Err(EngineError::Ignored(_)) => {}
        Err(e) => eprintln!("coordinator worker: {what} not applied: {e}"),
    }
}

/// Applies a due timer.
async fn fire(engine: &Engine, timer: &TimerItem) -> Result<(), EngineError> {
    let wf = engine.workflow_of(&timer.run_id).await?;
    let event = Event::TimerDue { timer: timer.timer.clone() };
    apply(engine, &wf, &Claim::Timer(timer.clone()), &timer.run_id, &event).await
}

/// Does what an outbox row asks and reports the answer.
async fn perform(engine: &Engine, item: &WorkItem) -> Result<(), EngineError> {
    let row = engine.store.load(&item.run_id).await?.ok_or(EngineError::RunNotFound)?;
    let wf = engine.workflow(&row.revision).await?;
    let run = engine.open(&row.id, &row.snapshot)?;
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
    apply(engine, &wf, &Claim::Work(item.clone()), &item.run_id, &event).await
}

async fn attempt(engine: &Engine, wf: &Workflow, run: &Run, item: &WorkItem) -> Result<Event, EngineError> {
    let (conn, operation, effect) = call_target(engine, wf, &item.step)?;
    let call = run.call(&item.step).ok_or_else(|| missing(item, "call"))?;
    let attempt = u32::try_from(item.attempt).map_err(|_| missing(item, "attempt number"))?;
    let send_key = matches!(effect, Effect::Mutation | Effect::Evaluation);
    let answer = engine.products.call(conn, &operation, &call.command, &run.id, attempt, send_key).await;
    Ok(Event::CallAnswered { step: item.step.clone(), attempt, answer })
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

async fn apply(engine: &Engine, wf: &Workflow, claim: &Claim, run_id: &str, event: &Event) -> Result<(), EngineError> {
    let now = now_ms();
    let decide = |snapshot: &[u8]| engine.decide_on(wf, run_id, snapshot, event, now);
    engine.store.apply_fenced(claim, &engine.owner, now, decide).await.map_err(EngineError::from_store)?;
    Ok(())
}

fn missing(item: &WorkItem, what: &str) -> EngineError {
    EngineError::Corrupt(format!("run {} has no {what} for step {} ({})", item.run_id, item.step, item.kind.as_str()))
}
