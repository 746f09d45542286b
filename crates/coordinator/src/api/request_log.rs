//! The HTTP request log and the API's server spans: one line per request
//! after its response (method, route template, status, latency, the caller's
//! subject when one authenticated, request id) and one span continuing the
//! caller's `traceparent`, if it sent one.
//!
//! The request id is the caller's `X-Request-Id` when it is a short token
//! (letters, digits, `.`, `_`, `:`, `-`; at most 64), else a fresh UUIDv7;
//! it is sent back in `X-Request-Id`. Health, readiness and metrics requests
//! are logged at `debug` (orchestrators poll them). **Invariant:** no query,
//! body, header value (but the request id) or path parameter is logged — the
//! route template is.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use coordinator_products::Traceparent;
use opentelemetry::KeyValue;

use super::ApiState;

/// The header a request id travels in.
const REQUEST_ID: &str = "x-request-id";
/// The longest request id taken from a caller.
const REQUEST_ID_MAX: usize = 64;

/// Where the `Caller` extractor leaves the authenticated subject for the log line.
#[derive(Debug, Clone, Default)]
pub(crate) struct SubjectSlot(Arc<Mutex<Option<String>>>);

impl SubjectSlot {
    /// Records the subject the request authenticated as.
    pub(crate) fn set(&self, subject: &str) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(subject.to_owned());
    }

    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub(super) async fn log(State(state): State<ApiState>, mut request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().as_str().to_owned();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_owned();
    let request_id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| valid_request_id(id))
        .map_or_else(|| uuid::Uuid::now_v7().simple().to_string(), str::to_owned);
    let caller = request.headers().get(Traceparent::HEADER).and_then(|v| v.to_str().ok()).and_then(Traceparent::parse);
    let mut span = state.engine.traces.request(format!("{method} {route}"), caller);
    let subject = SubjectSlot::default();
    request.extensions_mut().insert(subject.clone());
    let mut response = next.run(request).await;
    let status = response.status().as_u16();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let subject = subject.get();
    let latency_ms = (started.elapsed().as_secs_f64() * 100_000.0).round() / 100.0;
    span.set(|| {
        [
            KeyValue::new("http.request.method", method.clone()),
            KeyValue::new("http.route", route.clone()),
            KeyValue::new("http.response.status_code", i64::from(status)),
            KeyValue::new("coordinator.request_id", request_id.clone()),
        ]
    });
    if let Some(subject) = &subject {
        span.set(|| [KeyValue::new("enduser.id", subject.clone())]);
    }
    if status >= 500 {
        span.error("the request could not be completed");
    }
    span.end();
    let subject = subject.as_deref();
    if matches!(route.as_str(), "/healthz" | "/readyz" | "/metrics") {
        tracing::debug!(method, route, status, latency_ms, subject, request_id, "request");
    } else {
        tracing::info!(method, route, status, latency_ms, subject, request_id, "request");
    }
    response
}

fn valid_request_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= REQUEST_ID_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_request_ids_are_taken_from_a_caller() {
        assert!(valid_request_id("req-42.a_b:c"));
        for bad in ["", "with space", "quote\"", &"x".repeat(65), "ümlaut", "new\nline"] {
            assert!(!valid_request_id(bad), "{bad:?}");
        }
    }
}
