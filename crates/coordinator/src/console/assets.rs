//! The console's static files, embedded in the binary: one stylesheet and
//! one script of our own (no framework, nothing fetched at build or run time).
//! Each is served with an `ETag` (a SHA-256 prefix of its bytes), so a
//! browser revalidates instead of keeping a stale copy after an upgrade.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// The stylesheet.
const CSS: &str = include_str!("../../assets/console/console.css");
/// The script.
const JS: &str = include_str!("../../assets/console/console.js");

/// `GET /console/assets/{file}`.
pub(super) async fn serve(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let (body, media) = match file.as_str() {
        "console.css" => (CSS, "text/css; charset=utf-8"),
        "console.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    let digest = Sha256::digest(body.as_bytes());
    let tag = format!("\"{}\"", hex::encode(&digest[..12]));
    let fresh = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(tag.as_str());
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, media)], body).into_response()
    };
    let headers = response.headers_mut();
    if let Ok(tag) = HeaderValue::from_str(&tag) {
        headers.insert(header::ETAG, tag);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
