//! The API's request bodies, decoded as the handlers decode them
//! (`coordinator::api::decode`, `coordinator::engine::trigger::read_event`, the
//! event's trigger admission, `coordinator_core::package::read`), and the
//! body reader (`api::decode::within`) over a body cut into chunks.
//! Nothing panics; an accepted admission has a workflow, a revision and a
//! key of 1 to 255 characters without control characters, and its body was
//! a JSON object of the documented fields; a refusal is a `400` that does
//! not quote the input; a completion reference is the body's `reference`;
//! an event's id is its `eventId`, and the input a trigger admits fits the
//! workflow's input schema; a package that reads has the revision its
//! manifest claims and compiles; `within` returns the whole body exactly
//! when it is within the limit, else `413`.
#![no_main]

use std::sync::LazyLock;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use coordinator::api::decode;
use coordinator::engine::trigger::read_event;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::package;
use coordinator_functions::Limits;
use coordinator_fuzz::{EXAMPLES, compiled};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// permit-check: the example with a trigger.
static PERMIT_CHECK: LazyLock<Workflow> = LazyLock::new(|| {
    let example = EXAMPLES.iter().find(|e| e.name == "permit-check").unwrap();
    compiled(example)
});

static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_current_thread().build().unwrap());

const ADMISSION_FIELDS: [&str; 5] = ["workflow", "revision", "input", "idempotencyKey", "runId"];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    match mode % 6 {
        0 => admission(body),
        1 => completion(body),
        2 => event(body),
        3 => activation(body),
        4 => within(body),
        _ => content_type(body),
    }
});

fn usable(text: &str) -> bool {
    (1..=255).contains(&text.chars().count()) && !text.chars().any(char::is_control)
}

fn admission(body: &[u8]) {
    match decode::admission(body) {
        Ok(admission) => {
            assert!(usable(&admission.workflow) && usable(&admission.revision), "{admission:?}");
            assert!(admission.idempotency_key.as_deref().is_none_or(usable), "{admission:?}");
            let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
                panic!("an admission that is not a JSON object was accepted")
            };
            assert!(fields.keys().all(|k| ADMISSION_FIELDS.contains(&k.as_str())), "an unknown field was accepted");
            assert_eq!(fields.get("input"), Some(&admission.input));
        }
        Err(refusal) => {
            assert_eq!(refusal.status(), StatusCode::BAD_REQUEST);
            assert!(matches!(refusal.code(), "request.invalid" | "idempotency.key-invalid"), "{}", refusal.code());
            if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body)
                && let Some(input) = fields.get("input").map(Value::to_string).filter(|i| i.len() >= 8)
            {
                assert!(!refusal.message().contains(&input), "a refusal quotes the input");
            }
        }
    }
}

fn completion(body: &[u8]) {
    let Some(reference) = decode::completion_reference(body) else { return };
    assert!(!reference.is_empty() && reference.len() <= decode::REFERENCE_MAX);
    assert!(!reference.chars().any(char::is_control));
    let value: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(value["reference"].as_str(), Some(reference.as_str()));
}

fn event(body: &[u8]) {
    let Ok((event, id)) = read_event(body) else { return };
    assert_eq!(event["eventId"].as_str(), Some(id.as_str()));
    if let Ok(admitted) = PERMIT_CHECK.trigger_admission("permit-expiring", &event) {
        assert!(PERMIT_CHECK.check_input(&admitted.input).is_empty(), "a trigger admitted an input its schema refuses");
        assert!(!admitted.idempotency_key.is_empty());
    }
}

fn activation(body: &[u8]) {
    let Ok(read) = package::read(body, None) else { return };
    assert_eq!(read.definition.revision().ok().as_deref(), Some(read.manifest.revision.as_str()));
    let _ = Workflow::compile(read.definition, Limits::default());
}

/// Two bytes of limit, then chunks separated by `0xff`.
fn within(data: &[u8]) {
    let [low, high, rest @ ..] = data else { return };
    let limit = usize::from(u16::from_le_bytes([*low, *high]));
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        rest.split(|&b| b == 0xff).map(|chunk| Ok(Bytes::copy_from_slice(chunk))).collect();
    let whole: Vec<u8> = rest.iter().copied().filter(|&b| b != 0xff).collect();
    let body = Body::from_stream(futures_util::stream::iter(chunks));
    match RUNTIME.block_on(decode::within(body, limit)) {
        Ok(bytes) => {
            assert!(whole.len() <= limit, "{} bytes accepted over a limit of {limit}", whole.len());
            assert_eq!(bytes.as_ref(), whole.as_slice());
        }
        Err(refusal) => {
            assert!(whole.len() > limit, "{} bytes refused under a limit of {limit}", whole.len());
            assert_eq!(refusal.status(), StatusCode::PAYLOAD_TOO_LARGE);
        }
    }
}

fn content_type(value: &[u8]) {
    let Ok(value) = HeaderValue::from_bytes(value) else { return };
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, value.clone());
    if decode::is_json(&headers) {
        let essence = value.to_str().unwrap().split(';').next().unwrap().trim().to_ascii_lowercase();
        assert!(essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json")));
    }
}
