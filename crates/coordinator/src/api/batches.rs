//! Durable batches (docs/api.md#batches): `POST /v1/batches` starts one (or,
//! with `dryRun`, says what it would do and writes nothing), `GET
//! /v1/batches` lists the newest, `GET /v1/batches/{id}` is one with its
//! progress, `POST /v1/batches/{id}/cancel` stops one. The work is
//! [`crate::engine::batches`]'s.
//!
//! A batch needs `operate` for its filter's `workflow`, or for every
//! workflow when the filter names none; reading and cancelling need the same
//! for the batch's filter.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use coordinator_core::machine::time::Instant;
use coordinator_core::model::run::RunState;
use coordinator_core::model::runtime::Role;
use coordinator_store::{AttentionReason, BatchView, ListFilter};
use serde_json::{Map, Value, json};

use super::ApiError;
use super::auth::Caller;
use super::code::Code;
use crate::engine::Engine;
use crate::engine::batches::{BatchAction, BatchRequest, DryRun};
use coordinator_core::machine::search_keys::MAX_SEARCH_KEY_CHARS;

use crate::engine::connections::{MAX_REASON_CHARS, reason_ok};
use crate::engine::error::EngineError;

/// The largest body a batch request accepts: room for the most run ids a
/// filter may name, and for a malformed body to be read and named (`400`).
const BODY_LIMIT: usize = 1 << 20;
/// What the body must look like.
const SHAPE: &str = "send a JSON object {\"action\": \"reconcile\" | \"retry-same\" | \"cancel\", \"filter\": {…}, \
     \"reason\": \"why\", \"dryRun\": false}";
/// What a filter may hold.
const FILTERS: &str = "filter fields: workflow, state, reason (unknown-effect, restore-hold), step, revision, from, \
     to (RFC 3339), idempotencyKey, key.NAME, runs (run ids)";
/// The most run ids a filter's `runs` may name.
pub(crate) const MOST_NAMED_RUNS: usize = 1_000;
/// The most runs one page of `GET /v1/batches/{id}/runs` holds.
const MOST_PER_PAGE: u32 = 500;

/// `POST /v1/batches`: `201 {batchId, matched, state}`, or `200` with the dry run.
pub(super) async fn start(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if !super::body::is_json(&headers) {
        return Err(ApiError::bad_request(SHAPE));
    }
    let bytes = super::body::within(body, BODY_LIMIT).await?;
    let body: Value = serde_json::from_slice(&bytes).map_err(|_| ApiError::bad_request(SHAPE))?;
    let (request, dry) = request_of(&body)?;
    may_operate(&caller, request.filter.workflow.as_deref())?;
    if dry {
        let dry = engine.dry_run_batch(&request).await?;
        return Ok((StatusCode::OK, Json(dry_json(&request, &dry))).into_response());
    }
    let (id, matched) = engine.start_batch(&request, caller.subject()).await?;
    let view = engine.store().batch(&id).await.map_err(EngineError::from)?;
    let state = view.map_or_else(|| "running".to_owned(), |v| v.state);
    Ok((StatusCode::CREATED, Json(json!({"batchId": id, "matched": matched, "state": state}))).into_response())
}

/// `GET /v1/batches`: the newest 50 the caller may see.
pub(super) async fn list(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Json<Value>, ApiError> {
    if !caller.holds_somewhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Operate, None));
    }
    let batches = engine.store().batches(50).await.map_err(EngineError::from)?;
    let visible: Vec<Value> =
        batches.iter().filter(|b| may_operate(&caller, workflow_of(b).as_deref()).is_ok()).map(view_json).collect();
    Ok(Json(json!({"batches": visible})))
}

/// `GET /v1/batches/{id}`.
pub(super) async fn read(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let batch = visible(&engine, &caller, &id).await?;
    Ok(Json(view_json(&batch)))
}

/// `POST /v1/batches/{id}/cancel`: `200` with the batch and whether this stopped it.
pub(super) async fn cancel(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    visible(&engine, &caller, &id).await?;
    let store = engine.store();
    let changed = store.cancel_batch(&id, caller.subject(), engine.now()).await.map_err(EngineError::from)?;
    if changed {
        tracing::info!(batch = %id, actor = caller.subject(), "batch cancelled");
    }
    let batch = store.batch(&id).await.map_err(EngineError::from)?.ok_or_else(unknown)?;
    let mut body = view_json(&batch);
    body["changed"] = json!(changed);
    Ok(Json(body))
}

/// `GET /v1/batches/{id}/runs`: `200 {runs: [{runId, outcome, code, at}], next}`,
/// in run id order; `outcome` (`done`, `refused`, `pending`), `after` (a run id) and `limit` (1–500).
pub(super) async fn runs(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(id): Path<String>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    const PARAMETERS: &str =
        "the parameters are outcome (done, refused, pending), after (a run id) and limit (1 to 500)";
    let Query(pairs) = query.map_err(|_| ApiError::bad_request(PARAMETERS))?;
    let (mut outcome, mut after, mut limit) = (None, None, 100);
    let mut seen: Vec<String> = Vec::new();
    for (name, value) in pairs {
        if seen.contains(&name) {
            return Err(ApiError::bad_request(format!("`{}` is given twice; give it once", name.escape_default())));
        }
        seen.push(name.clone());
        match name.as_str() {
            "outcome" if ["done", "refused", "pending"].contains(&value.as_str()) => outcome = Some(value),
            "outcome" => return Err(ApiError::bad_request("`outcome` is done, refused or pending")),
            "after" => {
                after = Some(hyphenated_uuid(&value).ok_or_else(|| ApiError::bad_request("`after` is a run id"))?);
            }
            "limit" => {
                let n = value.parse::<u32>().ok().filter(|n| (1..=MOST_PER_PAGE).contains(n));
                limit = n.ok_or_else(|| ApiError::bad_request(format!("`limit` is 1 to {MOST_PER_PAGE}")))?;
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter `{}`; {PARAMETERS}",
                    other.escape_default()
                )));
            }
        }
    }
    visible(&engine, &caller, &id).await?;
    let store = engine.store();
    let found = store.batch_runs(&id, outcome.as_deref(), after.as_deref(), limit).await.map_err(EngineError::from)?;
    let next =
        (found.len() == usize::try_from(limit).unwrap_or(usize::MAX)).then(|| found.last().map(|r| r.run_id.clone()));
    let runs: Vec<Value> = found.iter().map(run_json).collect();
    Ok(Json(json!({"runs": runs, "next": next.flatten()})))
}

/// One run of a batch as JSON.
pub(crate) fn run_json(r: &coordinator_store::BatchRun) -> Value {
    json!({
        "runId": r.run_id,
        "outcome": r.outcome.as_deref().unwrap_or("pending"),
        "code": r.code,
        "at": r.at.map(|at| Instant(at).to_rfc3339()),
    })
}

fn unknown() -> ApiError {
    ApiError::new(Code::BatchUnknown, "no batch has that id")
}

/// Batch `id` when the caller may see it (`404 batch.unknown` otherwise, whether or not it exists).
async fn visible(engine: &Engine, caller: &Caller, id: &str) -> Result<BatchView, ApiError> {
    let batch = engine.store().batch(id).await.map_err(EngineError::from)?.ok_or_else(unknown)?;
    may_operate(caller, workflow_of(&batch).as_deref()).map_err(|_| unknown())?;
    Ok(batch)
}

/// `operate` for `workflow`, or for every workflow when there is none.
fn may_operate(caller: &Caller, workflow: Option<&str>) -> Result<(), ApiError> {
    let holds = match workflow {
        Some(w) => caller.holds(Role::Operate, w),
        None => caller.holds_everywhere(Role::Operate),
    };
    if holds { Ok(()) } else { Err(ApiError::forbidden(Role::Operate, Some(workflow.unwrap_or("*")))) }
}

/// The workflow a stored batch's filter names.
fn workflow_of(batch: &BatchView) -> Option<String> {
    let filter: Value = serde_json::from_str(&batch.filter).ok()?;
    filter["workflow"].as_str().map(str::to_owned)
}

/// A batch as JSON.
pub(crate) fn view_json(b: &BatchView) -> Value {
    json!({
        "batchId": b.id,
        "action": b.action,
        "filter": serde_json::from_str::<Value>(&b.filter).unwrap_or(Value::Null),
        "reason": b.reason,
        "createdBy": b.created_by,
        "createdAt": Instant(b.created_at).to_rfc3339(),
        "state": b.state,
        "matched": b.matched,
        "done": b.done,
        "refused": b.refused,
        "remaining": b.remaining(),
        "endedAt": b.ended_at.map(|at| Instant(at).to_rfc3339()),
        "cancelledBy": b.cancelled_by,
    })
}

fn dry_json(request: &BatchRequest, dry: &DryRun) -> Value {
    let runs: Vec<Value> = dry
        .runs
        .iter()
        .map(|(id, code)| match code {
            None => json!({"runId": id, "outcome": "apply"}),
            Some(code) => json!({"runId": id, "outcome": "refused", "code": code}),
        })
        .collect();
    json!({
        "dryRun": true,
        "action": request.action.as_str(),
        "matched": dry.matched,
        "previewed": dry.previewed,
        "wouldApply": dry.would_apply,
        "wouldRefuse": dry.would_refuse,
        "runs": runs,
    })
}

/// The request a body asks for, and whether it is a dry run.
fn request_of(body: &Value) -> Result<(BatchRequest, bool), ApiError> {
    let Some(object) = body.as_object() else { return Err(ApiError::bad_request(SHAPE)) };
    if let Some(unknown) = object.keys().find(|k| !["action", "filter", "reason", "dryRun"].contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!("unknown field `{}`; {SHAPE}", unknown.escape_default())));
    }
    let action = object
        .get("action")
        .and_then(Value::as_str)
        .and_then(BatchAction::parse)
        .ok_or_else(|| ApiError::bad_request("`action` is one of reconcile, retry-same, cancel"))?;
    let reason = object.get("reason").and_then(Value::as_str).filter(|r| reason_ok(r)).ok_or_else(|| {
        ApiError::bad_request(format!("`reason` is required: 1 to {MAX_REASON_CHARS} characters, not only blanks"))
    })?;
    let dry = match object.get("dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::bad_request("`dryRun` is true or false")),
    };
    let empty = Map::new();
    let filter = match object.get("filter") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(ApiError::bad_request(format!("`filter` is an object; {FILTERS}"))),
    };
    let request = BatchRequest {
        action,
        filter: filter_of(filter)?,
        filter_json: Value::Object(filter.clone()).to_string(),
        reason: crate::engine::connections::reason_kept(reason).to_owned(),
    };
    Ok((request, dry))
}

/// `text` as a run id when it is a UUID in its hyphenated form (any case), lowercased.
fn hyphenated_uuid(text: &str) -> Option<String> {
    let is_hyphenated = text.len() == 36 && text.chars().filter(|c| *c == '-').count() == 4;
    is_hyphenated.then(|| uuid::Uuid::try_parse(text).ok()).flatten().map(|id| id.hyphenated().to_string())
}

/// A filter's `runs`: 1 to [`MOST_NAMED_RUNS`] run ids (UUIDs, any case), kept canonical.
fn run_ids(value: &Value) -> Result<Vec<String>, ApiError> {
    let shape = || {
        ApiError::bad_request(format!("filter `runs` is a list of 1 to {MOST_NAMED_RUNS} run ids (UUIDs), each once"))
    };
    let list = value.as_array().filter(|l| (1..=MOST_NAMED_RUNS).contains(&l.len())).ok_or_else(shape)?;
    let mut written: Vec<&str> = Vec::with_capacity(list.len());
    let mut ids = Vec::with_capacity(list.len());
    for item in list {
        let text = item.as_str().ok_or_else(shape)?;
        if written.contains(&text) {
            return Err(shape());
        }
        written.push(text);
        // The same run spelled in another case counts once.
        let id = hyphenated_uuid(text).ok_or_else(shape)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The runs a batch filter selects; each field is named when it is not usable.
pub(crate) fn filter_of(filter: &Map<String, Value>) -> Result<ListFilter, ApiError> {
    let mut out = ListFilter::default();
    for (name, value) in filter {
        // As the document's `Name` (a search key's value: at most 128 characters).
        let most = if name.starts_with("key.") { MAX_SEARCH_KEY_CHARS } else { super::decode::NAME_MAX };
        let text = || -> Result<String, ApiError> {
            match value.as_str() {
                Some(t) if !t.is_empty() && t.chars().count() <= most && !t.chars().any(char::is_control) => {
                    Ok(t.to_owned())
                }
                _ => Err(ApiError::bad_request(format!(
                    "filter `{}` must be 1 to {most} characters without a control character",
                    name.escape_default()
                ))),
            }
        };
        let instant = || -> Result<i64, ApiError> {
            let t = text()?;
            Instant::parse_rfc3339(&t)
                .map(|i| i.0)
                .ok_or_else(|| ApiError::bad_request(format!("filter `{name}` must be an RFC 3339 instant")))
        };
        match name.as_str() {
            "workflow" => out.workflow = Some(text()?),
            "state" => {
                let t = text()?;
                let state = RunState::ALL.into_iter().find(|s| s.as_str() == t);
                out.state = Some(state.ok_or_else(|| ApiError::bad_request("filter `state` must be a run state"))?);
            }
            "reason" => {
                out.attention = Some(match text()?.as_str() {
                    "unknown-effect" => AttentionReason::UnknownEffect,
                    "restore-hold" => AttentionReason::RestoreHold,
                    _ => return Err(ApiError::bad_request("filter `reason` is unknown-effect or restore-hold")),
                });
            }
            "step" => out.step = Some(text()?),
            "revision" => out.revision = Some(text()?),
            "from" => out.admitted_from = Some(instant()?),
            "to" => out.admitted_to = Some(instant()?),
            "idempotencyKey" => out.idempotency_key = Some(text()?),
            "runs" => out.run_ids = Some(run_ids(value)?),
            other => match other.strip_prefix("key.") {
                Some(key) if coordinator_core::decode::is_name(key) => out.keys.push((key.to_owned(), text()?)),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "unknown filter `{}`; {FILTERS}",
                        other.escape_default()
                    )));
                }
            },
        }
    }
    // A `to` not after `from` is a valid filter that matches no run (the document cannot say otherwise).
    Ok(out)
}
