//! The deployment page (`/console/deployment`): the active revision of each
//! workflow and its package digest, what each stored revision still holds
//! (runs not ended by state, the oldest one's admission: drained or not), the connections and their pauses
//! ([`super::connections`]), the schedules with their next and last firing
//! ([`super::schedules`]), the restore hold (placed or not; place
//! and release for those who operate every workflow, as `POST|DELETE
//! /v1/restore-hold` requires), and the audit chain's head with a "verify
//! now" that recomputes the whole chain from the sealed entries
//! ([`coordinator_core::audit::Verifier`]: the entries are checked, not the
//! service's word).

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use coordinator_core::audit::Verifier;
use coordinator_core::model::runtime::Role;
use serde::Deserialize;

use super::runs::{internal, short};
use super::{Chrome, Page, Viewer, forbidden, page, rfc3339};
use crate::api::ApiState;
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// One workflow's active revision.
#[derive(Debug, Clone)]
pub(crate) struct ActiveView {
    pub(crate) workflow: String,
    pub(crate) revision: String,
    pub(crate) short: String,
    pub(crate) digest: String,
}

/// What one stored revision still holds, as the page shows it.
#[derive(Debug, Clone)]
pub(crate) struct RevisionView {
    pub(crate) workflow: String,
    pub(crate) revision: String,
    pub(crate) short: String,
    pub(crate) active: bool,
    pub(crate) running: u64,
    pub(crate) attention: u64,
    pub(crate) cancel_requested: u64,
    /// The oldest unfinished admission (UTC), or how the revision stands without one.
    pub(crate) oldest: String,
}

impl RevisionView {
    fn of(h: &coordinator_store::RevisionHolding) -> RevisionView {
        use coordinator_core::model::run::RunState;
        let count = |s: RunState| h.unfinished.get(&s).copied().unwrap_or(0);
        let oldest = match (h.oldest_unfinished, h.active) {
            (Some(at), _) => rfc3339(at),
            (None, true) => "none unfinished".to_owned(),
            (None, false) => "drained: no run left".to_owned(),
        };
        RevisionView {
            workflow: h.workflow.clone(),
            revision: h.revision.clone(),
            short: short(&h.revision),
            active: h.active,
            running: count(RunState::Running),
            attention: count(RunState::Attention),
            cancel_requested: count(RunState::CancelRequested),
            oldest,
        }
    }
}

#[derive(askama::Template)]
#[template(path = "console/deployment.html")]
struct DeploymentPage {
    chrome: Chrome,
    active: Vec<ActiveView>,
    /// Every stored revision of the workflows the viewer may see, with what it holds.
    revisions: Vec<RevisionView>,
    held_runs: u64,
    /// Why the hold was placed (the operator's reason or the fence's evidence).
    hold_reason: Option<String>,
    may_hold: bool,
    head_position: i64,
    head_hash: String,
    verified: Option<String>,
    tampered: Option<String>,
    recovery_only: bool,
    connections: Vec<super::connections::ConnectionRow>,
    /// Whether the viewer may pause or resume any of them.
    may_steer_any: bool,
    /// A pause or resume refused (a reason missing), shown above the connections and schedules.
    refused: Option<String>,
    schedules: Vec<super::schedules::ScheduleRow>,
    /// Whether the viewer may pause or resume any of them.
    may_steer_schedules: bool,
}

impl Page for DeploymentPage {}

/// The page with a refused pause or resume explained (`422`).
pub(super) async fn render_refused(engine: &Engine, viewer: &Viewer, refused: String) -> Response {
    let mut response = render_with(engine, viewer, None, None, Some(refused)).await;
    if response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    }
    response
}

async fn render(engine: &Engine, viewer: &Viewer, verified: Option<String>, tampered: Option<String>) -> Response {
    render_with(engine, viewer, verified, tampered, None).await
}

async fn render_with(
    engine: &Engine,
    viewer: &Viewer,
    verified: Option<String>,
    tampered: Option<String>,
    refused: Option<String>,
) -> Response {
    let built = async {
        let active = engine
            .store()
            .active_revisions()
            .await?
            .into_iter()
            .filter(|a| {
                viewer.principal.holds(Role::Read, &a.workflow) || viewer.principal.holds(Role::Operate, &a.workflow)
            })
            .map(|a| ActiveView {
                short: short(&a.revision),
                workflow: a.workflow,
                revision: a.revision,
                digest: a.digest,
            })
            .collect();
        let revisions = engine
            .store()
            .revision_holdings(None)
            .await?
            .iter()
            .filter(|h| {
                viewer.principal.holds(Role::Read, &h.workflow) || viewer.principal.holds(Role::Operate, &h.workflow)
            })
            .map(RevisionView::of)
            .collect();
        let hold = engine.restore_hold().await?;
        let head = engine.store().audit(None, 0, 1).await?.head;
        let connections = super::connections::rows(engine, viewer).await?;
        let schedules = super::schedules::rows(engine, viewer).await?;
        Ok::<_, EngineError>((active, revisions, hold, head, connections, schedules))
    };
    let (active, revisions, hold, head, connections, schedules) = match built.await {
        Ok(parts) => parts,
        Err(e) => return internal(e),
    };
    let chrome = Chrome::of(engine, viewer, "deployment").await;
    let view = DeploymentPage {
        chrome,
        active,
        revisions,
        held_runs: hold.held_runs,
        hold_reason: hold.reason,
        may_hold: viewer.principal.holds_everywhere(Role::Operate),
        head_position: head.position,
        head_hash: head.hash,
        verified,
        tampered,
        recovery_only: engine.is_recovery_only(),
        may_steer_any: connections.iter().any(|c| c.may_steer),
        connections,
        refused,
        may_steer_schedules: schedules.iter().any(|s| s.may_steer),
        schedules,
    };
    page(&view, StatusCode::OK)
}

/// `GET /console/deployment`.
pub(super) async fn page_of(viewer: Viewer, State(state): State<ApiState>) -> Response {
    render(&state.engine, &viewer, None, None).await
}

/// `?change=` of the hold's confirmation.
#[derive(Debug, Default, Deserialize)]
pub(super) struct HoldQuery {
    #[serde(default)]
    change: String,
}

#[derive(askama::Template)]
#[template(path = "console/hold_confirm.html")]
struct HoldConfirmPage {
    chrome: Chrome,
    /// `place` or `release`.
    change: String,
    held_runs: u64,
    problem: Option<String>,
}

impl Page for HoldConfirmPage {}

/// The hold's confirmation for `change`, with what went wrong when a POST was refused.
async fn hold_confirmation(
    engine: &Engine,
    viewer: &Viewer,
    change: &str,
    problem: Option<String>,
    status: StatusCode,
) -> Response {
    if !viewer.principal.holds_everywhere(Role::Operate) {
        return forbidden(Role::Operate, Some("*"));
    }
    if change != "place" && change != "release" {
        return super::problem(StatusCode::BAD_REQUEST, "The change is `place` or `release`.");
    }
    let held_runs = match engine.restore_hold().await {
        Ok(hold) => hold.held_runs,
        Err(e) => return internal(e),
    };
    let chrome = Chrome::of(engine, viewer, "deployment").await;
    page(&HoldConfirmPage { chrome, change: change.to_owned(), held_runs, problem }, status)
}

/// `GET /console/restore-hold?change=place|release`: the confirmation, asking why.
pub(super) async fn hold_confirm(
    viewer: Viewer,
    State(state): State<ApiState>,
    axum::extract::Query(query): axum::extract::Query<HoldQuery>,
) -> Response {
    hold_confirmation(&state.engine, &viewer, &query.change, None, StatusCode::OK).await
}

/// The hold form.
#[derive(Deserialize)]
pub(super) struct HoldForm {
    #[serde(default)]
    csrf: String,
    /// `place` or `release`.
    #[serde(default)]
    change: String,
    /// Why, journaled with the change.
    #[serde(default)]
    reason: String,
}

/// `POST /console/restore-hold`: place or release it with a reason, then the deployment page.
pub(super) async fn hold(viewer: Viewer, State(state): State<ApiState>, Form(form): Form<HoldForm>) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    if !viewer.principal.holds_everywhere(Role::Operate) {
        return forbidden(Role::Operate, Some("*"));
    }
    let engine = &state.engine;
    let Some(reason) = super::actions::reason_of(&form.reason) else {
        let problem = "Say why: the journal records the reason with the change.".to_owned();
        return hold_confirmation(engine, &viewer, &form.change, Some(problem), StatusCode::BAD_REQUEST).await;
    };
    let subject = viewer.principal.subject();
    let changed = match form.change.as_str() {
        "place" => engine.place_restore_hold(subject, Some(&reason)).await,
        "release" => engine.release_restore_hold(subject, Some(&reason)).await,
        _ => return super::problem(StatusCode::BAD_REQUEST, "The change is `place` or `release`."),
    };
    match changed {
        Ok(_) => Redirect::to("/console/deployment").into_response(),
        Err(e) => internal(e),
    }
}

/// The verify form.
#[derive(Deserialize)]
pub(super) struct VerifyForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /console/audit/verify`: seals what is pending, then (`303`) the
/// verification's page, so a reload recomputes rather than posts again.
pub(super) async fn verify(viewer: Viewer, State(state): State<ApiState>, Form(form): Form<VerifyForm>) -> Response {
    if let Err(refused) = viewer.check(&form.csrf) {
        return refused;
    }
    if !viewer.principal.holds_everywhere(Role::Operate) {
        return forbidden(Role::Operate, Some("*"));
    }
    match crate::process::audit_chain::seal_pending(&state.engine).await {
        Ok(_) => Redirect::to("/console/audit/verification").into_response(),
        Err(e) => internal(e.into()),
    }
}

/// `GET /console/audit/verification`: the whole chain recomputed now from
/// the sealed entries (it reads only), shown on the deployment page.
pub(super) async fn verification(viewer: Viewer, State(state): State<ApiState>) -> Response {
    if !viewer.principal.holds_everywhere(Role::Operate) {
        return forbidden(Role::Operate, Some("*"));
    }
    let engine = &state.engine;
    let checked = async {
        let first = engine.store().audit(None, 0, 1).await?;
        let head = first.head;
        // After a retention cut the chain starts after its checkpoint.
        let mut after = first.checkpoint.as_ref().map_or(0, |c| c.position);
        let mut verifier = Verifier::after(first.checkpoint);
        loop {
            let page = engine.store().audit(None, after, 1000).await?;
            for entry in &page.entries {
                if let Err(tampering) = verifier.feed(entry) {
                    return Ok(Err(tampering));
                }
            }
            match page.next {
                Some(next) => after = next,
                None => break,
            }
        }
        Ok::<_, EngineError>(verifier.finish(&head))
    };
    match checked.await {
        Ok(Ok(verified)) => {
            let from = match verified.start.position {
                0 => String::new(),
                p => format!(" from the retention checkpoint at position {p}"),
            };
            let text = format!(
                "{} entries checked at {}: the chain is intact{from} up to position {} ({}).",
                verified.checked,
                rfc3339(engine.now()),
                verified.head.position,
                verified.head.hash
            );
            render(engine, &viewer, Some(text), None).await
        }
        Ok(Err(tampering)) => {
            let text = format!("The chain is broken at {tampering} ({}).", tampering.problem.code());
            render(engine, &viewer, None, Some(text)).await
        }
        Err(e) => internal(e),
    }
}
