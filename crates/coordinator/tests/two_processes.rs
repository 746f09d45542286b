//! Two `coordinator serve` processes on one PostgreSQL database run 1 000 runs
//! together: no step is dispatched twice (each mutation key reaches its product
//! exactly once, and the registry is read exactly once per run) and none is
//! lost (every run reaches `notice-sent`). Admissions go to both processes;
//! either may claim any run's work.

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

use std::time::Duration;

use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, free_ports, runs_in_state, sim_server};
use serde_json::json;
use support::{authorized_client, on_runtime, sample_input};

const RUNS: usize = 1000;
/// Admissions in flight at once.
const CLIENTS: usize = 16;

#[test]
fn two_processes_on_one_postgres_run_a_thousand_runs_without_a_double_or_lost_dispatch() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let ports = free_ports::<2>();
        let sims = sim_server(SimConfig {
            casework: CaseworkConfig {
                auto_decide_after: Some(Duration::from_millis(100)),
                notify_url: Some(format!("http://127.0.0.1:{}/v1/completions/casework", ports[1])),
                ..CaseworkConfig::default()
            },
            ..SimConfig::default()
        })
        .await;
        let project = eager_reviewed_notice(dir.path());
        let mut runtimes = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let place = dir.path().join(format!("p{i}"));
            std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
            let mut spec = DeploymentSpec::new(&db.url, &sims.base);
            spec.listen = format!("127.0.0.1:{port}");
            spec.project = project.clone();
            runtimes.push(spec.write(&place));
        }
        process::migrate(&runtimes[0]);
        let logs = [dir.path().join("p0.log"), dir.path().join("p1.log")];
        let _first = process::Serve::spawn(&runtimes[0], &logs[0]);
        let _second = process::Serve::spawn(&runtimes[1], &logs[1]);
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let client = authorized_client(Duration::from_secs(30));
        for (url, log) in urls.iter().zip(&logs) {
            if !process::ready(&client, url).await {
                panic!(
                    "coordinator serve did not become healthy at {url}:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
        }
        let revision = {
            let (bytes, _) = deploy::package_of(&project);
            coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision
        };

        let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let (client, urls, revision, next) = (client.clone(), urls.clone(), revision.clone(), next.clone());
            clients.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= RUNS {
                        return;
                    }
                    let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": format!("pair-{i}"), "input": sample_input()});
                    let r = client.post(format!("{}/v1/runs", urls[i % 2])).json(&body).send().await;
                    let status = r.map(|r| r.status().as_u16()).unwrap_or_else(|e| panic!("admission {i}: {e}"));
                    assert_eq!(status, 201, "admission {i}");
                }
            }));
        }
        for c in clients {
            c.await.unwrap_or_else(|e| panic!("{e}"));
        }

        let mut finished = 0;
        for _ in 0..1200 {
            finished = runs_in_state(&client, &urls[0], "finished").await;
            if finished == RUNS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let logs: Vec<String> = logs.iter().map(|l| std::fs::read_to_string(l).unwrap_or_default()).collect();
        assert_eq!(finished, RUNS, "runs lost; logs:\n{}\n---\n{}", logs[0], logs[1]);
        for (product, effects) in
            [("casework", sims.sims.casework.effects()), ("messaging", sims.sims.messaging.effects())]
        {
            let keyed: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some()).collect();
            assert_eq!(keyed.len(), RUNS, "{product}: one key per run");
            let twice: Vec<_> = keyed.iter().filter(|e| e.requests != 1 || e.effects != 1).collect();
            assert!(twice.is_empty(), "{product}: dispatched more than once: {twice:?}");
        }
        let reads: u64 = sims.sims.breg.effects().iter().map(|e| e.requests).sum();
        assert_eq!(reads, RUNS as u64, "the registry is read once per run");
        let casework_reads: u64 =
            sims.sims.casework.effects().iter().filter(|e| e.idempotency_key.is_none()).map(|e| e.requests).sum();
        assert_eq!(casework_reads, 0, "no late-decision reads on the happy path");
    });
}
