//! A routine stop creates no operator work (docs/reference/service.md#stopping): SIGTERM drains a
//! `coordinator serve` process — nothing more admitted or claimed, every
//! product request already sent answered and committed, every claim not yet
//! acted on given back — and it exits 0. SIGKILL in the same place is a crash:
//! the mutations in flight become uncertain and their runs need an operator.
//! The two PostgreSQL tests differ only in the signal, so together they show
//! the difference. Products answer slowly (every operation ~2 s, a `timeout`
//! fault shorter than the request timeout), so many requests are in flight
//! when the signal lands; the simulators count the answers they hold back, so
//! the signal is sent while mutations are provably in flight. In the SIGKILL
//! test the second process starts only after the kill, and the test waits for
//! Casework mutations (no receipt lookup), so the uncertain effects it expects
//! were provably sent by the killed process.
//!
//! The in-process test checks what a caller sees during the drain:
//! `/readyz` 503 `draining`, admissions `503 service.draining` with
//! `Retry-After`, `/healthz` still 200, and the request in flight committed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use coordinator::Drained;
use serde_json::{Value, json};

use crate::support::deploy::{
    DeploymentSpec, SimServer, deployment, eager_flagship, free_port, free_ports, package_of, sims, states,
};
use crate::support::effects::sent_once_per_key;
use crate::support::process::{self, DevArgs, Process, json_lines, read, ready};
use crate::support::stack::{Stack, StackOptions};
use crate::support::{GUARD, TOKEN, admission, authorized_client, fault, on_runtime, pg, tempdir};

/// Runs admitted before the signal.
const RUNS: usize = 200;
/// How long every product operation takes to answer, seconds.
const SLOW_SECONDS: f64 = 2.0;
/// Mutations whose answers must be held back when the signal is sent.
const MUTATIONS_IN_FLIGHT: usize = 20;

/// Two `coordinator serve` processes on one PostgreSQL database, slow products, 200 runs admitted.
struct Pair {
    db: pg::PgDatabase,
    sims: SimServer,
    dir: tempfile::TempDir,
    urls: Vec<String>,
    logs: Vec<PathBuf>,
    runtimes: Vec<PathBuf>,
    first: Process,
    second: Option<Process>,
    client: reqwest::Client,
}

/// When the second process starts.
#[derive(Clone, Copy, PartialEq)]
enum Second {
    /// Beside the first, before the runs are admitted.
    Beside,
    /// Only when the test calls [`Pair::start_second`]: every request in
    /// flight before then was sent by the first process.
    Later,
}

impl Pair {
    async fn start(when: Second) -> Pair {
        let db = pg::database().await;
        let dir = tempdir();
        let ports = free_ports::<2>();
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        // Decisions are announced to the second process, which outlives the first.
        let sims = sims(Some(Duration::from_millis(100)), Some(&urls[1])).await;
        slow_down(&sims).await;
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.project = eager_flagship(dir.path());
        let runtimes = spec.write_each(dir.path(), &ports);
        process::migrate(&runtimes[0]);
        let logs: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("p{i}.log"))).collect();
        let first = Process::serve(&runtimes[0], &logs[0]);
        let client = authorized_client(Duration::from_secs(30));
        ready(&urls[0], &logs[0]).await;
        let mut pair = Pair { db, sims, dir, urls, logs, runtimes, first, second: None, client };
        if when == Second::Beside {
            pair.start_second().await;
        }
        pair.admit_all(&package_of(&spec.project).revision).await;
        pair
    }

    /// Starts the second process and waits until it is ready.
    async fn start_second(&mut self) {
        self.second = Some(Process::serve(&self.runtimes[1], &self.logs[1]));
        ready(&self.urls[1], &self.logs[1]).await;
    }

    /// Admits [`RUNS`] runs through the first process.
    async fn admit_all(&self, revision: &str) {
        let mut admissions = tokio::task::JoinSet::new();
        for i in 0..RUNS {
            let (client, url, body) =
                (self.client.clone(), self.urls[0].clone(), admission(revision, &format!("drain-{i}")));
            admissions.spawn(async move {
                let r = client.post(format!("{url}/v1/runs")).json(&body).send().await;
                r.map(|r| r.status().as_u16()).unwrap_or_else(|e| panic!("admission {i}: {e}"))
            });
        }
        while let Some(status) = admissions.join_next().await {
            assert_eq!(status.unwrap_or_else(|e| panic!("{e}")), 201);
        }
    }

    /// Waits until at least [`MUTATIONS_IN_FLIGHT`] mutations were performed and their answers are held back.
    async fn mutations_in_flight(&self) {
        let held = || self.sims.sims.casework.answers_held() + self.sims.sims.messaging.answers_held();
        self.until_held(held).await;
    }

    /// Waits until at least [`MUTATIONS_IN_FLIGHT`] Casework mutations were
    /// performed and their answers are held back. Casework offers no receipt
    /// lookup, so each of them stays uncertain if its sender dies; a Messaging
    /// send may be settled by its receipt instead.
    async fn casework_mutations_in_flight(&self) {
        self.until_held(|| self.sims.sims.casework.answers_held()).await;
    }

    async fn until_held(&self, held: impl Fn() -> usize) {
        let started = Instant::now();
        while held() < MUTATIONS_IN_FLIGHT {
            assert!(started.elapsed() < GUARD, "mutations never got in flight:\n{}", read(&self.logs[0]));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Rows (outbox and timers) whose lease `owner` still holds.
    async fn leased_by(&self, owner: &str) -> i64 {
        let pool = sqlx::PgPool::connect(&self.db.url).await.unwrap_or_else(|e| panic!("{e}"));
        let (n,): (i64,) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM outbox WHERE lease_owner = $1) + (SELECT count(*) FROM timers WHERE lease_owner = $1)",
        )
        .bind(owner)
        .fetch_one(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        pool.close().await;
        n
    }

    /// Waits until no run is `running` or `cancel-requested`; returns the runs by state (the second process's listing).
    async fn settled(&self) -> std::collections::BTreeMap<String, usize> {
        let started = Instant::now();
        loop {
            let states = states(&self.client, &self.urls[1]).await;
            let moving =
                states.get("running").copied().unwrap_or(0) + states.get("cancel-requested").copied().unwrap_or(0);
            if moving == 0 && states.values().sum::<usize>() == RUNS {
                return states;
            }
            assert!(started.elapsed() < GUARD, "runs still moving: {states:?}\n{}", read(&self.logs[1]));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Every operation of the flagship answers after [`SLOW_SECONDS`] (its effect happens at once).
async fn slow_down(sims: &SimServer) {
    for (product, operation) in
        [("breg", "read-record/v1"), ("casework", "submit-review-request/v1"), ("messaging", "submit-message/v1")]
    {
        let slow = json!({"operation": operation, "fault": "timeout", "delaySeconds": SLOW_SECONDS, "count": 100_000});
        fault(&sims.base, product, slow).await;
    }
}

#[test]
fn sigterm_drains_the_requests_in_flight_and_hands_no_run_to_an_operator() {
    on_runtime(async {
        let mut pair = Pair::start(Second::Beside).await;
        pair.mutations_in_flight().await;
        pair.first.signal("TERM");
        let status = pair.first.exited().await;
        let log = read(&pair.logs[0]);
        assert_eq!(status.code(), Some(0), "a drained process exits 0:\n{log}");
        let lines = json_lines(&pair.logs[0]);
        let drained = lines.iter().find(|l| {
            l["message"]
                == "draining: admitting and claiming nothing more; waiting for the product requests already sent"
        });
        assert!(
            drained.is_some_and(|l| l["in_flight"].as_u64().is_some_and(|n| n > 0)),
            "the drain began with requests in flight:\n{log}"
        );
        assert!(lines.iter().any(|l| l["message"] == "drained"), "{log}");
        // Nothing is left for a lease to run out on: what was sent was answered
        // and committed, what was claimed and not sent was given back.
        let owner = pair.first.serving().await["owner"].as_str().map(str::to_owned);
        let owner = owner.unwrap_or_else(|| panic!("no owner in the serving line:\n{log}"));
        assert_eq!(pair.leased_by(&owner).await, 0, "rows still leased by the stopped process");

        let states = pair.settled().await;
        assert_eq!(
            states.get("finished").copied(),
            Some(RUNS),
            "every run finishes, none needs an operator: {states:?}"
        );
        sent_once_per_key(&pair.sims.sims, RUNS);
        drop(pair.dir);
    });
}

/// A second signal stops the process at once (exit 4), and the line saying
/// so is written before it exits: log lines are written by a thread of their
/// own (`telemetry::logging`), and the process writes what is queued first.
#[test]
fn a_second_signal_stops_at_once_and_its_line_is_written() {
    on_runtime(async {
        let mut pair = Pair::start(Second::Later).await;
        pair.mutations_in_flight().await;
        pair.first.signal("TERM");
        let started = Instant::now();
        while !json_lines(&pair.logs[0]).iter().any(|l| l["signal"] == "SIGTERM") {
            assert!(started.elapsed() < GUARD, "the drain did not begin:\n{}", read(&pair.logs[0]));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pair.first.signal("INT");
        let status = pair.first.exited().await;
        let log = read(&pair.logs[0]);
        assert_eq!(status.code(), Some(4), "stopped undrained:\n{log}");
        let lines = json_lines(&pair.logs[0]);
        let stopped = lines.iter().find(|l| l["signal"] == "SIGINT");
        assert!(stopped.is_some_and(|l| l["level"] == "WARN"), "a line says why it stopped at once:\n{log}");
        drop(pair.dir);
    });
}

#[test]
fn sigkill_in_the_same_place_leaves_the_mutations_in_flight_uncertain() {
    on_runtime(async {
        // The second process starts after the kill, so the Casework mutations
        // held back were all sent by the killed process.
        let mut pair = Pair::start(Second::Later).await;
        pair.casework_mutations_in_flight().await;
        pair.first.signal("KILL");
        let _ = pair.first.exited().await;
        pair.start_second().await;
        // The second process takes the killed one's rows once their leases run out,
        // and does not send a mutation it cannot know the fate of.
        let states = pair.settled().await;
        let attention = states.get("attention").copied().unwrap_or(0);
        assert!(attention > 0, "a crash with mutations in flight leaves unknown effects: {states:?}");
        assert_eq!(
            attention + states.get("finished").copied().unwrap_or(0),
            RUNS,
            "every other run finishes: {states:?}"
        );
        // Still nothing was done twice, and no mutation was sent again.
        for (product, effects) in
            [("casework", pair.sims.sims.casework.effects()), ("messaging", pair.sims.sims.messaging.effects())]
        {
            let twice: Vec<_> = effects.iter().filter(|e| e.effects > 1).collect();
            assert!(twice.is_empty(), "{product}: acted more than once: {twice:?}");
            let resent: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some() && e.requests > 1).collect();
            assert!(resent.is_empty(), "{product}: a mutation was sent again after the crash: {resent:?}");
        }
        drop(pair.dir);
    });
}

#[test]
fn while_draining_admissions_are_refused_with_retry_after_and_readiness_fails() {
    on_runtime(async {
        let mut stack = Stack::start(StackOptions { auto_decide: None, ..StackOptions::default() }).await;
        stack
            .fault("breg", json!({"operation": "read-record/v1", "fault": "timeout", "delaySeconds": 3, "count": 1}))
            .await;
        let run = stack.admit("drain-1").await;
        let started = Instant::now();
        while stack.sims.sims.breg.answers_held() == 0 {
            assert!(started.elapsed() < GUARD, "the read never got in flight");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (url, revision) = (stack.url.clone(), stack.revision.clone());
        let client = reqwest::Client::new();
        let during = async {
            let ready = client.get(format!("{url}/readyz")).send().await.unwrap_or_else(|e| panic!("{e}"));
            let ready_status = ready.status().as_u16();
            let ready_body: Value = ready.json().await.unwrap_or(Value::Null);
            let health = client.get(format!("{url}/healthz")).send().await.map(|r| r.status().as_u16());
            let body = admission(&revision, "drain-2");
            let admission = client
                .post(format!("{url}/v1/runs"))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let retry_after = admission.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let admission_status = admission.status().as_u16();
            let refused: Value = admission.json().await.unwrap_or(Value::Null);
            (ready_status, ready_body, health.ok(), admission_status, retry_after, refused)
        };
        let (drained, (ready_status, ready_body, health, admission_status, retry_after, refused)) =
            tokio::join!(stack.service.drain(), during);
        assert_eq!((ready_status, ready_body), (503, json!({"status": "draining"})));
        assert_eq!(health, Some(200), "liveness is not readiness");
        assert_eq!(admission_status, 503, "{refused}");
        assert_eq!(refused["code"], "service.draining");
        assert_eq!(retry_after.as_deref(), Some("2"));
        assert_eq!(drained, Drained::Clean);
        // The read in flight was answered and committed: the run moved on, and no row is leased.
        let work = stack.service.engine.store().work_of(&run).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(work.outbox.iter().all(|(step, ..)| step != "read-application"), "{:?}", work.outbox);
        let (requests, _) = stack.count("breg", "read-record/v1", None).await;
        assert_eq!(requests, 1, "read once");
    });
}

#[test]
fn readiness_fails_while_the_database_is_unreachable() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let (spec, _sims) = deployment(&db.url, None, false).await;
        let _serve = process::served(&spec, dir.path(), "serve.log").await;
        let (url, client) = (spec.url(), reqwest::Client::new());
        let admin = sqlx::PgPool::connect("postgres://postgres@127.0.0.1:5432/postgres")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let drop = format!("DROP DATABASE {} WITH (FORCE)", db.name());
        sqlx::raw_sql(&drop).execute(&admin).await.unwrap_or_else(|e| panic!("{e}"));
        admin.close().await;
        let ready = client.get(format!("{url}/readyz")).send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ready.status().as_u16(), 503);
        let body: Value = ready.json().await.unwrap_or(Value::Null);
        assert_eq!(body, json!({"status": "database-unreachable"}));
        let health = client.get(format!("{url}/healthz")).send().await.map(|r| r.status().as_u16());
        assert_eq!(health.ok(), Some(200), "the process itself is alive");
    });
}

#[test]
fn coordinator_dev_drains_on_sigterm_and_exits_0() {
    on_runtime(async {
        let dir = tempdir();
        let args = DevArgs { listen: format!("127.0.0.1:{}", free_port()), data: None, token: None };
        let mut dev = Process::dev(&args, &dir.path().join("dev.log"));
        let log = dev.log.clone();
        ready(&format!("http://{}", args.listen), &log).await;
        dev.signal("TERM");
        let status = dev.exited().await;
        assert_eq!(status.code(), Some(0), "{}", read(&log));
        assert!(json_lines(&log).iter().any(|l| l["message"] == "drained"), "{}", read(&log));
    });
}

#[test]
fn connections_without_a_request_in_progress_hold_no_stop_back() {
    on_runtime(async {
        let mut stack = Stack::start(StackOptions { auto_decide: None, ..StackOptions::default() }).await;
        let address = stack.url.trim_start_matches("http://").to_owned();
        // A browser's preconnect: a connection that has sent nothing yet.
        let preconnect = tokio::net::TcpStream::connect(&address).await.unwrap_or_else(|e| panic!("{e}"));
        // A half-sent request: its head is not complete, so it has not reached the service.
        let mut partial = tokio::net::TcpStream::connect(&address).await.unwrap_or_else(|e| panic!("{e}"));
        tokio::io::AsyncWriteExt::write_all(&mut partial, b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // A keep-alive connection left idle after its request.
        let client = reqwest::Client::new();
        let health = client.get(format!("{}/healthz", stack.url)).send().await.map(|r| r.status().as_u16());
        assert_eq!(health.ok(), Some(200));
        assert_eq!(stack.service.drain().await, Drained::Clean);
        drop((preconnect, partial, client));
    });
}
