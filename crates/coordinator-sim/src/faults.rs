//! Controllable faults: the `POST {base}/v1/faults` request, its validation,
//! and the per-operation queues the next calls take their fault from.
//!
//! This module only decides *which* fault a call gets; what a fault does to the
//! call is the engine's business ([`engine`](crate::engine)`::operation`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// The body of `POST {base}/v1/faults`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultRequest {
    /// The operation, `submit-message/v1` (a `messaging.` prefix is accepted too).
    /// Required for every fault but `expire-receipts`, where it narrows the expiry.
    pub operation: Option<String>,
    /// Which fault.
    pub fault: FaultKind,
    /// The refusal code, for `refuse` (required there).
    pub code: Option<String>,
    /// How many of the next calls get the fault (default 1).
    pub count: Option<u32>,
    /// For `timeout`: how long the answer is held back (default: the simulator's
    /// configured delay, 30 s unless changed). Fractions allowed.
    pub delay_seconds: Option<f64>,
    /// For `refuse`: the `4xx` status (default 422); for `unavailable`: `503`
    /// (the default) or `429`.
    pub status: Option<u16>,
    /// For `unavailable`: the seconds sent in `Retry-After` (default 1).
    pub retry_after_seconds: Option<u64>,
}

/// The fault names of the control API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Perform the effect, then close the connection without an answer.
    DropResponseAfterEffect,
    /// Refuse with `code` and no effect.
    Refuse,
    /// `503` (or `429`) with `Retry-After` and no effect.
    Unavailable,
    /// Perform the effect at once, answer only after a delay.
    Timeout,
    /// Make the receipts recorded so far answer `410`.
    ExpireReceipts,
    /// Close the connection without an answer and without acting (the request is lost).
    DropRequest,
}

/// A fault that the next call of an operation gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Perform the effect, then drop the connection: the client sees no response.
    DropResponseAfterEffect,
    /// Refuse without effect.
    Refuse {
        /// The `4xx` status.
        status: StatusCode,
        /// The refusal code.
        code: String,
    },
    /// `503` or `429` with `Retry-After`, no effect.
    Unavailable {
        /// `503` or `429`.
        status: StatusCode,
        /// The seconds sent in `Retry-After`.
        retry_after_seconds: u64,
    },
    /// Perform the effect at once; send the normal answer after `delay`.
    Timeout {
        /// How long the answer is held back.
        delay: Duration,
    },
    /// Drop the connection without acting: the client sees no response, and no receipt is kept.
    DropRequest,
}

/// What a valid `POST /v1/faults` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Control {
    /// Queue `fault` for the next `count` calls of `operation`.
    Inject {
        /// The operation (`submit-message/v1`).
        operation: &'static str,
        /// The fault.
        fault: Fault,
        /// How many calls get it.
        count: u32,
    },
    /// Expire the receipts recorded so far (of one operation, or all).
    ExpireReceipts {
        /// Only this operation's receipts, when given.
        operation: Option<&'static str>,
    },
}

impl FaultRequest {
    /// Validates the request against the product's operations.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for an unknown operation, a `refuse` without a code or
    /// with a non-`4xx` status, an `unavailable` with a status other than 503 or
    /// 429, a zero count or a negative or non-finite delay.
    pub(crate) fn resolve(
        &self,
        product: &str,
        operations: &[&'static str],
        default_delay: Duration,
    ) -> Result<Control, ApiError> {
        let operation = match &self.operation {
            None => None,
            Some(name) => {
                let bare = name.strip_prefix(product).and_then(|rest| rest.strip_prefix('.')).unwrap_or(name);
                let known = operations.iter().find(|op| **op == bare).copied();
                Some(known.ok_or_else(|| {
                    ApiError::BadRequest(format!("`{product}` has no operation `{name}`; it has {operations:?}"))
                })?)
            }
        };
        let fault = match self.fault {
            FaultKind::ExpireReceipts => return Ok(Control::ExpireReceipts { operation }),
            FaultKind::DropResponseAfterEffect => Fault::DropResponseAfterEffect,
            FaultKind::DropRequest => Fault::DropRequest,
            FaultKind::Unavailable => {
                let status = match self.status.unwrap_or(503) {
                    503 => StatusCode::SERVICE_UNAVAILABLE,
                    429 => StatusCode::TOO_MANY_REQUESTS,
                    _ => return Err(ApiError::BadRequest("`status` of `unavailable` must be 503 or 429".to_owned())),
                };
                Fault::Unavailable { status, retry_after_seconds: self.retry_after_seconds.unwrap_or(1) }
            }
            FaultKind::Refuse => {
                let code = self
                    .code
                    .clone()
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| ApiError::BadRequest("`refuse` needs a `code`".to_owned()))?;
                let status = StatusCode::from_u16(self.status.unwrap_or(422))
                    .ok()
                    .filter(StatusCode::is_client_error)
                    .ok_or_else(|| ApiError::BadRequest("`status` must be a 4xx status".to_owned()))?;
                Fault::Refuse { status, code }
            }
            FaultKind::Timeout => {
                let delay = match self.delay_seconds {
                    None => default_delay,
                    Some(s) => Duration::try_from_secs_f64(s)
                        .map_err(|_| ApiError::BadRequest("`delaySeconds` must be a non-negative number".to_owned()))?,
                };
                Fault::Timeout { delay }
            }
        };
        let operation =
            operation.ok_or_else(|| ApiError::BadRequest("`operation` is required for this fault".to_owned()))?;
        let count = self.count.unwrap_or(1);
        if count == 0 {
            return Err(ApiError::BadRequest("`count` must be at least 1".to_owned()));
        }
        Ok(Control::Inject { operation, fault, count })
    }
}

/// Faults waiting for the next calls, per operation, in the order they were asked for.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pending: BTreeMap<&'static str, VecDeque<(Fault, u32)>>,
}

impl Faults {
    /// Queues `fault` for the next `count` calls of `operation` (after those queued earlier).
    pub(crate) fn push(&mut self, operation: &'static str, fault: Fault, count: u32) {
        self.pending.entry(operation).or_default().push_back((fault, count));
    }

    /// The fault this call of `operation` gets, if any; consumes one use of it.
    pub(crate) fn take(&mut self, operation: &str) -> Option<Fault> {
        let queue = self.pending.get_mut(operation)?;
        let (fault, left) = queue.front_mut()?;
        let fault = fault.clone();
        *left -= 1;
        if *left == 0 {
            queue.pop_front();
        }
        Some(fault)
    }

    /// Forgets every pending fault.
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(value: serde_json::Value) -> FaultRequest {
        match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => panic!("fault request should parse: {e}"),
        }
    }

    const OPS: &[&str] = &["submit-message/v1"];

    #[test]
    fn faults_are_taken_in_order_and_counted_down() {
        let mut faults = Faults::default();
        let unavailable = Fault::Unavailable { status: StatusCode::SERVICE_UNAVAILABLE, retry_after_seconds: 1 };
        faults.push("submit-message/v1", unavailable.clone(), 2);
        faults.push("submit-message/v1", Fault::DropResponseAfterEffect, 1);
        assert_eq!(faults.take("submit-message/v1"), Some(unavailable.clone()));
        assert_eq!(faults.take("submit-message/v1"), Some(unavailable));
        assert_eq!(faults.take("submit-message/v1"), Some(Fault::DropResponseAfterEffect));
        assert_eq!(faults.take("submit-message/v1"), None);
        assert_eq!(faults.take("other/v1"), None);
    }

    #[test]
    fn requests_resolve_with_defaults_and_product_prefixes() {
        let control = request(json!({"operation": "messaging.submit-message/v1", "fault": "timeout"})).resolve(
            "messaging",
            OPS,
            Duration::from_secs(30),
        );
        assert_eq!(
            control,
            Ok(Control::Inject {
                operation: "submit-message/v1",
                fault: Fault::Timeout { delay: Duration::from_secs(30) },
                count: 1
            })
        );
        let control = request(json!({"fault": "expire-receipts"})).resolve("messaging", OPS, Duration::from_secs(30));
        assert_eq!(control, Ok(Control::ExpireReceipts { operation: None }));
        let unavailable = |value| match request(value).resolve("messaging", OPS, Duration::from_secs(30)) {
            Ok(Control::Inject { fault, .. }) => fault,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            unavailable(json!({"operation": "submit-message/v1", "fault": "unavailable"})),
            Fault::Unavailable { status: StatusCode::SERVICE_UNAVAILABLE, retry_after_seconds: 1 }
        );
        assert_eq!(
            unavailable(
                json!({"operation": "submit-message/v1", "fault": "unavailable", "status": 429, "retryAfterSeconds": 5})
            ),
            Fault::Unavailable { status: StatusCode::TOO_MANY_REQUESTS, retry_after_seconds: 5 }
        );
    }

    #[test]
    fn malformed_requests_are_refused() {
        for bad in [
            json!({"operation": "nope/v1", "fault": "unavailable"}),
            json!({"fault": "unavailable"}),
            json!({"operation": "submit-message/v1", "fault": "refuse"}),
            json!({"operation": "submit-message/v1", "fault": "refuse", "code": "x", "status": 503}),
            json!({"operation": "submit-message/v1", "fault": "unavailable", "count": 0}),
            json!({"operation": "submit-message/v1", "fault": "unavailable", "status": 500}),
            json!({"operation": "submit-message/v1", "fault": "timeout", "delaySeconds": -1.0}),
        ] {
            let resolved = request(bad.clone()).resolve("messaging", OPS, Duration::from_secs(30));
            assert!(matches!(resolved, Err(ApiError::BadRequest(_))), "{bad} gave {resolved:?}");
        }
        let negative = json!({"operation": "submit-message/v1", "fault": "unavailable", "retryAfterSeconds": -1});
        assert!(serde_json::from_value::<FaultRequest>(negative).is_err(), "not a number of seconds");
    }
}
