//! Payload keys left out of `payloadKeys` (a rotation mistake): `serve` refuses
//! to start while runs not finished were sealed with a key it does not hold,
//! naming the key; with the old key kept beside the new active one it starts
//! and the runs open; a finished run sealed with a key no longer held is
//! answered `503 payload-key.missing` naming the key, not `500 internal`.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::Path;
use std::time::Duration;

use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, sim_server};
use process::{Serve, migrate, read, ready};
use serde_json::{Value, json};
use support::{get, on_runtime, post, sample_input};

/// Only the second key, active.
const ONLY_K2: &str = "{active: k2, keys: {k2: file:payload-key-2}}";
/// The second key active, the first kept for what it sealed.
const BOTH: &str = "{active: k2, keys: {k1: file:payload-key, k2: file:payload-key-2}}";

fn spec(dir: &Path, sims: &str) -> DeploymentSpec {
    let db = dir.join("coordinator.db");
    let mut spec = DeploymentSpec::new(&format!("sqlite://{}?mode=rwc", db.display()), sims);
    spec.project = eager_reviewed_notice(dir);
    spec.files.push(("payload-key-2".to_owned(), format!("{}\n", "7c".repeat(32))));
    spec
}

fn url(spec: &DeploymentSpec) -> String {
    format!("http://{}", spec.listen)
}

/// Starts `serve` with `spec` written into `dir`, ready.
async fn serve(dir: &Path, spec: &DeploymentSpec, log: &str) -> Serve {
    let runtime = spec.write(dir);
    let serve = Serve::spawn(&runtime, &dir.join(log));
    let client = reqwest::Client::new();
    assert!(ready(&client, &url(spec)).await, "not ready:\n{}", read(&serve.log));
    serve
}

/// Admits the flagship; returns its run id.
async fn admit(spec: &DeploymentSpec) -> String {
    let (bytes, _) = deploy::package_of(&spec.project);
    let revision = coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision;
    let body =
        json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": "k", "input": sample_input()});
    let (status, admitted) = post(&format!("{}/v1/runs", url(spec)), &body).await;
    assert_eq!(status, 201, "{admitted}");
    admitted["runId"].as_str().unwrap_or_default().to_owned()
}

/// Stops `serve` as an operator would.
async fn stop(mut serve: Serve) {
    serve.signal("TERM");
    assert!(serve.exited().await.success(), "{}", read(&serve.log));
}

/// The run's state, polled until it is `want` (a failure guard of 20 s).
async fn state_becomes(spec: &DeploymentSpec, run: &str, want: &str) -> Value {
    let mut view = Value::Null;
    for _ in 0..400 {
        view = get(&format!("{}/v1/runs/{run}", url(spec))).await.1;
        if view["state"] == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    view
}

#[test]
fn serve_refuses_to_start_without_a_key_that_runs_not_finished_were_sealed_with() {
    on_runtime(async {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // The review is never decided: the run waits, not finished.
        let sims = sim_server(SimConfig::default()).await;
        let mut spec = spec(dir.path(), &sims.base);
        migrate(&spec.write(dir.path()));
        let first = serve(dir.path(), &spec, "first.log").await;
        let run = admit(&spec).await;
        let (status, view) = get(&format!("{}/v1/runs/{run}", url(&spec))).await;
        assert_eq!(status, 200, "{view}");
        assert_ne!(view["state"], "finished", "{view}");
        stop(first).await;

        // The new key alone: refused, naming the key the waiting run needs.
        spec.payload_keys = ONLY_K2.to_owned();
        let runtime = spec.write(dir.path());
        let mut refused = Serve::spawn(&runtime, &dir.path().join("refused.log"));
        let status = refused.exited().await;
        let log = read(&refused.log);
        assert_eq!(status.code(), Some(1), "a configuration error:\n{log}");
        assert!(log.contains("`k1`") && log.contains("payloadKeys"), "{log}");
        assert!(!log.contains(&"5a".repeat(32)), "no key material in the output");

        // The old key kept beside the new active one: it starts and the run opens.
        spec.payload_keys = BOTH.to_owned();
        let rotated = serve(dir.path(), &spec, "rotated.log").await;
        let (status, view) = get(&format!("{}/v1/runs/{run}", url(&spec))).await;
        assert_eq!((status, view["runId"].as_str()), (200, Some(run.as_str())), "{view}");
        stop(rotated).await;
    });
}

#[test]
fn a_finished_run_sealed_with_a_key_not_held_is_answered_with_the_key_id() {
    on_runtime(async {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let casework =
            CaseworkConfig { auto_decide_after: Some(Duration::from_millis(500)), ..CaseworkConfig::default() };
        let sims = sim_server(SimConfig { casework, ..SimConfig::default() }).await;
        let mut spec = spec(dir.path(), &sims.base);
        migrate(&spec.write(dir.path()));
        let first = serve(dir.path(), &spec, "first.log").await;
        let run = admit(&spec).await;
        let view = state_becomes(&spec, &run, "finished").await;
        assert_eq!(view["state"], "finished", "{view}");
        stop(first).await;

        // Finished runs do not stop a start; reading one needs its key.
        spec.payload_keys = ONLY_K2.to_owned();
        let second = serve(dir.path(), &spec, "second.log").await;
        let (status, body) = get(&format!("{}/v1/runs/{run}", url(&spec))).await;
        assert_eq!((status, body["code"].as_str()), (503, Some("payload-key.missing")), "{body}");
        assert!(body["message"].as_str().is_some_and(|m| m.contains("`k1`")), "{body}");
        stop(second).await;
        assert!(read(&dir.path().join("second.log")).contains("k1"), "the log names the key too");
    });
}
