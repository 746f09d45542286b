//! Test support: the dev stack on `127.0.0.1:0` with examples/reviewed-notice in
//! a temporary data directory, and small HTTP helpers.

use std::future::Future;
use std::path::PathBuf;

use coordinator::dev::{self, Dev, DevOptions};
use serde_json::Value;

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
        token: Some("test-token".into()),
    };
    dev::start(options).await.unwrap_or_else(|e| panic!("dev stack: {e}"))
}

/// `POST url` with a JSON body: (status, body).
pub async fn post(url: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new().post(url).json(body).send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET url`: (status, body).
pub async fn get(url: &str) -> (u16, Value) {
    let response = reqwest::get(url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}
