//! `GET /v1/schedules`, `POST /v1/schedules/{workflow}/{id}/pause` and
//! `/resume` (docs/reference/service.md#schedules): the schedules of the
//! active revisions — each one's calendar, next and last firing, pending
//! instant and pause — and an operator's pause of one.
//!
//! Listing shows the schedules of the workflows the caller reads or
//! operates (`403` when it holds neither role anywhere). Pausing or resuming
//! needs `operate` for the schedule's workflow; the body is
//! `{"reason": "…"}`: 1 to 500 characters, journaled with the caller.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use coordinator_core::machine::time::Instant;
use coordinator_core::model::runtime::Role;
use coordinator_core::schedule::{DEFAULT_ANCHOR, DEFAULT_CATCH_UP_SECONDS, DEFAULT_TIME_ZONE};
use serde_json::{Value, json};

use super::ApiError;
use super::auth::Caller;
use crate::engine::Engine;
use crate::engine::error::EngineError;
use crate::engine::schedules::{ScheduleRefusal, ScheduleView, firing_key};

/// A schedule as JSON.
pub(crate) fn view_json(view: &ScheduleView) -> Value {
    let (row, s) = (&view.row, &view.schedule);
    let overlap = serde_json::to_value(s.overlap.unwrap_or_default()).unwrap_or(Value::Null);
    json!({
        "workflow": row.workflow,
        "id": row.id,
        "revision": row.revision,
        "cron": s.cron,
        "timeZone": s.cron.as_ref().map(|_| s.time_zone.as_deref().unwrap_or(DEFAULT_TIME_ZONE)),
        "intervalSeconds": s.interval_seconds,
        "anchor": s.interval_seconds.map(|_| s.anchor.as_deref().unwrap_or(DEFAULT_ANCHOR)),
        "overlap": overlap,
        "catchUpSeconds": s.catch_up_seconds.unwrap_or(DEFAULT_CATCH_UP_SECONDS),
        "nextAt": row.next_at,
        "next": row.next_at.map(|at| Instant(at).to_rfc3339()),
        "nextLocal": view.next_local,
        "nextKey": row.next_at.map(|at| firing_key(&row.id, at)),
        "pendingAt": row.pending_at,
        "last": row.last.as_ref().map(|(at, run)| json!({"at": at, "instant": Instant(*at).to_rfc3339(), "runId": run})),
        "paused": row.paused.as_ref().map(|p| json!({"at": p.at, "by": p.by, "reason": p.reason})),
    })
}

/// `GET /v1/schedules`: `200 {schedules: […]}`, by workflow and id.
pub(super) async fn list(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Json<Value>, ApiError> {
    if !caller.holds_somewhere(Role::Read) && !caller.holds_somewhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Read, None));
    }
    let views = engine.schedules_view().await?;
    let shown: Vec<Value> = views
        .iter()
        .filter(|v| caller.holds(Role::Read, &v.row.workflow) || caller.holds(Role::Operate, &v.row.workflow))
        .map(view_json)
        .collect();
    Ok(Json(json!({"schedules": shown})))
}

/// The reason of a pause or resume, once the caller operates `workflow`.
async fn authorized(caller: &Caller, workflow: &str, headers: &HeaderMap, body: Body) -> Result<String, ApiError> {
    if !caller.holds(Role::Operate, workflow) {
        return Err(ApiError::forbidden(Role::Operate, Some(workflow)));
    }
    super::body::required_reason(headers, body).await
}

/// `200` with the schedule as it is now and `changed`.
async fn answer(engine: &Engine, workflow: &str, id: &str, changed: bool) -> Result<Json<Value>, ApiError> {
    let views = engine.schedules_view().await?;
    let Some(view) = views.iter().find(|v| v.row.workflow == workflow && v.row.id == id) else {
        let unknown = ScheduleRefusal::Unknown { workflow: workflow.to_owned(), id: id.to_owned() };
        return Err(EngineError::from(unknown).into());
    };
    let mut body = view_json(view);
    body["changed"] = json!(changed);
    Ok(Json(body))
}

/// `POST /v1/schedules/{workflow}/{id}/pause`: `200` with the schedule and
/// `changed` (false when it was paused already; the earlier pause stays).
pub(super) async fn pause(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path((workflow, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    steer(&engine, &caller, &workflow, &id, (&headers, body), true).await
}

/// `POST /v1/schedules/{workflow}/{id}/resume`: `200` with the schedule and
/// `changed` (false when it was not paused). It fires again from its first
/// instant after now; the instants it missed while paused are not fired.
pub(super) async fn resume(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path((workflow, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    steer(&engine, &caller, &workflow, &id, (&headers, body), false).await
}

/// Pauses (`pause`) or resumes schedule `id` of `workflow` for `caller` with the body's reason.
async fn steer(
    engine: &Engine,
    caller: &Caller,
    workflow: &str,
    id: &str,
    (headers, body): (&HeaderMap, Body),
    pause: bool,
) -> Result<Json<Value>, ApiError> {
    let reason = authorized(caller, workflow, headers, body).await?;
    let changed = if pause {
        engine.pause_schedule(workflow, id, caller.subject(), &reason).await?
    } else {
        engine.resume_schedule(workflow, id, caller.subject(), &reason).await?
    };
    answer(engine, workflow, id, changed).await
}
