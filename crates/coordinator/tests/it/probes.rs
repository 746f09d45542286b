//! Hostile input as a third-party client or fuzzer sends it, against `serve`
//! on both stores: every probe gets a clear `4xx` naming what is wrong, never
//! `500` — PostgreSQL's text cannot hold NUL and its indexes refuse huge
//! entries, which SQLite does not show (docs/reference/errors.md).

use serde_json::{Value, json};

use crate::support::deploy::{deployment, migrated};
use crate::support::pg::{self, Backend};
use crate::support::{TOKEN, admission, on_runtime, tempdir};

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.bearer_auth(TOKEN).send().await.unwrap_or_else(|e| panic!("send: {e}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn probes_on(backend: Backend) {
    let dir = tempdir();
    let db = pg::on(backend, dir.path()).await;
    let (spec, _sims) = deployment(&db.url, None, false).await;
    let service = migrated(&spec.write(dir.path())).await;
    let url = service.url();
    let client = reqwest::Client::new();
    let store = backend.name();
    let admit = |key: &str| admission(&service.revision, key);

    // Control characters in the path or a query: refused before any handler, naming the part.
    for (path, part) in [
        ("/v1/runs/%00", "path"),
        ("/v1/runs/%00/inspection", "path"),
        ("/v1/runs?workflow=%00", "query"),
        ("/v1/runs?workflow=a%0Ab", "query"),
        ("/v1/audit?run=%00", "query"),
    ] {
        let (status, body) = send(client.get(format!("{url}{path}"))).await;
        assert_eq!((status, body["code"].as_str()), (400, Some("request.invalid")), "{store} {path}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(part) && message.contains("control character"), "{store} {path}: {message}");
    }

    // Idempotency keys: NUL, a megabyte, empty — a code naming the field; nothing admitted.
    let huge = "k".repeat(1 << 20);
    for key in ["key\u{0}nul", huge.as_str(), ""] {
        let (status, body) = send(client.post(format!("{url}/v1/runs")).json(&admit(key))).await;
        assert_eq!((status, body["code"].as_str()), (400, Some("idempotency.key-invalid")), "{store}: {body}");
    }
    let longest = "k".repeat(255);
    let (status, body) = send(client.post(format!("{url}/v1/runs")).json(&admit(&longest))).await;
    assert_eq!(status, 201, "{store}: the longest key is admitted: {body}");
    // Bounds count characters, as the OpenAPI schema's maxLength does: 255 of
    // four bytes each are admitted, 256 refused.
    let (status, body) = send(client.post(format!("{url}/v1/runs")).json(&admit(&"\u{1F600}".repeat(255)))).await;
    assert_eq!(status, 201, "{store}: 255 characters of 4 bytes: {body}");
    let (status, body) = send(client.post(format!("{url}/v1/runs")).json(&admit(&"\u{1F600}".repeat(256)))).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("idempotency.key-invalid")), "{store}: {body}");

    // Workflow and revision with NUL: refused, naming the field.
    let mut bad = admit("k-2");
    bad["workflow"] = json!("reviewed\u{0}notice");
    let (status, body) = send(client.post(format!("{url}/v1/runs")).json(&bad)).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("request.invalid")), "{store}: {body}");
    assert!(body["message"].as_str().unwrap_or_default().starts_with("workflow"), "{store}: {body}");

    // A 10 MB admission: 413 naming the limit, answered (not a reset connection).
    let mut big = admit("k-big");
    big["input"]["padding"] = json!("x".repeat(10 << 20));
    let (status, body) = send(client.post(format!("{url}/v1/runs")).json(&big)).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("request.too-large")), "{store}: {body}");

    // Completion notifications: whatever the body, 202 and nothing else (no body, not JSON, NUL).
    let completions = format!("{url}/v1/completions/casework");
    let bodies: [(&str, Vec<u8>); 4] = [
        ("", Vec::new()),
        ("application/json", b"{not json".to_vec()),
        ("application/json", br#"{"reference": "a\u0000b"}"#.to_vec()),
        ("text/plain", b"reference".to_vec()),
    ];
    for (content_type, body) in bodies {
        let mut request = client.post(&completions).body(body);
        if !content_type.is_empty() {
            request = request.header("content-type", content_type);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status().as_u16(), 202, "{store}: completion with {content_type:?}");
    }

    // An empty cursor is the first page (the two runs admitted above).
    let (status, page) = send(client.get(format!("{url}/v1/runs?cursor="))).await;
    assert_eq!(status, 200, "{store}: {page}");
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(2), "{store}: {page}");

    // The service is still up and answers normally.
    let (status, _) = send(client.get(format!("{url}/healthz"))).await;
    assert_eq!(status, 200);
    drop(db);
}

#[test]
fn hostile_input_gets_a_clear_refusal_on_sqlite() {
    on_runtime(probes_on(Backend::Sqlite));
}

#[test]
fn hostile_input_gets_a_clear_refusal_on_postgres() {
    on_runtime(probes_on(Backend::Postgres));
}
