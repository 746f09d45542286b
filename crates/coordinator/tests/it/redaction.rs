//! Nothing protected reaches a log line or a span
//! (docs/reference/protection.md#never-logged-never-shown): `coordinator
//! serve` logs at `debug` in each format and exports its spans to a receiver
//! in the test process while it runs the flagship to its end, a run whose
//! notice is lost and then reconciled, refused requests (invalid input, a
//! body that is not JSON, an unknown token, a refused operator command) and
//! signed events (one good, one with a bad signature, one unsigned). Then
//! every log line and every span attribute is searched for the input's
//! values, the prepared commands' and products' values (outputs, completion
//! references, receipts), every token, secret, signature and the payload key.
//! The log must also say what happened, so the search is not vacuous.

use std::path::Path;
use std::time::Duration;

use coordinator_core::signature::sign;
use coordinator_sim::{DEFAULT_CLIENT, Simulators};
use serde_json::{Value, json};

use crate::support::deploy::{EAGER, deployment, package_of, sqlite_url, variant};
use crate::support::otlp::{Received, Receiver};
use crate::support::process::{self, Process, read};
use crate::support::{
    TOKEN, admission, finished_and_reconciled, get_as, notice_strings, on_runtime, post, post_event, sample_input,
    strings_of, tempdir, unix_seconds, until_state,
};

/// The event signing secret of the registry connection.
const EVENT_SECRET: &str = "event-secret-never-logged-7f3a";
/// A token nobody holds.
const WRONG_TOKEN: &str = "wrong-token-never-logged-91c2";
/// Values only the refused requests carry.
const BAD_INPUT: &str = "bad-input-never-logged-55d0";
const NOT_JSON: &str = "not-json-never-logged-0b7e";
/// The record a signed event announces (it becomes a run's input).
const EVENT_RECORD: &str = "0199c8a0-1111-7222-8333-444455556666";

/// The flagship with a trigger: BReg's `record-created` admits a run.
fn triggered_flagship(dir: &Path) -> std::path::PathBuf {
    // The review wait observes every second: a decision announced before the run entered
    // its wait (a notification only brings an open wait's observation forward) costs a second.
    let project = variant(dir, "project", &[EAGER]);
    let append = |file: &str, text: &str| {
        let before = std::fs::read_to_string(project.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        std::fs::write(project.join(file), format!("{before}\n{text}")).unwrap_or_else(|e| panic!("{file}: {e}"));
    };
    append(
        "functions.rhai",
        "fn trigger_input(event) { #{ applicationId: event.recordId, recipient: #{ kind: \"person\", id: \"person-4711\" } } }\nfn trigger_key(event) { `created:${event.recordId}:${event.revision}` }\n",
    );
    append(
        "workflow.yaml",
        "triggers:\n  created:\n    connection: registry\n    event: breg.record-created/v1\n    input: {function: trigger_input, arguments: [{type: event}]}\n    idempotencyKey: {function: trigger_key, arguments: [{type: event}]}\n",
    );
    project
}

struct Exercised {
    log: String,
    spans: Vec<Received>,
    secrets: Vec<String>,
    runs: Vec<String>,
}

/// Runs everything the module docs list through `serve` logging in `format`.
async fn exercise(format: &str) -> Exercised {
    let dir = tempdir();
    let receiver = Receiver::grpc().await;
    let (mut spec, sims) = deployment(&sqlite_url(dir.path()), Some(Duration::from_millis(100)), true).await;
    let url = spec.url();
    spec.project = triggered_flagship(dir.path());
    spec.extra = format!("observeFloorSeconds: 1\ntelemetry: {{otlp: {{endpoint: \"{}\"}}}}\n", receiver.endpoint);
    spec.files.push(("event-secret".to_owned(), EVENT_SECRET.to_owned()));
    let runtime = spec.write(dir.path());
    let text = std::fs::read_to_string(&runtime).unwrap_or_default();
    let signed =
        text.replacen("    product: breg\n", "    product: breg\n    eventSigningSecret: file:event-secret\n", 1);
    assert_ne!(signed, text);
    std::fs::write(&runtime, signed).unwrap_or_else(|e| panic!("{e}"));
    process::migrate(&runtime);
    let mut serve = Process::serve_with(&runtime, &dir.path().join("serve.log"), format, &[("RUST_LOG", "debug")]);
    process::ready(&url, &serve.log).await;
    let revision = package_of(&spec.project).revision;

    // The flagship to its end; a notice whose answer is lost after the effect: uncertain, then reconciled.
    let [flagship, faulted] = finished_and_reconciled(&url, &sims.base, &revision).await;
    // Refused requests.
    let mut bad = admission(&revision, "bad-input");
    bad["input"]["applicationId"] = json!(BAD_INPUT);
    assert_eq!(post(&format!("{url}/v1/runs"), &bad).await.0, 422);
    let not_json = reqwest::Client::new()
        .post(format!("{url}/v1/runs"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(NOT_JSON)
        .send()
        .await;
    assert_eq!(not_json.map(|r| r.status().as_u16()).ok(), Some(400));
    assert_eq!(get_as(&format!("{url}/v1/runs"), Some(WRONG_TOKEN)).await.0, 401);
    let retry = post(&format!("{url}/v1/runs/{flagship}/steps/send-notice/retry-same"), &json!({})).await;
    assert_eq!(retry.0, 409);
    // Signed events: a good one admits a run; a bad signature and none admit nothing.
    let event = serde_json::to_vec(&json!({
        "eventId": "0199c8a0-0000-7000-8000-000000000001",
        "recordType": "application",
        "recordId": EVENT_RECORD,
        "revision": 1,
        "occurredAt": "2026-01-05T10:00:00Z",
    }))
    .unwrap_or_default();
    let now = unix_seconds();
    let good = sign(EVENT_SECRET.as_bytes(), now, &event);
    let forged = sign(b"not-the-secret", now, &event);
    let trigger = format!("{url}/v1/events/reviewed-notice/created");
    let (status, evented) = post_event(&trigger, Some(&good), &event).await;
    assert_eq!(status, 201, "{evented}");
    let evented = evented["runId"].as_str().unwrap_or_else(|| panic!("{evented}")).to_owned();
    assert_eq!(post_event(&trigger, Some(&forged), &event).await.0, 401);
    assert_eq!(post_event(&trigger, None, &event).await.0, 401);
    until_state(&url, &evented, "finished").await;

    serve.signal("TERM");
    assert_eq!(serve.exited().await.code(), Some(0), "{}", read(&serve.log));
    let runs = vec![flagship, faulted, evented];
    let secrets = secrets(&sims.sims, &runs, &[good, forged]);
    Exercised { log: read(&serve.log), spans: receiver.spans(), secrets, runs }
}

/// Everything that must never be logged or exported.
fn secrets(sims: &Simulators, runs: &[String], signatures: &[String]) -> Vec<String> {
    let mut secrets = strings_of(&sample_input());
    secrets.extend(
        [EVENT_RECORD, BAD_INPUT, NOT_JSON, TOKEN, WRONG_TOKEN, EVENT_SECRET, DEFAULT_CLIENT.1].map(str::to_owned),
    );
    secrets.push("5a".repeat(32));
    for signature in signatures {
        secrets.extend(signature.split(',').filter_map(|part| part.strip_prefix("v1=")).map(str::to_owned));
    }
    let tokens = sims.tokens.live_tokens();
    assert!(!tokens.is_empty(), "products were called with tokens");
    secrets.extend(tokens);
    let references = sims.casework.references();
    assert!(references.len() >= runs.len(), "one review request per run: {references:?}");
    secrets.extend(references);
    for run in runs {
        secrets.extend(notice_strings(sims, run));
    }
    secrets.sort();
    secrets.dedup();
    // Identifiers the log is meant to carry (run ids are in keys and outputs) are not secrets.
    secrets.retain(|s| s.len() >= 8 && !runs.iter().any(|r| r.contains(s.as_str()) || s.contains(r.as_str())));
    secrets
}

/// No secret in any log line or span attribute; the log and the spans say what happened.
fn nothing_protected(exercised: &Exercised) {
    let Exercised { log, spans, secrets, runs } = exercised;
    assert!(secrets.len() > 15, "the search has something to find: {secrets:?}");
    for secret in secrets {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(secret.as_str())).collect();
        assert!(lines.is_empty(), "`{secret}` was logged:\n{}", lines.join("\n"));
        for span in spans {
            for (key, value) in &span.attributes {
                assert!(!value.contains(secret.as_str()), "`{secret}` in attribute {key} of span {}", span.name);
            }
        }
    }
    for said in [
        "run admitted",
        "attempt answered",
        "effect uncertain",
        "run needs attention",
        "receipt lookup queued",
        "run finished",
        "event refused",
        "request",
        "drained",
    ] {
        assert!(log.contains(said), "the log never says `{said}`:\n{log}");
    }
    for run in runs {
        assert!(log.lines().any(|l| l.contains(run.as_str()) && l.contains("run finished")), "{run} finished unlogged");
        assert!(spans.iter().any(|s| s.name == "run" && s.attributes.get("coordinator.run_id") == Some(run)));
    }
    assert!(spans.iter().any(|s| s.name == "POST /v1/events/{workflow}/{trigger}"
        && s.attributes.get("http.response.status_code").map(String::as_str) == Some("401")));
}

#[test]
fn json_log_lines_and_spans_carry_nothing_protected() {
    on_runtime(async {
        let exercised = exercise("json").await;
        let unparsed: Vec<&str> = exercised.log.lines().filter(|l| serde_json::from_str::<Value>(l).is_err()).collect();
        assert!(unparsed.is_empty(), "every line is one JSON object: {unparsed:?}");
        nothing_protected(&exercised);
        let lines: Vec<Value> = exercised.log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let answered = lines.iter().find(|l| l["message"] == "attempt answered" && l["step"] == "send-notice");
        let answered = answered.unwrap_or_else(|| panic!("no answered notice: {}", exercised.log));
        for field in ["run_id", "workflow", "revision", "step", "attempt", "event", "outcome", "effect", "trace_id"] {
            assert!(!answered[field].is_null(), "`{field}` missing from {answered}");
        }
    });
}

#[test]
fn human_log_lines_and_spans_carry_nothing_protected() {
    on_runtime(async {
        let exercised = exercise("human").await;
        assert!(exercised.log.lines().all(|l| serde_json::from_str::<Value>(l).is_err()), "human lines, not JSON");
        nothing_protected(&exercised);
    });
}
