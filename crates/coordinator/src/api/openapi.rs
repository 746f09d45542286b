//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of the routes this API
//! serves, written by hand as data (`openapi.json` next to this file). The
//! `openapi` integration test fails when the document and the router's table
//! ([`super::endpoints`]) disagree.

use axum::http::header;
use axum::response::IntoResponse;

/// The document, as served.
pub(super) const DOCUMENT: &str = include_str!("openapi.json");

/// `200` with the document.
pub(super) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}
