//! Admission (`POST /v1/runs`, role `admit`; the caller owns the run),
//! listing (`GET /v1/runs`: the caller's own runs of workflows it reads and
//! every run of workflows it operates) and reading a run (`GET
//! /v1/runs/{id}`, `read` on an own run or `operate`).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use coordinator_core::model::run::RunState;
use coordinator_core::model::runtime::Role;
use coordinator_products::Traceparent;
use coordinator_store::{Cursor, RunFilter, RunRow};
use serde_json::{Value, json};

use super::auth::{Caller, run_for};
use super::{ApiError, decode};
use crate::engine::error::EngineError;
use crate::engine::{AdmitRequest, Engine};

/// `201` with a new run, `200` with the run the same key, revision and input admitted before.
pub(super) async fn admit(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if !super::body::is_json(&headers) {
        return Err(ApiError::bad_request(decode::ADMISSION_SHAPE));
    }
    let bytes = super::body::within(body, decode::ADMISSION_LIMIT).await?;
    let body = decode::admission(&bytes)?;
    if !caller.holds(Role::Admit, &body.workflow) {
        return Err(ApiError::forbidden(Role::Admit, Some(&body.workflow)));
    }
    let request = AdmitRequest {
        workflow: body.workflow,
        revision: body.revision,
        input: body.input,
        idempotency_key: body.idempotency_key,
        run_id: body.run_id,
        trace_parent: headers.get(Traceparent::HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned),
    };
    let admitted = engine.admit(request, caller.subject()).await?;
    let status = if admitted.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({"runId": admitted.run_id, "state": admitted.state.as_str()}))).into_response())
}

/// A run as its owner sees it: state, outcome, the published output, the failure.
pub(super) async fn read(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = run_for(&engine, &caller, &id, Role::Read).await?;
    let view = engine.view(&row.id).await?;
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

/// `GET /v1/runs` query: filters and the page; `key.NAME=VALUE` filters by a
/// search key (any number, each exact).
#[derive(Debug, Default)]
pub(super) struct ListQuery {
    workflow: Option<String>,
    state: Option<RunState>,
    limit: Option<u32>,
    cursor: Option<Cursor>,
    idempotency_key: Option<String>,
    keys: Vec<(String, String)>,
}

/// What `GET /v1/runs` accepts, for a 400 that names the way out.
const LIST_FILTERS: &str =
    "filters: workflow, state, limit (1-500), cursor, idempotencyKey, key.NAME=VALUE (a search key, exact)";

impl ListQuery {
    /// Reads the query's pairs; an unknown or repeated filter is refused, by name.
    fn parse(pairs: Vec<(String, String)>) -> Result<ListQuery, ApiError> {
        let mut query = ListQuery::default();
        let once = |slot: bool, name: &str| {
            if slot {
                Err(ApiError::bad_request(format!("`{name}` is given twice; give each filter once")))
            } else {
                Ok(())
            }
        };
        for (name, value) in pairs {
            match name.as_str() {
                "workflow" => {
                    once(query.workflow.is_some(), &name)?;
                    query.workflow = Some(value);
                }
                "state" => {
                    once(query.state.is_some(), &name)?;
                    query.state = Some(serde_json::from_value::<RunState>(json!(value)).map_err(|_| {
                        ApiError::bad_request("state must be one of the eight run states (running, attention, …)")
                    })?);
                }
                "limit" => {
                    once(query.limit.is_some(), &name)?;
                    let limit = value.parse::<u32>().ok().filter(|l| (1..=500).contains(l));
                    query.limit = Some(limit.ok_or_else(|| ApiError::bad_request("limit must be between 1 and 500"))?);
                }
                "cursor" => {
                    once(query.cursor.is_some(), &name)?;
                    // An empty cursor is the first page, as no cursor is.
                    if !value.is_empty() {
                        let cursor = parse_cursor(&value);
                        query.cursor =
                            Some(cursor.ok_or_else(|| ApiError::bad_request("cursor is not one this API gave"))?);
                    }
                }
                "idempotencyKey" => {
                    once(query.idempotency_key.is_some(), &name)?;
                    query.idempotency_key = Some(value);
                }
                _ => match name.strip_prefix("key.") {
                    Some(key) => {
                        search_key_filter(key, &value)?;
                        if query.keys.iter().any(|(k, _)| k == key) {
                            return Err(ApiError::bad_request(format!(
                                "`key.{key}` is given twice; give each key once"
                            )));
                        }
                        query.keys.push((key.to_owned(), value));
                    }
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "unknown filter `{}`; {LIST_FILTERS}",
                            name.escape_default()
                        )));
                    }
                },
            }
        }
        Ok(query)
    }
}

/// A search key filter's name and value must be ones a run can have.
fn search_key_filter(name: &str, value: &str) -> Result<(), ApiError> {
    use coordinator_core::machine::search_keys::MAX_SEARCH_KEY_CHARS;
    // A key is named as every name of a project is.
    if !coordinator_core::decode::is_name(name) {
        return Err(ApiError::bad_request(
            "a search key filter is `key.NAME=VALUE`, NAME as declared in the workflow's `searchKeys`",
        ));
    }
    if value.is_empty() || value.chars().count() > MAX_SEARCH_KEY_CHARS || value.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "`key.{name}` must be 1 to {MAX_SEARCH_KEY_CHARS} characters without control characters"
        )));
    }
    Ok(())
}

/// Runs the caller may read, oldest first, with an opaque cursor for the next page.
pub(super) async fn list(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(pairs) = query.map_err(|_| ApiError::bad_request(LIST_FILTERS))?;
    let query = ListQuery::parse(pairs)?;
    let (state, cursor) = (query.state, query.cursor);
    let limit = query.limit.unwrap_or(50);
    // Neither `read` nor `operate` there: nothing may be listed.
    let slices = caller
        .listing(query.workflow.as_deref())
        .ok_or_else(|| ApiError::forbidden(Role::Read, query.workflow.as_deref()))?;
    // The union of the slices' first pages, ordered and cut to the limit: each
    // of the union's first `limit` runs is among the first `limit` of its slice.
    let mut rows: Vec<RunRow> = Vec::new();
    for slice in slices {
        let filter = RunFilter {
            workflow: slice.workflow,
            state,
            owner: slice.owner,
            keys: query.keys.clone(),
            idempotency_key: query.idempotency_key.clone(),
        };
        let page = engine.store().list_runs(&filter, cursor.as_ref(), limit).await.map_err(EngineError::from)?;
        rows.extend(page.runs);
    }
    rows.sort_by(|a, b| (a.admitted_at, &a.id).cmp(&(b.admitted_at, &b.id)));
    rows.dedup_by(|a, b| a.id == b.id);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    rows.truncate(limit);
    let next = if rows.len() >= limit { rows.last().map(|r| format!("{}.{}", r.admitted_at, r.id)) } else { None };
    let runs: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({"runId": r.id, "workflow": r.workflow, "revision": r.revision, "state": r.state.as_str(), "admittedAt": r.admitted_at})
        })
        .collect();
    Ok(Json(json!({"runs": runs, "next": next})))
}

/// Reads a cursor `<admittedAt>.<runId>`.
fn parse_cursor(text: &str) -> Option<Cursor> {
    let (at, id) = text.split_once('.')?;
    let admitted_at = at.parse().ok()?;
    (!id.is_empty()).then(|| Cursor { admitted_at, id: id.to_owned() })
}
