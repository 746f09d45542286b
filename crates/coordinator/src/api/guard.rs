//! Refuses, before any handler runs, a request whose path or query holds a
//! control character once percent-decoded (`%00`, `%0A`, …): no identifier
//! the API serves contains one, and PostgreSQL's text cannot hold NUL at all —
//! such a value reached SQL and came back as `500 internal`. The answer is
//! `400 request.invalid`, naming the part (path or query) and how to fix it;
//! nothing of the value is echoed.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;

use super::ApiError;

/// Whether `text` (percent-encoded) decodes to a control character (C0, DEL or C1).
pub(crate) fn decodes_to_control(text: &str) -> bool {
    let decoded = percent_decode_str(text).decode_utf8_lossy();
    decoded.chars().any(char::is_control)
}

/// Whether `text` holds a control character (C0, DEL or C1).
pub(crate) fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// The middleware.
pub(super) async fn printable(request: Request, next: Next) -> Response {
    let uri = request.uri();
    let part = if decodes_to_control(uri.path()) {
        Some("path")
    } else if uri.query().is_some_and(decodes_to_control) {
        Some("query")
    } else {
        None
    };
    match part {
        Some(part) => ApiError::bad_request(format!(
            "the request's {part} holds a control character once percent-decoded (such as %00): \
             remove it — no identifier or filter of this API contains one"
        ))
        .into_response(),
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_found_encoded_or_not() {
        assert!(decodes_to_control("/v1/runs/%00"));
        assert!(decodes_to_control("workflow=a%0Ab"));
        assert!(decodes_to_control("x=%7F"));
        assert!(!decodes_to_control("/v1/runs/0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"));
        assert!(!decodes_to_control("workflow=reviewed-notice&state=running&cursor=12.ab%2Dcd"));
        assert!(has_control("key\u{0}"));
        assert!(!has_control("an ordinary key-1"));
    }
}
