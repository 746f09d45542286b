//! Admission (`POST /v1/runs`), listing (`GET /v1/runs`) and reading a run
//! (`GET /v1/runs/{id}`).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use coordinator_core::model::run::RunState;
use coordinator_store::{Cursor, RunFilter};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, DEV_OWNER};
use crate::engine::Engine;
use crate::error::EngineError;

/// `POST /v1/runs` body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AdmitBody {
    workflow: String,
    revision: String,
    input: Value,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// `201` with a new run, `200` with the run the same key, revision and input admitted before.
pub(super) async fn admit(
    State(engine): State<Arc<Engine>>,
    body: Result<Json<AdmitBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    // The body's own error text could quote the input: answer with a fixed message.
    let Json(body) =
        body.map_err(|_| ApiError::bad_request("the body must be {workflow, revision, input, idempotencyKey}"))?;
    let admitted = engine.admit(&body.workflow, &body.revision, body.input, body.idempotency_key, DEV_OWNER).await?;
    let status = if admitted.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({"runId": admitted.run_id, "state": admitted.state.as_str()}))).into_response())
}

/// A run as its owner sees it: state, outcome, the published output, the failure.
pub(super) async fn read(State(engine): State<Arc<Engine>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let view = engine.view(&id).await?;
    Ok(Json(json!({
        "runId": view.run_id,
        "workflow": view.workflow,
        "revision": view.revision,
        "state": view.state.as_str(),
        "outcome": view.outcome,
        "output": view.output,
        "failure": view.failure.map(|f| json!({"code": f.code, "step": f.step, "message": f.message})),
    })))
}

/// `GET /v1/runs` query: filters and the page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    workflow: Option<String>,
    state: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Runs of the caller, oldest first, with an opaque cursor for the next page.
pub(super) async fn list(
    State(engine): State<Arc<Engine>>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|_| ApiError::bad_request("filters: workflow, state, limit (1-500), cursor"))?;
    let state =
        match query.state {
            None => None,
            Some(text) => Some(serde_json::from_value::<RunState>(json!(text)).map_err(|_| {
                ApiError::bad_request("state must be one of the eight run states (running, attention, …)")
            })?),
        };
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 500"));
    }
    let cursor = match query.cursor {
        None => None,
        Some(text) => {
            Some(parse_cursor(&text).ok_or_else(|| ApiError::bad_request("cursor is not one this API gave"))?)
        }
    };
    let filter = RunFilter { workflow: query.workflow, state, owner: Some(DEV_OWNER.to_owned()) };
    let page = engine.store().list_runs(&filter, cursor.as_ref(), limit).await.map_err(EngineError::from)?;
    let runs: Vec<Value> = page
        .runs
        .iter()
        .map(|r| {
            json!({"runId": r.id, "workflow": r.workflow, "revision": r.revision, "state": r.state.as_str(), "admittedAt": r.admitted_at})
        })
        .collect();
    let next = page.next.map(|c| format!("{}.{}", c.admitted_at, c.id));
    Ok(Json(json!({"runs": runs, "next": next})))
}

/// Reads a cursor `<admittedAt>.<runId>`.
fn parse_cursor(text: &str) -> Option<Cursor> {
    let (at, id) = text.split_once('.')?;
    let admitted_at = at.parse().ok()?;
    (!id.is_empty()).then(|| Cursor { admitted_at, id: id.to_owned() })
}
