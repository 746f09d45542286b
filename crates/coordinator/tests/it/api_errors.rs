//! The admission API's error codes: `{"code", "message"}`, never echoing the input.

use serde_json::json;

use crate::support::{get, on_runtime, post, sample_input, start};

#[test]
fn admission_errors_have_stable_codes_and_echo_nothing() {
    on_runtime(async {
        let dev = start().await;
        let runs = format!("{}/v1/runs", dev.url());
        let admit = |input: serde_json::Value, key: &str| json!({"workflow": "reviewed-notice", "revision": dev.revision, "input": input, "idempotencyKey": key});

        // Unknown workflow.
        let body = json!({"workflow": "nope", "revision": dev.revision, "input": sample_input()});
        let (status, error) = post(&runs, &body).await;
        assert_eq!((status, error["code"].as_str()), (404, Some("workflow.unknown")), "{error}");
        assert!(error["message"].is_string());

        // Revision not active.
        let body = json!({"workflow": "reviewed-notice", "revision": "sha256:0000", "input": sample_input()});
        let (status, error) = post(&runs, &body).await;
        assert_eq!((status, error["code"].as_str()), (409, Some("revision.not-active")), "{error}");

        // Invalid input: pointers, no values.
        let secret = "very-private-value-4242";
        let input = json!({"applicationId": secret, "recipient": {"kind": "robot", "id": ""}, "extra": secret});
        let (status, error) = post(&runs, &admit(input, "bad-1")).await;
        assert_eq!((status, error["code"].as_str()), (422, Some("input.invalid")), "{error}");
        let pointers: Vec<&str> =
            error["pointers"].as_array().map(|a| a.iter().filter_map(|p| p.as_str()).collect()).unwrap_or_default();
        assert!(pointers.contains(&"/applicationId"), "{error}");
        assert!(pointers.contains(&"/recipient/kind"), "{error}");
        let text = error.to_string();
        assert!(!text.contains(secret) && !text.contains("robot"), "values echoed: {text}");

        // Key reused with another input.
        let (status, first) = post(&runs, &admit(sample_input(), "k-1")).await;
        assert_eq!(status, 201, "{first}");
        let mut other = sample_input();
        other["recipient"]["id"] = json!("someone-else");
        let (status, error) = post(&runs, &admit(other, "k-1")).await;
        assert_eq!((status, error["code"].as_str()), (409, Some("idempotency.key-reused")), "{error}");
        assert!(!error.to_string().contains("someone-else"));

        // Unknown run; health.
        let (status, error) = get(&format!("{}/v1/runs/0199c8a0-0000-7000-8000-000000000000", dev.url())).await;
        assert_eq!((status, error["code"].as_str()), (404, Some("run.unknown")), "{error}");
        assert_eq!(get(&format!("{}/healthz", dev.url())).await.0, 200);
    });
}

#[test]
fn completion_notifications_are_always_accepted() {
    on_runtime(async {
        let dev = start().await;
        let response = reqwest::Client::new()
            .post(format!("{}/v1/completions/casework", dev.url()))
            .json(&json!({"reference": "no-such-reference"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status().as_u16(), 202);
    });
}
