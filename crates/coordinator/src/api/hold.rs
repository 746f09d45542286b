//! `GET|POST|DELETE /v1/restore-hold`
//! (docs/reference/recovery.md#the-restore-hold): show, place and release the
//! deployment's restore hold. The hold concerns every workflow, so these need
//! the `operate` role for every workflow (a grant with workflow `*`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
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

/// `POST /v1/restore-hold`: places it (idempotent).
pub(super) async fn place(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Json<Value>, ApiError> {
    require_operate_everywhere(&caller)?;
    Ok(body(&engine.place_restore_hold(caller.subject()).await?))
}

/// `DELETE /v1/restore-hold`: releases it (idempotent).
pub(super) async fn release(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Json<Value>, ApiError> {
    require_operate_everywhere(&caller)?;
    Ok(body(&engine.release_restore_hold(caller.subject()).await?))
}
