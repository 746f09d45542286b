//! Remote workers as they are deployed: `coordinator serve` and `coordinator
//! worker` as child processes on one PostgreSQL, the simulators as the
//! products, each remote product reachable only with the worker's own client
//! at the token endpoint.
//!
//! - A worker carries the flagship to `notice-sent`, and the coordinator
//!   holds no credential of the connections it serves.
//! - A worker SIGKILLed after `AcquireTaskLease`, while the product holds
//!   its answer back: the lease runs out, the run goes to `attention` with the
//!   effect unknown, and the product saw one request.
//! - A worker SIGKILLed before acquiring (stopped while its long poll waits,
//!   so the notice is offered to it and never acquired): another worker takes
//!   the task once the assignment window lapses, and the run finishes without
//!   `attention`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use coordinator_proto::v1::PollTasksRequest;
use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, SimServer, eager_flagship, free_ports, package_of};
use crate::support::process::{self, Process};
use crate::support::workers::{self, WORKER_CLIENT, WORKER_TOKEN, access_with_worker};
use crate::support::{admit, fault, inspection_until, journal, metrics, on_runtime, pg, tempdir};

/// A coordinator serving `remote` through workers, its HTTP and gRPC addresses.
struct Deployed {
    serve: Process,
    url: String,
    grpc: String,
    runtime: PathBuf,
    revision: String,
}

/// Writes the deployment (the eager flagship, `remote` connections; TLS on
/// gRPC with the certificates in `tls` when given) and starts `serve` on it.
async fn deploy(
    dir: &Path,
    db_url: &str,
    sims: &SimServer,
    ports: [u16; 2],
    remote: &[&str],
    tls: Option<&Path>,
) -> Deployed {
    let place = dir.join("coordinator");
    std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
    let mut spec = DeploymentSpec::new(db_url, &sims.base);
    spec.listen = format!("127.0.0.1:{}", ports[0]);
    spec.grpc = Some(format!("127.0.0.1:{}", ports[1]));
    spec.project = eager_flagship(dir);
    spec.remote = remote.iter().map(|c| ((*c).to_owned(), vec!["worker-1".to_owned()])).collect();
    (spec.access, spec.files) = access_with_worker();
    spec.grpc_tls = tls.map(|certs| {
        let file = |name: &str| format!("\"file:{}\"", certs.join(name).display());
        (file("server.pem"), file("server.key"))
    });
    let serve = process::served(&spec, &place, "serve.log").await;
    let (url, runtime) = (spec.url(), place.join("runtime.yaml"));
    let revision = package_of(&spec.project).revision;
    let scheme = if tls.is_some() { "https" } else { "http" };
    Deployed { serve, url, grpc: format!("{scheme}://127.0.0.1:{}", ports[1]), runtime, revision }
}

/// A database, a directory, the simulators and the coordinator serving `remote` through workers.
struct Setup {
    _db: pg::PgDatabase,
    dir: tempfile::TempDir,
    sims: SimServer,
    deployed: Deployed,
    tls: bool,
}

async fn setup(remote: &[&str]) -> Setup {
    setup_with(remote, false).await
}

/// [`setup`], with TLS on gRPC (a private CA) when `tls`.
async fn setup_with(remote: &[&str], tls: bool) -> Setup {
    let db = pg::database().await;
    let dir = tempdir();
    let certs = dir.path().join("certs");
    if tls {
        workers::make_certificates(&certs);
    }
    let ports = free_ports::<2>();
    let sims = workers::sims(ports[0], remote).await;
    let deployed = deploy(dir.path(), &db.url, &sims, ports, remote, tls.then_some(certs.as_path())).await;
    Setup { _db: db, dir, sims, deployed, tls }
}

impl Setup {
    /// A worker process serving `connections` with the worker's token.
    fn worker(&self, connections: &[&str], log: &str) -> Process {
        self.worker_with(connections, log, WORKER_TOKEN)
    }

    /// A worker process serving `connections` with `token`.
    fn worker_with(&self, connections: &[&str], log: &str, token: &str) -> Process {
        let ca = self.dir.path().join("certs/ca.pem");
        let ca = self.tls.then_some(ca.as_path());
        let (at, grpc, sims) = (self.dir.path().join("worker"), &self.deployed.grpc, &self.sims.base);
        let config = workers::write_worker_with(&at, grpc, ca, sims, connections, token);
        Process::worker(&config, &self.dir.path().join(log))
    }
}

/// The messaging simulator's (requests, effects) for notice keys.
fn notices(sims: &SimServer) -> Vec<(u64, u64)> {
    let effects = sims.sims.messaging.effects();
    effects.iter().filter(|e| e.idempotency_key.is_some()).map(|e| (e.requests, e.effects)).collect()
}

#[test]
fn a_remote_worker_carries_the_flagship_to_notice_sent_and_the_coordinator_holds_no_credential_of_it() {
    on_runtime(async {
        let remote = ["casework", "messaging"];
        let setup = setup(&remote).await;
        let (sims, deployed) = (&setup.sims, &setup.deployed);
        let worker = setup.worker(&remote, "worker.log");

        let run = admit(&deployed.url, &deployed.revision, "remote-1").await;
        let done = inspection_until(&deployed.url, &run, "notice-sent", |v| v["state"] == "finished").await;
        let logs =
            || format!("serve:\n{}\nworker:\n{}", process::read(&deployed.serve.log), process::read(&worker.log));
        assert_eq!(done["outcome"], "notice-sent", "{done}\n{}", logs());

        // Every effect of the remote products was made by the worker's client: the coordinator's may not use them.
        assert_eq!(notices(sims), vec![(1, 1)], "one notice, sent once");
        let reviews: Vec<_> =
            sims.sims.casework.effects().into_iter().filter(|e| e.idempotency_key.is_some()).collect();
        assert!(reviews.iter().all(|e| e.requests == 1 && e.effects == 1), "{reviews:?}");
        let runtime = std::fs::read_to_string(&deployed.runtime).unwrap_or_default();
        assert!(!runtime.contains(WORKER_CLIENT.0) && !runtime.contains("/sim/messaging"), "{runtime}");
        assert!(!runtime.contains("/sim/casework"), "no remote product's address in runtime.yaml");

        // Each applied answer is journaled as the worker's report.
        let reports: Vec<Value> =
            journal(&deployed.url, Some(&run)).await.into_iter().filter(|e| e["kind"] == "report").collect();
        assert!(reports.iter().any(|e| e["step"] == "send-notice" && e["actor"] == "worker-1"), "{reports:?}");
        assert!(reports.iter().all(|e| !e["detail"].as_str().unwrap_or_default().starts_with("not applied")));

        // The dispatch delay is measured on both paths.
        let metrics = metrics(&deployed.url).await;
        let remote_requests = metrics.lines().any(|l| {
            l.starts_with("coordinator_product_request_seconds_count") && l.contains("connection=\"messaging\"")
        });
        assert!(remote_requests, "the worker's requests are in the request metrics:\n{metrics}");
        for path in ["in-process", "remote"] {
            let line = format!("coordinator_dispatch_delay_seconds_count{{path=\"{path}\"}}");
            assert!(metrics.contains(&line), "{line} missing:\n{metrics}");
        }
    });
}

#[test]
fn a_worker_killed_after_acquiring_leaves_the_effect_unknown_and_nothing_is_sent_again() {
    on_runtime(async {
        let setup = setup(&["messaging"]).await;
        let (sims, deployed) = (&setup.sims, &setup.deployed);
        // The product acts at once and holds its answer back: the worker is killed while it waits.
        fault(
            &sims.base,
            "messaging",
            json!({"operation": "submit-message/v1", "fault": "timeout", "delaySeconds": 120}),
        )
        .await;
        let mut worker = setup.worker(&["messaging"], "worker.log");

        let run = admit(&deployed.url, &deployed.revision, "killed-1").await;
        let mut seen = false;
        for _ in 0..1200 {
            if notices(sims).first().is_some_and(|n| n.0 == 1) {
                seen = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(seen, "the notice never reached the product:\n{}", process::read(&worker.log));
        worker.kill();

        // The lease (2 × (2 s + 5 s) + 10 s) runs out; the attempt is not sent again.
        let view = inspection_until(&deployed.url, &run, "attention", |v| v["state"] == "attention").await;
        let step = view["steps"].as_array().and_then(|s| s.iter().find(|s| s["step"] == "send-notice")).cloned();
        assert_eq!(step.as_ref().map(|s| s["call"]["effect"].clone()), Some(json!("unknown")), "{view}");
        // A new worker does not resend it either.
        let _second = setup.worker(&["messaging"], "worker-2.log");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(notices(sims), vec![(1, 1)], "the product saw one request");
    });
}

#[test]
fn a_worker_killed_before_acquiring_lets_another_worker_finish_the_run() {
    on_runtime(async {
        let setup = setup(&["messaging"]).await;
        let (sims, deployed) = (&setup.sims, &setup.deployed);
        // The first worker is stopped while its long poll waits in the coordinator: the notice is
        // offered to it and the answer sits unread, so it is killed having taken the offer and never acquired it.
        let mut first = setup.worker(&["messaging"], "worker-1.log");
        for _ in 0..600 {
            if process::read(&first.log).contains("worker started") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        first.signal("STOP");
        let run = admit(&deployed.url, &deployed.revision, "lapsed-1").await;
        let pool = sqlx::PgPool::connect(&setup._db.url).await.unwrap_or_else(|e| panic!("{e}"));
        let mut offered = false;
        for _ in 0..600 {
            let count: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM outbox WHERE lane LIKE 'messaging/%' AND lease_owner LIKE 'offer:%'",
            )
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
            if count > 0 {
                offered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(offered, "the notice was never offered to the stopped worker");
        first.kill();
        pool.close().await;

        let second = setup.worker(&["messaging"], "worker-2.log");
        let done = inspection_until(&deployed.url, &run, "notice-sent", |v| v["state"] != "running").await;
        assert_eq!(done["state"], "finished", "{done}\n{}", process::read(&second.log));
        assert_eq!(done["outcome"], "notice-sent");
        assert_eq!(notices(sims), vec![(1, 1)], "sent once, by the second worker");
        let settled =
            journal(&deployed.url, Some(&run)).await.into_iter().any(|e| e["kind"] == "report" && e["actor"].is_null());
        assert!(!settled, "nothing was settled as unknown");
    });
}

#[test]
fn a_worker_reaches_the_coordinator_over_tls_with_a_private_ca() {
    on_runtime(async {
        let setup = setup_with(&["messaging"], true).await;
        let (sims, deployed) = (&setup.sims, &setup.deployed);
        assert!(deployed.grpc.starts_with("https://"));
        let worker = setup.worker(&["messaging"], "worker.log");
        let run = admit(&deployed.url, &deployed.revision, "tls-1").await;
        let done = inspection_until(&deployed.url, &run, "notice-sent", |v| v["state"] != "running").await;
        assert_eq!(done["outcome"], "notice-sent", "{done}\n{}", process::read(&worker.log));
        assert_eq!(notices(sims), vec![(1, 1)]);
        // Plain HTTP/2 is not served on the TLS listener.
        let plain = deployed.grpc.replacen("https://", "http://", 1);
        let endpoint = tonic::transport::Endpoint::from_shared(plain).unwrap_or_else(|e| panic!("{e}"));
        let refused = match endpoint.connect().await {
            Err(_) => true,
            Ok(channel) => {
                let mut client = coordinator_proto::v1::task_service_client::TaskServiceClient::new(channel);
                let poll = PollTasksRequest {
                    owner: "p".into(),
                    connections: Vec::new(),
                    max_tasks: 1,
                    wait_ms: 0,
                    limits: Vec::new(),
                };
                client.poll_tasks(poll).await.is_err()
            }
        };
        assert!(refused, "a plaintext call was answered on the TLS listener");
    });
}

#[test]
fn a_worker_whose_token_the_coordinator_refuses_stops_with_exit_code_1() {
    on_runtime(async {
        let setup = setup(&["messaging"]).await;
        let mut worker = setup.worker_with(&["messaging"], "worker.log", "not-the-token");
        assert_eq!(worker.exited().await.code(), Some(1), "{}", process::read(&worker.log));
        let log = process::read(&worker.log);
        assert!(log.contains("Unauthenticated") && !log.contains("not-the-token"), "{log}");
    });
}
