//! The simulated case-work system: review requests that a reviewer decides.
//!
//! `submit-review-request/v1` opens a request (`review-N`) and exposes it as the
//! completion `result`; `withdraw-review-request/v1` withdraws a pending one and
//! refuses a decided one with the declared refusal `already-decided`;
//! `read-review-request/v1` shows its state. The reviewer is the control
//! endpoint `POST /v1/reviews/{reference}/decision`, or — with
//! [`CaseworkConfig::auto_decide_after`], as in `coordinator dev` — a tokio
//! timer that decides each request by itself (the request's
//! `requestedDecision`, else `approved`). Every decision is announced to
//! [`CaseworkConfig::notify_url`], if set, with `POST {"reference"}`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::{self, Accepted, Completion, Product, Sim};
use crate::error::{ApiError, Refusal};

/// How the simulated reviewers behave.
#[derive(Debug, Clone, Default)]
pub struct CaseworkConfig {
    /// Decide each submitted request by itself this long after it was submitted.
    pub auto_decide_after: Option<Duration>,
    /// Where every decision is announced: `POST {url}` with `{"reference"}`.
    pub notify_url: Option<String>,
    /// Bearer token sent with the announcement.
    pub notify_token: Option<String>,
    /// Review types refused with the declared refusal `subject-not-reviewable`.
    pub not_reviewable: BTreeSet<String>,
    /// Refuse a second pending request for the same subject and review type with
    /// the declared refusal `review-already-open` (off by default, so repeated dev
    /// runs on one sample input are not refused).
    pub one_open_request_per_subject: bool,
}

/// A reviewer's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Approved.
    Approved,
    /// Rejected.
    Rejected,
}

/// Where a review request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewState {
    /// Waiting for a reviewer.
    Pending,
    /// Decided (`decided_at` is RFC 3339).
    Decided {
        /// The decision.
        decision: Decision,
        /// When, RFC 3339 UTC.
        decided_at: String,
    },
    /// Withdrawn by the submitter before a decision.
    Withdrawn,
}

/// One review request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The subject's record type and id.
    pub subject: (String, String),
    /// The review type.
    pub review_type: String,
    /// The submitter's recommendation.
    pub requested_decision: Option<Decision>,
    /// Where it stands.
    pub state: ReviewState,
}

/// The case-work system's state.
#[derive(Debug)]
pub struct Casework {
    config: CaseworkConfig,
    reviews: BTreeMap<String, Review>,
    created: u64,
    http: Option<reqwest::Client>,
}

impl Casework {
    /// A case-work system with these reviewers.
    pub fn new(config: CaseworkConfig) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().ok();
        Casework { config, reviews: BTreeMap::new(), created: 0, http }
    }

    fn view(id: &str, review: &Review) -> Value {
        match &review.state {
            ReviewState::Pending => json!({"reviewRequestId": id, "state": "pending"}),
            ReviewState::Decided { decision, decided_at } => {
                json!({"reviewRequestId": id, "state": "decided", "decision": decision, "decidedAt": decided_at})
            }
            ReviewState::Withdrawn => json!({"reviewRequestId": id, "state": "withdrawn"}),
        }
    }

    fn submit(&mut self, command: SubmitReview) -> Result<Accepted, Refusal> {
        if self.config.not_reviewable.contains(&command.review_type) {
            return Err(Refusal::new(axum::http::StatusCode::UNPROCESSABLE_ENTITY, "subject-not-reviewable"));
        }
        let subject = (command.subject.record_type, command.subject.record_id);
        let open = self
            .reviews
            .values()
            .any(|r| r.state == ReviewState::Pending && r.subject == subject && r.review_type == command.review_type);
        if open && self.config.one_open_request_per_subject {
            return Err(Refusal::conflict("review-already-open"));
        }
        self.created += 1;
        let id = format!("review-{}", self.created);
        let review = Review {
            subject,
            review_type: command.review_type,
            requested_decision: command.requested_decision,
            state: ReviewState::Pending,
        };
        self.reviews.insert(id.clone(), review);
        Ok(Accepted::output(json!({"reviewRequestId": id})).with_completion("result", &id))
    }

    fn withdraw(&mut self, id: &str) -> Result<Accepted, Refusal> {
        let review = self.reviews.get_mut(id).ok_or(Refusal::not_found("review-not-found"))?;
        match review.state {
            ReviewState::Decided { .. } => return Err(Refusal::conflict("already-decided")),
            ReviewState::Pending | ReviewState::Withdrawn => review.state = ReviewState::Withdrawn,
        }
        Ok(Accepted::output(json!({"reviewRequestId": id, "state": "withdrawn"})))
    }

    /// Decides a pending request and returns how `read-review-request/v1` shows it now.
    fn decide(&mut self, id: &str, decision: Option<Decision>, now: SystemTime) -> Result<Value, ApiError> {
        let review = self.reviews.get_mut(id).ok_or_else(|| ApiError::NotFound(format!("no review request `{id}`")))?;
        match review.state {
            ReviewState::Pending => {}
            ReviewState::Decided { .. } => {
                return Err(ApiError::Conflict { code: "already-decided", message: format!("`{id}` is decided") });
            }
            ReviewState::Withdrawn => {
                return Err(ApiError::Conflict { code: "withdrawn", message: format!("`{id}` was withdrawn") });
            }
        }
        let decision = decision.or(review.requested_decision).unwrap_or(Decision::Approved);
        let decided_at = DateTime::<Utc>::from(now).to_rfc3339_opts(SecondsFormat::Secs, true);
        review.state = ReviewState::Decided { decision, decided_at };
        Ok(Casework::view(id, review))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Subject {
    record_type: String,
    record_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubmitReview {
    subject: Subject,
    review_type: String,
    requested_decision: Option<Decision>,
}

fn review_id(command: &Value) -> Result<&str, Refusal> {
    command.get("reviewRequestId").and_then(Value::as_str).ok_or_else(Refusal::invalid_command)
}

impl Product for Casework {
    const NAME: &'static str = "casework";
    const OPERATIONS: &'static [&'static str] =
        &["submit-review-request/v1", "withdraw-review-request/v1", "read-review-request/v1"];

    fn perform(&mut self, operation: &str, command: &Value, _now: SystemTime) -> Result<Accepted, Refusal> {
        match operation {
            "submit-review-request/v1" => {
                self.submit(serde_json::from_value(command.clone()).map_err(|_| Refusal::invalid_command())?)
            }
            "withdraw-review-request/v1" => self.withdraw(review_id(command)?),
            "read-review-request/v1" => {
                let id = review_id(command)?;
                let review = self.reviews.get(id).ok_or(Refusal::not_found("review-not-found"))?;
                Ok(Accepted::output(Casework::view(id, review)))
            }
            _ => Err(Refusal::not_found("unknown-operation")),
        }
    }

    fn completion(&self, name: &str, reference: &str) -> Option<Completion> {
        if name != "result" {
            return None;
        }
        Some(match &self.reviews.get(reference)?.state {
            ReviewState::Pending | ReviewState::Withdrawn => Completion::Pending,
            ReviewState::Decided { decision, decided_at } => {
                Completion::Complete { value: json!({"decision": decision, "decidedAt": decided_at}) }
            }
        })
    }

    fn after_effect(sim: &Sim<Self>, operation: &str, accepted: &Accepted) {
        let Some(delay) = sim.with_product(|c| c.config.auto_decide_after) else { return };
        let Some(reference) = accepted.completions.get("result").filter(|_| operation == "submit-review-request/v1")
        else {
            return;
        };
        let (sim, reference) = (sim.clone(), reference.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep(delay).await;
                // A request withdrawn or decided by hand meanwhile stays as it is.
                let _ = sim.decide(&reference, None);
            });
        }
    }
}

impl Sim<Casework> {
    /// Decides a pending review request — `decision`, else the request's
    /// `requestedDecision`, else approved — and announces it to the notification URL.
    /// Returns the request as `read-review-request/v1` would show it.
    ///
    /// # Errors
    /// [`ApiError::NotFound`] for an unknown reference, [`ApiError::Conflict`] when it
    /// is already decided (`already-decided`) or withdrawn (`withdrawn`).
    pub fn decide(&self, reference: &str, decision: Option<Decision>) -> Result<Value, ApiError> {
        let view = self.with_product(|c| c.decide(reference, decision, SystemTime::now()))?;
        self.notify(reference);
        Ok(view)
    }

    /// The references of every review request made so far.
    pub fn references(&self) -> Vec<String> {
        self.with_product(|c| c.reviews.keys().cloned().collect())
    }

    /// A review request by reference.
    pub fn review(&self, reference: &str) -> Option<Review> {
        self.with_product(|c| c.reviews.get(reference).cloned())
    }

    /// Sends `POST {notify_url}` with `{"reference"}` in the background, if a URL is
    /// configured and a tokio runtime is running. Delivery failures are ignored: a
    /// notification only brings an observation forward.
    fn notify(&self, reference: &str) {
        let target = self.with_product(|c| {
            let url = c.config.notify_url.clone()?;
            Some((url, c.config.notify_token.clone(), c.http.clone()?))
        });
        let (Some((url, token, http)), Ok(runtime)) = (target, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let body = json!({"reference": reference});
        runtime.spawn(async move {
            let mut request = http.post(url).json(&body);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let _ = request.send().await;
        });
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionRequest {
    decision: Decision,
}

async fn decision(
    State(sim): State<Sim<Casework>>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let request: DecisionRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("expected {{\"decision\": \"approved\" | \"rejected\"}}: {e}")))?;
    sim.decide(&reference, Some(request.decision)).map(Json)
}

/// The case-work routes (protocol, control API and the reviewer's decision
/// endpoint), to be served at `/sim/casework`.
pub fn router(sim: Sim<Casework>) -> Router {
    engine::routes().route("/v1/reviews/{reference}/decision", post(decision)).with_state(sim)
}
