//! The deployment page's connections (docs/console.md#deployment): each
//! connection, how it is served, the workflows using it, and an operator's
//! pause; pausing and resuming with a reason for those who operate every
//! workflow using it, as `POST /v1/connections/{name}/pause|resume` requires.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::model::runtime::Role;
use serde::Deserialize;

use super::runs::internal;
use super::{Viewer, forbidden, rfc3339};
use crate::api::ApiState;
use crate::engine::Engine;
use crate::engine::connections::{ConnectionRefusal, ConnectionView};
use crate::engine::error::EngineError;

/// One connection as the deployment page shows it.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionRow {
    pub(crate) name: String,
    pub(crate) dispatch: &'static str,
    pub(crate) workflows: String,
    /// `paused by … at …: reason`, while it is paused.
    pub(crate) paused: Option<String>,
    /// The breaker while not closed, and a product's hold, in a sentence.
    pub(crate) held: Option<String>,
    /// Whether the viewer may pause or resume it.
    pub(crate) may_steer: bool,
}

/// Whether `viewer` may pause or resume `view`: `operate` on every workflow using it (on `*` when none does).
fn may_steer(viewer: &Viewer, view: &ConnectionView) -> bool {
    let principal = &viewer.principal;
    if view.workflows.is_empty() {
        return principal.holds_everywhere(Role::Operate);
    }
    view.workflows.iter().all(|w| principal.holds(Role::Operate, w))
}

/// The connections of the deployment page, for a viewer who operates some workflow (none otherwise).
pub(crate) async fn rows(engine: &Engine, viewer: &Viewer) -> Result<Vec<ConnectionRow>, EngineError> {
    if !viewer.principal.holds_somewhere(Role::Operate) {
        return Ok(Vec::new());
    }
    let now = engine.now();
    Ok(engine
        .connections_view()
        .await?
        .into_iter()
        .map(|view| ConnectionRow {
            may_steer: may_steer(viewer, &view),
            paused: view.paused.as_ref().map(|p| format!("paused by {} at {}: {}", p.by, rfc3339(p.at), p.reason)),
            held: held(&view.pace, now),
            workflows: if view.workflows.is_empty() { "none".to_owned() } else { view.workflows.join(", ") },
            dispatch: view.dispatch,
            name: view.name,
        })
        .collect())
}

/// The breaker (while not closed) and a product's hold (while in force) at `now`, in words.
fn held(pace: &coordinator_store::PaceView, now: i64) -> Option<String> {
    let mut parts = Vec::new();
    match pace.breaker {
        "open" => parts.push(format!(
            "breaker open since {}: {}{}",
            pace.since.map_or_else(|| "-".to_owned(), rfc3339),
            pace.why.as_deref().unwrap_or("-"),
            pace.probe_at.map(|p| format!("; next probe at {}", rfc3339(p))).unwrap_or_default()
        )),
        "half-open" => parts.push("breaker half-open: a probe is in flight".to_owned()),
        _ => {}
    }
    if pace.hold_until > now {
        parts.push(format!("held until {} (the product's Retry-After)", rfc3339(pace.hold_until)));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The pause form.
#[derive(Deserialize)]
pub(super) struct SteerForm {
    #[serde(default)]
    csrf: String,
    /// `pause` or `resume`.
    change: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/connections/{name}`: pause or resume it, then the deployment page.
pub(super) async fn steer(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Form(form): Form<SteerForm>,
) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    let engine = &state.engine;
    let views = match engine.connections_view().await {
        Ok(views) => views,
        Err(e) => return internal(e),
    };
    let Some(view) = views.iter().find(|v| v.name == name) else {
        return super::problem(StatusCode::NOT_FOUND, format!("No connection `{name}` is configured."));
    };
    if !may_steer(&viewer, view) {
        let denied = view.workflows.iter().find(|w| !viewer.principal.holds(Role::Operate, w));
        return forbidden(Role::Operate, Some(denied.map_or("*", String::as_str)));
    }
    let subject = viewer.principal.subject();
    let done = match form.change.as_str() {
        "pause" => engine.pause_connection(&name, subject, &form.reason).await.map(|_| ()),
        "resume" => engine.resume_connection(&name, subject, &form.reason).await.map(|_| ()),
        _ => return super::problem(StatusCode::BAD_REQUEST, "change is `pause` or `resume`"),
    };
    match done {
        Ok(()) => Redirect::to("/console/deployment#connections").into_response(),
        Err(EngineError::Connection(refusal @ ConnectionRefusal::Reason)) => {
            super::deployment::render_refused(engine, &viewer, format!("Connection {name}: {refusal}.")).await
        }
        Err(e) => internal(e),
    }
}
