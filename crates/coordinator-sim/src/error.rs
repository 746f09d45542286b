//! The answers a simulator gives when it does not accept: refusals of an
//! operation (`4xx {"refusal": {"code"}}`), `401`, `503`, and the errors of the
//! receipt, completion and control endpoints (`{"code", "message"}`).
//!
//! One status mapping for the whole crate ([`ApiError`]'s `IntoResponse`);
//! handlers return values and never build error responses themselves.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A product's refusal of an operation: no effect happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused with `{code}` ({status})")]
pub struct Refusal {
    /// The `4xx` status sent with it.
    pub status: StatusCode,
    /// The refusal code, e.g. `recipient-opted-out`.
    pub code: String,
}

impl Refusal {
    /// A refusal with an explicit status (which should be a `4xx`).
    pub fn new(status: StatusCode, code: impl Into<String>) -> Self {
        Refusal { status, code: code.into() }
    }

    /// `409`: the product's state forbids the effect (`slot-taken`, `already-decided`, …).
    pub fn conflict(code: impl Into<String>) -> Self {
        Refusal::new(StatusCode::CONFLICT, code)
    }

    /// `404`: the command names something the product does not know.
    pub fn not_found(code: impl Into<String>) -> Self {
        Refusal::new(StatusCode::NOT_FOUND, code)
    }

    /// `400`: the request itself is malformed (no idempotency key, body not JSON).
    pub fn bad_request(code: impl Into<String>) -> Self {
        Refusal::new(StatusCode::BAD_REQUEST, code)
    }

    /// `422`: the command does not match the operation's input schema.
    pub fn invalid_command() -> Self {
        Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-command")
    }
}

/// Every way a simulator endpoint answers other than success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// `401`: no bearer token, or one the token endpoint did not issue, that expired,
    /// or that is not valid for this product.
    #[error("a valid bearer token from the token endpoint is required")]
    Unauthorized,
    /// `4xx {"refusal": {"code"}}`: the operation was refused without effect.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// `503` (or `429`) with `Retry-After`: definitely not done, try again later.
    #[error("unavailable; retry after {retry_after_seconds} s")]
    Unavailable {
        /// `503` or `429`.
        status: StatusCode,
        /// Seconds sent in `Retry-After`.
        retry_after_seconds: u64,
    },
    /// `404` on the receipt endpoint: no receipt for this idempotency key.
    #[error("no receipt for this idempotency key")]
    ReceiptNotFound,
    /// `410` on the receipt endpoint: the receipt existed but has expired.
    #[error("the receipt for this idempotency key has expired")]
    ReceiptExpired,
    /// `404`: the completion endpoint does not know this name or reference.
    #[error("no completion `{name}` with this reference")]
    CompletionNotFound {
        /// The completion name asked for.
        name: String,
    },
    /// `404` on a control endpoint: e.g. an unknown review request.
    #[error("{0}")]
    NotFound(String),
    /// `409` on a control endpoint: e.g. deciding a review that is already decided.
    #[error("{message}")]
    Conflict {
        /// Stable code, e.g. `already-decided`.
        code: &'static str,
        /// What happened.
        message: String,
    },
    /// `400` on a control endpoint: the request cannot be understood.
    #[error("{0}")]
    BadRequest(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = self.to_string();
        match self {
            ApiError::Unauthorized => {
                let mut response =
                    (StatusCode::UNAUTHORIZED, Json(json!({"refusal": {"code": "unauthorized"}}))).into_response();
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            ApiError::Refused(refusal) => {
                (refusal.status, Json(json!({"refusal": {"code": refusal.code}}))).into_response()
            }
            ApiError::Unavailable { status, retry_after_seconds } => {
                let mut response = plain(status, "unavailable", &message);
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_seconds));
                response
            }
            ApiError::ReceiptNotFound => plain(StatusCode::NOT_FOUND, "receipt-not-found", &message),
            ApiError::ReceiptExpired => plain(StatusCode::GONE, "receipt-expired", &message),
            ApiError::CompletionNotFound { .. } => plain(StatusCode::NOT_FOUND, "completion-not-found", &message),
            ApiError::NotFound(_) => plain(StatusCode::NOT_FOUND, "not-found", &message),
            ApiError::Conflict { code, .. } => plain(StatusCode::CONFLICT, code, &message),
            ApiError::BadRequest(_) => plain(StatusCode::BAD_REQUEST, "bad-request", &message),
        }
    }
}

fn plain(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({"code": code, "message": message}))).into_response()
}
