//! Nothing protected reaches a log line or a span (SPEC §4): `coordinator
//! serve` logs at `debug` in each format and exports its spans to a receiver
//! in the test process while it runs the flagship to its end, a run whose
//! notice is lost and then reconciled, refused requests (invalid input, a
//! body that is not JSON, an unknown token, a refused operator command) and
//! signed events (one good, one with a bad signature, one unsigned). Then
//! every log line and every span attribute is searched for the input's
//! values, the prepared commands' and products' values (outputs, completion
//! references, receipts), every token, secret, signature and the payload key.
//! The log must also say what happened, so the search is not vacuous.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/otlp.rs"]
mod otlp;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coordinator_core::signature::sign;
use coordinator_sim::casework::CaseworkConfig;
use coordinator_sim::{DEFAULT_CLIENT, ReceiptLookup, SimConfig};
use deploy::{DeploymentSpec, SimServer, free_port, sim_server};
use otlp::Receiver;
use process::{Serve, read};
use serde_json::{Value, json};
use support::{TOKEN, authorized_client, on_runtime, repo, sample_input};

/// The event signing secret of the registry connection.
const EVENT_SECRET: &str = "event-secret-never-logged-7f3a";
/// A token nobody holds.
const WRONG_TOKEN: &str = "wrong-token-never-logged-91c2";
/// Values only the refused requests carry.
const BAD_INPUT: &str = "bad-input-never-logged-55d0";
const NOT_JSON: &str = "not-json-never-logged-0b7e";
/// The record a signed event announces (it becomes a run's input).
const EVENT_RECORD: &str = "0199c8a0-1111-7222-8333-444455556666";
/// How long any wait may take (a failure guard, never a speed claim).
const GUARD: Duration = Duration::from_secs(120);

/// The flagship with a trigger: BReg's `record-created` admits a run.
fn triggered_flagship(dir: &Path) -> PathBuf {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    let source = repo().join("examples/reviewed-notice");
    std::fs::copy(source.join("input.json"), project.join("input.json")).unwrap_or_else(|e| panic!("{e}"));
    let functions = std::fs::read_to_string(source.join("functions.rhai")).unwrap_or_else(|e| panic!("{e}"));
    let functions = format!(
        "{functions}\nfn trigger_input(event) {{ #{{ applicationId: event.recordId, recipient: #{{ kind: \"person\", id: \"person-4711\" }} }} }}\nfn trigger_key(event) {{ `created:${{event.recordId}}:${{event.revision}}` }}\n"
    );
    std::fs::write(project.join("functions.rhai"), functions).unwrap_or_else(|e| panic!("{e}"));
    let workflow = std::fs::read_to_string(source.join("workflow.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let workflow = format!(
        "{workflow}\ntriggers:\n  created:\n    connection: registry\n    event: breg.record-created/v1\n    input: {{function: trigger_input, arguments: [{{type: event}}]}}\n    idempotencyKey: {{function: trigger_key, arguments: [{{type: event}}]}}\n"
    );
    std::fs::write(project.join("workflow.yaml"), workflow).unwrap_or_else(|e| panic!("{e}"));
    project
}

struct Exercised {
    log: String,
    spans: Vec<otlp::Received>,
    secrets: Vec<String>,
    runs: Vec<String>,
}

/// Runs everything the module docs list through `serve` logging in `format`.
async fn exercise(format: &str) -> Exercised {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let receiver = Receiver::grpc().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let sims = sim_server(SimConfig {
        casework: CaseworkConfig {
            auto_decide_after: Some(Duration::from_millis(100)),
            notify_url: Some(format!("{url}/v1/completions/casework")),
            ..CaseworkConfig::default()
        },
        ..SimConfig::default()
    })
    .await;
    let database = format!("sqlite://{}?mode=rwc", dir.path().join("c.db").display());
    let mut spec = DeploymentSpec::new(&database, &sims.base);
    spec.listen = format!("127.0.0.1:{port}");
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
    let mut serve = Serve::spawn_with(&runtime, &dir.path().join("serve.log"), format, &[("RUST_LOG", "debug")]);
    let client = authorized_client(Duration::from_secs(30));
    assert!(process::ready(&client, &url).await, "not ready:\n{}", read(&serve.log));
    let revision = {
        let (bytes, _) = deploy::package_of(&spec.project);
        coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision
    };
    let admit = |key: &str, input: Value| {
        let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": key, "input": input});
        client.post(format!("{url}/v1/runs")).json(&body).send()
    };

    // The flagship to its end.
    let flagship = run_id(admit("flagship", sample_input()).await).await;
    until(&client, &url, &flagship, "finished").await;
    // A notice whose answer is lost after the effect: uncertain, then reconciled.
    fault(&sims, "drop-response-after-effect").await;
    let faulted = run_id(admit("faulted", sample_input()).await).await;
    until(&client, &url, &faulted, "attention").await;
    let reconcile = client.post(format!("{url}/v1/runs/{faulted}/steps/send-notice/reconcile")).send().await;
    assert_eq!(reconcile.map(|r| r.status().as_u16()).ok(), Some(202));
    until(&client, &url, &faulted, "finished").await;
    // Refused requests.
    let mut bad = sample_input();
    bad["applicationId"] = json!(BAD_INPUT);
    assert_eq!(status(admit("bad-input", bad).await), 422);
    let not_json = client.post(format!("{url}/v1/runs")).header("content-type", "application/json").body(NOT_JSON);
    assert_eq!(status(not_json.send().await), 400);
    let unknown = reqwest::Client::new().get(format!("{url}/v1/runs")).bearer_auth(WRONG_TOKEN).send().await;
    assert_eq!(status(unknown), 401);
    let retry = client.post(format!("{url}/v1/runs/{flagship}/steps/send-notice/retry-same")).send().await;
    assert_eq!(status(retry), 409);
    // Signed events: a good one admits a run; a bad signature and none admit nothing.
    let event = serde_json::to_vec(&json!({
        "eventId": "0199c8a0-0000-7000-8000-000000000001",
        "recordType": "application",
        "recordId": EVENT_RECORD,
        "revision": 1,
        "occurredAt": "2026-01-05T10:00:00Z",
    }))
    .unwrap_or_default();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let now = i64::try_from(now).unwrap_or(0);
    let good = sign(EVENT_SECRET.as_bytes(), now, &event);
    let forged = sign(b"not-the-secret", now, &event);
    let post_event = |signature: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(format!("{url}/v1/events/reviewed-notice/created"))
            .header("content-type", "application/json")
            .body(event.clone());
        if let Some(signature) = signature {
            request = request.header("Coordinator-Signature", signature);
        }
        request.send()
    };
    let evented = run_id(post_event(Some(&good)).await).await;
    assert_eq!(status(post_event(Some(&forged)).await), 401);
    assert_eq!(status(post_event(None).await), 401);
    until(&client, &url, &evented, "finished").await;

    serve.signal("TERM");
    assert_eq!(serve.exited().await.code(), Some(0), "{}", read(&serve.log));
    let runs = vec![flagship, faulted, evented];
    let secrets = secrets(&sims, &runs, &[good, forged]);
    Exercised { log: read(&serve.log), spans: receiver.spans(), secrets, runs }
}

/// Everything that must never be logged or exported.
fn secrets(sims: &SimServer, runs: &[String], signatures: &[String]) -> Vec<String> {
    let input = sample_input();
    let mut secrets = vec![
        input["applicationId"].as_str().unwrap_or_default().to_owned(),
        input["recipient"]["id"].as_str().unwrap_or_default().to_owned(),
        EVENT_RECORD.to_owned(),
        BAD_INPUT.to_owned(),
        NOT_JSON.to_owned(),
        TOKEN.to_owned(),
        WRONG_TOKEN.to_owned(),
        EVENT_SECRET.to_owned(),
        DEFAULT_CLIENT.1.to_owned(),
        "5a".repeat(32),
    ];
    for signature in signatures {
        secrets.extend(signature.split(',').filter_map(|part| part.strip_prefix("v1=")).map(str::to_owned));
    }
    let tokens = sims.sims.tokens.live_tokens();
    assert!(!tokens.is_empty(), "products were called with tokens");
    secrets.extend(tokens);
    let references = sims.sims.casework.references();
    assert!(references.len() >= runs.len(), "one review request per run: {references:?}");
    secrets.extend(references);
    for run in runs {
        let key = format!("{run}:send-notice");
        let ReceiptLookup::Found(accepted) = sims.sims.messaging.receipt(&key) else { panic!("no receipt for {key}") };
        secrets.extend(accepted.completions.values().cloned());
        strings_of(&accepted.output, &mut secrets);
    }
    secrets.sort();
    secrets.dedup();
    // Identifiers the log is meant to carry (run ids are in keys and outputs) are not secrets.
    secrets.retain(|s| s.len() >= 8 && !runs.iter().any(|r| r.contains(s.as_str()) || s.contains(r.as_str())));
    secrets
}

fn strings_of(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(s) => into.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, into)),
        Value::Object(map) => map.values().for_each(|v| strings_of(v, into)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

async fn fault(sims: &SimServer, fault: &str) {
    let body = json!({"operation": "submit-message/v1", "fault": fault, "count": 1});
    let (status, answer) = support::post(&format!("{}/sim/messaging/v1/faults", sims.base), &body).await;
    assert_eq!(status, 200, "{answer}");
}

fn status(response: Result<reqwest::Response, reqwest::Error>) -> u16 {
    response.map(|r| r.status().as_u16()).unwrap_or_else(|e| panic!("{e}"))
}

async fn run_id(response: Result<reqwest::Response, reqwest::Error>) -> String {
    let response = response.unwrap_or_else(|e| panic!("{e}"));
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 201, "{body}");
    body["runId"].as_str().unwrap_or_else(|| panic!("{body}")).to_owned()
}

async fn until(client: &reqwest::Client, url: &str, run: &str, state: &str) {
    let started = Instant::now();
    loop {
        let view: Value = match client.get(format!("{url}/v1/runs/{run}")).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        if view["state"] == state {
            return;
        }
        assert!(started.elapsed() < GUARD, "{run} never reached {state}: {view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
