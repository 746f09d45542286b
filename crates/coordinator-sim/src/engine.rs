//! The product protocol every simulated product shares
//! (docs/reference/products.md): the bearer check, faults, idempotent replay,
//! receipts, completions, the effects count and the control API. A product
//! supplies only what its operations do ([`Product::perform`]) and what its
//! completions say.
//!
//! State lives behind one [`std::sync::Mutex`] per product, never held across an
//! `await`. Effect and receipt rules come from the built-in catalog, not from
//! this crate, so the simulators cannot drift from the descriptors.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use coordinator_core::check::catalog::Catalog;
use coordinator_core::json_schema;
use coordinator_core::model::catalog::Effect;
use jsonschema::Validator;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{ApiError, Refusal};
use crate::faults::{Control, Fault, FaultRequest, Faults};
use crate::ledger::{EffectCount, Ledger, ReceiptLookup};
use crate::load::{Load, LoadView};
use crate::token::Tokens;

/// What an accepted operation answers: `{"output": …, "completions": {NAME: reference}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accepted {
    /// The operation's output (valid against the catalog's output schema).
    pub output: Value,
    /// Completion name -> reference, for operations that expose completions.
    pub completions: BTreeMap<String, String>,
}

impl Accepted {
    /// An accepted answer with no completions.
    pub fn output(output: Value) -> Self {
        Accepted { output, completions: BTreeMap::new() }
    }

    /// Adds a completion reference.
    #[must_use]
    pub fn with_completion(mut self, name: &str, reference: &str) -> Self {
        self.completions.insert(name.to_owned(), reference.to_owned());
        self
    }
}

/// The state of a completion: `{"state":"pending"}` or `{"state":"complete","value":…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Completion {
    /// Not there yet.
    Pending,
    /// Done, with its value (valid against the completion's schema).
    Complete {
        /// The completion value.
        value: Value,
    },
}

/// One simulated product: its name, its operations and what they do.
pub trait Product: Send + Sized + 'static {
    /// The product name, as in the catalog and in `/sim/{product}`.
    const NAME: &'static str;
    /// The operations it serves (`submit-message/v1`); each must be in the built-in catalog.
    const OPERATIONS: &'static [&'static str];

    /// Performs `operation`: the effect of a mutation or evaluation, or the answer of a read.
    /// The engine calls it at most once per idempotency key for mutations and
    /// evaluations, with a `command` already valid against the catalog's input schema.
    ///
    /// # Errors
    /// A [`Refusal`] when the product declines; it must then have changed nothing.
    fn perform(&mut self, operation: &str, command: &Value, now: SystemTime) -> Result<Accepted, Refusal>;

    /// The state of completion `name` for `reference`; `None` when unknown.
    fn completion(&self, name: &str, reference: &str) -> Option<Completion>;

    /// Runs after the lock is released, once per first effect (not on replays).
    fn after_effect(_sim: &Sim<Self>, _operation: &str, _accepted: &Accepted) {}
}

/// An operation as the engine serves it, with its catalog rules.
struct Operation {
    name: &'static str,
    effect: Effect,
    receipt: bool,
    input: Validator,
}

struct Inner<P> {
    tokens: Tokens,
    operations: Vec<Operation>,
    timeout_delay: Duration,
    state: Mutex<Shared<P>>,
    /// Answers a `timeout` fault is holding back right now.
    held: AtomicUsize,
    /// The product requests being served, and when they arrived.
    load: Load,
}

struct Shared<P> {
    product: P,
    ledger: Ledger,
    faults: Faults,
    /// The `traceparent` header of each request that carried one, oldest first (bounded).
    traceparents: VecDeque<String>,
}

/// How many `traceparent` headers a simulator keeps.
const TRACEPARENTS_KEPT: usize = 10_000;

/// The W3C trace context header.
const TRACEPARENT: &str = "traceparent";

/// A running simulated product: a cheap handle, shared by its router and tests.
pub struct Sim<P: Product> {
    inner: Arc<Inner<P>>,
}

impl<P: Product> Clone for Sim<P> {
    fn clone(&self) -> Self {
        Sim { inner: Arc::clone(&self.inner) }
    }
}

/// Whether calls of an operation with this effect need an `Idempotency-Key`.
fn needs_key(effect: Effect) -> bool {
    match effect {
        Effect::Read => false,
        Effect::Mutation | Effect::Evaluation | Effect::ProposalAction => true,
    }
}

impl<P: Product> Sim<P> {
    /// Serves `product` with the rules `catalog` describes for it; bearer tokens are
    /// checked against `tokens`; a `timeout` fault without `delaySeconds` waits
    /// `timeout_delay`.
    ///
    /// # Panics
    /// If the catalog does not describe one of the product's operations or its input
    /// schema does not compile: the simulator and the built-in catalog disagree, a
    /// bug this crate's tests catch.
    pub fn new(product: P, tokens: Tokens, catalog: &Catalog, timeout_delay: Duration) -> Self {
        let operations = P::OPERATIONS
            .iter()
            .map(|name| {
                let full = format!("{}.{name}", P::NAME);
                let Some(descriptor) = catalog.operations.get(&full) else {
                    panic!("the `{}` simulator serves `{full}`, which the catalog does not describe", P::NAME)
                };
                let input = match json_schema::compile(&descriptor.input) {
                    Ok(input) => input,
                    Err(e) => panic!("the input schema of `{full}` does not compile: {e}"),
                };
                Operation { name, effect: descriptor.effect, receipt: descriptor.receipt, input }
            })
            .collect();
        let state =
            Shared { product, ledger: Ledger::default(), faults: Faults::default(), traceparents: VecDeque::new() };
        let held = AtomicUsize::new(0);
        let inner = Inner { tokens, operations, timeout_delay, state: Mutex::new(state), held, load: Load::default() };
        Sim { inner: Arc::new(inner) }
    }

    fn lock(&self) -> MutexGuard<'_, Shared<P>> {
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the product's state under the lock.
    pub(crate) fn with_product<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        f(&mut self.lock().product)
    }

    /// The token verifier this product checks bearer tokens with.
    pub fn tokens(&self) -> &Tokens {
        &self.inner.tokens
    }

    /// Requests and effects per (operation, idempotency key), as `GET /v1/effects` shows them.
    pub fn effects(&self) -> Vec<EffectCount> {
        self.lock().ledger.effects()
    }

    /// Answers held back by a `timeout` fault at this moment: calls whose effect
    /// happened and whose answer has not been sent yet.
    pub fn answers_held(&self) -> usize {
        self.inner.held.load(Ordering::SeqCst)
    }

    /// The product requests being served now, the most at once, and when
    /// each arrived, as `GET /v1/load` shows them.
    pub fn load(&self) -> LoadView {
        self.inner.load.view()
    }

    /// Starts counting the load afresh, as `DELETE /v1/load` does.
    pub fn reset_load(&self) {
        self.inner.load.reset();
    }

    /// The `traceparent` headers requests carried (operations, receipt lookups,
    /// observations), oldest first; the last 10 000.
    pub fn traceparents(&self) -> Vec<String> {
        self.lock().traceparents.iter().cloned().collect()
    }

    /// Keeps the request's `traceparent`, if it has one.
    fn note_trace(&self, headers: &HeaderMap) {
        let Some(value) = headers.get(TRACEPARENT).and_then(|v| v.to_str().ok()) else { return };
        let mut state = self.lock();
        if state.traceparents.len() >= TRACEPARENTS_KEPT {
            state.traceparents.pop_front();
        }
        state.traceparents.push_back(value.to_owned());
    }

    /// The receipt of an idempotency key, as `GET /v1/receipts/{key}` shows it.
    pub fn receipt(&self, key: &str) -> ReceiptLookup {
        self.lock().ledger.receipt(key)
    }

    /// Applies a control request, as `POST /v1/faults` does; returns how many receipts
    /// were expired (0 for an injected fault).
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] when the request is not valid for this product.
    pub fn control(&self, request: &FaultRequest) -> Result<usize, ApiError> {
        let control = request.resolve(P::NAME, P::OPERATIONS, self.inner.timeout_delay)?;
        let mut state = self.lock();
        Ok(match control {
            Control::Inject { operation, fault, count } => {
                state.faults.push(operation, fault, count);
                0
            }
            Control::ExpireReceipts { operation } => state.ledger.expire(operation),
        })
    }

    /// Forgets every pending fault.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }
}

/// The outcome of executing one call, before any fault shapes the answer.
struct Executed {
    accepted: Accepted,
    first_effect: bool,
}

impl<P: Product> Shared<P> {
    /// Replays the key's original outcome, or validates and performs the command.
    fn execute(&mut self, op: &Operation, key: Option<&str>, command: Value) -> Result<Executed, Refusal> {
        let keyed = if needs_key(op.effect) { key } else { None };
        if let Some(key) = keyed
            && let Some(previous) = self.ledger.replay(op.name, key, &command)
        {
            return previous.map(|accepted| Executed { accepted, first_effect: false });
        }
        if !op.input.is_valid(&command) {
            return Err(Refusal::invalid_command());
        }
        let accepted = self.product.perform(op.name, &command, SystemTime::now())?;
        if let Some(key) = keyed {
            self.ledger.record(op.name, key, command, accepted.clone(), op.receipt);
        }
        Ok(Executed { accepted, first_effect: keyed.is_some() })
    }
}

/// How a call is answered, decided under the lock and carried out after it.
enum Plan {
    /// Answer at once.
    Answer(Result<Executed, Refusal>),
    /// A fault answered without executing the call.
    Fail(ApiError),
    /// Executed; the connection is dropped instead of answering.
    Drop(Result<Executed, Refusal>),
    /// Executed; the answer is sent after a delay.
    Late(Duration, Result<Executed, Refusal>),
    /// Not executed; the connection is dropped instead of answering.
    Lost,
}

/// The protocol routes every product serves, before the product's state is attached.
pub(crate) fn routes<P: Product>() -> Router<Sim<P>> {
    Router::new()
        .route("/v1/operations/{name}/{version}", post(operation::<P>))
        .route("/v1/receipts/{key}", get(receipt::<P>))
        .route("/v1/completions/{name}/{reference}", get(completion::<P>))
        .route("/v1/faults", post(add_fault::<P>).delete(clear_faults::<P>))
        .route("/v1/effects", get(effects::<P>))
        .route("/v1/load", get(load::<P>).delete(reset_load::<P>))
}

async fn operation<P: Product>(
    State(sim): State<Sim<P>>,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let _serving = sim.inner.load.enter();
    sim.inner.tokens.authorize(&headers, P::NAME)?;
    sim.note_trace(&headers);
    let wanted = format!("{name}/{version}");
    let op = sim.inner.operations.iter().find(|op| op.name == wanted).ok_or(Refusal::not_found("unknown-operation"))?;
    let key = match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(key)) if !key.trim().is_empty() => Some(key.trim().to_owned()),
        Some(_) => return Err(Refusal::bad_request("idempotency-key-invalid").into()),
    };
    if key.is_none() && needs_key(op.effect) {
        return Err(Refusal::bad_request("idempotency-key-missing").into());
    }
    let command: Value = serde_json::from_slice(&body).map_err(|_| Refusal::bad_request("invalid-command"))?;
    let plan = {
        let mut state = sim.lock();
        state.ledger.count_request(op.name, key.as_deref());
        match state.faults.take(op.name) {
            Some(Fault::Refuse { status, code }) => Plan::Fail(Refusal::new(status, code).into()),
            Some(Fault::Unavailable { status, retry_after_seconds }) => {
                Plan::Fail(ApiError::Unavailable { status, retry_after_seconds })
            }
            Some(Fault::DropResponseAfterEffect) => Plan::Drop(state.execute(op, key.as_deref(), command)),
            Some(Fault::Timeout { delay }) => Plan::Late(delay, state.execute(op, key.as_deref(), command)),
            Some(Fault::DropRequest) => Plan::Lost,
            None => Plan::Answer(state.execute(op, key.as_deref(), command)),
        }
    };
    if let Plan::Answer(Ok(executed)) | Plan::Drop(Ok(executed)) | Plan::Late(_, Ok(executed)) = &plan
        && executed.first_effect
    {
        P::after_effect(&sim, op.name, &executed.accepted);
    }
    match plan {
        Plan::Answer(result) => answer(result),
        Plan::Fail(error) => Err(error),
        Plan::Drop(_) | Plan::Lost => Ok(Response::new(Body::new(DroppedBody))),
        Plan::Late(delay, result) => {
            let _held = Held::count(&sim.inner.held);
            tokio::time::sleep(delay).await;
            answer(result)
        }
    }
}

fn answer(result: Result<Executed, Refusal>) -> Result<Response, ApiError> {
    let executed = result?;
    Ok(accepted_body(&executed.accepted).into_response())
}

fn accepted_body(accepted: &Accepted) -> Json<Value> {
    Json(json!({"output": accepted.output, "completions": accepted.completions}))
}

/// One answer held back (see [`Sim::answers_held`]), until dropped — also
/// when the client goes away and the handler is dropped mid-delay.
struct Held<'a>(&'a AtomicUsize);

impl<'a> Held<'a> {
    fn count(held: &'a AtomicUsize) -> Held<'a> {
        held.fetch_add(1, Ordering::SeqCst);
        Held(held)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that fails before its first byte. hyper then closes the
/// connection without writing even the status line (HTTP/1.1; a stream reset on
/// HTTP/2), so the client sees a connection closed with no answer, exactly like
/// a product that lost the connection (after acting, or before: `drop-request`).
struct DroppedBody;

impl http_body::Body for DroppedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(Some(Err(std::io::Error::other("simulated fault: no answer"))))
    }
}

async fn receipt<P: Product>(
    State(sim): State<Sim<P>>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let _serving = sim.inner.load.enter();
    sim.inner.tokens.authorize(&headers, P::NAME)?;
    sim.note_trace(&headers);
    match sim.receipt(&key) {
        ReceiptLookup::Found(accepted) => Ok(accepted_body(&accepted)),
        ReceiptLookup::Expired => Err(ApiError::ReceiptExpired),
        ReceiptLookup::NotFound => Err(ApiError::ReceiptNotFound),
    }
}

async fn completion<P: Product>(
    State(sim): State<Sim<P>>,
    Path((name, reference)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<Completion>, ApiError> {
    let _serving = sim.inner.load.enter();
    sim.inner.tokens.authorize(&headers, P::NAME)?;
    sim.note_trace(&headers);
    let found = sim.lock().product.completion(&name, &reference);
    found.map(Json).ok_or(ApiError::CompletionNotFound { name })
}

async fn add_fault<P: Product>(State(sim): State<Sim<P>>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let request: FaultRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("not a fault request: {e}")))?;
    let expired = sim.control(&request)?;
    Ok(Json(json!({"fault": request.fault, "operation": request.operation, "expired": expired})))
}

async fn load<P: Product>(State(sim): State<Sim<P>>) -> Json<LoadView> {
    Json(sim.load())
}

async fn reset_load<P: Product>(State(sim): State<Sim<P>>) -> StatusCode {
    sim.reset_load();
    StatusCode::NO_CONTENT
}

async fn clear_faults<P: Product>(State(sim): State<Sim<P>>) -> StatusCode {
    sim.clear_faults();
    StatusCode::NO_CONTENT
}

async fn effects<P: Product>(State(sim): State<Sim<P>>) -> Json<Value> {
    Json(json!({"effects": sim.effects()}))
}
