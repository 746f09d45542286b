//! Durable batches in the console (docs/console.md): started over every run
//! a filter matches ([`super::batch_start`]: from a bulk preview's group or
//! the run list's filters), followed on their own page (`GET
//! /console/batches/{id}`: state, matched, done, refused by code, remaining,
//! and its runs a page at a time — what the batch did to each and where each
//! stands now, in words; kept current by the live updates, as a run's page
//! is) and
//! cancelled there. The console's bulk actions are batches over the runs
//! their preview listed ([`super::actions`]). The work is
//! [`crate::engine::batches`]'s; roles as the API's (`operate` for the
//! batch's workflow).

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::model::runtime::Role;
use coordinator_store::{BatchView, ListFilter};
use serde::Deserialize;

use super::runs::internal;
use super::{Chrome, Page, Viewer, page, problem, rfc3339};
use crate::api::ApiState;
use crate::engine::error::EngineError;

/// Runs listed on one page of a batch.
const RUNS_PER_PAGE: u32 = 100;

/// One run of a batch as its page lists it.
#[derive(Debug, Clone)]
pub(crate) struct RunLine {
    pub(crate) run: String,
    /// `done`, `refused` or `pending`.
    pub(crate) outcome: String,
    /// What the batch did, in words.
    pub(crate) did: String,
    /// Where the run stands now, in words.
    pub(crate) now: String,
}

/// A batch as its page shows it.
/// The live part of a batch's page: its progress and a page of its runs.
#[derive(Debug, Clone)]
pub(crate) struct BatchBody {
    batch: BatchView,
    acted: u64,
    refused: Vec<(String, u64)>,
    created: String,
    ended: Option<String>,
    /// A page of its runs.
    runs: Vec<RunLine>,
    /// The outcome the list keeps (empty: every run).
    outcome: String,
    /// The link to the next page of runs.
    next: Option<String>,
}

#[derive(askama::Template)]
#[template(path = "console/batch.html")]
struct BatchPage {
    chrome: Chrome,
    body: BatchBody,
    workflow: String,
    may_cancel: bool,
    /// The live region's own URL.
    live: String,
}

#[derive(askama::Template)]
#[template(path = "console/batch_fragment.html")]
struct BatchFragment {
    body: BatchBody,
}

impl Page for BatchFragment {}

/// `?outcome=&after=` of a batch page.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RunsQuery {
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    after: String,
    /// `1`: the live part only.
    #[serde(default)]
    fragment: String,
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, String>,
}

/// Where a run stands, in words.
fn standing(row: &coordinator_store::RunRow) -> String {
    use coordinator_core::model::run::RunState;
    match row.state {
        RunState::Running => "running".to_owned(),
        RunState::Attention if row.held => "in attention: held by the restore hold".to_owned(),
        RunState::Attention => match &row.attention_step {
            Some(step) => format!("in attention: the effect of {step} is unknown"),
            None => "in attention".to_owned(),
        },
        RunState::CancelRequested => "cancel requested: following its cancel route".to_owned(),
        RunState::Finished => match &row.outcome {
            Some(outcome) => format!("finished: {outcome}"),
            None => "finished".to_owned(),
        },
        RunState::Failed => "failed".to_owned(),
        RunState::Cancelled => "cancelled".to_owned(),
        RunState::CancelledAfterEffect => "cancelled after an effect".to_owned(),
        RunState::Expired => "expired: its deadline passed".to_owned(),
    }
}

/// A page of batch `id`'s runs with what the batch did to each and where each stands now.
async fn run_lines(
    state: &ApiState,
    id: &str,
    action: &str,
    outcome: Option<&str>,
    after: Option<&str>,
) -> Result<(Vec<RunLine>, Option<String>), EngineError> {
    let store = state.engine.store();
    let found = store.batch_runs(id, outcome, after, RUNS_PER_PAGE).await?;
    let ids: Vec<String> = found.iter().map(|r| r.run_id.clone()).collect();
    let filter = ListFilter { run_ids: Some(ids), ..ListFilter::default() };
    let rows = store.list_runs_newest(&filter, None, RUNS_PER_PAGE).await?.runs;
    let lines = found
        .iter()
        .map(|r| {
            let did = match (r.outcome.as_deref(), r.code.as_deref()) {
                (Some("done"), _) => format!("{action}: applied"),
                (Some("refused"), Some(code)) => format!("refused by the rules: {code}"),
                (Some(other), _) => other.to_owned(),
                (None, _) => "not yet".to_owned(),
            };
            let now = rows.iter().find(|row| row.id == r.run_id).map_or_else(|| "no longer kept".to_owned(), standing);
            RunLine {
                run: r.run_id.clone(),
                outcome: r.outcome.clone().unwrap_or_else(|| "pending".to_owned()),
                did,
                now,
            }
        })
        .collect();
    let full = found.len() == usize::try_from(RUNS_PER_PAGE).unwrap_or(usize::MAX);
    Ok((lines, full.then(|| found.last().map(|r| r.run_id.clone())).flatten()))
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
pub(super) async fn page_of(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path(id): Path<String>,
    Query(query): Query<RunsQuery>,
) -> Response {
    if let Some(name) = query.unknown.keys().next() {
        let name = name.escape_default();
        return problem(
            StatusCode::BAD_REQUEST,
            format!("`{name}` is not a parameter of a batch's page: `outcome` and `after` are."),
        );
    }
    let outcome = match query.outcome.as_str() {
        "" => None,
        o @ ("done" | "refused" | "pending") => Some(o),
        _ => return problem(StatusCode::BAD_REQUEST, "`outcome` is `done`, `refused` or `pending`."),
    };
    let after = match query.after.as_str() {
        "" => None,
        a => match uuid::Uuid::try_parse(a) {
            Ok(run) => Some(run.hyphenated().to_string()),
            Err(_) => return problem(StatusCode::BAD_REQUEST, "`after` is a run id."),
        },
    };
    let (batch, workflow) = match visible(&state, &viewer, &id).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (runs, next) = match run_lines(&state, &id, &batch.action, outcome, after.as_deref()).await {
        Ok(found) => found,
        Err(e) => return internal(e),
    };
    let next = next.map(|after| {
        let keep = outcome.map_or_else(String::new, |o| format!("outcome={o}&"));
        format!("/console/batches/{id}?{keep}after={after}")
    });
    let refused: Vec<(String, u64)> = batch.refused.iter().map(|(c, n)| (c.clone(), *n)).collect();
    let acted = batch.done + refused.iter().map(|(_, n)| n).sum::<u64>();
    let may_cancel = batch.state == "running";
    let mut live = format!("/console/batches/{id}");
    let kept: Vec<String> = [("outcome", outcome.map(str::to_owned)), ("after", after)]
        .into_iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", v?)))
        .collect();
    if !kept.is_empty() {
        live = format!("{live}?{}", kept.join("&"));
    }
    let body = BatchBody {
        created: rfc3339(batch.created_at),
        ended: batch.ended_at.map(rfc3339),
        acted,
        refused,
        batch,
        runs,
        outcome: outcome.unwrap_or_default().to_owned(),
        next,
    };
    if !query.fragment.is_empty() {
        return page(&BatchFragment { body }, StatusCode::OK);
    }
    let chrome = Chrome::of(&state.engine, &viewer, "attention").await;
    page(&BatchPage { chrome, body, workflow, may_cancel, live }, StatusCode::OK)
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
