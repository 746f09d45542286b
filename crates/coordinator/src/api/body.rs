//! Reading a request body within a limit — and, past the limit, reading on to
//! its end before answering `413 request.too-large`.
//!
//! A server that answers an oversized body at once and closes the connection
//! leaves the client still sending: its next write meets a closed socket and
//! the client sees a reset connection instead of the answer (an admission of
//! 10 MB did exactly that). So the rest is read and discarded, up to
//! [`DRAIN_MAX`] in all; a body larger still is cut off as before.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use futures_util::StreamExt as _;

use super::ApiError;
use super::code::Code;

/// The most of an oversized body read (and discarded) so that its sender gets the `413`.
pub const DRAIN_MAX: usize = 64 << 20;

/// The body, if it is at most `limit` bytes; else `413 request.too-large`
/// (the rest read and discarded first, up to [`DRAIN_MAX`]). A body that
/// breaks off is `400 request.invalid`.
pub async fn within(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut kept: Vec<u8> = Vec::new();
    let mut seen: usize = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ApiError::bad_request("the request body broke off before its end"))?;
        seen = seen.saturating_add(chunk.len());
        if seen <= limit {
            kept.extend_from_slice(&chunk);
        } else if seen > DRAIN_MAX {
            break;
        }
    }
    if seen > limit {
        return Err(ApiError::new(Code::RequestTooLarge, format!("the request body is over {limit} bytes")));
    }
    Ok(Bytes::from(kept))
}

/// Whether the request says its body is JSON (`application/json` or a `+json` type).
pub fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The largest body a reason (a pause or resume) may come in.
const REASON_BODY_LIMIT: usize = 8 << 10;
/// What a reason's body must look like.
pub const REASON_SHAPE: &str = "send a JSON object {\"reason\": \"why\"} with a reason of 1 to 500 characters";

/// The reason an operator's pause or resume gives: the body must be JSON
/// `{"reason": "…"}` with 1 to 500 characters, not only blanks (`400
/// request.invalid`; `413 request.too-large` over 8 KiB). Returned without
/// blanks at either end.
pub async fn required_reason(headers: &HeaderMap, body: Body) -> Result<String, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ReasonBody {
        reason: String,
    }
    if !is_json(headers) {
        return Err(ApiError::bad_request(REASON_SHAPE));
    }
    let bytes = within(body, REASON_BODY_LIMIT).await?;
    let body: ReasonBody = super::decode::object(&bytes).ok_or_else(|| ApiError::bad_request(REASON_SHAPE))?;
    if !crate::engine::connections::reason_ok(&body.reason) {
        return Err(ApiError::bad_request(REASON_SHAPE));
    }
    Ok(crate::engine::connections::reason_kept(&body.reason).to_owned())
}
