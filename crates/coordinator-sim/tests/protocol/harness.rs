//! A simulator server per test and the HTTP calls the tests make.

use std::time::Duration;

use coordinator_sim::{DEFAULT_CLIENT, SimConfig, Simulators};
use reqwest::{Response, StatusCode};
use serde_json::Value;

/// A running server with its simulators and a token for the default client.
pub struct Harness {
    pub sims: Simulators,
    /// `http://127.0.0.1:PORT/sim`
    pub base: String,
    pub http: reqwest::Client,
    pub token: String,
}

/// Starts the simulators on an ephemeral port and fetches a token.
pub async fn start(config: SimConfig) -> Harness {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("cannot bind: {e}"),
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => panic!("no local address: {e}"),
    };
    let sims = Simulators::new(config);
    let served = sims.clone();
    tokio::spawn(async move { coordinator_sim::serve(listener, &served).await });
    let http = reqwest::Client::new();
    let base = format!("http://{addr}/sim");
    let mut harness = Harness { sims, base, http, token: String::new() };
    harness.token = harness.fetch_token(DEFAULT_CLIENT.0, DEFAULT_CLIENT.1, None).await;
    harness
}

pub async fn start_default() -> Harness {
    start(SimConfig::default()).await
}

/// The JSON body of a response (panics with the status if it is not JSON).
pub async fn json(response: Response) -> Value {
    let status = response.status();
    match response.json().await {
        Ok(v) => v,
        Err(e) => panic!("{status}: body is not JSON: {e}"),
    }
}

/// Unwraps a request result, naming the request on failure.
pub fn sent(result: reqwest::Result<Response>) -> Response {
    match result {
        Ok(r) => r,
        Err(e) => panic!("request failed: {e}"),
    }
}

impl Harness {
    /// `{base}/{product}`.
    pub fn url(&self, product: &str) -> String {
        format!("{}/{product}", self.base)
    }

    /// A token from the token endpoint (client_secret_post).
    pub async fn fetch_token(&self, id: &str, secret: &str, scope: Option<&str>) -> String {
        let mut form = vec![("grant_type", "client_credentials"), ("client_id", id), ("client_secret", secret)];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        let response = sent(self.http.post(format!("{}/token", self.base)).form(&form).send().await);
        assert_eq!(response.status(), StatusCode::OK);
        let body = json(response).await;
        assert_eq!(body["token_type"], "Bearer");
        body["access_token"].as_str().map(str::to_owned).unwrap_or_default()
    }

    /// An operation request with the harness's token and an optional idempotency key.
    pub fn operation(
        &self,
        product: &str,
        operation: &str,
        key: Option<&str>,
        body: &Value,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(format!("{}/v1/operations/{operation}", self.url(product)))
            .bearer_auth(&self.token)
            .header("Coordinator-Run-Id", "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10")
            .header("Coordinator-Attempt", "1")
            .json(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request
    }

    /// Sends an operation and returns the response.
    pub async fn call(&self, product: &str, operation: &str, key: Option<&str>, body: &Value) -> Response {
        sent(self.operation(product, operation, key, body).send().await)
    }

    /// Sends an operation that must be accepted; returns `{"output", "completions"}`.
    pub async fn accepted(&self, product: &str, operation: &str, key: Option<&str>, body: &Value) -> Value {
        let response = self.call(product, operation, key, body).await;
        let status = response.status();
        let body = json(response).await;
        assert_eq!(status, StatusCode::OK, "{product} {operation}: {body}");
        body
    }

    /// Sends an operation that must be refused with `status` and `code`.
    pub async fn refused(
        &self,
        product: &str,
        operation: &str,
        key: Option<&str>,
        body: &Value,
        status: u16,
        code: &str,
    ) {
        let response = self.call(product, operation, key, body).await;
        assert_eq!(response.status().as_u16(), status, "{product} {operation}");
        assert_eq!(json(response).await["refusal"]["code"], code, "{product} {operation}");
    }

    /// `POST {base}/v1/faults`; returns the status.
    pub async fn fault(&self, product: &str, fault: &Value) -> StatusCode {
        sent(self.http.post(format!("{}/v1/faults", self.url(product))).json(fault).send().await).status()
    }

    /// `(requests, effects)` of one key, from `GET {base}/v1/effects`.
    pub async fn counts(&self, product: &str, operation: &str, key: Option<&str>) -> (u64, u64) {
        let body = json(sent(self.http.get(format!("{}/v1/effects", self.url(product))).send().await)).await;
        let entries = body["effects"].as_array().cloned().unwrap_or_default();
        let entry = entries.iter().find(|e| e["operation"] == operation && e["idempotencyKey"].as_str() == key);
        entry.map_or((0, 0), |e| (e["requests"].as_u64().unwrap_or(0), e["effects"].as_u64().unwrap_or(0)))
    }

    /// `GET {base}/v1/receipts/{key}` with the harness's token.
    pub async fn receipt(&self, product: &str, key: &str) -> Response {
        sent(self.http.get(format!("{}/v1/receipts/{key}", self.url(product))).bearer_auth(&self.token).send().await)
    }

    /// `GET {base}/v1/completions/{name}/{reference}` with the harness's token.
    pub async fn completion(&self, product: &str, name: &str, reference: &str) -> Response {
        let url = format!("{}/v1/completions/{name}/{reference}", self.url(product));
        sent(self.http.get(url).bearer_auth(&self.token).send().await)
    }
}

/// A message command.
pub fn message(recipient: &str) -> Value {
    serde_json::json!({
        "recipient": {"kind": "person", "id": recipient},
        "template": "application-approved",
        "variables": {"applicationId": "a-1"}
    })
}

/// A short client timeout, far below the fault delays used with it.
pub const SHORT: Duration = Duration::from_millis(50);
