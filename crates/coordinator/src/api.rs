//! The HTTP API (SPEC §7), the part built so far: admission, reading a run,
//! the operator commands cancel, retry-same and reconcile, completion
//! notifications and a health check. Errors are
//! `{"code", "message"}` with stable codes; nothing protected (input, commands,
//! product responses) is ever echoed.
//!
//! Authentication is not built yet: every request acts as the dev operator
//! ([`DEV_OWNER`]).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use coordinator_core::machine::event::Event;
use coordinator_core::model::run::RunState;
use coordinator_core::model::workflow::Step;
use coordinator_store::{Cursor, RunFilter};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::{Engine, now_ms};
use crate::error::EngineError;

/// The subject every request acts as until authentication is built.
pub const DEV_OWNER: &str = "dev-operator";

/// Runs scanned per page when looking for the run a completion notification concerns.
const SCAN_PAGE: u32 = 200;

/// The API router over an engine.
pub fn app(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/runs", post(admit).get(list_runs))
        .route("/v1/runs/{id}", get(read_run))
        .route("/v1/runs/{id}/cancel", post(cancel))
        .route("/v1/runs/{id}/steps/{step}/retry-same", post(retry_same))
        .route("/v1/runs/{id}/steps/{step}/reconcile", post(reconcile))
        .route("/v1/completions/{connection}", post(completion))
        .with_state(engine)
}

/// An API error: status, stable code, message.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    pointers: Option<Vec<String>>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), pointers: None }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::UnknownWorkflow(_) => ApiError::new(StatusCode::NOT_FOUND, "workflow.unknown", e.to_string()),
            EngineError::RevisionNotActive { .. } => {
                ApiError::new(StatusCode::CONFLICT, "revision.not-active", e.to_string())
            }
            EngineError::InputInvalid { ref pointers } => ApiError {
                pointers: Some(pointers.clone()),
                ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "input.invalid", e.to_string())
            },
            EngineError::KeyReused => ApiError::new(StatusCode::CONFLICT, "idempotency.key-reused", e.to_string()),
            EngineError::RunNotFound => ApiError::new(StatusCode::NOT_FOUND, "run.unknown", e.to_string()),
            other => {
                eprintln!("coordinator api: {other}");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the request could not be completed")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"code": self.code, "message": self.message});
        if let Some(pointers) = self.pointers {
            body["pointers"] = json!(pointers);
        }
        (self.status, Json(body)).into_response()
    }
}

/// `POST /v1/runs` body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AdmitBody {
    workflow: String,
    revision: String,
    input: Value,
    #[serde(default)]
    idempotency_key: Option<String>,
}

async fn admit(
    State(engine): State<Arc<Engine>>,
    body: Result<Json<AdmitBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    // The body's own error text could quote the input: answer with a fixed message.
    let Json(body) = body.map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.invalid",
            "the body must be {workflow, revision, input, idempotencyKey}",
        )
    })?;
    let admitted = engine.admit(&body.workflow, &body.revision, body.input, body.idempotency_key, DEV_OWNER).await?;
    let status = if admitted.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({"runId": admitted.run_id, "state": admitted.state.as_str()}))).into_response())
}

async fn read_run(State(engine): State<Arc<Engine>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
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
struct ListQuery {
    workflow: Option<String>,
    state: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Runs of the caller, oldest first, with an opaque cursor for the next page.
async fn list_runs(
    State(engine): State<Arc<Engine>>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let bad = |message: &str| ApiError::new(StatusCode::BAD_REQUEST, "request.invalid", message);
    let Query(query) = query.map_err(|_| bad("filters: workflow, state, limit (1-500), cursor"))?;
    let state = match query.state {
        None => None,
        Some(text) => Some(
            serde_json::from_value::<RunState>(json!(text))
                .map_err(|_| bad("state must be one of the eight run states (running, attention, …)"))?,
        ),
    };
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(bad("limit must be between 1 and 500"));
    }
    let cursor = match query.cursor {
        None => None,
        Some(text) => Some(parse_cursor(&text).ok_or_else(|| bad("cursor is not one this API gave"))?),
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

async fn cancel(State(engine): State<Arc<Engine>>, Path(id): Path<String>) -> Result<Response, ApiError> {
    operate(&engine, &id, Event::CancelRequested).await
}

async fn retry_same(
    State(engine): State<Arc<Engine>>,
    Path((id, step)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    operate(&engine, &id, Event::RetrySameRequested { step }).await
}

async fn reconcile(
    State(engine): State<Arc<Engine>>,
    Path((id, step)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    operate(&engine, &id, Event::ReconcileRequested { step }).await
}

/// An operator's command as an event: `202` with the run's state when applied,
/// `200` with the reason when there was nothing to do (a cancel of an ended
/// run), `409` with the rule's code when the rules refuse it.
async fn operate(engine: &Engine, id: &str, event: Event) -> Result<Response, ApiError> {
    match engine.handle(id, &event, now_ms()).await {
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
            Err(ApiError { status: StatusCode::CONFLICT, code: refusal_code(&code), message, pointers: None })
        }
        Err(other) => Err(other.into()),
    }
}

/// The stable refusal codes the machine gives operator commands.
fn refusal_code(code: &str) -> &'static str {
    const CODES: [&str; 9] = [
        "operation.never-repeat",
        "operation.no-receipt",
        "run.deadline-reached",
        "run.ended",
        "run.restore-hold",
        "step.effect-not-unknown",
        "step.not-a-call",
        "step.receipt-pending",
        "step.attempt-pending",
    ];
    CODES.iter().find(|c| **c == code).copied().unwrap_or("operation.refused")
}

/// `POST /v1/completions/{connection}` body.
#[derive(Debug, Deserialize)]
struct CompletionBody {
    reference: String,
}

/// Always `202`: whether a run waits for the reference is not revealed. The
/// nudge is delivered in the background.
async fn completion(
    State(engine): State<Arc<Engine>>,
    Path(connection): Path<String>,
    body: Option<Json<CompletionBody>>,
) -> StatusCode {
    if let Some(Json(body)) = body {
        tokio::spawn(async move {
            if let Err(e) = nudge(&engine, &connection, &body.reference).await {
                eprintln!("coordinator api: completion notification not applied: {e}");
            }
        });
    }
    StatusCode::ACCEPTED
}

/// Finds the running run whose current wait-for observes `reference` on
/// `connection` and sends it `CompletionNotified`.
///
/// This slice scans running runs (there is no index by reference yet): fine
/// for `coordinator dev`, linear in the number of running runs.
async fn nudge(engine: &Engine, connection: &str, reference: &str) -> Result<(), EngineError> {
    let filter = RunFilter { state: Some(RunState::Running), ..RunFilter::default() };
    let mut cursor = None;
    loop {
        let page = engine.store().list_runs(&filter, cursor.as_ref(), SCAN_PAGE).await?;
        for row in &page.runs {
            let run = engine.open(&row.id, &row.snapshot)?;
            let Some(step) = run.current.as_deref() else { continue };
            let Some(wait) = run.wait(step) else { continue };
            if wait.reference != reference || wait.resolution.is_some() {
                continue;
            }
            let wf = engine.workflow(&row.revision).await?;
            let Some(Step::WaitFor(w)) = wf.step(step) else { continue };
            let on_connection = wf.operation_of(&w.completion.step).is_some_and(|(_, op)| op.connection == connection);
            if on_connection {
                return engine.handle(&row.id, &Event::CompletionNotified { step: step.to_owned() }, now_ms()).await;
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}
