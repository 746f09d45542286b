use std::collections::BTreeMap;

use coordinator_functions::Limits;
use serde_json::{Value, json};

use super::*;
use crate::definition::Definition;

const FUNCTIONS: &str = r#"
fn to_input(event) { #{ recordId: event.recordId } }
fn to_key(event) { `created:${event.recordId}` }
fn empty_key(event) { "" }
fn number_key(event) { 42 }
fn boom(event) { throw "no" }
fn bad_input(event) { #{ recordId: 7 } }
fn with_literal(event, prefix) { `${prefix}:${event.recordId}` }
"#;

fn definition(input: &str, key: Value) -> Definition {
    let value = json!({
        "workflow": "t",
        "deadlineSeconds": 60,
        "input": {
            "type": "object",
            "required": ["recordId"],
            "properties": {"recordId": {"type": "string"}},
            "additionalProperties": false
        },
        "operations": {},
        "triggers": {
            "created": {
                "connection": "registry",
                "event": "acme.created/v1",
                "input": {"function": input, "arguments": [{"type": "event"}]},
                "idempotencyKey": key
            }
        },
        "start": "done",
        "steps": {"done": {"type": "finish", "outcome": "ok"}},
        "outcomes": {"ok": {"type": "null"}},
        "functions": FUNCTIONS
    });
    serde_json::from_value(value).unwrap_or_else(|e| panic!("definition: {e}"))
}

fn workflow(input: &str, key: Value) -> Workflow {
    Workflow::compile(definition(input, key), Limits::default()).unwrap_or_else(|e| panic!("compile: {e}"))
}

fn standard() -> Workflow {
    workflow("to_input", json!({"function": "to_key", "arguments": [{"type": "event"}]}))
}

fn with_schema(wf: Workflow) -> Workflow {
    let schema = json!({
        "type": "object",
        "required": ["eventId", "recordId"],
        "properties": {"eventId": {"type": "string", "format": "uuid"}, "recordId": {"type": "string"}},
        "additionalProperties": false
    });
    let schemas = BTreeMap::from([("acme.created/v1".to_owned(), schema)]);
    wf.with_event_schemas(&schemas).unwrap_or_else(|e| panic!("schemas: {e}"))
}

fn event() -> Value {
    json!({"eventId": "0190a0b0-0000-7000-8000-000000000001", "recordId": "r-1"})
}

#[test]
fn the_mappings_compute_input_and_key() {
    let admission = standard().trigger_admission("created", &event()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admission.input, json!({"recordId": "r-1"}));
    assert_eq!(admission.idempotency_key, "created:r-1");
}

#[test]
fn literals_reach_the_function() {
    let key = json!({"function": "with_literal", "arguments": [{"type": "event"}, {"type": "literal", "value": "x"}]});
    let admission = workflow("to_input", key).trigger_admission("created", &event()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admission.idempotency_key, "x:r-1");
}

#[test]
fn an_unknown_trigger_is_refused() {
    assert_eq!(standard().trigger_admission("nope", &event()), Err(TriggerError::Unknown("nope".into())));
}

#[test]
fn the_event_id_is_required() {
    assert_eq!(event_id(&json!([1])), Err(EventIdProblem::NotAnObject));
    assert_eq!(event_id(&json!({"recordId": "r"})), Err(EventIdProblem::Missing));
    assert_eq!(event_id(&json!({"eventId": ""})), Err(EventIdProblem::Invalid));
    assert_eq!(event_id(&json!({"eventId": 5})), Err(EventIdProblem::Invalid));
    assert_eq!(event_id(&json!({"eventId": "x".repeat(MAX_EVENT_ID_CHARS + 1)})), Err(EventIdProblem::Invalid));
    assert_eq!(event_id(&json!({"eventId": "é".repeat(MAX_EVENT_ID_CHARS)})).map(str::len), Ok(400));
    let missing = standard().trigger_admission("created", &json!({"recordId": "r-1"}));
    assert_eq!(missing, Err(TriggerError::EventId(EventIdProblem::Missing)));
}

#[test]
fn a_known_schema_is_enforced_with_pointers_only() {
    let wf = with_schema(standard());
    assert!(wf.trigger_admission("created", &event()).is_ok());
    let bad = json!({"eventId": "not-a-uuid", "recordId": "secret-value", "extra": "secret-extra"});
    match wf.trigger_admission("created", &bad) {
        Err(TriggerError::EventInvalid { event, violations }) => {
            assert_eq!(event, "acme.created/v1");
            let text = format!("{violations:?}");
            assert!(text.contains("/eventId"), "{text}");
            assert!(!text.contains("secret-"), "values must not be echoed: {text}");
        }
        other => panic!("expected EventInvalid, got {other:?}"),
    }
}

#[test]
fn without_a_schema_any_event_with_an_id_passes_to_the_mappings() {
    // No schema supplied: the extra field is not refused.
    let mut with_extra = event();
    with_extra["extra"] = json!(true);
    assert!(standard().trigger_admission("created", &with_extra).is_ok());
    assert_eq!(standard().check_event("acme.created/v1", &with_extra), None);
}

#[test]
fn a_function_error_is_a_mapping_failure_naming_the_mapping() {
    let wf = workflow("boom", json!({"function": "to_key", "arguments": [{"type": "event"}]}));
    match wf.trigger_admission("created", &event()) {
        Err(TriggerError::MappingFailed { trigger, mapping, function, .. }) => {
            assert_eq!((trigger.as_str(), mapping, function.as_str()), ("created", "input", "boom"));
        }
        other => panic!("expected MappingFailed, got {other:?}"),
    }
}

#[test]
fn the_key_must_be_a_non_empty_string() {
    for function in ["empty_key", "number_key"] {
        let wf = workflow("to_input", json!({"function": function, "arguments": [{"type": "event"}]}));
        match wf.trigger_admission("created", &event()) {
            Err(TriggerError::MappingFailed { mapping: "idempotencyKey", message, .. }) => {
                assert!(!message.contains("42"), "{message}");
            }
            other => panic!("{function}: expected MappingFailed, got {other:?}"),
        }
    }
}

#[test]
fn sources_that_need_a_run_fail_the_mapping() {
    for source in [json!({"type": "input"}), json!({"type": "run"}), json!({"type": "step", "step": "done"})] {
        let wf = workflow("to_input", json!({"function": "to_key", "arguments": [source]}));
        assert!(
            matches!(wf.trigger_admission("created", &event()), Err(TriggerError::MappingFailed { .. })),
            "{source}"
        );
    }
}

#[test]
fn the_input_is_validated_with_pointers() {
    let wf = workflow("bad_input", json!({"function": "to_key", "arguments": [{"type": "event"}]}));
    assert_eq!(
        wf.trigger_admission("created", &event()),
        Err(TriggerError::InputInvalid { trigger: "created".into(), pointers: vec!["/recordId".into()] })
    );
}

#[test]
fn builtin_event_schemas_cover_catalogued_events() {
    let schemas = crate::check::catalog::Catalog::builtin_event_schemas();
    assert!(schemas.contains_key("breg.record-created/v1"), "{:?}", schemas.keys());
}
