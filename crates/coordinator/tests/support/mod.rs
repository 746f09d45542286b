//! Test support: the dev stack on `127.0.0.1:0` with examples/reviewed-notice in
//! a temporary data directory, and small HTTP helpers that send the operator
//! token ([`TOKEN`]).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use coordinator::process::dev::{self, Dev, DevOptions};
use serde_json::Value;

/// The operator token: the dev stack's `--token`, and the token of subject
/// `operator` (every role) in the deployments `support/deploy.rs` writes.
pub const TOKEN: &str = "test-token";

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The sample input of the flagship example.
pub fn sample_input() -> Value {
    let text = std::fs::read_to_string(repo().join("examples/reviewed-notice/input.json"))
        .unwrap_or_else(|e| panic!("input.json: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("input.json: {e}"))
}

/// Runs `test` on the service's runtime (worker threads with room for function calls).
pub fn on_runtime<F: Future<Output = ()>>(test: F) {
    let runtime = coordinator::runtime().unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(test);
}

/// The dev stack on reviewed-notice, with its data in `data`.
pub async fn start(data: PathBuf) -> Dev {
    let options = DevOptions {
        project: repo().join("examples/reviewed-notice"),
        listen: "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")),
        data: Some(data),
        token: Some(TOKEN.into()),
    };
    dev::start(options).await.unwrap_or_else(|e| panic!("dev stack: {e}"))
}

/// A client that sends `Authorization: Bearer` [`TOKEN`] with every request.
#[allow(dead_code, reason = "not every test binary builds its own client")]
pub fn authorized_client(timeout: Duration) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap_or_else(|e| panic!("{e}"));
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder().timeout(timeout).default_headers(headers).build().unwrap_or_else(|e| panic!("{e}"))
}

/// `POST url` with a JSON body and the operator token: (status, body).
pub async fn post(url: &str, body: &Value) -> (u16, Value) {
    post_as(url, Some(TOKEN), body).await
}

/// `GET url` with the operator token: (status, body).
pub async fn get(url: &str) -> (u16, Value) {
    get_as(url, Some(TOKEN)).await
}

/// `POST url` with a JSON body and `token` (none: no Authorization header): (status, body).
pub async fn post_as(url: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(url).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET url` with `token` (none: no Authorization header): (status, body).
pub async fn get_as(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}
