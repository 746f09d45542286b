//! Two `coordinator serve` processes on one PostgreSQL database run 1 000 runs
//! together: no step is dispatched twice (each mutation key reaches its product
//! exactly once, and the registry is read exactly once per run) and none is
//! lost (every run reaches `notice-sent`). Admissions go to both processes;
//! either may claim any run's work.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::support::deploy::{DeploymentSpec, eager_flagship, free_ports, package_of, sims, until_finished};
use crate::support::effects::sent_once_per_key;
use crate::support::process;
use crate::support::{Load, authorized_client, on_runtime, pg, tempdir};

const RUNS: usize = 1000;
/// Admissions in flight at once.
const CLIENTS: usize = 16;

#[test]
fn two_processes_on_one_postgres_run_a_thousand_runs_without_a_double_or_lost_dispatch() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let ports = free_ports::<2>();
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let sims = sims(Some(Duration::from_millis(100)), Some(&urls[1])).await;
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.project = eager_flagship(dir.path());
        let runtimes = spec.write_each(dir.path(), &ports);
        let processes = process::serve_each(&runtimes, &urls, dir.path()).await;
        let logs: Vec<_> = processes.iter().map(|p| p.log.clone()).collect();
        let client = authorized_client(Duration::from_secs(30));
        let revision = package_of(&spec.project).revision;

        let load = Load { runs: RUNS, clients: CLIENTS, pace: Duration::ZERO, key: "pair" };
        for c in load.start(&client, &urls, &revision, &Arc::new(AtomicUsize::new(0))) {
            c.await.unwrap_or_else(|e| panic!("{e}"));
        }

        until_finished(&client, &urls[0], RUNS, &logs).await;
        sent_once_per_key(&sims.sims, RUNS);
        let casework_reads: u64 =
            sims.sims.casework.effects().iter().filter(|e| e.idempotency_key.is_none()).map(|e| e.requests).sum();
        assert_eq!(casework_reads, 0, "no late-decision reads on the happy path");
    });
}
