//! The projects the properties drive, each with hand-built product answers that
//! match its operations' schemas (and a few that deliberately do not).
//!
//! A fixture is checked and compiled once per test process; the worlds pick
//! answers from these tables by index, so a shrunk world stays meaningful.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::time::Instant;
use coordinator_core::model::workflow::Step;
use serde_json::{Value, json};

use crate::support::{compiled, repo};

/// One accepted product answer: the output and the completion references it exposes.
#[derive(Debug, Clone)]
pub struct Answer {
    pub output: Value,
    pub completions: BTreeMap<String, String>,
}

/// Answers for one step: ones the operation's schema accepts, and ones it does not.
#[derive(Debug, Clone, Default)]
pub struct Table<T> {
    pub valid: Vec<T>,
    pub invalid: Vec<T>,
}

impl<T: Clone> Table<T> {
    /// The `variant`th answer of the valid or the invalid list (wrapping; an empty invalid list falls back to valid).
    pub fn pick(&self, variant: u8, invalid: bool) -> Option<T> {
        let list = if invalid && !self.invalid.is_empty() { &self.invalid } else { &self.valid };
        if list.is_empty() { None } else { list.get(usize::from(variant) % list.len()).cloned() }
    }
}

/// A compiled project with everything the driver needs to answer for its products.
pub struct Fixture {
    pub name: &'static str,
    pub workflow: Workflow,
    pub admitted_at: Instant,
    /// Valid run inputs; the world picks one.
    pub inputs: Vec<Value>,
    /// Accepted answers (and found receipts) per call step.
    pub outputs: BTreeMap<String, Table<Answer>>,
    /// Completion values per wait-for step.
    pub completions: BTreeMap<String, Table<Value>>,
}

impl Fixture {
    /// The wait-for steps, in a stable order (notifications name one of them).
    pub fn wait_for_steps(&self) -> Vec<String> {
        let steps = &self.workflow.definition.steps;
        steps.iter().filter(|(_, s)| matches!(s, Step::WaitFor(_))).map(|(id, _)| id.clone()).collect()
    }

    pub fn deadline_seconds(&self) -> u64 {
        self.workflow.definition.deadline_seconds
    }

    /// An accepted answer for a call step; a fixture that lacks one is a broken test.
    pub fn answer(&self, step: &str, variant: u8, invalid: bool) -> Answer {
        let table =
            self.outputs.get(step).unwrap_or_else(|| panic!("{}: no outputs for call step `{step}`", self.name));
        table.pick(variant, invalid).unwrap_or_else(|| panic!("{}: empty output table for `{step}`", self.name))
    }

    /// A completion value for a wait-for step.
    pub fn completion(&self, step: &str, variant: u8, invalid: bool) -> Value {
        let table = self
            .completions
            .get(step)
            .unwrap_or_else(|| panic!("{}: no completions for wait step `{step}`", self.name));
        table.pick(variant, invalid).unwrap_or_else(|| panic!("{}: empty completion table for `{step}`", self.name))
    }
}

fn plain(output: Value) -> Answer {
    Answer { output, completions: BTreeMap::new() }
}

fn with_completion(output: Value, name: &str, reference: &str) -> Answer {
    Answer { output, completions: BTreeMap::from([(name.to_owned(), reference.to_owned())]) }
}

fn table<T>(valid: Vec<T>, invalid: Vec<T>) -> Table<T> {
    Table { valid, invalid }
}

fn admitted() -> Instant {
    Instant::parse_rfc3339("2026-10-09T09:00:00Z").unwrap_or_else(|| panic!("the admission instant parses"))
}

const APPLICATION: &str = "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10";
const PERMIT: &str = "0199c8a1-2f40-7a3e-8c15-4b9d0e6f7a21";

/// The flagship: a read, a review request with a completion, a 14-day wait with
/// timeout and cancel routes, and a notice with a receipt.
pub fn reviewed_notice() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let recipient = json!({"kind": "person", "id": "person-4711"});
        let record = |revision: u32| {
            json!({"recordId": APPLICATION, "recordType": "application", "revision": revision, "data": {}})
        };
        let withdrawn = plain(json!({"reviewRequestId": "review-17", "state": "withdrawn"}));
        let bad_withdrawal = plain(json!({"reviewRequestId": "review-17", "state": "decided"}));
        let outputs = BTreeMap::from([
            (
                "read-application".to_owned(),
                table(vec![plain(record(3)), plain(record(7))], vec![plain(json!({"recordId": APPLICATION}))]),
            ),
            (
                "request-review".to_owned(),
                table(
                    vec![
                        with_completion(json!({"reviewRequestId": "review-17"}), "result", "review-17"),
                        with_completion(json!({"reviewRequestId": "review-18"}), "result", "review-18"),
                        // Accepted without exposing the completion the wait needs.
                        plain(json!({"reviewRequestId": "review-19"})),
                    ],
                    vec![plain(json!({}))],
                ),
            ),
            (
                "send-notice".to_owned(),
                table(
                    vec![
                        plain(json!({"messageId": "message-9", "status": "queued"})),
                        plain(json!({"messageId": "message-10", "status": "sent"})),
                    ],
                    vec![plain(json!({"messageId": "message-9", "status": "lost"}))],
                ),
            ),
            ("withdraw-review".to_owned(), table(vec![withdrawn.clone()], vec![bad_withdrawal.clone()])),
            ("withdraw-on-cancel".to_owned(), table(vec![withdrawn], vec![bad_withdrawal])),
            (
                "read-late-decision".to_owned(),
                table(
                    vec![
                        plain(json!({"reviewRequestId": "review-17", "state": "decided", "decision": "approved"})),
                        plain(json!({"reviewRequestId": "review-17", "state": "withdrawn"})),
                        plain(json!({"reviewRequestId": "review-17", "state": "decided", "decision": "rejected"})),
                        // Outside the choose's cases: function.unknown-case.
                        plain(json!({"reviewRequestId": "review-17", "state": "pending"})),
                    ],
                    vec![plain(json!({"reviewRequestId": "review-17", "state": "decided"}))],
                ),
            ),
        ]);
        let completions = BTreeMap::from([(
            "await-review".to_owned(),
            table(
                vec![
                    json!({"decision": "approved"}),
                    json!({"decision": "rejected"}),
                    json!({"decision": "approved", "decidedAt": "2026-10-10T10:00:00Z"}),
                ],
                vec![json!({"decision": "maybe"})],
            ),
        )]);
        Fixture {
            name: "reviewed-notice",
            workflow: compiled(&repo().join("examples/reviewed-notice")),
            admitted_at: admitted(),
            inputs: vec![
                json!({"applicationId": APPLICATION, "recipient": recipient}),
                json!({"applicationId": APPLICATION, "recipient": recipient, "recommendation": "rejected"}),
            ],
            outputs,
            completions,
        }
    })
}

/// A wait-until with an `onCancel` route that calls a product, and two receipt mutations.
pub fn appointment_reminder() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let slots = |start: &str, end: &str| {
            json!({"calendarId": "town-hall-desk-2", "slots": [{"slotId": "slot-1", "start": start, "end": end}]})
        };
        let appointment = |start: &str, end: &str| {
            json!({"appointmentId": "appt-1", "calendarId": "town-hall-desk-2", "start": start, "end": end})
        };
        let outputs = BTreeMap::from([
            (
                "read-availability".to_owned(),
                table(
                    vec![
                        plain(slots("2026-11-02T08:00:00Z", "2026-11-02T08:30:00Z")),
                        plain(json!({"calendarId": "town-hall-desk-2", "slots": []})),
                        plain(slots("2026-10-09T20:00:00Z", "2026-10-09T20:30:00Z")),
                    ],
                    vec![plain(json!({"calendarId": "town-hall-desk-2"}))],
                ),
            ),
            (
                "book-appointment".to_owned(),
                table(
                    vec![
                        plain(appointment("2026-11-02T08:00:00Z", "2026-11-02T08:30:00Z")),
                        // The reminder instant is already past: the wait continues at once.
                        plain(appointment("2026-10-09T20:00:00Z", "2026-10-09T20:30:00Z")),
                        // Beyond the 90-day deadline: the run expires while it waits.
                        plain(appointment("2027-03-01T08:00:00Z", "2027-03-01T08:30:00Z")),
                    ],
                    vec![plain(json!({"appointmentId": "appt-1"}))],
                ),
            ),
            (
                "send-reminder".to_owned(),
                table(
                    vec![plain(json!({"messageId": "message-1", "status": "queued"}))],
                    vec![plain(json!({"status": "queued"}))],
                ),
            ),
            (
                "cancel-appointment".to_owned(),
                table(
                    vec![plain(json!({"appointmentId": "appt-1", "state": "cancelled"}))],
                    vec![plain(json!({"appointmentId": "appt-1", "state": "open"}))],
                ),
            ),
        ]);
        let attendee = json!({"kind": "person", "id": "person-4711"});
        let input = |hours: Option<u32>| {
            let mut v = json!({
                "attendee": attendee, "calendarId": "town-hall-desk-2",
                "earliest": "2026-11-02T08:00:00Z", "latest": "2026-11-06T17:00:00Z", "durationMinutes": 30
            });
            if let (Some(h), Some(map)) = (hours, v.as_object_mut()) {
                map.insert("remindHoursBefore".to_owned(), json!(h));
            }
            v
        };
        Fixture {
            name: "appointment-reminder",
            workflow: compiled(&repo().join("examples/appointment-reminder")),
            admitted_at: admitted(),
            inputs: vec![input(Some(24)), input(None), input(Some(1))],
            outputs,
            completions: BTreeMap::new(),
        }
    })
}

/// A never-repeat evaluation and a receipt mutation with `maxAttempts: 8`.
pub fn permit_check() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let permit = |valid_until: &str| {
            json!({
                "permitId": PERMIT, "permitType": "parking", "holder": {"kind": "person", "id": "person-1"},
                "status": "active", "validFrom": "2024-01-01", "validUntil": valid_until, "conditions": []
            })
        };
        let outputs = BTreeMap::from([
            (
                "read-permit".to_owned(),
                table(vec![plain(permit("2026-12-31")), plain(permit("2028-02-29"))], vec![plain(json!({}))]),
            ),
            (
                "evaluate-renewal".to_owned(),
                table(
                    vec![
                        plain(json!({"result": "eligible", "explanation": "meets the conditions"})),
                        plain(json!({"result": "ineligible", "explanation": ""})),
                        plain(json!({"result": "refer", "explanation": "needs a person"})),
                    ],
                    vec![plain(json!({"result": ""}))],
                ),
            ),
            (
                "renew-permit".to_owned(),
                table(
                    vec![plain(json!({"permitId": PERMIT, "renewalId": "renewal-1", "validUntil": "2028-12-31"}))],
                    vec![plain(json!({"renewalId": "renewal-1"}))],
                ),
            ),
        ]);
        Fixture {
            name: "permit-check",
            workflow: compiled(&repo().join("examples/permit-check")),
            admitted_at: admitted(),
            inputs: vec![
                json!({"permitId": PERMIT, "renewalYears": 2}),
                json!({"permitId": PERMIT, "renewalYears": 1}),
            ],
            outputs,
            completions: BTreeMap::new(),
        }
    })
}

/// `tests/properties/mix`: wait-until from the input (past, now, soon, after the
/// deadline), a never-repeat evaluation, a mutation without and one with a receipt,
/// small `maxAttempts`.
pub fn mix() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let record = |revision: u32| {
            json!({"recordId": APPLICATION, "recordType": "subject", "revision": revision, "data": {"name": "x"}})
        };
        let outputs = BTreeMap::from([
            (
                "read-record".to_owned(),
                table(vec![plain(record(4)), plain(record(1))], vec![plain(json!({"data": {}}))]),
            ),
            (
                "evaluate".to_owned(),
                table(
                    vec![
                        plain(json!({"result": "notify", "explanation": "due"})),
                        plain(json!({"result": "skip", "explanation": "not due"})),
                        plain(json!({"result": "notify", "explanation": ""})),
                        plain(json!({"result": "other", "explanation": ""})),
                    ],
                    vec![plain(json!({"result": "notify"}))],
                ),
            ),
            (
                "mark".to_owned(),
                table(
                    vec![plain(json!({"recordId": APPLICATION, "revision": 5}))],
                    vec![plain(json!({"revision": 0}))],
                ),
            ),
            (
                "notify".to_owned(),
                table(
                    vec![
                        plain(json!({"messageId": "message-1", "status": "queued"})),
                        plain(json!({"messageId": "message-2", "status": "sent"})),
                    ],
                    vec![plain(json!({"messageId": ""}))],
                ),
            ),
        ]);
        let recipient = json!({"kind": "organisation", "id": "org-12"});
        let input =
            |not_before: &str| json!({"recordId": APPLICATION, "notBefore": not_before, "recipient": recipient});
        Fixture {
            name: "property-mix",
            workflow: compiled(&repo().join("crates/coordinator-core/tests/properties/mix")),
            admitted_at: admitted(),
            inputs: vec![
                input("2026-10-09T09:30:00Z"),
                input("2026-10-09T08:00:00Z"),
                input("2026-10-09T09:00:00Z"),
                input("2026-10-09T20:00:00Z"),
                input("2026-10-12T09:00:00Z"),
            ],
            outputs,
            completions: BTreeMap::new(),
        }
    })
}
