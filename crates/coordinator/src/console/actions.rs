//! Operator actions from the console: cancel, retry-same and reconcile, one
//! run at a time or in bulk over a selection of the attention inbox.
//!
//! Every action is confirmed first: its page says what it will do, computed
//! by the pure machine on the run's current snapshot as a dry run
//! ([`preview`], nothing written) — or that the rules refuse it, and why. The
//! form asks for a reason, which the journal records with the command (an
//! `operator` entry `reason given: …`, beside the machine's own, with the
//! operator's subject). A bulk action previews each run of the selection
//! (at most [`BULK_MAX`], oldest in attention first) and acts only on the
//! runs it previewed, as a durable batch over them (filter `runs`): the
//! POST redirects to the batch's page, which reports a result per run. Every POST checks the
//! session's CSRF token and the `operate` role for the run's workflow, as the
//! API does.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::model::runtime::Role;
use coordinator_store::{AttentionReason, ListFilter};
use serde::Deserialize;

use super::run::visible;
use super::runs::internal;
use super::{Chrome, Page, Viewer, page, problem};
use crate::api::ApiState;
use crate::engine::Engine;
use crate::engine::batches::{BatchAction, BatchRequest};
use crate::engine::error::EngineError;
use crate::engine::recovery::inspection::RecoveryAction;
use crate::engine::recovery::preview::{self, Preview};

/// The most runs one bulk action acts on.
pub(crate) const BULK_MAX: u32 = 100;
/// The longest reason kept.
const REASON_MAX: usize = 500;

fn action_of(slug: &str) -> Option<RecoveryAction> {
    match slug {
        "reconcile" => Some(RecoveryAction::Reconcile),
        "retry-same" => Some(RecoveryAction::RetrySame),
        "cancel" => Some(RecoveryAction::Cancel),
        _ => None,
    }
}

fn words(action: RecoveryAction) -> (&'static str, &'static str) {
    match action {
        RecoveryAction::Reconcile => {
            ("Reconcile", "looks up the receipt of the call's original idempotency key; nothing is sent again")
        }
        RecoveryAction::RetrySame => {
            ("Retry with the same key", "sends the saved command again with its original idempotency key")
        }
        RecoveryAction::Cancel => ("Cancel", "asks the run to stop along its cancel route"),
    }
}

/// A reason as kept: trimmed, control characters dropped, at most [`REASON_MAX`] characters.
pub(super) fn reason_of(text: &str) -> Option<String> {
    let clean: String = text.trim().chars().filter(|c| !c.is_control() || *c == ' ').take(REASON_MAX).collect();
    (!clean.is_empty()).then_some(clean)
}

/// `?step=` of an action.
#[derive(Debug, Default, Deserialize)]
pub(super) struct StepQuery {
    #[serde(default)]
    step: String,
}

#[derive(askama::Template)]
#[template(path = "console/confirm.html")]
struct ConfirmPage {
    chrome: Chrome,
    run: String,
    slug: String,
    step: String,
    label: &'static str,
    means: &'static str,
    changes: Vec<String>,
    refused: Option<String>,
    problem: Option<String>,
}

impl Page for ConfirmPage {}

/// The preview of `action` on run `id` at `step`, for the viewer (who must operate).
async fn dry_run(
    engine: &Engine,
    viewer: &Viewer,
    id: &str,
    action: RecoveryAction,
    step: &str,
) -> Result<Preview, Response> {
    let row = visible(engine, viewer, id, Role::Operate).await?;
    let (run, wf) = engine.opened(&row).await.map_err(internal)?;
    let now = coordinator_core::machine::time::Instant(engine.now());
    Ok(preview::preview(&wf, &run, now, engine.settings(), &preview::command(action, step)))
}

fn split(dry: &Preview) -> (Vec<String>, Option<String>) {
    match dry {
        Preview::Applies { changes } => (changes.clone(), None),
        Preview::Refused { code, message } => (Vec::new(), Some(format!("{message} ({code})"))),
        Preview::Ignored { reason } => (Vec::new(), Some(format!("There is nothing to do: {reason}."))),
    }
}

/// `GET /console/runs/{id}/actions/{action}`: the confirmation.
pub(super) async fn confirm(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path((id, slug)): Path<(String, String)>,
    Query(query): Query<StepQuery>,
) -> Response {
    let Some(action) = action_of(&slug) else {
        return problem(StatusCode::NOT_FOUND, "The actions are cancel, retry-same and reconcile.");
    };
    let step = query.step.trim().to_owned();
    if action != RecoveryAction::Cancel && step.is_empty() {
        return problem(StatusCode::BAD_REQUEST, "Name the call: ?step=STEP.");
    }
    let dry = match dry_run(&state.engine, &viewer, &id, action, &step).await {
        Ok(dry) => dry,
        Err(response) => return response,
    };
    let (changes, refused) = split(&dry);
    let (label, means) = words(action);
    let chrome = Chrome::of(&state.engine, &viewer, "runs").await;
    page(&ConfirmPage { chrome, run: id, slug, step, label, means, changes, refused, problem: None }, StatusCode::OK)
}

/// The confirmation form.
#[derive(Deserialize)]
pub(super) struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    step: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/runs/{id}/actions/{action}`: the action, then the run's page.
pub(super) async fn perform(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path((id, slug)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    let Some(action) = action_of(&slug) else {
        return problem(StatusCode::NOT_FOUND, "The actions are cancel, retry-same and reconcile.");
    };
    let engine = &state.engine;
    if let Err(response) = visible(engine, &viewer, &id, Role::Operate).await {
        return response;
    }
    let step = form.step.trim().to_owned();
    let Some(reason) = reason_of(&form.reason) else {
        let problem = "Say why: the journal records the reason with the action.".to_owned();
        return again(engine, &viewer, &id, &slug, action, &step, problem, StatusCode::BAD_REQUEST).await;
    };
    let event = preview::command(action, &step);
    match engine.handle_as_because(&id, &event, engine.now(), viewer.principal.subject(), &reason).await {
        Ok(()) | Err(EngineError::Ignored(_)) => Redirect::to(&format!("/console/runs/{id}")).into_response(),
        Err(EngineError::Refused { code }) => {
            let problem = format!("The rules refused it just now ({code}).");
            again(engine, &viewer, &id, &slug, action, &step, problem, StatusCode::CONFLICT).await
        }
        Err(e) => internal(e),
    }
}

/// The "observe now" form.
#[derive(Deserialize)]
pub(super) struct ObserveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    step: String,
}

/// `POST /console/runs/{id}/observe`: the run's current wait looks at the
/// product now rather than at its next scheduled look (what a completion
/// notification does; the operator is journaled as its actor), then the
/// run's page. A wait that ended or is being looked at is left as it is.
pub(super) async fn observe(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path(id): Path<String>,
    Form(form): Form<ObserveForm>,
) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    let engine = &state.engine;
    if let Err(response) = visible(engine, &viewer, &id, Role::Operate).await {
        return response;
    }
    let step = form.step.trim().to_owned();
    if step.is_empty() {
        return problem(StatusCode::BAD_REQUEST, "Name the wait: `step`.");
    }
    let event = coordinator_core::machine::event::Event::CompletionNotified { step };
    match engine.handle_as(&id, &event, engine.now(), viewer.principal.subject()).await {
        Ok(()) | Err(EngineError::Ignored(_)) => Redirect::to(&format!("/console/runs/{id}")).into_response(),
        Err(EngineError::Refused { code }) => {
            problem(StatusCode::CONFLICT, format!("The rules refused it just now (`{code}`)."))
        }
        Err(e) => internal(e),
    }
}

/// The confirmation again, with what went wrong.
#[allow(clippy::too_many_arguments, reason = "the parts of one confirmation page")]
async fn again(
    engine: &Engine,
    viewer: &Viewer,
    id: &str,
    slug: &str,
    action: RecoveryAction,
    step: &str,
    problem: String,
    status: StatusCode,
) -> Response {
    let dry = match dry_run(engine, viewer, id, action, step).await {
        Ok(dry) => dry,
        Err(response) => return response,
    };
    let (changes, refused) = split(&dry);
    let (label, means) = words(action);
    let chrome = Chrome::of(engine, viewer, "runs").await;
    let view = ConfirmPage {
        chrome,
        run: id.to_owned(),
        slug: slug.to_owned(),
        step: step.to_owned(),
        label,
        means,
        changes,
        refused,
        problem: Some(problem),
    };
    page(&view, status)
}

/// The selection of a bulk action (as the inbox links to it).
#[derive(Debug, Default, Deserialize)]
pub(super) struct BulkQuery {
    #[serde(default)]
    action: String,
    #[serde(default)]
    workflow: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    step: String,
}

/// One run of a bulk preview: what the machine says the action would do.
#[derive(Debug, Clone)]
pub(crate) struct BulkRow {
    pub(crate) run: String,
    pub(crate) outcome: String,
    pub(crate) ok: bool,
}

#[derive(askama::Template)]
#[template(path = "console/bulk.html")]
struct BulkPage {
    chrome: Chrome,
    action: String,
    label: &'static str,
    means: &'static str,
    workflow: String,
    step: String,
    rows: Vec<BulkRow>,
    runs: String,
    applicable: usize,
    more: bool,
    /// Every run of the group (a batch takes them all), counted up to the most a batch holds.
    matched: u64,
    /// The group's attention reason, for the batch form.
    attention: String,
}

impl Page for BulkPage {}

/// `GET /console/bulk`: the selection previewed run by run.
pub(super) async fn bulk_preview(
    viewer: Viewer,
    State(state): State<ApiState>,
    Query(query): Query<BulkQuery>,
) -> Response {
    let engine = &state.engine;
    let Some(action) = action_of(&query.action) else {
        return problem(StatusCode::BAD_REQUEST, "action is cancel, retry-same or reconcile");
    };
    let workflow = query.workflow.trim().to_owned();
    if workflow.is_empty() {
        return problem(
            StatusCode::BAD_REQUEST,
            "A bulk action needs its group's `workflow`: open a group in the attention inbox and choose an action there.",
        );
    }
    if !viewer.principal.holds(Role::Operate, &workflow) {
        return super::forbidden(Role::Operate, Some(&workflow));
    }
    let attention = match query.reason.as_str() {
        "restore-hold" => AttentionReason::RestoreHold,
        _ => AttentionReason::UnknownEffect,
    };
    let step = query.step.trim().to_owned();
    let filter = ListFilter {
        workflow: Some(workflow.clone()),
        attention: Some(attention),
        step: (!step.is_empty()).then(|| step.clone()),
        ..ListFilter::default()
    };
    let (selected, next) = match engine.store().attention_runs(&filter, None, BULK_MAX).await {
        Ok(found) => found,
        Err(e) => return internal(e.into()),
    };
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for row in &selected {
        let outcome = match dry_run(engine, &viewer, &row.id, action, &step).await {
            Ok(Preview::Applies { changes }) => {
                runs.push(row.id.clone());
                BulkRow { run: row.id.clone(), outcome: changes.join("; "), ok: true }
            }
            Ok(other) => BulkRow { run: row.id.clone(), outcome: split(&other).1.unwrap_or_default(), ok: false },
            Err(_) => BulkRow { run: row.id.clone(), outcome: "not available to you".to_owned(), ok: false },
        };
        rows.push(outcome);
    }
    let matched = match engine.store().count_matching(&filter, coordinator_store::MOST_BATCH_RUNS).await {
        Ok(n) => n,
        Err(e) => return internal(e.into()),
    };
    let (label, means) = words(action);
    let chrome = Chrome::of(engine, &viewer, "attention").await;
    let view = BulkPage {
        chrome,
        action: query.action.clone(),
        label,
        means,
        workflow,
        step,
        applicable: runs.len(),
        runs: runs.join(","),
        rows,
        more: next.is_some(),
        matched,
        attention: attention.as_str().to_owned(),
    };
    page(&view, StatusCode::OK)
}

/// The bulk form: the runs previewed, the action, the reason.
#[derive(Deserialize)]
pub(super) struct BulkForm {
    #[serde(default)]
    csrf: String,
    action: String,
    #[serde(default)]
    workflow: String,
    #[serde(default)]
    runs: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/bulk`: a durable batch over the previewed runs (filter
/// `runs`), then its page (`303`), which says what happened to each run and
/// where it stands: a reload never acts again.
pub(super) async fn bulk_perform(
    viewer: Viewer,
    State(state): State<ApiState>,
    Form(form): Form<BulkForm>,
) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    let engine = &state.engine;
    let Some(action) = BatchAction::parse(&form.action) else {
        return problem(StatusCode::BAD_REQUEST, "The action is `cancel`, `retry-same` or `reconcile`.");
    };
    let workflow = form.workflow.trim().to_owned();
    if workflow.is_empty() {
        return problem(
            StatusCode::BAD_REQUEST,
            "A bulk action needs its group's workflow: open a group in the attention inbox and choose an action there.",
        );
    }
    if !viewer.principal.holds(Role::Operate, &workflow) {
        return super::forbidden(Role::Operate, Some(&workflow));
    }
    let mut runs: Vec<String> = Vec::new();
    for run in form.runs.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let Ok(id) = uuid::Uuid::try_parse(run) else {
            return problem(StatusCode::BAD_REQUEST, "The selection holds something that is not a run id.");
        };
        let id = id.hyphenated().to_string();
        if !runs.contains(&id) {
            runs.push(id);
        }
    }
    if runs.is_empty() || runs.len() > usize::try_from(BULK_MAX).unwrap_or(usize::MAX) {
        return problem(StatusCode::BAD_REQUEST, format!("A bulk action takes 1 to {BULK_MAX} runs of its preview."));
    }
    let Some(reason) = reason_of(&form.reason) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "Say why: the journal records the reason with each run. Go back and write one.",
        );
    };
    let filter_json = serde_json::json!({"workflow": workflow, "runs": runs}).to_string();
    let filter = ListFilter { workflow: Some(workflow), run_ids: Some(runs), ..ListFilter::default() };
    let request = BatchRequest { action, filter, filter_json, reason };
    match engine.start_batch(&request, viewer.principal.subject()).await {
        Ok((id, _)) => Redirect::to(&format!("/console/batches/{id}")).into_response(),
        Err(e) => internal(e),
    }
}
