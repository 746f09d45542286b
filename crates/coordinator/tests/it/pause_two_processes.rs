//! A pause holds for the whole deployment and survives its processes: two
//! `coordinator serve` processes on one PostgreSQL database, the registry
//! connection paused through one of them; runs admitted to both are sent
//! nothing, also after both processes are killed and started again; resumed
//! through the other, every run finishes, each registry read made once.

use std::time::Duration;

use serde_json::json;

use crate::support::deploy::{DeploymentSpec, eager_flagship, free_ports, package_of, sims, until_finished};
use crate::support::process::{Process, ready, serve_each};
use crate::support::{admission, authorized_client, on_runtime, pg, post, tempdir};

const RUNS: usize = 6;

#[test]
fn a_pause_holds_across_two_processes_and_their_restart() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let ports = free_ports::<2>();
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let sims = sims(Some(Duration::from_millis(50)), Some(&urls[1])).await;
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.project = eager_flagship(dir.path());
        let runtimes = spec.write_each(dir.path(), &ports);
        let mut processes = serve_each(&runtimes, &urls, dir.path()).await;
        let revision = package_of(&spec.project).revision;

        let (status, paused) =
            post(&format!("{}/v1/connections/registry/pause", urls[0]), &json!({"reason": "registry migration"})).await;
        assert_eq!((status, paused["changed"].as_bool()), (200, Some(true)), "{paused}");
        for i in 0..RUNS {
            let (status, admitted) =
                post(&format!("{}/v1/runs", urls[i % 2]), &admission(&revision, &format!("paused-{i}"))).await;
            assert_eq!(status, 201, "{admitted}");
        }
        // Longer than any process waits between claim rounds: nothing went to the registry.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(sims.sims.breg.load().requests, 0, "the registry received a request while paused");

        // Both processes die and start again: the pause is in the database.
        for process in &mut processes {
            process.kill();
        }
        let mut restarted = Vec::new();
        for (i, (runtime, url)) in runtimes.iter().zip(&urls).enumerate() {
            let process = Process::serve(runtime, &dir.path().join(format!("p{i}-again.log")));
            ready(url, &process.log).await;
            restarted.push(process);
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(sims.sims.breg.load().requests, 0, "the registry received a request after the restart");

        let (status, resumed) =
            post(&format!("{}/v1/connections/registry/resume", urls[1]), &json!({"reason": "migration done"})).await;
        assert_eq!((status, resumed["changed"].as_bool()), (200, Some(true)), "{resumed}");
        let client = authorized_client(Duration::from_secs(30));
        let logs: Vec<_> = restarted.iter().map(|p| p.log.clone()).collect();
        until_finished(&client, &urls[0], RUNS, &logs).await;
        assert_eq!(sims.sims.breg.load().requests, u64::try_from(RUNS).unwrap_or(0), "each run read the registry once");
    });
}
