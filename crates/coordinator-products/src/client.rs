//! [`ProductClient`]: the three requests of the product protocol
//! (docs/reference/products.md) — run an operation, look up a receipt, observe
//! a completion — each with a fresh token, each answer classified by
//! [`classify`]. It decides nothing about runs and writes nothing anywhere: it
//! returns what the product said, as the state machine's [`CallAnswer`],
//! [`ReceiptAnswer`] or [`Observation`].
//!
//! HTTP client settings that the classification depends on:
//! - redirects are never followed (a 3xx is a refusal `http-3xx`), so a request is
//!   only ever sent to the configured product;
//! - no proxy from the environment, so "could not connect" means the product;
//! - a mutation or an evaluation is only written to a connection opened for it
//!   (no idle connection is reused), so a reset on a stale pooled connection
//!   cannot turn an unsent effect into an uncertain one ([`Sending::Keyed`]);
//! - requests that change nothing — token requests, receipt lookups,
//!   completion observations, and operations whose effect is a read
//!   ([`Sending::Read`]) — reuse idle connections (for at most
//!   [`IDLE_TIMEOUT`]): a failure there is only "no token" (the operation is
//!   not sent, retryable), "unavailable", or an uncertain read, which the state
//!   machine reads again — never an uncertain effect;
//! - reqwest's default retry is kept: it resends only on HTTP/2 protocol NACKs
//!   (`REFUSED_STREAM`, graceful `GOAWAY`), which RFC 9113 §8.7 defines as "not
//!   processed".

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use coordinator_core::machine::event::{CallAnswer, Observation, ReceiptAnswer};
use coordinator_core::machine::run::Command;
use coordinator_core::model::catalog::Effect;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{RequestBuilder, Response, Url};
use serde_json::Value;

use crate::body;
use crate::classify::{self, BodyFailure, ByStatus, Explained, Reason, UNSENDABLE};
use crate::connection::Connection;
use crate::token;
use crate::traceparent::Traceparent;

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const RUN_ID: HeaderName = HeaderName::from_static("coordinator-run-id");
const ATTEMPT: HeaderName = HeaderName::from_static("coordinator-attempt");
const TRACEPARENT: HeaderName = HeaderName::from_static(Traceparent::HEADER);

/// How long an idle connection is kept for requests that change nothing: under
/// the 5 s after which common servers close an idle connection, so a socket the
/// product has already closed is seldom picked (such a read is read again).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// How an operation goes out, from the effect its catalog declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sending {
    /// A read: no `Idempotency-Key`, and an idle connection is reused when one is
    /// at hand. Nothing changes if it is sent twice, and an uncertain read is
    /// only read again.
    Read,
    /// A mutation or an evaluation: sent with its `Idempotency-Key` on a
    /// connection opened for it.
    Keyed,
}

impl From<Effect> for Sending {
    fn from(effect: Effect) -> Self {
        match effect {
            Effect::Read => Sending::Read,
            Effect::Mutation | Effect::Evaluation | Effect::ProposalAction => Sending::Keyed,
        }
    }
}

/// Sends protocol requests to products. One per process is enough: it keeps
/// HTTP clients per distinct pair of timeouts.
pub struct ProductClient {
    clients: Mutex<HashMap<(Duration, Duration), Clients>>,
    max_response_bytes: usize,
}

/// The HTTP clients of one pair of timeouts.
#[derive(Clone)]
struct Clients {
    /// Opens a connection per request: mutations and evaluations.
    fresh: reqwest::Client,
    /// Reuses idle connections: tokens, receipts, observations, reads.
    pooled: reqwest::Client,
}

impl ProductClient {
    /// The largest response body read by default (16 MiB).
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

    /// A client with the default response limit.
    pub fn new() -> Self {
        ProductClient { clients: Mutex::new(HashMap::new()), max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES }
    }

    /// The same client reading at most `limit` bytes of a response body; a longer
    /// body counts as one that could not be read (see [`ProductClient::call`]).
    pub fn with_max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// Runs one attempt of an operation: `POST {base}/v1/operations/{name}/v{N}`
    /// with the command's input as the body. `operation` is `<name>/v<N>` without
    /// the product (`submit-message/v1`); the connection is the product. `sending`
    /// says whether it carries the `Idempotency-Key` (mutations and evaluations)
    /// and may go out on an idle connection (reads, [`Sending`]).
    ///
    /// Classification (docs/reference/runs.md#calls-and-prepared-commands):
    /// - 2xx → `Accepted`. A 2xx whose body is not `{"output": …, "completions":
    ///   {…}}` is still `Accepted` — the product acted — with `output: null` and no
    ///   completions, so the state machine's output-schema check fails the run
    ///   (`product.invalid-output`) instead of the effect being forgotten.
    /// - 4xx with `{"refusal": {"code": C}}` → `Refused { code: C }`; other 4xx and
    ///   every 3xx (redirects are not followed) → `Refused { code: "http-<status>" }`.
    /// - 429 and 503 → `Retryable`, with `Retry-After` when it is in seconds.
    /// - any other status (500, 502, 504, …) → `Uncertain`.
    /// - not connected (refused, DNS, TLS, connect timeout) → `Retryable`: nothing
    ///   was sent.
    /// - no token (endpoint unreachable or refusing) → `Retryable`: the operation
    ///   was not sent.
    /// - sent, then a timeout, a reset, or a 2xx/4xx body that breaks off or is too
    ///   long → `Uncertain`: the product may have acted and its answer is lost.
    /// - a request that cannot be expressed → `Refused { code: UNSENDABLE }`.
    pub async fn call(
        &self,
        conn: &Connection,
        operation: &str,
        command: &Command,
        run_id: &str,
        attempt: u32,
        sending: Sending,
    ) -> CallAnswer {
        self.call_explained(conn, operation, command, run_id, attempt, sending).await.answer
    }

    /// [`ProductClient::call`] with the reason for the classification.
    pub async fn call_explained(
        &self,
        conn: &Connection,
        operation: &str,
        command: &Command,
        run_id: &str,
        attempt: u32,
        sending: Sending,
    ) -> Explained<CallAnswer> {
        self.call_traced(conn, operation, command, run_id, attempt, sending, None).await
    }

    /// [`ProductClient::call_explained`] sending `trace` as the `traceparent` header.
    #[allow(clippy::too_many_arguments, reason = "the protocol's request fields, each one a header or the body")]
    pub async fn call_traced(
        &self,
        conn: &Connection,
        operation: &str,
        command: &Command,
        run_id: &str,
        attempt: u32,
        sending: Sending,
        trace: Option<Traceparent>,
    ) -> Explained<CallAnswer> {
        let unsendable = |what| Explained {
            answer: CallAnswer::Refused { code: UNSENDABLE.to_owned() },
            reason: Reason::Unsendable(what),
        };
        let not_sent = |reason| Explained { answer: CallAnswer::Retryable { retry_after_seconds: None }, reason };
        let Some((name, version)) = split_operation(operation) else {
            return unsendable("the operation is not `<name>/v<N>`");
        };
        let Ok(url) = conn.base_url.join(&["v1", "operations", name, version]) else {
            return unsendable("the operation name is not a path segment");
        };
        let header = |value: &str| HeaderValue::from_str(value).ok();
        let (Some(run_id), Some(attempt)) = (header(run_id), header(&attempt.to_string())) else {
            return unsendable("the run id is not a header value");
        };
        let key = match (sending == Sending::Keyed).then(|| header(&command.idempotency_key)) {
            None => None,
            Some(Some(key)) => Some(key),
            Some(None) => return unsendable("the idempotency key is not a header value"),
        };
        let Ok(body) = serde_json::to_vec(&command.input) else {
            return unsendable("the command input is not JSON");
        };
        let http = match self.http(conn) {
            Ok(http) => http,
            Err(reason) => return not_sent(reason),
        };
        let token = match token::acquire(&http.pooled, &conn.token).await {
            Ok(token) => token,
            Err(e) => return not_sent(Reason::Token(e)),
        };
        let client = match sending {
            Sending::Read => &http.pooled,
            Sending::Keyed => &http.fresh,
        };
        let mut request = client
            .post(url)
            .bearer_auth(token.expose())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .header(RUN_ID, run_id)
            .header(ATTEMPT, attempt);
        if let Some(key) = key {
            request = request.header(IDEMPOTENCY_KEY, key);
        }
        if let Some(trace) = trace {
            request = request.header(TRACEPARENT, trace.to_string());
        }
        let response = match send(request.body(body)).await {
            Ok(response) => response,
            Err(Sent::Unbuildable) => return unsendable("the request could not be built"),
            Err(Sent::Not(reason)) => return not_sent(reason),
            Err(Sent::Maybe(reason)) => return Explained { answer: CallAnswer::Uncertain, reason },
        };
        self.classify_operation(response).await
    }

    async fn classify_operation(&self, response: Response) -> Explained<CallAnswer> {
        let status = response.status().as_u16();
        let answered = |answer| Explained { answer, reason: Reason::Status { status } };
        match classify::by_status(status) {
            ByStatus::NotDone => {
                let retry_after = classify::retry_after(response.headers(), std::time::SystemTime::now());
                answered(CallAnswer::Retryable { retry_after_seconds: retry_after })
            }
            ByStatus::Redirected => answered(CallAnswer::Refused { code: classify::http_code(status) }),
            ByStatus::Uncertain => answered(CallAnswer::Uncertain),
            ByStatus::Acted => match self.read(response).await {
                Err(reason) => Explained { answer: CallAnswer::Uncertain, reason },
                Ok(body) => match classify::envelope(&body) {
                    Some((output, completions)) => answered(CallAnswer::Accepted { output, completions }),
                    None => Explained {
                        answer: CallAnswer::Accepted { output: Value::Null, completions: Default::default() },
                        reason: Reason::MalformedBody { status },
                    },
                },
            },
            ByStatus::Refused => match self.read(response).await {
                Err(reason) => Explained { answer: CallAnswer::Uncertain, reason },
                Ok(body) => match classify::refusal_code(&body) {
                    Some(code) => answered(CallAnswer::Refused { code }),
                    None => Explained {
                        answer: CallAnswer::Refused { code: classify::http_code(status) },
                        reason: if body.is_empty() {
                            Reason::Status { status }
                        } else {
                            Reason::MalformedBody { status }
                        },
                    },
                },
            },
        }
    }

    /// Looks up the receipt of an idempotency key: `GET {base}/v1/receipts/{key}` →
    /// 200 `Found`, 404 `NotFound`, 410 `Expired`; any other status, a body that is
    /// not `{"output": …, "completions": …}`, no token, or any transport failure →
    /// `Unavailable` (a receipt settles an effect only when it is well-formed).
    pub async fn receipt(&self, conn: &Connection, idempotency_key: &str) -> ReceiptAnswer {
        self.receipt_explained(conn, idempotency_key).await.answer
    }

    /// [`ProductClient::receipt`] with the reason for the classification.
    pub async fn receipt_explained(&self, conn: &Connection, idempotency_key: &str) -> Explained<ReceiptAnswer> {
        self.receipt_traced(conn, idempotency_key, None).await
    }

    /// [`ProductClient::receipt_explained`] sending `trace` as the `traceparent` header.
    pub async fn receipt_traced(
        &self,
        conn: &Connection,
        idempotency_key: &str,
        trace: Option<Traceparent>,
    ) -> Explained<ReceiptAnswer> {
        let unavailable = |reason| Explained { answer: ReceiptAnswer::Unavailable, reason };
        let response = match self.get(conn, &["v1", "receipts", idempotency_key], trace).await {
            Ok(response) => response,
            Err(reason) => return unavailable(reason),
        };
        let status = response.status().as_u16();
        let answered = |answer| Explained { answer, reason: Reason::Status { status } };
        match status {
            200 => match self.read(response).await {
                Err(reason) => unavailable(reason),
                Ok(body) => match classify::envelope(&body) {
                    Some((output, completions)) => answered(ReceiptAnswer::Found { output, completions }),
                    None => unavailable(Reason::MalformedBody { status }),
                },
            },
            404 => answered(ReceiptAnswer::NotFound),
            410 => answered(ReceiptAnswer::Expired),
            _ => answered(ReceiptAnswer::Unavailable),
        }
    }

    /// Observes a completion: `GET {base}/v1/completions/{name}/{reference}` → 200
    /// `{"state":"pending"}` `Pending`, 200 `{"state":"complete","value":…}`
    /// `Complete`; anything else (another status or body, no token, a transport
    /// failure) → `Unavailable`, which the state machine does not count as an
    /// observation.
    pub async fn observe(&self, conn: &Connection, completion_name: &str, reference: &str) -> Observation {
        self.observe_explained(conn, completion_name, reference).await.answer
    }

    /// [`ProductClient::observe`] with the reason for the classification.
    pub async fn observe_explained(
        &self,
        conn: &Connection,
        completion_name: &str,
        reference: &str,
    ) -> Explained<Observation> {
        self.observe_traced(conn, completion_name, reference, None).await
    }

    /// [`ProductClient::observe_explained`] sending `trace` as the `traceparent` header.
    pub async fn observe_traced(
        &self,
        conn: &Connection,
        completion_name: &str,
        reference: &str,
        trace: Option<Traceparent>,
    ) -> Explained<Observation> {
        let unavailable = |reason| Explained { answer: Observation::Unavailable, reason };
        let response = match self.get(conn, &["v1", "completions", completion_name, reference], trace).await {
            Ok(response) => response,
            Err(reason) => return unavailable(reason),
        };
        let status = response.status().as_u16();
        if status != 200 {
            return unavailable(Reason::Status { status });
        }
        match self.read(response).await {
            Err(reason) => unavailable(reason),
            Ok(body) => match classify::observation(&body) {
                Some(answer) => Explained { answer, reason: Reason::Status { status } },
                None => unavailable(Reason::MalformedBody { status }),
            },
        }
    }

    /// A `GET` of `segments` under the base URL with a fresh token.
    async fn get(&self, conn: &Connection, segments: &[&str], trace: Option<Traceparent>) -> Result<Response, Reason> {
        let url: Url =
            conn.base_url.join(segments).map_err(|_| Reason::Unsendable("a path segment is empty, . or .."))?;
        let http = self.http(conn)?.pooled;
        let token = token::acquire(&http, &conn.token).await.map_err(Reason::Token)?;
        let mut request = http.get(url).bearer_auth(token.expose()).header(ACCEPT, "application/json");
        if let Some(trace) = trace {
            request = request.header(TRACEPARENT, trace.to_string());
        }
        send(request).await.map_err(|sent| match sent {
            Sent::Unbuildable => Reason::Unsendable("the request could not be built"),
            Sent::Not(reason) | Sent::Maybe(reason) => reason,
        })
    }

    /// Reads a body, describing a failure with the status it came with.
    async fn read(&self, response: Response) -> Result<Vec<u8>, Reason> {
        let status = response.status().as_u16();
        body::read(response, self.max_response_bytes)
            .await
            .map_err(|failure: BodyFailure| Reason::BodyUnreadable { status, failure })
    }

    /// The HTTP clients for a connection's timeouts, built on first use.
    fn http(&self, conn: &Connection) -> Result<Clients, Reason> {
        let key = (conn.connect_timeout, conn.request_timeout);
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let built = Clients {
            fresh: builder(conn).pool_max_idle_per_host(0).build().map_err(|_| Reason::ClientUnavailable)?,
            pooled: builder(conn).pool_idle_timeout(IDLE_TIMEOUT).build().map_err(|_| Reason::ClientUnavailable)?,
        };
        clients.insert(key, built.clone());
        Ok(built)
    }
}

/// The settings every client shares (see the module doc).
fn builder(conn: &Connection) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(conn.connect_timeout)
        .timeout(conn.connect_timeout.saturating_add(conn.request_timeout))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("coordinator/", env!("CARGO_PKG_VERSION")))
}

impl Default for ProductClient {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ProductClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProductClient").field("max_response_bytes", &self.max_response_bytes).finish_non_exhaustive()
    }
}

/// How a send failed: before anything left, or possibly after.
enum Sent {
    /// The request could not be built; nothing was sent and resending cannot help.
    Unbuildable,
    /// Nothing was sent.
    Not(Reason),
    /// The request may have reached the product.
    Maybe(Reason),
}

/// Sends a request, telling "nothing was sent" (connect, DNS, TLS, connect timeout,
/// a request that could not be built) apart from "may have been sent".
async fn send(request: RequestBuilder) -> Result<Response, Sent> {
    match request.send().await {
        Ok(response) => Ok(response),
        Err(e) if e.is_builder() => Err(Sent::Unbuildable),
        Err(e) if e.is_connect() => Err(Sent::Not(Reason::NotConnected)),
        Err(e) if e.is_timeout() => Err(Sent::Maybe(Reason::TimedOut)),
        Err(_) => Err(Sent::Maybe(Reason::ConnectionLost)),
    }
}

/// `submit-message/v1` → (`submit-message`, `v1`).
fn split_operation(operation: &str) -> Option<(&str, &str)> {
    let (name, version) = operation.split_once('/')?;
    let digits = version.strip_prefix('v')?;
    let ok = !name.is_empty() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    ok.then_some((name, version))
}

#[cfg(test)]
mod tests {
    use super::split_operation;

    #[test]
    fn operation_names() {
        assert_eq!(split_operation("submit-message/v1"), Some(("submit-message", "v1")));
        assert_eq!(split_operation("evaluate/v12"), Some(("evaluate", "v12")));
        for bad in ["submit-message", "submit-message/1", "/v1", "a/v", "a/v1/x", "a/vx"] {
            assert_eq!(split_operation(bad), None, "{bad}");
        }
    }
}
