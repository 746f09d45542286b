//! The coordinator's gRPC API for remote workers, driven by a raw client so
//! that what a well-behaved worker never does can be done: reports late,
//! twice, malformed; acquiring a lapsed offer; calls without a valid token;
//! a report while the database is down. Also health (following the
//! database), reflection and `coordinator worker --check`.

use std::path::Path;
use std::time::Duration;

use coordinator::process::serve::{Mode, Service};
use coordinator_proto::v1::{
    AcquireTaskLeaseRequest, ConnectionLimits, PollTasksRequest, ProductHealth, RenewTaskLeaseRequest,
    ReportTaskResultRequest, Task,
};
use serde_json::{Value, json};
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::support::cluster::Clusters;
use crate::support::deploy::{SimServer, deployment, eager_flagship, free_port, migrated, start};
use crate::support::workers::{Raw, WORKER_TOKEN, access_with_worker, raw_client, write_worker};
use crate::support::{TOKEN, admit, inspection_until, journal, on_runtime, pg, tempdir};

/// Migrates `db_url` and starts `serve` on a deployment whose `messaging` is
/// remote, with simulators whose casework decides at once.
async fn start_remote(dir: &Path, db_url: &str) -> (Service, String, SimServer) {
    let (mut spec, sims) = deployment(db_url, Some(Duration::from_millis(50)), false).await;
    let grpc = format!("127.0.0.1:{}", free_port());
    spec.grpc = Some(grpc.clone());
    spec.project = eager_flagship(dir);
    spec.remote = vec![("messaging".to_owned(), vec!["worker-1".to_owned()])];
    (spec.access, spec.files) = access_with_worker();
    (migrated(&spec.write(dir)).await, format!("http://{grpc}"), sims)
}

fn poll(owner: &str) -> PollTasksRequest {
    PollTasksRequest {
        owner: owner.into(),
        connections: vec!["messaging".into()],
        max_tasks: 1,
        wait_ms: 30_000,
        limits: Vec::new(),
    }
}

/// Polls as `owner` until the notice of `run` is offered.
async fn offered(client: &mut Raw, owner: &str, run: &str) -> Task {
    for _ in 0..40 {
        let tasks = client.poll_tasks(poll(owner)).await.unwrap_or_else(|e| panic!("poll: {e}")).into_inner().tasks;
        if let Some(task) = tasks.into_iter().find(|t| t.run_id == run) {
            return task;
        }
    }
    panic!("the notice of {run} was never offered");
}

fn acquire(task: &Task, owner: &str, ttl_seconds: i64) -> AcquireTaskLeaseRequest {
    AcquireTaskLeaseRequest {
        task_id: task.task_id.clone(),
        owner: owner.into(),
        ttl_seconds,
        run_id: task.run_id.clone(),
    }
}

fn report(task: &Task, owner: &str, attempt: i64, answer: &Value) -> ReportTaskResultRequest {
    ReportTaskResultRequest {
        task_id: task.task_id.clone(),
        run_id: task.run_id.clone(),
        step: task.step.clone(),
        attempt,
        owner: owner.into(),
        answer: serde_json::to_vec(answer).unwrap_or_default(),
        reason: "test".into(),
        elapsed_ms: 3,
        health: ProductHealth::Healthy.into(),
        retry_after_ms: 0,
    }
}

/// The `report` entries of a run's journal.
async fn reports(url: &str, run: &str) -> Vec<Value> {
    journal(url, Some(run)).await.into_iter().filter(|e| e["kind"] == "report").collect()
}

fn code<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> Code {
    match result {
        Ok(answer) => panic!("expected a refusal, got {answer:?}"),
        Err(status) => status.code(),
    }
}

async fn health(address: &str) -> ServingStatus {
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(address.to_owned()) else {
        return ServingStatus::Unknown;
    };
    let Ok(channel) = endpoint.connect().await else { return ServingStatus::Unknown };
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest { service: coordinator_proto::SERVICE_NAME.into() };
    match client.check(request).await {
        Ok(answer) => ServingStatus::try_from(answer.into_inner().status).unwrap_or(ServingStatus::Unknown),
        Err(_) => ServingStatus::Unknown,
    }
}

async fn health_becomes(address: &str, wanted: ServingStatus) {
    for _ in 0..600 {
        if health(address).await == wanted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gRPC health never became {wanted:?}");
}

#[test]
fn stale_repeated_and_malformed_reports_and_refused_callers() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let (service, grpc, sims) = start_remote(dir.path(), &db.url).await;
        let url = service.url();
        health_becomes(&grpc, ServingStatus::Serving).await;

        // Who may call.
        assert_eq!(code(raw_client(&grpc, None).await.poll_tasks(poll("w")).await), Code::Unauthenticated);
        assert_eq!(
            code(raw_client(&grpc, Some("not-a-token")).await.poll_tasks(poll("w")).await),
            Code::Unauthenticated
        );
        assert_eq!(code(raw_client(&grpc, Some(TOKEN)).await.poll_tasks(poll("w")).await), Code::PermissionDenied);
        let mut client = raw_client(&grpc, Some(WORKER_TOKEN)).await;
        let registry = PollTasksRequest { connections: vec!["registry".into()], ..poll("w") };
        assert_eq!(code(client.poll_tasks(registry).await), Code::NotFound, "registry is not remote");
        assert_eq!(
            code(client.poll_tasks(PollTasksRequest { max_tasks: 0, ..poll("w") }).await),
            Code::InvalidArgument
        );
        // A worker's own limits: of a connection it polls, once, with a usable rate.
        let limits = |connection: &str, rate_per_second: f64| ConnectionLimits {
            connection: connection.into(),
            concurrency: 2,
            rate_per_second,
            burst: 0,
        };
        for bad in [
            vec![limits("casework", 1.0)],
            vec![limits("messaging", -1.0)],
            vec![limits("messaging", f64::NAN)],
            vec![limits("messaging", 1.0), limits("messaging", 2.0)],
        ] {
            let refused = client.poll_tasks(PollTasksRequest { limits: bad.clone(), wait_ms: 0, ..poll("w") }).await;
            assert_eq!(code(refused), Code::InvalidArgument, "{bad:?}");
        }
        let fine = PollTasksRequest { limits: vec![limits("messaging", 0.0)], wait_ms: 0, ..poll("w") };
        assert!(client.poll_tasks(fine).await.is_ok(), "0: no rate limit");

        // A late report of an attempt whose lease ran out and was settled: acknowledged, ignored, journaled.
        let late = admit(&url, &service.revision, "late-1").await;
        let task = offered(&mut client, "slow", &late).await;
        let attempt = client.acquire_task_lease(acquire(&task, "slow", 1)).await.unwrap_or_else(|e| panic!("{e}"));
        let attempt = attempt.into_inner().attempt;
        let view = inspection_until(&url, &late, "attention", |v| v["state"] == "attention").await;
        assert_eq!(view["attention"]["reason"], "unknown-effect", "{view}");
        let uncertain = json!({"type": "uncertain"});
        let answer = client.report_task_result(report(&task, "slow", attempt, &uncertain)).await;
        assert_eq!(
            answer.map(|a| a.into_inner().accepted).ok(),
            Some(false),
            "a stale report is acknowledged, not applied"
        );
        let journaled = reports(&url, &late).await;
        let stale: Vec<&Value> =
            journaled.iter().filter(|e| e["detail"].as_str().is_some_and(|d| d.starts_with("not applied"))).collect();
        assert_eq!(stale.len(), 1, "{journaled:?}");
        assert_eq!(stale[0]["actor"], "worker-1");
        assert_eq!(sims.sims.messaging.effects().len(), 0, "the raw worker sent nothing");

        // The same report twice: the same answer, applied once.
        let twice = admit(&url, &service.revision, "twice-1").await;
        let task = offered(&mut client, "steady", &twice).await;
        let attempt = client.acquire_task_lease(acquire(&task, "steady", 60)).await.unwrap_or_else(|e| panic!("{e}"));
        let attempt = attempt.into_inner().attempt;
        let renewed = RenewTaskLeaseRequest {
            task_id: task.task_id.clone(),
            owner: "steady".into(),
            ttl_seconds: 60,
            run_id: task.run_id.clone(),
            attempt,
        };
        let by_other = RenewTaskLeaseRequest { owner: "other".into(), ..renewed.clone() };
        assert_eq!(client.renew_task_lease(renewed).await.map(|r| r.into_inner().renewed).ok(), Some(true));
        assert_eq!(client.renew_task_lease(by_other).await.map(|r| r.into_inner().renewed).ok(), Some(false));
        let malformed = ReportTaskResultRequest {
            answer: b"{\"type\": 7}".to_vec(),
            ..report(&task, "steady", attempt, &uncertain)
        };
        assert_eq!(code(client.report_task_result(malformed).await), Code::InvalidArgument);
        for _ in 0..2 {
            let answer = client.report_task_result(report(&task, "steady", attempt, &uncertain)).await;
            assert_eq!(answer.map(|a| a.into_inner().accepted).ok(), Some(true));
        }
        let view = inspection_until(&url, &twice, "attention", |v| v["state"] == "attention").await;
        assert_eq!(view["attention"]["step"], "send-notice");
        let journaled = reports(&url, &twice).await;
        assert_eq!(journaled.len(), 1, "one report applied: {journaled:?}");

        // An offer not acquired in its window lapses: acquiring it then sends nothing.
        let lapsed = admit(&url, &service.revision, "lapsed-1").await;
        let task = offered(&mut client, "late-acquirer", &lapsed).await;
        tokio::time::sleep(coordinator::dispatch::remote::OFFER_WINDOW + Duration::from_secs(1)).await;
        assert_eq!(
            code(client.acquire_task_lease(acquire(&task, "late-acquirer", 60)).await),
            Code::FailedPrecondition
        );
        let bogus = AcquireTaskLeaseRequest { task_id: "nothing".into(), ..acquire(&task, "late-acquirer", 60) };
        assert_eq!(code(client.acquire_task_lease(bogus).await), Code::InvalidArgument);

        // Reflection names the service.
        let channel = tonic::transport::Endpoint::from_shared(grpc.clone()).unwrap_or_else(|e| panic!("{e}"));
        let channel = channel.connect().await.unwrap_or_else(|e| panic!("{e}"));
        let mut reflection = tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient::new(channel);
        let list = tonic_reflection::pb::v1::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            )),
        };
        let mut answers = reflection
            .server_reflection_info(tokio_stream::once(list))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_inner();
        let first = answers.message().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(format!("{first:?}").contains(coordinator_proto::SERVICE_NAME), "{first:?}");

        // Recovery-only dispatches nothing, not even to a worker.
        drop(service);
        let recovery = start(&dir.path().join("runtime.yaml"), Mode::RecoveryOnly).await;
        let mut client = raw_client(&grpc, Some(WORKER_TOKEN)).await;
        assert_eq!(code(client.poll_tasks(PollTasksRequest { wait_ms: 0, ..poll("w") }).await), Code::Unavailable);
        drop(recovery);
    });
}

#[test]
fn a_report_while_the_database_is_down_is_unavailable_and_applies_once_when_sent_again() {
    on_runtime(async {
        let clusters = Clusters::new();
        let primary = clusters.primary("primary");
        let dir = tempdir();
        let (service, grpc, _sims) = start_remote(dir.path(), &primary.url()).await;
        let url = service.url();
        let mut client = raw_client(&grpc, Some(WORKER_TOKEN)).await;
        let run = admit(&url, &service.revision, "down-1").await;
        let task = offered(&mut client, "w", &run).await;
        let attempt = client.acquire_task_lease(acquire(&task, "w", 120)).await.unwrap_or_else(|e| panic!("{e}"));
        let attempt = attempt.into_inner().attempt;
        health_becomes(&grpc, ServingStatus::Serving).await;

        clusters.stop(&primary, "fast");
        health_becomes(&grpc, ServingStatus::NotServing).await;
        let uncertain = json!({"type": "uncertain"});
        let answer = client.report_task_result(report(&task, "w", attempt, &uncertain)).await;
        assert_eq!(code(answer), Code::Unavailable, "the database is down: the worker must send it again");

        clusters.start(&primary);
        health_becomes(&grpc, ServingStatus::Serving).await;
        let mut accepted = None;
        for _ in 0..100 {
            match client.report_task_result(report(&task, "w", attempt, &uncertain)).await {
                Ok(answer) => {
                    accepted = Some(answer.into_inner().accepted);
                    break;
                }
                Err(status) if status.code() == Code::Unavailable => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(status) => panic!("{status}"),
            }
        }
        assert_eq!(accepted, Some(true), "the report sent again applies");
        let again = client.report_task_result(report(&task, "w", attempt, &uncertain)).await;
        assert_eq!(again.map(|a| a.into_inner().accepted).ok(), Some(true), "and again: the same answer");
        inspection_until(&url, &run, "attention", |v| v["state"] == "attention").await;
        assert_eq!(reports(&url, &run).await.len(), 1, "exactly one result applied");
        drop(service);
    });
}

#[test]
fn worker_check_accepts_a_usable_file_and_refuses_a_broken_one() {
    let dir = tempdir();
    let good =
        write_worker(&dir.path().join("good"), "http://127.0.0.1:7401", "http://127.0.0.1:9", &["messaging"], "t");
    let check = |file: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["worker", "--log-format", "json", "--check", "--config"])
            .arg(file)
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let ok = check(&good);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let text = std::fs::read_to_string(&good).unwrap_or_default();
    let broken = dir.path().join("good/broken.yaml");
    std::fs::write(&broken, text.replace("concurrency: 8", "concurrency: 8\nworkers: [me]"))
        .unwrap_or_else(|e| panic!("{e}"));
    let refused = check(&broken);
    assert_eq!(refused.status.code(), Some(1));
    let output = String::from_utf8_lossy(&refused.stderr);
    assert!(output.contains("schema.unknown-field") && output.contains("workers"), "{output}");
    // A reference that does not resolve is refused by --check too.
    std::fs::remove_file(dir.path().join("good/client-secret")).unwrap_or_else(|e| panic!("{e}"));
    let unresolved = check(&good);
    assert_eq!(unresolved.status.code(), Some(3), "a secret that cannot be read now: unavailable, as for serve");
    assert!(String::from_utf8_lossy(&unresolved.stderr).contains("clientSecret"));
}
