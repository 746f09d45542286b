//! `POST /v1/events/{workflow}/{trigger}` (docs/reference/runs.md#admission) on the dev stack
//! with a small project whose trigger admits a run from BReg's
//! `breg.record-created/v1`: signed events admit exactly one run per event id,
//! every refused signature admits nothing, a rotated secret passes, and each
//! refusal of the event has its code without echoing the body.

use std::path::Path;

use coordinator::process::dev::Dev;
use coordinator_core::signature::sign;
use serde_json::{Value, json};

use crate::support::{get, on_runtime, post_event, start_project, tempdir, unix_seconds, until_state};

const WORKFLOW: &str = r#"apiVersion: coordinator/v1
kind: Workflow
workflow: {id: intake, title: Read an application when BReg creates it}
functions: functions.rhai
deadlineSeconds: 3600
input:
  type: object
  required: [applicationId]
  properties:
    applicationId: {type: string, format: uuid}
  additionalProperties: false
operations:
  read-application: {operation: breg.read-record/v1, connection: registry}
triggers:
  created:
    connection: registry
    event: breg.record-created/v1
    input: {function: trigger_input, arguments: [{type: event}]}
    idempotencyKey: {function: trigger_key, arguments: [{type: event}]}
  broken:
    connection: registry
    event: breg.record-created/v1
    input: {function: failing_input, arguments: [{type: event}]}
    idempotencyKey: {function: trigger_key, arguments: [{type: event}]}
  misfit:
    connection: registry
    event: breg.record-created/v1
    input: {function: misfit_input, arguments: [{type: event}]}
    idempotencyKey: {function: trigger_key, arguments: [{type: event}]}
start: read-application
steps:
  read-application:
    type: call
    operation: read-application
    input: {function: application_ref, arguments: [{type: input}]}
    next: application-read
  application-read:
    type: finish
    outcome: application-read
    output: {function: application_output, arguments: [{type: step, step: read-application}]}
outcomes:
  application-read:
    type: object
    required: [recordId, revision]
    properties:
      recordId: {type: string, format: uuid}
      revision: {type: integer}
    additionalProperties: false
"#;

const FUNCTIONS: &str = r#"
fn trigger_input(event) { #{ applicationId: event.recordId } }
fn trigger_key(event) { `created:${event.recordId}:${event.revision}` }
fn failing_input(event) { throw "cannot map" }
fn misfit_input(event) { #{ applicationId: event.recordType } }
fn application_ref(input) { #{ recordType: "application", recordId: input.applicationId } }
fn application_output(application) { #{ recordId: application.recordId, revision: application.revision } }
"#;

const RECORD: &str = "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10";

/// The dev stack on the project above, written into `dir`.
async fn start(dir: &Path) -> Dev {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.join("workflow.yaml"), WORKFLOW).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.join("functions.rhai"), FUNCTIONS).unwrap_or_else(|e| panic!("{e}"));
    start_project(project, None).await
}

/// A `breg.record-created/v1` event with `event_id`.
fn event(event_id: &str) -> Vec<u8> {
    let value = json!({
        "eventId": event_id,
        "recordType": "application",
        "recordId": RECORD,
        "revision": 1,
        "occurredAt": "2026-01-05T10:00:00Z",
    });
    serde_json::to_vec(&value).unwrap_or_else(|e| panic!("{e}"))
}

fn event_id(n: u32) -> String {
    format!("0199c8a0-0000-7000-8000-{n:012}")
}

/// Posts `body` to trigger `trigger` with `signature` as the header (none: no header).
async fn send(dev: &Dev, trigger: &str, signature: Option<&str>, body: &[u8]) -> (u16, Value) {
    post_event(&format!("{}/v1/events/intake/{trigger}", dev.url()), signature, body).await
}

/// Signs `body` now with the dev stack's secret and posts it.
async fn send_signed(dev: &Dev, trigger: &str, body: &[u8]) -> (u16, Value) {
    let header = sign(dev.event_secret.as_bytes(), unix_seconds(), body);
    send(dev, trigger, Some(&header), body).await
}

/// Every run the operator sees.
async fn runs(dev: &Dev) -> Vec<Value> {
    let (status, page) = get(&format!("{}/v1/runs", dev.url())).await;
    assert_eq!(status, 200, "{page}");
    page["runs"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_signed_event_admits_one_run_and_a_replay_answers_with_it() {
    on_runtime(async {
        let dir = tempdir();
        let dev = start(dir.path()).await;
        let body = event(&event_id(1));
        let (status, first) = send_signed(&dev, "created", &body).await;
        assert_eq!(status, 201, "{first}");
        let run = first["runId"].as_str().unwrap_or_else(|| panic!("{first}")).to_owned();

        // The same event again (re-signed, as a product's retry would be): the same run.
        let (status, again) = send_signed(&dev, "created", &body).await;
        assert_eq!((status, again["runId"].as_str()), (200, Some(run.as_str())), "{again}");
        // Another delivery of the same record revision (new event id, same key): the same run.
        let (status, other) = send_signed(&dev, "created", &event(&event_id(2))).await;
        assert_eq!((status, other["runId"].as_str()), (200, Some(run.as_str())), "{other}");
        assert_eq!(runs(&dev).await.len(), 1);

        // The run is owned by the trigger's subject and runs to its finish.
        let row =
            dev.engine.store().load(&run).await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("row"));
        assert_eq!(row.owner, "trigger:registry");
        let view = until_state(&dev.url(), &run, "finished").await;
        assert_eq!(view["outcome"], "application-read", "{view}");
        assert_eq!(view["output"]["recordId"], RECORD, "{view}");
    });
}

#[test]
fn refused_signatures_admit_nothing_and_say_why() {
    on_runtime(async {
        let dir = tempdir();
        let dev = start(dir.path()).await;
        let body = event(&event_id(1));
        let secret = dev.event_secret.as_bytes();
        let t = unix_seconds();
        let mut tampered: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
        tampered["revision"] = json!(2);
        let tampered = serde_json::to_vec(&tampered).unwrap_or_else(|e| panic!("{e}"));
        let cases: Vec<(&str, Option<String>, Vec<u8>, &str)> = vec![
            ("missing header", None, body.clone(), "missing"),
            ("malformed header", Some(format!("t={t}")), body.clone(), "malformed"),
            // Far outside the tolerance (300 s): the service reads its clock later than
            // `t`, by however long a loaded machine takes, so a timestamp just over the
            // edge ahead could fall inside it by then.
            ("stale timestamp", Some(sign(secret, t - 301, &body)), body.clone(), "stale"),
            ("future timestamp", Some(sign(secret, t + 3600, &body)), body.clone(), "stale"),
            ("another secret", Some(sign(b"not-the-secret", t, &body)), body.clone(), "does not match"),
            ("tampered body", Some(sign(secret, t, &body)), tampered, "does not match"),
        ];
        for (what, header, sent, says) in cases {
            let (status, answer) = send(&dev, "created", header.as_deref(), &sent).await;
            assert_eq!(status, 401, "{what}: {answer}");
            assert_eq!(answer["code"], "event.signature-invalid", "{what}: {answer}");
            let message = answer["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{what}: {message}");
            assert!(!message.contains(RECORD) && !message.contains(&dev.event_secret), "{what} echoes: {message}");
        }
        assert!(runs(&dev).await.is_empty(), "nothing may be admitted");
        let replay = dev.engine.store().event_run("intake", &coordinator_store_event(&event_id(1))).await;
        assert_eq!(replay.unwrap_or_else(|e| panic!("{e}")), None, "no event may be recorded");
    });
}

fn coordinator_store_event(id: &str) -> coordinator_store::TriggerEvent {
    coordinator_store::TriggerEvent { trigger: "created".into(), event_id: id.into() }
}

#[test]
fn a_rotated_secret_passes_with_one_valid_entry() {
    on_runtime(async {
        let dir = tempdir();
        let dev = start(dir.path()).await;
        let body = event(&event_id(1));
        let t = unix_seconds();
        let tag = |secret: &[u8]| sign(secret, t, &body).split_once(",v1=").map(|(_, v)| v.to_owned());
        let old = tag(b"the-old-secret").unwrap_or_else(|| panic!("tag"));
        let current = tag(dev.event_secret.as_bytes()).unwrap_or_else(|| panic!("tag"));
        let header = format!("t={t},v1={old},v1={current}");
        let (status, answer) = send(&dev, "created", Some(&header), &body).await;
        assert_eq!(status, 201, "{answer}");
        assert_eq!(runs(&dev).await.len(), 1);
    });
}

#[test]
fn each_refusal_of_an_event_has_its_code() {
    on_runtime(async {
        let dir = tempdir();
        let dev = start(dir.path()).await;
        let mut invalid: Value = serde_json::from_slice(&event(&event_id(3))).unwrap_or_else(|e| panic!("{e}"));
        invalid["revision"] = json!(0);
        invalid["secretField"] = json!("secret-value");
        let invalid = serde_json::to_vec(&invalid).unwrap_or_else(|e| panic!("{e}"));
        let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
            ("unknown trigger", "nope", event(&event_id(1)), 404, "trigger.unknown"),
            ("not JSON", "created", b"secret-value, not json".to_vec(), 400, "request.invalid"),
            ("no eventId", "created", br#"{"recordId": "secret-value"}"#.to_vec(), 400, "request.invalid"),
            ("schema", "created", invalid, 422, "event.invalid"),
            ("function error", "broken", event(&event_id(4)), 422, "event.mapping-failed"),
            ("input schema", "misfit", event(&event_id(5)), 422, "input.invalid"),
        ];
        for (what, trigger, body, expected, code) in cases {
            let (status, answer) = send_signed(&dev, trigger, &body).await;
            assert_eq!((status, answer["code"].as_str()), (expected, Some(code)), "{what}: {answer}");
            assert!(!answer.to_string().contains("secret-value"), "{what} echoes the body: {answer}");
        }
        let (status, schema) = send_signed(&dev, "created", &{
            let mut v: Value = serde_json::from_slice(&event(&event_id(6))).unwrap_or_else(|e| panic!("{e}"));
            v["revision"] = json!(0);
            serde_json::to_vec(&v).unwrap_or_else(|e| panic!("{e}"))
        })
        .await;
        assert_eq!((status, schema["pointers"].clone()), (422, json!(["/revision"])), "{schema}");
        // An unknown workflow is an unknown trigger too.
        let url = format!("{}/v1/events/nowhere/created", dev.url());
        let answer = reqwest::Client::new().post(&url).body("{}").send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.status().as_u16(), 404);
        assert!(runs(&dev).await.is_empty(), "nothing may be admitted");
    });
}
