//! Payload keys left out of `payloadKeys` (a rotation mistake): `serve` refuses
//! to start while runs not finished were sealed with a key it does not hold,
//! naming the key; with the old key kept beside the new active one it starts
//! and the runs open; a finished run sealed with a key no longer held is
//! answered `503 payload-key.missing` naming the key, not `500 internal`.

use std::path::Path;
use std::time::Duration;

use crate::support::deploy::{DeploymentSpec, SimServer, deployment, eager_flagship, package_of, sqlite_url};
use crate::support::process::{Process, read, served};
use crate::support::{admit, get, on_runtime, tempdir, until_state};

/// Only the second key, active.
const ONLY_K2: &str = "{active: k2, keys: {k2: file:payload-key-2}}";
/// The second key active, the first kept for what it sealed.
const BOTH: &str = "{active: k2, keys: {k1: file:payload-key, k2: file:payload-key-2}}";

/// A deployment in `dir` with the second key's file beside the first's, and
/// its simulators (reviews decided after `decide_after`, or never).
async fn spec(dir: &Path, decide_after: Option<Duration>) -> (DeploymentSpec, SimServer) {
    let (mut spec, sims) = deployment(&sqlite_url(dir), decide_after, false).await;
    spec.project = eager_flagship(dir);
    spec.files.push(("payload-key-2".to_owned(), format!("{}\n", "7c".repeat(32))));
    (spec, sims)
}

/// Admits the flagship; returns its run id.
async fn admit_to(spec: &DeploymentSpec) -> String {
    admit(&spec.url(), &package_of(&spec.project).revision, "k").await
}

/// Stops `serve` as an operator would.
async fn stop(mut serve: Process) {
    serve.signal("TERM");
    assert!(serve.exited().await.success(), "{}", read(&serve.log));
}

#[test]
fn serve_refuses_to_start_without_a_key_that_runs_not_finished_were_sealed_with() {
    on_runtime(async {
        let dir = tempdir();
        // The review is never decided: the run waits, not finished.
        let (mut spec, _sims) = spec(dir.path(), None).await;
        let first = served(&spec, dir.path(), "first.log").await;
        let run = admit_to(&spec).await;
        let (status, view) = get(&format!("{}/v1/runs/{run}", spec.url())).await;
        assert_eq!(status, 200, "{view}");
        assert_ne!(view["state"], "finished", "{view}");
        stop(first).await;

        // The new key alone: refused, naming the key the waiting run needs.
        spec.payload_keys = ONLY_K2.to_owned();
        let runtime = spec.write(dir.path());
        let mut refused = Process::serve(&runtime, &dir.path().join("refused.log"));
        let status = refused.exited().await;
        let log = read(&refused.log);
        assert_eq!(status.code(), Some(1), "a configuration error:\n{log}");
        assert!(log.contains("`k1`") && log.contains("payloadKeys"), "{log}");
        assert!(!log.contains(&"5a".repeat(32)), "no key material in the output");

        // The old key kept beside the new active one: it starts and the run opens.
        spec.payload_keys = BOTH.to_owned();
        let rotated = served(&spec, dir.path(), "rotated.log").await;
        let (status, view) = get(&format!("{}/v1/runs/{run}", spec.url())).await;
        assert_eq!((status, view["runId"].as_str()), (200, Some(run.as_str())), "{view}");
        stop(rotated).await;
    });
}

#[test]
fn a_finished_run_sealed_with_a_key_not_held_is_answered_with_the_key_id() {
    on_runtime(async {
        let dir = tempdir();
        let (mut spec, _sims) = spec(dir.path(), Some(Duration::from_millis(500))).await;
        let first = served(&spec, dir.path(), "first.log").await;
        let run = admit_to(&spec).await;
        until_state(&spec.url(), &run, "finished").await;
        stop(first).await;

        // Finished runs do not stop a start; reading one needs its key.
        spec.payload_keys = ONLY_K2.to_owned();
        let second = served(&spec, dir.path(), "second.log").await;
        let (status, body) = get(&format!("{}/v1/runs/{run}", spec.url())).await;
        assert_eq!((status, body["code"].as_str()), (503, Some("payload-key.missing")), "{body}");
        assert!(body["message"].as_str().is_some_and(|m| m.contains("`k1`")), "{body}");
        stop(second).await;
        assert!(read(&dir.path().join("second.log")).contains("k1"), "the log names the key too");
    });
}
