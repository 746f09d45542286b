//! The flagship example end to end under `coordinator dev`: admission, the
//! worker calling the simulators, the casework auto-decision and its
//! notification, the observation, the notice — `finished` with `notice-sent`,
//! with exactly one effect per idempotency key. Also: nothing of the input is
//! stored in clear.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{get, on_runtime, post, sample_input, start};

fn effects_of(effects: &[coordinator_sim::EffectCount], operation: &str) -> Vec<(Option<String>, u64)> {
    effects.iter().filter(|e| e.operation == operation).map(|e| (e.idempotency_key.clone(), e.effects)).collect()
}

#[test]
fn reviewed_notice_runs_to_notice_sent_with_one_effect_per_key() {
    on_runtime(async {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = start(data.path().to_path_buf()).await;
        let body = json!({
            "workflow": "reviewed-notice", "revision": dev.revision,
            "input": sample_input(), "idempotencyKey": "e2e-1",
        });
        let (status, admitted) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run_id = admitted["runId"].as_str().unwrap_or_else(|| panic!("no runId: {admitted}")).to_owned();

        let started = Instant::now();
        let view = loop {
            let (status, view) = get(&format!("{}/v1/runs/{run_id}", dev.url())).await;
            assert_eq!(status, 200, "{view}");
            if view["state"] != "running" {
                break view;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "still running after 30 s: {view}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(view["state"], "finished", "{view}");
        assert_eq!(view["outcome"], "notice-sent", "{view}");
        assert_eq!(view["failure"], Value::Null);
        assert!(view.get("input").is_none(), "the input is never shown");

        let review_key = format!("{run_id}:request-review");
        let notice_key = format!("{run_id}:send-notice");
        assert_eq!(effects_of(&dev.sims.casework.effects(), "submit-review-request/v1"), vec![(Some(review_key), 1)]);
        assert_eq!(effects_of(&dev.sims.messaging.effects(), "submit-message/v1"), vec![(Some(notice_key), 1)]);

        // The same admission again is the same run.
        let (status, again) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!((status, again["runId"].as_str()), (200, Some(run_id.as_str())));

        // Nothing of the input is stored in clear (database, WAL, shared memory).
        let recipient = sample_input()["recipient"]["id"].as_str().unwrap_or_default().to_owned();
        assert!(!recipient.is_empty());
        let store = dev.engine.store().clone();
        drop(dev);
        store.close().await;
        let mut scanned = 0;
        for entry in std::fs::read_dir(data.path()).unwrap_or_else(|e| panic!("{e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            let bytes = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                // SQLite removes its WAL and shared-memory files when the last connection closes.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("{}: {e}", path.display()),
            };
            scanned += bytes.len();
            let found = bytes.windows(recipient.len()).any(|w| w == recipient.as_bytes());
            assert!(!found, "{} contains the recipient id in clear", path.display());
        }
        assert!(scanned > 0, "the database was read");
    });
}
