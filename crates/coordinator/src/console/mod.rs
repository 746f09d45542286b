//! The operator console at `/console`: server-rendered HTML (askama
//! templates under `templates/console/`), our own CSS and a small
//! progressive-enhancement script embedded in the binary ([`assets`]), live
//! updates over server-sent events ([`live`]), served by the API's own router.
//!
//! One module per page or concern: [`session`] (sign-in, the signed session
//! cookie, CSRF), [`runs`] (the run list and the attention inbox), [`run`] (one
//! run: its graph, steps, effects, waits, journal), [`actions`] (cancel,
//! retry-same, reconcile — each previewed by the pure machine first — and
//! bulk actions), [`batch_start`] (a durable batch over every run a filter
//! matches: its dry run, then its start), [`batches`] (a batch followed,
//! run by run, and stopped), [`deployment`] (active revisions, the restore hold, the audit
//! chain), [`connections`] (pausing and resuming a connection), [`schedules`] (the
//! schedules, paused and resumed), [`assets`], [`live`]. Pages decide nothing: what an action would do
//! comes from [`preview::preview`], what it does from the engine, who may
//! see and do what from [`access`](crate::auth::access) — exactly as in the API. **Invariant:** no
//! page shows a run's input, a command, a product response or a completion
//! reference or value; only a finished run's published output.
//!
//! [`preview::preview`]: crate::engine::recovery::preview::preview

// A page's early answer is an axum `Response`, as its handler returns one.
#![allow(clippy::result_large_err, reason = "errors here are the page's own HTTP response")]

mod actions;
mod assets;
mod batch_start;
mod batches;
mod connections;
mod deployment;
mod live;
mod run;
mod runs;
mod schedules;
mod session;

use askama::Template;
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use coordinator_core::model::runtime::Role;

use crate::api::ApiState;
use crate::engine::Engine;
pub(crate) use session::Viewer;

/// The console's routes (merged into the API's router).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/console", get(|| async { Redirect::to("/console/runs") }))
        .route("/console/sign-in", get(session::form).post(session::sign_in))
        .route("/console/sign-out", post(session::sign_out))
        .route("/console/runs", get(runs::list))
        .route("/console/attention", get(runs::inbox))
        .route("/console/runs/{id}", get(run::page_of))
        .route("/console/runs/{id}/graph.svg", get(run::graph))
        .route("/console/runs/{id}/actions/{action}", get(actions::confirm).post(actions::perform))
        .route("/console/runs/{id}/observe", post(actions::observe))
        .route("/console/bulk", get(actions::bulk_preview).post(actions::bulk_perform))
        .route("/console/batches", post(batch_start::start))
        .route("/console/batches/new", get(batch_start::new))
        .route("/console/batches/{id}", get(batches::page_of))
        .route("/console/batches/{id}/cancel", post(batches::cancel))
        .route("/console/deployment", get(deployment::page_of))
        .route("/console/restore-hold", get(deployment::hold_confirm).post(deployment::hold))
        .route("/console/connections/{name}", post(connections::steer))
        .route("/console/schedules/{workflow}/{id}", post(schedules::steer))
        .route("/console/audit/verify", post(deployment::verify))
        .route("/console/audit/verification", get(deployment::verification))
        .route("/console/live", get(live::events))
        .route("/console/assets/{file}", get(assets::serve))
        .route("/console/{*rest}", get(not_found))
}

/// A rendered page (see [`page`]).
pub(crate) trait Page: Template {}

/// The response of a page: HTML with the console's security headers.
pub(crate) fn page(template: &impl Page, status: StatusCode) -> Response {
    match template.render() {
        Ok(html) => with_headers((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()),
        Err(e) => {
            tracing::error!(error = %e, "a console page could not be rendered");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be rendered").into_response()
        }
    }
}

/// No script but ours, nothing from elsewhere, no framing, forms only to us.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                      form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn with_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What every signed-in page shows around its content: who is signed in,
/// the session's CSRF token, which section is open, the restore-hold banner.
#[derive(Debug, Clone)]
pub(crate) struct Chrome {
    /// The signed-in subject.
    pub(crate) subject: String,
    /// The CSRF token of the session (every form carries it).
    pub(crate) csrf: String,
    /// `runs`, `attention` or `deployment`.
    pub(crate) section: &'static str,
    /// The restore hold, while one is placed.
    pub(crate) hold: Option<HoldBanner>,
}

/// The restore-hold banner.
#[derive(Debug, Clone)]
pub(crate) struct HoldBanner {
    /// When it was placed (RFC 3339).
    pub(crate) at: String,
    /// By whom.
    pub(crate) by: String,
}

impl Chrome {
    /// The chrome of `section` for `viewer`, reading the hold from the store.
    pub(crate) async fn of(engine: &Engine, viewer: &Viewer, section: &'static str) -> Chrome {
        let hold = match engine.store().hold().await {
            Ok(hold) => hold.map(|h| HoldBanner { at: rfc3339(h.placed_at), by: h.placed_by }),
            Err(e) => {
                tracing::warn!(error = %e, "the restore hold could not be read for a console page");
                None
            }
        };
        Chrome { subject: viewer.principal.subject().to_owned(), csrf: viewer.csrf.clone(), section, hold }
    }
}

/// An instant in ms as RFC 3339 (UTC, milliseconds).
pub(crate) fn rfc3339(ms: i64) -> String {
    coordinator_core::machine::time::Instant(ms).to_rfc3339()
}

/// A `403` page for a viewer without the role (the API's rule).
pub(crate) fn forbidden(role: Role, workflow: Option<&str>) -> Response {
    let message = match workflow {
        Some("*") => format!("You do not hold the `{}` role for every workflow, which this needs.", role.as_str()),
        Some(w) => format!("You do not hold the `{}` role for workflow `{w}`.", role.as_str()),
        None => format!("You do not hold the `{}` role for this.", role.as_str()),
    };
    problem(StatusCode::FORBIDDEN, message)
}

/// An error page with its status: the message in words (a `code` span for
/// each backticked name), and the way back into the console.
pub(crate) fn problem(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    let parts = message.split('`').enumerate().map(|(i, text)| (i % 2 == 1, text.to_owned())).collect();
    let title = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::FORBIDDEN => "Not allowed",
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => "This request cannot be carried out",
        StatusCode::CONFLICT => "Not now",
        StatusCode::SERVICE_UNAVAILABLE => "The service cannot answer now",
        _ => "Something went wrong",
    };
    page(&ProblemPage { title, parts }, status)
}

/// `404` for a console path that names no page.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    let path = uri.path();
    problem(StatusCode::NOT_FOUND, format!("There is no console page at `{path}`."))
}

#[derive(Template)]
#[template(path = "console/problem.html")]
struct ProblemPage {
    title: &'static str,
    /// The message, split at backticks: `(true, name)` for a name shown as code.
    parts: Vec<(bool, String)>,
}

impl Page for ProblemPage {}
