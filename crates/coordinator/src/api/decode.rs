//! Request bodies as the API reads them: pure functions from a body's bytes
//! to what a handler acts on, or its refusal. The handlers call them after
//! reading the body within its limit ([`within`]); the fuzz targets
//! (`fuzz/`) call them directly, so what they prove holds for the API. A
//! refusal never quotes the body: its message is fixed, or names a field
//! and its rule.

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

pub use super::body::{DRAIN_MAX, is_json, within};
use super::code::Code;
use super::{ApiError, guard};

/// The largest admission body accepted, in bytes (`413 request.too-large` above it).
pub const ADMISSION_LIMIT: usize = 2 << 20;
/// The longest idempotency key accepted, in characters (PostgreSQL indexes
/// the key: an entry of a megabyte was refused as `500 internal`; 255
/// characters are at most 1 020 bytes).
pub const KEY_MAX: usize = 255;
/// The longest workflow name or revision accepted, in characters.
pub const NAME_MAX: usize = 255;
/// The largest completion notification read, in bytes.
pub const COMPLETION_LIMIT: usize = 64 << 10;
/// The longest completion reference looked up, in bytes.
pub const REFERENCE_MAX: usize = 1024;

/// A `POST /v1/runs` body whose names and key are usable; the engine checks
/// the rest (the revision is active, the input fits its schema, the run id).
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// The workflow.
    pub workflow: String,
    /// The revision the caller pins.
    pub revision: String,
    /// The run input.
    pub input: Value,
    /// The idempotency key, when given.
    pub idempotency_key: Option<String>,
    /// The run id the caller chose, when given.
    pub run_id: Option<String>,
}

/// `POST /v1/runs` body, as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AdmitBody {
    workflow: String,
    revision: String,
    input: Value,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
}

/// The message of a body that is not an admission's shape. Fixed: the
/// parser's own text could quote the input.
pub const ADMISSION_SHAPE: &str = "the body must be JSON {workflow, revision, input, idempotencyKey?, runId?}";

/// Reads an admission body: JSON of [`ADMISSION_SHAPE`], workflow and
/// revision of 1 to [`NAME_MAX`] characters and a key of 1 to [`KEY_MAX`],
/// none with a control character.
///
/// # Errors
/// `400 request.invalid`, or `400 idempotency.key-invalid` for the key.
pub fn admission(bytes: &[u8]) -> Result<Admission, ApiError> {
    let body: AdmitBody = object(bytes).ok_or_else(|| ApiError::bad_request(ADMISSION_SHAPE))?;
    check_text("workflow", &body.workflow, NAME_MAX)?;
    check_text("revision", &body.revision, NAME_MAX)?;
    if let Some(key) = &body.idempotency_key
        && !usable(key, KEY_MAX)
    {
        return Err(ApiError::new(
            Code::IdempotencyKeyInvalid,
            format!("idempotencyKey must be 1 to {KEY_MAX} characters without control characters"),
        ));
    }
    let AdmitBody { workflow, revision, input, idempotency_key, run_id } = body;
    Ok(Admission { workflow, revision, input, idempotency_key, run_id })
}

/// The reference a completion notification names: a JSON `{reference}` of 1
/// to [`REFERENCE_MAX`] bytes without a control character. `None` for
/// anything else, which nudges nothing and is answered the same.
pub fn completion_reference(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct CompletionBody {
        reference: String,
    }
    let reference = object::<CompletionBody>(bytes)?.reference;
    (!reference.is_empty() && reference.len() <= REFERENCE_MAX && !guard::has_control(&reference)).then_some(reference)
}

/// `T` read from a JSON object. Not `serde_json::from_slice::<T>`: serde
/// also reads a struct from an array of its fields in order.
pub(super) fn object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    match serde_json::from_slice(bytes).ok()? {
        map @ Value::Object(_) => serde_json::from_value(map).ok(),
        _ => None,
    }
}

/// Whether `text` is 1 to `max` characters without a control character (the
/// OpenAPI schema `Name`: JSON Schema counts characters, not bytes).
fn usable(text: &str, max: usize) -> bool {
    !text.is_empty() && text.chars().count() <= max && !guard::has_control(text)
}

/// `400 request.invalid` unless `text` is [`usable`].
fn check_text(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    if !usable(text, max) {
        return Err(ApiError::bad_request(format!("{field} must be 1 to {max} characters without control characters")));
    }
    Ok(())
}

/// What a refusal says, for callers that decode without serving a request.
impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The stable code (`request.invalid`, …).
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    /// The message shown to the caller.
    pub fn message(&self) -> &str {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admission_must_be_a_json_object() {
        // serde reads a struct from an array too; found by fuzz/ (target `api_bodies`).
        let refused = admission(br#"["reviewed-notice", "sha256:00", {}]"#).err().map(|e| e.code());
        assert_eq!(refused, Some("request.invalid"));
        let accepted = admission(br#"{"workflow": "reviewed-notice", "revision": "sha256:00", "input": {}}"#);
        assert_eq!(accepted.ok().map(|a| a.workflow), Some("reviewed-notice".to_owned()));
    }

    #[test]
    fn a_completion_notification_must_be_a_json_object() {
        assert_eq!(completion_reference(br#"["case-4711"]"#), None);
        assert_eq!(completion_reference(br#"{"reference": "case-4711"}"#).as_deref(), Some("case-4711"));
    }
}
