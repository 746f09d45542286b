//! Admitting runs from signed product events (docs/reference/runs.md#admission,
//! `POST /v1/events/{workflow}/{trigger}`), in this order:
//!
//! 1. the trigger of the workflow's ACTIVE revision (`trigger.unknown`);
//! 2. the signature over the raw body with the trigger's connection's
//!    `eventSigningSecret` ([`signature`]; `event.signature-invalid`);
//! 3. the body is a JSON object with an `eventId` (`request.invalid`);
//! 4. an event id seen before for this workflow and trigger answers with the
//!    run it admitted (nothing is computed or written);
//! 5. the event's schema, the trigger's mappings and the input
//!    ([`machine::trigger`]; `event.invalid`, `event.mapping-failed`, `input.invalid`);
//! 6. the admission, with the event recorded in its transaction
//!    ([`Store::admit_event`]), owned by subject `trigger:<connection>`.
//!
//! Event schemas are not pinned in packages: events of the built-in products
//! are validated against this coordinator's built-in catalog (names are
//! versioned, and a project cannot redefine a built-in product); events of a
//! project's own catalog are not schema-validated (only `eventId` is required).
//!
//! [`machine::trigger`]: coordinator_core::machine::trigger
//! [`Store::admit_event`]: coordinator_store::Store::admit_event

use std::collections::HashMap;

use coordinator_core::machine::trigger::{self, TriggerError};
use coordinator_products::Secret;
use coordinator_store::TriggerEvent;
use serde_json::Value;

use crate::auth::access::TRIGGER_SUBJECT_PREFIX;
use crate::engine::error::EngineError;
use crate::engine::{AdmitRequest, AdmitResult, Engine, now_ms};
use coordinator_core::signature::{self, SignatureProblem};

/// Why an event admitted nothing. Messages never show the body or a secret.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// No active workflow has this trigger (`404 trigger.unknown`).
    #[error("workflow `{workflow}` has no trigger `{trigger}` in its active revision")]
    UnknownTrigger {
        /// The workflow.
        workflow: String,
        /// The trigger.
        trigger: String,
    },
    /// The signature does not verify (`401 event.signature-invalid`).
    #[error("{0}")]
    Signature(#[from] SignatureProblem),
    /// The body is not a JSON object with a usable `eventId` (`400 request.invalid`).
    #[error("{0}")]
    Body(String),
    /// The event, its mappings or the input they compute are refused (`422`).
    #[error(transparent)]
    Trigger(TriggerError),
    /// The admission itself failed (its codes are those of `POST /v1/runs`).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The subject that owns the runs a trigger on `connection` admits.
pub fn trigger_subject(connection: &str) -> String {
    format!("{TRIGGER_SUBJECT_PREFIX}{connection}")
}

/// Step 3: the body as a JSON document with a usable `eventId`, returned
/// with it. Pure, so the fuzz targets read bodies exactly as the API does.
///
/// # Errors
/// [`EventError::Body`], whose message never quotes the body.
pub fn read_event(body: &[u8]) -> Result<(Value, String), EventError> {
    let event: Value =
        serde_json::from_slice(body).map_err(|_| EventError::Body("the body is not a JSON document".to_owned()))?;
    let event_id = trigger::event_id(&event).map_err(|e| EventError::Body(e.to_string()))?.to_owned();
    Ok((event, event_id))
}

impl Engine {
    /// The same engine with each connection's `eventSigningSecret` (connection
    /// name → secret). A trigger whose connection has none admits nothing.
    #[must_use]
    pub fn with_event_secrets(mut self, secrets: HashMap<String, Secret>) -> Self {
        self.event_secrets = secrets;
        self
    }

    /// Admits a run of `workflow` from trigger `name`'s signed event: `header`
    /// is the `Coordinator-Signature` value, `body` the raw request body.
    ///
    /// # Errors
    /// [`EventError`], in the order of the module doc.
    pub async fn admit_event(
        &self,
        workflow: &str,
        name: &str,
        header: Option<&str>,
        body: &[u8],
        trace_parent: Option<&str>,
    ) -> Result<AdmitResult, EventError> {
        let unknown = || EventError::UnknownTrigger { workflow: workflow.to_owned(), trigger: name.to_owned() };
        let active = self.store.active(workflow).await.map_err(EngineError::from)?.ok_or_else(unknown)?;
        let wf = self.workflow(&active).await?;
        let trigger = wf.trigger(name).ok_or_else(unknown)?;
        let secret = self
            .event_secrets
            .get(&trigger.connection)
            .ok_or_else(|| SignatureProblem::NoSecret(trigger.connection.clone()))?;
        // Freshness is the sender's clock against the system's, not a decision: not `Engine::now`.
        signature::verify(header, body, secret.expose().as_bytes(), now_ms().div_euclid(1000))?;

        let (event, event_id) = read_event(body)?;
        let record = TriggerEvent { trigger: name.to_owned(), event_id };
        if let Some(run_id) = self.store.event_run(workflow, &record).await.map_err(EngineError::from)? {
            let row = self.store.load(&run_id).await.map_err(EngineError::from)?.ok_or(EngineError::RunNotFound)?;
            return Ok(AdmitResult { run_id: row.id, created: false, state: row.state });
        }
        let admission = wf.trigger_admission(name, &event).map_err(EventError::Trigger)?;
        let request = AdmitRequest {
            workflow: workflow.to_owned(),
            revision: active,
            input: admission.input,
            idempotency_key: Some(admission.idempotency_key),
            run_id: None,
            trace_parent: trace_parent.map(str::to_owned),
        };
        let owner = trigger_subject(&trigger.connection);
        Ok(self.admit_with(request, &owner, Some(&record)).await?)
    }
}
