//! The authenticated caller as an axum extractor ([`Caller`]), and the role
//! check on one run ([`run_for`]).
//!
//! `Authorization: Bearer <token>` is required: a static token, or a JWT of
//! an OIDC issuer. A missing, malformed or unknown token, or a JWT that is
//! not accepted (the message says why: expired, wrong audience, unknown
//! `kid`, bad signature…), is `401 auth.unauthenticated` with a
//! `WWW-Authenticate: Bearer` challenge. The token is never logged or echoed.

use std::ops::Deref;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use coordinator_core::model::runtime::Role;
use coordinator_store::RunRow;

use super::code::Code;
use super::request_log::SubjectSlot;
use super::{ApiError, ApiState};
use crate::auth::access::{Principal, RunAccess};
use crate::engine::Engine;
use crate::engine::error::EngineError;

/// The challenge sent when no credentials came.
const CHALLENGE: &str = "Bearer realm=\"coordinator\"";
/// The challenge sent when the credentials were not accepted (RFC 6750 §3.1).
const CHALLENGE_INVALID: &str = "Bearer realm=\"coordinator\", error=\"invalid_token\"";

/// The caller a request's bearer token authenticates.
pub(super) struct Caller(Arc<Principal>);

impl Deref for Caller {
    type Target = Principal;

    fn deref(&self) -> &Principal {
        &self.0
    }
}

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Caller, ApiError> {
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return Err(unauthenticated("send `Authorization: Bearer <token>`", CHALLENGE));
        };
        let Some(token) = bearer(value) else {
            return Err(unauthenticated("the Authorization header must be `Bearer <token>`", CHALLENGE_INVALID));
        };
        let caller = state
            .access
            .authenticate_bearer(token)
            .await
            .map(Caller)
            .map_err(|e| unauthenticated(&e.to_string(), CHALLENGE_INVALID))?;
        if let Some(slot) = parts.extensions.get::<SubjectSlot>() {
            slot.set(caller.subject());
        }
        Ok(caller)
    }
}

/// The token of an `Authorization: Bearer <token>` header value.
fn bearer(value: &header::HeaderValue) -> Option<&str> {
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
}

/// The caller `headers` authenticate, if any: for a route that answers
/// anyone and says more to an authenticated caller (the OpenAPI document).
pub(super) async fn optional_caller(headers: &header::HeaderMap, state: &ApiState) -> Option<Caller> {
    let token = bearer(headers.get(header::AUTHORIZATION)?)?;
    state.access.authenticate_bearer(token).await.ok().map(Caller)
}

fn unauthenticated(message: &str, challenge: &'static str) -> ApiError {
    ApiError { challenge: Some(challenge), ..ApiError::new(Code::AuthUnauthenticated, message) }
}

/// The run `id` when the caller may act on it with `role`: `404 run.unknown`
/// when it does not exist or is neither the caller's nor of a workflow the
/// caller operates (its existence is not revealed), `403 auth.forbidden` when
/// the caller knows of it but lacks the role.
pub(super) async fn run_for(engine: &Engine, caller: &Caller, id: &str, role: Role) -> Result<RunRow, ApiError> {
    let row = engine.store().load(id).await.map_err(EngineError::from)?.ok_or(EngineError::RunNotFound)?;
    match caller.run_access(&row.owner, &row.workflow, role) {
        RunAccess::Allowed => Ok(row),
        RunAccess::Forbidden => Err(ApiError::forbidden(role, Some(&row.workflow))),
        RunAccess::Hidden => Err(EngineError::RunNotFound.into()),
    }
}
