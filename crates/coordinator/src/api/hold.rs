//! `GET|POST|DELETE /v1/restore-hold`
//! (docs/reference/recovery.md#the-restore-hold): show, place and release the
//! deployment's restore hold. The hold concerns every workflow, so these need
//! the `operate` role for every workflow (a grant with workflow `*`). Placing
//! and releasing take an optional body `{"reason": "…"}`, kept with the hold
//! and journaled with the change.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use coordinator_core::model::runtime::Role;
use serde_json::{Value, json};

use super::ApiError;
use super::auth::Caller;
use crate::engine::Engine;
use crate::engine::recovery::restore_hold::HoldStatus;

fn require_operate_everywhere(caller: &Caller) -> Result<(), ApiError> {
    if caller.holds_everywhere(Role::Operate) { Ok(()) } else { Err(ApiError::forbidden(Role::Operate, Some("*"))) }
}

fn body(status: &HoldStatus) -> Json<Value> {
    Json(json!({
        "placed": status.placed,
        "placedAt": status.placed_at,
        "placedBy": status.placed_by,
        "reason": status.reason,
        "heldRuns": status.held_runs,
    }))
}

/// `GET /v1/restore-hold`.
pub(super) async fn show(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Json<Value>, ApiError> {
    require_operate_everywhere(&caller)?;
    Ok(body(&engine.restore_hold().await?))
}

/// The largest body placing or releasing accepts.
const BODY_LIMIT: usize = 8 << 10;
/// What a body must look like.
const SHAPE: &str =
    "send no body, or a JSON object {\"reason\": \"why\"}; a reason, when given, is 1 to 500 characters";

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    #[serde(default)]
    reason: Option<String>,
}

/// The reason a body gives: none for an empty body or none given; else
/// the body must be `{"reason"}` with a usable reason.
async fn reason_of(headers: &HeaderMap, body: Body) -> Result<Option<String>, ApiError> {
    let bytes = super::body::within(body, BODY_LIMIT).await?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if !super::body::is_json(headers) {
        return Err(ApiError::bad_request(SHAPE));
    }
    let body: ReasonBody = super::decode::object(&bytes).ok_or_else(|| ApiError::bad_request(SHAPE))?;
    match body.reason {
        None => Ok(None),
        Some(reason) if crate::engine::connections::reason_ok(&reason) => {
            Ok(Some(crate::engine::connections::reason_kept(&reason).to_owned()))
        }
        Some(_) => Err(ApiError::bad_request(SHAPE)),
    }
}

/// `POST /v1/restore-hold`: places it (idempotent).
pub(super) async fn place(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    request: Body,
) -> Result<Json<Value>, ApiError> {
    require_operate_everywhere(&caller)?;
    let reason = reason_of(&headers, request).await?;
    Ok(body(&engine.place_restore_hold(caller.subject(), reason.as_deref()).await?))
}

/// `DELETE /v1/restore-hold`: releases it (idempotent).
pub(super) async fn release(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    request: Body,
) -> Result<Json<Value>, ApiError> {
    require_operate_everywhere(&caller)?;
    let reason = reason_of(&headers, request).await?;
    Ok(body(&engine.release_restore_hold(caller.subject(), reason.as_deref()).await?))
}
