//! The API contract as a third-party client relies on it: schemathesis
//! (`--checks all`: every response documented and matching its schema, no
//! server error, schema-valid requests accepted and schema-violating ones
//! refused, and its stateful phase following the document's links from an
//! admission to the run's endpoints) against `/v1/openapi.json` of
//! `coordinator dev` and of `serve` on PostgreSQL.
//!
//! schemathesis is a Python tool: `.ci/run` installs it into
//! `target/contract-venv` (pip, pinned version); `SCHEMATHESIS` may name
//! another executable. The seed is fixed so that a run is repeatable; pass
//! `SCHEMATHESIS_SEED` to explore others.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::PathBuf;
use std::process::Command;

use coordinator::process::deployment::RuntimeConfig;
use coordinator::process::serve;
use coordinator_sim::SimConfig;
use deploy::{DeploymentSpec, free_port, sim_server};
use process::ready;
use support::{TOKEN, on_runtime, repo};

/// Examples per operation and phase.
const EXAMPLES: &str = "40";

/// The schemathesis executable: `SCHEMATHESIS`, the one `.ci/run` installs, or `schemathesis` on PATH.
fn schemathesis() -> PathBuf {
    if let Some(named) = std::env::var_os("SCHEMATHESIS") {
        return PathBuf::from(named);
    }
    let installed = repo().join("target/contract-venv/bin/schemathesis");
    if installed.exists() {
        return installed;
    }
    let on_path = Command::new("schemathesis").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(
        on_path,
        "schemathesis is not installed: run `python3 -m venv target/contract-venv && \
         target/contract-venv/bin/pip install schemathesis==4.32.5` at the repository root (.ci/run does)"
    );
    PathBuf::from("schemathesis")
}

/// Runs schemathesis against `url` (which serves `/v1/openapi.json`); panics with its report on any failure.
async fn contract_holds(url: String, what: &'static str) {
    let exe = schemathesis();
    let seed = std::env::var("SCHEMATHESIS_SEED").unwrap_or_else(|_| "1".to_owned());
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let cwd = work.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(exe)
            .current_dir(cwd)
            .args(["run", &format!("{url}/v1/openapi.json"), "--checks", "all", "--max-examples", EXAMPLES])
            .args(["--seed", &seed, "--no-color", "-H", &format!("Authorization: Bearer {TOKEN}")])
            .output()
    })
    .await
    .unwrap_or_else(|e| panic!("schemathesis task: {e}"))
    .unwrap_or_else(|e| panic!("schemathesis did not start: {e}"));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "schemathesis found failures against {what}:\n{report}");
    assert!(report.contains("passed"), "schemathesis ran no test against {what}:\n{report}");
}

#[test]
fn schemathesis_finds_nothing_against_coordinator_dev() {
    on_runtime(async {
        let listen = format!("127.0.0.1:{}", free_port());
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let log = dir.path().join("dev.log");
        let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("log: {e}"));
        let err = out.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
        let child = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["dev", "--log-format", "json", "--listen", &listen, "--token", TOKEN, "--data"])
            .arg(dir.path().join("data"))
            .arg("--project")
            .arg(repo().join("examples/reviewed-notice"))
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("coordinator dev: {e}"));
        let mut dev = Killed(child);
        let url = format!("http://{listen}");
        assert!(ready(&reqwest::Client::new(), &url).await, "dev not ready:\n{}", process::read(&log));
        contract_holds(url, "coordinator dev").await;
        assert!(dev.0.try_wait().is_ok_and(|exited| exited.is_none()), "dev stayed up:\n{}", process::read(&log));
    });
}

#[test]
fn schemathesis_finds_nothing_against_serve_on_postgres() {
    on_runtime(async {
        let sims = sim_server(SimConfig::default()).await;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let db = pg::database().await;
        let file = DeploymentSpec::new(&db.url, &sims.base).write(dir.path());
        let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
        serve::migrate(&config).await.unwrap_or_else(|e| panic!("migrate: {e}"));
        let service = serve::start(config.resolve().unwrap_or_else(|e| panic!("resolve: {e}")))
            .await
            .unwrap_or_else(|e| panic!("serve: {e}"));
        contract_holds(service.url(), "serve on PostgreSQL").await;
        drop(service);
    });
}

/// Kills the child when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
