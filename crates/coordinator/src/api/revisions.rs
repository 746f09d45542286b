//! `GET /v1/workflows/{workflow}/revisions` (docs/api.md): what each stored
//! revision of a workflow still holds — whether it is the active one, its
//! runs not ended by state, and when the oldest of them was admitted — so an
//! operator knows when an old revision has drained. Needs `read` or `operate`
//! for the workflow; it counts runs and shows nothing of them.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use coordinator_core::model::runtime::Role;
use coordinator_store::RevisionHolding;
use serde_json::{Map, Value, json};

use super::ApiError;
use super::auth::Caller;
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// A holding as JSON.
pub(crate) fn holding_json(h: &RevisionHolding) -> Value {
    let unfinished: Map<String, Value> = h.unfinished.iter().map(|(s, n)| (s.as_str().to_owned(), json!(n))).collect();
    json!({
        "revision": h.revision,
        "active": h.active,
        "unfinished": unfinished,
        "unfinishedTotal": h.unfinished_total(),
        "oldestUnfinishedAdmittedAt": h.oldest_unfinished,
    })
}

/// `200 {workflow, revisions: […]}`, the active revision first; `404
/// workflow.unknown` when no revision of it is stored.
pub(super) async fn list(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(workflow): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !caller.holds(Role::Read, &workflow) && !caller.holds(Role::Operate, &workflow) {
        return Err(ApiError::forbidden(Role::Read, Some(&workflow)));
    }
    let holdings = engine.store().revision_holdings(Some(&workflow)).await.map_err(EngineError::from)?;
    if holdings.is_empty() {
        return Err(EngineError::UnknownWorkflow(workflow).into());
    }
    let revisions: Vec<Value> = holdings.iter().map(holding_json).collect();
    Ok(Json(json!({"workflow": workflow, "revisions": revisions})))
}
