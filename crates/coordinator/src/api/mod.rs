//! The HTTP API (docs/reference/service.md, docs/api.md): admission, listing
//! and reading runs, the operator's inspection and commands (cancel,
//! retry-same, reconcile), the restore hold, package activation, signed
//! product events, completion notifications, the audit journal, the OpenAPI
//! document, Prometheus metrics and the health checks. Errors are
//! `{"code", "message"}` with a stable [`Code`] each
//! (docs/reference/errors.md); nothing protected (input, commands, product
//! responses, completion values) is ever echoed.
//!
//! The router is built from one table ([`endpoints`] lists it), which the
//! OpenAPI document is tested against. One module per concern: [`runs`]
//! (admit, read, list), [`decode`] (request bodies: bytes in, pure),
//! [`body`] (reading a body within its limit), [`operator`] (cancel,
//! retry-same, reconcile), [`inspection`], [`hold`] (the restore hold),
//! [`connections`] (listing, pausing and resuming connections), [`revisions`]
//! (what each revision of a workflow still holds), [`batches`] (durable
//! batches of operator commands), [`schedules`] (listing, pausing and
//! resuming schedules),
//! [`packages`] (activation), [`events`] (signed product events), [`audit`]
//! (the hash-chained journal), [`openapi`], [`guard`] (a path or query with
//! a control character is refused before any handler), [`auth`] (the
//! authenticated caller as an extractor, and role checks on a run),
//! [`request_log`] (one line per request), [`open_requests`] (the requests
//! in progress a drain waits for) and [`code`].
//!
//! Every route but `/healthz`, `/readyz`, `/v1/openapi.json`,
//! `POST /v1/completions/{connection}` and `POST /v1/events/{workflow}/{trigger}`
//! (`events`: authenticated by the body's HMAC signature) needs a bearer token
//! (`401 auth.unauthenticated` with `WWW-Authenticate: Bearer`) and the role
//! for the workflow concerned (`403 auth.forbidden`); see [`crate::auth::access`].

mod audit;
mod auth;
mod batches;
mod body;
pub mod code;
mod connections;
pub mod decode;
mod events;
mod guard;
mod hold;
mod inspection;
pub(crate) mod open_requests;
mod openapi;
mod operator;
mod packages;
mod request_log;
mod revisions;
pub(crate) use request_log::SubjectSlot;
mod runs;
mod schedules;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{FromRef, Path, State};
use axum::handler::Handler;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter};
use serde_json::json;

use coordinator_core::model::runtime::Role;
use coordinator_seal::SealError;
use coordinator_store::StoreError;

use crate::auth::access::Access;
use crate::engine::Engine;
use crate::engine::connections::ConnectionRefusal;
use crate::engine::error::EngineError;
use auth::Caller;
pub use code::Code;

/// What every handler can reach: the engine and the access rules.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub(crate) engine: Arc<Engine>,
    pub(crate) access: Arc<Access>,
}

impl FromRef<ApiState> for Arc<Engine> {
    fn from_ref(state: &ApiState) -> Arc<Engine> {
        Arc::clone(&state.engine)
    }
}

/// An HTTP method the API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `DELETE`.
    Delete,
}

impl Verb {
    /// The method as OpenAPI writes it (`get`, `post`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Delete => "delete",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Delete => MethodFilter::DELETE,
        }
    }
}

/// One served route: a method and a path template (`{id}` as in OpenAPI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The method.
    pub verb: Verb,
    /// The path template.
    pub path: &'static str,
}

type Route = (Endpoint, MethodRouter<ApiState>);

fn route<H, T>(verb: Verb, path: &'static str, handler: H) -> Route
where
    H: Handler<T, ApiState>,
    T: 'static,
{
    (Endpoint { verb, path }, MethodRouter::new().on(verb.filter(), handler))
}

/// Every route the API serves, with its handler: the one table the router
/// is built from.
fn table() -> Vec<Route> {
    vec![
        route(Verb::Get, "/healthz", health),
        route(Verb::Get, "/readyz", ready),
        route(Verb::Get, "/metrics", metrics),
        route(Verb::Get, "/v1/openapi.json", openapi::document),
        route(Verb::Post, "/v1/runs", runs::admit),
        route(Verb::Get, "/v1/runs", runs::list),
        route(Verb::Get, "/v1/runs/{id}", runs::read),
        route(Verb::Get, "/v1/runs/{id}/inspection", inspection::inspect),
        route(Verb::Post, "/v1/runs/{id}/cancel", operator::cancel),
        route(Verb::Post, "/v1/runs/{id}/steps/{step}/retry-same", operator::retry_same),
        route(Verb::Post, "/v1/runs/{id}/steps/{step}/reconcile", operator::reconcile),
        route(Verb::Post, "/v1/completions/{connection}", completion),
        events::route(),
        route(Verb::Get, "/v1/restore-hold", hold::show),
        route(Verb::Post, "/v1/restore-hold", hold::place),
        route(Verb::Delete, "/v1/restore-hold", hold::release),
        route(Verb::Get, "/v1/workflows/{workflow}/revisions", revisions::list),
        route(Verb::Post, "/v1/batches", batches::start),
        route(Verb::Get, "/v1/batches", batches::list),
        route(Verb::Get, "/v1/batches/{id}", batches::read),
        route(Verb::Get, "/v1/batches/{id}/runs", batches::runs),
        route(Verb::Post, "/v1/batches/{id}/cancel", batches::cancel),
        route(Verb::Get, "/v1/connections", connections::list),
        route(Verb::Post, "/v1/connections/{name}/pause", connections::pause),
        route(Verb::Post, "/v1/connections/{name}/resume", connections::resume),
        route(Verb::Get, "/v1/schedules", schedules::list),
        route(Verb::Post, "/v1/schedules/{workflow}/{id}/pause", schedules::pause),
        route(Verb::Post, "/v1/schedules/{workflow}/{id}/resume", schedules::resume),
        route(Verb::Get, "/v1/audit", audit::list),
        packages::activation(),
    ]
}

/// The routes [`app`] serves (method and path template), in table order.
pub fn endpoints() -> Vec<Endpoint> {
    table().into_iter().map(|(endpoint, _)| endpoint).collect()
}

/// The API router over an engine, authenticating and authorizing callers by `access`.
/// Every request is logged and traced (`request_log`); one whose path or
/// query holds a control character is refused first (`guard`).
pub fn app(engine: Arc<Engine>, access: Arc<Access>) -> Router {
    let state = ApiState { engine, access };
    table()
        .into_iter()
        .fold(Router::new(), |router, (endpoint, handler)| router.route(endpoint.path, handler))
        .merge(crate::console::routes())
        .layer(axum::middleware::from_fn(guard::printable))
        .layer(axum::middleware::from_fn_with_state(state.clone(), request_log::log))
        .with_state(state)
}

/// An API error: status, stable code, message.
#[derive(Debug)]
pub struct ApiError {
    code: Code,
    message: String,
    pointers: Option<Vec<String>>,
    challenge: Option<&'static str>,
    retry_after: Option<u32>,
}

/// The `Retry-After` of an admission refused while draining: by then another
/// process of the deployment (or this one, restarted) is ready.
const DRAINING_RETRY_AFTER_SECONDS: u32 = 2;

/// The `Retry-After` of a request the database could not take (a restart of
/// PostgreSQL, a failover): each process replaces its connections by itself.
const DATABASE_RETRY_AFTER_SECONDS: u32 = 1;

impl ApiError {
    fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), pointers: None, challenge: None, retry_after: None }
    }

    /// `403 auth.forbidden`: the caller lacks `role` for `workflow` (or, without one, for any workflow).
    fn forbidden(role: Role, workflow: Option<&str>) -> Self {
        let message = match workflow {
            Some(w) => format!("this caller does not hold the `{}` role for workflow `{w}`", role.as_str()),
            None => format!("this caller does not hold the `{}` role for any workflow", role.as_str()),
        };
        ApiError::new(Code::AuthForbidden, message)
    }

    /// `400 request.invalid`.
    fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(Code::RequestInvalid, message)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::UnknownWorkflow(_) => ApiError::new(Code::WorkflowUnknown, e.to_string()),
            EngineError::RevisionNotActive { .. } => ApiError::new(Code::RevisionNotActive, e.to_string()),
            EngineError::InputInvalid { ref pointers } => {
                ApiError { pointers: Some(pointers.clone()), ..ApiError::new(Code::InputInvalid, e.to_string()) }
            }
            EngineError::SearchKey(_) => ApiError::new(Code::InputSearchKeyFailed, e.to_string()),
            EngineError::BatchTooLarge => ApiError::new(Code::BatchTooLarge, e.to_string()),
            EngineError::KeyReused => ApiError::new(Code::IdempotencyKeyReused, e.to_string()),
            EngineError::RunNotFound => ApiError::new(Code::RunUnknown, e.to_string()),
            EngineError::RunIdInvalid(_) => ApiError::new(Code::RunIdInvalid, e.to_string()),
            EngineError::RecoveryOnly => ApiError::new(Code::ServiceRecoveryOnly, e.to_string()),
            EngineError::Draining => ApiError {
                retry_after: Some(DRAINING_RETRY_AFTER_SECONDS),
                ..ApiError::new(Code::ServiceDraining, e.to_string())
            },
            EngineError::Store(StoreError::Unavailable(ref reason)) => {
                tracing::warn!(error = %reason, "the database could not be reached; the request was not done");
                ApiError {
                    retry_after: Some(DATABASE_RETRY_AFTER_SECONDS),
                    ..ApiError::new(
                        Code::DatabaseUnavailable,
                        "the database could not be reached and nothing was done: retry the request",
                    )
                }
            }
            EngineError::RestoreHoldPlaced => ApiError::new(Code::RestoreHoldPlaced, e.to_string()),
            EngineError::RunIdTaken => ApiError::new(Code::RunIdTaken, e.to_string()),
            EngineError::Connection(ConnectionRefusal::Unknown(_)) => {
                ApiError::new(Code::ConnectionUnknown, e.to_string())
            }
            EngineError::Connection(ConnectionRefusal::Reason) => ApiError::bad_request(e.to_string()),
            EngineError::Schedule(_) => ApiError::new(Code::ScheduleUnknown, e.to_string()),
            EngineError::Seal(SealError::UnknownKey(ref id)) => {
                tracing::error!(key_id = %id, "a run's data was sealed with a payload key this deployment does not hold");
                ApiError::new(
                    Code::PayloadKeyMissing,
                    format!(
                        "the run's data was sealed with payload key `{id}`, which this deployment does not hold: \
                         add it to payloadKeys.keys in the runtime file and restart"
                    ),
                )
            }
            EngineError::Seal(_)
            | EngineError::Store(_)
            | EngineError::Corrupt(_)
            | EngineError::Ignored(_)
            | EngineError::Refused { .. } => {
                tracing::error!(error = %e, "a request could not be completed");
                ApiError::new(Code::Internal, "the request could not be completed")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"code": self.code.as_str(), "message": self.message});
        if let Some(pointers) = self.pointers {
            body["pointers"] = json!(pointers);
        }
        let mut response = (self.code.status(), Json(body)).into_response();
        if let Some(challenge) = self.challenge {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static(challenge));
        }
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// How long readiness waits for the database's answer.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Readiness (not liveness): `200 {"status": "ready", "connections"}`, else
/// `503` with `status` `draining` (the process is stopping) or
/// `database-unreachable` (no answer to a round trip within
/// [`READY_TIMEOUT`]). `connections` lists the connections held back (their
/// breaker not closed, or paused), since when and why: a product being down
/// does not make the coordinator unready.
async fn ready(State(engine): State<Arc<Engine>>) -> Response {
    let unready = |status: &str| (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": status}))).into_response();
    if engine.is_draining() {
        return unready("draining");
    }
    if engine.is_fenced() {
        return unready("fenced");
    }
    match tokio::time::timeout(READY_TIMEOUT, engine.store().ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) | Err(_) => return unready("database-unreachable"),
    }
    let states = match tokio::time::timeout(READY_TIMEOUT, engine.store().connection_states()).await {
        Ok(Ok(states)) => states,
        Ok(Err(_)) | Err(_) => return unready("database-unreachable"),
    };
    let held: Vec<serde_json::Value> = states
        .iter()
        .filter(|s| s.paused.is_some() || s.pace.breaker != "closed")
        .map(|s| {
            json!({
                "name": s.name,
                "state": s.pace.breaker,
                "since": s.pace.since,
                "why": s.pace.why,
                "paused": s.paused.is_some(),
            })
        })
        .collect();
    Json(json!({"status": "ready", "connections": held})).into_response()
}

/// The engine's metrics in the Prometheus text format (version 0.0.4), for
/// a caller that operates at least one workflow.
async fn metrics(caller: Caller, State(engine): State<Arc<Engine>>) -> Result<Response, ApiError> {
    if !caller.holds_somewhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Operate, None));
    }
    let store = engine.store();
    let counts = store.runs_by_state().await.map_err(EngineError::from)?;
    engine.metrics().runs_by_state(&counts);
    engine.metrics().attention(&store.attention_by_reason().await.map_err(EngineError::from)?);
    let now = engine.now();
    engine.metrics().queue_heads(store.queue_heads(now).await.map_err(EngineError::from)?, now);
    engine.metrics().fenced(engine.is_fenced());
    let states = store.connection_states().await.map_err(EngineError::from)?;
    let connections: Vec<(String, bool, &str)> = engine
        .connection_names()
        .into_iter()
        .map(|name| {
            let state = states.iter().find(|s| s.name == name);
            let paused = state.is_some_and(|s| s.paused.is_some());
            (name, paused, state.map_or("closed", |s| s.pace.breaker))
        })
        .collect();
    engine.metrics().connections(&connections);
    engine.hints.record(engine.metrics());
    let text = engine.metrics().render();
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

/// Always `202`: whether a run waits for the reference is not revealed. The
/// nudge is delivered in the background. A notification that is not JSON
/// `{reference}` (no body, another shape, a reference over 1 KiB or with a
/// control character, a body over 64 KiB) nudges nothing and is answered the
/// same: a product learns nothing from the answer, and a nudge only brings an
/// observation forward.
async fn completion(State(engine): State<Arc<Engine>>, Path(connection): Path<String>, body: Body) -> StatusCode {
    let reference = match body::within(body, decode::COMPLETION_LIMIT).await {
        Ok(bytes) => decode::completion_reference(&bytes),
        Err(_) => None,
    };
    if let Some(reference) = reference {
        tokio::spawn(async move {
            if let Err(e) = crate::engine::nudge::nudge(&engine, &connection, &reference).await {
                tracing::warn!(connection = %connection, error = %e, "a completion notification was not applied");
            }
        });
    }
    StatusCode::ACCEPTED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_that_did_nothing_answers_503_with_retry_after_and_one_not_known_500() {
        let unavailable = ApiError::from(EngineError::Store(StoreError::Unavailable("lost".into())));
        assert_eq!(unavailable.code, Code::DatabaseUnavailable);
        let unavailable = unavailable.into_response();
        assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(unavailable.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("1"));
        let unknown = ApiError::from(EngineError::Store(StoreError::Database("lost".into())));
        assert_eq!((unknown.status(), unknown.code()), (StatusCode::INTERNAL_SERVER_ERROR, "internal"));
    }
}
