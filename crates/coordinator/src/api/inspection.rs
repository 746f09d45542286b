//! `GET /v1/runs/{id}/inspection`: the operator's view of a run (SPEC §3),
//! built by [`crate::inspection`]; it shows no input, command, product
//! response or completion value.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};

use super::ApiError;
use crate::engine::Engine;
use crate::inspection::Inspection;

/// `200` with the inspection, `404 run.unknown`.
pub(super) async fn inspect(
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
) -> Result<Json<Inspection>, ApiError> {
    Ok(Json(engine.inspect(&id).await?))
}
