//! `GET|DELETE {base}/v1/load`: the product requests a simulator is serving,
//! the most at once, and when each arrived.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Harness, json, message, sent, start_default};

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

async fn load(h: &Harness, product: &str) -> Value {
    json(sent(h.http.get(format!("{}/v1/load", h.url(product))).send().await)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_held_at_once_are_counted_and_each_arrival_is_kept() {
    let h = start_default().await;
    let before = unix_ms();
    // Three answers held back at the same time, then one answered at once.
    let fault = json!({"operation": "submit-message/v1", "fault": "timeout", "delaySeconds": 0.5, "count": 3});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    let commands = [message("a"), message("b"), message("c")];
    let (a, b, c) = tokio::join!(
        h.call("messaging", "submit-message/v1", Some("a"), &commands[0]),
        h.call("messaging", "submit-message/v1", Some("b"), &commands[1]),
        h.call("messaging", "submit-message/v1", Some("c"), &commands[2]),
    );
    assert!([a, b, c].iter().all(|r| r.status() == StatusCode::OK));
    h.accepted("messaging", "submit-message/v1", Some("d"), &message("d")).await;
    let after = unix_ms();

    let seen = load(&h, "messaging").await;
    assert_eq!(seen["inFlight"], 0);
    assert_eq!(seen["maxInFlight"], 3, "{seen}");
    assert_eq!(seen["requests"], 4);
    let arrivals: Vec<u64> = seen["arrivals"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    assert_eq!(arrivals.len(), 4);
    assert!(arrivals.iter().all(|at| (before..=after).contains(at)), "{arrivals:?} not within {before}..={after}");
    // The control API and other products do not count.
    assert_eq!(load(&h, "casework").await["requests"], 0);

    let reset = sent(h.http.delete(format!("{}/v1/load", h.url("messaging"))).send().await);
    assert_eq!(reset.status(), StatusCode::NO_CONTENT);
    let seen = load(&h, "messaging").await;
    assert_eq!(
        (seen["inFlight"].clone(), seen["maxInFlight"].clone(), seen["requests"].clone()),
        (json!(0), json!(0), json!(0))
    );
    assert_eq!(seen["arrivals"], json!([]));
}
