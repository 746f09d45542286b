//! The classification rules of
//! docs/reference/runs.md#calls-and-prepared-commands and
//! docs/reference/products.md#operations as pure functions: what a status says,
//! how the protocol's bodies parse, and why an answer is what it is. No IO;
//! [`client`](crate::client) feeds these from the wire.
//!
//! **Invariant:** a lost response after sending is uncertain, never retryable.
//! Only a status the product chose (429, 503) or a failure before any byte of the
//! request left (connect, DNS, TLS, no credential) is a definite "not done".

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use coordinator_core::machine::event::{CallAnswer, Observation, ReceiptAnswer};
use reqwest::header::{DATE, HeaderMap, RETRY_AFTER};
use serde_json::Value;

use crate::token::TokenError;

/// The refusal code of a request that this crate could not express and therefore
/// never sent (an operation name not of the form `<name>/v<N>`, a header value with
/// control characters, a path segment that is empty, `.` or `..`). Nothing happened
/// and resending cannot help, so it is a refusal rather than a retry; it cannot
/// arise from a checked definition.
pub const UNSENDABLE: &str = "coordinator.request-unsendable";

/// A classified answer with the reason for its classification, for the audit
/// journal, logs and metrics. Its `Debug` shows the answer's kind and the reason,
/// never the output or value the answer carries (the answer's own `Debug` does:
/// log an `Explained`, not its `answer`).
#[derive(Clone, PartialEq)]
pub struct Explained<T> {
    /// The classified answer the state machine consumes.
    pub answer: T,
    /// Why: a status, a transport failure, a credential failure.
    pub reason: Reason,
}

impl<T: AnswerKind> fmt::Debug for Explained<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Explained").field("answer", &self.answer.kind()).field("reason", &self.reason).finish()
    }
}

/// The kind of a classified answer, without what it carries.
pub trait AnswerKind {
    /// `accepted`, `refused`, `retryable`, `uncertain`; `found`, `not-found`,
    /// `expired`, `unavailable`; `pending`, `complete`, `unavailable`.
    fn kind(&self) -> &'static str;
}

impl AnswerKind for CallAnswer {
    fn kind(&self) -> &'static str {
        match self {
            CallAnswer::Accepted { .. } => "accepted",
            CallAnswer::Refused { .. } => "refused",
            CallAnswer::Retryable { .. } => "retryable",
            CallAnswer::Uncertain => "uncertain",
        }
    }
}

impl AnswerKind for ReceiptAnswer {
    fn kind(&self) -> &'static str {
        self.as_str()
    }
}

impl AnswerKind for Observation {
    fn kind(&self) -> &'static str {
        match self {
            Observation::Pending => "pending",
            Observation::Complete { .. } => "complete",
            Observation::Unavailable => "unavailable",
        }
    }
}

/// Why an answer was classified as it was. It never carries a secret, a token, a
/// payload or text the product wrote, so it is safe to log and journal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// The product answered with this status and a body that parsed (or was not needed).
    #[error("the product answered HTTP {status}")]
    Status {
        /// The HTTP status.
        status: u16,
    },
    /// The product answered with this status, but the body is not the protocol's JSON.
    #[error("the product answered HTTP {status} with a body that is not the protocol's JSON")]
    MalformedBody {
        /// The HTTP status.
        status: u16,
    },
    /// The product answered with this status, but its body could not be read whole.
    #[error("the product answered HTTP {status} but its body could not be read: {failure}")]
    BodyUnreadable {
        /// The HTTP status.
        status: u16,
        /// What went wrong while reading.
        failure: BodyFailure,
    },
    /// No credential could be acquired, so the request was not sent.
    #[error("not sent: no credential ({0})")]
    Token(TokenError),
    /// The connection could not be established (refused, DNS, TLS, connect timeout),
    /// so the request was not sent.
    #[error("not sent: the product could not be connected to")]
    NotConnected,
    /// The request was sent (or may have been) and no response came in time.
    #[error("no response within the request timeout")]
    TimedOut,
    /// The request was sent (or may have been) and the connection failed before a
    /// response arrived (reset, closed).
    #[error("the connection failed before a response arrived")]
    ConnectionLost,
    /// The request could not be expressed, so it was not sent (see [`UNSENDABLE`]).
    #[error("not sent: {0}")]
    Unsendable(&'static str),
    /// The HTTP client could not be built (TLS set-up), so nothing was sent.
    #[error("not sent: the HTTP client could not be built")]
    ClientUnavailable,
}

impl Reason {
    /// What this answer says of the product's health, for the connection's
    /// shared pace (`coordinator_core::pace`); `retry_after_ms` is the
    /// `Retry-After` the answer gave. `None` when it says nothing of the
    /// product: no credential, or the request could not be made at all.
    ///
    /// `429` and `503`, and a connection that could not be made, ask everyone
    /// to slow down; a `5xx`, a body that broke off or is not the protocol's, a
    /// timeout or a lost connection are failures; any other status is healthy
    /// (a refusal included: the product answered).
    pub fn health(&self, retry_after_ms: Option<i64>) -> Option<coordinator_core::pace::Health> {
        use coordinator_core::pace::Health;
        match self {
            Reason::Status { status: 429 | 503 } => Some(Health::SlowDown { retry_after_ms }),
            Reason::NotConnected => Some(Health::SlowDown { retry_after_ms: None }),
            Reason::Status { status } | Reason::MalformedBody { status } if *status >= 500 => Some(Health::Failed),
            Reason::MalformedBody { .. } => Some(Health::Failed),
            Reason::Status { .. } => Some(Health::Healthy),
            Reason::BodyUnreadable { .. } | Reason::TimedOut | Reason::ConnectionLost => Some(Health::Failed),
            Reason::Token(_) | Reason::Unsendable(_) | Reason::ClientUnavailable => None,
        }
    }
}

/// The `Retry-After` an attempt's answer carries, in ms: how long the
/// product asked everyone to wait (`None`: it did not say).
pub fn retry_after_ms(answer: &CallAnswer) -> Option<i64> {
    match answer {
        CallAnswer::Retryable { retry_after_seconds: Some(s) } => {
            Some(i64::try_from(*s).unwrap_or(i64::MAX / 1000).saturating_mul(1000))
        }
        _ => None,
    }
}

/// How reading a response body failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyFailure {
    /// It was longer than the client accepts.
    #[error("longer than {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The request timeout ran out while reading it.
    #[error("timed out")]
    TimedOut,
    /// The connection broke before its end (truncated, reset).
    #[error("broken off")]
    Broken,
}

/// What a status alone says about an operation attempt
/// (docs/reference/products.md#operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ByStatus {
    /// 2xx: the product acted; the body carries the output.
    Acted,
    /// 4xx other than 429: refused; the body may carry a declared code.
    Refused,
    /// 429 or 503: definitely not done.
    NotDone,
    /// 3xx: redirects are not followed; a refusal with code `http-3xx`.
    Redirected,
    /// 5xx other than 503, and anything unexpected: the product may have acted.
    Uncertain,
}

/// Classifies a status.
pub(crate) fn by_status(status: u16) -> ByStatus {
    match status {
        429 | 503 => ByStatus::NotDone,
        200..=299 => ByStatus::Acted,
        300..=399 => ByStatus::Redirected,
        400..=499 => ByStatus::Refused,
        _ => ByStatus::Uncertain,
    }
}

/// The refusal code for a refusal without a declared code.
pub(crate) fn http_code(status: u16) -> String {
    format!("http-{status}")
}

/// `Retry-After`, in whole seconds from the answer: delay-seconds as written,
/// or an HTTP-date counted from the answer's own `Date` (the product's clock
/// on both sides, so no skew between its clock and ours counts) or, without
/// one, from `now`. A date already past is 0. Anything else is ignored
/// (`None`): the retry policy's own backoff applies.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse() {
        return Some(seconds);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let from = headers
        .get(DATE)
        .and_then(|date| date.to_str().ok())
        .and_then(|date| httpdate::parse_http_date(date.trim()).ok())
        .unwrap_or(now);
    // Whole seconds, a part of one counted as one: never earlier than the product asked.
    Some(at.duration_since(from).map_or(0, |wait| wait.as_secs() + u64::from(wait.subsec_nanos() > 0)))
}

/// `{"output": …, "completions": {NAME: "<reference>"}}`: `output` must be present
/// (it may be `null`); `completions` may be absent or `null`, and otherwise must map
/// names to strings.
pub(crate) fn envelope(body: &[u8]) -> Option<(Value, BTreeMap<String, String>)> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    let output = object.remove("output")?;
    let completions = match object.remove("completions") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => {
            let mut completions = BTreeMap::new();
            for (name, reference) in map {
                let Value::String(reference) = reference else { return None };
                completions.insert(name, reference);
            }
            completions
        }
        Some(_) => return None,
    };
    Some((output, completions))
}

/// The code of `{"refusal": {"code": "…"}}`, if the body is that and the code is a
/// non-empty string.
pub(crate) fn refusal_code(body: &[u8]) -> Option<String> {
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    match value.get_mut("refusal")?.get_mut("code")?.take() {
        Value::String(code) if !code.is_empty() => Some(code),
        _ => None,
    }
}

/// `{"state":"pending"}` or `{"state":"complete","value":…}` (the value may be
/// `null` but must be present).
pub(crate) fn observation(body: &[u8]) -> Option<Observation> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    match object.get("state")?.as_str()? {
        "pending" => Some(Observation::Pending),
        "complete" => Some(Observation::Complete { value: object.remove("value")? }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_say_what_they_say_of_the_products_health() {
        use coordinator_core::pace::Health;
        let status = |status| Reason::Status { status };
        assert_eq!(status(429).health(Some(5000)), Some(Health::SlowDown { retry_after_ms: Some(5000) }));
        assert_eq!(status(503).health(None), Some(Health::SlowDown { retry_after_ms: None }));
        assert_eq!(Reason::NotConnected.health(None), Some(Health::SlowDown { retry_after_ms: None }), "refused");
        for failed in [status(500), status(502), Reason::TimedOut, Reason::ConnectionLost] {
            assert_eq!(failed.health(None), Some(Health::Failed), "{failed:?}");
        }
        assert_eq!(Reason::MalformedBody { status: 200 }.health(None), Some(Health::Failed));
        for healthy in [status(200), status(201), status(404), status(409), status(422)] {
            assert_eq!(healthy.health(None), Some(Health::Healthy), "{healthy:?}");
        }
        assert_eq!(Reason::ClientUnavailable.health(None), None, "nothing was asked of the product");
    }

    #[test]
    fn explained_debug_shows_the_kind_not_the_output() {
        let explained = Explained {
            answer: CallAnswer::Accepted { output: json!({"name": "Ada"}), completions: BTreeMap::new() },
            reason: Reason::Status { status: 200 },
        };
        assert_eq!(format!("{explained:?}"), r#"Explained { answer: "accepted", reason: Status { status: 200 } }"#);
        let found = Explained { answer: ReceiptAnswer::NotFound, reason: Reason::Status { status: 404 } };
        assert!(format!("{found:?}").contains("not-found"));
        let complete = Explained { answer: Observation::Complete { value: json!("Ada") }, reason: Reason::TimedOut };
        assert!(!format!("{complete:?}").contains("Ada"));
    }

    #[test]
    fn every_status_class() {
        let cases = [
            (200, ByStatus::Acted),
            (204, ByStatus::Acted),
            (301, ByStatus::Redirected),
            (302, ByStatus::Redirected),
            (400, ByStatus::Refused),
            (404, ByStatus::Refused),
            (408, ByStatus::Refused),
            (429, ByStatus::NotDone),
            (500, ByStatus::Uncertain),
            (501, ByStatus::Uncertain),
            (502, ByStatus::Uncertain),
            (503, ByStatus::NotDone),
            (504, ByStatus::Uncertain),
            (599, ByStatus::Uncertain),
            (101, ByStatus::Uncertain),
        ];
        for (status, expected) in cases {
            assert_eq!(by_status(status), expected, "{status}");
        }
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:00:00 GMT").unwrap_or(SystemTime::UNIX_EPOCH);
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.insert(*name, HeaderValue::from_static(value));
            }
            retry_after(&h, now)
        };
        assert_eq!(with(&[("retry-after", "7")]), Some(7));
        assert_eq!(with(&[("retry-after", " 120 ")]), Some(120));
        assert_eq!(with(&[("retry-after", "-1")]), None);
        assert_eq!(with(&[("retry-after", "soon")]), None);
        assert_eq!(with(&[]), None);
        // A date counts from the answer's Date, else from now; a past one is 0.
        let date = ("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT");
        assert_eq!(with(&[date, ("date", "Wed, 21 Oct 2026 07:27:15 GMT")]), Some(45));
        assert_eq!(with(&[date]), Some(28 * 60));
        assert_eq!(with(&[date, ("date", "Wed, 21 Oct 2026 08:00:00 GMT")]), Some(0));
        assert_eq!(with(&[date, ("date", "yesterday")]), Some(28 * 60), "an unreadable Date counts from now");
        // The two obsolete forms HTTP still allows.
        assert_eq!(with(&[("retry-after", "Wednesday, 21-Oct-26 07:00:30 GMT")]), Some(30));
        assert_eq!(with(&[("retry-after", "Wed Oct 21 07:01:00 2026")]), Some(60));
        let between = now + std::time::Duration::from_millis(400);
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("Wed, 21 Oct 2026 07:00:10 GMT"));
        assert_eq!(retry_after(&h, between), Some(10), "a part of a second counts as one");
    }

    #[test]
    fn envelopes() {
        let parse = |v: Value| envelope(v.to_string().as_bytes());
        let refs = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(parse(json!({"output": {"a": 1}})), Some((json!({"a": 1}), BTreeMap::new())));
        assert_eq!(parse(json!({"output": null, "completions": null})), Some((Value::Null, BTreeMap::new())));
        assert_eq!(
            parse(json!({"output": 1, "completions": {"result": "r-1"}})),
            Some((json!(1), refs(&[("result", "r-1")])))
        );
        assert_eq!(parse(json!({"completions": {}})), None, "output is required");
        assert_eq!(parse(json!({"output": 1, "completions": {"result": 7}})), None);
        assert_eq!(parse(json!({"output": 1, "completions": []})), None);
        assert_eq!(parse(json!([1])), None);
        assert_eq!(envelope(b"{\"output\""), None);
        assert_eq!(envelope(b""), None);
    }

    #[test]
    fn refusal_codes() {
        let parse = |v: Value| refusal_code(v.to_string().as_bytes());
        assert_eq!(parse(json!({"refusal": {"code": "slot-taken"}})), Some("slot-taken".into()));
        assert_eq!(parse(json!({"refusal": {"code": ""}})), None);
        assert_eq!(parse(json!({"refusal": {"code": 3}})), None);
        assert_eq!(parse(json!({"refusal": "slot-taken"})), None);
        assert_eq!(parse(json!({"error": "nope"})), None);
        assert_eq!(refusal_code(b"<html>"), None);
    }

    #[test]
    fn observations() {
        let parse = |v: Value| observation(v.to_string().as_bytes());
        assert_eq!(parse(json!({"state": "pending"})), Some(Observation::Pending));
        assert_eq!(parse(json!({"state": "complete", "value": {"decision": "approved"}})), {
            Some(Observation::Complete { value: json!({"decision": "approved"}) })
        });
        assert_eq!(
            parse(json!({"state": "complete", "value": null})),
            Some(Observation::Complete { value: Value::Null })
        );
        assert_eq!(parse(json!({"state": "complete"})), None);
        assert_eq!(parse(json!({"state": "done"})), None);
        assert_eq!(parse(json!("pending")), None);
        assert_eq!(observation(b"garbage"), None);
    }
}
