//! A routine stop creates no operator work (SPEC §7): SIGTERM drains a
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

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/stack.rs"]
mod stack;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coordinator::Drained;
use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, SimServer, eager_reviewed_notice, free_ports, sim_server};
use process::{Serve, json_lines, read, ready};
use serde_json::{Value, json};
use stack::{Stack, StackOptions};
use support::{authorized_client, on_runtime, sample_input};

/// Runs admitted before the signal.
const RUNS: usize = 200;
/// How long every product operation takes to answer, seconds.
const SLOW_SECONDS: f64 = 2.0;
/// Mutations whose answers must be held back when the signal is sent.
const MUTATIONS_IN_FLIGHT: usize = 20;
/// The failure guard of every wait (never a speed claim).
const GUARD: Duration = Duration::from_secs(300);

/// Two `coordinator serve` processes on one PostgreSQL database, slow products, 200 runs admitted.
struct Pair {
    db: pg::PgDatabase,
    sims: SimServer,
    dir: tempfile::TempDir,
    urls: Vec<String>,
    logs: Vec<PathBuf>,
    runtimes: Vec<PathBuf>,
    first: Serve,
    second: Option<Serve>,
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
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let ports = free_ports::<2>();
        // Decisions are announced to the second process, which outlives the first.
        let sims = sim_server(SimConfig {
            casework: CaseworkConfig {
                auto_decide_after: Some(Duration::from_millis(100)),
                notify_url: Some(format!("http://127.0.0.1:{}/v1/completions/casework", ports[1])),
                ..CaseworkConfig::default()
            },
            ..SimConfig::default()
        })
        .await;
        slow_down(&sims).await;
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
        let logs: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("p{i}.log"))).collect();
        let first = Serve::spawn(&runtimes[0], &logs[0]);
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let client = authorized_client(Duration::from_secs(30));
        assert!(ready(&client, &urls[0]).await, "{} did not become ready:\n{}", urls[0], read(&logs[0]));
        let mut pair = Pair { db, sims, dir, urls, logs, runtimes, first, second: None, client };
        if when == Second::Beside {
            pair.start_second().await;
        }
        pair.admit_all(&project).await;
        pair
    }

    /// Starts the second process and waits until it is ready.
    async fn start_second(&mut self) {
        self.second = Some(Serve::spawn(&self.runtimes[1], &self.logs[1]));
        assert!(
            ready(&self.client, &self.urls[1]).await,
            "{} did not become ready:\n{}",
            self.urls[1],
            read(&self.logs[1])
        );
    }

    /// Admits [`RUNS`] runs through the first process.
    async fn admit_all(&self, project: &Path) {
        let (bytes, _) = deploy::package_of(project);
        let revision =
            coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision;
        let mut admissions = tokio::task::JoinSet::new();
        for i in 0..RUNS {
            let (client, url, revision) = (self.client.clone(), self.urls[0].clone(), revision.clone());
            admissions.spawn(async move {
                let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": format!("drain-{i}"), "input": sample_input()});
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

    /// The first process's lease owner id, from its `serving` log line.
    fn first_owner(&self) -> String {
        json_lines(&self.logs[0])
            .iter()
            .find(|l| l["message"] == "serving")
            .and_then(|l| l["owner"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no serving line:\n{}", read(&self.logs[0])))
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

    /// Runs by state, counted through the second process's list API.
    async fn states(&self) -> std::collections::BTreeMap<String, usize> {
        let mut states = std::collections::BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/runs?limit=500", self.urls[1]);
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let page: Value = match self.client.get(url).send().await {
                Ok(r) => r.json().await.unwrap_or(Value::Null),
                Err(e) => panic!("listing runs: {e}"),
            };
            for run in page["runs"].as_array().into_iter().flatten() {
                *states.entry(run["state"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
            }
            match page["next"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return states,
            }
        }
    }

    /// Waits until no run is `running` or `cancel-requested`; returns the states.
    async fn settled(&self) -> std::collections::BTreeMap<String, usize> {
        let started = Instant::now();
        loop {
            let states = self.states().await;
            let moving =
                states.get("running").copied().unwrap_or(0) + states.get("cancel-requested").copied().unwrap_or(0);
            if moving == 0 && states.values().sum::<usize>() == RUNS {
                return states;
            }
            assert!(started.elapsed() < GUARD, "runs still moving: {states:?}\n{}", read(&self.logs[1]));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every mutation key reached its product once and acted once; the registry was read once per run.
    fn one_effect_per_key(&self) {
        for (product, effects) in
            [("casework", self.sims.sims.casework.effects()), ("messaging", self.sims.sims.messaging.effects())]
        {
            let keyed: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some()).collect();
            assert_eq!(keyed.len(), RUNS, "{product}: one key per run");
            let twice: Vec<_> = keyed.iter().filter(|e| e.effects != 1).collect();
            assert!(twice.is_empty(), "{product}: acted more than once: {twice:?}");
        }
    }
}

/// Every operation of the flagship answers after [`SLOW_SECONDS`] (its effect happens at once).
async fn slow_down(sims: &SimServer) {
    for (product, operation) in
        [("breg", "read-record/v1"), ("casework", "submit-review-request/v1"), ("messaging", "submit-message/v1")]
    {
        let fault = json!({"operation": operation, "fault": "timeout", "delaySeconds": SLOW_SECONDS, "count": 100_000});
        let (status, body) = support::post(&format!("{}/sim/{product}/v1/faults", sims.base), &fault).await;
        assert_eq!(status, 200, "{body}");
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
        assert_eq!(pair.leased_by(&pair.first_owner()).await, 0, "rows still leased by the stopped process");

        let states = pair.settled().await;
        assert_eq!(
            states.get("finished").copied(),
            Some(RUNS),
            "every run finishes, none needs an operator: {states:?}"
        );
        pair.one_effect_per_key();
        for (product, effects) in
            [("casework", pair.sims.sims.casework.effects()), ("messaging", pair.sims.sims.messaging.effects())]
        {
            let resent: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some() && e.requests != 1).collect();
            assert!(resent.is_empty(), "{product}: a drained request was sent again: {resent:?}");
        }
        let reads: u64 = pair.sims.sims.breg.effects().iter().map(|e| e.requests).sum();
        assert_eq!(reads, RUNS as u64, "the registry is read once per run");
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
            let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": "drain-2", "input": sample_input()});
            let admission = client
                .post(format!("{url}/v1/runs"))
                .bearer_auth(support::TOKEN)
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
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sims = sim_server(SimConfig::default()).await;
        let port = deploy::free_port();
        let url = format!("http://127.0.0.1:{port}");
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.listen = format!("127.0.0.1:{port}");
        let runtime = spec.write(dir.path());
        process::migrate(&runtime);
        let serve = Serve::spawn(&runtime, &dir.path().join("serve.log"));
        let client = reqwest::Client::new();
        assert!(ready(&client, &url).await, "{}", read(&serve.log));
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
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let port = deploy::free_port();
        let log = dir.path().join("dev.log");
        let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        let err = out.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["dev", "--log-format", "json", "--listen", &format!("127.0.0.1:{port}"), "--project"])
            .arg(support::repo().join("examples/reviewed-notice"))
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::from(out))
            .stderr(std::process::Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let client = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}");
        assert!(ready(&client, &url).await, "{}", read(&log));
        let sent = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        assert!(sent.is_ok_and(|s| s.success()));
        let started = Instant::now();
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break status;
            }
            assert!(started.elapsed() < GUARD, "coordinator dev did not exit:\n{}", read(&log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
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
