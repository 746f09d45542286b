//! Doing one claimed outbox row: send an attempt, look up a receipt, observe
//! a completion — through [`ProductClient`] with a fresh token each time and
//! the run's `traceparent` — and report the classified answer as an event
//! under the claim's fence (the committer's next batch).
//!
//! Each request is a client span of the run's trace (operation, connection,
//! classified answer and its reason — never the payload) and a sample of
//! `coordinator_product_request_seconds`. While the service drains, or while
//! the row's connection is held back (paused, held by a `Retry-After`, its
//! breaker open, as this process last knew it), a row whose request was not
//! sent yet is given back ([`Store::release`]) instead: work claimed before
//! a breaker opened is not sent after.
//!
//! Re-dispatch after a lost lease: a row whose earlier claim ran out without a
//! report comes back `reclaimed`. An attempt of a mutation or evaluation is
//! then NOT sent again: the earlier worker may have sent it and the product may
//! have acted, so it is reported uncertain (docs/reference/runs.md#effects: the
//! run goes to `attention`, an operator settles it). Reads, receipt lookups and
//! observations change nothing and are simply done again.
//!
//! [`ProductClient`]: coordinator_products::ProductClient
//! [`Store::release`]: coordinator_store::Store::release

use std::sync::Arc;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Observation};
use coordinator_core::machine::run::Run;
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::workflow::Step;
use coordinator_products::{AnswerKind, Connection, Explained};
use coordinator_store::{Claim, ClaimedRun, WorkItem, WorkKind};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

use crate::dispatch::capacity::Place;
use crate::dispatch::committer::Reports;
use crate::engine::Engine;
use crate::engine::commit_hooks::Note;
use crate::engine::error::EngineError;
use crate::process::drain::InFlight;
use crate::telemetry::traces::{Live, RunTrace};

/// Does what an outbox row asks and reports the answer (in the committer's
/// next batch, with the work's `place` in hand); while draining, gives an
/// unsent claim back instead.
pub(crate) async fn perform(
    engine: &Engine,
    reports: &Reports,
    item: WorkItem,
    run: ClaimedRun,
    place: Option<Place>,
) -> Result<(), EngineError> {
    if let Some(lane) = remote_lane(engine, &item, &run).await? {
        return to_lane(engine, reports, item, run, lane).await;
    }
    match answer(engine, &item, &run).await? {
        Some((event, wf, reason)) => {
            let note = Note { trace_parent: run.trace_parent, reason, remark: None, batch: None };
            let applied = reports.apply(Claim::Work(item.clone()), event, wf, note, place).await;
            if crate::engine::recovery::fence::lost_lease(&applied) {
                engine.judge_lost_lease(&item).await;
            }
            applied
        }
        None => {
            release(engine, item).await?;
            if !engine.is_draining() {
                // Held back as this process last knew it: read again, so that a stale memory
                // (a breaker another process closed) does not give back what claims take.
                if let Err(e) = engine.store.refresh_connections(engine.now()).await {
                    tracing::warn!(error = %e, "the connections' state could not be read again");
                }
            }
            Ok(())
        }
    }
}

/// The lane of a claimed row that belongs to a remote connection (its lease
/// ran out, or it was queued before the connection became remote).
async fn remote_lane(engine: &Engine, item: &WorkItem, run: &ClaimedRun) -> Result<Option<String>, EngineError> {
    if engine.remote.is_empty() {
        return Ok(None);
    }
    let wf = engine.workflow(&run.revision).await?;
    Ok(crate::dispatch::remote::connection_of(&wf, &item.step)
        .filter(|c| engine.remote.contains_key(*c))
        .map(str::to_owned))
}

/// A remote connection's row claimed here: a mutation or evaluation attempt
/// claimed before is reported uncertain (a worker may have sent it;
/// docs/reference/runs.md#effects); anything else goes back to its lane for the
/// workers, unsent.
async fn to_lane(
    engine: &Engine,
    reports: &Reports,
    item: WorkItem,
    run: ClaimedRun,
    lane: String,
) -> Result<(), EngineError> {
    let wf = engine.workflow(&run.revision).await?;
    let effect = wf.operation_of(&item.step).map(|(_, pinned)| pinned.descriptor.effect);
    if item.kind == WorkKind::Attempt && item.reclaimed && effect.is_some_and(|e| !resendable(e)) {
        let attempt = u32::try_from(item.attempt).map_err(|_| missing(&item, "attempt number"))?;
        tracing::warn!(
            run_id = %item.run_id,
            step = %item.step,
            attempt,
            connection = %lane,
            "a remote worker's lease ran out without a report: not sending it again, its effect is unknown"
        );
        let event = Event::CallAnswered { step: item.step.clone(), attempt, answer: CallAnswer::Uncertain };
        let reason =
            Some("acquired by a remote worker whose lease ran out without a report; not sent again".to_owned());
        let note = Note { trace_parent: run.trace_parent, reason, remark: None, batch: None };
        return reports.apply(Claim::Work(item), event, wf, note, None).await;
    }
    let workflow_lane = coordinator_store::workflow_lane(&lane, &wf.definition.workflow);
    let relaned = engine.store.relane(&item, &engine.owner, Some(&workflow_lane)).await?;
    if relaned {
        engine.lane_work_queued();
    }
    tracing::debug!(run_id = %item.run_id, step = %item.step, connection = %lane, relaned, "back to its lane for remote workers");
    Ok(())
}

/// Gives back the claim of a row the worker did not act on (draining, or its
/// connection held back), so the next claimer takes it at once and not as
/// `reclaimed` after the lease.
async fn release(engine: &Engine, item: WorkItem) -> Result<(), EngineError> {
    let released = engine.store.release(&Claim::Work(item.clone()), &engine.owner).await?;
    tracing::debug!(
        run_id = %item.run_id,
        step = %item.step,
        attempt = item.attempt,
        work = item.kind.as_str(),
        released,
        "claim given back unsent: draining, or its connection is held back"
    );
    Ok(())
}

/// What doing a row came to: the event reporting the answer, the run's
/// workflow and the classifier's reason; `None` when draining began before
/// anything was sent.
type Answered = Option<(Event, Arc<Workflow>, Option<String>)>;

/// Does what an outbox row asks, on the run as the claim read it.
async fn answer(engine: &Engine, item: &WorkItem, claimed: &ClaimedRun) -> Result<Answered, EngineError> {
    let wf = engine.workflow(&claimed.revision).await?;
    let run = engine.open(&item.run_id, &claimed.snapshot)?;
    let trace = engine.traces.run(&item.run_id, claimed.trace_parent.as_deref());
    let request = Request { engine, item, trace };
    let answered = match item.kind {
        WorkKind::Attempt => attempt(&request, &wf, &run).await?,
        WorkKind::Receipt => receipt(&request, &wf, &run).await?,
        WorkKind::Observation => observe(&request, &wf, &run).await?,
    };
    Ok(answered.map(|(event, reason)| (event, wf, reason)))
}

/// One product request of a claimed row.
struct Request<'a> {
    engine: &'a Engine,
    item: &'a WorkItem,
    trace: RunTrace,
}

/// A request about to be sent: its span and the drain's count of it.
struct Sending<'a> {
    span: Live,
    _in_flight: InFlight<'a>,
    started: std::time::Instant,
}

impl<'a> Request<'a> {
    /// Starts the request's span; `None` when draining has begun or the
    /// connection is held back now, so the request is not sent and its claim
    /// is given back.
    fn begin(&self, name: &'static str, target: &Target<'_>) -> Option<Sending<'a>> {
        let in_flight = self.engine.drain.request();
        // Checked after counting, so a drain that begins now waits for this request.
        if self.engine.is_draining() {
            return None;
        }
        if self.engine.store.connection_held(target.connection, self.engine.now()) {
            // Held back since it was claimed (paused, a Retry-After, the breaker opened): not sent.
            return None;
        }
        let mut span = self.engine.traces.start(name, SpanKind::Client, Some(&self.trace));
        span.set(|| {
            [
                KeyValue::new("coordinator.run_id", self.item.run_id.clone()),
                KeyValue::new("coordinator.step", self.item.step.clone()),
                KeyValue::new("coordinator.attempt", self.item.attempt),
                KeyValue::new("coordinator.connection", target.connection.to_owned()),
                KeyValue::new("coordinator.operation", target.operation.clone()),
            ]
        });
        Some(Sending { span, _in_flight: in_flight, started: std::time::Instant::now() })
    }

    /// Ends the request's span and records its metric; gives the reason on.
    fn end<T: AnswerKind>(
        &self,
        sending: Sending<'_>,
        request: &'static str,
        target: &Target<'_>,
        explained: &Explained<T>,
    ) -> String {
        let Sending { mut span, started, .. } = sending;
        let (kind, reason) = (explained.answer.kind(), explained.reason.to_string());
        self.engine.metrics().product_request(request, target.connection, &target.operation, kind, started.elapsed());
        span.set(|| [KeyValue::new("coordinator.answer", kind), KeyValue::new("coordinator.reason", reason.clone())]);
        span.end();
        reason
    }
}

async fn attempt(
    request: &Request<'_>,
    wf: &Workflow,
    run: &Run,
) -> Result<Option<(Event, Option<String>)>, EngineError> {
    let (engine, item) = (request.engine, request.item);
    let target = call_target(engine, wf, &item.step)?;
    let call = run.call(&item.step).ok_or_else(|| missing(item, "call"))?;
    let attempt = u32::try_from(item.attempt).map_err(|_| missing(item, "attempt number"))?;
    let step = item.step.clone();
    if item.reclaimed && !resendable(target.effect) {
        tracing::warn!(
            run_id = %item.run_id,
            step = %item.step,
            attempt,
            "attempt claimed before and never reported: not sending it again, its effect is unknown"
        );
        let reason = "claimed before and never reported; not sent again".to_owned();
        return Ok(Some((Event::CallAnswered { step, attempt, answer: CallAnswer::Uncertain }, Some(reason))));
    }
    let Some(sending) = request.begin("product attempt", &target) else { return Ok(None) };
    let trace = Some(request.trace.traceparent(&sending.span));
    tracing::debug!(run_id = %item.run_id, step = %item.step, attempt, "sending attempt");
    let explained = engine
        .products
        .call_traced(target.conn, &target.operation, &call.command, &run.id, attempt, target.effect.into(), trace)
        .await;
    let reason = request.end(sending, "attempt", &target, &explained);
    let retry_after_ms = coordinator_products::retry_after_ms(&explained.answer);
    engine.pace_answered(target.connection, &explained.reason, retry_after_ms).await;
    Ok(Some((Event::CallAnswered { step, attempt, answer: explained.answer }, Some(reason))))
}

async fn receipt(
    request: &Request<'_>,
    wf: &Workflow,
    run: &Run,
) -> Result<Option<(Event, Option<String>)>, EngineError> {
    let (engine, item) = (request.engine, request.item);
    let target = call_target(engine, wf, &item.step)?;
    let call = run.call(&item.step).ok_or_else(|| missing(item, "call"))?;
    let Some(sending) = request.begin("product receipt lookup", &target) else { return Ok(None) };
    let trace = Some(request.trace.traceparent(&sending.span));
    let explained = engine.products.receipt_traced(target.conn, &call.command.idempotency_key, trace).await;
    let reason = request.end(sending, "receipt", &target, &explained);
    engine.pace_answered(target.connection, &explained.reason, None).await;
    Ok(Some((Event::ReceiptAnswered { step: item.step.clone(), answer: explained.answer }, Some(reason))))
}

async fn observe(
    request: &Request<'_>,
    wf: &Workflow,
    run: &Run,
) -> Result<Option<(Event, Option<String>)>, EngineError> {
    let (engine, item) = (request.engine, request.item);
    let Some(Step::WaitFor(wait)) = wf.step(&item.step) else {
        return Err(missing(item, "wait-for step"));
    };
    let record = run.wait(&item.step).ok_or_else(|| missing(item, "wait"))?;
    let seq = u32::try_from(item.attempt).map_err(|_| missing(item, "observation number"))?;
    let step = item.step.clone();
    let Ok(target) = call_target(engine, wf, &wait.completion.step) else {
        return Ok(Some((Event::CompletionObserved { step, seq, answer: Observation::Unavailable }, None)));
    };
    let Some(sending) = request.begin("product observation", &target) else { return Ok(None) };
    let trace = Some(request.trace.traceparent(&sending.span));
    let explained = engine.products.observe_traced(target.conn, &wait.completion.name, &record.reference, trace).await;
    let reason = request.end(sending, "observation", &target, &explained);
    engine.pace_answered(target.connection, &explained.reason, None).await;
    Ok(Some((Event::CompletionObserved { step, seq, answer: explained.answer }, Some(reason))))
}

/// Whether an attempt an earlier worker may have sent can be sent again
/// without guessing: only a read (repeating it changes nothing).
fn resendable(effect: Effect) -> bool {
    match effect {
        Effect::Read => true,
        Effect::Mutation | Effect::Evaluation | Effect::ProposalAction => false,
    }
}

/// Where a call step's requests go.
pub(crate) struct Target<'a> {
    /// The connection.
    pub(crate) conn: &'a Connection,
    /// Its name (as workflows name it).
    pub(crate) connection: &'a str,
    /// The operation, `name/vN` without the product.
    pub(crate) operation: String,
    /// Its effect.
    pub(crate) effect: Effect,
}

/// The connection, operation and effect of a call step.
pub(crate) fn call_target<'a>(engine: &'a Engine, wf: &Workflow, step: &str) -> Result<Target<'a>, EngineError> {
    let (_, pinned) = wf.operation_of(step).ok_or_else(|| EngineError::Corrupt(format!("step {step} is no call")))?;
    let (connection, conn) = engine
        .connections
        .get_key_value(&pinned.connection)
        .ok_or_else(|| EngineError::Corrupt(format!("no connection `{}` is configured", pinned.connection)))?;
    let operation = pinned.operation.split_once('.').map_or(pinned.operation.as_str(), |(_, op)| op);
    Ok(Target { conn, connection, operation: operation.to_owned(), effect: pinned.descriptor.effect })
}

fn missing(item: &WorkItem, what: &str) -> EngineError {
    EngineError::Corrupt(format!("run {} has no {what} for step {} ({})", item.run_id, item.step, item.kind.as_str()))
}

#[cfg(test)]
#[path = "perform_tests.rs"]
pub(crate) mod drain_tests;
