//! The operator's commands on a run: `cancel`, `retry-same` and `reconcile`
//! (docs/reference/recovery.md#settling-an-unknown-effect,
//! docs/reference/runs.md#cancellation), each an event the state machine
//! decides.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use coordinator_core::machine::event::Event;
use coordinator_core::model::runtime::Role;
use serde_json::json;

use super::ApiError;
use super::auth::{Caller, run_for};
use super::code::Code;
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// `POST /v1/runs/{id}/cancel`.
pub(super) async fn cancel(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    operate(&engine, &caller, &id, Event::CancelRequested).await
}

/// `POST /v1/runs/{id}/steps/{step}/retry-same`.
pub(super) async fn retry_same(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path((id, step)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    operate(&engine, &caller, &id, Event::RetrySameRequested { step }).await
}

/// `POST /v1/runs/{id}/steps/{step}/reconcile`.
pub(super) async fn reconcile(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path((id, step)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    operate(&engine, &caller, &id, Event::ReconcileRequested { step }).await
}

/// An operator's command as an event: `202` with the run's state when applied,
/// `200` with the reason when there was nothing to do (a cancel of an ended
/// run), `409` with the rule's code when the rules refuse it. Needs `operate`
/// for the run's workflow. The journal records the caller as the actor.
async fn operate(engine: &Engine, caller: &Caller, id: &str, event: Event) -> Result<Response, ApiError> {
    // From here on the run's own spelling of its id (the path may spell the UUID in upper case).
    let row = run_for(engine, caller, id, Role::Operate).await?;
    let id = row.id.as_str();
    match engine.handle_as(id, &event, engine.now(), caller.subject()).await {
        Ok(()) => {
            let view = engine.view(id).await?;
            Ok((StatusCode::ACCEPTED, Json(json!({"runId": id, "state": view.state.as_str()}))).into_response())
        }
        Err(EngineError::Ignored(reason)) => {
            let view = engine.view(id).await?;
            Ok((StatusCode::OK, Json(json!({"runId": id, "state": view.state.as_str(), "note": reason})))
                .into_response())
        }
        Err(EngineError::Refused { code }) => {
            let message = format!("the rules do not allow this now ({code})");
            Err(ApiError::new(Code::of_refusal(&code), message))
        }
        Err(other) => Err(other.into()),
    }
}
