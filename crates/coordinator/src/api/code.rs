//! The API's stable error codes: one variant per code, each with the one HTTP
//! status it is answered with. Every refusal the API gives is an
//! [`ApiError`](super::ApiError) built from a [`Code`], so a code cannot be
//! misspelled or answered with two statuses.
//!
//! The reference (`docs/reference/errors.md`) documents each code once and
//! the OpenAPI document lists them in its `Error` schema; tests hold both
//! against [`Code::ALL`].

use axum::http::StatusCode;

/// A stable error code of the HTTP API (`docs/reference/errors.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// `400 request.invalid`: a malformed request.
    RequestInvalid,
    /// `400 idempotency.key-invalid`: an unusable `idempotencyKey`.
    IdempotencyKeyInvalid,
    /// `401 auth.unauthenticated`: no usable bearer token.
    AuthUnauthenticated,
    /// `401 event.signature-invalid`: a product event whose signature does not verify.
    EventSignatureInvalid,
    /// `403 auth.forbidden`: the caller lacks the role the request needs.
    AuthForbidden,
    /// `404 run.unknown`: no such run (or not one the caller may see).
    RunUnknown,
    /// `404 workflow.unknown`: the workflow has no active revision.
    WorkflowUnknown,
    /// `404 trigger.unknown`: the active revision has no such trigger.
    TriggerUnknown,
    /// `404 connection.unknown`: the deployment has no connection of that name.
    ConnectionUnknown,
    /// `404 batch.unknown`: no batch has that id.
    BatchUnknown,
    /// `404 schedule.unknown`: the workflow's active revision has no schedule of that id.
    ScheduleUnknown,
    /// `409 revision.not-active`: the admission names another revision than the active one.
    RevisionNotActive,
    /// `409 idempotency.key-reused`: the key admitted a run with another revision, input or run id.
    IdempotencyKeyReused,
    /// `409 run-id.taken`: the supplied run id belongs to another admission.
    RunIdTaken,
    /// `409 restore-hold.placed`: nothing is admitted while the restore hold is placed.
    RestoreHoldPlaced,
    /// `409 package.digest-mismatch`: the bytes do not hash to the pinned digest.
    PackageDigestMismatch,
    /// `409 package.revision-conflict`: the revision is stored with other bytes.
    PackageRevisionConflict,
    /// `409 operation.never-repeat`: `retry-same` on an operation that is never repeated.
    OperationNeverRepeat,
    /// `409 operation.no-receipt`: `reconcile` on an operation without a receipt.
    OperationNoReceipt,
    /// `409 run.deadline-reached`: `retry-same` on a run past its deadline.
    RunDeadlineReached,
    /// `409 run.ended`: `retry-same` on a run that has ended.
    RunEnded,
    /// `409 run.restore-hold`: `retry-same` while the restore hold is placed.
    RunRestoreHold,
    /// `409 step.effect-not-unknown`: the step's effect is known; nothing to settle.
    StepEffectNotUnknown,
    /// `409 step.not-a-call`: the step is not a call this run has made.
    StepNotACall,
    /// `409 step.receipt-pending`: a receipt lookup of the step is under way.
    StepReceiptPending,
    /// `409 step.attempt-pending`: an attempt of the step's saved command is under way.
    StepAttemptPending,
    /// `409 operation.refused`: the rules refused a command with a code outside the list above.
    OperationRefused,
    /// `413 request.too-large`: the body is over the endpoint's limit.
    RequestTooLarge,
    /// `415 request.unsupported-media-type`: a package in another media type.
    RequestUnsupportedMediaType,
    /// `422 input.invalid`: the input does not match the workflow's input schema.
    InputInvalid,
    /// `422 run-id.invalid`: the supplied run id is not an acceptable UUIDv7.
    RunIdInvalid,
    /// `422 input.search-key-failed`: a search key's function failed on the
    /// input, or returned what a key cannot hold.
    InputSearchKeyFailed,
    /// `422 batch.too-large`: more runs match a batch's filter than one batch may hold.
    BatchTooLarge,
    /// `422 event.invalid`: a product event does not match its schema.
    EventInvalid,
    /// `422 event.mapping-failed`: a trigger's input or key function failed.
    EventMappingFailed,
    /// `422 package.invalid`: bytes this version cannot read and compile.
    PackageInvalid,
    /// `422 package.unknown-connection`: an operation uses a connection the deployment lacks.
    PackageUnknownConnection,
    /// `500 internal`: the request could not be completed.
    Internal,
    /// `503 database.unavailable`: the database could not be reached; nothing was done.
    DatabaseUnavailable,
    /// `503 payload-key.missing`: a run sealed with a payload key this deployment lacks.
    PayloadKeyMissing,
    /// `503 service.draining`: the process is stopping and admits nothing.
    ServiceDraining,
    /// `503 service.recovery-only`: the process runs in recovery-only mode.
    ServiceRecoveryOnly,
}

impl Code {
    /// Every code, in the reference's order.
    pub const ALL: [Code; 42] = [
        Code::RequestInvalid,
        Code::IdempotencyKeyInvalid,
        Code::AuthUnauthenticated,
        Code::EventSignatureInvalid,
        Code::AuthForbidden,
        Code::RunUnknown,
        Code::WorkflowUnknown,
        Code::TriggerUnknown,
        Code::ConnectionUnknown,
        Code::BatchUnknown,
        Code::ScheduleUnknown,
        Code::RevisionNotActive,
        Code::IdempotencyKeyReused,
        Code::RunIdTaken,
        Code::RestoreHoldPlaced,
        Code::PackageDigestMismatch,
        Code::PackageRevisionConflict,
        Code::OperationNeverRepeat,
        Code::OperationNoReceipt,
        Code::RunDeadlineReached,
        Code::RunEnded,
        Code::RunRestoreHold,
        Code::StepEffectNotUnknown,
        Code::StepNotACall,
        Code::StepReceiptPending,
        Code::StepAttemptPending,
        Code::OperationRefused,
        Code::RequestTooLarge,
        Code::RequestUnsupportedMediaType,
        Code::InputInvalid,
        Code::InputSearchKeyFailed,
        Code::BatchTooLarge,
        Code::RunIdInvalid,
        Code::EventInvalid,
        Code::EventMappingFailed,
        Code::PackageInvalid,
        Code::PackageUnknownConnection,
        Code::Internal,
        Code::DatabaseUnavailable,
        Code::PayloadKeyMissing,
        Code::ServiceDraining,
        Code::ServiceRecoveryOnly,
    ];

    /// The code as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::RequestInvalid => "request.invalid",
            Code::IdempotencyKeyInvalid => "idempotency.key-invalid",
            Code::AuthUnauthenticated => "auth.unauthenticated",
            Code::EventSignatureInvalid => "event.signature-invalid",
            Code::AuthForbidden => "auth.forbidden",
            Code::RunUnknown => "run.unknown",
            Code::WorkflowUnknown => "workflow.unknown",
            Code::TriggerUnknown => "trigger.unknown",
            Code::ConnectionUnknown => "connection.unknown",
            Code::BatchUnknown => "batch.unknown",
            Code::ScheduleUnknown => "schedule.unknown",
            Code::RevisionNotActive => "revision.not-active",
            Code::IdempotencyKeyReused => "idempotency.key-reused",
            Code::RunIdTaken => "run-id.taken",
            Code::RestoreHoldPlaced => "restore-hold.placed",
            Code::PackageDigestMismatch => "package.digest-mismatch",
            Code::PackageRevisionConflict => "package.revision-conflict",
            Code::OperationNeverRepeat => "operation.never-repeat",
            Code::OperationNoReceipt => "operation.no-receipt",
            Code::RunDeadlineReached => "run.deadline-reached",
            Code::RunEnded => "run.ended",
            Code::RunRestoreHold => "run.restore-hold",
            Code::StepEffectNotUnknown => "step.effect-not-unknown",
            Code::StepNotACall => "step.not-a-call",
            Code::StepReceiptPending => "step.receipt-pending",
            Code::StepAttemptPending => "step.attempt-pending",
            Code::OperationRefused => "operation.refused",
            Code::RequestTooLarge => "request.too-large",
            Code::RequestUnsupportedMediaType => "request.unsupported-media-type",
            Code::InputInvalid => "input.invalid",
            Code::InputSearchKeyFailed => "input.search-key-failed",
            Code::BatchTooLarge => "batch.too-large",
            Code::RunIdInvalid => "run-id.invalid",
            Code::EventInvalid => "event.invalid",
            Code::EventMappingFailed => "event.mapping-failed",
            Code::PackageInvalid => "package.invalid",
            Code::PackageUnknownConnection => "package.unknown-connection",
            Code::Internal => "internal",
            Code::DatabaseUnavailable => "database.unavailable",
            Code::PayloadKeyMissing => "payload-key.missing",
            Code::ServiceDraining => "service.draining",
            Code::ServiceRecoveryOnly => "service.recovery-only",
        }
    }

    /// The one HTTP status the code is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            Code::RequestInvalid | Code::IdempotencyKeyInvalid => StatusCode::BAD_REQUEST,
            Code::AuthUnauthenticated | Code::EventSignatureInvalid => StatusCode::UNAUTHORIZED,
            Code::AuthForbidden => StatusCode::FORBIDDEN,
            Code::RunUnknown
            | Code::WorkflowUnknown
            | Code::TriggerUnknown
            | Code::ConnectionUnknown
            | Code::BatchUnknown
            | Code::ScheduleUnknown => StatusCode::NOT_FOUND,
            Code::RevisionNotActive
            | Code::IdempotencyKeyReused
            | Code::RunIdTaken
            | Code::RestoreHoldPlaced
            | Code::PackageDigestMismatch
            | Code::PackageRevisionConflict
            | Code::OperationNeverRepeat
            | Code::OperationNoReceipt
            | Code::RunDeadlineReached
            | Code::RunEnded
            | Code::RunRestoreHold
            | Code::StepEffectNotUnknown
            | Code::StepNotACall
            | Code::StepReceiptPending
            | Code::StepAttemptPending
            | Code::OperationRefused => StatusCode::CONFLICT,
            Code::RequestTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::RequestUnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::InputInvalid
            | Code::InputSearchKeyFailed
            | Code::BatchTooLarge
            | Code::RunIdInvalid
            | Code::EventInvalid
            | Code::EventMappingFailed
            | Code::PackageInvalid
            | Code::PackageUnknownConnection => StatusCode::UNPROCESSABLE_ENTITY,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::DatabaseUnavailable | Code::PayloadKeyMissing | Code::ServiceDraining | Code::ServiceRecoveryOnly => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// The code of an operator command the machine refused with `refusal`
    /// (one of the machine's stable refusal codes); [`Code::OperationRefused`]
    /// for any other.
    pub fn of_refusal(refusal: &str) -> Code {
        let stable = coordinator_core::machine::REFUSAL_CODES.contains(&refusal);
        Code::ALL.into_iter().find(|c| stable && c.as_str() == refusal).unwrap_or(Code::OperationRefused)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_code_is_listed_once_and_spelled_once() {
        let spelled: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        let listed: BTreeSet<Code> = Code::ALL.into_iter().collect();
        assert_eq!(spelled.len(), Code::ALL.len(), "two codes share a spelling");
        assert_eq!(listed.len(), Code::ALL.len(), "a code is listed twice");
    }

    #[test]
    fn every_refusal_of_the_machine_has_a_code_of_its_own() {
        for refusal in coordinator_core::machine::REFUSAL_CODES {
            let code = Code::of_refusal(refusal);
            assert_eq!(code.as_str(), refusal, "the machine's refusal {refusal} has no code of its own");
            assert_eq!(code.status(), StatusCode::CONFLICT);
        }
        assert_eq!(Code::of_refusal("no.such-rule"), Code::OperationRefused);
        // A conflict that is not a refusal of an operator command is not one either.
        assert_eq!(Code::of_refusal("run-id.taken"), Code::OperationRefused);
    }

    /// The reference's table of codes (`docs/reference/errors.md`) and this
    /// enum say the same: every code documented once, with its status.
    #[test]
    fn the_reference_documents_every_code_with_its_status() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/errors.md");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut documented = Vec::new();
        for line in text.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if let [_, code, status, ..] = cells.as_slice()
                && let Some(code) = code.strip_prefix('`').and_then(|c| c.strip_suffix('`'))
            {
                documented.push((code.to_owned(), status.to_string()));
            }
        }
        let expected: Vec<(String, String)> =
            Code::ALL.iter().map(|c| (c.as_str().to_owned(), c.status().as_u16().to_string())).collect();
        let mut sorted = documented.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), documented.len(), "a code is documented twice in {}", path.display());
        let mut want = expected;
        want.sort();
        assert_eq!(sorted, want, "docs/reference/errors.md and api::Code disagree");
    }

    /// The OpenAPI document lists exactly these codes in its `Error` schema,
    /// and every code a response names ("Codes: `…`") is one answered with
    /// that response's status.
    #[test]
    fn the_openapi_document_lists_every_code_at_its_status() {
        let document: serde_json::Value =
            serde_json::from_str(super::super::openapi::DOCUMENT).unwrap_or_else(|e| panic!("openapi.json: {e}"));
        let listed: BTreeSet<&str> = document["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
            .as_array()
            .map(|codes| codes.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        let all: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(listed, all, "the Error schema's enum and api::Code disagree");

        let mut named = BTreeSet::new();
        for (path, operations) in document["paths"].as_object().into_iter().flatten() {
            for (verb, operation) in operations.as_object().into_iter().flatten() {
                for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                    let description = response["description"].as_str().unwrap_or_default();
                    let Some((_, codes)) = description.split_once("Codes:") else { continue };
                    let sentence = codes.split(". ").next().unwrap_or_default();
                    for code in sentence.split('`').skip(1).step_by(2) {
                        let known = Code::ALL.into_iter().find(|c| c.as_str() == code);
                        let Some(known) = known else { panic!("{verb} {path} {status} names `{code}`, not a code") };
                        assert_eq!(
                            known.status().as_str(),
                            status,
                            "{verb} {path} names `{code}` under {status}, but it is answered with {}",
                            known.status()
                        );
                        named.insert(code);
                    }
                }
            }
        }
        assert_eq!(named, all, "codes no response of the OpenAPI document names");
    }
}
