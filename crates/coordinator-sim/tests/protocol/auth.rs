//! The token endpoint and the bearer check on every product endpoint.

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use serde_json::json;

use crate::harness::{json, message, sent, start_default};

#[tokio::test]
async fn every_product_endpoint_requires_a_token_from_the_token_endpoint() {
    let h = start_default().await;
    let url = format!("{}/v1/operations/submit-message/v1", h.url("messaging"));
    let missing = sent(h.http.post(&url).header("Idempotency-Key", "k").json(&message("p")).send().await);
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(missing.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()), Some("Bearer"));
    assert_eq!(json(missing).await["refusal"]["code"], "unauthorized");
    let forged = sent(
        h.http.post(&url).bearer_auth("sim-forged").header("Idempotency-Key", "k").json(&message("p")).send().await,
    );
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    for path in ["/v1/receipts/k", "/v1/completions/result/review-1"] {
        let response = sent(h.http.get(format!("{}{path}", h.url("casework"))).send().await);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (0, 0), "nothing reached the product");
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
}

#[tokio::test]
async fn the_token_endpoint_speaks_client_credentials() {
    let h = start_default().await;
    let token_url = format!("{}/token", h.base);
    let post = |form: Vec<(&'static str, &'static str)>| h.http.post(&token_url).form(&form).send();
    let wrong = sent(
        post(vec![("grant_type", "client_credentials"), ("client_id", "coordinator"), ("client_secret", "no")]).await,
    );
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(json(wrong).await["error"], "invalid_client");
    let grant = sent(post(vec![("grant_type", "password"), ("client_id", "coordinator")]).await);
    assert_eq!(grant.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json(grant).await["error"], "unsupported_grant_type");
    let not_a_form = sent(h.http.post(&token_url).json(&json!({"grant_type": "client_credentials"})).send().await);
    assert_eq!(json(not_a_form).await["error"], "invalid_request");

    // client_secret_basic: base64("coordinator:coordinator-secret").
    let basic = sent(
        h.http
            .post(&token_url)
            .header(AUTHORIZATION, "Basic Y29vcmRpbmF0b3I6Y29vcmRpbmF0b3Itc2VjcmV0")
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await,
    );
    assert_eq!(basic.status(), StatusCode::OK);
    let body = json(basic).await;
    assert_eq!(body["expires_in"], 3600);
    assert!(body["access_token"].as_str().is_some_and(|t| t.starts_with("sim-")));
    assert!(h.sims.tokens.issued() >= 2, "each request issues a fresh token");
}

#[tokio::test]
async fn a_scoped_token_is_valid_only_for_its_products() {
    let mut h = start_default().await;
    h.token = h.fetch_token("coordinator", "coordinator-secret", Some("messaging")).await;
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
    let read = json!({"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"});
    let response = h.call("breg", "read-record/v1", None, &read).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
