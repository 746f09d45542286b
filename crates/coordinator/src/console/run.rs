//! One run's page (`/console/runs/{id}`): state, outcome, revision, admitted
//! and deadline instants, hold, owner; the workflow graph with the run's path
//! and each step's state marked (`/console/runs/{id}/graph.svg`, drawn by
//! `coordinator-graph`, with a legend in words); each call's effect,
//! attempts, next attempt and last receipt, with the recovery actions the
//! machine accepts and, for those it refuses, its reason; each wait's timing
//! and one sentence saying why the run waits; the run's journal; a finished
//! run's published output. Built from [`inspection`] (which shows nothing
//! protected) and [`preview`]; the viewer needs `read` on an own run or `operate`.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use coordinator_core::machine::Settings;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::model::run::{EffectState, RunState};
use coordinator_core::model::runtime::Role;
use coordinator_graph::{Marks, StepMark};
use coordinator_store::RunRow;
use serde::Deserialize;

use super::runs::internal;
use super::{Chrome, Page, Viewer, forbidden, page, problem, rfc3339};
use crate::api::ApiState;
use crate::auth::access::RunAccess;
use crate::engine::Engine;
use crate::engine::error::EngineError;
use crate::engine::recovery::inspection::{self, Inspection, RecoveryAction, StepView};
use crate::engine::recovery::preview::{self, Preview};

/// A recovery action on the page: offered (a link to its confirmation) or refused and why.
#[derive(Debug, Clone)]
pub(crate) struct ActionView {
    pub(crate) label: &'static str,
    pub(crate) href: String,
    pub(crate) refused: Option<String>,
}

/// One step of the page.
#[derive(Debug, Clone)]
pub(crate) struct StepRow {
    pub(crate) position: usize,
    pub(crate) step: String,
    pub(crate) kind: &'static str,
    pub(crate) current: bool,
    /// A call's facts (operation, effect, attempts, …), one line each.
    pub(crate) facts: Vec<(&'static str, String)>,
    /// Why the run waits here (a current wait).
    pub(crate) why: Option<String>,
    pub(crate) actions: Vec<ActionView>,
    /// Whether an operator may bring the wait's next look forward now.
    pub(crate) observe: bool,
}

/// One journal entry.
#[derive(Debug, Clone)]
pub(crate) struct EntryRow {
    pub(crate) position: i64,
    pub(crate) at: String,
    pub(crate) kind: String,
    pub(crate) step: String,
    pub(crate) actor: String,
    pub(crate) detail: String,
}

/// The page of the run's journal shown: newest first, a page at a time.
#[derive(Debug, Clone, Default)]
pub(crate) struct JournalView {
    /// The entries, newest first.
    pub(crate) entries: Vec<EntryRow>,
    /// Every entry the run has in the journal.
    pub(crate) total: u64,
    /// How many newer entries precede this page (0 on the first).
    pub(crate) skipped: u64,
    /// The link to the older entries, when there are some.
    pub(crate) older: Option<String>,
}

impl JournalView {
    /// The position (1-based, newest first) of the page's first entry.
    pub(crate) fn first(&self) -> u64 {
        self.skipped + 1
    }

    /// The position (newest first) of the page's last entry.
    pub(crate) fn last(&self) -> u64 {
        self.skipped + self.entries.len() as u64
    }
}

/// Journal entries per page.
const JOURNAL_PAGE: u32 = 100;

/// The live part of the page.
#[derive(Debug, Clone)]
pub(crate) struct RunBody {
    pub(crate) id: String,
    pub(crate) facts: Vec<(&'static str, String)>,
    pub(crate) state: &'static str,
    pub(crate) attention: Option<String>,
    /// What the run waits on that only an operator ends (a paused connection).
    pub(crate) waiting: Option<String>,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) run_actions: Vec<ActionView>,
    pub(crate) journal: JournalView,
    pub(crate) output: Option<String>,
    /// The session's CSRF token, for the forms in the live part.
    pub(crate) csrf: String,
    /// Changes with every state change, so the graph image is fetched again.
    pub(crate) graph_version: String,
    pub(crate) graph_alt: String,
}

/// A legend entry of the graph.
#[derive(Debug, Clone)]
pub(crate) struct LegendEntry {
    pub(crate) tag: &'static str,
    pub(crate) label: &'static str,
    pub(crate) colour: &'static str,
}

#[derive(askama::Template)]
#[template(path = "console/run.html")]
struct RunPage {
    chrome: Chrome,
    body: RunBody,
    legend: Vec<LegendEntry>,
    live: String,
}

#[derive(askama::Template)]
#[template(path = "console/run_fragment.html")]
struct RunFragment {
    body: RunBody,
}

impl Page for RunPage {}
impl Page for RunFragment {}

/// `?fragment=1` asks for the live part only; `?before=POSITION` the
/// journal's entries older than that position.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RunQuery {
    #[serde(default)]
    fragment: String,
    #[serde(default)]
    before: String,
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, String>,
}

/// The run `id` when the viewer may see it (`read` on an own run, or `operate`):
/// a run they may not know of is `404`, one they know of without the role `403`.
pub(crate) async fn visible(engine: &Engine, viewer: &Viewer, id: &str, role: Role) -> Result<RunRow, Response> {
    let row = match engine.store().load(id).await {
        Ok(Some(row)) => row,
        Ok(None) => return Err(problem(StatusCode::NOT_FOUND, "There is no such run, or you may not see it.")),
        Err(e) => return Err(internal(e.into())),
    };
    match viewer.principal.run_access(&row.owner, &row.workflow, role) {
        RunAccess::Allowed => Ok(row),
        RunAccess::Forbidden => Err(forbidden(role, Some(&row.workflow))),
        RunAccess::Hidden => Err(problem(StatusCode::NOT_FOUND, "There is no such run, or you may not see it.")),
    }
}

/// `GET /console/runs/{id}`.
pub(super) async fn page_of(
    viewer: Viewer,
    State(state): State<ApiState>,
    Path(id): Path<String>,
    Query(query): Query<RunQuery>,
) -> Response {
    let engine = &state.engine;
    if let Some(name) = query.unknown.keys().next() {
        let name = name.escape_default();
        return problem(StatusCode::BAD_REQUEST, format!("`{name}` is not a parameter of a run's page: `before` is."));
    }
    let before = match query.before.trim() {
        "" => None,
        text => match text.parse::<i64>() {
            Ok(position) if position > 0 => Some(position),
            _ => return problem(StatusCode::BAD_REQUEST, "`before` is a journal position: a whole number above 0."),
        },
    };
    let row = match visible(engine, &viewer, &id, Role::Read).await {
        Ok(row) => row,
        Err(response) => return response,
    };
    let body = match body(engine, &viewer, row, before).await {
        Ok(body) => body,
        Err(e) => return internal(e),
    };
    if !query.fragment.is_empty() {
        return page(&RunFragment { body }, StatusCode::OK);
    }
    let chrome = Chrome::of(engine, &viewer, "runs").await;
    let mut view = run_page(chrome, body);
    if let Some(before) = before {
        view.live = format!("{}?before={before}", view.live);
    }
    page(&view, StatusCode::OK)
}

/// The whole page of a run.
fn run_page(chrome: Chrome, body: RunBody) -> RunPage {
    let legend = coordinator_graph::legend()
        .into_iter()
        .map(|entry| LegendEntry { tag: entry.tag, label: entry.label, colour: entry.fill })
        .collect();
    let live = format!("/console/runs/{}", body.id);
    RunPage { chrome, body, legend, live }
}

async fn body(engine: &Engine, viewer: &Viewer, row: RunRow, before: Option<i64>) -> Result<RunBody, EngineError> {
    let (run, wf) = engine.opened(&row).await?;
    let operates = viewer.principal.holds(Role::Operate, &row.workflow);
    let journal = journal(engine, &row.id, before).await?;
    let now = Instant(engine.now());
    let mut body = render_body(&wf, &run, &row, now, engine.settings(), operates, journal);
    body.csrf = viewer.csrf.clone();
    // The caller's own identifier and the workflow's search keys, after the revision.
    let mut keys: Vec<(&'static str, String)> =
        row.idempotency_key.iter().map(|key| ("Idempotency key", key.clone())).collect();
    for (name, value) in engine.store().run_search_keys(&row.id).await? {
        keys.push(("Search key", format!("{name} = {value}")));
    }
    let at = body.facts.iter().position(|(label, _)| *label == "Revision").map_or(body.facts.len(), |i| i + 1);
    body.facts.splice(at..at, keys);
    let paused: std::collections::BTreeMap<String, coordinator_store::Pause> = engine
        .store()
        .connection_states()
        .await?
        .into_iter()
        .filter_map(|s| s.paused.map(|pause| (s.name, pause)))
        .collect();
    if !paused.is_empty() {
        let inspected = inspection::with_pauses(inspection::inspect(&wf, &run, now, engine.settings()), &paused);
        body.waiting = inspected.waiting.map(|w| w.message);
    }
    Ok(body)
}

/// The live part of a run's page from the run as it stands (pure: snapshot tests use it).
pub(crate) fn render_body(
    wf: &Workflow,
    run: &Run,
    row: &RunRow,
    now: Instant,
    settings: &Settings,
    operates: bool,
    journal: JournalView,
) -> RunBody {
    let inspection = inspection::inspect(wf, run, now, settings);
    let steps = inspection.steps.iter().map(|s| step_row(wf, run, now, settings, s, operates, &row.id)).collect();
    let mut run_actions = Vec::new();
    if operates && !run.state.is_terminal() {
        let cancel = preview::preview(wf, run, now, settings, &preview::command(RecoveryAction::Cancel, ""));
        run_actions.push(action_view(&row.id, RecoveryAction::Cancel, None, &cancel));
    }
    let output = if run.state == RunState::Finished {
        run.output.as_ref().and_then(|o| serde_json::to_string_pretty(o).ok())
    } else {
        None
    };
    RunBody {
        id: row.id.clone(),
        facts: facts(&inspection, row),
        state: run.state.as_str(),
        attention: attention_sentence(&inspection),
        waiting: None,
        steps,
        run_actions,
        journal,
        output,
        csrf: String::new(),
        graph_version: format!("{}", row.version),
        graph_alt: format!(
            "The steps of workflow {}, the run's path and its current step marked; the table of steps says the same.",
            row.workflow
        ),
    }
}

fn facts(inspection: &Inspection, row: &RunRow) -> Vec<(&'static str, String)> {
    let mut facts = vec![
        ("Run", row.id.clone()),
        ("Workflow", row.workflow.clone()),
        ("Revision", row.revision.clone()),
        ("State", inspection.state.as_str().to_owned()),
    ];
    if let Some(outcome) = &inspection.outcome {
        facts.push(("Outcome", outcome.clone()));
    }
    if let Some(failure) = &inspection.failure {
        facts.push(("Failure", format!("{} — {}", failure.code, failure.message)));
    }
    facts.push(("Admitted", inspection.admitted_at.clone()));
    facts.push(("Deadline", inspection.deadline_at.clone()));
    facts.push(("Updated", rfc3339(row.updated_at)));
    facts.push(("Owner", row.owner.clone()));
    facts.push(("Restore hold", if inspection.hold { "placed".to_owned() } else { "none".to_owned() }));
    if inspection.cancel_requested {
        facts.push(("Cancel", "requested".to_owned()));
    }
    facts
}

fn attention_sentence(inspection: &Inspection) -> Option<String> {
    let attention = inspection.attention.as_ref()?;
    Some(match (attention.reason, &attention.step) {
        ("unknown-effect", Some(step)) => format!(
            "The effect of {step} is unknown: its request may have reached the product and no answer settled it. \
             Nothing is sent again until an operator reconciles, retries with the same key or cancels."
        ),
        ("restore-hold", _) => "A restore hold is placed: nothing is dispatched until it is released.".to_owned(),
        (reason, _) => format!("The run needs an operator ({reason})."),
    })
}

fn step_row(
    wf: &Workflow,
    run: &Run,
    now: Instant,
    settings: &Settings,
    view: &StepView,
    operates: bool,
    run_id: &str,
) -> StepRow {
    let mut facts = Vec::new();
    let mut actions = Vec::new();
    if let Some(call) = &view.call {
        facts.push(("Operation", call.operation.clone()));
        facts.push(("Connection", call.connection.clone()));
        facts.push(("Effect", call.effect.as_str().to_owned()));
        facts.push(("Attempts", call.attempts.to_string()));
        if let Some(pending) = call.pending {
            facts.push(("Waiting for", pending.to_owned()));
        }
        if let Some(next) = &call.next_attempt_at {
            facts.push(("Next attempt", next.clone()));
        }
        if let Some(refusal) = &call.refusal {
            facts.push(("Refusal", refusal.clone()));
        }
        if let Some(receipt) = &call.last_receipt {
            facts.push(("Last receipt", receipt.clone()));
        }
        if operates && call.effect == EffectState::Unknown {
            for action in [RecoveryAction::Reconcile, RecoveryAction::RetrySame] {
                let dry = preview::preview(wf, run, now, settings, &preview::command(action, &view.step));
                actions.push(action_view(run_id, action, Some(&view.step), &dry));
            }
        }
    }
    let mut why = None;
    let mut observe = false;
    if let Some(wait) = &view.wait {
        // A wait for a product's completion, current and not being looked at: "observe now".
        observe = operates
            && view.current
            && wait.kind == "wait-for"
            && wait.resolution.is_none()
            && !wait.observing
            && run.state == RunState::Running;
        if let Some(until) = &wait.until {
            facts.push(("Until", until.clone()));
        }
        if let Some(started) = &wait.started_at {
            facts.push(("Started", started.clone()));
        }
        if let Some(timeout) = &wait.timeout_at {
            facts.push(("Times out", timeout.clone()));
        }
        facts.push(("Observations", wait.observations.to_string()));
        if let Some(next) = &wait.next_observation_at {
            facts.push(("Next observation", next.clone()));
        }
        if let Some(resolution) = wait.resolution {
            facts.push(("Ended", format!("{resolution:?}").to_lowercase()));
        }
        if view.current && wait.resolution.is_none() {
            why = Some(match (wait.kind, &wait.until) {
                ("wait-until", Some(until)) => format!("The run waits until {until}, then goes on by itself."),
                _ => {
                    let next = match (&wait.next_observation_at, wait.observing) {
                        (_, true) => "an observation is under way".to_owned(),
                        (Some(next), false) => format!("the next look is at {next}"),
                        (None, false) => "no look is scheduled".to_owned(),
                    };
                    let timeout =
                        wait.timeout_at.as_deref().map_or(String::new(), |t| format!(", and it times out at {t}"));
                    format!(
                        "The run waits for a product to complete what it asked for: looked {} time(s), {next}{timeout}. \
                         A completion notification brings the next look forward.",
                        wait.observations
                    )
                }
            });
        }
    }
    StepRow {
        position: view.position,
        step: view.step.clone(),
        kind: view.step_type,
        current: view.current,
        facts,
        why,
        actions,
        observe,
    }
}

fn action_view(run_id: &str, action: RecoveryAction, step: Option<&str>, dry: &Preview) -> ActionView {
    let (label, slug) = match action {
        RecoveryAction::Reconcile => ("Reconcile", "reconcile"),
        RecoveryAction::RetrySame => ("Retry with the same key", "retry-same"),
        RecoveryAction::Cancel => ("Cancel the run", "cancel"),
    };
    let href = match step {
        Some(step) => format!("/console/runs/{run_id}/actions/{slug}?step={}", super::runs::encode(step)),
        None => format!("/console/runs/{run_id}/actions/{slug}"),
    };
    let refused = match dry {
        Preview::Applies { .. } => None,
        Preview::Refused { code, message } => Some(format!("{message} ({code})")),
        Preview::Ignored { reason } => Some(format!("Nothing to do: {reason}")),
    };
    ActionView { label, href, refused }
}

/// A page of the run's sealed journal, newest first, before position
/// `before` when given (pending entries are sealed first, as `GET /v1/audit` does).
async fn journal(engine: &Engine, run_id: &str, before: Option<i64>) -> Result<JournalView, EngineError> {
    crate::process::audit_chain::seal_pending(engine).await?;
    let store = engine.store();
    let page = store.run_journal(run_id, before, JOURNAL_PAGE).await?;
    let entries = page
        .entries
        .into_iter()
        .map(|e| EntryRow {
            position: e.position,
            at: rfc3339(e.at),
            kind: e.kind,
            step: e.step.unwrap_or_default(),
            actor: e.actor.unwrap_or_else(|| "coordinator".to_owned()),
            detail: e.detail,
        })
        .collect();
    let older = page.older.map(|position| format!("/console/runs/{run_id}?before={position}#journal"));
    Ok(JournalView { entries, total: page.total, skipped: page.newer, older })
}

/// `GET /console/runs/{id}/graph.svg`: the step graph with the run marked.
pub(super) async fn graph(viewer: Viewer, State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let engine = &state.engine;
    let row = match visible(engine, &viewer, &id, Role::Read).await {
        Ok(row) => row,
        Err(response) => return response,
    };
    let (run, wf) = match engine.opened(&row).await {
        Ok(opened) => opened,
        Err(e) => return internal(e),
    };
    let svg = coordinator_graph::svg_marked(&wf.definition, &marks(&run, &wf));
    ([(header::CONTENT_TYPE, "image/svg+xml"), (header::CACHE_CONTROL, "no-store")], svg).into_response()
}

/// The marks of a run: every step entered, the current one by what it is doing, the routes taken.
pub(crate) fn marks(run: &Run, wf: &Arc<Workflow>) -> Marks {
    let attention_step = match &run.attention {
        Some(coordinator_core::machine::run::Attention::UnknownEffect { step }) => Some(step.as_str()),
        _ => None,
    };
    let mut marks = Marks::along(&run.path, StepMark::Done);
    let Some(current) = &run.current else { return marks };
    let waits = matches!(
        wf.step(current),
        Some(
            coordinator_core::model::workflow::Step::WaitFor(_) | coordinator_core::model::workflow::Step::WaitUntil(_)
        )
    );
    let mark = match run.state {
        _ if Some(current.as_str()) == attention_step => StepMark::Attention,
        RunState::Finished => StepMark::Finished,
        RunState::Failed => StepMark::Failed,
        RunState::Cancelled | RunState::CancelledAfterEffect | RunState::Expired => StepMark::Stopped,
        RunState::Running | RunState::CancelRequested | RunState::Attention if waits => StepMark::Waiting,
        RunState::Running | RunState::CancelRequested | RunState::Attention => StepMark::Current,
    };
    marks = marks.with(current, mark);
    if let Some(step) = attention_step {
        marks = marks.with(step, StepMark::Attention);
    }
    marks
}

#[cfg(test)]
#[path = "run_snapshots.rs"]
mod snapshots;
