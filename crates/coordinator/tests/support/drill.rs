//! Test support for the recovery drills (restore_drill.rs, fence.rs):
//! `serve` started in this process, waiting on a run's inspection, and the
//! simulators' request and effect counts.

use std::path::Path;
use std::time::Duration;

use coordinator::process::deployment::RuntimeConfig;
use coordinator::process::serve::{self, Mode, Service};
use coordinator_sim::{EffectCount, Simulators};
use serde_json::{Value, json};

use crate::support::{get, post, sample_input};

/// Starts `serve` on the deployment of `runtime` in `mode`.
pub async fn start(runtime: &Path, mode: Mode) -> Service {
    let deployment = RuntimeConfig::read(runtime).and_then(RuntimeConfig::resolve);
    let deployment = deployment.unwrap_or_else(|e| panic!("{e}"));
    serve::start_with(deployment, mode).await.unwrap_or_else(|e| panic!("serve: {e}"))
}

/// Admits one run of reviewed-notice per key and waits until each waits for its review.
pub async fn admit_to_review(service: &Service, keys: &[&str]) -> Vec<String> {
    let url = service.url();
    let mut runs = Vec::new();
    for key in keys {
        let body = json!({"workflow": "reviewed-notice", "revision": service.revision, "idempotencyKey": key, "input": sample_input()});
        let (status, admitted) = post(&format!("{url}/v1/runs"), &body).await;
        assert_eq!(status, 201, "{admitted}");
        runs.push(admitted["runId"].as_str().unwrap_or_default().to_owned());
    }
    for run in &runs {
        wait_for(&url, run, "the review wait", |v| v["currentStep"] == "await-review").await;
    }
    runs
}

/// The operator's release of the restore hold (`DELETE /v1/restore-hold`), answered `200`.
pub async fn release(url: &str) {
    let response = crate::support::authorized_client(Duration::from_secs(60))
        .delete(format!("{url}/v1/restore-hold"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status().as_u16(), 200);
}

/// Waits until `done` holds for the run's inspection (a failure guard, not a speed claim).
pub async fn wait_for(url: &str, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..1200 {
        let (_, view) = get(&format!("{url}/v1/runs/{run}/inspection")).await;
        if done(&view) {
            return view;
        }
        last = view;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} never got {what}: {last}");
}

/// (operation, key, requests, effects) of every product a run touches, sorted.
pub type Counts = Vec<(String, Option<String>, u64, u64)>;

/// The simulators' counts now.
pub fn counts(sims: &Simulators) -> Counts {
    let all: Vec<EffectCount> = [sims.breg.effects(), sims.casework.effects(), sims.messaging.effects()].concat();
    let mut rows: Vec<_> = all.into_iter().map(|e| (e.operation, e.idempotency_key, e.requests, e.effects)).collect();
    rows.sort();
    rows
}

/// The counts of commands (requests with an idempotency key): what must not move under a hold.
pub fn commands(rows: Counts) -> Counts {
    rows.into_iter().filter(|r| r.1.is_some()).collect()
}
