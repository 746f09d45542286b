//! Every simulator answer matches the built-in catalog: each operation's output
//! validates against its output schema, each completion value against its
//! completion schema, and every executable built-in operation is simulated.

use std::collections::BTreeSet;

use coordinator_core::check::catalog::Catalog;
use coordinator_core::json_schema;
use coordinator_core::model::catalog::Effect;
use serde_json::{Value, json};

use crate::harness::{Harness, json, message, start_default};

const RECORD: &str = "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10";

/// Checks `value` against `schema`, naming `what` and every violation.
fn assert_valid(what: &str, schema: &Value, value: &Value) {
    let validator = match json_schema::compile(schema) {
        Ok(v) => v,
        Err(e) => panic!("{what}: schema does not compile: {e}"),
    };
    let violations = json_schema::violations(&validator, value);
    assert!(violations.is_empty(), "{what}: {value} violates its schema: {violations:?}");
}

struct Checker {
    catalog: Catalog,
    seen: BTreeSet<String>,
}

impl Checker {
    async fn call(&mut self, h: &Harness, product: &str, operation: &str, key: Option<&str>, command: Value) -> Value {
        let name = format!("{product}.{operation}");
        let Some(descriptor) = self.catalog.operations.get(&name) else { panic!("{name} is not in the catalog") };
        assert_valid(&format!("{name} input"), &descriptor.input, &command);
        let answer = h.accepted(product, operation, key, &command).await;
        assert_valid(&format!("{name} output"), &descriptor.output, &answer["output"]);
        let exposed: BTreeSet<&String> =
            answer["completions"].as_object().map(|c| c.keys().collect()).unwrap_or_default();
        assert_eq!(exposed, descriptor.completions.keys().collect(), "{name} completions");
        self.seen.insert(name);
        answer
    }

    async fn completion(&self, h: &Harness, reference: &str) {
        let name = "casework.submit-review-request/v1";
        let Some(descriptor) = self.catalog.operations.get(name).and_then(|d| d.completions.get("result")) else {
            panic!("{name} has no completion `result`")
        };
        let completion = json(h.completion("casework", "result", reference).await).await;
        assert_eq!(completion["state"], "complete");
        assert_valid("completion result", &descriptor.schema, &completion["value"]);
    }
}

#[tokio::test]
async fn every_simulated_output_validates_against_the_builtin_catalog() {
    let h = start_default().await;
    let mut c = Checker { catalog: Catalog::builtin(), seen: BTreeSet::new() };
    let record = json!({"recordType": "application", "recordId": RECORD});

    c.call(&h, "breg", "read-record/v1", None, record.clone()).await;
    let action = json!({"recordType": "application", "recordId": RECORD, "action": "mark-notified",
        "expectedRevision": 1, "arguments": {"channel": "letter"}});
    c.call(&h, "breg", "invoke-action/v1", Some("a"), action).await;
    c.call(&h, "breg", "read-record/v1", None, record).await;

    let review = json!({"subject": {"recordType": "application", "recordId": RECORD, "revision": 2},
        "reviewType": "notice-approval", "requestedDecision": "approved", "summary": "Application"});
    let submitted = c.call(&h, "casework", "submit-review-request/v1", Some("r1"), review.clone()).await;
    let first = submitted["output"]["reviewRequestId"].as_str().unwrap_or_default().to_owned();
    c.call(&h, "casework", "read-review-request/v1", None, json!({"reviewRequestId": first})).await;
    if let Err(e) = h.sims.casework.decide(&first, None) {
        panic!("decide: {e}");
    }
    c.call(&h, "casework", "read-review-request/v1", None, json!({"reviewRequestId": first})).await;
    c.completion(&h, &first).await;
    let submitted = c.call(&h, "casework", "submit-review-request/v1", Some("r2"), review).await;
    let second = submitted["output"]["reviewRequestId"].as_str().unwrap_or_default().to_owned();
    let withdraw = json!({"reviewRequestId": second, "reason": "stopped waiting"});
    c.call(&h, "casework", "withdraw-review-request/v1", Some("w"), withdraw).await;
    c.call(&h, "casework", "read-review-request/v1", None, json!({"reviewRequestId": second})).await;

    c.call(&h, "messaging", "submit-message/v1", Some("m"), message("person-4711")).await;

    let query = json!({"calendarId": "town-hall-desk-2", "from": "2026-11-02T08:00:00+01:00",
        "to": "2026-11-06T17:00:00Z", "durationMinutes": 30});
    let availability = c.call(&h, "scheduling", "read-availability/v1", None, query).await;
    let slots = availability["output"]["slots"].as_array().cloned().unwrap_or_default();
    assert_eq!(slots.first().map(|s| s["start"].clone()), Some(json!("2026-11-02T07:00:00Z")));
    let slot = slots.first().map(|s| s["slotId"].clone()).unwrap_or_default();
    let booking = json!({"calendarId": "town-hall-desk-2", "slotId": slot,
        "attendee": {"kind": "organisation", "id": "org-1"}, "subject": "Appointment"});
    let booked = c.call(&h, "scheduling", "create-appointment/v1", Some("b"), booking).await;
    let cancel = json!({"appointmentId": booked["output"]["appointmentId"], "reason": "moved"});
    c.call(&h, "scheduling", "cancel-appointment/v1", Some("c"), cancel).await;

    let evaluate = json!({"model": "permit-renewal/v2", "facts": {"permitId": "p-1"}});
    c.call(&h, "evaluation", "evaluate/v1", Some("e"), evaluate).await;

    let executable: BTreeSet<String> = c
        .catalog
        .operations
        .iter()
        .filter(|(_, d)| d.effect != Effect::ProposalAction)
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(c.seen, executable, "every executable built-in operation is simulated and checked");
}
