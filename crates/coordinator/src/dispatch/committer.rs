//! Group commit of the worker's reports: fired timers and product answers
//! are queued here and applied many to a transaction
//! ([`Store::apply_fenced_batch`]), each with every rule of a single fenced
//! apply — the claim's lease held, the decision made on the run's current
//! snapshot, persisted, committed — before its reporter hears back.
//!
//! One committer task per worker takes whatever has queued while the previous
//! transaction committed (up to the store's [`batch_limit`]): under light load a batch is
//! one report and costs what a single apply costs; under heavy load the
//! commits, round trips and fsyncs are shared. A run appears at most once per
//! batch; its later reports wait for the next batch, in the order they came.
//! When a batch fails as a whole (nothing was written), its reports are
//! applied one by one, so one bad report cannot hold the others back.
//!
//! Eager dispatch: a worker's committer leases the work its batch queues for
//! at once to that worker, in the batch's transaction
//! ([`Store::apply_fenced_batch_leasing`]), and hands it over
//! ([`crate::dispatch::handoff`]) before the reporters hear back; the worker starts it as it starts a
//! claim's, with no claim round between. Nothing is leased while the engine
//! drains or the restore fence holds; what the worker can no longer take is
//! given back ([`Store::release`]). Work leased this way is left out of the
//! wake-ups and hints after the commit (nobody else need look for it).
//!
//! It must not decide anything of its own: decisions are the engine's
//! ([`Engine::decide_on`]), after-commit metrics are recorded as for a single
//! apply.
//!
//! [`Store::apply_fenced_batch`]: coordinator_store::Store::apply_fenced_batch
//! [`batch_limit`]: coordinator_store::Store::batch_limit
//! [`Store::apply_fenced_batch_leasing`]: coordinator_store::Store::apply_fenced_batch_leasing
//! [`Store::release`]: coordinator_store::Store::release

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_store::Claim;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::dispatch::capacity::{Place, Places};
use crate::dispatch::handoff::{Handoff, Offer};
use crate::engine::Engine;
use crate::engine::commit_hooks::{After, Note, Told};
use crate::engine::error::EngineError;
use crate::telemetry::traces::{Live, RunTrace};

/// One report waiting for its transaction.
struct Report {
    claim: Claim,
    event: Event,
    wf: Arc<Workflow>,
    note: Note,
    /// The reporting task's place in hand, handed on to what the decision queues
    /// ([`capacity`](crate::dispatch::capacity)).
    place: Option<Place>,
    done: oneshot::Sender<Result<(), EngineError>>,
}

impl Report {
    fn run_id(&self) -> &str {
        match &self.claim {
            Claim::Work(w) => &w.run_id,
            Claim::Timer(t) => &t.run_id,
        }
    }
}

/// Where the worker's tasks hand their reports (cheap to clone).
#[derive(Clone)]
pub(crate) struct Reports {
    engine: Arc<Engine>,
    queue: mpsc::UnboundedSender<Report>,
}

impl Reports {
    /// Applies `event` under `claim`'s fence in the next batch and returns how
    /// that went; the reporting task's `place` in hand goes with it, to the
    /// work the decision queues ([`capacity`](crate::dispatch::capacity)). If
    /// the committer has stopped, it is applied on its own.
    pub(crate) async fn apply(
        &self,
        claim: Claim,
        event: Event,
        wf: Arc<Workflow>,
        note: Note,
        place: Option<Place>,
    ) -> Result<(), EngineError> {
        let (done, result) = oneshot::channel();
        match self.queue.send(Report { claim, event, wf, note, place, done }) {
            Ok(()) => match result.await {
                Ok(result) => result,
                Err(_) => Err(EngineError::Corrupt("the committer stopped before answering".into())),
            },
            Err(mpsc::error::SendError(report)) => apply_one(&self.engine, &report).await,
        }
    }
}

/// Starts the committer of `engine`, handing what its batches lease to
/// `handoff` (none: it leases nothing); it stops when its task is aborted or
/// every [`Reports`] handle is dropped.
pub(crate) fn start(engine: Arc<Engine>, handoff: Option<Handoff>) -> (Reports, JoinHandle<()>) {
    let (queue, receiver) = mpsc::unbounded_channel();
    let task = tokio::spawn(run(Arc::clone(&engine), receiver, handoff));
    (Reports { engine, queue }, task)
}

async fn run(engine: Arc<Engine>, mut receiver: mpsc::UnboundedReceiver<Report>, handoff: Option<Handoff>) {
    let mut waiting: VecDeque<Report> = VecDeque::new();
    loop {
        if waiting.is_empty() {
            match receiver.recv().await {
                Some(report) => waiting.push_back(report),
                None => return,
            }
        }
        while let Ok(report) = receiver.try_recv() {
            waiting.push_back(report);
        }
        let batch = take_batch(&mut waiting, engine.store.batch_limit());
        apply_batch(&engine, batch, handoff.as_ref()).await;
    }
}

/// Up to `limit` reports of distinct runs, oldest first; the rest stay in order.
fn take_batch(waiting: &mut VecDeque<Report>, limit: usize) -> Vec<Report> {
    let mut runs = HashSet::new();
    let mut batch = Vec::new();
    let mut later = VecDeque::new();
    while let Some(report) = waiting.pop_front() {
        if batch.len() < limit && runs.insert(report.run_id().to_owned()) {
            batch.push(report);
        } else {
            later.push_back(report);
        }
    }
    *waiting = later;
    batch
}

/// Applies a batch in one transaction, hands over what it leased, and tells
/// each reporter how it went.
async fn apply_batch(engine: &Engine, mut batch: Vec<Report>, handoff: Option<&Handoff>) {
    let now = engine.now();
    // Places for what the batch queues for at once (a report's decision mostly queues one row,
    // an attempt with a receipt lookup two): the reports' own places first, then free ones;
    // those it leased nothing into go back after it, and rows beyond them are queued for a
    // claim. The rest of the room stays the claim rounds'.
    let mut carried = Places::default();
    for place in batch.iter_mut().filter_map(|report| report.place.take()) {
        carried.join(place);
    }
    let offer = Offer::new(engine, handoff, batch.len().saturating_mul(2), now, carried);
    if let ([report], None) = (batch.as_slice(), &offer) {
        let result = apply_one(engine, report).await;
        wake_for_permits(engine, &batch);
        finish(batch, vec![result]);
        return;
    }
    let started = std::time::Instant::now();
    let lease = offer.as_ref().map(Offer::lease);
    let claims: Vec<Claim> = batch.iter().map(|r| r.claim.clone()).collect();
    // Every decision of the batch spans the one transaction (lock → commit).
    let mut traced: Vec<(RunTrace, Live)> = batch
        .iter()
        .map(|r| {
            let trace = engine.traces.run(r.run_id(), r.note.trace_parent.as_deref());
            let span = engine.decision_span(&trace, &r.event);
            (trace, span)
        })
        .collect();
    let mut told: Vec<Option<Told>> = vec![None; batch.len()];
    let decide = |i: usize, snapshot: &[u8]| {
        let report = &batch[i];
        let (decision, admitted_at) = engine.decide_on(&report.wf, report.run_id(), snapshot, &report.event, now)?;
        told[i] = Some(Told::of(&report.event, &decision.actions, now, admitted_at));
        Ok::<_, EngineError>(decision)
    };
    let outcome = engine.store.apply_fenced_batch_leasing(&claims, &engine.owner, now, lease, decide).await;
    let results = match outcome {
        Ok(batched) => {
            for (report, told) in batch.iter().zip(told.iter_mut()) {
                if let Some(told) = told {
                    let leased = batched.leased.iter().filter(|(item, _)| item.run_id == report.run_id());
                    told.due.take_leased(leased.map(|(item, _)| item.step.as_str()));
                }
            }
            if let Some(offer) = offer {
                offer.hand_over(engine, batched.leased).await;
            }
            Ok(batched.results)
        }
        Err(e) => Err(e),
    };
    let results = match results {
        Ok(outcome) => outcome
            .into_iter()
            .zip(&batch)
            .zip(told)
            .zip(traced.drain(..))
            .map(|(((result, report), told), (trace, span))| {
                let result = result.map(|_| ()).map_err(EngineError::from_store);
                engine.record(After {
                    wf: &report.wf,
                    run_id: report.run_id(),
                    event: &report.event,
                    result: &result,
                    told,
                    elapsed: started.elapsed(),
                    reason: report.note.reason.as_deref(),
                    trace,
                    span,
                });
                result
            })
            .collect(),
        Err(e) => {
            // These spans' decisions did not commit; each report gets its own below.
            for (_, mut span) in traced.drain(..) {
                span.error("the batch failed as a whole");
                span.end();
            }
            tracing::warn!(reports = batch.len(), error = %e, "a batch of reports failed as a whole; applying them one by one");
            let mut results = Vec::with_capacity(batch.len());
            for report in &batch {
                results.push(apply_one(engine, report).await);
            }
            results
        }
    };
    wake_for_permits(engine, &batch);
    finish(batch, results);
}

/// One report in its own transaction (the engine records its metrics).
async fn apply_one(engine: &Engine, report: &Report) -> Result<(), EngineError> {
    engine.apply_claimed(&report.claim, report.run_id(), &report.event, &report.wf, &report.note).await
}

/// Wakes this process's claim rounds when a committed answer freed a permit
/// of a limited connection whose due work waits for one (the round would
/// otherwise look again only [`FULL_RECHECK_MS`] later).
///
/// [`FULL_RECHECK_MS`]: coordinator_store::FULL_RECHECK_MS
fn wake_for_permits(engine: &Engine, batch: &[Report]) {
    if engine.limits.is_empty() {
        return;
    }
    let mut freed = false;
    for report in batch {
        if let Claim::Work(w) = &report.claim
            && let Some(c) = crate::dispatch::remote::connection_of(&report.wf, &w.step)
            && engine.limits.contains_key(c)
            && engine.store.permits_awaited(c)
        {
            engine.store.permit_freed(c);
            freed = true;
        }
    }
    if freed {
        engine.wake.notify_one();
    }
}

fn finish(batch: Vec<Report>, results: Vec<Result<(), EngineError>>) {
    for (report, result) in batch.into_iter().zip(results) {
        // A reporter that stopped waiting has nothing to be told.
        report.done.send(result).ok();
    }
}
