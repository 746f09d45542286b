//! `POST /v1/packages?digest=sha256:<hex>`: activate a package
//! (docs/reference/service.md#packages-and-activation,
//! docs/reference/runs.md#pinning). The body is the package bytes exactly as
//! `coordinatorctl package` wrote them; the caller pins their digest in the
//! query, and a package whose bytes do not hash to it is refused. Admitted runs
//! keep the revision they were admitted with; new admissions get the activated
//! one. The caller needs `operate` for the package's workflow.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use coordinator_core::model::runtime::Role;
use coordinator_core::package;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::code::Code;
use super::{ApiError, Route, Verb};
use crate::engine::{ActivationError, Engine};

/// The largest package body accepted.
const PACKAGE_LIMIT: usize = 8 << 20;
/// The body types accepted (a package is canonical JSON; tools may send it as opaque bytes).
const MEDIA_TYPES: [&str; 2] = ["application/octet-stream", "application/json"];

/// The route, with its own body limit.
pub(super) fn activation() -> Route {
    let (endpoint, handler) = super::route(Verb::Post, "/v1/packages", activate);
    (endpoint, handler.layer(DefaultBodyLimit::max(PACKAGE_LIMIT)))
}

/// `POST /v1/packages` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActivateQuery {
    digest: Option<String>,
}

/// `200 {workflow, revision, digest, previousRevision}`; re-activating the
/// active package is `200` too.
async fn activate(
    caller: Caller,
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    query: Result<Query<ActivateQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    if !caller.holds_somewhere(Role::Operate) {
        return Err(ApiError::forbidden(Role::Operate, None));
    }
    let Query(query) = query.map_err(|_| ApiError::bad_request("the only query parameter is digest"))?;
    let digest = query.digest.ok_or_else(|| ApiError::bad_request("pin the package: ?digest=sha256:<hex>"))?;
    if !is_digest(&digest) {
        return Err(ApiError::bad_request("digest must be sha256: and 64 lowercase hex digits"));
    }
    if let Some(media) = headers.get(header::CONTENT_TYPE) {
        let essence = media.to_str().unwrap_or_default().split(';').next().unwrap_or_default().trim().to_lowercase();
        if !MEDIA_TYPES.contains(&essence.as_str()) {
            return Err(ApiError::new(
                Code::RequestUnsupportedMediaType,
                "send the package as application/octet-stream or application/json",
            ));
        }
    }
    let bytes = body.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(Code::RequestTooLarge, format!("a package may have at most {PACKAGE_LIMIT} bytes"))
        }
        _ => ApiError::bad_request("the package body could not be read"),
    })?;
    // The workflow is named inside the package; a package that cannot be read
    // is refused by `activate` below with its own code.
    if let Ok(read) = package::read(&bytes, Some(&digest))
        && !caller.holds(Role::Operate, &read.manifest.workflow)
    {
        return Err(ApiError::forbidden(Role::Operate, Some(&read.manifest.workflow)));
    }
    let activation = engine.activate(&bytes, &digest, Some(caller.subject())).await.map_err(refusal)?;
    Ok(Json(json!({
        "workflow": activation.workflow,
        "revision": activation.revision,
        "digest": activation.digest,
        "previousRevision": activation.previous_revision,
    })))
}

/// `sha256:` and 64 lowercase hex digits.
fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn refusal(e: ActivationError) -> ApiError {
    let message = e.to_string();
    let unprocessable = |code| ApiError::new(code, message.clone());
    match e {
        // The bytes conflict with the digest the request pins (checked before
        // anything is read from them): 409, like a revision stored with other bytes.
        ActivationError::DigestMismatch { .. } => ApiError::new(Code::PackageDigestMismatch, message.clone()),
        ActivationError::Invalid(_) => unprocessable(Code::PackageInvalid),
        ActivationError::UnknownConnection { .. } => unprocessable(Code::PackageUnknownConnection),
        ActivationError::RevisionConflict { .. } => ApiError::new(Code::PackageRevisionConflict, message.clone()),
        ActivationError::Engine(inner) => inner.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_digest;

    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        assert!(is_digest(&format!("sha256:{}", "0a".repeat(32))));
        assert!(!is_digest(&format!("sha256:{}", "0A".repeat(32))));
        assert!(!is_digest(&format!("sha512:{}", "0a".repeat(32))));
        assert!(!is_digest("sha256:0a"));
    }
}
