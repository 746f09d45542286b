//! `GET /v1/connections`, `POST /v1/connections/{name}/pause` and
//! `/resume` (docs/reference/service.md#connections): the deployment's
//! connections — each one's pause, breaker and hold — and an operator's
//! pause of one.
//!
//! Listing needs the `operate` role for some workflow. Pausing or resuming a
//! connection needs `operate` for every workflow whose stored revisions call
//! through it (for a connection no workflow uses, `operate` everywhere). The
//! body is `{"reason": "…"}`: 1 to 500 characters, journaled with the caller.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use coordinator_core::model::runtime::Role;
use serde_json::{Value, json};

use super::ApiError;
use super::auth::Caller;
use crate::engine::Engine;
use crate::engine::connections::ConnectionView;
use coordinator_store::Pause;

/// A pause as JSON.
fn pause_json(pause: &Pause) -> Value {
    json!({"by": pause.by, "at": pause.at, "reason": pause.reason})
}

/// A connection as JSON at `now` (a hold that ended is shown as none).
pub(super) fn view_json(view: &ConnectionView, now: i64) -> Value {
    let pace = &view.pace;
    json!({
        "name": view.name,
        "dispatch": view.dispatch,
        "workflows": view.workflows,
        "paused": view.paused.as_ref().map(pause_json),
        "state": pace.breaker,
        "breaker": {
            "state": pace.breaker,
            "since": pace.since,
            "why": pace.why,
            "probeAt": pace.probe_at,
            "failures": pace.failures,
        },
        "holdUntil": (pace.hold_until > now).then_some(pace.hold_until),
        "pace": pace.factor,
    })
}

/// `GET /v1/connections`: `200 {connections: [{name, dispatch, workflows, paused}]}`.
pub(super) async fn list(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Json<Value>, ApiError> {
    if !caller.holds_somewhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Operate, None));
    }
    let views = engine.connections_view().await?;
    let now = engine.now();
    Ok(Json(json!({"connections": views.iter().map(|v| view_json(v, now)).collect::<Vec<_>>()})))
}

/// `POST /v1/connections/{name}/pause`: `200` with the connection and
/// `changed` (false when it was paused already; the earlier pause stays).
pub(super) async fn pause(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let reason = authorized(&engine, &caller, &name, &headers, body).await?;
    let (_, changed) = engine.pause_connection(&name, caller.subject(), &reason).await?;
    answer(&engine, &name, changed).await
}

/// `POST /v1/connections/{name}/resume`: `200` with the connection and
/// `changed` (false when it was not paused).
pub(super) async fn resume(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let reason = authorized(&engine, &caller, &name, &headers, body).await?;
    let lifted = engine.resume_connection(&name, caller.subject(), &reason).await?;
    answer(&engine, &name, lifted.is_some()).await
}

/// The reason of a pause or resume of `name` by `caller`, once the caller
/// may steer it: the connection exists, the caller operates every workflow
/// using it, the body is a reason.
async fn authorized(
    engine: &Engine,
    caller: &Caller,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<String, ApiError> {
    if !caller.holds_somewhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Operate, None));
    }
    if !engine.connection_names().contains(name) {
        let refusal = crate::engine::connections::ConnectionRefusal::Unknown(name.to_owned());
        return Err(crate::engine::error::EngineError::from(refusal).into());
    }
    let users = engine.workflows_using(name).await?;
    if users.is_empty() && !caller.holds_everywhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Operate, Some("*")));
    }
    if let Some(denied) = users.iter().find(|w| !caller.holds(Role::Operate, w)) {
        return Err(ApiError::forbidden(Role::Operate, Some(denied)));
    }
    super::body::required_reason(headers, body).await
}

/// `200` with connection `name` as it is now, and whether the command changed it.
async fn answer(engine: &Engine, name: &str, changed: bool) -> Result<Json<Value>, ApiError> {
    let views = engine.connections_view().await?;
    let now = engine.now();
    let mut body =
        views.iter().find(|v| v.name == name).map(|v| view_json(v, now)).unwrap_or_else(|| json!({"name": name}));
    body["changed"] = json!(changed);
    Ok(Json(body))
}
