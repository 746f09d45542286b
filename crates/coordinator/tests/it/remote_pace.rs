//! A remote connection's pace is the deployment's, as an in-process one's:
//! `coordinator serve` processes on one PostgreSQL database, workers polling
//! them, the messaging connection `dispatch: remote`.
//!
//! - Limits, each notice answered a second late so that requests would
//!   overlap unless held back, two processes and a worker polling each:
//!   runtime.yaml's `limits: {concurrency: 4}` — the product never sees more
//!   than 4 in flight, and each notice is sent once; a worker's own `limits`
//!   (worker.yaml), sent with its polls, count the whole deployment's too.
//! - The breaker, from the health the workers report: a product answering
//!   `503` to everything opens it, after which it receives only probes, one
//!   per interval; once it answers again, every run finishes.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, eager_flagship, free_ports, package_of, until_finished};
use crate::support::process::{Process, serve_each};
use crate::support::stack::add_field;
use crate::support::workers::{self, WORKER_TOKEN, access_with_worker};
use crate::support::{admit, authorized_client, fault, get, on_runtime, pg, tempdir, until_state};

const RUNS: usize = 12;
const NOTICE: &str = "submit-message/v1";

/// Runs [`RUNS`] runs through two processes and their workers, with these
/// limits on messaging (runtime.yaml's, each worker's); the most requests
/// messaging had in flight at once, after checking each notice went once.
async fn most_in_flight(deployment: Option<&str>, worker: Option<&str>) -> usize {
    let db = pg::database().await;
    let dir = tempdir();
    let ports = free_ports::<4>();
    let urls: Vec<String> = ports[..2].iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let sims = workers::sims(ports[0], &["messaging"]).await;
    let mut spec = DeploymentSpec::new(&db.url, &sims.base);
    spec.project = eager_flagship(dir.path());
    spec.remote = vec![("messaging".to_owned(), vec!["worker-1".to_owned()])];
    (spec.access, spec.files) = access_with_worker();
    let mut runtimes = Vec::new();
    for i in 0..2 {
        let place = dir.path().join(format!("p{i}"));
        std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
        let one = DeploymentSpec {
            listen: format!("127.0.0.1:{}", ports[i]),
            grpc: Some(format!("127.0.0.1:{}", ports[2 + i])),
            ..spec.clone()
        };
        let runtime = one.write(&place);
        if let Some(limits) = deployment {
            add_field(&runtime, "messaging", &format!("limits: {limits}"));
        }
        runtimes.push(runtime);
    }
    let processes = serve_each(&runtimes, &urls, dir.path()).await;
    fault(&sims.base, "messaging", json!({"operation": NOTICE, "fault": "timeout", "delaySeconds": 1, "count": 1000}))
        .await;
    let mut polling = Vec::new();
    for i in 0..2 {
        let grpc = format!("http://127.0.0.1:{}", ports[2 + i]);
        let config =
            workers::write_worker(&dir.path().join(format!("w{i}")), &grpc, &sims.base, &["messaging"], WORKER_TOKEN);
        if let Some(limits) = worker {
            add_field(&config, "messaging", &format!("limits: {limits}"));
        }
        polling.push(Process::worker(&config, &dir.path().join(format!("w{i}.log"))));
    }

    let revision = package_of(&spec.project).revision;
    for n in 0..RUNS {
        admit(&urls[n % 2], &revision, &format!("limited-{n}")).await;
    }
    let client = authorized_client(Duration::from_secs(30));
    let logs: Vec<_> = processes.iter().chain(&polling).map(|p| p.log.clone()).collect();
    until_finished(&client, &urls[0], RUNS, &logs).await;
    let notices: Vec<(u64, u64)> = sims
        .sims
        .messaging
        .effects()
        .iter()
        .filter(|e| e.idempotency_key.is_some())
        .map(|e| (e.requests, e.effects))
        .collect();
    assert_eq!(notices, vec![(1, 1); RUNS], "each notice sent once");
    sims.sims.messaging.load().max_in_flight
}

#[test]
fn a_remote_connections_concurrency_holds_across_two_processes_and_their_workers() {
    on_runtime(async {
        let most = most_in_flight(Some("{concurrency: 4}"), None).await;
        assert!(most <= 4, "at most 4 in flight at messaging, seen {most}");
    });
}

#[test]
fn a_workers_own_limit_counts_the_whole_deployment() {
    on_runtime(async {
        let most = most_in_flight(None, Some("{concurrency: 3}")).await;
        assert!(most <= 3, "at most 3 in flight at messaging, seen {most}");
    });
}

#[test]
fn a_remote_product_down_gets_only_probes_from_the_workers() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let ports = free_ports::<2>();
        let sims = workers::sims(ports[0], &["messaging"]).await;
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.listen = format!("127.0.0.1:{}", ports[0]);
        spec.grpc = Some(format!("127.0.0.1:{}", ports[1]));
        spec.project = eager_flagship(dir.path());
        spec.remote = vec![("messaging".to_owned(), vec!["worker-1".to_owned()])];
        (spec.access, spec.files) = access_with_worker();
        let place = dir.path().join("coordinator");
        std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
        let runtime = spec.write(&place);
        add_field(&runtime, "messaging", "breaker: {openAfterFailures: 2, probeEverySeconds: 2}");
        let serve = serve_each(&[runtime], &[spec.url()], &place).await;
        fault(&sims.base, "messaging", json!({"operation": NOTICE, "fault": "unavailable", "count": 1_000_000})).await;
        let grpc = format!("http://127.0.0.1:{}", ports[1]);
        let config = workers::write_worker(&dir.path().join("w"), &grpc, &sims.base, &["messaging"], WORKER_TOKEN);
        let worker = Process::worker(&config, &dir.path().join("w.log"));
        let revision = package_of(&spec.project).revision;
        let url = spec.url();

        let first = admit(&url, &revision, "down-1").await;
        let open = until(&url, |c| c["state"] == "open").await;
        let opened_at = open["breaker"]["since"].as_i64().unwrap_or_default();
        let second = admit(&url, &revision, "down-2").await;
        let arrivals = || sims.sims.messaging.load().arrivals;
        let before = arrivals().len();
        let deadline = tokio::time::Instant::now() + crate::support::GUARD;
        while arrivals().len() < before + 2 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no probes:\n{}",
                crate::support::process::read(&worker.log)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let after_open: Vec<u64> =
            arrivals().into_iter().filter(|&at| i64::try_from(at).unwrap_or(0) > opened_at).collect();
        for pair in after_open.windows(2) {
            assert!(pair[1] >= pair[0] + 2_000, "probes closer than 2 s apart: {after_open:?}");
        }

        let cleared = reqwest::Client::new().delete(format!("{}/sim/messaging/v1/faults", sims.base)).send().await;
        assert!(cleared.is_ok_and(|r| r.status().is_success()));
        for run in [&first, &second] {
            until_state(&url, run, "finished").await;
        }
        assert_eq!(until(&url, |c| c["state"] == "closed").await["state"], "closed");
        drop(serve);
    });
}

/// Polls `GET /v1/connections` at `url` until messaging is as `wanted` says; it.
async fn until(url: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + crate::support::GUARD;
    loop {
        let (status, listed) = get(&format!("{url}/v1/connections")).await;
        assert_eq!(status, 200, "{listed}");
        let messaging = listed["connections"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "messaging"));
        if let Some(connection) = messaging.filter(|c| wanted(c)) {
            return connection.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "messaging never became as wanted: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
