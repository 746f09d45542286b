//! `GET /v1/runs/{id}/inspection`: the operator's view of a run
//! (docs/reference/recovery.md#inspection), built by
//! [`crate::engine::recovery::inspection`]; it shows no input, command, product
//! response or completion value.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use coordinator_core::model::runtime::Role;

use super::ApiError;
use super::auth::{Caller, run_for};
use crate::engine::Engine;
use crate::engine::recovery::inspection::Inspection;

/// `200` with the inspection, `404 run.unknown`; needs `operate` for the run's workflow.
pub(super) async fn inspect(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
) -> Result<Json<Inspection>, ApiError> {
    let row = run_for(&engine, &caller, &id, Role::Operate).await?;
    Ok(Json(engine.inspect(&row.id).await?))
}
