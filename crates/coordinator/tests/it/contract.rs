//! The API contract as a third-party client relies on it: schemathesis
//! (`--checks all`: every response documented and matching its schema, no
//! server error, schema-valid requests accepted and schema-violating ones
//! refused, and its stateful phase following the document's links from an
//! admission to the run's endpoints) against `/v1/openapi.json` of
//! `coordinator dev` and of `serve` on PostgreSQL.
//!
//! The document is the one this deployment serves its caller (the bearer
//! token is sent): admissions generated from it are admitted, so the stateful
//! phase reaches every run endpoint with real runs.
//!
//! schemathesis is a Python tool: `.ci/run` installs it into
//! `target/contract-venv` (pip, pinned version); `SCHEMATHESIS` may name
//! another executable. Every seed of [`SEEDS`] is run, each repeatable;
//! `SCHEMATHESIS_SEED` runs only the one it names, to explore others.

use std::path::PathBuf;
use std::process::Command;

use crate::support::deploy::{deployment, free_port, migrated};
use crate::support::process::{self, DevArgs, Process, ready};
use crate::support::{TOKEN, on_runtime, pg, repo, tempdir};

/// Examples per operation and phase, for each seed: twenty seeds of five
/// fit CI's half hour beside the rest of the suite on two cores; explore a
/// seed further with `SCHEMATHESIS_SEED`.
const EXAMPLES: &str = "5";
/// The seeds each contract test runs, one after another.
const SEEDS: std::ops::RangeInclusive<u32> = 1..=20;

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

/// Runs schemathesis against `url` (which serves `/v1/openapi.json`) with
/// every seed; panics with the first failing seed's report.
async fn contract_holds(url: String, what: &'static str) {
    let seeds: Vec<String> = match std::env::var("SCHEMATHESIS_SEED") {
        Ok(seed) => vec![seed],
        Err(_) => SEEDS.map(|s| s.to_string()).collect(),
    };
    for seed in seeds {
        let (exe, url, work) = (schemathesis(), url.clone(), tempdir());
        let cwd = work.path().to_path_buf();
        let args = ["run", &format!("{url}/v1/openapi.json"), "--checks", "all", "--max-examples", EXAMPLES];
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let seeded = seed.clone();
        let output = tokio::task::spawn_blocking(move || {
            Command::new(exe)
                .current_dir(cwd)
                .args(args)
                .args(["--seed", &seeded, "--no-color", "-H", &format!("Authorization: Bearer {TOKEN}")])
                .output()
        })
        .await
        .unwrap_or_else(|e| panic!("schemathesis task: {e}"))
        .unwrap_or_else(|e| panic!("schemathesis did not start: {e}"));
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "schemathesis found failures against {what} with seed {seed}:\n{report}");
        assert!(report.contains("passed"), "schemathesis ran no test against {what} with seed {seed}:\n{report}");
    }
}

#[test]
fn schemathesis_finds_nothing_against_coordinator_dev() {
    on_runtime(async {
        let dir = tempdir();
        let data = dir.path().join("data");
        let args = DevArgs { listen: format!("127.0.0.1:{}", free_port()), data: Some(&data), token: Some(TOKEN) };
        let mut dev = Process::dev(&args, &dir.path().join("dev.log"));
        let url = format!("http://{}", args.listen);
        ready(&url, &dev.log).await;
        contract_holds(url, "coordinator dev").await;
        assert!(dev.running(), "dev stayed up:\n{}", process::read(&dev.log));
    });
}

#[test]
fn schemathesis_finds_nothing_against_serve_on_postgres() {
    on_runtime(async {
        let dir = tempdir();
        let db = pg::database().await;
        let (spec, _sims) = deployment(&db.url, None, false).await;
        let service = migrated(&spec.write(dir.path())).await;
        contract_holds(service.url(), "serve on PostgreSQL").await;
        drop(service);
    });
}
