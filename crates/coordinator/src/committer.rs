//! Group commit of the worker's reports: fired timers and product answers
//! are queued here and applied many to a transaction
//! (`Store::apply_fenced_batch`), each with every rule of a single fenced
//! apply — the run locked, the claim's lease checked, the decision made on the
//! locked snapshot, persisted, committed — before its reporter hears back.
//!
//! One committer task per worker takes whatever has queued while the previous
//! transaction committed (up to the store's `batch_limit`): under light load a batch is
//! one report and costs what a single apply costs; under heavy load the
//! commits, round trips and fsyncs are shared. A run appears at most once per
//! batch; its later reports wait for the next batch, in the order they came.
//! When a batch fails as a whole (nothing was written), its reports are
//! applied one by one, so one bad report cannot hold the others back.
//!
//! It must not decide anything of its own: decisions are the engine's
//! (`Engine::decide_on`), after-commit metrics are recorded as for a single
//! apply.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_store::Claim;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::after::{After, Note, Told};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::telemetry::traces::{Live, RunTrace};

/// One report waiting for its transaction.
struct Report {
    claim: Claim,
    event: Event,
    wf: Arc<Workflow>,
    note: Note,
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
    /// that went. If the committer has stopped, it is applied on its own.
    pub(crate) async fn apply(
        &self,
        claim: Claim,
        event: Event,
        wf: Arc<Workflow>,
        note: Note,
    ) -> Result<(), EngineError> {
        let (done, result) = oneshot::channel();
        match self.queue.send(Report { claim, event, wf, note, done }) {
            Ok(()) => match result.await {
                Ok(result) => result,
                Err(_) => Err(EngineError::Corrupt("the committer stopped before answering".into())),
            },
            Err(mpsc::error::SendError(report)) => apply_one(&self.engine, &report).await,
        }
    }
}

/// Starts the committer of `engine`; it stops when its task is aborted or
/// every [`Reports`] handle is dropped.
pub(crate) fn start(engine: Arc<Engine>) -> (Reports, JoinHandle<()>) {
    let (queue, receiver) = mpsc::unbounded_channel();
    let task = tokio::spawn(run(Arc::clone(&engine), receiver));
    (Reports { engine, queue }, task)
}

async fn run(engine: Arc<Engine>, mut receiver: mpsc::UnboundedReceiver<Report>) {
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
        apply_batch(&engine, batch).await;
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

/// Applies a batch in one transaction and tells each reporter how it went.
async fn apply_batch(engine: &Engine, batch: Vec<Report>) {
    if let [report] = batch.as_slice() {
        let result = apply_one(engine, report).await;
        finish(batch, vec![result]);
        return;
    }
    let started = std::time::Instant::now();
    let now = engine.now();
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
    let outcome = engine.store.apply_fenced_batch(&claims, &engine.owner, now, decide).await;
    let results = match outcome {
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
    finish(batch, results);
}

/// One report in its own transaction (the engine records its metrics).
async fn apply_one(engine: &Engine, report: &Report) -> Result<(), EngineError> {
    engine.apply_claimed(&report.claim, report.run_id(), &report.event, &report.wf, &report.note).await
}

fn finish(batch: Vec<Report>, results: Vec<Result<(), EngineError>>) {
    for (report, result) in batch.into_iter().zip(results) {
        // A reporter that stopped waiting has nothing to be told.
        report.done.send(result).ok();
    }
}
