//! `POST /v1/events/{workflow}/{trigger}` (docs/reference/runs.md#admission): a
//! product's signed event admits a run of the workflow's active revision.
//! Public in the bearer-token sense: the caller is the product, authenticated
//! by the HMAC signature of the body (`Coordinator-Signature`), not by a token.
//! The run is owned by subject `trigger:<connection>`. [`crate::engine::trigger`]
//! holds the rules; this module maps them to statuses and codes.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use coordinator_core::machine::compiled::describe;
use coordinator_core::machine::trigger::TriggerError;
use serde_json::json;

use super::{ApiError, Route, Verb};
use coordinator_products::Traceparent;

use super::code::Code;
use crate::engine::Engine;
use crate::engine::trigger::EventError;
use coordinator_core::signature::HEADER;

/// The largest event body accepted.
const EVENT_LIMIT: usize = 256 << 10;

/// The route, with its own body limit.
pub(super) fn route() -> Route {
    let (endpoint, handler) = super::route(Verb::Post, "/v1/events/{workflow}/{trigger}", receive);
    (endpoint, handler.layer(DefaultBodyLimit::max(EVENT_LIMIT)))
}

/// `201 {runId, state}` for a new run; `200` with the same run for an event
/// id (or idempotency key) seen before.
async fn receive(
    State(engine): State<Arc<Engine>>,
    Path((workflow, trigger)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(Code::RequestTooLarge, format!("an event may have at most {EVENT_LIMIT} bytes"))
        }
        _ => ApiError::bad_request("the event body could not be read"),
    })?;
    // A header that is not visible ASCII is treated as malformed by `signature`.
    let header = headers.get(HEADER).map(|v| v.to_str().unwrap_or("\u{0}"));
    let trace_parent = headers.get(Traceparent::HEADER).and_then(|v| v.to_str().ok());
    let admitted = engine.admit_event(&workflow, &trigger, header, &body, trace_parent).await.map_err(refusal)?;
    let status = if admitted.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({"runId": admitted.run_id, "state": admitted.state.as_str()}))).into_response())
}

fn refusal(e: EventError) -> ApiError {
    let message = e.to_string();
    match e {
        EventError::UnknownTrigger { .. } => ApiError::new(Code::TriggerUnknown, message),
        EventError::Signature(_) => ApiError::new(Code::EventSignatureInvalid, message),
        EventError::Body(_) => ApiError::bad_request(message),
        EventError::Trigger(t) => trigger_refusal(t),
        EventError::Engine(inner) => inner.into(),
    }
}

fn trigger_refusal(e: TriggerError) -> ApiError {
    let unprocessable = |code, message: String| ApiError::new(code, message);
    match e {
        // Checked by `crate::engine::trigger` before; kept exhaustive.
        TriggerError::Unknown(_) => ApiError::new(Code::TriggerUnknown, e.to_string()),
        TriggerError::EventId(_) => ApiError::bad_request(e.to_string()),
        TriggerError::EventInvalid { ref violations, .. } => {
            let message = format!("{e}: {}", describe(violations));
            let pointers = violations.iter().map(|v| v.pointer.clone()).collect();
            ApiError { pointers: Some(pointers), ..unprocessable(Code::EventInvalid, message) }
        }
        TriggerError::MappingFailed { .. } => unprocessable(Code::EventMappingFailed, e.to_string()),
        TriggerError::InputInvalid { ref pointers, .. } => {
            ApiError { pointers: Some(pointers.clone()), ..unprocessable(Code::InputInvalid, e.to_string()) }
        }
    }
}
