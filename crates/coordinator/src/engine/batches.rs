//! Durable batches (docs/api.md#batches): an operator's `reconcile`,
//! `retry-same` or `cancel` over every run a filter matched, started by one
//! request and worked through by whichever process holds the batch's lease
//! ([`Engine::work_batches`], a task of every `serve` and `dev`).
//!
//! Each run is acted on through the machine exactly as a single operator
//! command would be — the batch's creator as the actor, `batch {id}: {reason}`
//! journaled with it — and its batch row is marked in the decision's own
//! transaction ([`Store::apply_for_batch`]), so no run is acted on twice
//! whatever is killed when. What the rules refuse is recorded with the
//! rule's code. A `reconcile` or `retry-same` names the step whose effect is
//! unknown (the run's attention step). The commands only decide: the work
//! they queue is sent by the dispatcher under each connection's limits.
//!
//! [`Store::apply_for_batch`]: coordinator_store::Store::apply_for_batch

use std::time::Duration;

use std::collections::BTreeMap;

use coordinator_core::machine::event::Event;
use coordinator_core::machine::time::Instant;
use coordinator_store::{Cursor, ListFilter, NewBatch, Started, StoreError};

use super::Engine;
use super::commit_hooks::Note;
use super::error::EngineError;

/// How long a process's lease on a batch lasts without renewal.
pub const BATCH_LEASE_MS: i64 = 15_000;
/// Runs acted on between two renewals of the lease.
const CHUNK: u32 = 50;
/// How long the task waits when no batch needs a process.
const IDLE: Duration = Duration::from_millis(500);

/// What a batch does to each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchAction {
    /// Settle the unknown effect from the product's own records.
    Reconcile,
    /// Send the saved command of the unknown step again, same key.
    RetrySame,
    /// Cancel the run.
    Cancel,
}

impl BatchAction {
    /// Every action, in the API's spelling.
    pub const ALL: [BatchAction; 3] = [BatchAction::Reconcile, BatchAction::RetrySame, BatchAction::Cancel];

    /// `reconcile`, `retry-same`, `cancel`.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchAction::Reconcile => "reconcile",
            BatchAction::RetrySame => "retry-same",
            BatchAction::Cancel => "cancel",
        }
    }

    /// The action spelled `text`.
    pub fn parse(text: &str) -> Option<BatchAction> {
        BatchAction::ALL.into_iter().find(|a| a.as_str() == text)
    }

    /// The operator event for a run whose unknown step is `step`; `None`
    /// when the action needs a step and the run has none.
    pub fn event(self, step: Option<&str>) -> Option<Event> {
        match self {
            BatchAction::Cancel => Some(Event::CancelRequested),
            BatchAction::Reconcile => step.map(|s| Event::ReconcileRequested { step: s.to_owned() }),
            BatchAction::RetrySame => step.map(|s| Event::RetrySameRequested { step: s.to_owned() }),
        }
    }
}

/// The code recorded for a run whose action needs an unknown step it does not have.
pub const NO_UNKNOWN_STEP: &str = "run.no-unknown-effect";
/// The code recorded for a run the rules had nothing to do for (a cancel of an ended run).
pub const NOTHING_TO_DO: &str = "nothing-to-do";
/// The code recorded for a run that no longer exists (removed by retention).
pub const RUN_GONE: &str = "run.unknown";

/// The most runs a dry run previews (it counts them all).
pub const MOST_PREVIEWED: u64 = 1_000;
/// The most runs a dry run lists one by one.
const MOST_LISTED: usize = 100;

/// What a batch would do, decided by the machine on each run as it stands, nothing written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DryRun {
    /// The runs the filter matches now.
    pub matched: u64,
    /// The runs previewed (the newest, at most [`MOST_PREVIEWED`]).
    pub previewed: u64,
    /// Of those, the runs the command would be applied to.
    pub would_apply: u64,
    /// Of those, the runs it would not, by the rule's code.
    pub would_refuse: BTreeMap<String, u64>,
    /// The first previewed runs: id, `None` when it would apply, else the code.
    pub runs: Vec<(String, Option<String>)>,
}

/// A batch about to start.
#[derive(Debug, Clone)]
pub struct BatchRequest {
    /// What to do to each run.
    pub action: BatchAction,
    /// Which runs (already checked against the caller's roles).
    pub filter: ListFilter,
    /// The filter as the caller wrote it, shown back.
    pub filter_json: String,
    /// Why, journaled with each command.
    pub reason: String,
}

impl Engine {
    /// Starts a batch as `by`; its id and the runs it matched.
    ///
    /// # Errors
    /// [`EngineError::BatchTooLarge`] when more runs match than a batch may
    /// hold (nothing is written); a store failure.
    pub async fn start_batch(&self, request: &BatchRequest, by: &str) -> Result<(String, u64), EngineError> {
        let id = crate::engine::run_id::generate();
        let new = NewBatch {
            id: &id,
            action: request.action.as_str(),
            filter_json: &request.filter_json,
            filter: &request.filter,
            reason: &request.reason,
            by,
            at: self.now(),
        };
        match self.store.start_batch(&new).await? {
            Started::Matched(matched) => {
                tracing::info!(batch = %id, action = request.action.as_str(), matched, actor = by, "batch started");
                self.wake.notify_one();
                Ok((id, matched))
            }
            Started::TooMany => Err(EngineError::BatchTooLarge),
        }
    }

    /// What `request` would do to each run it matches now (see [`DryRun`]).
    ///
    /// # Errors
    /// A store failure, or a run whose revision cannot be loaded.
    pub async fn dry_run_batch(&self, request: &BatchRequest) -> Result<DryRun, EngineError> {
        use crate::engine::recovery::preview::{Preview, preview};
        let mut dry = DryRun {
            matched: self.store.count_matching(&request.filter, coordinator_store::MOST_BATCH_RUNS).await?,
            ..DryRun::default()
        };
        let now = Instant(self.now());
        let mut cursor: Option<Cursor> = None;
        while dry.previewed < MOST_PREVIEWED {
            let page = self.store.list_runs_newest(&request.filter, cursor.as_ref(), 100).await?;
            for row in &page.runs {
                if dry.previewed >= MOST_PREVIEWED {
                    break;
                }
                dry.previewed += 1;
                let code = match request.action.event(row.attention_step.as_deref()) {
                    None => Some(NO_UNKNOWN_STEP.to_owned()),
                    Some(event) => {
                        let (run, wf) = self.opened(row).await?;
                        match preview(&wf, &run, now, &self.settings, &event) {
                            Preview::Applies { .. } => None,
                            Preview::Refused { code, .. } => Some(code),
                            Preview::Ignored { .. } => Some(NOTHING_TO_DO.to_owned()),
                        }
                    }
                };
                match &code {
                    None => dry.would_apply += 1,
                    Some(code) => *dry.would_refuse.entry(code.clone()).or_insert(0) += 1,
                }
                if dry.runs.len() < MOST_LISTED {
                    dry.runs.push((row.id.clone(), code));
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        Ok(dry)
    }

    /// Works batches until the process drains: takes the oldest one no live
    /// process works, acts on its runs a chunk at a time, renewing the lease
    /// between chunks, and ends it once every run has an outcome. A failure
    /// is logged and tried again after a pause; a lost lease or a cancel
    /// stops the batch here (another process, or nobody, goes on).
    pub async fn work_batches(&self) {
        if self.is_recovery_only() {
            return;
        }
        while !self.is_draining() {
            match self.work_one_batch().await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(IDLE).await,
                Err(e) => {
                    tracing::warn!(error = %e, "working a batch failed; trying again");
                    tokio::time::sleep(IDLE).await;
                }
            }
        }
        if let Err(e) = self.store.release_batches(&self.owner).await {
            tracing::warn!(error = %e, "giving back the batch leases failed; they run out by themselves");
        }
    }

    /// One batch from lease to lease end; whether there was one.
    async fn work_one_batch(&self) -> Result<bool, EngineError> {
        let now = self.now();
        let Some(id) = self.store.claim_batch(&self.owner, now, now + BATCH_LEASE_MS).await? else { return Ok(false) };
        let Some(batch) = self.store.batch(&id).await? else { return Ok(true) };
        let Some(action) = BatchAction::parse(&batch.action) else {
            return Err(EngineError::Corrupt(format!("batch {id} has an unknown action")));
        };
        let remark = format!("batch {id}: {}", batch.reason);
        loop {
            if self.is_draining() || !self.store.renew_batch(&id, &self.owner, self.now() + BATCH_LEASE_MS).await? {
                return Ok(true);
            }
            let pending = self.store.batch_pending(&id, CHUNK).await?;
            if pending.is_empty() {
                self.store.finish_batch(&id, &self.owner, self.now()).await?;
                tracing::info!(batch = %id, "batch done");
                return Ok(true);
            }
            for run_id in pending {
                if self.is_draining() {
                    return Ok(true);
                }
                self.act(&id, action, &run_id, &batch.created_by, &remark).await?;
            }
        }
    }

    /// Applies the batch's command to one run, or records why not.
    async fn act(
        &self,
        id: &str,
        action: BatchAction,
        run_id: &str,
        by: &str,
        remark: &str,
    ) -> Result<(), EngineError> {
        let now = self.now();
        let Some(row) = self.store.load(run_id).await? else {
            self.store.batch_refused(id, run_id, RUN_GONE, now).await?;
            return Ok(());
        };
        let Some(event) = action.event(row.attention_step.as_deref()) else {
            self.store.batch_refused(id, run_id, NO_UNKNOWN_STEP, now).await?;
            return Ok(());
        };
        let wf = self.workflow(&row.revision).await?;
        let note = Note {
            trace_parent: row.trace_parent.clone(),
            remark: Some(remark.to_owned()),
            batch: Some(id.to_owned()),
            ..Note::default()
        };
        match self.apply_recorded(None, &row.id, &event, now, &wf, Some(by), &note).await {
            Ok(()) => Ok(()),
            Err(EngineError::Refused { code }) => {
                self.store.batch_refused(id, run_id, &code, now).await.map(drop).map_err(Into::into)
            }
            Err(EngineError::Ignored(_)) => {
                self.store.batch_refused(id, run_id, NOTHING_TO_DO, now).await.map(drop).map_err(Into::into)
            }
            // Acted on before (by this batch, in a process that then lost its lease).
            Err(EngineError::Store(StoreError::Conflict { .. })) => Ok(()),
            Err(other) => Err(other),
        }
    }
}
