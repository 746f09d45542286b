//! Chaos, sized for CI: two `coordinator serve` processes on one PostgreSQL
//! database, [`RUNS`] runs admitted through either, [`KILLS`] SIGKILLs of one
//! or the other at points a deterministic schedule picks (each process started
//! again at once), and product faults queued before every kill — `503`s,
//! answers lost after the effect, requests lost, answers too late — on the
//! flagship's two mutations. Checked only from the outside, as an operator
//! would: every idempotency key admitted exactly one run; once the runs a kill
//! or a fault left in `attention` are settled (`reconcile` where a receipt can
//! tell, else `retry-same`), every run reached `notice-sent`; each product saw
//! exactly one effect per key; nothing is left running; the audit journal
//! verifies from end to end.
//!
//! The simulators live in the test process, so they outlive every kill.
//!
//! The bench mode is the same test, larger, by environment variables:
//! `CHAOS_RUNS=10000 CHAOS_KILLS=100 CHAOS_FAULTS=500 CHAOS_PG_RESTARTS=5
//! cargo test --release -p coordinator --test it -- chaos:: --nocapture`
//! (`CHAOS_PG_RESTARTS` restarts the local PostgreSQL cluster with
//! `pg_ctlcluster`, spread over the kills: every other test using that
//! cluster would see it go away, so the bench mode runs this test alone, by
//! the filter `chaos::`); it prints what it did.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use coordinator_core::audit;
use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, eager_flagship, free_ports, package_of, sims};
use crate::support::effects::one_effect_per_key;
use crate::support::kills::{Schedule, admit_through, get_any, settle};
use crate::support::process::{self, Process};
use crate::support::{authorized_client, fault, on_runtime, pg, tempdir, whole_journal};

/// Runs admitted in all (CI size; `CHAOS_RUNS`).
const RUNS: usize = 200;
/// Times a process is killed (`CHAOS_KILLS`).
const KILLS: usize = 12;
/// Product faults queued in all, spread over the kills (`CHAOS_FAULTS`).
const FAULT_COUNT: usize = 24;

/// How large a run of the test is.
struct Sizes {
    runs: usize,
    kills: usize,
    faults: usize,
    pg_restarts: usize,
}

impl Sizes {
    fn from_env() -> Sizes {
        let var = |name: &str, default: usize| {
            std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|e| panic!("{name}={v}: {e}")))
        };
        Sizes {
            runs: var("CHAOS_RUNS", RUNS),
            kills: var("CHAOS_KILLS", KILLS).max(1),
            faults: var("CHAOS_FAULTS", FAULT_COUNT),
            pg_restarts: var("CHAOS_PG_RESTARTS", 0),
        }
    }
}

/// Restarts the local PostgreSQL cluster (bench mode) and waits until it answers.
fn restart_postgres() {
    let version = std::fs::read_dir("/etc/postgresql")
        .unwrap_or_else(|e| panic!("/etc/postgresql: {e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .max()
        .unwrap_or_else(|| panic!("no PostgreSQL cluster in /etc/postgresql"));
    let restarted = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .unwrap_or_else(|e| panic!("pg_ctlcluster: {e}"));
    assert!(restarted.success(), "pg_ctlcluster restart failed");
    for _ in 0..600 {
        let ready = Command::new("pg_isready").args(["-h", "127.0.0.1", "-p", "5432", "-q"]).status();
        if ready.is_ok_and(|s| s.success()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("PostgreSQL did not come back after a restart");
}
/// The faults queued before each kill, on one of the two mutations.
const FAULTS: [&str; 4] = ["unavailable", "drop-response-after-effect", "drop-request", "timeout"];
const MUTATIONS: [(&str, &str); 2] = [("casework", "submit-review-request/v1"), ("messaging", "submit-message/v1")];

/// One of the two processes: its runtime file, URL and the child.
struct Server {
    runtime: PathBuf,
    url: String,
    process: Process,
}

impl Server {
    fn start(runtime: PathBuf, url: String, log: PathBuf) -> Server {
        let process = Process::serve(&runtime, &log);
        Server { runtime, url, process }
    }

    /// SIGKILL, and the process started again at once (its log goes on).
    fn kill_and_restart(&mut self) {
        self.process.kill();
        self.process = Process::serve(&self.runtime, &self.process.log);
    }

    /// Waits until the process answers `/healthz`, starting it again if it
    /// exited meanwhile (a start while the database restarts gives up, as a
    /// supervisor would see it do).
    async fn healthy(&mut self, client: &reqwest::Client) {
        for _ in 0..1200 {
            if !self.process.running() {
                self.process = Process::serve(&self.runtime, &self.process.log);
            }
            if let Ok(r) = client.get(format!("{}/healthz", self.url)).send().await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("coordinator serve did not become healthy at {}:\n{}", self.url, process::read(&self.process.log));
    }
}

#[test]
fn two_processes_killed_and_faulted_lose_nothing_and_repeat_no_effect() {
    on_runtime(async {
        let dir = tempdir();
        let db = pg::database().await;
        let ports = free_ports::<2>();
        let urls = ports.map(|p| format!("http://127.0.0.1:{p}"));
        let sims = sims(Some(Duration::from_millis(100)), Some(&urls[0])).await;
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.project = eager_flagship(dir.path());
        spec.connect_seconds = 1;
        spec.request_seconds = 1;
        let runtimes = spec.write_each(dir.path(), &ports);
        let revision = package_of(&spec.project).revision;
        process::migrate(&runtimes[0]);

        let client = authorized_client(Duration::from_secs(5));
        let mut servers: Vec<Server> = runtimes
            .iter()
            .zip(&urls)
            .enumerate()
            .map(|(n, (runtime, url))| {
                Server::start(runtime.clone(), url.clone(), dir.path().join(format!("p{n}.log")))
            })
            .collect();
        for server in &mut servers {
            server.healthy(&client).await;
        }
        let sizes = Sizes::from_env();
        let started = std::time::Instant::now();
        let mut schedule = Schedule(0x2545_f491_4f6c_dd1d);
        let mut admissions = Vec::new();
        let per_round = sizes.runs.div_ceil(sizes.kills);
        let (mut faults_queued, mut pg_restarted) = (0_usize, 0_usize);
        for round in 0..sizes.kills {
            for i in round * per_round..((round + 1) * per_round).min(sizes.runs) {
                // Alternately through one process first, then the other.
                let order = vec![urls[i % 2].clone(), urls[(i + 1) % 2].clone()];
                admissions.push(tokio::spawn(admit_through(
                    client.clone(),
                    order,
                    revision.clone(),
                    format!("chaos-{i}"),
                )));
            }
            // This round's share of the faults (each queued for one call, or a few).
            let due = (round + 1) * sizes.faults / sizes.kills;
            while faults_queued < due {
                let (product, operation) = MUTATIONS[schedule.pick(MUTATIONS.len())];
                let kind = FAULTS[schedule.pick(FAULTS.len())];
                let count = (1 + schedule.pick(3)).min(due - faults_queued);
                fault(&sims.base, product, json!({"operation": operation, "fault": kind, "count": count})).await;
                faults_queued += count;
            }
            if pg_restarted < (round + 1) * sizes.pg_restarts / sizes.kills {
                tokio::task::spawn_blocking(restart_postgres).await.unwrap_or_else(|e| panic!("restart: {e}"));
                pg_restarted += 1;
            }
            tokio::time::sleep(Duration::from_millis(50 + schedule.next(700))).await;
            servers[schedule.pick(2)].kill_and_restart();
            for server in &mut servers {
                server.healthy(&client).await;
            }
        }
        let mut runs = Vec::new();
        for admission in admissions {
            runs.push(admission.await.unwrap_or_else(|e| panic!("admission task: {e}")));
        }
        runs.sort();
        runs.dedup();
        assert_eq!(runs.len(), sizes.runs, "one run per idempotency key");

        // Let every run end; settle the ones a kill or a fault left with an
        // unknown effect. Only runs not ended yet are looked at again.
        let mut states: BTreeMap<String, Value> = BTreeMap::new();
        let mut pending: Vec<String> = runs.clone();
        let mut settled = 0_usize;
        for _ in 0..1200 + sizes.runs / 2 {
            let mut still = Vec::new();
            for run in pending {
                match get_any(&client, &urls, &format!("/v1/runs/{run}")).await {
                    Some(v) if v["state"] != "running" && v["state"] != "attention" => {
                        states.insert(run, v);
                    }
                    Some(v) => {
                        if v["state"] == "attention" && settle(&client, &urls, &run).await {
                            settled += 1;
                        }
                        states.insert(run.clone(), v);
                        still.push(run);
                    }
                    None => still.push(run),
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(pending.is_empty(), "{} runs never ended: {pending:?}", pending.len());
        let unfinished: Vec<&Value> = states.values().filter(|v| v["outcome"] != "notice-sent").collect();
        let logs: String = servers.iter().map(|s| process::read(&s.process.log)).collect();
        assert!(unfinished.is_empty(), "{} runs did not reach notice-sent: {unfinished:?}\n{logs}", unfinished.len());
        one_effect_per_key(&sims.sims, sizes.runs);
        // The faults (an answer lost after the effect, at the least) left runs for an operator.
        assert!(settled > 0, "the chaos left nothing to settle: it tested nothing uncertain");
        let (entries, head) = whole_journal(1000, |page| {
            let (client, urls) = (&client, &urls);
            async move { get_any(client, urls, &page).await.unwrap_or_else(|| panic!("no process answered GET {page}")) }
        })
        .await;
        let verified = audit::verify(&entries, &head).unwrap_or_else(|e| panic!("the journal does not verify: {e}"));
        assert!(
            verified.checked >= u64::try_from(sizes.runs * 10).unwrap_or(0),
            "{} entries checked",
            verified.checked
        );
        println!(
            "chaos: {} runs, {} kills, {faults_queued} faults, {pg_restarted} PostgreSQL restarts, {settled} operator commands \
             sent, {} journal entries verified, in {:.0} s",
            sizes.runs,
            sizes.kills,
            verified.checked,
            started.elapsed().as_secs_f64()
        );
        drop(servers);
        drop(db);
    });
}
