//! Durable batches in the console (docs/console.md): started from a bulk
//! preview over every run its group matches, not only the 100 it lists
//! (`POST /console/batches`, then a redirect to the batch's page, so a reload
//! never starts another), followed on their own page (`GET
//! /console/batches/{id}`: state, matched, done, refused by code, remaining;
//! reloaded every two seconds while it runs) and cancelled there. The work is
//! [`crate::engine::batches`]'s; roles as the API's (`operate` for the
//! batch's workflow).

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::model::runtime::Role;
use coordinator_store::{AttentionReason, BatchView, ListFilter};
use serde::Deserialize;
use serde_json::json;

use super::runs::internal;
use super::{Chrome, Page, Viewer, page, problem, rfc3339};
use crate::api::ApiState;
use crate::engine::batches::{BatchAction, BatchRequest};
use crate::engine::error::EngineError;

/// The form of a bulk preview's "all matching runs".
#[derive(Deserialize)]
pub(super) struct StartForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    workflow: String,
    /// The attention reason of the group (`unknown-effect`, `restore-hold`).
    #[serde(default)]
    attention: String,
    #[serde(default)]
    step: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/batches`.
pub(super) async fn start(viewer: Viewer, State(state): State<ApiState>, Form(form): Form<StartForm>) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    let Some(action) = BatchAction::parse(&form.action) else {
        return problem(StatusCode::BAD_REQUEST, "The action is `cancel`, `retry-same` or `reconcile`.");
    };
    let workflow = form.workflow.trim().to_owned();
    if workflow.is_empty() {
        return problem(
            StatusCode::BAD_REQUEST,
            "A batch needs the workflow of its group: start it from a group of the attention inbox.",
        );
    }
    if !viewer.principal.holds(Role::Operate, &workflow) {
        return super::forbidden(Role::Operate, Some(&workflow));
    }
    let Some(reason) = super::actions::reason_of(&form.reason) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "Say why: the journal records the reason with each run. Go back and write one.",
        );
    };
    let attention = match form.attention.as_str() {
        "restore-hold" => AttentionReason::RestoreHold,
        _ => AttentionReason::UnknownEffect,
    };
    let step = form.step.trim();
    let filter = ListFilter {
        workflow: Some(workflow.clone()),
        attention: Some(attention),
        step: (!step.is_empty()).then(|| step.to_owned()),
        ..ListFilter::default()
    };
    let mut filter_json = json!({"workflow": workflow, "reason": attention.as_str()});
    if !step.is_empty() {
        filter_json["step"] = json!(step);
    }
    let request = BatchRequest { action, filter, filter_json: filter_json.to_string(), reason };
    match state.engine.start_batch(&request, viewer.principal.subject()).await {
        Ok((id, _)) => Redirect::to(&format!("/console/batches/{id}")).into_response(),
        Err(e @ EngineError::BatchTooLarge) => problem(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
        Err(e) => internal(e),
    }
}

/// A batch as its page shows it.
#[derive(askama::Template)]
#[template(path = "console/batch.html")]
struct BatchPage {
    chrome: Chrome,
    batch: BatchView,
    workflow: String,
    acted: u64,
    refused: Vec<(String, u64)>,
    created: String,
    ended: Option<String>,
    may_cancel: bool,
}

impl Page for BatchPage {}

/// The batch `id` when the viewer operates its workflow (none: every workflow).
async fn visible(state: &ApiState, viewer: &Viewer, id: &str) -> Result<(BatchView, String), Response> {
    let missing = || problem(StatusCode::NOT_FOUND, format!("There is no batch `{id}` you may see."));
    let batch = match state.engine.store().batch(id).await {
        Ok(Some(batch)) => batch,
        Ok(None) => return Err(missing()),
        Err(e) => return Err(internal(e.into())),
    };
    let filter: serde_json::Value = serde_json::from_str(&batch.filter).unwrap_or_default();
    let workflow = filter["workflow"].as_str().map(str::to_owned);
    let may = match &workflow {
        Some(w) => viewer.principal.holds(Role::Operate, w),
        None => viewer.principal.holds_everywhere(Role::Operate),
    };
    if !may {
        return Err(missing());
    }
    Ok((batch, workflow.unwrap_or_else(|| "every workflow".to_owned())))
}

/// `GET /console/batches/{id}`.
pub(super) async fn page_of(viewer: Viewer, State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let (batch, workflow) = match visible(&state, &viewer, &id).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let refused: Vec<(String, u64)> = batch.refused.iter().map(|(c, n)| (c.clone(), *n)).collect();
    let acted = batch.done + refused.iter().map(|(_, n)| n).sum::<u64>();
    let chrome = Chrome::of(&state.engine, &viewer, "attention").await;
    let view = BatchPage {
        chrome,
        created: rfc3339(batch.created_at),
        ended: batch.ended_at.map(rfc3339),
        may_cancel: batch.state == "running",
        workflow,
        acted,
        refused,
        batch,
    };
    page(&view, StatusCode::OK)
}

/// The form of a batch page's cancel.
#[derive(Deserialize)]
pub(super) struct CancelForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /console/batches/{id}/cancel`, then back to its page.
pub(super) async fn cancel(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path(id): Path<String>,
    Form(form): Form<CancelForm>,
) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    if let Err(response) = visible(&state, &viewer, &id).await {
        return response;
    }
    match state.engine.store().cancel_batch(&id, viewer.principal.subject(), state.engine.now()).await {
        Ok(_) => Redirect::to(&format!("/console/batches/{id}")).into_response(),
        Err(e) => internal(e.into()),
    }
}
