//! The deployment page's schedules (docs/console.md#deployment): each
//! schedule of an active revision, when it fires, its next and last firing,
//! an instant it holds and an operator's pause; pausing and resuming with a
//! reason for those who operate its workflow, as
//! `POST /v1/schedules/{workflow}/{id}/pause|resume` requires.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::model::runtime::Role;
use coordinator_core::schedule::describe;
use serde::Deserialize;

use super::runs::internal;
use super::{Viewer, forbidden, rfc3339};
use crate::api::ApiState;
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// One schedule as the deployment page shows it.
#[derive(Debug, Clone)]
pub(crate) struct ScheduleRow {
    pub(crate) workflow: String,
    pub(crate) id: String,
    /// When it fires, in words.
    pub(crate) when: String,
    /// What happens while its previous run goes on.
    pub(crate) overlap: &'static str,
    /// The next firing on its wall clock and in UTC, or why there is none.
    pub(crate) next: String,
    /// The last instant fired (UTC) and its run.
    pub(crate) last: Option<(String, String)>,
    /// The instant `one-pending` holds (UTC).
    pub(crate) held: Option<String>,
    /// `paused by … at …: reason`, while it is paused.
    pub(crate) paused: Option<String>,
    /// Whether the viewer may pause or resume it.
    pub(crate) may_steer: bool,
}

fn overlap_words(overlap: coordinator_core::model::workflow::Overlap) -> &'static str {
    use coordinator_core::model::workflow::Overlap;
    match overlap {
        Overlap::Skip => "skip an instant while the previous run goes on",
        Overlap::Allow => "fire every instant",
        Overlap::OnePending => "hold one instant until the previous run ends",
    }
}

/// The schedules the viewer reads or operates the workflows of.
pub(crate) async fn rows(engine: &Engine, viewer: &Viewer) -> Result<Vec<ScheduleRow>, EngineError> {
    let principal = &viewer.principal;
    Ok(engine
        .schedules_view()
        .await?
        .into_iter()
        .filter(|v| principal.holds(Role::Read, &v.row.workflow) || principal.holds(Role::Operate, &v.row.workflow))
        .map(|v| {
            let next = match (&v.next_local, v.row.next_at) {
                (Some(local), Some(at)) => format!("{local} = {}", rfc3339(at)),
                (None, Some(at)) => rfc3339(at),
                _ => "none: the calendar has no more instants".to_owned(),
            };
            ScheduleRow {
                may_steer: principal.holds(Role::Operate, &v.row.workflow),
                when: describe(&v.schedule),
                overlap: overlap_words(v.schedule.overlap.unwrap_or_default()),
                next,
                last: v.row.last.as_ref().map(|(at, run)| (rfc3339(*at), run.clone())),
                held: v.row.pending_at.map(rfc3339),
                paused: v.row.paused.as_ref().map(|p| format!("paused by {} at {}: {}", p.by, rfc3339(p.at), p.reason)),
                workflow: v.row.workflow,
                id: v.row.id,
            }
        })
        .collect())
}

/// The pause form.
#[derive(Deserialize)]
pub(super) struct SteerForm {
    #[serde(default)]
    csrf: String,
    /// `pause` or `resume`.
    #[serde(default)]
    change: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/schedules/{workflow}/{id}`: pause or resume it, then the deployment page.
pub(super) async fn steer(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path((workflow, id)): Path<(String, String)>,
    Form(form): Form<SteerForm>,
) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    if !viewer.principal.holds(Role::Operate, &workflow) {
        return forbidden(Role::Operate, Some(&workflow));
    }
    let engine = &state.engine;
    let Some(reason) = super::actions::reason_of(&form.reason) else {
        let refused =
            format!("Schedule {id} of {workflow}: say why (1 to 500 characters); the journal keeps the reason.");
        return super::deployment::render_refused(engine, &viewer, refused).await;
    };
    let subject = viewer.principal.subject();
    let done = match form.change.as_str() {
        "pause" => engine.pause_schedule(&workflow, &id, subject, &reason).await,
        "resume" => engine.resume_schedule(&workflow, &id, subject, &reason).await,
        _ => return super::problem(StatusCode::BAD_REQUEST, "The change is pause or resume."),
    };
    match done {
        Ok(_) => Redirect::to("/console/deployment#schedules").into_response(),
        Err(EngineError::Schedule(_)) => super::problem(
            StatusCode::NOT_FOUND,
            format!("Workflow {workflow} has no schedule {id} in its active revision."),
        ),
        Err(e) => internal(e),
    }
}
