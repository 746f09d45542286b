//! Credentials in the running service (SPEC §4): a fresh token for every
//! request to a product — one token request per operation attempt and per
//! observation — and no token in the database files or the service's output.
//! `coordinator serve` runs as its own process, its output captured in a file.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, free_port, sim_server};
use serde_json::{Value, json};
use support::{get, on_runtime, post, sample_input};

/// Kills the child when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_request_gets_a_fresh_token_and_no_token_is_kept_or_printed() {
    on_runtime(async {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let port = free_port();
        let casework =
            CaseworkConfig { auto_decide_after: Some(Duration::from_millis(1500)), ..CaseworkConfig::default() };
        let sims = sim_server(SimConfig { casework, ..SimConfig::default() }).await;
        let db = dir.path().join("coordinator.db");
        let mut spec = DeploymentSpec::new(&format!("sqlite://{}?mode=rwc", db.display()), &sims.base);
        spec.listen = format!("127.0.0.1:{port}");
        spec.project = eager_reviewed_notice(dir.path());
        let runtime = spec.write(dir.path());
        let exe = env!("CARGO_BIN_EXE_coordinator");
        let migrated = Command::new(exe).args(["migrate", "--runtime"]).arg(&runtime).output();
        assert!(migrated.is_ok_and(|o| o.status.success()));
        let log = dir.path().join("coordinator.log");
        let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        let err = out.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(exe)
            .args(["serve", "--runtime"])
            .arg(&runtime)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let _child = Child(child);
        let url = format!("http://127.0.0.1:{port}");
        let mut healthy = false;
        for _ in 0..400 {
            if reqwest::get(format!("{url}/healthz")).await.is_ok_and(|r| r.status().is_success()) {
                healthy = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(healthy, "{}", std::fs::read_to_string(&log).unwrap_or_default());

        let revision = {
            let (bytes, _) = deploy::package_of(&spec.project);
            coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision
        };
        let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": "t", "input": sample_input()});
        let (status, admitted) = post(&format!("{url}/v1/runs"), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run = admitted["runId"].as_str().unwrap_or_default().to_owned();
        let mut view = Value::Null;
        for _ in 0..400 {
            view = get(&format!("{url}/v1/runs/{run}/inspection")).await.1;
            if view["state"] == "finished" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(view["state"], "finished", "{view}");

        // One token per request: each call attempt and each observation of the review.
        let steps = view["steps"].as_array().cloned().unwrap_or_default();
        let attempts: u64 = steps.iter().filter_map(|s| s["call"]["attempts"].as_u64()).sum();
        let observations: u64 = steps.iter().filter_map(|s| s["wait"]["observations"].as_u64()).sum();
        assert_eq!((attempts, observations > 0), (3, true), "{view}");
        assert_eq!(sims.sims.tokens.issued(), attempts + observations, "one token request per product request");

        // No token in the database files (the WAL included) or in anything the service printed.
        let tokens = sims.sims.tokens.live_tokens();
        assert_eq!(tokens.len() as u64, attempts + observations);
        let mut places = vec![log.clone()];
        for entry in std::fs::read_dir(dir.path()).unwrap_or_else(|e| panic!("{e}")).flatten() {
            if entry.file_name().to_string_lossy().starts_with("coordinator.db") {
                places.push(entry.path());
            }
        }
        assert!(places.len() >= 2, "{places:?}");
        for place in places {
            let bytes = std::fs::read(&place).unwrap_or_else(|e| panic!("{}: {e}", place.display()));
            for token in &tokens {
                let found = bytes.windows(token.len()).any(|w| w == token.as_bytes());
                assert!(!found, "a token is in {}", place.display());
            }
        }
    });
}
