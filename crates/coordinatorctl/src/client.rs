//! The HTTP client of the operating commands: where the service is, the
//! bearer token (read from a file, never taken on the command line, never
//! printed), and one request at a time on a small current-thread runtime.
//!
//! It only carries requests and answers: what an answer means (and its exit
//! code) is [`crate::operate`]'s business.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};
use serde_json::Value;

use crate::Format;

/// The service's address when neither `--url` nor `COORDINATOR_URL` is given
/// (`coordinator dev`'s default listener).
pub const DEFAULT_URL: &str = "http://127.0.0.1:7400";

/// The options every operating command takes.
#[derive(Args, Debug, Clone)]
pub struct ServiceArgs {
    /// The service's base URL (http or https; a path prefix is kept).
    #[arg(long, env = "COORDINATOR_URL", default_value = DEFAULT_URL, value_parser = parse_url)]
    pub url: Url,
    /// A file holding the bearer token (surrounding whitespace is dropped). The token itself is never
    /// taken on the command line and never printed.
    #[arg(long, env = "COORDINATOR_TOKEN_FILE", value_name = "FILE")]
    pub token_file: PathBuf,
    /// Seconds to wait for the service's answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `--url`: an absolute http(s) URL that paths can be appended to.
fn parse_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("the URL must start with http:// or https://".into());
    }
    if url.cannot_be_a_base() || url.host().is_none() {
        return Err("the URL must name a host".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("the URL must have no query or fragment".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("put no credentials in the URL: use --token-file".into());
    }
    Ok(url)
}

/// Why a request got no answer the operating commands can read.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The token file cannot be read.
    #[error("cannot read the token file {}: {source}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token file holds no token, or one that cannot be sent in a header.
    #[error("the token file {} {problem}", path.display())]
    BadToken {
        /// The file.
        path: PathBuf,
        /// What is wrong (never the token).
        problem: &'static str,
    },
    /// A local file the command sends cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP client or its runtime cannot start.
    #[error("cannot start the HTTP client: {0}")]
    Setup(String),
    /// No connection, or the connection broke before an answer.
    #[error("cannot reach the service at {url}: {reason}")]
    Unreachable {
        /// The URL requested.
        url: String,
        /// What the network said.
        reason: String,
    },
    /// No answer within `--timeout`.
    #[error("the service at {url} did not answer within {seconds} s")]
    Timeout {
        /// The URL requested.
        url: String,
        /// The timeout.
        seconds: u64,
    },
    /// Something answered, but not with the API's JSON.
    #[error("the answer from {url} is not the Coordinator API's (HTTP {status}{detail}); is --url right?")]
    NotTheApi {
        /// The URL requested.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What was wrong with it.
        detail: String,
    },
}

impl ClientError {
    /// A stable code for the JSON report (`client.*`, beside the service's own codes).
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::TokenFile { .. } | ClientError::BadToken { .. } => "client.token-file",
            ClientError::File { .. } => "client.file",
            ClientError::Setup(_) => "client.setup",
            ClientError::Unreachable { .. } => "client.unreachable",
            ClientError::Timeout { .. } => "client.timeout",
            ClientError::NotTheApi { .. } => "client.not-the-api",
        }
    }
}

/// What a request sends.
pub enum Body {
    /// Nothing.
    Empty,
    /// Opaque bytes (`application/octet-stream`).
    Bytes(Vec<u8>),
    /// A JSON document (`application/json`).
    Json(serde_json::Value),
}

/// The service's answer: the HTTP status and its JSON (`null` when empty).
/// An answer that is not `2xx` always carries a string `code`.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

/// A connection to the service with the caller's token.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: Url,
    authorization: HeaderValue,
    timeout: u64,
}

impl Client {
    /// Reads the token file and prepares the client (nothing is sent yet).
    ///
    /// # Errors
    /// [`ClientError::TokenFile`] / [`ClientError::BadToken`] for the token,
    /// [`ClientError::Setup`] when the client cannot start.
    pub fn connect(args: &ServiceArgs) -> Result<Client, ClientError> {
        let authorization = read_token(&args.token_file)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Setup(e.to_string()))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(args.timeout))
            .connect_timeout(Duration::from_secs(args.timeout.min(10)))
            // A redirect could carry the token elsewhere: the API never redirects.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("coordinatorctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Setup(chain(&e)))?;
        Ok(Client { runtime, http, base: args.url.clone(), authorization, timeout: args.timeout })
    }

    /// The URL of `segments` (each percent-encoded) under the base URL, with `query`.
    pub fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// `GET` a path.
    ///
    /// # Errors
    /// [`ClientError`] when there is no readable answer.
    pub fn get(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<Answer, ClientError> {
        self.send(Method::GET, self.url(segments, query), Body::Empty)
    }

    /// `POST` to a path.
    ///
    /// # Errors
    /// [`ClientError`] when there is no readable answer.
    pub fn post(&self, segments: &[&str], query: &[(&str, &str)], body: Body) -> Result<Answer, ClientError> {
        self.send(Method::POST, self.url(segments, query), body)
    }

    /// `DELETE` a path.
    ///
    /// # Errors
    /// [`ClientError`] when there is no readable answer.
    pub fn delete(&self, segments: &[&str], body: Body) -> Result<Answer, ClientError> {
        self.send(Method::DELETE, self.url(segments, &[]), body)
    }

    fn send(&self, method: Method, url: Url, body: Body) -> Result<Answer, ClientError> {
        let shown = url.to_string();
        let mut request = self.http.request(method, url).header(AUTHORIZATION, self.authorization.clone());
        match body {
            Body::Empty => {}
            Body::Bytes(bytes) => request = request.header(CONTENT_TYPE, "application/octet-stream").body(bytes),
            Body::Json(value) => request = request.header(CONTENT_TYPE, "application/json").body(value.to_string()),
        }
        let network = |e: reqwest::Error| {
            if e.is_timeout() {
                ClientError::Timeout { url: shown.clone(), seconds: self.timeout }
            } else {
                // The error itself repeats the URL; its causes say what happened.
                let reason = std::error::Error::source(&e).map_or_else(|| e.to_string(), chain);
                ClientError::Unreachable { url: shown.clone(), reason }
            }
        };
        let (status, bytes) = self.runtime.block_on(async {
            let response = request.send().await.map_err(network)?;
            let status = response.status().as_u16();
            let bytes = response.bytes().await.map_err(network)?;
            Ok::<_, ClientError>((status, bytes))
        })?;
        let not_the_api = |detail: &str| ClientError::NotTheApi { url: shown.clone(), status, detail: detail.into() };
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|_| not_the_api(", not JSON"))?
        };
        let success = (200..300).contains(&status);
        if !success && !body["code"].is_string() {
            return Err(not_the_api(", without an error code"));
        }
        if success && !body.is_object() {
            return Err(not_the_api(", not a JSON object"));
        }
        Ok(Answer { status, body })
    }
}

/// The `Authorization` header from the token file, marked sensitive.
fn read_token(path: &Path) -> Result<HeaderValue, ClientError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ClientError::TokenFile { path: path.to_path_buf(), source })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(ClientError::BadToken { path: path.to_path_buf(), problem: "is empty" });
    }
    if token.chars().any(char::is_whitespace) {
        return Err(ClientError::BadToken { path: path.to_path_buf(), problem: "holds more than one word" });
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| ClientError::BadToken {
        path: path.to_path_buf(),
        problem: "holds characters a bearer token cannot have",
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// An error and its causes, `: `-separated (the network's reasons are in the causes).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_http_without_credentials() {
        assert!(parse_url("http://127.0.0.1:7400").is_ok());
        assert!(parse_url("https://ops.example.org/coordinator/").is_ok());
        assert!(parse_url("ftp://example.org").is_err());
        assert!(parse_url("127.0.0.1:7400").is_err());
        assert!(parse_url("http://user:secret@example.org").is_err());
        assert!(parse_url("http://example.org/?x=1").is_err());
    }

    #[test]
    fn paths_are_appended_and_encoded() {
        let args = ServiceArgs {
            url: Url::parse("https://ops.example.org/coordinator/").unwrap_or_else(|e| panic!("{e}")),
            token_file: PathBuf::new(),
            timeout: 1,
            format: Format::Human,
        };
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("token");
        std::fs::write(&file, "abc\n").unwrap_or_else(|e| panic!("{e}"));
        let client = Client::connect(&ServiceArgs { token_file: file, ..args }).unwrap_or_else(|e| panic!("{e}"));
        let url = client.url(&["v1", "runs", "a/b c"], &[("state", "running")]);
        assert_eq!(url.as_str(), "https://ops.example.org/coordinator/v1/runs/a%2Fb%20c?state=running");
    }

    #[test]
    fn tokens_are_read_trimmed_and_never_shown() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("token");
        std::fs::write(&file, "  s3cret-token\n").unwrap_or_else(|e| panic!("{e}"));
        let value = read_token(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(value.is_sensitive());
        assert_eq!(value.to_str().ok(), Some("Bearer s3cret-token"));
        std::fs::write(&file, "secret-part other-part\n").unwrap_or_else(|e| panic!("{e}"));
        let error = read_token(&file).map(|_| ()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("more than one word") && !error.contains("secret-part"), "{error}");
        std::fs::write(&file, "\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(read_token(&file), Err(ClientError::BadToken { .. })));
        assert!(matches!(read_token(&dir.path().join("missing")), Err(ClientError::TokenFile { .. })));
    }
}
