//! Starting a durable batch from the console over every run a filter
//! matches: the run list's filters (`workflow`, `state`, `reason`, `step`,
//! `revision`, `from`, `to`, `run`, `key`, `idempotencyKey`; an attention
//! group is `workflow`, `reason` and `step`). `GET /console/batches/new`
//! shows the machine's dry run first — how many runs match, and of the newest
//! previewed how many the action would apply to and how many the rules would
//! refuse, by code — and asks for a reason; `POST /console/batches` starts
//! the batch and redirects to its page ([`super::batches`]), so a reload
//! starts nothing. Roles as the API's: `operate` for the filter's workflow,
//! or for every workflow when it names none.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::machine::time::Instant;
use coordinator_core::model::runtime::Role;
use coordinator_store::ListFilter;
use serde::Deserialize;
use serde_json::{Value, json};

use super::runs::{ListQuery, filters, internal};
use super::{Chrome, Page, Viewer, page, problem};
use crate::api::ApiState;
use crate::engine::batches::{BatchAction, BatchRequest, DryRun};
use crate::engine::error::EngineError;

/// `?action=` and the run list's filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct NewQuery {
    #[serde(default)]
    action: String,
    #[serde(flatten)]
    filters: ListQuery,
}

#[derive(askama::Template)]
#[template(path = "console/batch_new.html")]
struct NewPage {
    chrome: Chrome,
    action: String,
    label: &'static str,
    /// The filters given, as hidden fields and in words.
    filters: Vec<(&'static str, String)>,
    /// The run list with the same filters.
    runs_href: String,
    dry: DryRun,
    refused: Vec<(String, u64)>,
}

impl Page for NewPage {}

/// The action's name on a button.
fn label(action: BatchAction) -> &'static str {
    match action {
        BatchAction::Reconcile => "Reconcile",
        BatchAction::RetrySame => "Retry with the same key",
        BatchAction::Cancel => "Cancel",
    }
}

/// The batch `action` over the runs `query` filters, for `viewer`; a page in words when it cannot be.
fn request_of(viewer: &Viewer, action: &str, query: &ListQuery, reason: String) -> Result<BatchRequest, Response> {
    let Some(action) = BatchAction::parse(action) else {
        return Err(problem(StatusCode::BAD_REQUEST, "The action is `cancel`, `retry-same` or `reconcile`."));
    };
    let filter = match filters(query) {
        Ok((filter, _)) => filter,
        Err(message) => return Err(problem(StatusCode::BAD_REQUEST, message)),
    };
    let holds = match &filter.workflow {
        Some(workflow) => viewer.principal.holds(Role::Operate, workflow),
        None => viewer.principal.holds_everywhere(Role::Operate),
    };
    if !holds {
        return Err(super::forbidden(Role::Operate, Some(filter.workflow.as_deref().unwrap_or("*"))));
    }
    let filter_json = filter_json(&filter).to_string();
    Ok(BatchRequest { action, filter, filter_json, reason })
}

/// The filter as the API spells it (what the batch shows back).
fn filter_json(filter: &ListFilter) -> Value {
    let mut out = serde_json::Map::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            out.insert(name.to_owned(), json!(value));
        }
    };
    put("workflow", filter.workflow.clone());
    put("state", filter.state.map(|s| s.as_str().to_owned()));
    put("reason", filter.attention.map(|a| a.as_str().to_owned()));
    put("step", filter.step.clone());
    put("revision", filter.revision.clone());
    put("from", filter.admitted_from.map(|at| Instant(at).to_rfc3339()));
    put("to", filter.admitted_to.map(|at| Instant(at).to_rfc3339()));
    put("idempotencyKey", filter.idempotency_key.clone());
    for (name, value) in &filter.keys {
        put(&format!("key.{name}"), Some(value.clone()));
    }
    if let Some(run) = &filter.run_id {
        out.insert("runs".to_owned(), json!([run]));
    }
    Value::Object(out)
}

/// `GET /console/batches/new?action=…&<filters>`: the dry run and the form.
pub(super) async fn new(viewer: Viewer, State(state): State<ApiState>, Query(query): Query<NewQuery>) -> Response {
    let request = match request_of(&viewer, &query.action, &query.filters, String::new()) {
        Ok(request) => request,
        Err(response) => return response,
    };
    let dry = match state.engine.dry_run_batch(&request).await {
        Ok(dry) => dry,
        Err(e) => return internal(e),
    };
    let filters = query.filters.pairs();
    let runs_href = format!("/console/runs?{}", query.filters.filters_query());
    let chrome = Chrome::of(&state.engine, &viewer, "runs").await;
    let refused = dry.would_refuse.iter().map(|(code, n)| (code.clone(), *n)).collect();
    let view = NewPage {
        chrome,
        action: request.action.as_str().to_owned(),
        label: label(request.action),
        filters,
        runs_href,
        dry,
        refused,
    };
    page(&view, StatusCode::OK)
}

/// The form of a batch's start: the action, the operator's reason (`why`)
/// and the run list's filters as hidden fields.
#[derive(Deserialize)]
pub(super) struct StartForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    why: String,
    #[serde(flatten)]
    filters: ListQuery,
}

/// `POST /console/batches`: starts the batch, then its page.
pub(super) async fn start(viewer: Viewer, State(state): State<ApiState>, Form(form): Form<StartForm>) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    let Some(reason) = super::actions::reason_of(&form.why) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "Say why: the journal records the reason with each run. Go back and write one.",
        );
    };
    let request = match request_of(&viewer, &form.action, &form.filters, reason) {
        Ok(request) => request,
        Err(response) => return response,
    };
    match state.engine.start_batch(&request, viewer.principal.subject()).await {
        Ok((id, _)) => Redirect::to(&format!("/console/batches/{id}")).into_response(),
        Err(e @ EngineError::BatchTooLarge) => problem(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
        Err(e) => internal(e),
    }
}
