//! Admission: a request becomes a run with its first transition in one
//! transaction, through the group admission queue ([`crate::engine::admission_queue`])
//! when it is a plain one, else alone under its gate (restore hold, active
//! revision, idempotency key, supplied run id).

use coordinator_core::machine::advance;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::model::run::RunState;
use coordinator_products::Traceparent;
use coordinator_store::{Admission, AdmissionGate, Decision, Guarded, GuardedAdmission, NewRun, RunRow, TriggerEvent};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Engine;
use crate::engine::commit_hooks::{After, Told};
use crate::engine::error::EngineError;

/// The result of an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitResult {
    /// The run id.
    pub run_id: String,
    /// Whether this admission created the run (`false`: the same key, revision and input were admitted before).
    pub created: bool,
    /// The run's state now.
    pub state: RunState,
}

/// What a caller asks to admit (`POST /v1/runs`).
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitRequest {
    /// The workflow.
    pub workflow: String,
    /// The revision the caller expects to be active.
    pub revision: String,
    /// The run input (validated against the workflow's input schema).
    pub input: Value,
    /// The caller's idempotency key, scoped to the caller and workflow.
    pub idempotency_key: Option<String>,
    /// A run id the caller chose (a UUIDv7, see `run_id`); generated when absent.
    pub run_id: Option<String>,
    /// The caller's W3C `traceparent`: the run's trace continues it (ignored unless valid).
    pub trace_parent: Option<String>,
}

impl Engine {
    /// What an admission at `now` may lease to the worker ([`crate::dispatch::handoff::Offer`]).
    fn admission_offer(&self, now: i64) -> Option<crate::dispatch::handoff::Offer> {
        let handoff = self.handoff.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A first decision mostly queues one row; what finds no place waits for a claim.
        crate::dispatch::handoff::Offer::new(
            self,
            handoff.as_ref(),
            2,
            now,
            crate::dispatch::capacity::Places::default(),
        )
    }

    /// [`Store::admit_guarded`], leasing what the first decision queues for at
    /// once to this process's worker when it may (`admission_offer`) and
    /// handing it over; returns the leased rows' steps. The admission goes
    /// in the next batch of admissions ([`crate::engine::admission_queue`]).
    ///
    /// [`Store::admit_guarded`]: coordinator_store::Store::admit_guarded
    async fn admit_offering(
        &self,
        new: &NewRun,
        now: i64,
        first: impl FnOnce() -> Result<Decision, EngineError>,
    ) -> Result<(Guarded, Vec<String>), coordinator_store::StoreError> {
        let offer = self.admission_offer(now);
        let lease = offer.as_ref().map(|o| o.lease());
        let decision = first().map_err(|e| coordinator_store::StoreError::Rejected(e.into()))?;
        let admission = GuardedAdmission { new: new.clone(), decision, lease };
        let admissions = self
            .admissions
            .get_or_init(|| crate::engine::admission_queue::Admissions::start(self.store.clone(), self.owner.clone()));
        let (guarded, leased) = admissions.admit(admission).await?;
        let steps = leased.iter().map(|(item, _)| item.step.clone()).collect();
        if let Some(offer) = offer {
            offer.hand_over(self, leased).await;
        }
        Ok((guarded, steps))
    }

    /// Admits a run of `workflow` at `revision` (which must be the active one):
    /// validates the input, then admits it with its first transition in one
    /// transaction. The same key, revision and input give the same run.
    ///
    /// # Errors
    /// [`EngineError::UnknownWorkflow`], [`EngineError::RevisionNotActive`],
    /// [`EngineError::InputInvalid`], [`EngineError::KeyReused`], or a store failure.
    pub async fn admit(&self, request: AdmitRequest, owner: &str) -> Result<AdmitResult, EngineError> {
        self.admit_with(request, owner, None).await
    }

    /// Reads an admission's gate and refuses as it says: a restore hold, an
    /// unknown workflow, or a revision that is not the active one.
    async fn admission_gate(
        &self,
        workflow: &str,
        owner: &str,
        key: Option<&str>,
        revision: &str,
    ) -> Result<AdmissionGate, EngineError> {
        let gate = self.store.admission_gate(workflow, owner, key).await?;
        if gate.held {
            return Err(EngineError::RestoreHoldPlaced);
        }
        match &gate.active {
            None => Err(EngineError::UnknownWorkflow(workflow.into())),
            Some(active) if active != revision => Err(EngineError::RevisionNotActive { requested: revision.into() }),
            Some(_) => Ok(gate),
        }
    }

    /// [`Engine::admit`], recording the trigger event the admission comes from
    /// (if any) in the same transaction ([`trigger`](crate::engine::trigger)).
    pub(crate) async fn admit_with(
        &self,
        request: AdmitRequest,
        owner: &str,
        event: Option<&TriggerEvent>,
    ) -> Result<AdmitResult, EngineError> {
        let AdmitRequest { workflow, revision, input, idempotency_key, run_id, trace_parent } = request;
        let workflow = workflow.as_str();
        if self.recovery_only {
            return Err(EngineError::RecoveryOnly);
        }
        if self.is_draining() {
            return Err(EngineError::Draining);
        }
        let key_text = idempotency_key.clone();
        let key = key_text.as_deref();
        // A plain admission lets its insert check the gate (`Store::admit_guarded`): the
        // gate is read only when that did not admit, or to tell a refusal apart.
        let mut gate = match (event, &run_id) {
            (None, None) => None,
            _ => Some(self.admission_gate(workflow, owner, key, &revision).await?),
        };
        let wf = match self.workflow(&revision).await {
            Ok(wf) => wf,
            Err(e) if gate.is_some() => return Err(e),
            Err(e) => {
                // The gate's refusal comes first; a revision it lets through must load.
                self.admission_gate(workflow, owner, key, &revision).await?;
                return Err(e);
            }
        };
        let active = revision.clone();
        let violations = wf.check_input(&input);
        if !violations.is_empty() {
            if gate.is_none() {
                self.admission_gate(workflow, owner, key, &revision).await?;
            }
            return Err(EngineError::InputInvalid { pointers: violations.into_iter().map(|v| v.pointer).collect() });
        }
        let search_keys = match wf.search_keys(&input) {
            Ok(keys) => keys,
            Err(e) => {
                if gate.is_none() {
                    self.admission_gate(workflow, owner, key, &revision).await?;
                }
                return Err(e.into());
            }
        };
        let started = std::time::Instant::now();
        let now = self.now();
        let supplied = match &run_id {
            None => None,
            Some(text) => Some(crate::engine::run_id::validate(text, now).map_err(EngineError::RunIdInvalid)?),
        };
        let new = NewRun {
            id: supplied.clone().unwrap_or_else(crate::engine::run_id::generate),
            workflow: workflow.to_owned(),
            revision: active.clone(),
            owner: owner.to_owned(),
            idempotency_key,
            input_digest: input_digest(&input)?,
            admitted_at: now,
            // Only a valid header is kept (an invalid one is ignored, as W3C Trace Context asks).
            trace_parent: trace_parent.as_deref().and_then(Traceparent::parse).map(|t| t.to_string()),
            search_keys,
        };
        if supplied.is_some()
            && let Some(existing) = self.store.load(&new.id).await?
        {
            return same_run(&existing, &new);
        }
        let trace = self.traces.run(&new.id, new.trace_parent.as_deref());
        let span = self.decision_span(&trace, &Event::Admitted);
        let mut told: Option<Told> = None;
        let mut first_state = None;
        // The steps of the rows the admission leased to this process's worker (eager dispatch).
        let mut leased: Vec<String> = Vec::new();
        let first = || -> Result<Decision, EngineError> {
            let mut run = Run::new(&new.id, &active, Instant(now), input);
            let t = advance(&wf, &mut run, &Event::Admitted, Instant(now), &self.settings);
            told = Some(Told::of(&Event::Admitted, &t.actions, now, Instant(now)));
            let decision = self.conclude(&wf, run, None, &t)?;
            first_state = Some(decision.state);
            Ok(decision)
        };
        let admitted = match (event, &gate) {
            (Some(event), _) => self.store.admit_event(&new, event, first).await,
            (None, Some(read)) => match &read.keyed {
                Some(keyed) => keyed.admission_for(&new),
                None => self.store.admit_checked(&new, first).await,
            },
            (None, None) => match self.admit_offering(&new, now, first).await {
                Ok((Guarded::Created, steps)) => {
                    leased = steps;
                    Ok(Admission::Created(new.id.clone()))
                }
                Ok((Guarded::Closed(decision), _)) => {
                    let read = gate.insert(self.admission_gate(workflow, owner, key, &revision).await?);
                    match &read.keyed {
                        Some(keyed) => keyed.admission_for(&new),
                        None => self.store.admit_checked(&new, || Ok::<_, EngineError>(decision)).await,
                    }
                }
                Err(e) => Err(e),
            },
        };
        let admission = match admitted.map_err(EngineError::from_store) {
            Ok(admission) => admission,
            // A concurrent admission may have taken the supplied id first.
            Err(e) if supplied.is_some() => match self.store.load(&new.id).await? {
                Some(existing) => return same_run(&existing, &new),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if supplied.as_deref().is_some_and(|id| id != admission.run_id()) {
            // The key admitted another run id before: this request is not that one.
            return Err(EngineError::KeyReused);
        }
        let created = matches!(admission, Admission::Created(_));
        self.metrics.admission(created);
        if let Some(told) = told.as_mut() {
            // Leased as it was queued: nobody need be woken for it.
            told.due.take_leased(leased.iter().map(String::as_str));
        }
        if created {
            let elapsed = started.elapsed();
            let result = Ok(());
            let event = Event::Admitted;
            self.record(After {
                wf: &wf,
                run_id: &new.id,
                event: &event,
                result: &result,
                told,
                elapsed,
                reason: None,
                trace,
                span,
            });
        }
        // A run created now is in the state its first decision left; an earlier one is read back.
        let state = match (created, first_state) {
            (true, Some(state)) => state,
            _ => self.store.load(admission.run_id()).await?.ok_or(EngineError::RunNotFound)?.state,
        };
        Ok(AdmitResult { run_id: admission.run_id().to_owned(), created, state })
    }
}

/// An admission whose supplied run id exists: the same run when it is the
/// same request (owner, workflow, revision, key and input), else `run-id.taken`.
fn same_run(existing: &RunRow, new: &NewRun) -> Result<AdmitResult, EngineError> {
    let same = existing.owner == new.owner
        && existing.workflow == new.workflow
        && existing.revision == new.revision
        && existing.idempotency_key == new.idempotency_key
        && existing.input_digest == new.input_digest;
    if same {
        Ok(AdmitResult { run_id: existing.id.clone(), created: false, state: existing.state })
    } else {
        Err(EngineError::RunIdTaken)
    }
}

/// `sha256:<hex>` over the input's canonical JSON (RFC 8785), compared on a repeated key.
fn input_digest(input: &Value) -> Result<String, EngineError> {
    let canonical =
        serde_json_canonicalizer::to_vec(input).map_err(|e| EngineError::Corrupt(format!("input digest: {e}")))?;
    let digest = Sha256::digest(&canonical);
    Ok(format!("sha256:{}", hex::encode(digest)))
}
